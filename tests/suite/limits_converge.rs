//! Limits converge from where jobs are (issue 34, part D; issue 40, must-have 3): after a live
//! change of a limit's scope, held jobs are judged again within seconds and never lost from
//! view; a limit key deleted or mended (the slots' shares, a limit's count, its held set) is
//! derived again within seconds and never lets the limit be exceeded; idle partitions of keyed
//! limits — rate limits too — are forgotten.

use crate::support;

use redis::AsyncCommands;
use resq::admin::Admin;
use resq::limits::Limit;
use resq::{Client, JobContext, Registry};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::Keys;
use tokio::sync::Semaphore;

/// Jobs of one class running at once, the most seen, and those done.
#[derive(Default)]
struct Gauge {
    now: AtomicUsize,
    max: AtomicUsize,
    done: AtomicUsize,
}

impl Gauge {
    fn running(&self) -> usize {
        self.now.load(Ordering::SeqCst)
    }
    fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }
    fn done(&self) -> usize {
        self.done.load(Ordering::SeqCst)
    }
}

/// A registry whose jobs of each class in `classes` hold their gauge until `gate` gives a
/// permit each.
fn gated(gate: &Arc<Semaphore>, classes: &[(&str, &Arc<Gauge>)]) -> Registry {
    let mut r = Registry::new();
    for (class, gauge) in classes {
        let (gate, gauge) = (gate.clone(), (*gauge).clone());
        r = r.handler(class, move |_ctx: JobContext| {
            let (gate, g) = (gate.clone(), gauge.clone());
            async move {
                let n = g.now.fetch_add(1, Ordering::SeqCst) + 1;
                g.max.fetch_max(n, Ordering::SeqCst);
                gate.acquire().await.expect("gate").forget();
                g.now.fetch_sub(1, Ordering::SeqCst);
                g.done.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        });
    }
    r
}

async fn zcard(key: &str) -> u64 {
    support::con().await.zcard(key).await.unwrap_or(0)
}

async fn units(key: &str) -> u64 {
    let v: Option<u64> = support::con()
        .await
        .hget(key, "__units")
        .await
        .unwrap_or(None);
    v.unwrap_or(0)
}

/// One running `Gated` job holding a limit of 1, three held behind it; then `change` is
/// applied live. Every held job is judged again at once: the three run while the first still
/// does (the new scope does not hold them); two `Other` jobs of `queue` that the new scope
/// covers never run at once.
async fn re_judged_after(what: &str, queue: &str, change: impl Fn(Limit) -> Limit) {
    let ns = support::namespace(&format!("lim-scope-{what}"));
    let admin = Admin::connect(&support::url(), &ns).await.unwrap();
    let limit = Limit::concurrency("one", 1).class("Gated").queue("default");
    admin.set_limit(&limit).await.unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let (gated_g, other_g) = (Arc::new(Gauge::default()), Arc::new(Gauge::default()));
    let registry = gated(&gate, &[("Gated", &gated_g), ("Other", &other_g)]);
    let c = Client::connect(&support::url(), &ns).await.unwrap();
    for i in 0..4 {
        c.enqueue_class("Gated", &[json!(format!("k{i}"))])
            .await
            .unwrap();
    }
    let w = support::start(
        support::builder(&ns, "default,other")
            .concurrency(8)
            .registry(registry),
    )
    .await;
    let keys = Keys::new(&ns);
    let held = keys.limit_held("one", None);
    support::eventually(20, "one running, three held", || async {
        (gated_g.running() == 1 && zcard(&held).await == 3).then_some(())
    })
    .await;
    let changed = Instant::now();
    admin.set_limit(&change(limit.clone())).await.unwrap();
    support::eventually(20, "the held jobs to run", || async {
        (gated_g.running() == 4).then_some(())
    })
    .await;
    let took = changed.elapsed();
    assert_eq!(zcard(&held).await, 0, "{what}: nothing left held");
    // Two jobs the new scope covers (as one partition): never both at once.
    for _ in 0..2 {
        c.enqueue_to(queue, "Other", &[json!("same")])
            .await
            .unwrap();
    }
    gate.add_permits(100);
    support::eventually(20, "every job", || async {
        (gated_g.done() == 4 && other_g.done() == 2).then_some(())
    })
    .await;
    support::stop(w).await;
    assert!(
        other_g.max() <= 1,
        "{what}: {} ran at once under a limit of 1",
        other_g.max()
    );
    println!("{what}: held jobs running {took:?} after the change");
}

#[tokio::test]
async fn a_class_change_re_judges_held_jobs_at_once() {
    re_judged_after("class", "default", |l| Limit {
        class: Some("Other".into()),
        ..l
    })
    .await;
}

#[tokio::test]
async fn a_queue_change_re_judges_held_jobs_at_once() {
    re_judged_after("queue", "other", |l| Limit {
        queue: Some("other".into()),
        class: None,
        ..l
    })
    .await;
}

#[tokio::test]
async fn a_key_added_re_judges_held_jobs_at_once() {
    re_judged_after("key", "default", |l| {
        Limit { class: None, ..l }.key("{args.0}")
    })
    .await;
}

#[tokio::test]
async fn a_removed_limit_releases_what_it_held_at_once() {
    let ns = support::namespace("lim-scope-removed");
    let admin = Admin::connect(&support::url(), &ns).await.unwrap();
    admin
        .set_limit(&Limit::concurrency("one", 1).class("Gated"))
        .await
        .unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let g = Arc::new(Gauge::default());
    let c = Client::connect(&support::url(), &ns).await.unwrap();
    for _ in 0..3 {
        c.enqueue_class("Gated", &[]).await.unwrap();
    }
    let w = support::start(
        support::builder(&ns, "default")
            .concurrency(4)
            .registry(gated(&gate, &[("Gated", &g)])),
    )
    .await;
    let held = Keys::new(&ns).limit_held("one", None);
    support::eventually(20, "one running, two held", || async {
        (g.running() == 1 && zcard(&held).await == 2).then_some(())
    })
    .await;
    assert!(admin.clear_limit("one", false).await.unwrap());
    support::eventually(20, "the held jobs to run", || async {
        (g.running() == 3).then_some(())
    })
    .await;
    gate.add_permits(10);
    support::eventually(20, "every job", || async { (g.done() == 3).then_some(()) }).await;
    support::stop(w).await;
}

/// A held member as limits_held.lua writes it.
fn member(queue: &str, name: &str, payload: &str) -> String {
    format!("1.000001\t{queue}\t1\t{name}\t{payload}")
}

#[tokio::test]
async fn held_jobs_are_listed_under_their_limit_whatever_its_key_is_now() {
    // No worker: jobs held under the limit's earlier scope stay where they are, and the
    // report lists them under the limit (the unpartitioned keys of a keyed limit, the
    // partitions of an unkeyed one).
    let ns = support::namespace("lim-visible");
    let admin = Admin::connect(&support::url(), &ns).await.unwrap();
    let keys = Keys::new(&ns);
    let mut con = support::con().await;
    let payload = r#"{"class":"A","args":["x"]}"#;
    // Written as a worker's declaration would be (no re-judging: no worker runs to do it).
    let def = |l: &Limit| serde_json::to_string(l).unwrap();
    let keyed = Limit::concurrency("keyed", 1).class("A").key("{args.0}");
    let unkeyed = Limit::concurrency("unkeyed", 1).class("A");
    let _: () = con
        .hset(keys.limits_declared(), "keyed", def(&keyed))
        .await
        .unwrap();
    let _: () = con
        .hset(keys.limits_declared(), "unkeyed", def(&unkeyed))
        .await
        .unwrap();
    let _: () = con
        .zadd(
            keys.limit_held("keyed", None),
            member("default", "keyed", payload),
            1,
        )
        .await
        .unwrap();
    let _: () = con
        .zadd(
            keys.limit_held("unkeyed", Some("x")),
            member("default", "unkeyed", payload),
            1,
        )
        .await
        .unwrap();
    let _: () = con.sadd(keys.limit_parts("unkeyed"), "x").await.unwrap();
    let reports = admin.limit_reports().await.unwrap();
    for name in ["keyed", "unkeyed"] {
        let r = reports.iter().find(|r| r.limit.name == name).unwrap();
        assert_eq!(r.held(), 1, "{name}: {:?}", r.partitions);
    }
    let out = support::cli::json_of(&ns, &["limits", "list", "--json"]).await;
    let held: Vec<u64> = out["limits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            l["partitions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["held"].as_u64().unwrap())
                .sum()
        })
        .collect();
    assert_eq!(held, [1, 1], "{out}");
}

/// Two `Gated` jobs hold a limit of 2, three are held; `break_it` is then done to the limit's
/// keys (and undone) while they run, and says whether it let the two end (else they end right
/// after) and how many jobs it enqueued. The limit never runs more than 2, and two held jobs
/// run within seconds of the two ending, with no prune round.
async fn converges_after<F>(what: &str, break_it: F)
where
    F: AsyncFnOnce(&Keys, &Arc<Semaphore>) -> (bool, usize),
{
    let ns = support::namespace(&format!("lim-mend-{what}"));
    let admin = Admin::connect(&support::url(), &ns).await.unwrap();
    admin
        .set_limit(&Limit::concurrency("pair", 2).class("Gated"))
        .await
        .unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let g = Arc::new(Gauge::default());
    let c = Client::connect(&support::url(), &ns).await.unwrap();
    for _ in 0..5 {
        c.enqueue_class("Gated", &[]).await.unwrap();
    }
    let w = support::start(
        support::builder(&ns, "default")
            .concurrency(6)
            .registry(gated(&gate, &[("Gated", &g)])),
    )
    .await;
    let keys = Keys::new(&ns);
    let held = keys.limit_held("pair", None);
    support::eventually(20, "two running, three held", || async {
        (g.running() == 2 && zcard(&held).await == 3).then_some(())
    })
    .await;
    let (ended, extra) = break_it(&keys, &gate).await;
    if !ended {
        gate.add_permits(2);
    }
    let from = Instant::now();
    support::eventually(30, "two more to run", || async {
        (g.done() == 2 && g.running() == 2).then_some(())
    })
    .await;
    let took = from.elapsed();
    gate.add_permits(100);
    support::eventually(30, "every job", || async {
        (g.done() == 5 + extra && zcard(&held).await == 0).then_some(())
    })
    .await;
    support::stop(w).await;
    assert!(g.max() <= 2, "{what}: {} ran under a limit of 2", g.max());
    let mut con = support::con().await;
    let sharing: u64 = con.hlen(keys.sharing()).await.unwrap();
    assert_eq!(
        (units(&keys.limit_holders("pair", None)).await, sharing),
        (0, 0),
        "{what}: every share back"
    );
    println!("{what}: two held jobs running {took:?} after the keys were mended");
}

/// Waits until no slot of the namespace runs a job and `<ns>:resq:sharing` has `entries`.
async fn none_running(keys: &Keys, entries: Option<u64>) {
    support::eventually(20, "the running jobs to end", || async {
        let mut con = support::con().await;
        let workers: Vec<String> = con.smembers(keys.workers()).await.unwrap();
        let mut running = 0;
        for w in workers {
            let r: bool = con.exists(keys.worker(&w)).await.unwrap();
            running += usize::from(r);
        }
        let n: Option<u64> = con.hlen(keys.sharing()).await.ok();
        (running == 0 && entries.is_none_or(|e| n == Some(e))).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_sharing_hash_of_another_type_then_deleted_never_freezes_the_limit() {
    converges_after("sharing", async |keys: &Keys, gate: &Arc<Semaphore>| {
        let mut con = support::con().await;
        let sharing = keys.sharing();
        let _: () = con.del(&sharing).await.unwrap();
        let _: () = con.set(&sharing, "not a hash").await.unwrap();
        // The two running jobs end while it is so: their shares cannot come back.
        gate.add_permits(2);
        none_running(keys, None).await;
        let _: () = con.del(&sharing).await.unwrap();
        (true, 0)
    })
    .await;
}

#[tokio::test]
async fn a_sharing_hash_deleted_while_jobs_run_never_freezes_the_limit() {
    converges_after(
        "sharing-running",
        async |keys: &Keys, _gate: &Arc<Semaphore>| {
            let mut con = support::con().await;
            let _: () = con.del(keys.sharing()).await.unwrap();
            (false, 0)
        },
    )
    .await;
}

#[tokio::test]
async fn a_count_of_another_type_then_deleted_is_derived_and_never_exceeded() {
    converges_after("holders", async |keys: &Keys, _gate: &Arc<Semaphore>| {
        let mut con = support::con().await;
        let holders = keys.limit_holders("pair", None);
        let _: () = con.del(&holders).await.unwrap();
        let _: () = con.set(&holders, "not a hash").await.unwrap();
        let _: () = con.del(&holders).await.unwrap();
        // New jobs arrive while the two run: they are held, not run as a third and fourth.
        let c = Client::connect(&support::url(), keys.namespace())
            .await
            .unwrap();
        for _ in 0..2 {
            c.enqueue_class("Gated", &[]).await.unwrap();
        }
        let held = keys.limit_held("pair", None);
        support::eventually(20, "the new jobs held", || async {
            (zcard(&held).await == 5).then_some(())
        })
        .await;
        (false, 2)
    })
    .await;
}

#[tokio::test]
async fn a_held_set_of_another_type_while_jobs_end_then_mended_converges_in_seconds() {
    converges_after("held", async |keys: &Keys, gate: &Arc<Semaphore>| {
        let mut con = support::con().await;
        let held = keys.limit_held("pair", None);
        let backup = format!("{held}:backup");
        let _: () = con.rename(&held, &backup).await.unwrap();
        let _: () = con.set(&held, "not a zset").await.unwrap();
        // The two end while it is so: their shares cannot come back (nothing is written).
        gate.add_permits(2);
        none_running(keys, Some(2)).await;
        let _: () = con.del(&held).await.unwrap();
        let _: () = con.rename(&backup, &held).await.unwrap();
        (true, 0)
    })
    .await;
}

#[tokio::test]
async fn idle_partitions_of_keyed_limits_are_forgotten() {
    // A keyed rate limit and a keyed concurrency limit, each over 20 partitions: once their
    // jobs ran and their windows passed, no partition is left (nothing to list, nothing to
    // read).
    let ns = support::namespace("lim-forget");
    let admin = Admin::connect(&support::url(), &ns).await.unwrap();
    admin
        .set_limit(
            &Limit::rate("rated", 5, Duration::from_millis(200))
                .class("R")
                .key("{args.0}"),
        )
        .await
        .unwrap();
    admin
        .set_limit(
            &Limit::rate("sliding", 5, Duration::from_millis(200))
                .sliding()
                .class("S")
                .key("{args.0}"),
        )
        .await
        .unwrap();
    admin
        .set_limit(&Limit::concurrency("conc", 1).class("C").key("{args.0}"))
        .await
        .unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let mut registry = Registry::new();
    for class in ["R", "S", "C"] {
        let done = done.clone();
        registry = registry.handler(class, move |_ctx: JobContext| {
            let done = done.clone();
            async move {
                done.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        });
    }
    let c = Client::connect(&support::url(), &ns).await.unwrap();
    for i in 0..20 {
        for class in ["R", "S", "C"] {
            c.enqueue_class(class, &[json!(format!("p{i}"))])
                .await
                .unwrap();
        }
    }
    let w = support::start(
        support::builder(&ns, "default")
            .concurrency(4)
            .registry(registry),
    )
    .await;
    support::eventually(30, "every job", || async {
        (done.load(Ordering::SeqCst) == 60).then_some(())
    })
    .await;
    let keys = Keys::new(&ns);
    support::eventually(30, "every partition forgotten", || async {
        let mut con = support::con().await;
        let mut left = 0u64;
        for name in ["rated", "sliding", "conc"] {
            let n: u64 = con.scard(keys.limit_parts(name)).await.unwrap();
            left += n;
        }
        (left == 0).then_some(())
    })
    .await;
    support::stop(w).await;
    let mut con = support::con().await;
    let left: Vec<String> = con.keys(format!("{ns}:resq:limit:*:p*")).await.unwrap();
    assert!(left.is_empty(), "partition keys left: {left:?}");
}
