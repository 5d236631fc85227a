//! Workflows against what a hostile production does to them (docs/workflows.md): a member run
//! twice, a batch deleted under its members, batches nested past the bound, a waiting job's
//! record that lost its payload, workflow keys of another type at enqueue. Each: no job lost,
//! no function failing after its first write, each count once.

use crate::support;

use redis::AsyncCommands;
use resq::admin::Admin;
use resq::jobs::{IfDepFailed, State, Track};
use resq::workflows::{Batch, BatchId};
use resq::{Client, JobContext, JobError, Registry};
use serde_json::json;
use std::time::Duration;
use support::Keys;

async fn client(ns: &str) -> Client {
    Client::connect(&support::url(), ns).await.unwrap()
}

/// `Ok` succeeds and `Echo` (the callbacks) records its args in `<ns>:test:echo`, in order.
fn registry(ns: &str) -> Registry {
    let key = format!("{ns}:test:echo");
    let k = key.clone();
    Registry::new()
        .handler("Fail", |_ctx: JobContext| async move {
            Err(JobError::msg("no"))
        })
        .handler("Ok", move |ctx: JobContext| {
            let key = key.clone();
            async move {
                let mut con = support::con().await;
                let line = format!("Ok {}", json!(ctx.args()));
                let _: () = con.rpush(&key, line).await.map_err(JobError::from)?;
                Ok(())
            }
        })
        .handler("Echo", move |ctx: JobContext| {
            let key = k.clone();
            async move {
                let mut con = support::con().await;
                let line = format!("Echo {}", json!(ctx.args()));
                let _: () = con.rpush(&key, line).await.map_err(JobError::from)?;
                Ok(())
            }
        })
}

async fn echoes(ns: &str) -> Vec<String> {
    support::con()
        .await
        .lrange(format!("{ns}:test:echo"), 0, -1)
        .await
        .unwrap()
}

async fn field(key: &str, f: &str) -> Option<String> {
    support::con().await.hget(key, f).await.unwrap()
}

/// A member whose payload is in its queue twice (a copy pushed again by hand, or a failure
/// retried from another tool) runs twice but counts once: `on_success` waits for the other
/// member. (It counted each run: the copy's run made `unsucceeded` 0 and `on_success` fired
/// while the other member had not run.)
#[tokio::test]
async fn a_member_run_twice_counts_as_one_success() {
    let ns = support::namespace("wfh-twice");
    let k = Keys::new(&ns);
    let c = client(&ns).await;
    let batch = Batch::new()
        .on_success("Echo", vec![json!("success")])
        .job("wf", "Ok", vec![json!(1)])
        .job("wf", "Ok", vec![json!(2)]);
    let (bid, _) = c.create_batch(batch).await.unwrap();
    let mut con = support::con().await;
    let q: Vec<String> = con.lrange(k.queue("wf"), 0, -1).await.unwrap();
    assert_eq!(q.len(), 2);
    // The first member, its copy, then the second.
    let _: () = con.del(k.queue("wf")).await.unwrap();
    let _: () = con
        .rpush(k.queue("wf"), &[&q[0], &q[0], &q[1]])
        .await
        .unwrap();
    let w = support::start(
        support::builder(&ns, "wf")
            .concurrency(1)
            .registry(registry(&ns)),
    )
    .await;
    support::eventually(20, "three runs and the callback", || async {
        (echoes(&ns).await.len() >= 4).then_some(())
    })
    .await;
    support::stop(w).await;
    let seen = echoes(&ns).await;
    assert_eq!(
        seen,
        ["Ok [1]", "Ok [1]", "Ok [2]", "Echo [\"success\"]"],
        "on_success after the second member, once"
    );
    let bk = k.batch(bid.as_str());
    assert_eq!(field(&bk, "unsucceeded").await.as_deref(), Some("0"));
    assert_eq!(field(&bk, "pending").await.as_deref(), Some("0"));
}

/// A member that ends after its batch was deleted (by hand, or expired) counts nowhere and
/// makes no batch again. (Its count made a hash of one field, `pending` -1, that `resq
/// batches` listed as running forever.)
#[tokio::test]
async fn a_member_whose_batch_is_gone_makes_no_batch_again() {
    let ns = support::namespace("wfh-gone");
    let k = Keys::new(&ns);
    let c = client(&ns).await;
    let (bid, members) = c
        .create_batch(Batch::new().job("wf", "Ok", vec![json!(1)]))
        .await
        .unwrap();
    let _: () = support::con()
        .await
        .del(k.batch(bid.as_str()))
        .await
        .unwrap();
    let w = support::start(support::builder(&ns, "wf").registry(registry(&ns))).await;
    let done = c
        .wait(&members[0], Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    support::stop(w).await;
    assert_eq!(done.state, State::Completed);
    let exists: bool = support::con()
        .await
        .exists(k.batch(bid.as_str()))
        .await
        .unwrap();
    assert!(!exists, "no batch made again from a member's count");
}

/// Batches nested deeper than 100 levels: the levels past the bound are not counted (and that
/// is said), and the call that ends the member neither fails nor loses it. (A chain of
/// thousands overflowed Lua's stack after the member's record and callbacks were written.)
#[tokio::test]
async fn batches_nested_past_the_bound_are_counted_to_it_and_nothing_fails() {
    let ns = support::namespace("wfh-deep");
    let k = Keys::new(&ns);
    let c = client(&ns).await;
    let (bid, members) = c
        .create_batch(Batch::new().job("wf", "Ok", vec![json!(1)]))
        .await
        .unwrap();
    let chain: Vec<String> = (0..120).map(|_| BatchId::new().to_string()).collect();
    let mut con = support::con().await;
    for (i, b) in chain.iter().enumerate() {
        let mut f = vec![
            ("total", "1".to_string()),
            ("pending", "1".to_string()),
            ("unsucceeded", "1".to_string()),
            ("created_at", "1".to_string()),
            ("queue", "cb".to_string()),
        ];
        if let Some(parent) = chain.get(i + 1) {
            f.push(("parent", parent.clone()));
        }
        let _: () = con.hset_multiple(k.batch(b), &f).await.unwrap();
    }
    let _: () = con
        .hset(k.batch(bid.as_str()), "parent", &chain[0])
        .await
        .unwrap();
    let w = support::start(support::builder(&ns, "wf").registry(registry(&ns))).await;
    let done = c
        .wait(&members[0], Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    support::stop(w).await;
    assert_eq!(done.state, State::Completed);
    assert_eq!(
        field(&k.batch(&chain[99]), "pending").await.as_deref(),
        Some("0")
    );
    assert!(field(&k.batch(&chain[99]), "complete_at").await.is_some());
    assert_eq!(
        field(&k.batch(&chain[100]), "pending").await.as_deref(),
        Some("1")
    );
}

/// A waiting job whose record lost its payload cannot be released: it fails, saying so, and
/// is in the failed index — not gone from every place with its record saying `waiting`.
#[tokio::test]
async fn a_waiting_job_whose_payload_is_gone_fails_instead_of_vanishing() {
    let ns = support::namespace("wfh-nopayload");
    let k = Keys::new(&ns);
    let c = client(&ns).await;
    let dep = c
        .enqueue_class_tracked("wf", "Ok", &[json!(1)], Track::new())
        .await
        .unwrap();
    let w_id = c
        .enqueue_class_tracked("wf", "Ok", &[json!(2)], Track::new().after(dep.clone()))
        .await
        .unwrap();
    let _: () = support::con()
        .await
        .hdel(k.job_record(w_id.as_str()), "payload")
        .await
        .unwrap();
    let w = support::start(support::builder(&ns, "wf").registry(registry(&ns))).await;
    let s = c
        .wait(&w_id, Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    support::stop(w).await;
    assert_eq!(s.state, State::Failed, "{s:?}");
    assert!(
        s.error.as_deref().unwrap_or("").contains("payload"),
        "{s:?}"
    );
    let mut con = support::con().await;
    let waiting: Option<f64> = con
        .zscore(k.job_state("waiting"), w_id.as_str())
        .await
        .unwrap();
    let failed: Option<f64> = con
        .zscore(k.job_state("failed"), w_id.as_str())
        .await
        .unwrap();
    assert!(waiting.is_none() && failed.is_some());
}

/// An enqueue whose workflow keys cannot be written (a parent's children set, the waiting
/// index, a batch's member set of another type) is refused before it writes anything. (It
/// went through and left the child unlisted: cancelling the parent left it queued.)
#[tokio::test]
async fn an_enqueue_whose_workflow_keys_cannot_be_written_is_refused() {
    let ns = support::namespace("wfh-refused");
    let k = Keys::new(&ns);
    let c = client(&ns).await;
    let parent = c
        .enqueue_class_tracked("idle", "Ok", &[], Track::new())
        .await
        .unwrap();
    let (bid, _) = c
        .create_batch(Batch::new().job("idle", "Ok", vec![]))
        .await
        .unwrap();
    let mut con = support::con().await;
    let _: () = con
        .set(format!("{ns}:resq:children:{parent}"), "x")
        .await
        .unwrap();
    let _: () = con.hset(k.job_state("waiting"), "a", "b").await.unwrap();
    let _: () = con
        .set(format!("{}:jobs", k.batch(bid.as_str())), "x")
        .await
        .unwrap();
    let before: usize = con.llen(k.queue("wf")).await.unwrap();
    for track in [
        Track::new().parent(parent.clone()),
        Track::new().after(parent.clone()),
    ] {
        let e = c
            .enqueue_class_tracked("wf", "Ok", &[], track)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("WRONGTYPE"), "{e}");
    }
    let e = c
        .create_batch(Batch::new().job("wf", "Ok", vec![]))
        .await
        .map(|_| ());
    assert!(e.is_ok(), "a new batch has its own keys: {e:?}");
    let after: usize = con.llen(k.queue("wf")).await.unwrap();
    assert_eq!(
        after,
        before + 1,
        "only the new batch's member was enqueued"
    );
    let records: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{ns}:resq:job:*"))
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(
        records.len(),
        3,
        "the parent, the batch's two members: {records:?}"
    );
}

/// One prune round now (Ruby's prune lock, held by the worker's own round at start, taken off).
async fn prune_round(ns: &str) {
    let _: () = support::con()
        .await
        .del(format!("{ns}:pruning_dead_workers_in_progress"))
        .await
        .unwrap();
    let a = Admin::connect(&support::url(), ns).await.unwrap();
    assert!(
        a.prune(Duration::from_secs(300), false)
            .await
            .unwrap()
            .locked
    );
}

async fn unsettled(ns: &str) -> usize {
    support::con()
        .await
        .zcard(Keys::new(ns).unsettled())
        .await
        .unwrap()
}

/// A cascade past the 10,000 ends one call settles: the rest are left to the prune round,
/// which counts them in their batch. (They stayed unsettled for good: the batch never
/// completed.)
#[tokio::test]
async fn a_cascade_past_its_bound_is_finished_by_the_prune_round() {
    let ns = support::namespace("wfh-cascade");
    let k = Keys::new(&ns);
    let c = client(&ns).await;
    let dep = c
        .enqueue_class_tracked("dq", "Fail", &[], Track::new())
        .await
        .unwrap();
    let (bid, _) = c
        .create_batch(Batch::new().job("idle", "Ok", vec![]))
        .await
        .unwrap();
    const N: usize = 10_010;
    for i in 0..N {
        let t = Track::new()
            .after(dep.clone())
            .if_dep_failed(IfDepFailed::Cancel)
            .in_batch(&bid);
        c.enqueue_class_tracked("wf", "Ok", &[json!(i)], t)
            .await
            .unwrap();
    }
    let w = support::start(support::builder(&ns, "dq").registry(registry(&ns))).await;
    let s = c
        .wait(&dep, Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    support::stop(w).await;
    assert_eq!(s.state, State::Failed);
    let bk = k.batch(bid.as_str());
    // The dependency's end and 9,999 of its waiters' in the call (10,000 in all); the other 11
    // still wait in its waiter set, the dependency parked for the round to go on with them.
    assert_eq!(unsettled(&ns).await, 1);
    assert_eq!(field(&bk, "pending").await.as_deref(), Some("12"));
    prune_round(&ns).await;
    assert_eq!(unsettled(&ns).await, 0);
    assert_eq!(
        field(&bk, "pending").await.as_deref(),
        Some("1"),
        "only the idle member"
    );
    let waiting: usize = support::con()
        .await
        .zcard(k.job_state("waiting"))
        .await
        .unwrap();
    assert_eq!(waiting, 0);
}

/// A waiting job whose queue refuses it at its release (a key of another type) stays waiting
/// and is released by the prune round once the key is mended. (It stayed waiting for good.)
#[tokio::test]
async fn a_waiting_job_its_queue_refused_is_released_once_the_queue_is_mended() {
    let ns = support::namespace("wfh-refusedq");
    let k = Keys::new(&ns);
    let c = client(&ns).await;
    let dep = c
        .enqueue_class_tracked("dq", "Ok", &[json!(1)], Track::new())
        .await
        .unwrap();
    let w_id = c
        .enqueue_class_tracked("wq", "Ok", &[json!(2)], Track::new().after(dep.clone()))
        .await
        .unwrap();
    let mut con = support::con().await;
    let _: () = con.set(k.queue("wq"), "garbage").await.unwrap();
    let w = support::start(support::builder(&ns, "dq").registry(registry(&ns))).await;
    c.wait(&dep, Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    support::stop(w).await;
    assert_eq!(
        c.status(&w_id).await.unwrap().unwrap().state,
        State::Waiting
    );
    // Still refused: left again.
    prune_round(&ns).await;
    assert_eq!(unsettled(&ns).await, 1);
    let _: () = con.del(k.queue("wq")).await.unwrap();
    prune_round(&ns).await;
    assert_eq!(unsettled(&ns).await, 0);
    assert_eq!(c.status(&w_id).await.unwrap().unwrap().state, State::Queued);
    let q: Vec<String> = con.lrange(k.queue("wq"), 0, -1).await.unwrap();
    assert_eq!(q.len(), 1);
    assert!(q[0].contains(w_id.as_str()));
}

/// Readers name what they cannot read and go on: a batch whose hash is of another type is
/// listed as `unreadable` naming its key (it was left out silently), a count that is no count
/// is named, and a report whose member set is of another type still shows the batch (it
/// failed outright).
#[tokio::test]
async fn batch_readers_name_what_they_cannot_read_and_go_on() {
    let ns = support::namespace("wfh-readers");
    let k = Keys::new(&ns);
    let c = client(&ns).await;
    let (b1, _) = c
        .create_batch(Batch::new().job("idle", "Ok", vec![]))
        .await
        .unwrap();
    let (b2, _) = c
        .create_batch(Batch::new().job("idle", "Ok", vec![]))
        .await
        .unwrap();
    let mut con = support::con().await;
    let _: () = con.del(k.batch(b1.as_str())).await.unwrap();
    let _: () = con.set(k.batch(b1.as_str()), "x").await.unwrap();
    let _: () = con
        .hset(k.batch(b2.as_str()), "pending", "x")
        .await
        .unwrap();
    let _: () = con.del(k.batch_jobs(b2.as_str())).await.unwrap();
    let _: () = con.set(k.batch_jobs(b2.as_str()), "x").await.unwrap();
    let a = Admin::connect(&support::url(), &ns).await.unwrap();
    let (listed, total) = a.batches(0, 10).await.unwrap();
    assert_eq!((listed.len(), total), (2, 2));
    let one = listed.iter().find(|b| b.id == b1).unwrap();
    assert_eq!(one.phase(), "unreadable");
    assert!(one.unreadable[0].contains(&k.batch(b1.as_str())), "{one:?}");
    let two = listed.iter().find(|b| b.id == b2).unwrap();
    assert_eq!(two.unreadable, ["pending = \"x\""]);
    let report = a.batch_report(&b2).await.unwrap().unwrap();
    assert!(
        report
            .status
            .unreadable
            .iter()
            .any(|u| u.contains(&k.batch_jobs(b2.as_str()))),
        "{report:?}"
    );
}
