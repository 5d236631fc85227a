//! Retry with back-off: failed attempts go back through resque-scheduler's delayed set (or
//! straight to the queue for a zero delay), resque-retry's counter and failure keys are kept,
//! the last failure lands in `<ns>:failed` with the attempt count, and a resent completion is
//! applied once.

use crate::support;

use support::stop;

use redis::AsyncCommands;
use resq::RetryPolicy;
use resq::{Client, JobContext, JobError, Registry, Running};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::Keys;

/// A handler that fails its first `fail` runs, then succeeds; counts runs.
fn flaky(class: &str, fail: usize, policy: RetryPolicy) -> (Registry, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let registry = Registry::new()
        .handler(class, move |_ctx: JobContext| {
            let r = r.clone();
            async move {
                let n = r.fetch_add(1, Ordering::SeqCst);
                if n < fail {
                    Err(JobError::msg(format!("boom {n}")))
                } else {
                    Ok(())
                }
            }
        })
        .retry(class, policy);
    (registry, runs)
}

async fn start(ns: &str, registry: Registry, scheduler: bool) -> Running {
    let b = support::builder(ns, "q")
        .scheduler(scheduler)
        .scheduler_interval(Duration::from_millis(100))
        .registry(registry);
    support::start(b).await
}

fn retry_key(class: &str, args_joined: &str) -> String {
    let digest = sha1_smol::Sha1::from(args_joined).digest().to_string();
    Keys::resque_retry_logical(class, Some(&digest))
}

async fn get(key: &str) -> Option<String> {
    support::con().await.get(key).await.unwrap()
}

#[tokio::test]
async fn retries_through_the_delayed_set_then_succeeds() {
    let ns = support::namespace("retry");
    let keys = Keys::new(&ns);
    let policy = RetryPolicy::delays([Duration::ZERO, Duration::from_secs(2)]);
    let (registry, runs) = flaky("Flaky", 2, policy);
    let c = Client::connect(&support::url(), &ns).await.unwrap();
    c.enqueue_to("q", "Flaky", &[json!(42)]).await.unwrap();
    let w = start(&ns, registry, true).await;
    let rk = retry_key("Flaky", "42");
    // After the second failure the job waits 1–2 s in the delayed set, where resque-scheduler's
    // (and resque-retry's) web tabs look.
    let ts = support::eventually(5, "the retry in the delayed set", || async {
        let s: Vec<i64> = support::con()
            .await
            .zrange(keys.delayed_schedule(), 0, -1)
            .await
            .unwrap();
        s.first().copied()
    })
    .await;
    let now = chrono::Utc::now().timestamp();
    assert!((now + 1..=now + 2).contains(&ts), "due {ts}, now {now}");
    let items: Vec<String> = support::con()
        .await
        .lrange(keys.delayed_bucket(ts), 0, -1)
        .await
        .unwrap();
    assert_eq!(items, [r#"{"class":"Flaky","args":[42],"queue":"q"}"#]);
    let member: Vec<String> = support::con()
        .await
        .smembers(keys.timestamps(&items[0]))
        .await
        .unwrap();
    assert_eq!(member, [format!("delayed:{ts}")]);
    // resque-retry's counter: attempt index of the failed attempt (0, then 1).
    assert_eq!(get(&keys.retry_attempts(&rk)).await.as_deref(), Some("1"));
    let details = get(&keys.retry_failure(&rk))
        .await
        .expect("failure-<retry key>");
    let d: Value = serde_json::from_str(&details).unwrap();
    assert_eq!(d["error"], "boom 1");
    assert_eq!(d["payload"], json!({"class":"Flaky","args":[42]}));
    let ttl: i64 = support::con()
        .await
        .ttl(keys.retry_failure(&rk))
        .await
        .unwrap();
    assert!((3..=4).contains(&ttl), "2 × delay: {ttl}");
    // The scheduler moves it, the third run succeeds, and the keys are cleaned.
    support::eventually(5, "the third run", || async {
        (runs.load(Ordering::SeqCst) >= 3).then_some(())
    })
    .await;
    support::eventually(5, "the success recorded", || async {
        let p: Option<String> = support::con()
            .await
            .get(keys.stat_processed())
            .await
            .unwrap();
        (p.as_deref() == Some("3")).then_some(())
    })
    .await;
    stop(w).await;
    assert_eq!(get(&keys.retry_attempts(&rk)).await, None);
    assert_eq!(get(&keys.retry_failure(&rk)).await, None);
    assert_eq!(get(&keys.stat_failed()).await.as_deref(), Some("2"));
    let failed: u64 = support::con().await.llen(keys.failed()).await.unwrap();
    assert_eq!(failed, 0, "only the last failure goes to <ns>:failed");
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn gives_up_after_the_limit_with_the_attempt_count() {
    let ns = support::namespace("giveup");
    let keys = Keys::new(&ns);
    let (registry, runs) = flaky("Doomed", usize::MAX, RetryPolicy::fixed(Duration::ZERO, 2));
    let c = Client::connect(&support::url(), &ns).await.unwrap();
    c.enqueue_to("q", "Doomed", &[json!("x"), json!(1)])
        .await
        .unwrap();
    let w = start(&ns, registry, false).await;
    let entry = first_failure(&keys, "the final failure").await;
    stop(w).await;
    assert_eq!(runs.load(Ordering::SeqCst), 3, "one run + two retries");
    let e: Value = serde_json::from_str(&entry).unwrap();
    assert_eq!(e["exception"], "RuntimeError");
    assert_eq!(e["error"], "boom 2 (gave up after 3 attempts)");
    assert_eq!(e["payload"], json!({"class":"Doomed","args":["x",1]}));
    assert_eq!(e["queue"], "q");
    let rk = retry_key("Doomed", "x-1");
    assert_eq!(get(&keys.retry_attempts(&rk)).await, None);
    assert_eq!(get(&keys.stat_failed()).await.as_deref(), Some("3"));
    let failed: u64 = support::con().await.llen(keys.failed()).await.unwrap();
    assert_eq!(failed, 1);
}

#[tokio::test]
async fn exceptions_named_in_give_up_on_are_not_retried() {
    let ns = support::namespace("fatal");
    let keys = Keys::new(&ns);
    let registry = Registry::new()
        .handler("Strict", |ctx: JobContext| async move {
            let _n: u64 = ctx.arg(0)?; // "nope" → Resq::InvalidArgs
            Ok(())
        })
        .retry(
            "Strict",
            RetryPolicy::fixed(Duration::ZERO, 5).give_up_on(["Resq::InvalidArgs"]),
        );
    let c = Client::connect(&support::url(), &ns).await.unwrap();
    c.enqueue_to("q", "Strict", &[json!("nope")]).await.unwrap();
    let w = start(&ns, registry, false).await;
    let entry = first_failure(&keys, "the failure").await;
    stop(w).await;
    let e: Value = serde_json::from_str(&entry).unwrap();
    assert_eq!(e["exception"], "Resq::InvalidArgs");
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .ends_with("(gave up after 1 attempt)"),
        "{e}"
    );
    assert_eq!(get(&keys.stat_failed()).await.as_deref(), Some("1"));
}

#[tokio::test]
async fn geometric_delays_with_jitter_land_in_range() {
    let ns = support::namespace("geo");
    let keys = Keys::new(&ns);
    let policy = RetryPolicy::geometric(Duration::from_secs(100), 2.0, 3).jitter(0.5, 1.5);
    let (registry, _runs) = flaky("Slow", usize::MAX, policy);
    let c = Client::connect(&support::url(), &ns).await.unwrap();
    c.enqueue_to("q", "Slow", &[]).await.unwrap();
    let w = start(&ns, registry, false).await;
    let ts = support::eventually(5, "the retry in the delayed set", || async {
        let s: Vec<i64> = support::con()
            .await
            .zrange(keys.delayed_schedule(), 0, -1)
            .await
            .unwrap();
        s.first().copied()
    })
    .await;
    stop(w).await;
    let now = chrono::Utc::now().timestamp();
    assert!(
        (now + 48..=now + 151).contains(&ts),
        "100 s × [0.5, 1.5]: due in {}",
        ts - now
    );
    // No args: resque-retry's key has no digest part.
    let rk = Keys::resque_retry_logical("Slow", None);
    assert_eq!(get(&keys.retry_attempts(&rk)).await.as_deref(), Some("0"));
}

/// Waits (up to 5 s) for the first entry of `<ns>:failed` and returns it.
async fn first_failure(keys: &Keys, what: &str) -> String {
    support::eventually(5, what, || async {
        let v: Vec<String> = support::con()
            .await
            .lrange(keys.failed(), 0, 0)
            .await
            .unwrap();
        v.first().cloned()
    })
    .await
}
