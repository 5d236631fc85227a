//! Issue 34 B and C: workflow state that a second end could move again, and calls whose work
//! grew with the fan-out. A dependency that ended before its waiter was enqueued (and ends
//! again) does not count twice; a member whose batch is gone does not make the batch again; an
//! ended dependency's waiter set of another type does not refuse (or strand) an enqueue; a
//! cancel whose children have many waiting jobs settles at most 10,000 ends in its call and
//! the prune rounds settle the rest, each once; `failed retry --all` retries the entries that
//! were there when it started.

use crate::support;

use redis::AsyncCommands;
use resq::admin::{Admin, Selector};
use resq::jobs::{Cancelled, IfDepFailed, JobId, Track};
use resq::workflows::Batch;
use resq::Client;
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;
use support::Keys;

async fn client(ns: &str) -> Client {
    Client::connect(&support::url(), ns).await.unwrap()
}

async fn admin(ns: &str) -> Admin {
    Admin::connect(&support::url(), ns).await.unwrap()
}

async fn fields(ns: &str, id: &JobId) -> HashMap<String, String> {
    support::con()
        .await
        .hgetall(Keys::new(ns).job_record(id.as_str()))
        .await
        .unwrap()
}

async fn state(ns: &str, id: &JobId) -> String {
    fields(ns, id)
        .await
        .get("state")
        .cloned()
        .unwrap_or_default()
}

async fn prune_round(ns: &str) {
    let _: () = support::con()
        .await
        .del(Keys::new(ns).pruning_lock())
        .await
        .unwrap();
    admin(ns)
        .await
        .prune(Duration::from_secs(300), false)
        .await
        .unwrap();
}

/// `--after A --after B` with A ended already: A failing again (its failure retried) does not
/// count for the job again; it waits for B.
#[tokio::test]
async fn a_dependency_that_ends_again_does_not_count_twice() {
    let ns = support::namespace("derived-deps");
    let c = client(&ns).await;
    let _w = support::WorkerProc::start(&support::url(), &ns, 1, &[("QUEUES", "a")]);
    let a = c
        .enqueue_class_tracked("a", "Fail", &[json!("first")], Track::new())
        .await
        .unwrap();
    let b = c
        .enqueue_class_tracked("b", "Noop", &[], Track::new())
        .await
        .unwrap();
    support::eventually(20, "A failed", || async {
        (state(&ns, &a).await == "failed").then_some(())
    })
    .await;
    let w = c
        .enqueue_class_tracked(
            "after",
            "Noop",
            &[],
            Track::new().after(a.clone()).after(b.clone()),
        )
        .await
        .unwrap();
    assert_eq!(state(&ns, &w).await, "waiting");
    // A runs again and fails again.
    let out = admin(&ns)
        .await
        .retry_failures(&Selector::All)
        .await
        .unwrap();
    assert_eq!(out.done, 1, "{out:?}");
    support::eventually(20, "A failed again", || async {
        let f = fields(&ns, &a).await;
        (f.get("state").map(String::as_str) == Some("failed")
            && f.get("attempts").map(String::as_str) == Some("2"))
        .then_some(())
    })
    .await;
    let f = fields(&ns, &w).await;
    assert_eq!(f["state"], "waiting", "B has not run: {f:?}");
    assert_eq!(f["deps_left"], "1", "{f:?}");
    let q: u64 = support::con()
        .await
        .llen(Keys::new(&ns).queue("after"))
        .await
        .unwrap();
    assert_eq!(q, 0);
}

/// A member ending after its batch's hash is gone counts nowhere: no hash is made again.
#[tokio::test]
async fn a_member_of_a_gone_batch_does_not_make_it_again() {
    let ns = support::namespace("derived-gone");
    let c = client(&ns).await;
    let k = Keys::new(&ns);
    let (bid, members) = c
        .create_batch(
            Batch::new()
                .on_death("Dead", vec![])
                .job("nobody", "Noop", vec![]),
        )
        .await
        .unwrap();
    let _: () = support::con()
        .await
        .del(k.batch(bid.as_str()))
        .await
        .unwrap();
    assert_eq!(c.cancel(&members[0]).await.unwrap(), Cancelled::Cancelled);
    let exists: bool = support::con()
        .await
        .exists(k.batch(bid.as_str()))
        .await
        .unwrap();
    assert!(!exists, "the batch was made again");
    let (listed, _) = admin(&ns).await.batches(0, 10).await.unwrap();
    assert!(listed.iter().all(|b| b.phase() != "running"), "{listed:?}");
}

/// An ended dependency's waiter set of another type is not in the way (nothing is written
/// there); a live one's is refused before any write, naming the key.
#[tokio::test]
async fn waiter_sets_of_another_type() {
    let ns = support::namespace("derived-wrongtype");
    let c = client(&ns).await;
    let k = Keys::new(&ns);
    let ended = c
        .enqueue_class_tracked("x", "Noop", &[], Track::new())
        .await
        .unwrap();
    assert_eq!(c.cancel(&ended).await.unwrap(), Cancelled::Cancelled);
    let live = c
        .enqueue_class_tracked("x", "Noop", &[], Track::new())
        .await
        .unwrap();
    let mut con = support::con().await;
    let _: () = con
        .set(k.job_waiters(ended.as_str()), "in the way")
        .await
        .unwrap();
    let w = c
        .enqueue_class_tracked(
            "after",
            "Noop",
            &[],
            Track::new().after(ended.clone()).after(live.clone()),
        )
        .await
        .unwrap();
    assert_eq!(state(&ns, &w).await, "waiting");
    let _: () = con.del(k.job_waiters(ended.as_str())).await.unwrap();
    let _: () = con
        .set(k.job_waiters(live.as_str()), "in the way")
        .await
        .unwrap();
    let before: u64 = con.zcard(k.job_state("waiting")).await.unwrap();
    let e = c
        .enqueue_class_tracked("after", "Noop", &[], Track::new().after(live.clone()))
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains(&k.job_waiters(live.as_str())),
        "names the key: {e}"
    );
    let after: u64 = con.zcard(k.job_state("waiting")).await.unwrap();
    assert_eq!(before, after, "nothing written");
}

/// A cancel whose children have 12,000 jobs waiting on them: its call ends at most 10,000
/// (the rest still waiting, parked), the command succeeds, and the prune round ends the rest,
/// each once.
#[tokio::test]
async fn a_cancel_settles_at_most_ten_thousand_ends_in_its_call() {
    let ns = support::namespace("derived-cancel");
    let c = client(&ns).await;
    let k = Keys::new(&ns);
    let parent = c
        .enqueue_class_tracked("nobody", "Noop", &[], Track::new())
        .await
        .unwrap();
    const CHILDREN: usize = 3;
    const EACH: usize = 4_000;
    let mut kids = Vec::new();
    for _ in 0..CHILDREN {
        kids.push(
            c.enqueue_class_tracked("nobody", "Noop", &[], Track::new().parent(parent.clone()))
                .await
                .unwrap(),
        );
    }
    for kid in &kids {
        for i in 0..EACH {
            c.enqueue_class_tracked(
                "after",
                "Noop",
                &[json!(i)],
                Track::new()
                    .after(kid.clone())
                    .if_dep_failed(IfDepFailed::Cancel),
            )
            .await
            .unwrap();
        }
    }
    let mut con = support::con().await;
    let waiting: u64 = con.zcard(k.job_state("waiting")).await.unwrap();
    assert_eq!(waiting as usize, CHILDREN * EACH);
    assert_eq!(c.cancel(&parent).await.unwrap(), Cancelled::Cancelled);
    let cancelled: u64 = con.zcard(k.job_state("cancelled")).await.unwrap();
    assert!(
        cancelled <= 10_001 + CHILDREN as u64,
        "one call ended {cancelled} jobs"
    );
    let waiting: u64 = con.zcard(k.job_state("waiting")).await.unwrap();
    assert!(waiting > 0, "the rest is left to the prune round");
    prune_round(&ns).await;
    let waiting: u64 = con.zcard(k.job_state("waiting")).await.unwrap();
    assert_eq!(waiting, 0);
    let cancelled: u64 = con.zcard(k.job_state("cancelled")).await.unwrap();
    assert_eq!(cancelled as usize, 1 + CHILDREN + CHILDREN * EACH);
    for kid in &kids {
        assert_eq!(state(&ns, kid).await, "cancelled");
    }
    let unsettled: u64 = con.zcard(k.unsettled()).await.unwrap();
    assert_eq!(unsettled, 0);
    let q: u64 = con.llen(k.queue("after")).await.unwrap();
    assert_eq!(q, 0, "none released to run");
}

/// `failed retry --all` retries the entries there when it started (Ruby's `requeue_all`), not
/// the failures its own retries append while it goes: 301 entries of a job that fails at once,
/// a worker failing them again as they are retried, 301 retried.
#[tokio::test]
async fn retry_all_retries_what_was_there_when_it_started() {
    let ns = support::namespace("derived-retryall");
    let k = Keys::new(&ns);
    let mut con = support::con().await;
    const N: usize = 301;
    for i in 0..N {
        let entry = json!({
            "failed_at": "2026/01/01 00:00:00 UTC",
            "payload": {"class": "Fail", "args": [format!("again {i}")]},
            "exception": "RuntimeError", "error": "failed", "backtrace": [],
            "worker": "h:1:fq", "queue": "fq",
        });
        let _: () = con.rpush(k.failed(), entry.to_string()).await.unwrap();
    }
    let _w = support::WorkerProc::start(&support::url(), &ns, 4, &[("QUEUES", "fq")]);
    let out = admin(&ns)
        .await
        .retry_failures(&Selector::All)
        .await
        .unwrap();
    assert_eq!(out.done, N, "{:?}", out.skipped);
}

/// `resq` with a small workflow budget (`RESQ_FLOW_BUDGET`: 100 ends a call, 1,000 records
/// read), so a tree larger than what one call settles is small enough to build here.
fn small_budget(ns: &str, args: &[&str]) -> std::process::Output {
    let out = support::cli::cmd(ns, args)
        .env("RESQ_FLOW_BUDGET", "100")
        .output()
        .expect("run resq");
    assert!(
        out.status.success(),
        "resq {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Issue 34: a cancelled tree larger than one call settles goes on over later calls from where
/// each walk stopped, until done — a job with more children than one call may read (1,500
/// under a budget reading 1,000) is not read again from its first child each time — and the
/// cancel says what it left to settle, and the command to watch it.
#[tokio::test]
async fn a_parked_child_tree_larger_than_one_call_is_finished_by_later_rounds() {
    let ns = support::namespace("derived-tree");
    let c = client(&ns).await;
    let k = Keys::new(&ns);
    let parent = c
        .enqueue_class_tracked("nobody", "Noop", &[], Track::new())
        .await
        .unwrap();
    let child = c
        .enqueue_class_tracked("nobody", "Noop", &[], Track::new().parent(parent.clone()))
        .await
        .unwrap();
    const GRANDCHILDREN: u64 = 1_500;
    for i in 0..GRANDCHILDREN {
        c.enqueue_class_tracked(
            "nobody",
            "Noop",
            &[json!(i)],
            Track::new().parent(child.clone()),
        )
        .await
        .unwrap();
    }
    let out = small_budget(&ns, &["job", "cancel", parent.as_str()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("cancelled {parent}")), "{text}");
    assert!(
        text.contains("still settling") && text.contains("the children of 1 job"),
        "the cancel says what is left: {text}"
    );
    assert!(text.contains("resq prune") && text.contains("resq jobs --state cancelled"));
    let mut con = support::con().await;
    let mut last: u64 = con.zcard(k.job_state("cancelled")).await.unwrap();
    assert!(last <= 2 + 100, "one call: {last}");
    let mut rounds = 0;
    while last < 2 + GRANDCHILDREN {
        rounds += 1;
        assert!(rounds <= 4, "not finished after 4 rounds: {last} cancelled");
        let _: () = con.del(k.pruning_lock()).await.unwrap();
        small_budget(&ns, &["prune"]);
        let now: u64 = con.zcard(k.job_state("cancelled")).await.unwrap();
        assert!(now > last, "round {rounds} made no progress ({now})");
        // (10 calls a round, 100 ends each, give or take one SSCAN step.)
        assert!(now - last <= 10 * 300, "round {rounds}: {}", now - last);
        last = now;
    }
    assert!(rounds >= 2, "the tree was larger than one round");
    assert_eq!(last, 2 + GRANDCHILDREN);
    let unsettled: u64 = con.zcard(k.unsettled()).await.unwrap();
    assert_eq!(unsettled, 0, "nothing left parked");
    // A cancel that leaves nothing says nothing of settling.
    let lone = c
        .enqueue_class_tracked("nobody", "Noop", &[], Track::new())
        .await
        .unwrap();
    let out = small_budget(&ns, &["--json", "job", "cancel", lone.as_str()]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["settling"], json!({"ends": 0, "jobs": 0}), "{v}");
}

/// Issue 34: the library refuses a child of a parent that is no tracked job, or has ended,
/// with a typed error and nothing written — the rule `resq enqueue --parent` applies too.
#[tokio::test]
async fn a_child_of_an_unknown_or_ended_parent_is_refused() {
    let ns = support::namespace("derived-parent");
    let c = client(&ns).await;
    let unknown = JobId::new();
    let e = c
        .enqueue_class_tracked("q", "Noop", &[], Track::new().parent(unknown.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, resq::Error::Parent(why) if why.contains(unknown.as_str())),
        "{e:?}"
    );
    let ended = c
        .enqueue_class_tracked("q", "Noop", &[], Track::new())
        .await
        .unwrap();
    assert_eq!(c.cancel(&ended).await.unwrap(), Cancelled::Cancelled);
    let e = c
        .enqueue_class_tracked("q", "Noop", &[], Track::new().parent(ended.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, resq::Error::Parent(why) if why.contains("has ended")),
        "{e:?}"
    );
    let q: u64 = support::con()
        .await
        .llen(Keys::new(&ns).queue("q"))
        .await
        .unwrap();
    assert_eq!(q, 1, "only the cancelled parent's own payload");
    // A live parent is taken.
    let live = c
        .enqueue_class_tracked("q", "Noop", &[], Track::new())
        .await
        .unwrap();
    c.enqueue_class_tracked("q", "Noop", &[], Track::new().parent(live))
        .await
        .unwrap();
    // The CLI says it of its flag.
    let o = support::cli::resq(
        &ns,
        &["enqueue", "--track", "--parent", ended.as_str(), "A"],
    )
    .await;
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--parent") && err.contains("has ended"),
        "{err}"
    );
}
