//! Middleware and hooks against a real Redis and the real runtime: the order layers run in,
//! skipping a job (Resque's DontPerform), changing an outcome, panics seen as failures, values
//! handed from a layer to the handler, the enqueue chain, typed enqueue, one handler
//! resolution for ActiveJob jobs (a success clears resque-retry's counter), and the two worked
//! examples (`examples/error_reporter.rs`, `examples/db_transaction.rs`).

use crate::support;

use redis::AsyncCommands;
use resq::middleware::{from_fn, BoxFuture, EnqueueMiddleware, EnqueueNext, Hooks, Next, Outgoing};
use resq::{Client, Job, JobContext, JobError, JobResult, Registry, RetryPolicy};
use serde_json::{json, Value};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::stop;
use support::Keys;

type Log = Arc<Mutex<Vec<String>>>;

/// A layer that logs `<name>>` before and `<name><` (with the outcome) after.
fn tracer(name: &'static str, log: Log) -> impl resq::middleware::Middleware {
    from_fn(move |ctx: JobContext, next: Next<'_>| {
        let log = log.clone();
        Box::pin(async move {
            log.lock().unwrap().push(format!("{name}>"));
            let out = next.run(ctx).await;
            let how = match &out {
                Ok(()) => "ok".to_string(),
                Err(e) => e.exception.clone(),
            };
            log.lock().unwrap().push(format!("{name}<{how}"));
            out
        }) as BoxFuture<'_, JobResult>
    })
}

async fn counter(key: String) -> i64 {
    let v: Option<i64> = support::con().await.get(key).await.unwrap();
    v.unwrap_or(0)
}

async fn failed_entries(ns: &str) -> Vec<Value> {
    let v: Vec<String> = support::con()
        .await
        .lrange(Keys::new(ns).failed(), 0, -1)
        .await
        .unwrap();
    v.iter().map(|s| serde_json::from_str(s).unwrap()).collect()
}

/// Waits until `stat:processed` of `ns` reaches `n`.
async fn processed(ns: &str, n: i64) {
    let key = Keys::new(ns).stat_processed();
    support::eventually(10, &format!("{n} processed"), || {
        let key = key.clone();
        async move { (counter(key).await >= n).then_some(()) }
    })
    .await;
}

#[tokio::test]
async fn layers_run_in_the_order_added_around_the_handler() {
    let ns = support::namespace("mw-order");
    let log: Log = Arc::default();
    let l = log.clone();
    let registry = Registry::new()
        .layer(tracer("a", log.clone()))
        .layer(tracer("b", log.clone()))
        .handler("Work", move |ctx: JobContext| {
            let l = l.clone();
            async move {
                l.lock().unwrap().push("handler".into());
                if ctx.arg::<bool>(0)? {
                    Ok(())
                } else {
                    Err(JobError::new("Boom", "asked to fail"))
                }
            }
        });
    let client = Client::connect(&support::url(), &ns).await.unwrap();
    client.enqueue_class("Work", &[json!(true)]).await.unwrap();
    client.enqueue_class("Work", &[json!(false)]).await.unwrap();
    let w = support::start(support::builder(&ns, "default").registry(registry)).await;
    processed(&ns, 2).await;
    stop(w).await;
    assert_eq!(
        *log.lock().unwrap(),
        ["a>", "b>", "handler", "b<ok", "a<ok", "a>", "b>", "handler", "b<Boom", "a<Boom"]
    );
    let failed = failed_entries(&ns).await;
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["exception"], "Boom");
}

#[tokio::test]
async fn a_layer_that_does_not_call_next_skips_the_job_as_done() {
    let ns = support::namespace("mw-skip");
    let ran: Log = Arc::default();
    let r = ran.clone();
    let registry = Registry::new()
        .layer(from_fn(|ctx: JobContext, next: Next<'_>| {
            Box::pin(async move {
                if ctx.arg::<String>(0)? == "skip" {
                    return Ok(());
                }
                next.run(ctx).await
            }) as BoxFuture<'_, JobResult>
        }))
        .hooks(Hooks::for_class("Work").before_perform(|ctx| {
            if ctx.arg::<String>(0)? == "dont" {
                return Err(JobError::dont_perform());
            }
            Ok(())
        }))
        .handler("Work", move |ctx: JobContext| {
            let r = r.clone();
            async move {
                r.lock().unwrap().push(ctx.arg(0)?);
                Ok(())
            }
        });
    let client = Client::connect(&support::url(), &ns).await.unwrap();
    for a in ["skip", "dont", "run"] {
        client.enqueue_class("Work", &[json!(a)]).await.unwrap();
    }
    let w = support::start(support::builder(&ns, "default").registry(registry)).await;
    processed(&ns, 3).await;
    stop(w).await;
    assert_eq!(*ran.lock().unwrap(), ["run"]);
    let keys = Keys::new(&ns);
    assert_eq!(counter(keys.stat_failed()).await, 0);
    assert!(failed_entries(&ns).await.is_empty());
}

#[tokio::test]
async fn a_layer_changes_the_outcome_and_sees_panics_as_failures() {
    let ns = support::namespace("mw-change");
    let seen: Log = Arc::default();
    let s = seen.clone();
    let registry = Registry::new()
        .layer(from_fn(move |ctx: JobContext, next: Next<'_>| {
            let s = s.clone();
            Box::pin(async move {
                let mode: String = ctx.arg(0)?;
                match next.run(ctx).await {
                    Err(e) => {
                        s.lock().unwrap().push(format!("{mode}:{}", e.exception));
                        match mode.as_str() {
                            "forgive" => Ok(()),
                            _ => Err(JobError::new("Wrapped::Error", e.to_string())),
                        }
                    }
                    Ok(()) => Ok(()),
                }
            }) as BoxFuture<'_, JobResult>
        }))
        // A middleware that panics itself: the job fails (the panic unwinds through the layers
        // outside it to resq's panic net), the worker goes on.
        .layer(from_fn(|ctx: JobContext, next: Next<'_>| {
            Box::pin(async move {
                if ctx.arg::<String>(0)? == "layer-panic" {
                    panic!("the layer panicked");
                }
                next.run(ctx).await
            }) as BoxFuture<'_, JobResult>
        }))
        .handler("Work", |ctx: JobContext| async move {
            match ctx.arg::<String>(0)?.as_str() {
                "panic" => panic!("the handler panicked"),
                "ok" => Ok(()),
                _ => Err(JobError::msg("plain failure")),
            }
        });
    let client = Client::connect(&support::url(), &ns).await.unwrap();
    for a in ["forgive", "wrap", "panic", "layer-panic", "ok"] {
        client.enqueue_class("Work", &[json!(a)]).await.unwrap();
    }
    let w = support::start(support::builder(&ns, "default").registry(registry)).await;
    processed(&ns, 5).await;
    stop(w).await;
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "forgive:RuntimeError",
            "wrap:RuntimeError",
            "panic:Resq::Panic",
        ]
    );
    let failed = failed_entries(&ns).await;
    let exceptions: Vec<&str> = failed
        .iter()
        .map(|f| f["exception"].as_str().unwrap())
        .collect();
    assert_eq!(
        exceptions,
        ["Wrapped::Error", "Wrapped::Error", "Resq::Panic"]
    );
    assert!(
        failed[2]["error"]
            .as_str()
            .unwrap()
            .contains("the layer panicked"),
        "{}",
        failed[2]
    );
    assert!(
        failed[1]["error"]
            .as_str()
            .unwrap()
            .contains("the handler panicked"),
        "{}",
        failed[1]
    );
    assert_eq!(counter(Keys::new(&ns).stat_failed()).await, 3);
}

#[tokio::test]
async fn hooks_run_as_resque_runs_them_and_values_reach_the_handler() {
    let ns = support::namespace("mw-hooks");
    let log: Log = Arc::default();
    struct RequestId(String);
    let (l1, l2, l3, l4) = (log.clone(), log.clone(), log.clone(), log.clone());
    let registry = Registry::new()
        .layer(from_fn(|ctx: JobContext, next: Next<'_>| {
            ctx.insert(RequestId(format!("req-{}", ctx.args()[0])));
            next.run(ctx)
        }))
        .hooks(
            Hooks::new()
                .before_perform(move |ctx| {
                    l1.lock().unwrap().push(format!("before {}", ctx.class()));
                    Ok(())
                })
                .after_perform(move |ctx| {
                    l2.lock().unwrap().push(format!("after {}", ctx.class()));
                })
                .on_failure(move |ctx, e| {
                    l3.lock()
                        .unwrap()
                        .push(format!("failure {} {}", ctx.class(), e.message));
                }),
        )
        .hooks(
            Hooks::for_class("Other")
                .before_perform(|_| Err(JobError::msg("never: no Other job is enqueued"))),
        )
        .handler("Work", move |ctx: JobContext| {
            let l4 = l4.clone();
            async move {
                let id = ctx.get::<RequestId>().map(|r| r.0.clone());
                l4.lock().unwrap().push(format!("handler {id:?}"));
                if ctx.arg::<i64>(0)? == 2 {
                    return Err(JobError::msg("two"));
                }
                Ok(())
            }
        });
    let client = Client::connect(&support::url(), &ns).await.unwrap();
    client.enqueue_class("Work", &[json!(1)]).await.unwrap();
    client.enqueue_class("Work", &[json!(2)]).await.unwrap();
    let w = support::start(support::builder(&ns, "default").registry(registry)).await;
    processed(&ns, 2).await;
    stop(w).await;
    assert_eq!(
        *log.lock().unwrap(),
        [
            "before Work",
            r#"handler Some("req-1")"#,
            "after Work",
            "before Work",
            r#"handler Some("req-2")"#,
            "failure Work two",
        ]
    );
}

/// Adds a trace id to every job's args and moves `Urgent` jobs to the `critical` queue.
struct Stamp;

impl EnqueueMiddleware for Stamp {
    fn call<'a>(
        &'a self,
        mut job: Outgoing,
        next: EnqueueNext<'a>,
    ) -> BoxFuture<'a, resq::Result<bool>> {
        job.args.push(json!({"trace": "t-1"}));
        if job.class == "Urgent" {
            job.queue = "critical".into();
        }
        next.run(job)
    }
}

struct Archive;

impl Job for Archive {
    const CLASS: &'static str = "Archive";
    const QUEUE: Option<&'static str> = Some("archive");
    type Args = (u64, String);
    async fn perform(&self, _args: Self::Args, _ctx: JobContext) -> JobResult {
        Ok(())
    }
}

#[tokio::test]
async fn the_enqueue_chain_rewrites_vetoes_and_reports() {
    let ns = support::namespace("mw-enqueue");
    let keys = Keys::new(&ns);
    let after: Log = Arc::default();
    let a = after.clone();
    let client = Client::connect(&support::url(), &ns)
        .await
        .unwrap()
        .layer(Stamp)
        .hooks(
            Hooks::new()
                .before_enqueue(|job| job.class != "Vetoed")
                .after_enqueue(move |job| {
                    a.lock()
                        .unwrap()
                        .push(format!("{} → {}", job.class, job.queue));
                }),
        );
    assert!(client.enqueue_class("Urgent", &[json!(1)]).await.unwrap());
    assert!(!client.enqueue_class("Vetoed", &[json!(2)]).await.unwrap());
    // Typed: the job's class and queue, Ruby's bytes.
    assert!(client.enqueue::<Archive>((7, "main".into())).await.unwrap());
    let mut con = support::con().await;
    let critical: Vec<String> = con.lrange(keys.queue("critical"), 0, -1).await.unwrap();
    assert_eq!(
        critical,
        [r#"{"class":"Urgent","args":[1,{"trace":"t-1"}]}"#]
    );
    let default: u64 = con.llen(keys.queue("default")).await.unwrap();
    assert_eq!(default, 0, "the vetoed job was written");
    let archive: Vec<String> = con.lrange(keys.queue("archive"), 0, -1).await.unwrap();
    assert_eq!(
        archive,
        [r#"{"class":"Archive","args":[7,"main",{"trace":"t-1"}]}"#]
    );
    let mut queues: Vec<String> = con.smembers(keys.queues()).await.unwrap();
    queues.sort();
    assert_eq!(queues, ["archive", "critical"]);
    assert_eq!(
        *after.lock().unwrap(),
        ["Urgent → critical", "Archive → archive"]
    );
}

/// Rails' wrapper payload for `ChargeJob.perform_later(arg)`.
fn activejob_payload(arg: &str) -> String {
    json!({
        "class": "ActiveJob::QueueAdapters::ResqueAdapter::JobWrapper",
        "args": [{
            "job_class": "ChargeJob",
            "job_id": "5d3e1f4e-0000-4000-8000-000000000001",
            "provider_job_id": null,
            "queue_name": "default",
            "priority": null,
            "arguments": [arg],
            "executions": 0,
            "exception_executions": {},
            "locale": "en",
            "timezone": "UTC",
            "enqueued_at": "2026-11-24T08:00:00Z"
        }]
    })
    .to_string()
}

#[tokio::test]
async fn an_activejob_success_clears_the_retry_counter_of_its_handler() {
    let ns = support::namespace("mw-aj-retry");
    let keys = Keys::new(&ns);
    let runs = Arc::new(Mutex::new(0));
    let r = runs.clone();
    let registry = Registry::new()
        .handler("ChargeJob", move |_ctx: JobContext| {
            let r = r.clone();
            async move {
                let mut n = r.lock().unwrap();
                *n += 1;
                if *n == 1 {
                    Err(JobError::msg("card declined"))
                } else {
                    Ok(())
                }
            }
        })
        .retry(
            "ChargeJob",
            RetryPolicy::delays([Duration::from_secs(1)]).limit(3),
        );
    let payload = activejob_payload("order-1");
    let mut con = support::con().await;
    let _: () = redis::pipe()
        .sadd(keys.queues(), "default")
        .rpush(keys.queue("default"), &payload)
        .query_async(&mut con)
        .await
        .unwrap();
    let w = support::start(
        support::builder(&ns, "default")
            .scheduler(true)
            .scheduler_interval(Duration::from_millis(100))
            .registry(registry),
    )
    .await;
    // The failure is retried: resque-retry's counter exists while the retry waits (1 s)…
    let pattern = format!("{ns}:*resque-retry:*");
    support::eventually(5, "the attempt counter", || {
        let pattern = pattern.clone();
        async move {
            let found: Vec<String> = support::con().await.keys(&pattern).await.unwrap();
            (!found.is_empty()).then_some(())
        }
    })
    .await;
    // … and the retry's success clears it.
    processed(&ns, 2).await;
    stop(w).await;
    assert_eq!(*runs.lock().unwrap(), 2);
    let mut leftover: Vec<String> = con.keys(&pattern).await.unwrap();
    leftover.sort();
    assert!(
        leftover.is_empty(),
        "a success must clear resque-retry's keys: {leftover:?}"
    );
    assert!(failed_entries(&ns).await.is_empty());
}

/// Runs an example against the test server; returns its stdout.
fn run_example(name: &str, ns: &str) -> String {
    let out = Command::new(support::example_bin(name))
        .env("REDIS_URL", support::url())
        .env("RESQUE_NAMESPACE", ns)
        .env_remove("RUST_LOG")
        .output()
        .unwrap_or_else(|e| panic!("run examples/{name}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "examples/{name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn the_error_reporter_example_reports_failures_and_panics() {
    let ns = support::namespace("ex-reporter");
    let out = run_example("error_reporter", &ns);
    let reports: Vec<Value> = out
        .lines()
        .filter_map(|l| l.strip_prefix("reported: "))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(reports.len(), 2, "{out}");
    assert_eq!(reports[0]["exception"], "ArgumentError");
    assert_eq!(reports[0]["args"], json!(["bob", -5]));
    assert_eq!(reports[1]["exception"], "Resq::Panic");
    assert!(out.contains("charged 1250 cents"), "{out}");
}

#[test]
fn the_transaction_example_commits_successes_only() {
    let ns = support::namespace("ex-tx");
    let out = run_example("db_transaction", &ns);
    assert!(out.contains("alice: -2500"), "{out}");
    assert!(out.contains("bob: 2500"), "{out}");
}
