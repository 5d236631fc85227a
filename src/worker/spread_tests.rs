//! The worker's own bookkeeping on a spread cluster namespace, on a real three-master cluster
//! ([`crate::testing::cluster`]): registering, the heartbeat, unregistering and pruning send no
//! call whose keys are in several slots (Redis would refuse it with `CROSSSLOT`), put each
//! slot's keys in its queue's slot, and leave exactly Ruby's keys.

use super::heartbeat::Heartbeat;
use super::lifecycle;
use super::prune::{Fate, Pruner, Reason};
use super::slot::SlotState;
use crate::conn::{Conn, Endpoint};
use crate::identity::WorkerId;
use crate::keys::Keys;
use crate::testing::{
    self,
    cluster::{cluster, SERIAL},
};
use crate::wire::time;
use redis::AsyncCommands;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// A pid that is not running (pids are below 2^22 on Linux).
const DEAD_PID: u32 = 4_194_301;

/// `cmdstat_<cmd>` calls summed over the cluster's nodes.
fn calls(cmd: &str) -> u64 {
    let c = cluster();
    c.ports
        .iter()
        .map(|&p| {
            let info: String = redis::cmd("INFO")
                .arg("commandstats")
                .query(&mut c.node(p))
                .expect("INFO");
            info.lines()
                .find_map(|l| l.strip_prefix(&format!("cmdstat_{cmd}:calls=")))
                .and_then(|r| r.split(',').next())
                .map_or(0, |n| n.parse().expect("calls"))
        })
        .sum()
}

/// A spread namespace on the cluster (the cluster held for this test, the library loaded on
/// every node), its connection, and three queues whose lists are on three different masters.
async fn spread(
    prefix: &str,
) -> (
    Endpoint,
    Conn,
    Keys,
    Vec<String>,
    tokio::sync::MutexGuard<'static, ()>,
) {
    let serial = SERIAL.lock().await;
    let c = cluster();
    c.load_library().await;
    let endpoint = Endpoint::open(&c.url()).expect("cluster url");
    let ns = testing::namespace(prefix);
    let keys = endpoint.keys(&ns).expect("keys");
    assert!(keys.is_spread(), "a namespace without a tag is spread");
    let mut queues = Vec::new();
    let mut owners = BTreeSet::new();
    for n in 0.. {
        let q = format!("q{n}");
        if owners.insert(c.owner(&keys.queue(&q))) {
            queues.push(q);
        }
        if owners.len() == c.ports.len() {
            break;
        }
    }
    let con = endpoint.connect().await.expect("connect");
    (endpoint, con, keys, queues, serial)
}

/// Slot `k` of process `pid` on `host` serving `q`.
fn slot_id(keys: &Keys, host: &str, pid: u32, k: usize, q: &str) -> String {
    WorkerId::for_queue_slot(host, keys.queue_tag(q), pid, k, q)
        .as_str()
        .to_string()
}

/// Every key of the namespace, on every node.
fn all_keys(keys: &Keys) -> BTreeSet<String> {
    let c = cluster();
    let mut out = BTreeSet::new();
    for &p in &c.ports {
        let found: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}*", keys.prefix()))
            .query(&mut c.node(p))
            .expect("KEYS");
        out.extend(found);
    }
    out
}

#[tokio::test]
async fn register_and_unregister_spread_ids_leave_rubys_keys_in_each_queues_slot() {
    let (_, mut con, keys, queues, _serial) = spread("spread-reg").await;
    let ids: Vec<String> = queues
        .iter()
        .enumerate()
        .map(|(k, q)| slot_id(&keys, "vm", 4242, k, q))
        .collect();
    let started = chrono::Utc::now();
    let before = (calls("fcall"), calls("time"));
    lifecycle::register(&mut con, &keys, &ids, started)
        .await
        .expect("register (no CROSSSLOT)");
    let registered = (calls("fcall"), calls("time"));
    // One call for the heartbeats, one for the outbox index, one per slot (three), one for the
    // members; one TIME.
    assert_eq!(
        (registered.0 - before.0, registered.1 - before.1),
        (ids.len() as u64 + 3, 1)
    );
    let indexed: BTreeSet<String> = con.smembers(keys.outboxes()).await.unwrap();
    assert_eq!(indexed, ids.iter().cloned().collect());

    let members: BTreeSet<String> = con.smembers(keys.workers()).await.unwrap();
    assert_eq!(members, ids.iter().cloned().collect());
    let c = cluster();
    for (id, q) in ids.iter().zip(&queues) {
        let at: String = con.get(keys.worker_started(id)).await.unwrap();
        assert_eq!(at, time::started(started));
        let hb: Option<String> = con.hget(keys.heartbeats(), id).await.unwrap();
        assert!(hb.is_some_and(|h| time::parse_any(&h).is_some()), "{id}");
        assert_eq!(
            c.owner(&keys.worker_started(id)),
            c.owner(&keys.queue(q)),
            "{id}'s keys are on its queue's node"
        );
    }
    let expected: BTreeSet<String> = [keys.workers(), keys.heartbeats(), keys.outboxes()]
        .into_iter()
        .chain(ids.iter().map(|id| keys.worker_started(id)))
        .collect();
    assert_eq!(
        all_keys(&keys),
        expected,
        "exactly Ruby's keys, and the outbox index"
    );

    let before = calls("fcall");
    lifecycle::unregister(&mut con, &keys, &ids)
        .await
        .expect("unregister (no CROSSSLOT)");
    assert_eq!(calls("fcall") - before, ids.len() as u64 + 3);
    assert_eq!(all_keys(&keys), BTreeSet::new(), "nothing left");
}

#[tokio::test]
async fn the_heartbeat_beats_and_heals_spread_ids() {
    let (endpoint, mut con, keys, queues, _serial) = spread("spread-beat").await;
    let ids: Vec<String> = queues
        .iter()
        .enumerate()
        .map(|(k, q)| slot_id(&keys, "vm", 4243, k, q))
        .collect();
    let started = chrono::Utc::now();
    lifecycle::register(&mut con, &keys, &ids, started)
        .await
        .unwrap();
    // A pruner removed the last id while its slot runs a job.
    let gone = ids.last().unwrap().clone();
    let record = format!(
        r#"{{"queue":"{}","run_at":"x","payload":{{"class":"A","args":[]}}}}"#,
        queues.last().unwrap()
    );
    let _: () = con.srem(keys.workers(), &gone).await.unwrap();
    let _: () = con.hset(keys.heartbeats(), &ids[0], "old").await.unwrap();
    let slots: Vec<Arc<SlotState>> = ids
        .iter()
        .map(|id| {
            Arc::new(SlotState {
                id: Arc::from(id.as_str()),
                record: tokio::sync::Mutex::new((id == &gone).then(|| record.clone().into_bytes())),
            })
        })
        .collect();
    let (_stop, stop) = tokio::sync::watch::channel(false);
    let hb = Heartbeat {
        endpoint,
        keys: keys.clone(),
        slots,
        interval: Duration::from_secs(60),
        started,
        stop,
    };
    hb.beat(&mut con).await.expect("beat (no CROSSSLOT)");
    let members: BTreeSet<String> = con.smembers(keys.workers()).await.unwrap();
    assert_eq!(members, ids.iter().cloned().collect(), "healed");
    let beat: String = con.hget(keys.heartbeats(), &ids[0]).await.unwrap();
    assert!(time::parse_any(&beat).is_some(), "beaten: {beat}");
    let held: String = con.get(keys.worker(&gone)).await.unwrap();
    assert_eq!(held, record, "the healed slot's record is back");
}

/// Plants a dead slot of `host`/`pid` serving `q`: registered, its heartbeat `hb`, its record
/// holding job `n` as the step writes it, its `:started` and stats.
async fn plant(con: &mut Conn, keys: &Keys, id: &str, hb: &str, q: &str, n: usize) -> String {
    let payload = format!(r#"{{"class":"Job","args":[{n}]}}"#);
    let record =
        format!(r#"{{"queue":"{q}","run_at":"2026/11/29 10:00:00 UTC","payload":{payload}}}"#);
    let _: () = con.sadd(keys.workers(), id).await.unwrap();
    let _: () = con.hset(keys.heartbeats(), id, hb).await.unwrap();
    let _: () = con.set(keys.worker(id), &record).await.unwrap();
    let _: () = con
        .set(keys.worker_started(id), "2026-11-29 09:00:00 +0000")
        .await
        .unwrap();
    let _: () = con.set(keys.stat_processed_by(id), 3).await.unwrap();
    let _: () = con.set(keys.stat_failed_by(id), 1).await.unwrap();
    payload
}

async fn prune_round(at_least_once: bool, prefix: &str) {
    let (_, mut con, keys, queues, _serial) = spread(prefix).await;
    let now = crate::conn::redis_time(&mut con).await.unwrap();
    let old = time::heartbeat(now - chrono::Duration::seconds(400));
    let fresh = time::heartbeat(now);
    let me = slot_id(
        &keys,
        &crate::identity::hostname(),
        std::process::id(),
        0,
        &queues[0],
    );
    // On every master: a slot of another host whose heartbeat expired, and a slot of this
    // host (another tag than the pruner's own id) whose process is gone, heartbeat fresh.
    let mut planted = Vec::new();
    for (n, q) in queues.iter().enumerate() {
        let expired = slot_id(&keys, "elsewhere", 777, n, q);
        let p = plant(&mut con, &keys, &expired, &old, q, n).await;
        planted.push((expired, q.clone(), p, Reason::Expired));
        let local = slot_id(&keys, &crate::identity::hostname(), DEAD_PID, n, q);
        let p = plant(&mut con, &keys, &local, &fresh, q, 100 + n).await;
        planted.push((local, q.clone(), p, Reason::DeadLocal));
    }
    let pruner = Pruner::new(
        keys.clone(),
        std::slice::from_ref(&me),
        std::process::id(),
        Duration::from_secs(300),
        at_least_once,
    )
    .without_second_look();
    let before = calls("fcall");
    let report = pruner.run_once(&mut con).await.expect("prune round");
    // Per dead slot: the job's shared write, the record's slot, the member, the heartbeat.
    assert_eq!(calls("fcall") - before, 4 * planted.len() as u64);
    assert!(report.locked);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    let want = if at_least_once {
        Fate::Requeued
    } else {
        Fate::Failed
    };
    let pruned: BTreeSet<String> = report
        .pruned
        .iter()
        .map(|p| format!("{} {:?} {:?}", p.id, p.reason, p.fate))
        .collect();
    let expected: BTreeSet<String> = planted
        .iter()
        .map(|(id, _, _, r)| format!("{id} {r:?} {want:?}"))
        .collect();
    assert_eq!(pruned, expected);

    let failed: Vec<String> = con.lrange(keys.failed(), 0, -1).await.unwrap();
    if at_least_once {
        assert!(failed.is_empty(), "{failed:?}");
        for (_, q, payload, _) in &planted {
            let listed: Vec<String> = con.lrange(keys.queue(q), 0, -1).await.unwrap();
            assert!(
                listed.contains(payload),
                "{payload} back on {q}: {listed:?}"
            );
        }
        let named: BTreeSet<String> = con.smembers(keys.queues()).await.unwrap();
        assert_eq!(named, queues.iter().cloned().collect());
    } else {
        assert_eq!(failed.len(), planted.len(), "{failed:?}");
        for (id, q, payload, reason) in &planted {
            let entry: Value = failed
                .iter()
                .map(|f| serde_json::from_str::<Value>(f).unwrap())
                .find(|e| e["worker"] == id.as_str())
                .unwrap_or_else(|| panic!("no failure entry for {id}"));
            let (exception, error) = match reason {
                Reason::Expired => (
                    "Resque::PruneDeadWorkerDirtyExit",
                    format!("Worker {id} did not gracefully exit while processing Job"),
                ),
                Reason::DeadLocal => ("Resque::DirtyExit", "Job still being processed".to_string()),
            };
            assert_eq!(entry["exception"], exception);
            assert_eq!(entry["error"], error.as_str());
            assert_eq!(entry["queue"], q.as_str());
            assert_eq!(entry["backtrace"], serde_json::json!([]));
            assert_eq!(
                entry["payload"],
                serde_json::from_str::<Value>(payload).unwrap()
            );
        }
        let failed_count: Option<String> = con.get(keys.stat_failed()).await.unwrap();
        assert_eq!(failed_count, None, "Ruby's unregister counts no failure");
    }
    // Nothing of the dead ids is left; only what recorded their jobs, and the prune lock.
    let mut left = all_keys(&keys);
    left.remove(&keys.pruning_lock());
    let recorded: BTreeSet<String> = if at_least_once {
        queues
            .iter()
            .map(|q| keys.queue(q))
            .chain([keys.queues()])
            .collect()
    } else {
        [keys.failed()].into_iter().collect()
    };
    assert_eq!(left, recorded);
}

#[tokio::test]
async fn a_prune_round_fails_dead_spread_slots_jobs_on_every_master() {
    prune_round(false, "spread-prune-fail").await;
}

#[tokio::test]
async fn a_prune_round_requeues_dead_spread_slots_jobs_under_at_least_once() {
    prune_round(true, "spread-prune-requeue").await;
}

#[tokio::test]
async fn whatever_a_crash_leaves_between_the_per_slot_calls_the_next_round_removes() {
    let (_, mut con, keys, queues, _serial) = spread("spread-crash").await;
    let now = crate::conn::redis_time(&mut con).await.unwrap();
    let old = time::heartbeat(now - chrono::Duration::seconds(400));
    let q = &queues[1];
    let id = |k: usize| slot_id(&keys, "gone", 555, k, q);
    let started = "2026-11-29 09:00:00 +0000";
    // Register cut after the heartbeats, then after the `:started` keys.
    let _: () = con.hset(keys.heartbeats(), id(0), &old).await.unwrap();
    let _: () = con.hset(keys.heartbeats(), id(1), &old).await.unwrap();
    let _: () = con.set(keys.worker_started(&id(1)), started).await.unwrap();
    // Unregister cut after the `SREM`, then after the slot's `DEL`s.
    let _: () = con.hset(keys.heartbeats(), id(2), &old).await.unwrap();
    let _: () = con.set(keys.worker_started(&id(2)), started).await.unwrap();
    let _: () = con.set(keys.stat_processed_by(&id(2)), 7).await.unwrap();
    let _: () = con.hset(keys.heartbeats(), id(3), &old).await.unwrap();
    // A prune cut after its failure entry: the record still holds the job.
    let payload = plant(&mut con, &keys, &id(4), &old, q, 4).await;
    let _: () = con
        .rpush(keys.failed(), "an entry for job 4")
        .await
        .unwrap();
    // A prune cut after the record's slot: the member and heartbeat are left.
    let _: () = con.sadd(keys.workers(), id(5)).await.unwrap();
    let _: () = con.hset(keys.heartbeats(), id(5), &old).await.unwrap();

    let me = slot_id(&keys, "pruner", std::process::id(), 0, q);
    let report = Pruner::new(
        keys.clone(),
        &[me],
        std::process::id(),
        Duration::from_secs(300),
        false,
    )
    .without_second_look()
    .run_once(&mut con)
    .await
    .unwrap();
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert_eq!(report.pruned.len(), 6, "{:?}", report.pruned);
    let mut left = all_keys(&keys);
    left.remove(&keys.pruning_lock());
    assert_eq!(
        left,
        [keys.failed()].into_iter().collect(),
        "nothing else left"
    );
    let failed: Vec<String> = con.lrange(keys.failed(), 0, -1).await.unwrap();
    assert_eq!(failed.len(), 2, "job 4 listed twice at worst: {failed:?}");
    assert!(
        failed[1].contains(&payload),
        "job 4 is in Redis: {failed:?}"
    );
}

#[tokio::test]
async fn on_one_server_registering_and_unregistering_stay_one_call_each() {
    let (_guard, url) = testing::server::start_redis(&[]);
    let mut con = Endpoint::open(&url).unwrap().connect().await.unwrap();
    let keys = Keys::new(testing::namespace("one-call"));
    assert!(!keys.is_spread());
    let ids: Vec<String> = (0..3)
        .map(|k| slot_id(&keys, "vm", 4244, k, &format!("q{k}")))
        .collect();
    let calls = |info: &str, cmd: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{cmd}:calls=")))
            .and_then(|r| r.split(',').next())
            .map_or(0, |n| n.parse().unwrap())
    };
    let stats = |con: &mut Conn| {
        let mut c = con.clone();
        async move {
            let info: String = redis::cmd("INFO")
                .arg("commandstats")
                .query_async(&mut c)
                .await
                .unwrap();
            (calls(&info, "fcall"), calls(&info, "time"))
        }
    };
    // (The library is loaded once first, so a load's retried call is not counted.)
    crate::scripts::load(&mut con).await.unwrap();
    let before = stats(&mut con).await;
    lifecycle::register(&mut con, &keys, &ids, chrono::Utc::now())
        .await
        .unwrap();
    let registered = stats(&mut con).await;
    assert_eq!((registered.0 - before.0, registered.1 - before.1), (1, 1));
    lifecycle::unregister(&mut con, &keys, &ids).await.unwrap();
    let after = stats(&mut con).await;
    assert_eq!((after.0 - registered.0, after.1 - registered.1), (1, 0));
}

#[test]
fn the_scheduler_and_retry_policies_run_on_a_spread_namespace_and_the_rest_stays_refused() {
    use super::config::Config;
    use crate::registry::{Registry, RetryPolicy};
    let scheduler = Config {
        scheduler: true,
        ..Config::default()
    };
    assert!(
        super::spread::refuse(&scheduler, &Registry::new()).is_ok(),
        "RESQ_SCHEDULER is refused on a spread namespace"
    );
    let retries = Registry::new().retry("R", RetryPolicy::fixed(Duration::from_secs(1), 2));
    assert!(
        super::spread::refuse(&scheduler, &retries).is_ok(),
        "retry policies are refused on a spread namespace"
    );
    let jesque = Config {
        jesque_delayed_queues: vec!["later".into()],
        ..Config::default()
    };
    let statused = Registry::new().statused("S");
    for (what, cfg, registry) in [
        ("Jesque delayed", &jesque, &Registry::new()),
        ("resque-status classes", &scheduler, &statused),
    ] {
        let e = super::spread::refuse(cfg, registry).expect_err(what);
        let text = e.to_string();
        assert!(
            text.contains(what) && text.contains("docs/cluster.md"),
            "{what}: {text}"
        );
    }
}

/// The library goes to the node of the key it is loaded for, whichever node the connection
/// used last (where a keyless `FUNCTION LOAD` would go: another task sharing the connection may
/// have moved it since the call that found the library missing).
#[tokio::test]
async fn the_library_is_loaded_on_the_node_of_the_calls_key() {
    let (_, mut con, keys, queues, _serial) = spread("load-at").await;
    let c = cluster();
    let (here, there) = (keys.queue(&queues[0]), keys.queue(&queues[1]));
    assert_ne!(c.owner(&here), c.owner(&there));
    let libraries = |port: u16| -> usize {
        let list: Vec<redis::Value> = redis::cmd("FUNCTION")
            .arg("LIST")
            .query(&mut c.node(port))
            .expect("FUNCTION LIST");
        list.len()
    };
    let _: () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query(&mut c.node(c.owner(&there)))
        .expect("FUNCTION FLUSH");
    assert_eq!(libraries(c.owner(&there)), 0);
    let _: Option<String> = con.get(&here).await.expect("GET");
    crate::scripts::load_at(&mut con, Some(there.as_bytes()))
        .await
        .expect("loaded");
    assert_eq!(libraries(c.owner(&there)), 1, "loaded on the key's node");
    crate::scripts::ensure_loaded(&mut con, &there)
        .await
        .expect("a call there");
}
/// On a spread namespace the worker refuses, before anything is written, a declared limit it
/// cannot enforce there (keyed, rate, weighted), naming docs/cluster.md; a concurrency limit on
/// a queue or a class passes.
#[test]
fn refuses_the_limits_a_spread_namespace_cannot_enforce() {
    use crate::limits::Limit;
    let cfg = super::config::Config::default();
    for ok in [
        Limit::concurrency("q", 5).queue("q"),
        Limit::concurrency("c", 5).class("C"),
        Limit::concurrency("qc", 5).queue("q").class("C"),
    ] {
        let registry = crate::registry::Registry::new().limit(ok.clone());
        assert!(super::spread::refuse(&cfg, &registry).is_ok(), "{ok:?}");
    }
    for refused in [
        Limit::concurrency("k", 5).queue("q").key("{args.0}"),
        Limit::rate("r", 5, Duration::from_secs(1)).queue("q"),
        Limit::concurrency("w", 5).queue("q").weight("C", 2),
        Limit::concurrency("p", 5).queue("q").priority("C", 9),
    ] {
        let registry = crate::registry::Registry::new().limit(refused.clone());
        let e = super::spread::refuse(&cfg, &registry).expect_err("refused");
        let text = e.to_string();
        assert!(
            text.contains("docs/cluster.md") && text.contains(&format!("limit {:?}", refused.name)),
            "{text}"
        );
    }
}

/// Retry entries of a spread slot's outbox (`step::outbox`): one retried at once on a queue of
/// another master, one through the delayed set, one given up — with a failure entry between.
fn retry_entries(keys: &Keys, queues: &[String]) -> (Vec<String>, [String; 3]) {
    use super::step::outbox::RetryEntry;
    let item = format!(r#"{{"class":"Job","args":[2],"queue":"{}"}}"#, queues[0]);
    let now = RetryEntry::Retry {
        key: "resque-retry:Job:now".into(),
        attempt: 1,
        counter_ttl: 100,
        failure: r#"{"error":"now"}"#.into(),
        failure_ttl: 0,
        queue: queues[1].clone(),
        job: r#"{"class":"Job","args":[1]}"#.into(),
        due: 0,
    };
    let later = RetryEntry::Retry {
        key: "resque-retry:Job:later".into(),
        attempt: 0,
        counter_ttl: 100,
        failure: r#"{"error":"later"}"#.into(),
        failure_ttl: 50,
        queue: queues[0].clone(),
        job: item.clone(),
        due: 2_000_000_000,
    };
    let give_up = RetryEntry::GiveUp {
        key: "resque-retry:Job:gone".into(),
        failure: r#"{"error":"gave up"}"#.into(),
    };
    let plain = r#"{"error":"plain"}"#.to_string();
    let _ = keys;
    (
        vec![now.encode(), plain, later.encode(), give_up.encode()],
        [
            r#"{"class":"Job","args":[1]}"#.into(),
            item,
            r#"{"error":"gave up"}"#.into(),
        ],
    )
}

/// What the entries of [`retry_entries`], applied `times` times, leave: the job pushed and filed
/// that many times, the counters set, the given-up one's keys gone.
async fn applied(con: &mut Conn, keys: &Keys, queues: &[String], times: usize, other: &[String]) {
    let [pushed, item, gave] = other else {
        unreachable!()
    };
    let listed: Vec<String> = con.lrange(keys.queue(&queues[1]), 0, -1).await.unwrap();
    assert_eq!(listed, vec![pushed.clone(); times]);
    let named: BTreeSet<String> = con.smembers(keys.queues()).await.unwrap();
    assert!(named.contains(&queues[1]), "{named:?}");
    let counter: Option<String> = con
        .get(keys.retry_attempts("resque-retry:Job:now"))
        .await
        .unwrap();
    assert_eq!(counter.as_deref(), Some("1"));
    let ttl: i64 = con
        .ttl(keys.retry_attempts("resque-retry:Job:now"))
        .await
        .unwrap();
    assert!((1..=100).contains(&ttl), "{ttl}");
    let none: Option<String> = con
        .get(keys.retry_failure("resque-retry:Job:now"))
        .await
        .unwrap();
    assert_eq!(none, None, "a retry at once keeps no failure-<key>");
    let failure: Option<String> = con
        .get(keys.retry_failure("resque-retry:Job:later"))
        .await
        .unwrap();
    assert_eq!(failure.as_deref(), Some(r#"{"error":"later"}"#));
    let bucket: Vec<String> = con
        .lrange(keys.delayed_bucket(2_000_000_000), 0, -1)
        .await
        .unwrap();
    assert_eq!(bucket, vec![item.clone(); times]);
    let members: Vec<String> = con.smembers(keys.timestamps(item)).await.unwrap();
    assert_eq!(members, vec!["delayed:2000000000".to_string()]);
    let score: Option<i64> = con
        .zscore(keys.delayed_schedule(), 2_000_000_000)
        .await
        .unwrap();
    assert_eq!(score, Some(2_000_000_000));
    for k in [
        keys.retry_attempts("resque-retry:Job:gone"),
        keys.retry_failure("resque-retry:Job:gone"),
    ] {
        let v: Option<String> = con.get(&k).await.unwrap();
        assert_eq!(v, None, "{k}");
    }
    let failed: Vec<String> = con.lrange(keys.failed(), 0, -1).await.unwrap();
    assert_eq!(
        failed.iter().filter(|f| *f == gave).count(),
        times,
        "{failed:?}"
    );
}

/// The crash window of a spread retry: the mover applied a slot's retry entries (the counter,
/// `failure-<key>`, the queue or the delayed set, the give-up's failed entry and deletes) and
/// died before trimming the outbox. The next move applies them again and trims: the job is
/// filed twice, never lost; the counters converge.
#[tokio::test]
async fn retry_entries_applied_and_not_trimmed_are_applied_again_and_lose_nothing() {
    use super::step::outbox::RetryEntry;
    let (_, mut con, keys, queues, _serial) = spread("spread-retry-crash").await;
    let id = slot_id(&keys, "elsewhere", 777, 0, &queues[0]);
    let (entries, other) = retry_entries(&keys, &queues);
    // The outbox is in its queue's slot; the keys its entries write are in others.
    let c = cluster();
    let outbox_owner = c.owner(&keys.outbox(&id));
    assert_ne!(outbox_owner, c.owner(&keys.queue(&queues[1])));
    let _: () = con.rpush(keys.outbox(&id), &entries).await.unwrap();
    for k in ["resque-retry:Job:gone"] {
        let _: () = con.set(keys.retry_attempts(k), "1").await.unwrap();
        let _: () = con.set(keys.retry_failure(k), "{}").await.unwrap();
    }
    // Step 1 of a move (every entry applied), then a crash before the trim.
    for e in &entries {
        match RetryEntry::parse(e.as_bytes()) {
            Some(r) => r.apply(&mut con, &keys).await.unwrap(),
            None => {
                let _: () = con.rpush(keys.failed(), e).await.unwrap();
            }
        }
    }
    applied(&mut con, &keys, &queues, 1, &other).await;
    let moved = super::step::spread::move_outboxes(&mut con, &keys, &[id.as_str()])
        .await
        .unwrap();
    assert_eq!(moved, 4);
    applied(&mut con, &keys, &queues, 2, &other).await;
    let left: usize = con.llen(keys.outbox(&id)).await.unwrap();
    assert_eq!(left, 0);
    let failed: Vec<String> = con.lrange(keys.failed(), 0, -1).await.unwrap();
    assert_eq!(
        failed,
        vec![
            r#"{"error":"plain"}"#,
            r#"{"error":"gave up"}"#,
            r#"{"error":"plain"}"#,
            r#"{"error":"gave up"}"#
        ]
    );
    // Nothing more to move.
    let moved = super::step::spread::move_outboxes(&mut con, &keys, &[id.as_str()])
        .await
        .unwrap();
    assert_eq!(moved, 0);
    applied(&mut con, &keys, &queues, 2, &other).await;
}

/// A dead slot's retry entries are applied by the pruner (the outbox of a slot it prunes) and
/// by the round's sweep (the outbox of a slot someone else unregistered).
#[tokio::test]
async fn the_pruner_and_the_sweep_apply_dead_slots_retry_entries() {
    for swept in [false, true] {
        let prefix = if swept {
            "spread-retry-sweep"
        } else {
            "spread-retry-prune"
        };
        let (_, mut con, keys, queues, _serial) = spread(prefix).await;
        let now = crate::conn::redis_time(&mut con).await.unwrap();
        let old = time::heartbeat(now - chrono::Duration::seconds(400));
        let id = slot_id(&keys, "elsewhere", 777, 0, &queues[0]);
        if swept {
            // Unregistered by Ruby: no heartbeat, no record; only the outbox and its index.
            let _: () = con.sadd(keys.outboxes(), &id).await.unwrap();
        } else {
            plant(&mut con, &keys, &id, &old, &queues[0], 5).await;
        }
        let (entries, other) = retry_entries(&keys, &queues);
        let _: () = con.rpush(keys.outbox(&id), &entries).await.unwrap();
        let me = slot_id(
            &keys,
            &crate::identity::hostname(),
            std::process::id(),
            0,
            &queues[0],
        );
        let pruner = Pruner::new(
            keys.clone(),
            std::slice::from_ref(&me),
            std::process::id(),
            Duration::from_secs(300),
            false,
        )
        .without_second_look();
        pruner.run_once(&mut con).await.expect("prune round");
        applied(&mut con, &keys, &queues, 1, &other).await;
        let left: usize = con.llen(keys.outbox(&id)).await.unwrap();
        assert_eq!(left, 0, "{prefix}");
        let indexed: BTreeSet<String> = con.smembers(keys.outboxes()).await.unwrap();
        assert!(!indexed.contains(&id), "{prefix}: {indexed:?}");
        drop(_serial);
    }
}

/// A retry entry that cannot be applied (its queue holds a string) stops its outbox's move
/// there: the failure entry before it is pushed once and trimmed — not pushed again by the moves
/// that keep failing — and once the key is usable the entry and the rest go through.
#[tokio::test]
async fn a_retry_entry_that_cannot_be_applied_holds_its_outbox_without_repeating_the_rest() {
    use super::step::outbox::RetryEntry;
    let (_, mut con, keys, queues, _serial) = spread("spread-retry-wrongtype").await;
    let id = slot_id(&keys, "elsewhere", 777, 0, &queues[0]);
    let retry = RetryEntry::Retry {
        key: "resque-retry:Job:w".into(),
        attempt: 0,
        counter_ttl: 100,
        failure: "{}".into(),
        failure_ttl: 0,
        queue: queues[2].clone(),
        job: r#"{"class":"Job","args":[]}"#.into(),
        due: 0,
    }
    .encode();
    let _: () = con.set(keys.queue(&queues[2]), "not a list").await.unwrap();
    let _: () = con
        .rpush(keys.outbox(&id), &["first", retry.as_str(), "second"])
        .await
        .unwrap();
    for _ in 0..2 {
        let e = super::step::spread::move_outboxes(&mut con, &keys, &[id.as_str()]).await;
        assert!(e.is_err(), "{e:?}");
        let failed: Vec<String> = con.lrange(keys.failed(), 0, -1).await.unwrap();
        assert_eq!(failed, vec!["first"]);
        let left: Vec<String> = con.lrange(keys.outbox(&id), 0, -1).await.unwrap();
        assert_eq!(left, vec![retry.as_str(), "second"]);
    }
    let _: () = con.del(keys.queue(&queues[2])).await.unwrap();
    let moved = super::step::spread::move_outboxes(&mut con, &keys, &[id.as_str()])
        .await
        .unwrap();
    assert_eq!(moved, 2);
    let failed: Vec<String> = con.lrange(keys.failed(), 0, -1).await.unwrap();
    assert_eq!(failed, vec!["first", "second"]);
    let listed: Vec<String> = con.lrange(keys.queue(&queues[2]), 0, -1).await.unwrap();
    assert_eq!(listed, vec![r#"{"class":"Job","args":[]}"#]);
}
