//! The step's config named by its digest, against private servers: a library that lost what a
//! process registered (a restart, a `FUNCTION FLUSH` and load, a failover to a replica) costs
//! one miss and then the right call; a digest it never saw writes nothing; a new config is a
//! new digest.

use super::{Completion, JobRef, QueueKeys, Reply, Settings, StepConfig, Stepper};
use crate::keys::Keys;
use crate::testing::server::{free_port, spawn_guard, start_redis};
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn connect(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

/// How many times the server answered the step's miss (`INFO errorstats`).
async fn misses(con: &mut MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("errorstats")
        .query_async(con)
        .await
        .expect("info");
    info.lines()
        .find_map(|l| l.strip_prefix("errorstat_RESQ_NOCONFIG:count="))
        .map_or(0, |n| n.trim().parse().expect("count"))
}

/// Every key of namespace `ns` with its value's dump (what the server holds there).
async fn snapshot(con: &mut MultiplexedConnection, ns: &str) -> Vec<(String, Vec<u8>)> {
    let mut keys: Vec<String> = con.keys(format!("{ns}:*")).await.expect("keys");
    keys.sort();
    let mut out = Vec::new();
    for k in keys {
        let v: Vec<u8> = redis::cmd("DUMP")
            .arg(&k)
            .query_async(con)
            .await
            .expect("dump");
        out.push((k, v));
    }
    out
}

/// A process of one slot on `ns`, its queue `q` holding jobs 1 and 2.
async fn setup(con: &mut MultiplexedConnection, ns: &str) -> (Stepper, Arc<QueueKeys>) {
    let keys = Keys::new(ns);
    for i in 1..=2 {
        let _: () = con
            .rpush(keys.queue("q"), format!(r#"{{"class":"A","args":[{i}]}}"#))
            .await
            .expect("push");
    }
    let stepper = Stepper::new(&keys, "h~resq:1-0:q", true);
    let queues = Arc::new(QueueKeys::new(&keys, &["q".to_string()]));
    (stepper, queues)
}

/// Reserves the first job; returns its record.
async fn first(con: &mut MultiplexedConnection, s: &Stepper, q: &Arc<QueueKeys>) -> Vec<u8> {
    match s.call_alone(con, None, true, q).await.expect("step").reply {
        Reply::Job(record, _) => record,
        r => panic!("no job: {r:?}"),
    }
}

/// Finishes the job of `record` and reserves the next: applied, job 2 reserved, one processed.
async fn second(con: &mut MultiplexedConnection, s: &Stepper, q: &Arc<QueueKeys>, record: Vec<u8>) {
    let done = Completion::Success {
        job: JobRef::Record(record),
        track: None,
        ends: None,
    };
    let r = s.call_alone(con, Some(&done), true, q).await.expect("step");
    assert!(r.applied, "the completion is applied");
    match r.reply {
        Reply::Job(record, _) => assert!(String::from_utf8_lossy(&record).contains("[2]")),
        r => panic!("no second job: {r:?}"),
    }
    let processed: Option<i64> = con.get(s.keys().stat_processed()).await.expect("get");
    assert_eq!(processed, Some(1));
}

#[tokio::test]
async fn a_function_flush_and_load_costs_one_miss() {
    let (_guard, url) = start_redis(&[]);
    let mut con = connect(&url).await;
    let (s, q) = setup(&mut con, "flush").await;
    let record = first(&mut con, &s, &q).await;
    assert_eq!(misses(&mut con).await, 1, "a process's first call misses");
    let _: () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query_async(&mut con)
        .await
        .expect("flush");
    crate::scripts::load(&mut con).await.expect("load");
    second(&mut con, &s, &q, record).await;
    assert_eq!(misses(&mut con).await, 2, "one miss after the load");
}

#[tokio::test]
async fn a_restart_costs_one_miss() {
    let dir = std::env::temp_dir().join(format!("resq-config-restart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let port = free_port();
    let args: Vec<String> = [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--dir",
        &dir.display().to_string(),
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--save",
        "",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let url = format!("redis://127.0.0.1:{port}");
    let up = |guard: Child| async {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(c) = redis::Client::open(url.as_str()) {
                if let Ok(mut c) = c.get_multiplexed_async_connection().await {
                    if redis::cmd("PING")
                        .query_async::<String>(&mut c)
                        .await
                        .is_ok()
                    {
                        return (guard, c);
                    }
                }
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let (guard, mut con) = up(spawn_guard("redis-server", &args, None).0).await;
    let (s, q) = setup(&mut con, "restart").await;
    let record = first(&mut con, &s, &q).await;
    // SHUTDOWN (the AOF is written), then the same server again on its data.
    let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").query_async(&mut con).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
        assert!(Instant::now() < deadline, "redis-server did not stop");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(guard);
    let (_guard, mut con) = up(spawn_guard("redis-server", &args, None).0).await;
    let loaded: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .query_async(&mut con)
        .await
        .expect("list");
    assert!(!loaded.is_empty(), "the library came back with the AOF");
    second(&mut con, &s, &q, record).await;
    assert_eq!(misses(&mut con).await, 1, "one miss after the restart");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_failover_to_a_replica_costs_one_miss() {
    // (The replica writes the master's snapshot to its directory: a private one.)
    let dir = std::env::temp_dir().join(format!("resq-config-failover-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let dir_arg = dir.display().to_string();
    let (_master_guard, master_url) = start_redis(&["--dir", dir_arg.as_str()]);
    let master_port = master_url.rsplit(':').next().expect("port").to_string();
    let (_replica_guard, replica_url) = start_redis(&[
        "--replicaof",
        "127.0.0.1",
        master_port.as_str(),
        "--dir",
        dir_arg.as_str(),
    ]);
    let mut master = connect(&master_url).await;
    let mut replica = connect(&replica_url).await;
    // (Linked before anything is written: what follows reaches it as the master's stream.)
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut replica)
            .await
            .expect("info");
        if info.contains("master_link_status:up") {
            break;
        }
        assert!(Instant::now() < deadline, "the replica did not link");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (s, q) = setup(&mut master, "failover").await;
    let record = first(&mut master, &s, &q).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let acked: i64 = redis::cmd("WAIT")
            .arg(1)
            .arg(200)
            .query_async(&mut master)
            .await
            .expect("wait");
        if acked == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the replica did not catch up");
    }
    // Redis replicates a function's writes, not the call: the replica never ran the step, so
    // nothing it holds can depend on the library's tables.
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut replica)
        .await
        .expect("info");
    assert!(stats.contains("cmdstat_lpop"), "{stats}");
    assert!(!stats.contains("cmdstat_fcall"), "{stats}");
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query_async(&mut replica)
        .await
        .expect("promote");
    second(&mut replica, &s, &q, record).await;
    assert_eq!(misses(&mut replica).await, 1, "one miss on the new master");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_digest_the_library_never_saw_writes_nothing() {
    let (_guard, url) = start_redis(&[]);
    let mut con = connect(&url).await;
    let ns = "unseen";
    let (s, q) = setup(&mut con, ns).await;
    let record = first(&mut con, &s, &q).await;
    let before = snapshot(&mut con, ns).await;
    // Another process's config: the same first slot, and a second.
    let ids = ["h~resq:1-0:q".to_string(), "h~resq:1-1:q".to_string()];
    let other = StepConfig::new(s.keys(), &ids, &Settings::default());
    let config_text = other.text.clone();
    let call = |config: &str, text: &str| {
        crate::scripts::Step {
            processed: s.keys().stat_processed(),
            config,
            queue_list: &q.digest,
            config_text: text,
            queues_text: "",
            now_ms: 1_767_225_600_000,
            run_at: "2026-01-01T00:00:00Z".into(),
            failed_at: "2026/01/01 00:00:00 UTC".into(),
            token: "t".into(),
            limits: "",
            n: 1,
            tail: crate::scripts::StepTail {
                polled: &[1],
                slots: vec![crate::scripts::StepSlot {
                    index: 1,
                    op: *b"s1--",
                    reference: &record,
                    entry: None,
                    track: None,
                    ends: None,
                }],
            },
        }
        .call()
    };
    let never = crate::scripts::texts::digest("never registered");
    for (config, text, why) in [
        (never.as_str(), "", "RESQ_NOCONFIG"),
        // A text sent with a digest that is not its own is refused, not kept under it.
        (
            never.as_str(),
            config_text.as_str(),
            "does not match its digest",
        ),
        // The settings and slots of another process, its queues unknown and not sent.
        (other.digest.as_str(), config_text.as_str(), "RESQ_NOCONFIG"),
    ] {
        let r: redis::RedisResult<redis::Value> = call(config, text).invoke_async(&mut con).await;
        let e = r.expect_err("a miss is an error reply");
        assert!(e.to_string().contains(why), "{e}");
        assert_eq!(
            snapshot(&mut con, ns).await,
            before,
            "nothing written ({why})"
        );
    }
}

#[test]
fn a_new_config_is_a_new_digest() {
    let keys = Keys::new("digests");
    let one = StepConfig::new(&keys, &["a".into()], &Settings::default());
    let two = StepConfig::new(&keys, &["a".into(), "b".into()], &Settings::default());
    let other_ns = StepConfig::new(&Keys::new("other"), &["a".into()], &Settings::default());
    let failing = Settings {
        count_failed: false,
        ..Settings::default()
    };
    let three = StepConfig::new(&keys, &["a".into()], &failing);
    let all = [&one, &two, &other_ns, &three];
    for (i, a) in all.iter().enumerate() {
        assert_eq!(a.digest, crate::scripts::texts::digest(&a.text));
        for b in &all[i + 1..] {
            assert_ne!(a.digest, b.digest);
        }
    }
}

#[tokio::test]
async fn a_process_with_new_slots_misses_once_and_the_old_one_still_hits() {
    let (_guard, url) = start_redis(&[]);
    let mut con = connect(&url).await;
    let (s, q) = setup(&mut con, "newslots").await;
    let record = first(&mut con, &s, &q).await;
    assert_eq!(misses(&mut con).await, 1);
    // The same slot in a process of two slots: another config.
    let keys = s.keys().clone();
    let ids = ["h~resq:1-0:q".to_string(), "h~resq:1-1:q".to_string()];
    let config = StepConfig::new(&keys, &ids, &Settings::default());
    let wider = Stepper::in_process(&keys, &ids[0], config, 1, Settings::default());
    second(&mut con, &wider, &q, record).await;
    assert_eq!(misses(&mut con).await, 2, "the new config misses once");
    let r = s.call_alone(&mut con, None, false, &q).await.expect("step");
    assert_eq!(r.reply, Reply::Empty);
    assert_eq!(misses(&mut con).await, 2, "the old config is still held");
}

/// `config.lua`'s bound on the configs it keeps, read from the library.
fn max_configs() -> usize {
    let lib = include_str!("../../scripts/config.lua");
    let at = lib
        .find("local MAX_CONFIGS, MAX_BYTES, MAX_QUEUES = ")
        .expect("config.lua's bounds");
    let rest = &lib[at..];
    let n = rest.split(" = ").nth(1).expect("values");
    n.split(',')
        .next()
        .expect("first")
        .trim()
        .parse()
        .expect("a number")
}

#[tokio::test]
async fn a_full_table_starts_over_and_the_next_call_misses_once_and_applies() {
    let (_guard, url) = start_redis(&[]);
    let mut con = connect(&url).await;
    let (s, q) = setup(&mut con, "bound").await;
    let record = first(&mut con, &s, &q).await;
    let keys = s.keys().clone();
    // Other processes' configs, each sent with its text by a call that does nothing else.
    let register = |from: usize, to: usize| {
        let mut pipe = redis::pipe();
        let configs: Vec<Arc<StepConfig>> = (from..to)
            .map(|k| StepConfig::new(&keys, &[format!("other-{k}")], &Settings::default()))
            .collect();
        for c in &configs {
            crate::scripts::Step {
                processed: keys.stat_processed(),
                config: &c.digest,
                queue_list: &q.digest,
                config_text: &c.text,
                queues_text: &q.text,
                now_ms: 1_767_225_600_000,
                run_at: String::new(),
                failed_at: String::new(),
                token: "t".into(),
                limits: "",
                n: 0,
                tail: crate::scripts::StepTail {
                    polled: &[],
                    slots: Vec::new(),
                },
            }
            .call()
            .add_to(&mut pipe);
        }
        pipe
    };
    let max = max_configs();
    // The table holds `max`: this process's and max - 1 others.
    let _: Vec<redis::Value> = register(1, max)
        .query_async(&mut con)
        .await
        .expect("register");
    let r = s.call_alone(&mut con, None, false, &q).await.expect("step");
    assert_eq!(r.reply, Reply::Empty);
    assert_eq!(misses(&mut con).await, 1, "still held at the bound");
    // One more starts it over: this process misses once, and its call applies.
    let _: Vec<redis::Value> = register(max, max + 1)
        .query_async(&mut con)
        .await
        .expect("register");
    second(&mut con, &s, &q, record).await;
    assert_eq!(
        misses(&mut con).await,
        2,
        "one miss after the table started over"
    );
}
