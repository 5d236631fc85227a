//! A spread cluster namespace (no hash tag, docs/cluster.md) on a real 3-master cluster: queues
//! whose lists land on different masters are drained by one worker process, each queue's slots
//! keeping their worker records and stats in the queue's slot; the shared keys Ruby reads
//! (`<ns>:stat:processed|failed`, `<ns>:failed`, `<ns>:workers`) end right; a pause read from
//! `<ns>:pause-all-workers` stops reserves.

use crate::support;

use super::spread_common::{push, queue_per_master, quit_cleanly, require_tools};
use redis::Commands;
use support::topology::{self, Cluster, Node};
use support::{wait_until, WorkerProc};

/// Jobs per queue.
const JOBS: usize = 200;

/// The slot of `key`, asked of `node`.
fn keyslot(node: &Node, key: &str) -> i64 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut node.con())
        .expect("KEYSLOT")
}

/// A key's value read on its owner.
fn get<T: redis::FromRedisValue>(cluster: &Cluster, key: &str) -> T {
    cluster
        .owner(key)
        .expect("owner")
        .con()
        .get(key)
        .expect("GET")
}

#[test]
fn spread_namespace_drains_queues_on_every_master() {
    require_tools();
    let root = topology::temp_dir("cluster-spread");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(2);
    let ns = support::namespace("spread");
    let queues = queue_per_master(&cluster, &ns);
    for (n, (q, _)) in queues.iter().enumerate() {
        let payloads: Vec<String> = (0..JOBS)
            .map(|i| {
                let class = if i % 20 == 0 { "Fail" } else { "Echo" };
                // One job of the first queue carries resq's tracking id: it runs, untracked
                // (a spread namespace keeps no records), and the worker says so.
                if n == 0 && i == 1 {
                    return format!(
                        r#"{{"class":"{class}","args":["{q}",{i}],"resq_id":"t-spread"}}"#
                    );
                }
                format!(r#"{{"class":"{class}","args":["{q}",{i}]}}"#)
            })
            .collect();
        push(&cluster, &ns, q, &payloads);
    }
    let names: Vec<&str> = queues.iter().map(|(q, _)| q.as_str()).collect();
    let list = names.join(",");
    // Two slots per queue: six ids.
    let mut w = WorkerProc::start(
        &url,
        &ns,
        6,
        &[("CONCURRENCY", "2"), ("QUEUES", list.as_str())],
    );
    // Each slot's id carries its queue's tag: its record and stats share the queue's slot.
    for id in &w.ids {
        let q = id.rsplit(':').next().expect("queue field");
        let (_, owner) = queues
            .iter()
            .find(|(n, _)| n == q)
            .expect("a queue of ours");
        let qslot = keyslot(owner, &format!("{ns}:queue:{q}"));
        for key in [
            format!("{ns}:worker:{id}"),
            format!("{ns}:worker:{id}:started"),
            format!("{ns}:stat:processed:{id}"),
            format!("{ns}:resq:outbox:{id}"),
        ] {
            assert_eq!(keyslot(owner, &key), qslot, "{key} is not in {q}'s slot");
        }
        let started: Option<String> = owner
            .con()
            .get(format!("{ns}:worker:{id}:started"))
            .expect("GET");
        assert!(
            started.is_some(),
            "{id} not registered on its queue's master"
        );
    }
    let total = JOBS * queues.len();
    let fails = total / 20;
    let echo = format!("{ns}:compat:echo");
    wait_until(60, "every Echo job run", || {
        let n: usize = cluster.owner(&echo)?.con().llen(&echo).ok()?;
        (n == total - fails).then_some(())
    });
    assert!(
        w.stderr().contains("t-spread runs untracked"),
        "the untracked job was not reported:\n{}",
        w.stderr()
    );
    // The shared keys: counters (flushed every 200 ms), the failure entries (moved from the
    // slots' outboxes).
    let failed_list = format!("{ns}:failed");
    wait_until(30, "the shared counters and the failed list", || {
        let p: Option<usize> = get(&cluster, &format!("{ns}:stat:processed"));
        let f: Option<usize> = get(&cluster, &format!("{ns}:stat:failed"));
        let listed: usize = cluster.owner(&failed_list)?.con().llen(&failed_list).ok()?;
        (p == Some(total) && f == Some(fails) && listed == fails).then_some(())
    });
    let entry: String = cluster
        .owner(&failed_list)
        .expect("owner")
        .con()
        .lindex(&failed_list, 0)
        .expect("LINDEX");
    let e: serde_json::Value = serde_json::from_str(&entry).expect("failure entry JSON");
    assert_eq!(e["payload"]["class"], "Fail");
    assert!(
        e["worker"].as_str().is_some_and(|w| w.contains("~resq{")),
        "{e}"
    );
    for k in ["failed_at", "exception", "error", "backtrace", "queue"] {
        assert!(e.get(k).is_some(), "failure entry without {k}: {e}");
    }
    // Every queue's master served it: each has no job left and ran its queue's worker keys.
    for (q, owner) in &queues {
        let left: usize = owner.con().llen(format!("{ns}:queue:{q}")).expect("LLEN");
        assert_eq!(left, 0, "{q} not drained");
    }

    // A pause read from <ns>:pause-all-workers (every INTERVAL, 0.5 s) stops reserves: a job
    // pushed while paused stays queued after the queue's watcher saw it, and runs on resume.
    let pause = format!("{ns}:pause-all-workers");
    let _: () = cluster
        .owner(&pause)
        .expect("owner")
        .con()
        .set(&pause, "true")
        .expect("SET");
    wait_until(30, "the worker to read the pause", || {
        w.stderr().contains("paused=true").then_some(())
    });
    let (q0, owner0) = &queues[0];
    push(
        &cluster,
        &ns,
        q0,
        &[r#"{"class":"Echo","args":["paused",0]}"#.to_string()],
    );
    // (An absence cannot be awaited: three INTERVALs in which an unpaused worker, woken by the
    // push within milliseconds, would have taken it.)
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let queued: usize = owner0.con().llen(format!("{ns}:queue:{q0}")).expect("LLEN");
    assert_eq!(queued, 1, "a job was taken while paused");
    let before: usize = cluster
        .owner(&echo)
        .expect("owner")
        .con()
        .llen(&echo)
        .expect("LLEN");
    let _: i64 = cluster
        .owner(&pause)
        .expect("owner")
        .con()
        .del(&pause)
        .expect("DEL");
    wait_until(
        30,
        "the job pushed while paused, run after the pause",
        || {
            let n: usize = cluster.owner(&echo)?.con().llen(&echo).ok()?;
            (n == before + 1).then_some(())
        },
    );

    quit_cleanly(&cluster, &ns, &mut w);
    for id in &w.ids {
        let key = format!("{ns}:resq:outbox:{id}");
        let n: usize = cluster
            .owner(&key)
            .expect("owner")
            .con()
            .llen(&key)
            .expect("LLEN");
        assert_eq!(n, 0, "{key} not emptied");
    }
}

/// Ruby's producer on a spread namespace (Debian's ruby-redis 4.8 cluster client under
/// redis-namespace): `Resque.push`'s pipeline (`SADD` + `RPUSH`), whose keys are on two nodes,
/// is refused by that client; the two commands sent one after the other (docs/cluster.md's
/// recipe) push jobs a resq worker runs.
#[test]
fn a_ruby_cluster_client_pushes_with_the_recipe_and_resq_runs_the_jobs() {
    require_tools();
    topology::require("ruby", "ruby-redis");
    let root = topology::temp_dir("cluster-spread-ruby");
    let cluster = Cluster::start(&root, 3, 0);
    let ns = support::namespace("spread-ruby");
    let mut queues = queue_per_master(&cluster, &ns);
    // First a queue whose list is on another master than <ns>:queues (the pipeline then spans
    // two nodes).
    let set_owner = cluster.owner(&format!("{ns}:queues")).expect("owner").port;
    queues.sort_by_key(|(_, n)| n.port == set_owner);
    let names: Vec<&str> = queues.iter().map(|(q, _)| q.as_str()).collect();
    let seed = format!("redis://127.0.0.1:{}", cluster.nodes[0].port);
    let script = r##"
        require 'redis'
        require 'redis-namespace'
        require 'json'
        seed, ns, *queues = ARGV
        redis = Redis::Namespace.new(ns, redis: Redis.new(cluster: [seed]))
        # Resque.push as Resque's data store writes it: refused across slots by this client.
        begin
          redis.pipelined do |p|
            p.sadd('queues', [queues[0]])
            p.rpush("queue:#{queues[0]}", JSON.generate('class' => 'Echo', 'args' => ['never']))
          end
          puts 'pipelined: accepted'
        rescue Redis::Cluster::CrossSlotPipeliningError
          puts 'pipelined: refused'
        end
        # The recipe: the same two commands, one after the other.
        def push(redis, queue, item)
          redis.sadd('queues', [queue])
          redis.rpush("queue:#{queue}", JSON.generate(item))
        end
        queues.each do |q|
          50.times { |i| push(redis, q, 'class' => 'Echo', 'args' => ["#{q}-#{i}"]) }
        end
    "##;
    let mut args = vec![
        "-W0".to_string(),
        "-e".into(),
        script.into(),
        seed,
        ns.clone(),
    ];
    args.extend(names.iter().map(|s| s.to_string()));
    let out = std::process::Command::new("ruby")
        .args(&args)
        .output()
        .expect("ruby runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("pipelined: refused"), "{stdout}");
    let list = names.join(",");
    let mut w = WorkerProc::start(
        &cluster.url(2),
        &ns,
        names.len(),
        &[("CONCURRENCY", "1"), ("QUEUES", list.as_str())],
    );
    let echo = format!("{ns}:compat:echo");
    wait_until(60, "every Ruby job run", || {
        let n: usize = cluster.owner(&echo)?.con().llen(&echo).ok()?;
        (n == 50 * names.len()).then_some(())
    });
    quit_cleanly(&cluster, &ns, &mut w);
}

/// A process given queues on three masters runs `CONCURRENCY` slots for each queue, and at
/// most `CONCURRENCY` jobs at once over them all, handing its turn on between the queues: every
/// queue's jobs run, and the number running at once reaches the bound and never passes it.
#[test]
fn slots_for_every_queue_run_at_most_concurrency_jobs_at_once() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    require_tools();
    let root = topology::temp_dir("cluster-spread-bound");
    let cluster = Cluster::start(&root, 3, 0);
    let ns = support::namespace("spread-bound");
    let names: Vec<String> = queue_per_master(&cluster, &ns)
        .into_iter()
        .map(|(q, _)| q)
        .collect();
    const PER_QUEUE: usize = 20;
    const CONCURRENCY: usize = 2;
    for q in &names {
        let jobs: Vec<String> = (0..PER_QUEUE)
            .map(|i| format!(r#"{{"class":"Hold","args":["{q}",{i}]}}"#))
            .collect();
        push(&cluster, &ns, q, &jobs);
    }
    #[derive(Default)]
    struct Gauge {
        now: AtomicUsize,
        max: AtomicUsize,
        done: AtomicUsize,
    }
    let gauge = Arc::new(Gauge::default());
    let g = gauge.clone();
    let registry = resq::Registry::new().handler("Hold", move |_ctx: resq::JobContext| {
        let g = g.clone();
        async move {
            let n = g.now.fetch_add(1, SeqCst) + 1;
            g.max.fetch_max(n, SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
            g.now.fetch_sub(1, SeqCst);
            g.done.fetch_add(1, SeqCst);
            Ok(())
        }
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let worker = resq::Worker::builder()
            .redis_url(cluster.url(2))
            .namespace(ns.as_str())
            .queues(&names.join(","))
            .expect("queues")
            .concurrency(CONCURRENCY)
            .registry(registry)
            .build()
            .expect("config")
            .start()
            .await
            .expect("start");
        assert_eq!(worker.ids().len(), CONCURRENCY * names.len());
        let total = PER_QUEUE * names.len();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
        while gauge.done.load(SeqCst) < total {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} of {total} jobs ran",
                gauge.done.load(SeqCst)
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        worker.stop(resq::Phase::Quit);
        worker.wait().await.expect("clean exit");
    });
    assert_eq!(
        gauge.max.load(SeqCst),
        CONCURRENCY,
        "jobs running at once over the process's queues"
    );
}

/// Step calls (`FCALL`s) a node has run since it started.
fn fcalls(node: &Node) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut node.con())
        .expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_fcall:calls="))
        .and_then(|r| r.split(',').next())
        .map_or(0, |n| n.parse().expect("calls"))
}

/// An idle queue costs nothing while another queue of the same process drains: the busy
/// queue's wake-ups (its watcher, a call that found more) wake its own slots only, and the
/// periodic reserve leaves a queue its watcher blocks on alone, so the idle queue's master sees
/// no step call from the drain's start to its end.
#[test]
fn a_busy_queue_never_wakes_an_idle_queues_slots() {
    require_tools();
    let root = topology::temp_dir("cluster-spread-lanes");
    let cluster = Cluster::start(&root, 3, 0);
    let ns = support::namespace("spread-lanes");
    let queues = queue_per_master(&cluster, &ns);
    let (busy, idle) = (&queues[0], &queues[1]);
    const JOBS: usize = 3000;
    let jobs: Vec<String> = (0..JOBS)
        .map(|i| format!(r#"{{"class":"Noop","args":[{i}]}}"#))
        .collect();
    let list = format!("{},{}", busy.0, idle.0);
    // A short INTERVAL: the periodic reserve runs many times over the drain, and leaves a queue
    // its watcher blocks on alone.
    let mut w = WorkerProc::start(
        &cluster.url(2),
        &ns,
        8,
        &[
            ("CONCURRENCY", "4"),
            ("QUEUES", list.as_str()),
            ("INTERVAL", "0.5"),
        ],
    );
    // The idle queue's slots have made their first (empty) reserve and parked: its watcher
    // (started once a slot of its queue parks) blocks on its master.
    wait_until(30, "the idle queue's watcher blocking", || {
        let clients: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut idle.1.con())
            .ok()?;
        clients.contains("cmd=blmove").then_some(())
    });
    let before = fcalls(idle.1);
    push(&cluster, &ns, &busy.0, &jobs);
    let processed = format!("{ns}:stat:processed");
    wait_until(120, "the busy queue drained", || {
        let v: Option<usize> = cluster.owner(&processed)?.con().get(&processed).ok()?;
        (v.unwrap_or(0) >= JOBS).then_some(())
    });
    let after = fcalls(idle.1);
    quit_cleanly(&cluster, &ns, &mut w);
    assert_eq!(
        after - before,
        0,
        "step calls on the idle queue's master while the other queue drained"
    );
}
