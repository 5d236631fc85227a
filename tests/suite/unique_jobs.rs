//! Unique jobs: a second enqueue while one waits (queue or delayed set) or runs is a no-op that
//! says so; the lock goes when the job finishes or finally fails, is kept across a retry, and
//! expires when its holder is gone.

use crate::support;

use support::stop;

use redis::AsyncCommands;
use resq::client::{Enqueued, Unique};
use resq::RetryPolicy;
use resq::{Client, JobContext, JobError, Registry, Running};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::Keys;
use tokio::sync::Semaphore;

async fn start(ns: &str, registry: Registry, scheduler: bool) -> Running {
    let b = support::builder(ns, "q")
        .scheduler(scheduler)
        .scheduler_interval(Duration::from_millis(100))
        .registry(registry);
    support::start(b).await
}

async fn client(ns: &str) -> Client {
    Client::connect(&support::url(), ns).await.unwrap()
}

async fn released(c: &Client, key: &str) {
    support::eventually(5, "the unique lock to be released", || async {
        c.unique_holder(key).await.unwrap().is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn duplicate_while_waiting_or_running_then_free_after_success() {
    let ns = support::namespace("uniq");
    let c = client(&ns).await;
    let u = Unique::new("report:7");
    let first = c
        .enqueue_unique("q", "Report", &[json!(7)], &u)
        .await
        .unwrap();
    let Enqueued::Pushed(id) = first.clone() else {
        panic!("{first:?}")
    };
    assert_eq!(
        c.enqueue_unique("q", "Report", &[json!(7)], &u)
            .await
            .unwrap(),
        Enqueued::Duplicate
    );
    assert_eq!(c.size("q").await.unwrap(), 1);
    let payload = &c.peek("q", 0, 1).await.unwrap()[0];
    assert_eq!(
        payload,
        &format!(
            r#"{{"class":"Report","args":[7],"resq_unique":{{"key":"report:7","id":"{id}"}}}}"#
        )
    );
    let ttl: i64 = support::con()
        .await
        .pttl(Keys::new(&ns).unique("report:7"))
        .await
        .unwrap();
    assert!(ttl > 3_500_000, "default TTL one hour: {ttl}");
    // The handler waits for a permit, so the job is "running" as long as the test wants.
    let gate = Arc::new(Semaphore::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let (g, s) = (gate.clone(), started.clone());
    let registry = Registry::new().handler("Report", move |_ctx: JobContext| {
        let (g, s) = (g.clone(), s.clone());
        async move {
            s.fetch_add(1, Ordering::SeqCst);
            let _p = g
                .acquire()
                .await
                .map_err(|e| JobError::msg(e.to_string()))?;
            Ok(())
        }
    });
    let w = start(&ns, registry, false).await;
    support::eventually(5, "the job to start", || async {
        (started.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    assert_eq!(
        c.enqueue_unique("q", "Report", &[json!(7)], &u)
            .await
            .unwrap(),
        Enqueued::Duplicate
    );
    // Another key is independent.
    assert!(c
        .enqueue_unique("q", "Report", &[json!(8)], &Unique::new("report:8"))
        .await
        .unwrap()
        .pushed());
    gate.add_permits(2);
    released(&c, "report:7").await;
    assert!(c
        .enqueue_unique("q", "Report", &[json!(7)], &u)
        .await
        .unwrap()
        .pushed());
    gate.add_permits(1);
    released(&c, "report:7").await;
    released(&c, "report:8").await;
    stop(w).await;
    assert_eq!(started.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn released_when_the_job_fails() {
    let ns = support::namespace("uniqfail");
    let c = client(&ns).await;
    let registry =
        Registry::new().handler("Bad", |_ctx: JobContext| async { Err(JobError::msg("no")) });
    let w = start(&ns, registry, false).await;
    assert!(c
        .enqueue_unique("q", "Bad", &[], &Unique::new("bad"))
        .await
        .unwrap()
        .pushed());
    released(&c, "bad").await;
    stop(w).await;
    let failed: Vec<String> = support::con()
        .await
        .lrange(Keys::new(&ns).failed(), 0, -1)
        .await
        .unwrap();
    assert_eq!(failed.len(), 1);
    let e: Value = serde_json::from_str(&failed[0]).unwrap();
    assert_eq!(
        e["payload"]["resq_unique"]["key"], "bad",
        "the mark stays in the failure's payload"
    );
}

#[tokio::test]
async fn a_dead_holder_blocks_only_until_the_ttl() {
    let ns = support::namespace("uniqttl");
    let c = client(&ns).await;
    let u = Unique::new("k").ttl(Duration::from_millis(300));
    assert!(c.enqueue_unique("q", "A", &[], &u).await.unwrap().pushed());
    assert_eq!(
        c.enqueue_unique("q", "A", &[], &u).await.unwrap(),
        Enqueued::Duplicate
    );
    // Nobody runs it (a crashed worker, a job removed by hand): the lock expires.
    support::eventually(3, "the lock to expire", || async {
        c.enqueue_unique("q", "A", &[], &u)
            .await
            .unwrap()
            .pushed()
            .then_some(())
    })
    .await;
    assert_eq!(c.size("q").await.unwrap(), 2);
}

#[tokio::test]
async fn a_delayed_unique_job_keeps_its_mark_through_the_scheduler() {
    let ns = support::namespace("uniqdelay");
    let c = client(&ns).await;
    let u = Unique::new("later");
    let r = c
        .enqueue_unique_in("q", Duration::from_secs(1), "Later", &[json!("x")], &u)
        .await
        .unwrap();
    assert!(r.pushed());
    assert_eq!(
        c.enqueue_unique_in("q", Duration::from_secs(1), "Later", &[json!("x")], &u)
            .await
            .unwrap(),
        Enqueued::Duplicate
    );
    assert_eq!(
        c.enqueue_unique("q", "Later", &[json!("x")], &u)
            .await
            .unwrap(),
        Enqueued::Duplicate
    );
    assert_eq!(c.count_all_scheduled_jobs().await.unwrap(), 1);
    let ran = Arc::new(AtomicUsize::new(0));
    let r2 = ran.clone();
    let registry = Registry::new().handler("Later", move |ctx: JobContext| {
        let r2 = r2.clone();
        async move {
            assert!(ctx.payload().object().contains_key("resq_unique"));
            r2.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    });
    let w = start(&ns, registry, true).await;
    support::eventually(5, "the delayed job to run", || async {
        (ran.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    released(&c, "later").await;
    stop(w).await;
}

#[tokio::test]
async fn a_retry_keeps_the_lock_until_the_last_attempt() {
    let ns = support::namespace("uniqretry");
    let c = client(&ns).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let registry = Registry::new()
        .handler("Twice", move |_ctx: JobContext| {
            let r = r.clone();
            async move {
                if r.fetch_add(1, Ordering::SeqCst) == 0 {
                    Err(JobError::msg("first"))
                } else {
                    Ok(())
                }
            }
        })
        .retry("Twice", RetryPolicy::fixed(Duration::from_secs(2), 1));
    let u = Unique::new("twice");
    assert!(c
        .enqueue_unique("q", "Twice", &[], &u)
        .await
        .unwrap()
        .pushed());
    let w = start(&ns, registry, true).await;
    // First attempt failed: the job waits in the delayed set, still unique.
    support::eventually(5, "the retry in the delayed set", || async {
        (c.count_all_scheduled_jobs().await.unwrap() == 1).then_some(())
    })
    .await;
    assert_eq!(
        c.enqueue_unique("q", "Twice", &[], &u).await.unwrap(),
        Enqueued::Duplicate
    );
    let ttl: i64 = support::con()
        .await
        .pttl(Keys::new(&ns).unique("twice"))
        .await
        .unwrap();
    assert!(ttl > 3_600_000, "lock extended by the delay: {ttl}");
    support::eventually(6, "the second attempt", || async {
        (runs.load(Ordering::SeqCst) == 2).then_some(())
    })
    .await;
    released(&c, "twice").await;
    stop(w).await;
}
