//! Redis Cluster (issue 7): a real cluster of Debian `redis-server` nodes on free loopback
//! ports (`--cluster-enabled yes`, created with `redis-cli --cluster create`).
//!
//! * A namespace without a hash tag is refused with a clear error by the worker, the CLI and
//!   the client; `RESQ_CLUSTER=1` turns a plain `redis://` URL into cluster mode; a worker on a
//!   `{…}` namespace runs jobs, keeps every key on the slot owner, and its idle queue watcher
//!   blocks on that node.
//! * 3 masters + 3 replicas: the master owning the namespace's slot is SIGKILLed mid-run of
//!   5,000 jobs (the audit of [`support::failover`]); the worker follows the slot to the
//!   promoted replica (shared connection and blocking watcher), drains the queue and accounts
//!   for every job. Prints one `CLUSTER` line with the audit numbers and the time from the
//!   master's death to the promotion and to the first job processed on the new owner.

use crate::support;

use redis::Commands;
use std::process::Command;
use std::time::Instant;
use support::failover::{self, KILL_AT, TOTAL, UPFRONT};
use support::topology::{self, Cluster, Node};
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
fn hash_tagged_namespace_runs_and_untagged_is_refused() {
    require_tools();
    let root = topology::temp_dir("cluster-basic");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(2);

    // Untagged: the worker, the CLI and the client all refuse it before touching Redis.
    let plain = support::namespace("cluster-plain");
    let out = Command::new(support::example_bin("compat_worker"))
        .env("REDIS_URL", &url)
        .env("RESQUE_NAMESPACE", &plain)
        .env("QUEUES", "default")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("compat_worker");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "an untagged namespace was accepted");
    assert!(
        err.contains("RESQUE_NAMESPACE") && err.contains("hash tag"),
        "unclear error: {err}"
    );
    let out = Command::new(support::resq_bin())
        .args(["--url", &url, "--namespace", &plain, "info"])
        .output()
        .expect("resq info");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("hash tag"),
        "CLI: {err}"
    );
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let e = rt
        .block_on(resq::Client::connect(&url, &plain))
        .err()
        .expect("client accepted an untagged namespace")
        .to_string();
    assert!(e.contains("hash tag"), "client: {e}");

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
