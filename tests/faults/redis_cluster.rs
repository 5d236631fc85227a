//! Redis Cluster (issue 7): a real cluster of Debian `redis-server` nodes on free loopback
//! ports (`--cluster-enabled yes`, created with `redis-cli --cluster create`).
//!
//! * `RESQ_CLUSTER=1` turns a plain `redis://` URL into cluster mode; a worker on a `{…}`
//!   namespace runs jobs, keeps every key on the slot owner, and its idle queue watcher blocks
//!   on that node. (A namespace without a tag is spread over the slots: `spread_drain.rs`.)
//! * 3 masters + 3 replicas: the master owning the namespace's slot is SIGKILLed mid-run of
//!   5,000 jobs (the audit of [`support::failover`]); the worker follows the slot to the
//!   promoted replica (shared connection and blocking watcher), drains the queue and accounts
//!   for every job. Prints one `CLUSTER` line with the audit numbers and the time from the
//!   master's death to the promotion and to the first job processed on the new owner.
//! * The namespace's slot moved to another master mid-drain (resharding): no job lost or run
//!   twice, no call failed (each waited for the move), and a call made while the slot is
//!   `MIGRATING` writes nothing before it is asked again.
//! * The CLI's commands and the dashboard's pages on a cluster namespace.
//! * Split queues: the shards' keys in the naming rule's slots, spread over the masters (a
//!   namespace without a tag); `resq split`, the client and a worker draining every shard on
//!   a tagged namespace.

use crate::support;

use super::spread_common::{dashboard, http_get, resq};

use redis::Commands;
use std::process::Command;
use std::time::Instant;
use support::failover::{self, KILL_AT, TOTAL, UPFRONT};
use support::topology::{self, Cluster, Migration, Node};
use support::{wait_until, WorkerProc};

/// Fails the test unless the cluster's tools are installed.
fn require_tools() {
    topology::require("redis-server", "redis-server");
    topology::require("redis-cli", "redis-tools");
}

/// Whether `node` has a client blocked in `BLMOVE` (a queue watcher).
fn has_blocked_watcher(node: &Node) -> bool {
    node.try_con()
        .and_then(|mut c| {
            redis::cmd("CLIENT")
                .arg("LIST")
                .query::<String>(&mut c)
                .ok()
        })
        .is_some_and(|list| list.lines().any(|l| l.contains("cmd=blmove")))
}

#[test]
fn hash_tagged_namespace_runs_on_its_slot_owner() {
    require_tools();
    let root = topology::temp_dir("cluster-basic");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(2);

    let rt = tokio::runtime::Runtime::new().expect("runtime");

    // Tagged, with RESQ_CLUSTER=1 on a plain redis:// URL of one seed node.
    let ns = format!("{{{}}}", support::namespace("cluster"));
    let plain_url = cluster.nodes[1].url();
    let mut w = WorkerProc::start(&plain_url, &ns, 3, &[("RESQ_CLUSTER", "1")]);
    let owner = cluster.owner(&ns).expect("slot owner");
    rt.block_on(async {
        let options = resq::conn::RedisOptions::from_lookup(|k| {
            (k == "RESQ_CLUSTER").then(|| "1".to_string())
        })
        .expect("options");
        let endpoint = resq::conn::Endpoint::with_options(&plain_url, &options).expect("endpoint");
        assert_eq!(endpoint.deployment(), resq::conn::Deployment::Cluster);
        let client =
            resq::Client::with_connection(endpoint.connect().await.expect("connect"), ns.as_str());
        for i in 0..200 {
            client
                .push_raw("default", &failover::payload(i))
                .await
                .expect("enqueue");
        }
    });
    let echo = format!("{ns}:compat:echo");
    wait_until(30, "200 echoes", || {
        let mut c = owner.try_con()?;
        (c.llen::<_, usize>(&echo).ok()? == 200).then_some(())
    });
    // Idle now: the watcher blocks on the node that owns the slot.
    wait_until(10, "a watcher blocked on the slot owner", || {
        has_blocked_watcher(owner).then_some(())
    });
    // Every key of the namespace is on the owner (one slot).
    let mut c = owner.con();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{ns}:*"))
        .query(&mut c)
        .expect("keys");
    for k in [
        format!("{ns}:workers"),
        format!("{ns}:stat:processed"),
        echo.clone(),
        format!("{ns}:workers:heartbeat"),
    ] {
        assert!(keys.contains(&k), "{k} not on the slot owner: {keys:?}");
    }
    let info = Command::new(support::resq_bin())
        .args(["--url", &url, "--namespace", &ns, "--json", "info"])
        .output()
        .expect("resq info");
    assert!(
        info.status.success(),
        "resq info on a cluster URL failed: {}",
        String::from_utf8_lossy(&info.stderr)
    );
    w.signal("QUIT");
    let status = w.wait_exit(20);
    assert!(
        status.success(),
        "worker exited with {status}:\n{}",
        w.stderr()
    );
    let members: Vec<String> = c.smembers(format!("{ns}:workers")).expect("workers");
    assert!(members.is_empty(), "workers left registered: {members:?}");
}

#[test]
fn slot_owner_failover_mid_run_is_followed_and_every_job_is_accounted_for() {
    require_tools();
    let root = topology::temp_dir("cluster-failover");
    let cluster = Cluster::start(&root, 3, 1);
    let url = cluster.url(3);
    let ns = format!("{{{}}}", support::namespace("cluster-failover"));
    let owner = cluster.owner(&ns).expect("slot owner");

    let mut con = owner.con();
    failover::enqueue_upfront(&mut con, &ns);
    let synced: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query(&mut con)
        .expect("WAIT");
    assert_eq!(synced, 1, "the replica did not take the first jobs");
    drop(con);

    let mut w = WorkerProc::start(&url, &ns, 4, &[("HEARTBEAT_INTERVAL", "1")]);
    let started = Instant::now();
    let (producer, produced) = failover::produce(&url, &ns, &[]);
    failover::wait_kill_point(owner, &ns);
    let rate = KILL_AT as f64 / started.elapsed().as_secs_f64();

    let killed_at = Instant::now();
    owner.kill9();
    let (promoted, new_owner) = wait_until(60, "the slot's replica to be promoted", || {
        let n = cluster.owner(&ns)?;
        (n.port != owner.port).then(|| (killed_at.elapsed(), n))
    });
    let first_job = failover::first_job_after(new_owner, &ns, killed_at);
    assert!(
        w.running(),
        "worker exited during the failover:\n{}",
        w.stderr()
    );
    producer.join().expect("producer");

    let ids = w.ids.clone();
    failover::wait_drained(new_owner, &ns, &ids);
    // The idle watcher followed the slot: it blocks on the new owner.
    wait_until(15, "a watcher blocked on the new owner", || {
        has_blocked_watcher(new_owner).then_some(())
    });

    failover::quit_cleanly(&mut w);

    let a = {
        let p = produced.lock().expect("lock");
        failover::audit(&mut new_owner.con(), &ns, &p)
    };
    println!(
        "CLUSTER failover: {} promoted_after_ms={} first_job_on_new_owner_after_ms={} \
         rate_before_kill={rate:.0}/s",
        a.line(),
        promoted.as_millis(),
        first_job.as_millis(),
    );
    if !a.problems.is_empty() {
        println!("CLUSTER failover problems: {:#?}", a.problems);
    }
    assert_eq!(a.enqueued, TOTAL, "every tag was tried once");
    assert!(a.acked >= UPFRONT);
    assert_eq!(a.queued, 0, "the queue drained");
    // As with Sentinel, asynchronous replication may lose the last acknowledged writes; they
    // are printed above, and more than a handful means something else lost them.
    assert!(
        a.acked_lost + a.duplicates <= 50,
        "{} acknowledged jobs lost and {} found twice\n{:#?}",
        a.acked_lost,
        a.duplicates,
        a.problems
    );
}

#[test]
fn slot_migrated_mid_drain_loses_nothing_and_the_worker_follows() {
    require_tools();
    let root = topology::temp_dir("cluster-migrate");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(3);
    let ns = format!("{{{}}}", support::namespace("cluster-migrate"));
    let owner = cluster.owner(&ns).expect("slot owner");
    let target = cluster.other_master(owner);

    failover::enqueue_upfront(&mut owner.con(), &ns);
    let mut w = WorkerProc::start(&url, &ns, 4, &[("HEARTBEAT_INTERVAL", "1")]);
    let (producer, produced) = failover::produce(&url, &ns, &[]);
    failover::wait_kill_point(owner, &ns);

    // The slot stays MIGRATING for half a second before its keys move (a key created then
    // would be created on the old owner: every call must wait instead), then moves ten keys
    // every 20 ms, with the worker and the producer running throughout.
    let started = Instant::now();
    let mut m = Migration::begin(&ns, owner, target);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let moved = m.move_keys(std::time::Duration::from_millis(20));
    m.finish(&cluster);
    let migration = started.elapsed();
    assert!(
        w.running(),
        "worker exited during the migration:\n{}",
        w.stderr()
    );
    assert_eq!(
        cluster.owner(&ns).map(|n| n.port),
        Some(target.port),
        "the slot moved"
    );
    producer.join().expect("producer");
    let ids = w.ids.clone();
    failover::wait_drained(target, &ns, &ids);

    let log = failover::quit_cleanly(&mut w);
    // Every call met by the move waited for it: none failed (a failed step holds its slot for
    // up to 30 s, and a call that failed after a write would have left half a transition).
    let errors: Vec<&str> = log.lines().filter(|l| l.contains(" ERROR ")).collect();
    assert!(
        errors.is_empty(),
        "calls failed during the move:\n{}",
        errors.join("\n")
    );
    let a = {
        let p = produced.lock().expect("lock");
        failover::audit(&mut target.con(), &ns, &p)
    };
    println!(
        "CLUSTER migration: {} keys_moved={moved} migration_ms={}",
        a.line(),
        migration.as_millis()
    );
    assert_eq!(a.enqueued, TOTAL, "every tag was tried once");
    assert_eq!(
        a.in_doubt, 0,
        "an enqueue failed instead of waiting for the slot"
    );
    assert_eq!(a.queued, 0, "the queue drained");
    // No master died: nothing may be lost or run twice, whatever the migration met.
    assert_eq!(
        (a.acked_lost, a.duplicates),
        (0, 0),
        "jobs lost or run twice while the slot moved:\n{:#?}",
        a.problems
    );
    assert!(a.problems.is_empty(), "{:#?}", a.problems);
}

#[test]
fn a_call_on_a_moving_slot_writes_nothing_and_completes_once_the_slot_is_settled() {
    require_tools();
    let root = topology::temp_dir("cluster-moving");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(3);
    let ns = format!("{{{}}}", support::namespace("cluster-moving"));
    let owner = cluster.owner(&ns).expect("slot owner");
    let target = cluster.other_master(owner);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let client = rt.block_on(async {
        let endpoint = resq::conn::Endpoint::open(&url).expect("endpoint");
        let client =
            resq::Client::with_connection(endpoint.connect().await.expect("connect"), ns.as_str());
        // The library is loaded on the owner, the queue exists.
        client
            .enqueue_class_tracked("default", "Job", &[], resq::jobs::Track::new())
            .await
            .expect("first enqueue");
        client
    });
    let mut con = owner.con();
    let dbsize =
        |c: &mut redis::Connection| -> i64 { redis::cmd("DBSIZE").query(c).expect("DBSIZE") };
    let fcalls = |c: &mut redis::Connection| -> i64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(c)
            .expect("INFO");
        info.lines()
            .find_map(|l| l.strip_prefix("cmdstat_fcall:calls="))
            .and_then(|r| r.split(',').next()?.parse().ok())
            .unwrap_or(0)
    };
    let before = (dbsize(&mut con), fcalls(&mut con));

    // A tracked enqueue writes a record that does not exist yet: while the slot is MIGRATING,
    // the node would refuse that write after the call's first writes. The call must instead
    // be refused before anything is written, and asked again.
    let m = Migration::begin(&ns, owner, target);
    let call = rt.spawn({
        let client = client.clone();
        async move {
            client
                .enqueue_class_tracked("default", "Job", &[], resq::jobs::Track::new())
                .await
        }
    });
    wait_until(10, "the enqueue refused and asked again", || {
        (fcalls(&mut con) >= before.1 + 2).then_some(())
    });
    assert_eq!(dbsize(&mut con), before.0, "a refused call wrote something");
    assert!(
        !call.is_finished(),
        "the enqueue gave up while the slot was moving"
    );
    m.cancel();
    let id = rt
        .block_on(call)
        .expect("join")
        .expect("the enqueue completes once the slot is settled");
    let state: Option<String> = con
        .hget(format!("{ns}:resq:job:{id}"), "state")
        .expect("record");
    assert_eq!(state.as_deref(), Some("queued"));
    let queued: i64 = con.llen(format!("{ns}:queue:default")).expect("LLEN");
    assert_eq!(queued, 2, "each enqueue put its job once");
}

#[test]
fn the_cli_and_the_dashboard_work_on_a_cluster_namespace() {
    require_tools();
    let root = topology::temp_dir("cluster-tools");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(1);
    let ns = format!("{{{}}}", support::namespace("cluster-tools"));
    let resq = |args: &[&str]| resq(&url, &ns, args);
    resq(&["enqueue", "--queue", "a", "Plain", "1"]);
    let id = resq(&["enqueue", "--track", "--queue", "b", "Tracked", "2"]);
    let id = id.trim();
    assert_eq!(id.len(), 32, "{id}");
    assert!(resq(&["queues"]).contains('b'));
    assert!(resq(&["job", "show", id]).contains("queued"));
    assert!(resq(&["jobs"]).contains(id));
    assert!(resq(&["coverage"]).contains("Tracked"));
    for args in [
        &["info"][..],
        &["workers"],
        &["failed", "list"],
        &["delayed", "list"],
        &["batches"],
        &["limits", "list"],
        &["schedule", "list"],
        &["prune"],
        &["pause"],
        &["resume"],
    ] {
        resq(args);
    }

    // (The guard stops the dashboard when it is dropped, or when this process dies.)
    let (web, port) = dashboard(&url, &ns);
    for page in [
        "/overview",
        "/queues",
        "/queue?name=b",
        "/workers",
        "/failed",
        "/delayed",
        "/stats",
        "/jobs",
        "/jobs?state=queued",
        &format!("/job?id={id}"),
        "/batches",
        "/limits",
        "/waiting",
    ] {
        let (code, body) = http_get(port, page).expect("an answer");
        assert_eq!(code, 200, "{page}: {body}");
    }
    let (_, body) = http_get(port, "/jobs?state=queued").expect("an answer");
    assert!(body.contains(id), "{body}");
    drop(web);
}

/// Split queues (docs/cluster.md): on a namespace without a hash tag, the lists of a split
/// queue's shards sit in evenly spaced slots (`CLUSTER KEYSLOT` agrees with the naming rule)
/// and so on different masters: 3 shards on 3 masters, 6 shards two on each.
#[test]
fn a_split_queues_shards_land_on_different_masters() {
    require_tools();
    let root = topology::temp_dir("cluster-split");
    let cluster = Cluster::start(&root, 3, 0);
    let ns = support::namespace("cluster-split");
    for n in [3u32, 6] {
        let mut per_master: std::collections::HashMap<u16, usize> = Default::default();
        for (k, shard) in resq::splits::shard_names("video", n)
            .expect("shard names")
            .iter()
            .enumerate()
        {
            let key = support::Keys::new(ns.as_str()).queue(shard);
            let mut c = cluster.nodes[0].con();
            let slot: u64 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(&key)
                .query(&mut c)
                .expect("CLUSTER KEYSLOT");
            assert_eq!(
                slot,
                (2 * k as u64 + 1) * 16384 / (2 * u64::from(n)),
                "{key}"
            );
            let owner = cluster.owner(&key).expect("slot owner");
            // A job pushed there is on that master.
            let mut oc = owner.con();
            let _: () = oc
                .rpush(&key, "{\"class\":\"A\",\"args\":[]}")
                .expect("rpush");
            *per_master.entry(owner.port).or_default() += 1;
        }
        let mut counts: Vec<usize> = per_master.values().copied().collect();
        counts.sort();
        assert_eq!(
            counts,
            vec![n as usize / 3; 3],
            "{n} shards over the masters: {per_master:?}"
        );
    }
}

/// A split queue on a hash-tagged cluster namespace: `resq split` (its function on the slot's
/// master), the client's shard keys and round robin, and a worker given the queue draining
/// every shard, through the cluster client.
#[test]
fn a_split_queue_drains_on_a_tagged_cluster_namespace() {
    require_tools();
    let root = topology::temp_dir("cluster-split-tagged");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(2);
    let ns = format!("{{{}}}", support::namespace("cluster-split"));
    let out = Command::new(support::resq_bin())
        .args(["--url", &url, "--namespace", &ns, "split", "v", "4"])
        .output()
        .expect("resq split");
    assert!(
        out.status.success(),
        "resq split: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shards = resq::splits::shard_names("v", 4).expect("names");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let client = resq::Client::connect(&url, &ns).await.expect("client");
        for i in 0..100 {
            let job = resq::client::NewJob::new("Echo", vec![serde_json::json!(format!("j{i}"))]);
            let job = if i % 2 == 0 {
                job.shard_key(format!("k{}", i % 7))
            } else {
                job
            };
            client.enqueue_job("v", &job).await.expect("enqueue");
        }
    });
    let owner = cluster.owner(&ns).expect("slot owner");
    let mut c = owner.con();
    let mut on_shards = 0;
    for s in &shards {
        let n: usize = c.llen(format!("{ns}:queue:{s}")).expect("llen");
        assert!(n > 0, "{s} got no job");
        on_shards += n;
    }
    assert_eq!(on_shards, 100);
    let mut w = WorkerProc::start(&url, &ns, 3, &[("QUEUES", "v"), ("INTERVAL", "1")]);
    let echo = format!("{ns}:compat:echo");
    wait_until(60, "100 echoes", || {
        let mut c = owner.try_con()?;
        (c.llen::<_, usize>(&echo).ok()? == 100).then_some(())
    });
    for s in &shards {
        let n: usize = c.llen(format!("{ns}:queue:{s}")).expect("llen");
        assert_eq!(n, 0, "{s}");
    }
    w.signal("QUIT");
    let status = w.wait_exit(20);
    assert!(
        status.success(),
        "worker exited with {status}:\n{}",
        w.stderr()
    );
}
