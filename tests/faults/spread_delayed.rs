//! Delayed jobs, the scheduler and recurring schedules on a namespace spread over a real
//! 3-master cluster (no hash tag, docs/cluster.md): resque-scheduler's keys stay where and as
//! Ruby reads them, each in the slot its own name hashes to, and every transition is a row of
//! single-slot steps that may enqueue a due job twice, never lose it.
//!
//! * Due and later delayed jobs of queues on every master are moved by a worker's scheduler
//!   (`RESQ_SCHEDULER=1`) and run; nothing of the delayed set is left.
//! * The bytes of `delayed:<ts>`, `timestamps:<item>` and `delayed_queue_schedule` are those
//!   the same enqueues write on a hash-tagged namespace (one slot, one atomic step).
//! * The crash windows: a mover that pushed a bucket's jobs and died before taking the items
//!   out, one that took them out and died before the zset member, a producer that died before
//!   its `ZADD`: the next ticks converge, every job on its queue at least once.
//! * Producers pushing to one due second while the scheduler moves it: nothing orphaned.
//! * A recurring schedule fires on the spread namespace; the dashboard's delayed actions and
//!   the stored schedules' admin work there.

use crate::support;

use super::spread_common::{queue_per_master, quit_cleanly, require_tools, resq};
use redis::Commands;
use resq::client::Scheduled;
use resq::scheduler::{Scheduler, SchedulerConfig};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use support::topology::{self, Cluster, Node};
use support::{wait_until, WorkerProc};

/// The slot of `key`, asked of `node`.
fn keyslot(node: &Node, key: &str) -> i64 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut node.con())
        .expect("KEYSLOT")
}

/// A connection to the master that owns `key`'s slot.
fn on_owner(cluster: &Cluster, key: &str) -> redis::Connection {
    cluster.owner(key).expect("an owner").con()
}

/// Every key of the cluster whose name starts with `prefix`, without the prefix.
fn keys_under(cluster: &Cluster, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for n in &cluster.nodes {
        let found: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}*"))
            .query(&mut n.con())
            .expect("KEYS");
        out.extend(found.into_iter().map(|k| k[prefix.len()..].to_string()));
    }
    out
}

/// The delayed set's keys of `ns` left anywhere: buckets, reverse indexes, the zset (not
/// `delayed:last_enqueued_at`, recurring schedules' record).
fn delayed_keys(cluster: &Cluster, ns: &str) -> BTreeSet<String> {
    keys_under(cluster, &format!("{ns}:"))
        .into_iter()
        .filter(|k| {
            (k.starts_with("delayed:") && k != "delayed:last_enqueued_at")
                || k.starts_with("timestamps:")
                || k == "delayed_queue_schedule"
        })
        .collect()
}

fn list(cluster: &Cluster, key: &str) -> Vec<String> {
    on_owner(cluster, key).lrange(key, 0, -1).expect("LRANGE")
}

/// A scheduler of `ns` in this process, on a connection of its own (the lock value names it).
async fn scheduler(url: &str, ns: &str, value: &str) -> Scheduler {
    let cfg = SchedulerConfig {
        redis_url: url.to_string(),
        namespace: ns.to_string(),
        recurring: false,
        ..SchedulerConfig::default()
    };
    let con = resq::conn::Endpoint::open(url)
        .expect("url")
        .connect()
        .await
        .expect("connect");
    Scheduler::with_lock_value(con, cfg, value.to_string())
}

/// Ticks until the zset holds no due member (at most 50 ticks), each tick as master.
async fn drain(s: &Scheduler) {
    for _ in 0..50 {
        let t = s.tick().await.expect("a tick on the spread namespace");
        assert!(t.master, "the scheduler did not take the lock");
        if t.moved == 0 {
            return;
        }
    }
    panic!("the delayed set never drained");
}

#[test]
fn delayed_jobs_due_now_and_later_move_to_queues_on_every_master_and_run() {
    require_tools();
    let root = topology::temp_dir("spread-delayed-run");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(2);
    let ns = support::namespace("spread-delayed-run");
    let queues = queue_per_master(&cluster, &ns);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = rt
        .block_on(resq::Client::connect(&url, &ns))
        .expect("connect");
    let past = chrono::Utc::now().timestamp() - 5;
    rt.block_on(async {
        for (q, _) in &queues {
            for i in 0..10 {
                // Due already (filed whatever the time, as resque-scheduler's delayed_push).
                client
                    .delayed_push(past, q, "Echo", &[json!(q), json!(i)])
                    .await
                    .expect("delayed_push");
                let r = client
                    .enqueue_in(
                        q,
                        Duration::from_secs(3),
                        "Echo",
                        &[json!(q), json!(100 + i)],
                    )
                    .await
                    .expect("enqueue_in");
                assert!(matches!(r, Scheduled::Delayed(_)), "{r:?}");
            }
        }
    });
    // Filed as resque-scheduler files them, each key in its own name's slot: the due bucket,
    // the zset and the reverse indexes are not all on one master.
    let bucket = format!("{ns}:delayed:{past}");
    let schedule = format!("{ns}:delayed_queue_schedule");
    assert_eq!(list(&cluster, &bucket).len(), 30);
    let node = &cluster.nodes[0];
    let mut slots: BTreeSet<i64> = [keyslot(node, &bucket), keyslot(node, &schedule)].into();
    for (q, _) in &queues {
        let item = format!(r#"{{"class":"Echo","args":["{q}",0],"queue":"{q}"}}"#);
        let key = format!("{ns}:timestamps:{item}");
        let members: Vec<String> = on_owner(&cluster, &key).smembers(&key).expect("SMEMBERS");
        assert_eq!(members, vec![format!("delayed:{past}")], "{key}");
        slots.insert(keyslot(node, &key));
        assert!(list(&cluster, &format!("{ns}:queue:{q}")).is_empty());
    }
    assert!(
        slots.len() > 2,
        "the delayed set's keys share a slot: {slots:?}"
    );

    let names: Vec<&str> = queues.iter().map(|(q, _)| q.as_str()).collect();
    let joined = names.join(",");
    // Two slots per queue: six ids (all read, so the worker's stdout stays open).
    let mut w = WorkerProc::start(
        &url,
        &ns,
        2 * names.len(),
        &[
            ("CONCURRENCY", "2"),
            ("QUEUES", joined.as_str()),
            ("RESQ_SCHEDULER", "1"),
            ("RESQ_SCHEDULER_INTERVAL", "0.2"),
        ],
    );
    let echo = format!("{ns}:compat:echo");
    let ran = wait_until(90, "every delayed job run", || {
        let ran = list(&cluster, &echo);
        (ran.len() >= 60).then_some(ran)
    });
    let mut expected: Vec<String> = Vec::new();
    for (q, _) in &queues {
        for i in (0..10).chain(100..110) {
            expected.push(format!(r#"["{q}",{i}]"#));
        }
    }
    let mut got = ran.clone();
    got.sort();
    expected.sort();
    assert_eq!(got, expected, "each delayed job ran once");
    wait_until(30, "the delayed set emptied", || {
        delayed_keys(&cluster, &ns).is_empty().then_some(())
    });
    quit_cleanly(&cluster, &ns, &mut w);
    let log = w.stderr();
    assert!(
        log.contains("scheduler is master") && !log.contains("CROSSSLOT"),
        "{log}"
    );
    assert!(!log.contains("scheduler tick failed"), "{log}");
}

#[test]
fn delayed_keys_hold_the_bytes_a_tagged_namespace_gets() {
    require_tools();
    let root = topology::temp_dir("spread-delayed-bytes");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(2);
    let spread = support::namespace("spread-delayed-bytes");
    let tagged = format!("{{{spread}t}}");
    let at = chrono::Utc::now() + chrono::Duration::hours(2);
    let ts = at.timestamp();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut seen: Vec<BTreeMap<String, Vec<String>>> = Vec::new();
    for ns in [&spread, &tagged] {
        let client = rt
            .block_on(resq::Client::connect(&url, ns))
            .expect("connect");
        let removed = rt.block_on(async {
            let r = client
                .enqueue_at(
                    "mail",
                    at,
                    "Mailer",
                    &[json!(42), json!("welcome"), json!(1.5)],
                )
                .await
                .expect("enqueue_at");
            assert_eq!(r, Scheduled::Delayed(ts));
            client
                .enqueue_at(
                    "mail",
                    at,
                    "Mailer",
                    &[json!(42), json!("welcome"), json!(1.5)],
                )
                .await
                .expect("enqueue_at again");
            client
                .delayed_push(ts + 60, "report", "Report", &[json!({"day": "mon"})])
                .await
                .expect("delayed_push");
            client
                .delayed_push(ts + 120, "gone", "Gone", &[])
                .await
                .expect("delayed_push");
            let peek = client.delayed_queue_peek(0, 10).await.expect("peek");
            assert_eq!(peek, vec![ts, ts + 60, ts + 120]);
            assert_eq!(client.count_all_scheduled_jobs().await.expect("count"), 4);
            client
                .remove_delayed("gone", "Gone", &[])
                .await
                .expect("remove_delayed")
        });
        assert_eq!(removed, 1, "{ns}");
        let prefix = format!("{ns}:");
        let mut state = BTreeMap::new();
        for k in keys_under(&cluster, &prefix) {
            let key = format!("{prefix}{k}");
            let mut con = on_owner(&cluster, &key);
            let kind: String = redis::cmd("TYPE").arg(&key).query(&mut con).expect("TYPE");
            let mut v: Vec<String> = match kind.as_str() {
                "list" => con.lrange(&key, 0, -1).expect("LRANGE"),
                "set" => con.smembers(&key).expect("SMEMBERS"),
                "zset" => con.zrange_withscores(&key, 0, -1).expect("ZRANGE"),
                other => panic!("{key} is a {other}"),
            };
            if kind == "set" {
                v.sort();
            }
            state.insert(k, v);
        }
        seen.push(state);
    }
    let item = r#"{"class":"Mailer","args":[42,"welcome",1.5],"queue":"mail"}"#;
    assert_eq!(
        seen[0].get(&format!("delayed:{ts}")),
        Some(&vec![item.to_string(), item.to_string()])
    );
    assert_eq!(
        seen[0].get(&format!("timestamps:{item}")),
        Some(&vec![format!("delayed:{ts}")])
    );
    assert_eq!(seen[0], seen[1], "spread and tagged bytes differ");
}

#[test]
fn a_move_cut_between_its_steps_converges_and_loses_nothing() {
    require_tools();
    let root = topology::temp_dir("spread-delayed-crash");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(2);
    let ns = support::namespace("spread-delayed-crash");
    let queues = queue_per_master(&cluster, &ns);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = rt
        .block_on(resq::Client::connect(&url, &ns))
        .expect("connect");
    let now = chrono::Utc::now().timestamp();
    let q = queues[0].0.as_str();
    let schedule = format!("{ns}:delayed_queue_schedule");
    let member_of = |ts: i64| -> Option<f64> {
        on_owner(&cluster, &schedule)
            .zscore(&schedule, ts)
            .expect("ZSCORE")
    };
    // 1. A mover pushed the bucket's jobs and died before taking the items out: the jobs are
    // on the queue, the bucket, its reverse index and its zset member as they were.
    let t1 = now - 30;
    rt.block_on(async {
        for i in 0..3 {
            client
                .delayed_push(t1, q, "Echo", &[json!(i)])
                .await
                .expect("delayed_push");
            client
                .enqueue_to(q, "Echo", &[json!(i)])
                .await
                .expect("the crashed mover's push");
        }
    });
    // 2. A mover took a bucket's items out and died before removing its zset member.
    let t2 = now - 20;
    let _: i64 = on_owner(&cluster, &schedule)
        .zadd(&schedule, t2, t2)
        .expect("ZADD");
    // 3. A producer pushed a bucket and died before its ZADD (its call failed): a later
    // enqueue for the same second makes both visible.
    let t3 = now - 10;
    let orphan = format!(r#"{{"class":"Echo","args":["orphan"],"queue":"{q}"}}"#);
    let b3 = format!("{ns}:delayed:{t3}");
    let _: i64 = on_owner(&cluster, &b3).rpush(&b3, &orphan).expect("RPUSH");
    rt.block_on(async {
        client
            .delayed_push(t3, q, "Echo", &[json!("later")])
            .await
            .expect("delayed_push");
    });
    rt.block_on(async {
        let s = scheduler(&url, &ns, "next-scheduler:1").await;
        drain(&s).await;
    });
    let mut on_queue = list(&cluster, &format!("{ns}:queue:{q}"));
    on_queue.sort();
    let mut want: Vec<String> = (0..3)
        .flat_map(|i| {
            let p = format!(r#"{{"class":"Echo","args":[{i}]}}"#);
            [p.clone(), p]
        })
        .chain([
            r#"{"class":"Echo","args":["later"]}"#.to_string(),
            r#"{"class":"Echo","args":["orphan"]}"#.to_string(),
        ])
        .collect();
    want.sort();
    assert_eq!(
        on_queue, want,
        "the crashed move's jobs are there twice, every other once"
    );
    for ts in [t1, t2, t3] {
        assert_eq!(member_of(ts), None, "zset member {ts} left");
        assert!(list(&cluster, &format!("{ns}:delayed:{ts}")).is_empty());
    }
    assert!(
        delayed_keys(&cluster, &ns).is_empty(),
        "{:?}",
        delayed_keys(&cluster, &ns)
    );
}

#[test]
fn producers_pushing_to_the_second_being_moved_orphan_nothing() {
    require_tools();
    let root = topology::temp_dir("spread-delayed-race");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(2);
    let ns = support::namespace("spread-delayed-race");
    let queues = queue_per_master(&cluster, &ns);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let client = rt
        .block_on(resq::Client::connect(&url, &ns))
        .expect("connect");
    const PRODUCERS: usize = 4;
    const EACH: usize = 400;
    let ts = chrono::Utc::now().timestamp() - 1;
    let q = queues[1].0.clone();
    rt.block_on(async {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for p in 0..PRODUCERS {
            let client = client.clone();
            let q = q.clone();
            let done = done.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..EACH {
                    client
                        .delayed_push(ts, &q, "Echo", &[json!(p * EACH + i)])
                        .await
                        .expect("delayed_push");
                }
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }));
        }
        let s = scheduler(&url, &ns, "racing-scheduler:1").await;
        // Ticks while the producers push (one tick keeps moving the second while it fills).
        let mut moved_while_pushing = 0;
        while done.load(std::sync::atomic::Ordering::SeqCst) < PRODUCERS {
            let pushed_to = done.load(std::sync::atomic::Ordering::SeqCst) < PRODUCERS;
            let moved = s.tick().await.expect("tick").moved;
            if pushed_to {
                moved_while_pushing += moved;
            }
        }
        for t in tasks {
            t.await.expect("producer");
        }
        assert!(
            moved_while_pushing > 0,
            "the scheduler moved nothing while producers pushed"
        );
        drain(&s).await;
    });
    let ran = list(&cluster, &format!("{ns}:queue:{q}"));
    let distinct: BTreeSet<&String> = ran.iter().collect();
    assert_eq!(
        distinct.len(),
        PRODUCERS * EACH,
        "a delayed job never reached its queue"
    );
    assert!(
        delayed_keys(&cluster, &ns).is_empty(),
        "orphaned: {:?}",
        delayed_keys(&cluster, &ns)
    );
}

#[test]
fn recurring_schedules_and_delayed_actions_work_on_the_spread_namespace() {
    require_tools();
    let root = topology::temp_dir("spread-recurring");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(2);
    let ns = support::namespace("spread-recurring");
    let queues = queue_per_master(&cluster, &ns);
    let q = queues[2].0.as_str();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = rt
        .block_on(resq::Client::connect(&url, &ns))
        .expect("connect");
    let admin = rt
        .block_on(resq::admin::Admin::connect(&url, &ns))
        .expect("admin");
    let config = json!({"class": "Echo", "queue": q, "args": ["tick"], "every": "1s"});
    let config = config.as_object().expect("object").clone();
    rt.block_on(async {
        admin
            .add_schedule("ticker", &config, chrono_tz::Tz::UTC)
            .await
            .expect("add_schedule");
        assert_eq!(
            admin
                .enqueue_schedule_now("ticker", Default::default())
                .await
                .expect("enqueue now"),
            q
        );
    });
    let queue = format!("{ns}:queue:{q}");
    assert_eq!(list(&cluster, &queue).len(), 1, "queue now pushed one job");
    // The dashboard's run-now and delete of delayed items.
    let later = chrono::Utc::now().timestamp() + 3600;
    rt.block_on(async {
        for i in 0..2 {
            client
                .delayed_push(later, q, "Echo", &[json!(format!("item{i}"))])
                .await
                .expect("delayed_push");
        }
    });
    let items = list(&cluster, &format!("{ns}:delayed:{later}"));
    let ids: Vec<String> = items
        .iter()
        .map(|i| resq::admin::element_id(i.as_bytes()))
        .collect();
    rt.block_on(async {
        use resq::admin::{DelayedAction, Taken};
        let f = Default::default();
        let r = admin
            .delayed_act(later, &ids[0], 0, DelayedAction::RunNow, f)
            .await
            .expect("run now");
        assert_eq!(r, Taken::Done);
        let r = admin
            .delayed_act(later, &ids[1], 0, DelayedAction::Delete, f)
            .await
            .expect("delete");
        assert_eq!(r, Taken::Done);
        let r = admin
            .delayed_act(later, &ids[1], 0, DelayedAction::Delete, f)
            .await
            .expect("delete again");
        assert_eq!(r, Taken::Gone);
    });
    assert_eq!(
        list(&cluster, &queue).last().map(String::as_str),
        Some(r#"{"class":"Echo","args":["item0"]}"#)
    );
    assert!(
        delayed_keys(&cluster, &ns).is_empty(),
        "{:?}",
        delayed_keys(&cluster, &ns)
    );

    // The scheduler fires the stored schedule: once per second, from the first period on.
    let cfg = SchedulerConfig {
        namespace: ns.clone(),
        ..SchedulerConfig::default()
    };
    let s = Scheduler::with_lock_value(client.connection(), cfg, "recurring:1".into());
    let fired = rt.block_on(async {
        let mut fired = 0;
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while fired < 2 && std::time::Instant::now() < deadline {
            let t = s.tick().await.expect("tick");
            assert!(t.master);
            fired += t.fired;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        fired
    });
    assert!(fired >= 2, "the schedule fired {fired} times");
    let ticks = list(&cluster, &queue)
        .iter()
        .filter(|p| p.as_str() == r#"{"class":"Echo","args":["tick"]}"#)
        .count();
    assert_eq!(ticks, 1 + fired, "queue now plus each fire");
    let last_key = format!("{ns}:delayed:last_enqueued_at");
    let last: Option<String> = on_owner(&cluster, &last_key)
        .hget(&last_key, "ticker")
        .expect("HGET");
    assert!(
        last.as_deref().is_some_and(|l| l.ends_with(" +0000")),
        "{last:?}"
    );
    let next_key = format!("{ns}:resq:schedule_next");
    let token: Option<String> = on_owner(&cluster, &next_key)
        .hget(&next_key, "ticker")
        .expect("HGET");
    assert!(token.is_some(), "no fire token");
    rt.block_on(async {
        assert!(admin.remove_schedule("ticker").await.expect("remove"));
    });

    // The CLI: a delayed enqueue, a stored schedule added, listed and removed.
    let resq = |args: &[&str]| resq(&url, &ns, args);
    resq(&["enqueue", "--in", "3600", "--queue", q, "Later", "1"]);
    resq(&[
        "schedule", "add", "nightly", "--queue", q, "--class", "N", "--every", "1h",
    ]);
    assert!(resq(&["schedule", "list"]).contains("nightly"));
    resq(&["schedule", "remove", "nightly"]);
    assert!(!resq(&["schedule", "list"]).contains("nightly"));
    let filed = delayed_keys(&cluster, &ns);
    assert_eq!(filed.len(), 3, "bucket, reverse index, zset: {filed:?}");
    assert!(resq(&["delayed", "list"]).contains("Later"));
}

#[test]
fn a_ruby_cluster_client_reads_resqs_delayed_items_and_files_its_own_for_resq_to_move() {
    require_tools();
    topology::require("ruby", "ruby-redis");
    let root = topology::temp_dir("spread-delayed-ruby");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(2);
    let ns = support::namespace("spread-delayed-ruby");
    let q = queue_per_master(&cluster, &ns)[0].0.clone();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = rt
        .block_on(resq::Client::connect(&url, &ns))
        .expect("connect");
    let later = chrono::Utc::now().timestamp() + 3600;
    let due = chrono::Utc::now().timestamp() - 5;
    rt.block_on(async {
        client
            .delayed_push(later, &q, "Mailer", &[json!(1), json!("a")])
            .await
            .expect("delayed_push");
    });
    // Ruby (redis-rb 4.8's cluster client, redis-namespace) reads resq's item as
    // resque-scheduler would, and files one of its own as resque-scheduler's delayed_push does
    // (three commands, one key each: they work across slots).
    let script = r##"
        require 'redis'
        require 'redis-namespace'
        require 'json'
        seed, ns, queue, later, due = ARGV
        redis = Redis::Namespace.new(ns, redis: Redis.new(cluster: [seed]))
        item = redis.lrange("delayed:#{later}", 0, -1).first
        puts "zset #{redis.zrange('delayed_queue_schedule', 0, -1, with_scores: true).inspect}"
        puts "item #{item}"
        puts "index #{redis.smembers("timestamps:#{item}").inspect}"
        mine = JSON.generate('class' => 'RubyJob', 'args' => [7], 'queue' => queue)
        redis.rpush("delayed:#{due}", mine)
        redis.sadd("timestamps:#{mine}", ["delayed:#{due}"])
        redis.zadd('delayed_queue_schedule', due.to_i, due.to_i)
    "##;
    let seed = format!("redis://127.0.0.1:{}", cluster.nodes[0].port);
    let out = std::process::Command::new("ruby")
        .args(["-W0", "-e", script, &seed, &ns, &q])
        .arg(later.to_string())
        .arg(due.to_string())
        .output()
        .expect("ruby runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let item = format!(r#"{{"class":"Mailer","args":[1,"a"],"queue":"{q}"}}"#);
    for want in [
        format!(r#"zset [["{later}", {later}.0]]"#),
        format!("item {item}"),
        format!(r#"index ["delayed:{later}"]"#),
    ] {
        assert!(stdout.contains(&want), "Ruby lacks {want:?}:\n{stdout}");
    }
    rt.block_on(async {
        let s = scheduler(&url, &ns, "after-ruby:1").await;
        drain(&s).await;
    });
    assert_eq!(
        list(&cluster, &format!("{ns}:queue:{q}")),
        vec![r#"{"class":"RubyJob","args":[7]}"#.to_string()]
    );
    let left = delayed_keys(&cluster, &ns);
    assert_eq!(
        left,
        BTreeSet::from([
            format!("delayed:{later}"),
            format!("timestamps:{item}"),
            "delayed_queue_schedule".to_string()
        ]),
        "only the item due later is left"
    );
}

#[test]
fn only_the_lock_holder_moves_and_a_stopped_scheduler_hands_the_lock_over() {
    require_tools();
    let root = topology::temp_dir("spread-delayed-lock");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(2);
    let ns = support::namespace("spread-delayed-lock");
    let q = queue_per_master(&cluster, &ns)[2].0.clone();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = rt
        .block_on(resq::Client::connect(&url, &ns))
        .expect("connect");
    let due = chrono::Utc::now().timestamp() - 5;
    let lock = format!("{ns}:{ns}:resque_scheduler_master_lock");
    rt.block_on(async {
        let a = scheduler(&url, &ns, "host-a:1").await;
        let b = scheduler(&url, &ns, "host-b:2").await;
        assert!(a.tick().await.expect("tick").master);
        // resque-scheduler's lock: its key, `<host>:<pid>`, a TTL.
        let mut con = on_owner(&cluster, &lock);
        let held: Option<String> = con.get(&lock).expect("GET");
        assert_eq!(held.as_deref(), Some("host-a:1"));
        let ttl: i64 = con.ttl(&lock).expect("TTL");
        assert!(ttl > 0 && ttl <= 180, "{ttl}");
        client
            .delayed_push(due, &q, "Echo", &[json!(1)])
            .await
            .expect("delayed_push");
        let t = b.tick().await.expect("tick");
        assert!(!t.master && t.moved == 0, "{t:?}");
        assert_eq!(client.delayed_queue_schedule_size().await.expect("size"), 1);
        // Stopped, A gives the lock up; B takes it and moves the job.
        let (tx, rx) = tokio::sync::watch::channel(true);
        a.run(rx).await;
        drop(tx);
        let gone: Option<String> = con.get(&lock).expect("GET");
        assert_eq!(gone, None, "the lock was not released");
        let t = b.tick().await.expect("tick");
        assert!(t.master && t.moved == 1, "{t:?}");
    });
    assert_eq!(
        list(&cluster, &format!("{ns}:queue:{q}")),
        vec![r#"{"class":"Echo","args":[1]}"#.to_string()]
    );
}
