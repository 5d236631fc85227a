//! resq's own pruning (`src/worker/prune.rs`) against planted Redis state modelled on the
//! golden fixtures 11–13: what it removes (only what a Ruby pruner would remove too), what it
//! writes for a dead worker's job (Ruby's exact failure text, or the job back at the head of
//! its queue under at-least-once), that it honours Ruby's lock, and that a live slot whose id
//! someone removed heals itself.

use crate::support;

use redis::AsyncCommands;
use resq::admin::{Admin, PruneOutcome};
use serde_json::Value;
use std::time::Duration;

const FIVE_MIN: Duration = Duration::from_secs(300);

async fn redis_now(con: &mut redis::aio::MultiplexedConnection) -> i64 {
    let (s, _): (i64, i64) = redis::cmd("TIME").query_async(con).await.unwrap();
    s
}

fn iso(secs: i64) -> String {
    resq::time::heartbeat(chrono::DateTime::from_timestamp(secs, 0).unwrap())
}

/// This machine's host name, as worker ids carry it.
fn hostname() -> String {
    hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".to_string())
}

/// The host field of this host's resq ids (`<host>~resq`, the host made URL-safe).
fn own_host_field() -> String {
    let host: String = hostname()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{host}~resq")
}

/// A pid that is not running (pids are below 2^22 on Linux).
const DEAD_PID: u32 = 4_194_301;

struct Plant<'a> {
    con: &'a mut redis::aio::MultiplexedConnection,
    ns: &'a str,
}

impl Plant<'_> {
    async fn worker(&mut self, id: &str, heartbeat: Option<&str>, record: Option<&str>) {
        let _: () = self
            .con
            .sadd(format!("{}:workers", self.ns), id)
            .await
            .unwrap();
        let _: () = self
            .con
            .set(
                format!("{}:worker:{id}:started", self.ns),
                "2026-01-01 00:00:00 +0000",
            )
            .await
            .unwrap();
        if let Some(hb) = heartbeat {
            self.heartbeat(id, hb).await;
        }
        if let Some(r) = record {
            let _: () = self
                .con
                .set(format!("{}:worker:{id}", self.ns), r)
                .await
                .unwrap();
        }
    }

    async fn heartbeat(&mut self, id: &str, hb: &str) {
        let _: () = self
            .con
            .hset(format!("{}:workers:heartbeat", self.ns), id, hb)
            .await
            .unwrap();
    }
}

/// One pruning round as this process, through the admin API (the CLI's `resq prune`).
async fn prune(ns: &str, at_least_once: bool) -> PruneOutcome {
    Admin::connect(&support::url(), ns)
        .await
        .unwrap()
        .prune(FIVE_MIN, at_least_once)
        .await
        .unwrap()
}

#[tokio::test]
async fn prunes_only_what_ruby_would_and_writes_rubys_failures() {
    let mut con = support::con().await;
    let ns = support::namespace("prune-rules");
    let now = redis_now(&mut con).await;
    let host = hostname();
    let me = own_host_field();
    let job = r#"{"queue":"default","run_at":"2026-11-21T19:15:33.678+0000","payload":{"class":"SleepJob","args":[5],"x":1.0}}"#;
    let expired = iso(now - 400);
    let fresh = iso(now - 10);
    let jesque_paused =
        r#"{"run_at":"2026-01-02T03:04:05.678+0000","queue":null,"payload":null,"paused":true}"#;
    let cases: Vec<(String, Option<String>, Option<&str>, bool)> = vec![
        // (id, heartbeat, record, pruned?)
        (format!("{host}:30001:default"), None, None, false), // Ruby id, same host: resq does no pid check on it
        (
            "otherhost:1235-2:default".into(),
            Some(expired.clone()),
            Some(job),
            true,
        ),
        (
            "otherhost:1236:default".into(),
            Some(fresh.clone()),
            Some(job),
            false,
        ),
        (
            "otherhost:1237:default".into(),
            Some(iso(now - 299)),
            None,
            false,
        ), // under 300 s (TIME may tick once): kept
        (
            "otherhost:1238:default".into(),
            Some(iso(now - 301)),
            None,
            true,
        ), // 301 s: pruned
        (
            "otherhost:1239:default".into(),
            Some("1795288154".into()),
            None,
            false,
        ), // Ruby raises
        (
            "otherhost:1240:default".into(),
            Some("2020-01-01 00:00:00".into()),
            None,
            true,
        ), // no zone, years old
        (
            "otherhost:1241:default".into(),
            Some(
                (chrono::DateTime::from_timestamp(now - 6 * 3600, 0).unwrap())
                    .format("%Y-%m-%d %H:%M:%S")
                    .to_string(),
            ),
            None,
            false,
        ), // no zone, 6 h old: fresh to a pruner at UTC-12
        (
            "otherhost:77-0:JAVA_DYNAMIC_QUEUES,q".into(),
            Some(expired.clone()),
            Some(jesque_paused),
            false,
        ),
        (
            format!("{me}:{DEAD_PID}-0:default"),
            Some(fresh.clone()),
            Some(job),
            true,
        ), // dead local resq
        (
            format!("{me}:1-0:default"),
            Some(fresh.clone()),
            Some(job),
            false,
        ), // pid 1 is alive
        (
            format!("other~resq:{DEAD_PID}-0:default"),
            Some(fresh.clone()),
            Some(job),
            false,
        ), // other host
        (
            format!("{me}:{}-0:default", std::process::id()),
            Some(expired.clone()),
            Some(job),
            false,
        ), // own process
    ];
    let mut plant = Plant {
        con: &mut con,
        ns: &ns,
    };
    for (id, hb, rec, _) in &cases {
        plant.worker(id, hb.as_deref(), *rec).await;
    }
    // Only in the heartbeat hash (Ruby's loop 1 reads the hash, not the set), and a two-part id.
    plant.heartbeat("ghost:999:default", &expired).await;
    plant.heartbeat("vm:12346", &expired).await;

    let report = prune(&ns, false).await;
    assert!(report.locked);
    let members: Vec<String> = con.smembers(format!("{ns}:workers")).await.unwrap();
    for (id, _, _, pruned) in &cases {
        assert_eq!(
            !members.contains(id),
            *pruned,
            "{id}: pruned should be {pruned}"
        );
        let rec: bool = con.exists(format!("{ns}:worker:{id}")).await.unwrap();
        let started: bool = con
            .exists(format!("{ns}:worker:{id}:started"))
            .await
            .unwrap();
        assert_eq!(!started, *pruned, "{id}: started key");
        if *pruned {
            assert!(!rec, "{id}: record left behind");
        }
    }
    let beats: Vec<String> = con.hkeys(format!("{ns}:workers:heartbeat")).await.unwrap();
    assert!(!beats.contains(&"ghost:999:default".to_string()));
    assert!(
        beats.contains(&"vm:12346".to_string()),
        "an id Ruby cannot parse is left alone"
    );

    let failed: Vec<String> = con.lrange(format!("{ns}:failed"), 0, -1).await.unwrap();
    assert_eq!(failed.len(), 2, "{failed:#?}");
    let entries: Vec<Value> = failed
        .iter()
        .map(|f| serde_json::from_str(f).unwrap())
        .collect();
    let expired_entry = entries
        .iter()
        .find(|e| e["worker"] == "otherhost:1235-2:default")
        .expect("the expired worker's failure");
    assert_eq!(
        expired_entry["exception"],
        "Resque::PruneDeadWorkerDirtyExit"
    );
    assert_eq!(
        expired_entry["error"],
        "Worker otherhost:1235-2:default did not gracefully exit while processing SleepJob"
    );
    assert_eq!(expired_entry["backtrace"], serde_json::json!([]));
    assert_eq!(expired_entry["queue"], "default");
    // The payload's bytes are spliced in unchanged (1.0 stays 1.0).
    assert!(failed
        .iter()
        .any(|f| f.contains(r#""payload":{"class":"SleepJob","args":[5],"x":1.0}"#)));
    let local = entries
        .iter()
        .find(|e| e["worker"] == format!("{me}:{DEAD_PID}-0:default").as_str())
        .expect("the dead local worker's failure");
    assert_eq!(local["exception"], "Resque::DirtyExit");
    assert_eq!(local["error"], "Job still being processed");
    // Ruby's failure path does not count stat:failed.
    let stat: Option<i64> = con.get(format!("{ns}:stat:failed")).await.unwrap();
    assert_eq!(stat, None);
    let reasons: Vec<(String, &str, &str)> = report
        .pruned
        .iter()
        .map(|p| (p.id.clone(), p.reason, p.job))
        .collect();
    assert!(reasons.contains(&("otherhost:1235-2:default".into(), "expired", "failed")));
    assert!(reasons.contains(&(format!("{me}:{DEAD_PID}-0:default"), "dead_local", "failed")));
    assert!(report.skipped.iter().any(|(id, _)| id == "vm:12346"));
    assert!(report
        .skipped
        .iter()
        .any(|(id, _)| id == "otherhost:77-0:JAVA_DYNAMIC_QUEUES,q"));
}

#[tokio::test]
async fn the_lock_is_rubys_and_is_respected() {
    let mut con = support::con().await;
    let ns = support::namespace("prune-lock");
    let now = redis_now(&mut con).await;
    let mut plant = Plant {
        con: &mut con,
        ns: &ns,
    };
    plant
        .worker("otherhost:1:default", Some(&iso(now - 1000)), None)
        .await;
    let lock = format!("{ns}:pruning_dead_workers_in_progress");
    let _: () = con.set(&lock, "vm:4242:default").await.unwrap();
    let report = prune(&ns, false).await;
    assert!(!report.locked);
    let n: usize = con.scard(format!("{ns}:workers")).await.unwrap();
    assert_eq!(n, 1, "pruned while another pruner held the lock");
    let _: () = con.del(&lock).await.unwrap();
    let report = prune(&ns, false).await;
    assert!(report.locked);
    let n: usize = con.scard(format!("{ns}:workers")).await.unwrap();
    assert_eq!(n, 0);
    // Ruby's shape: value = the pruner's id, TTL 60 s.
    let owner: String = con.get(&lock).await.unwrap();
    assert!(owner.splitn(3, ':').count() == 3, "{owner}");
    let ttl: i64 = con.ttl(&lock).await.unwrap();
    assert!((55..=60).contains(&ttl), "ttl {ttl}");
}

#[tokio::test]
async fn at_least_once_puts_a_dead_workers_job_back_at_the_head_byte_for_byte() {
    let mut con = support::con().await;
    let ns = support::namespace("prune-alo");
    let now = redis_now(&mut con).await;
    let payload = r#"{ "args" : [1, 1.0e+20], "class":"X" ,"vars":{"k":"é"} }"#;
    let record =
        format!(r#"{{"queue":"q:1","run_at":"2026-11-21T19:15:33.678+0000","payload":{payload}}}"#);
    let _: () = con
        .rpush(format!("{ns}:queue:q:1"), r#"{"class":"Y","args":[]}"#)
        .await
        .unwrap();
    let mut plant = Plant {
        con: &mut con,
        ns: &ns,
    };
    plant
        .worker("otherhost:5-1:q:1", Some(&iso(now - 400)), Some(&record))
        .await;
    let report = prune(&ns, true).await;
    assert_eq!(report.pruned.len(), 1);
    assert_eq!(report.pruned[0].job, "requeued");
    let q: Vec<String> = con.lrange(format!("{ns}:queue:q:1"), 0, -1).await.unwrap();
    assert_eq!(
        q,
        vec![
            payload.to_string(),
            r#"{"class":"Y","args":[]}"#.to_string()
        ]
    );
    let queues: Vec<String> = con.smembers(format!("{ns}:queues")).await.unwrap();
    assert_eq!(queues, vec!["q:1"]);
    let failed: usize = con.llen(format!("{ns}:failed")).await.unwrap();
    assert_eq!(failed, 0);
    let members: usize = con.scard(format!("{ns}:workers")).await.unwrap();
    assert_eq!(members, 0);
}

#[tokio::test]
async fn a_slot_whose_id_was_removed_registers_again_and_rewrites_its_record() {
    let mut con = support::con().await;
    let ns = support::namespace("self-heal");
    let mut w = support::WorkerProc::start(
        &support::url(),
        &ns,
        1,
        &[("HEARTBEAT_INTERVAL", "1"), ("RESQ_PRUNE", "0")],
    );
    let id = w.ids[0].clone();
    let _: () = con
        .rpush(
            format!("{ns}:queue:default"),
            r#"{"class":"Sleep","args":[4000]}"#,
        )
        .await
        .unwrap();
    let rec_key = format!("{ns}:worker:{id}");
    let record: String = support::eventually(10, "the job to start", || {
        let mut c = con.clone();
        let k = rec_key.clone();
        async move { c.get::<_, Option<String>>(&k).await.ok().flatten() }
    })
    .await;
    // What a pruner (Ruby's or ours) does to a worker it believes dead.
    let _: () = redis::pipe()
        .srem(format!("{ns}:workers"), &id)
        .del(&rec_key)
        .del(format!("{ns}:worker:{id}:started"))
        .hdel(format!("{ns}:workers:heartbeat"), &id)
        .query_async(&mut con)
        .await
        .unwrap();
    let t = std::time::Instant::now();
    support::eventually(5, "the id to come back", || {
        let mut c = con.clone();
        let (ns, id) = (ns.clone(), id.clone());
        async move {
            c.sismember::<_, _, bool>(format!("{ns}:workers"), &id)
                .await
                .ok()?
                .then_some(())
        }
    })
    .await;
    assert!(
        t.elapsed() < Duration::from_millis(2500),
        "took {:?}",
        t.elapsed()
    );
    let again: Option<String> = con.get(&rec_key).await.unwrap();
    assert_eq!(
        again.as_deref(),
        Some(record.as_str()),
        "the running job's record is rewritten"
    );
    let started: bool = con
        .exists(format!("{ns}:worker:{id}:started"))
        .await
        .unwrap();
    assert!(started);
    // The job still finishes normally (its finish matches the rewritten record).
    support::eventually(10, "the job to finish", || {
        let mut c = con.clone();
        let ns = ns.clone();
        async move {
            (c.get::<_, Option<i64>>(format!("{ns}:stat:processed"))
                .await
                .ok()??
                == 1)
                .then_some(())
        }
    })
    .await;
    w.signal("QUIT");
    assert!(w.wait_exit(10).success());
}

/// At-least-once pruning puts a dead worker's job back into the queue it came from when that
/// queue is a Jesque delayed zset (JESQUE_DELAYED_QUEUES): due now, not refused as a wrong
/// type (which left the dead worker unpruned, round after round).
#[tokio::test]
async fn at_least_once_puts_a_jesque_zset_job_back_into_its_zset() {
    let mut con = support::con().await;
    let ns = support::namespace("prune-alo-zset");
    let now = redis_now(&mut con).await;
    let payload = r#"{"class":"X","args":[1],"vars":{}}"#;
    let later = r#"{"class":"Later","args":[],"vars":{}}"#;
    let record =
        format!(r#"{{"queue":"zq","run_at":"2026-11-21T19:15:33.678+0000","payload":{payload}}}"#);
    let zq = format!("{ns}:queue:zq");
    let due_later = (now + 3600) * 1000;
    let _: () = con.zadd(&zq, later, due_later).await.unwrap();
    let mut plant = Plant {
        con: &mut con,
        ns: &ns,
    };
    plant
        .worker("otherhost:6-1:zq", Some(&iso(now - 400)), Some(&record))
        .await;
    let report = prune(&ns, true).await;
    assert_eq!(report.pruned.len(), 1, "{report:?}");
    assert_eq!(report.pruned[0].job, "requeued");
    let z: Vec<(String, i64)> = con.zrange_withscores(&zq, 0, -1).await.unwrap();
    assert_eq!(z.len(), 2, "{z:?}");
    assert_eq!(z[0].0, payload, "the job is back first (due now)");
    assert!(
        (now - 5) * 1000 <= z[0].1 && z[0].1 <= (now + 5) * 1000,
        "due now: {z:?}"
    );
    assert_eq!(z[1], (later.to_string(), due_later));
    let members: usize = con.scard(format!("{ns}:workers")).await.unwrap();
    assert_eq!(members, 0, "the dead worker is pruned");
}
