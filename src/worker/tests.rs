//! The step script and the extended completion, driven directly: resend safety of every
//! transition, and a batch of several slots' steps being each slot's own step.

use super::step::{
    call_step, Completion, JobRef, QueueKeys, Reply, StepReply, StepRequest, Stepper,
};
use crate::keys::Keys;
use crate::testing;
use crate::{JobContext, JobError, Registry, RetryPolicy};
use redis::AsyncCommands;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// A registry whose `class` handler fails its first `fails` runs.
fn flaky(class: &str, fails: usize, policy: RetryPolicy) -> Registry {
    let left = Arc::new(std::sync::atomic::AtomicUsize::new(fails));
    Registry::new()
        .handler(class, move |_ctx: JobContext| {
            let left = left.clone();
            async move {
                if left.load(std::sync::atomic::Ordering::SeqCst) > 0 {
                    left.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    return Err(JobError::msg("flaky"));
                }
                Ok(())
            }
        })
        .retry(class, policy)
}

/// resque-retry's logical key of `class` with one arg `arg`.
fn retry_key(class: &str, arg: &str) -> String {
    Keys::resque_retry_logical(
        class,
        crate::registry::retry::retry_identifier(&[json!(arg.parse::<i64>().unwrap_or(0))])
            .as_deref(),
    )
}

/// The value of `key` on the test server.
async fn get(key: &str) -> Option<String> {
    testing::con().await.get(key).await.unwrap()
}

#[tokio::test]
async fn the_step_is_safe_to_resend() {
    let ns = testing::namespace("resend");
    let keys = Keys::new(&ns);
    let mut con = testing::con().await;
    for i in 0..2 {
        let _: () = con
            .rpush(keys.queue("q"), format!(r#"{{"class":"A","args":[{i}]}}"#))
            .await
            .unwrap();
    }
    let stepper = Stepper::new(&keys, "h~resq:1-0:q", true);
    let queues = Arc::new(QueueKeys::new(&keys, &["q".to_string()]));
    let first = stepper
        .call_alone(&mut con, None, true, &queues)
        .await
        .unwrap()
        .reply;
    // The reply was "lost": sending the same reserve again returns the job already held.
    let again = stepper
        .call_alone(&mut con, None, true, &queues)
        .await
        .unwrap()
        .reply;
    assert_eq!(first, again);
    assert_eq!(con.llen::<_, usize>(keys.queue("q")).await.unwrap(), 1);
    let Reply::Job(record, _) = first else {
        panic!("no job: {first:?}")
    };
    let done = Completion::Success {
        job: JobRef::Record(record),
        track: None,
        ends: None,
    };
    let applied = stepper
        .call_alone(&mut con, Some(&done), false, &queues)
        .await
        .unwrap()
        .applied;
    assert!(applied);
    let applied = stepper
        .call_alone(&mut con, Some(&done), false, &queues)
        .await
        .unwrap()
        .applied;
    assert!(!applied, "a resent finish must not count twice");
    let processed: u64 = con.get(keys.stat_processed()).await.unwrap();
    assert_eq!(processed, 1);
    assert!(!con
        .exists::<_, bool>(keys.worker("h~resq:1-0:q"))
        .await
        .unwrap());
}

/// One call carrying several slots' steps: each slot's completion and reserve is what it
/// would be alone (its own record, its own stats, resend safety per slot), malformed payloads
/// on the way become failures, and the shared counters add up to one per job.
#[tokio::test]
async fn a_batched_step_is_each_slots_own_step() {
    let ns = testing::namespace("batch");
    let keys = Keys::new(&ns);
    let mut con = testing::con().await;
    for p in [r#"{"class":"A","args":[0]}"#, r#"{"class":"A","args":[1]}"#] {
        let _: () = con.rpush(keys.queue("q"), p).await.unwrap();
    }
    let queues = Arc::new(QueueKeys::new(&keys, &["q".to_string()]));
    let ids = ["h~resq:1-0:q", "h~resq:1-1:q", "h~resq:1-2:q"];
    let s: Vec<Arc<Stepper>> = ids
        .iter()
        .map(|id| Arc::new(Stepper::new(&keys, id, true)))
        .collect();
    let item = |k: usize, completion: Option<&'static Completion>, reserve: bool| {
        StepRequest::new(s[k].clone(), completion.cloned(), reserve, &queues)
    };
    // Three slots reserve at once; the queue has two jobs.
    let r = call_step(
        &mut con,
        &queues,
        &[
            item(0, None, true),
            item(1, None, true),
            item(2, None, true),
        ],
        "",
    )
    .await
    .unwrap()
    .replies;
    let records: Vec<Vec<u8>> = r
        .iter()
        .take(2)
        .map(|r| match &r.reply {
            Reply::Job(rec, _) => rec.clone(),
            other => panic!("no job: {other:?}"),
        })
        .collect();
    assert_eq!(r[2], StepReply::empty(false));
    for (k, rec) in records.iter().enumerate() {
        let held: Vec<u8> = con.get(keys.worker(ids[k])).await.unwrap();
        assert_eq!(&held, rec);
        let text = String::from_utf8(rec.clone()).unwrap();
        assert!(
            text.ends_with(&format!(r#""payload":{{"class":"A","args":[{k}]}}}}"#)),
            "{text}"
        );
    }
    // Slot 0 succeeds and reserves again, slot 1 fails and stops, slot 2 reserves; a malformed
    // payload and a good one wait in the queue.
    for p in ["not json", r#"{"class":"A","args":[2]}"#] {
        let _: () = con.rpush(keys.queue("q"), p).await.unwrap();
    }
    let done: &'static Completion = Box::leak(Box::new(Completion::Success {
        job: JobRef::Record(records[0].clone()),
        track: None,
        ends: None,
    }));
    let failed: &'static Completion = Box::leak(Box::new(Completion::Failure {
        job: JobRef::Record(records[1].clone()),
        entry: r#"{"failed_at":"x","payload":{},"exception":"E","error":"e","backtrace":[],"worker":"w","queue":"q"}"#.into(), track: None, ends: None }));
    let r = call_step(
        &mut con,
        &queues,
        &[
            item(0, Some(done), true),
            item(1, Some(failed), false),
            item(2, None, true),
        ],
        "",
    )
    .await
    .unwrap()
    .replies;
    assert!(
        matches!(&r[0], StepReply { reply: Reply::Job(rec, _), applied: true, .. } if String::from_utf8_lossy(rec.as_slice()).contains("[2]")),
        "{r:?}"
    );
    assert_eq!(r[1], StepReply::empty(true));
    assert_eq!(
        r[2],
        StepReply::empty(false),
        "the malformed payload is not a job"
    );
    // The same call resent: nothing applies twice, the held record comes back.
    let again = call_step(
        &mut con,
        &queues,
        &[item(0, Some(done), true), item(1, Some(failed), false)],
        "",
    )
    .await
    .unwrap()
    .replies;
    assert_eq!(
        again[0],
        StepReply {
            applied: false,
            ..r[0].clone()
        }
    );
    assert_eq!(again[1], StepReply::empty(false));
    let get = |k: String| {
        let mut c = con.clone();
        async move { c.get::<_, Option<u64>>(k).await.unwrap().unwrap_or(0) }
    };
    // Processed counts failures too (Ruby's semantics): 1 success + 1 failure + 1 malformed.
    assert_eq!(get(keys.stat_processed()).await, 3);
    assert_eq!(get(keys.stat_failed()).await, 2);
    // Slot 0 reserved first and met the malformed payload on its way to job 2.
    assert_eq!(get(keys.stat_processed_by(ids[0])).await, 2);
    assert_eq!(get(keys.stat_failed_by(ids[0])).await, 1);
    assert_eq!(get(keys.stat_processed_by(ids[1])).await, 1);
    assert_eq!(get(keys.stat_failed_by(ids[1])).await, 1);
    assert_eq!(get(keys.stat_processed_by(ids[2])).await, 0);
    let failures: Vec<String> = con.lrange(keys.failed(), 0, -1).await.unwrap();
    assert_eq!(failures.len(), 2);
    assert!(
        failures[1].contains("Resq::MalformedPayload"),
        "{failures:?}"
    );
    assert!(
        failures[1].contains(&format!(r#""worker":"{}""#, ids[0])),
        "{failures:?}"
    );
    assert!(!con.exists::<_, bool>(keys.worker(ids[1])).await.unwrap());
    assert!(!con.exists::<_, bool>(keys.worker(ids[2])).await.unwrap());
    assert_eq!(con.llen::<_, usize>(keys.queue("q")).await.unwrap(), 0);
}

/// Reserves a job with one step call of slot `id` and runs it through `registry`'s chain: the
/// completion it ends with (not sent yet).
async fn reserve_and_perform(
    stepper: &Stepper,
    con: &mut crate::conn::Conn,
    queues: &Arc<QueueKeys>,
    registry: &Registry,
    id: &str,
) -> Completion {
    let reply = stepper
        .call_alone(con, None, true, queues)
        .await
        .unwrap()
        .reply;
    let Reply::Job(record, _) = reply else {
        panic!("no job")
    };
    let chain = crate::middleware::Chain::new(registry.layers(), None);
    super::perform::perform(
        &chain,
        registry,
        None,
        super::perform::Reserved::Record(record, None),
        &Arc::from(id),
        std::future::pending::<&'static str>(),
        None,
    )
    .await
}

#[tokio::test]
async fn a_resent_retry_completion_is_applied_once() {
    let ns = testing::namespace("resend");
    let keys = Keys::new(&ns);
    let mut con = testing::con().await;
    let registry = flaky(
        "R",
        usize::MAX,
        RetryPolicy::fixed(Duration::from_secs(30), 3),
    );
    let id = "host~resq:1-0:q";
    let stepper = Stepper::new(&keys, id, true);
    let queues = Arc::new(QueueKeys::new(&keys, &["q".to_string()]));
    crate::Client::connect(&testing::url(), &ns)
        .await
        .unwrap()
        .enqueue_to("q", "R", &[json!(7)])
        .await
        .unwrap();
    let completion = reserve_and_perform(&stepper, &mut con, &queues, &registry, id).await;
    // The reply is "lost": the same step is sent twice.
    let first = stepper
        .call_alone(&mut con, Some(&completion), false, &queues)
        .await
        .unwrap()
        .applied;
    let second = stepper
        .call_alone(&mut con, Some(&completion), false, &queues)
        .await
        .unwrap()
        .applied;
    assert!(first && !second);
    let mut raw = testing::con().await;
    let sched: Vec<i64> = raw.zrange(keys.delayed_schedule(), 0, -1).await.unwrap();
    assert_eq!(sched.len(), 1);
    let items: Vec<String> = raw
        .lrange(keys.delayed_bucket(sched[0]), 0, -1)
        .await
        .unwrap();
    assert_eq!(items, [r#"{"class":"R","args":[7],"queue":"q"}"#]);
    assert_eq!(get(&keys.stat_failed()).await.as_deref(), Some("1"));
    assert_eq!(get(&keys.worker(id)).await, None);
    assert_eq!(
        get(&keys.retry_attempts(&retry_key("R", "7")))
            .await
            .as_deref(),
        Some("0")
    );
}

/// A success under a retry policy, of a unique job: resque-retry's keys and the lock go in the
/// step's own completion (no `complete` call), once — a resend after a lost reply deletes
/// nothing that was written since (another copy's failure counted, the lock taken again).
#[tokio::test]
async fn a_resent_retry_success_deletes_its_keys_once() {
    let ns = testing::namespace("resend");
    let keys = Keys::new(&ns);
    let mut con = testing::con().await;
    let registry = flaky("S", 0, RetryPolicy::fixed(Duration::from_secs(30), 3));
    let id = "host~resq:1-0:q";
    let stepper = Stepper::new(&keys, id, true);
    let queues = Arc::new(QueueKeys::new(&keys, &["q".to_string()]));
    let counter = keys.retry_attempts(&retry_key("S", "7"));
    let failure = keys.retry_failure(&retry_key("S", "7"));
    let lock = keys.unique("u7");
    let _: () = con
        .rpush(
            keys.queue("q"),
            r#"{"class":"S","args":[7],"resq_unique":{"key":"u7","id":"id-1"}}"#,
        )
        .await
        .unwrap();
    let _: () = con.set(&counter, "1").await.unwrap();
    let _: () = con.set(&failure, "{}").await.unwrap();
    let _: () = con.set(&lock, "id-1").await.unwrap();
    let completion = reserve_and_perform(&stepper, &mut con, &queues, &registry, id).await;
    assert!(
        matches!(&completion, Completion::Success { ends: Some(_), .. }),
        "the step's own completion, with what it deletes: {completion:?}"
    );
    let first = stepper
        .call_alone(&mut con, Some(&completion), false, &queues)
        .await
        .unwrap()
        .applied;
    assert!(first);
    assert_eq!(get(&counter).await, None);
    assert_eq!(get(&failure).await, None);
    assert_eq!(get(&lock).await, None);
    assert_eq!(get(&keys.stat_processed()).await.as_deref(), Some("1"));
    // Since: another copy of the job failed (resque-retry counted it) and a new enqueue took
    // the lock. The reply of the first call is "lost": the same step is sent again.
    let _: () = con.set(&counter, "0").await.unwrap();
    let _: () = con.set(&failure, "{}").await.unwrap();
    let _: () = con.set(&lock, "id-2").await.unwrap();
    let second = stepper
        .call_alone(&mut con, Some(&completion), false, &queues)
        .await
        .unwrap()
        .applied;
    assert!(!second);
    assert_eq!(get(&counter).await.as_deref(), Some("0"));
    assert_eq!(get(&failure).await.as_deref(), Some("{}"));
    assert_eq!(get(&lock).await.as_deref(), Some("id-2"));
    assert_eq!(get(&keys.stat_processed()).await.as_deref(), Some("1"));
}

/// A reserve resent because its reply was lost (Redis crashed after writing it, or the
/// connection dropped) answers exactly what the first call did — the tracked job's start
/// included, which the worker needs to follow the job. (It did not: the resend answered the
/// held job with no start, so the worker ran it untracked and nothing ever ended its record:
/// it stayed `working`, its batch never counted it — `on_complete` lost — and the jobs
/// waiting for it stayed waiting. The workflows audit's Redis crash found it.)
#[tokio::test]
async fn a_resent_reserve_of_a_tracked_job_says_it_started() {
    let ns = testing::namespace("resend-tracked");
    let keys = Keys::new(&ns);
    let mut con = testing::con().await;
    let client = crate::Client::connect(&testing::url(), &ns).await.unwrap();
    let (bid, members) = client
        .create_batch(crate::workflows::Batch::new().job("q", "A", vec![json!(1)]))
        .await
        .unwrap();
    let stepper = Stepper::new(&keys, "h~resq:1-0:q", true);
    let queues = Arc::new(QueueKeys::new(&keys, &["q".to_string()]));
    let first = stepper
        .call_alone(&mut con, None, true, &queues)
        .await
        .unwrap()
        .reply;
    let Reply::Job(_, Some(started)) = &first else {
        panic!("not a tracked start: {first:?}")
    };
    assert_eq!(
        started,
        &crate::jobs::Started::Tracked {
            attempt: 1,
            key: String::new(),
            batch: Some(bid)
        }
    );
    let again = stepper
        .call_alone(&mut con, None, true, &queues)
        .await
        .unwrap()
        .reply;
    assert_eq!(first, again, "the resend must say the job is tracked");
    let attempts: String = con
        .hget(keys.job_record(members[0].as_str()), "attempts")
        .await
        .unwrap();
    assert_eq!(attempts, "1", "a resend starts nothing again");
}

/// Requests of two queue lists waiting at once (a spread namespace's queues): the lane that
/// takes both sends the second in its next call even while the other lane waits on the
/// channel, so neither slot waits for a request that never comes.
#[tokio::test]
async fn requests_of_two_queue_lists_both_get_their_replies() {
    let ns = testing::namespace("two-lists");
    let keys = Keys::new(&ns);
    let con = testing::con().await;
    let mut c = con.clone();
    let fetch = super::fetch::Fetch::with_jesque(
        keys.clone(),
        crate::queues::QueueList::parse("a,b").unwrap(),
        Vec::new(),
        Duration::from_secs(5),
        &mut c,
    )
    .await
    .unwrap();
    let limits = crate::limits::cache::LimitsCache::new(keys.clone(), Vec::new());
    let steps = super::batch::Batcher::start(con.clone(), 2, fetch, limits, None);
    for q in ["a", "b"] {
        let _: () = c
            .rpush(keys.queue(q), format!(r#"{{"class":"A","args":["{q}"]}}"#))
            .await
            .unwrap();
    }
    let (a, b) = (
        Arc::new(QueueKeys::new(&keys, &["a".to_string()])),
        Arc::new(QueueKeys::new(&keys, &["b".to_string()])),
    );
    for round in 0..20 {
        let sa = Arc::new(Stepper::new(&keys, &format!("h~resq:1-{round}:a"), true));
        let sb = Arc::new(Stepper::new(&keys, &format!("h~resq:2-{round}:b"), true));
        let (ra, rb) = tokio::time::timeout(
            Duration::from_secs(20),
            futures::future::join(
                steps.send(StepRequest::new(sa, None, false, &a)),
                steps.send(StepRequest::new(sb, None, false, &b)),
            ),
        )
        .await
        .expect("both requests answered");
        assert!(ra.is_ok() && rb.is_ok(), "{ra:?} {rb:?}");
    }
}
