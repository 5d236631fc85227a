//! Dead-worker pruning on a *spread* Redis Cluster namespace (one without a hash tag: each
//! queue's list in its own slot, a resq slot's keys in its queue's slot through the `{tag}` of
//! its id `<host>~resq{<tag>}:<pid>-<k>:<queue>`), on a real three-master cluster.
//!
//! Dead slots planted as the worker's step writes them, on queues whose lists are on all
//! three masters (plus a Ruby-style id, whose keys are in unrelated slots), are pruned by one
//! round of `resq prune` (`Admin::prune`, `Pruner::run_once`): their jobs become the failure
//! entries a single Redis gets for the same state, byte for byte but `failed_at`, or go back to
//! the head of their queues under at-least-once; nothing of the dead ids is left; no job is
//! lost; and no node ever answered `CROSSSLOT` (its `INFO errorstats`).

use crate::support;

use super::spread_common::crossslot_errors;

use redis::AsyncCommands;
use resq::admin::Admin;
use std::collections::BTreeSet;
use std::time::Duration;
use support::topology::{self, Cluster};
use support::Keys;

const FIVE_MIN: Duration = Duration::from_secs(300);

/// A pid that is not running (pids are below 2^22 on Linux).
const DEAD_PID: u32 = 4_194_301;

/// This machine's host field of resq ids, without the tag (`<host>~resq`).
fn own_host() -> String {
    let host = hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".to_string());
    let safe: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}~resq")
}

/// The id of slot `k` of `pid` on `host_field` serving `q` on a spread namespace.
fn spread_id(keys: &Keys, host_field: &str, pid: u32, k: usize, q: &str) -> String {
    format!("{host_field}{{{}}}:{pid}-{k}:{q}", keys.queue_tag(q))
}

/// Queues of `keys` whose lists are on every master of `cluster` (one per master).
fn queues_on_every_master(cluster: &Cluster, keys: &Keys) -> Vec<String> {
    let mut owners = BTreeSet::new();
    let mut queues = Vec::new();
    for n in 0.. {
        let q = format!("q{n}");
        let owner = cluster.owner(&keys.queue(&q)).expect("owner").port;
        if owners.insert(owner) {
            queues.push(q);
        }
        if owners.len() == 3 {
            return queues;
        }
    }
    unreachable!()
}

/// Every key of the namespace, on every node.
fn all_keys(cluster: &Cluster, keys: &Keys) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for n in &cluster.nodes {
        let found: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}*", keys.prefix()))
            .query(&mut n.con())
            .expect("KEYS");
        out.extend(found);
    }
    out
}

/// One planted dead worker: its id, queue and payload.
struct Dead {
    id: String,
    queue: String,
    payload: String,
}

/// Plants, through `con`, dead workers on every queue of `queues`: a slot of another host
/// whose heartbeat expired, a slot of this host whose process is gone (heartbeat fresh), and a
/// Ruby worker of another host (its keys in unrelated slots) whose heartbeat expired. Each
/// holds a job in its record as resq's step (or Ruby) writes it.
async fn plant<C: redis::aio::ConnectionLike + Send + Sync>(
    con: &mut C,
    keys: &Keys,
    queues: &[String],
    now: i64,
) -> Vec<Dead> {
    let at = |s: i64| resq::time::heartbeat(chrono::DateTime::from_timestamp(s, 0).unwrap());
    let mut dead = Vec::new();
    for (n, q) in queues.iter().enumerate() {
        let cases = [
            (spread_id(keys, "elsewhere~resq", 777, n, q), at(now - 400)),
            (spread_id(keys, &own_host(), DEAD_PID, n, q), at(now - 5)),
            (format!("rubyhost:{}:{q}", 30_000 + n), at(now - 400)),
        ];
        for (k, (id, hb)) in cases.into_iter().enumerate() {
            let payload = format!(r#"{{"class":"Job","args":[{n},{k}],"x":1.0}}"#);
            let record = format!(
                r#"{{"queue":"{q}","run_at":"2026/11/29 10:00:00 UTC","payload":{payload}}}"#
            );
            let _: () = con.sadd(keys.workers(), &id).await.unwrap();
            let _: () = con.hset(keys.heartbeats(), &id, &hb).await.unwrap();
            let _: () = con.set(keys.worker(&id), &record).await.unwrap();
            let _: () = con
                .set(keys.worker_started(&id), "2026-11-29 09:00:00 +0000")
                .await
                .unwrap();
            let _: () = con.set(keys.stat_processed_by(&id), 3).await.unwrap();
            let _: () = con.set(keys.stat_failed_by(&id), 1).await.unwrap();
            dead.push(Dead {
                id,
                queue: q.clone(),
                payload,
            });
        }
    }
    dead
}

/// The failure entries of `list` without their `failed_at`, sorted.
fn entries_but_time(list: &[String]) -> Vec<String> {
    let mut out: Vec<String> = list
        .iter()
        .map(|e| {
            let at = e.find(r#""failed_at":""#).expect("failed_at") + r#""failed_at":""#.len();
            let end = at + e[at..].find('"').expect("end of failed_at");
            format!("{}…{}", &e[..at], &e[end..])
        })
        .collect();
    out.sort();
    out
}

async fn redis_now<C: redis::aio::ConnectionLike + Send>(con: &mut C) -> i64 {
    let (s, _): (i64, i64) = redis::cmd("TIME").query_async(con).await.unwrap();
    s
}

/// One round on a fresh three-master cluster, checked as the module docs say.
fn round(at_least_once: bool) {
    topology::require("redis-server", "redis-server");
    topology::require("redis-cli", "redis-tools");
    let root = topology::temp_dir("spread-prune");
    let cluster = Cluster::start(&root, 3, 0);
    let url = cluster.url(2);
    let ns = support::namespace("spread-prune");
    let keys = Keys::new(&ns);
    let queues = queues_on_every_master(&cluster, &keys);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let admin = Admin::connect(&url, &ns)
            .await
            .expect("admin on a spread namespace");
        let mut con = admin.con();
        let now = redis_now(&mut con).await;
        let dead = plant(&mut con, &keys, &queues, now).await;
        // The same state on one Redis, pruned by the one-step path.
        let mut one = support::con().await;
        let now_one = redis_now(&mut one).await;
        plant(&mut one, &keys, &queues, now_one).await;

        let out = admin
            .prune(FIVE_MIN, at_least_once)
            .await
            .expect("prune round");
        assert!(out.locked);
        assert!(out.skipped.is_empty(), "skipped: {:?}", out.skipped);
        let pruned: BTreeSet<String> = out.pruned.iter().map(|p| p.id.clone()).collect();
        let planted: BTreeSet<String> = dead.iter().map(|d| d.id.clone()).collect();
        assert_eq!(pruned, planted, "every dead worker pruned");
        let want = if at_least_once { "requeued" } else { "failed" };
        assert!(out.pruned.iter().all(|p| p.job == want), "{:?}", out.pruned);
        let single = Admin::connect(&support::url(), &ns)
            .await
            .unwrap()
            .prune(FIVE_MIN, at_least_once)
            .await
            .unwrap();
        assert_eq!(single.pruned.len(), dead.len());

        let failed: Vec<String> = con.lrange(keys.failed(), 0, -1).await.unwrap();
        let failed_one: Vec<String> = one.lrange(keys.failed(), 0, -1).await.unwrap();
        if at_least_once {
            assert!(failed.is_empty(), "{failed:?}");
            for q in &queues {
                let mut listed: Vec<String> = con.lrange(keys.queue(q), 0, -1).await.unwrap();
                let mut want: Vec<String> = dead
                    .iter()
                    .filter(|d| &d.queue == q)
                    .map(|d| d.payload.clone())
                    .collect();
                listed.sort();
                want.sort();
                assert_eq!(listed, want, "{q}: every job back, exact bytes, once");
            }
            let named: BTreeSet<String> = con.smembers(keys.queues()).await.unwrap();
            assert_eq!(named, queues.iter().cloned().collect());
        } else {
            assert_eq!(failed.len(), dead.len(), "one failure entry per job");
            assert_eq!(
                entries_but_time(&failed),
                entries_but_time(&failed_one),
                "the failure entries one Redis gets, byte for byte"
            );
            let count: Option<String> = con.get(keys.stat_failed()).await.unwrap();
            assert_eq!(count, None, "Ruby's unregister counts no failure");
        }
        // Nothing of the dead ids is left: only what holds their jobs, and Ruby's prune lock.
        let mut left = all_keys(&cluster, &keys);
        left.remove(&keys.pruning_lock());
        let holding: BTreeSet<String> = if at_least_once {
            queues
                .iter()
                .map(|q| keys.queue(q))
                .chain([keys.queues()])
                .collect()
        } else {
            [keys.failed()].into_iter().collect()
        };
        assert_eq!(left, holding);
    });
    assert_eq!(crossslot_errors(&cluster), 0, "a node answered CROSSSLOT");
}

#[test]
fn dead_spread_slots_on_every_master_become_rubys_failures() {
    round(false);
}

#[test]
fn dead_spread_slots_on_every_master_are_requeued_under_at_least_once() {
    round(true);
}

/// An outbox whose slot someone else unregistered — Ruby's pruning or resque-web, which know
/// nothing of outboxes — is moved to `<ns>:failed` by the next prune round, and its id leaves
/// the outbox index; a registered slot's outbox (heartbeat field there) is left alone.
#[test]
fn the_outbox_of_a_slot_someone_else_unregistered_goes_to_the_failed_list() {
    topology::require("redis-server", "redis-server");
    topology::require("redis-cli", "redis-tools");
    let root = topology::temp_dir("spread-outbox");
    let cluster = Cluster::start(&root, 3, 0);
    let ns = support::namespace("spread-outbox");
    let keys = Keys::new(&ns);
    let queues = queues_on_every_master(&cluster, &keys);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let admin = Admin::connect(&cluster.url(1), &ns)
            .await
            .expect("admin on a spread namespace");
        let mut con = admin.con();
        let now = redis_now(&mut con).await;
        let beat = resq::time::heartbeat(chrono::DateTime::from_timestamp(now, 0).unwrap());
        let entry = |id: &str, q: &str| {
            format!(
                r#"{{"failed_at":"2026/11/29 10:00:00 UTC","payload":{{"class":"Job","args":[]}},"exception":"RuntimeError","error":"boom","backtrace":[],"worker":"{id}","queue":"{q}"}}"#
            )
        };
        let (mut gone, mut live) = (Vec::new(), Vec::new());
        for (n, q) in queues.iter().enumerate() {
            // Unregistered by someone else: only its outbox and index entry are left.
            let g = spread_id(&keys, "elsewhere~resq", 777, n, q);
            let _: () = con.sadd(keys.outboxes(), &g).await.unwrap();
            let _: () = con.rpush(keys.outbox(&g), entry(&g, q)).await.unwrap();
            gone.push((g.clone(), entry(&g, q)));
            // Registered, alive: its outbox is its own step's business.
            let l = spread_id(&keys, "elsewhere~resq", 778, n, q);
            let _: () = con.hset(keys.heartbeats(), &l, &beat).await.unwrap();
            let _: () = con.sadd(keys.outboxes(), &l).await.unwrap();
            let _: () = con
                .set(keys.worker_started(&l), "2026-11-29 09:00:00 +0000")
                .await
                .unwrap();
            let _: () = con.sadd(keys.workers(), &l).await.unwrap();
            let _: () = con.rpush(keys.outbox(&l), entry(&l, q)).await.unwrap();
            live.push(l);
        }

        let out = admin.prune(FIVE_MIN, false).await.expect("prune round");
        assert!(out.locked);
        assert!(out.pruned.is_empty(), "{:?}", out.pruned);

        let mut failed: Vec<String> = con.lrange(keys.failed(), 0, -1).await.unwrap();
        failed.sort();
        let mut want: Vec<String> = gone.iter().map(|(_, e)| e.clone()).collect();
        want.sort();
        assert_eq!(failed, want, "each unregistered slot's entry listed, once");
        let indexed: BTreeSet<String> = con.smembers(keys.outboxes()).await.unwrap();
        assert_eq!(indexed, live.iter().cloned().collect::<BTreeSet<_>>());
        for (id, _) in &gone {
            let n: usize = con.llen(keys.outbox(id)).await.unwrap();
            assert_eq!(n, 0, "{id}'s outbox left");
        }
        for id in &live {
            let n: usize = con.llen(keys.outbox(id)).await.unwrap();
            assert_eq!(n, 1, "a live slot's outbox was touched");
        }
    });
    assert_eq!(crossslot_errors(&cluster), 0, "a node answered CROSSSLOT");
}

/// The units a process held in a concurrency limit come back when its slots are no longer
/// registered, whoever unregistered them (Ruby's pruning, resque-web: they know nothing of the
/// shares): a prune round removes the holders whose heartbeat field is gone, and keeps a
/// registered holder's.
#[test]
fn the_limit_units_of_a_holder_someone_else_unregistered_come_back() {
    topology::require("redis-server", "redis-server");
    topology::require("redis-cli", "redis-tools");
    let root = topology::temp_dir("spread-shares");
    let cluster = Cluster::start(&root, 3, 0);
    let ns = support::namespace("spread-shares");
    let keys = Keys::new(&ns);
    let queues = queues_on_every_master(&cluster, &keys);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let admin = Admin::connect(&cluster.url(1), &ns)
            .await
            .expect("admin on a spread namespace");
        let mut con = admin.con();
        let limit = resq::limits::Limit::concurrency("five", 5).queue(&queues[0]);
        let _: () = con
            .hset(
                format!("{ns}:resq:limits"),
                "five",
                serde_json::to_string(&limit).expect("JSON"),
            )
            .await
            .unwrap();
        let now = redis_now(&mut con).await;
        let beat = resq::time::heartbeat(chrono::DateTime::from_timestamp(now, 0).unwrap());
        let gone = spread_id(&keys, "elsewhere~resq", 777, 0, &queues[0]);
        let live = spread_id(&keys, "elsewhere~resq", 778, 0, &queues[0]);
        let _: () = con.hset(keys.heartbeats(), &live, &beat).await.unwrap();
        let shares = format!("{ns}:resq:limit:five:shares");
        let _: () = con.hset(&shares, &gone, 3).await.unwrap();
        let _: () = con.hset(&shares, &live, 2).await.unwrap();

        let out = admin.prune(FIVE_MIN, false).await.expect("prune round");
        assert!(out.locked);
        let left: std::collections::BTreeMap<String, u32> = con.hgetall(&shares).await.unwrap();
        assert_eq!(left, [(live.clone(), 2)].into_iter().collect());
    });
    assert_eq!(crossslot_errors(&cluster), 0, "a node answered CROSSSLOT");
}
