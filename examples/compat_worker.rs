//! The reference worker that compat tests and benchmarks run.
//!
//! Configured only by the environment (`REDIS_URL`, `RESQUE_NAMESPACE`, `QUEUES`, `CONCURRENCY`,
//! `INTERVAL`, …; see the README). Handlers: `Echo` (RPUSH the compact JSON array of its args
//! onto `<ns>:compat:echo`), `EchoPayload` (RPUSH the raw payload), `Noop`, `Sleep` (args[0]
//! ms), `Stoppable` (a tracked job's progress `1/2 "started"`, then sleeps args[0] ms unless it
//! is asked to stop: it then ends killed), `Fail` (fails with message args[0]), `Panic` (panics with message args[0]), `Gauge`
//! (records how many run at once; see [`gauge`]), `WfCallback` (a batch's callback: counts each
//! run, see [`wf_callback`]), `WfFlaky` (args[0] a tag: its first run fails, the retry — at once,
//! up to 3 — succeeds; see [`wf_flaky`]), `Forward` (enqueues `EchoPayload` with args
//! `["forwarded"]` onto queue args[0] through a `Client`: a job a job enqueues),
//! `ForwardRails` (the same as a Rails ActiveJob job `EchoPayload` through an
//! `ActiveJobClient`).
//! `COMPAT_RETRY=1` adds `RetryNow`, `RetryLater` and `RetryHold`, failing under retry
//! policies (see [`retry_jobs`]).
//! `RESQ_SCHEDULER=1` also runs the scheduler in-process (delayed and recurring jobs);
//! `JESQUE_DELAYED_QUEUES=a,b` runs those queues as Jesque zset queues (both read by
//! `WorkerBuilder::from_env`). `METRICS_ADDR=127.0.0.1:9100` serves Prometheus metrics,
//! `/healthz` and `/readyz` there (also read by `WorkerBuilder::from_env`).
//! Prints `worker <id>` per slot at start; exits 0 after unregistering on QUIT, TERM or INT.
//!
//! resque-status jobs (declared with `Registry::statused`: `args[0]` is the id, `args[1]` the
//! options): `StatusEcho` (progress `1/2 "half"`, then completes with its options echoed as the
//! custom key `echo`, as a Ruby job calling `completed("echo" => options)` leaves its record)
//! and `StatusSleep` (sleeps `options["ms"]` in 50 ms ticks, reporting progress at each, so a
//! kill stops it at the next tick). And twins of the job classes real resque-status was
//! captured with (fixtures/resque-status/README.md), which do what those Ruby classes do:
//! `MyStatusJob`, `CustomCompleteJob`, `FailingStatusJob`, `KillableJob`, `NoTickJob`,
//! `QuickJob`, `ZeroTotalJob`, `GoneStatusJob`. Where a Ruby class waits for the capture
//! harness's file `<uuid>.go` (`.go2`), its twin waits for that file in `COMPAT_SIGNAL_DIR`
//! when that is set (up to 60 s), and does not wait otherwise.

/// The key layout (the crate's one place that names keys): this program reads Redis directly.
#[allow(dead_code)]
#[path = "../src/keys.rs"]
mod keys;

use anyhow::Context;
use redis::AsyncCommands;
use resq::{JobContext, JobError, JobResult, Registry, WorkerBuilder};
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::time::Duration;

fn registry(con: resq::conn::Conn, keys: &keys::Keys) -> Registry {
    let echo_key = keys.compat_echo();
    let (c1, k1) = (con.clone(), echo_key.clone());
    let (c2, k2) = (con.clone(), echo_key.clone());
    // (COMPAT_GAUGE_KEY: another base for Gauge's keys, e.g. one with a hash tag so that its
    // script's three keys share a slot on a Redis Cluster namespace without one.)
    let gauge_key = std::env::var("COMPAT_GAUGE_KEY").unwrap_or_else(|_| echo_key.clone());
    let (c3, k3) = (con.clone(), gauge_key);
    let (c4, p4) = (con.clone(), keys.prefix().to_string());
    let (c5, p5) = (con.clone(), keys.prefix().to_string());
    let client = resq::Client::with_connection(con, keys.namespace());
    let rails = resq::activejob::ActiveJobClient::new(client.clone(), resq::activejob::Rails::V7_1);
    Registry::new()
        .handler("ForwardRails", move |ctx: JobContext| {
            let rails = rails.clone();
            async move {
                let queue: String = ctx.arg(0)?;
                let job = resq::activejob::NewJob::new("EchoPayload")
                    .queue(queue)
                    .arg(json!("forwarded"));
                rails
                    .enqueue(&job)
                    .await
                    .map_err(|e| JobError::msg(e.to_string()))?;
                Ok(())
            }
        })
        .handler("Forward", move |ctx: JobContext| {
            let client = client.clone();
            async move {
                let queue: String = ctx.arg(0)?;
                client
                    .enqueue_to(&queue, "EchoPayload", &[json!("forwarded")])
                    .await
                    .map_err(|e| JobError::msg(e.to_string()))?;
                Ok(())
            }
        })
        .handler("WfCallback", move |ctx: JobContext| {
            let (mut con, prefix) = (c4.clone(), p4.clone());
            async move { wf_callback(&mut con, &prefix, &ctx).await }
        })
        .handler("WfFlaky", move |ctx: JobContext| {
            let (mut con, prefix) = (c5.clone(), p5.clone());
            async move { wf_flaky(&mut con, &prefix, &ctx).await }
        })
        .handler("Gauge", move |ctx: JobContext| {
            let (mut con, key) = (c3.clone(), k3.clone());
            async move { gauge(&mut con, &key, &ctx).await }
        })
        .handler("Echo", move |ctx: JobContext| {
            let (mut con, key) = (c1.clone(), k1.clone());
            async move {
                let args = serde_json::to_string(ctx.args())?;
                let _: () = con.rpush(key, args).await?;
                Ok(())
            }
        })
        .handler("EchoPayload", move |ctx: JobContext| {
            let (mut con, key) = (c2.clone(), k2.clone());
            async move {
                let _: () = con.rpush(key, ctx.payload().text()).await?;
                Ok(())
            }
        })
        .handler("Noop", |_ctx: JobContext| async { Ok(()) })
        .handler("Sleep", |ctx: JobContext| async move {
            let ms: u64 = ctx.arg(0)?;
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(())
        })
        .handler("Stoppable", |ctx: JobContext| async move {
            let ms: u64 = ctx.arg(0)?;
            ctx.progress(1, 2, "started").await?;
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(ms)) => Ok(()),
                _ = ctx.cancelled() => Err(ctx.killed()),
            }
        })
        .handler("Fail", |ctx: JobContext| async move {
            let msg: String = ctx.arg(0).unwrap_or_else(|_| "failed".into());
            Err(JobError::msg(msg))
        })
        .handler("Panic", |ctx: JobContext| async move {
            let msg: String = ctx.arg(0).unwrap_or_else(|_| "panicked".into());
            panic!("{msg}")
        })
}

/// `Gauge` (args: ms, label): while it runs, holds a lease `<label>:<pid>:<start>` in
/// `<echo key>:running` (`<echo key>`: `COMPAT_GAUGE_KEY` when set) (a zset scored by when the lease ends, so a killed process's leases
/// lapse, and an audit can drop them by pid); at its start records the
/// number of live leases into `<echo key>:max` when higher, and its start time (epoch ms) in
/// `<echo key>:starts`; at its end pushes the label onto `<echo key>:done`. Limits audits read
/// these.
async fn gauge(con: &mut resq::conn::Conn, key: &str, ctx: &JobContext) -> resq::JobResult {
    let ms: u64 = ctx.arg(0)?;
    let label: String = ctx.arg(1)?;
    let now = chrono::Utc::now().timestamp_millis();
    let member = format!("{label}:{}:{now}", std::process::id());
    let enter = redis::Script::new(
        r"
        redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
        local n = redis.call('ZCOUNT', KEYS[1], ARGV[1], '+inf')
        if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end
        redis.call('RPUSH', KEYS[3], ARGV[1])
        return n",
    );
    let _: i64 = enter
        .key(format!("{key}:running"))
        .key(format!("{key}:max"))
        .key(format!("{key}:starts"))
        .arg(now)
        .arg(now + i64::try_from(ms).unwrap_or(0) + 100)
        .arg(&member)
        .invoke_async(con)
        .await?;
    tokio::time::sleep(Duration::from_millis(ms)).await;
    let _: () = redis::pipe()
        .zrem(format!("{key}:running"), &member)
        .rpush(format!("{key}:done"), &label)
        .query_async(con)
        .await?;
    Ok(())
}

/// `WfCallback` (args: kind, …): a batch's callback (its payload names the batch, `resq_batch`)
/// that counts every run of itself — `INCR <ns>:audit:cb:<batch>:<kind>` — and pushes
/// `<batch> <args as JSON>` onto `<ns>:audit:cb`, in one transaction: a callback fired twice
/// (or run twice) counts 2. The workflows audit reads these.
async fn wf_callback(con: &mut resq::conn::Conn, prefix: &str, ctx: &JobContext) -> JobResult {
    let kind: String = ctx.arg(0)?;
    let batch = ctx
        .batch()
        .ok_or_else(|| JobError::msg("WfCallback: the payload names no batch (resq_batch)"))?;
    let args = serde_json::to_string(ctx.args())?;
    let _: () = redis::pipe()
        .atomic()
        .incr(format!("{prefix}audit:cb:{batch}:{kind}"), 1)
        .ignore()
        .rpush(format!("{prefix}audit:cb"), format!("{batch} {args}"))
        .ignore()
        .query_async(con)
        .await?;
    Ok(())
}

/// `WfFlaky` (args: tag): counts its runs in `<ns>:audit:flaky:<tag>` and fails the first (a
/// batch member whose first run is retried).
async fn wf_flaky(con: &mut resq::conn::Conn, prefix: &str, ctx: &JobContext) -> JobResult {
    let tag: String = ctx.arg(0)?;
    let runs: i64 = con.incr(format!("{prefix}audit:flaky:{tag}"), 1).await?;
    if runs == 1 {
        return Err(JobError::msg("WfFlaky: the first run fails"));
    }
    Ok(())
}

/// One custom field, for `progress_with`.
fn field(key: &str, value: Value) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(key.to_string(), value);
    m
}

/// Waits for the harness's file `<COMPAT_SIGNAL_DIR>/<uuid><suffix>` (the capture harness's
/// `wait_signal`); returns at once when `COMPAT_SIGNAL_DIR` is not set.
async fn wait_signal(ctx: &JobContext, suffix: &str) -> JobResult {
    let Some(dir) = std::env::var_os("COMPAT_SIGNAL_DIR").map(PathBuf::from) else {
        return Ok(());
    };
    let id = ctx.job_id().map(|i| i.to_string()).unwrap_or_default();
    let path = dir.join(format!("{id}{suffix}"));
    for _ in 0..3000 {
        if path.exists() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(JobError::msg(format!(
        "harness signal {} never came",
        path.display()
    )))
}

/// The resque-status jobs (see the module docs).
fn status_jobs(registry: Registry) -> Registry {
    let mut registry = registry
        .handler("StatusEcho", |ctx: JobContext| async move {
            ctx.progress(1, 2, "half").await?;
            // Ruby: `completed("echo" => options)`. resq writes the key while the job runs and
            // the completion then replaces `message` where it stands, which leaves Ruby's order:
            // …, "message": "Completed at …", "echo": {…}.
            let options = Value::Object(ctx.options().cloned().unwrap_or_default());
            ctx.progress_with(None, None, None, &field("echo", options))
                .await?;
            Ok(())
        })
        .handler("StatusSleep", |ctx: JobContext| async move {
            let ms = ctx
                .options()
                .and_then(|o| o.get("ms"))
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let ticks = ms.div_ceil(50).max(1);
            for i in 1..=ticks {
                let left = ms.saturating_sub((i - 1) * 50);
                tokio::time::sleep(Duration::from_millis(left.min(50))).await;
                ctx.progress(i, ticks, &format!("slept {} of {ms} ms", (i * 50).min(ms)))
                    .await?;
            }
            Ok(())
        })
        // Twins of the capture's job classes (fixtures/resque-status/capture/status_jobs.rb).
        .handler("MyStatusJob", |ctx: JobContext| async move {
            ctx.progress(3, 10, "msg").await?;
            wait_signal(&ctx, ".go").await
        })
        .handler("CustomCompleteJob", |ctx: JobContext| async move {
            // at(1, 2, "halfway", "custom_key" => "custom value"); completed("result" => "x")
            let custom = field("custom_key", json!("custom value"));
            ctx.progress_with(Some(1.0), Some(2.0), Some("halfway"), &custom)
                .await?;
            ctx.set_result(&"x")?;
            Ok(())
        })
        .handler("FailingStatusJob", |ctx: JobContext| async move {
            ctx.progress(1, 4, "about to fail").await?;
            Err(JobError::msg("boom: <bad> & \"quoted\""))
        })
        .handler("KillableJob", |ctx: JobContext| async move {
            ctx.progress(1, 5, "step 1").await?;
            wait_signal(&ctx, ".go").await?;
            ctx.progress(2, 5, "step 2").await?;
            wait_signal(&ctx, ".go2").await?;
            ctx.progress(5, 5, "step 5").await?;
            Ok(())
        })
        .handler("NoTickJob", |_ctx: JobContext| async { Ok(()) })
        .handler("QuickJob", |ctx: JobContext| async move {
            ctx.progress(1, 1, "only step").await?;
            Ok(())
        })
        .handler("ZeroTotalJob", |ctx: JobContext| async move {
            ctx.progress(1, 0, "x").await?;
            Ok(())
        })
        .handler("GoneStatusJob", |ctx: JobContext| async move {
            ctx.progress(1, 2, "y").await?;
            Ok(())
        });
    for class in [
        "StatusEcho",
        "StatusSleep",
        "MyStatusJob",
        "CustomCompleteJob",
        "FailingStatusJob",
        "KillableJob",
        "NoTickJob",
        "QuickJob",
        "ZeroTotalJob",
        "GoneStatusJob",
    ] {
        registry = registry.statused(class);
    }
    registry
}

/// `COMPAT_RETRY=1`: handlers that always fail (with message args[0]) under a retry policy —
/// `RetryNow` (2 retries at once), `RetryLater` (2 retries after 1 s), `RetryHold` (1 retry
/// after 300 s: its first failure leaves resque-retry's keys and the delayed item in place).
fn retry_jobs(registry: Registry) -> Registry {
    let fail = |ctx: JobContext| async move {
        let msg: String = ctx.arg(0).unwrap_or_else(|_| "failed".into());
        Err(JobError::msg(msg))
    };
    registry
        .handler("RetryNow", fail)
        .handler("RetryLater", fail)
        .handler("RetryHold", fail)
        .retry("RetryNow", resq::RetryPolicy::fixed(Duration::ZERO, 2))
        .retry(
            "RetryLater",
            resq::RetryPolicy::fixed(Duration::from_secs(1), 2),
        )
        .retry(
            "RetryHold",
            resq::RetryPolicy::fixed(Duration::from_secs(300), 1),
        )
}

fn main() -> anyhow::Result<()> {
    resq::runtime::build()?.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    resq::logging::init_from_env();
    let builder = WorkerBuilder::from_env()?.signals_at_start(true);
    let cfg = builder.current();
    let endpoint = resq::conn::Endpoint::with_options(&cfg.redis_url, &cfg.redis)?;
    let cluster = endpoint.deployment() == resq::conn::Deployment::Cluster;
    let con = endpoint
        .connect()
        .await
        .with_context(|| format!("connecting to {}", resq::conn::Redacted(&cfg.redis_url)))?;
    let keys = keys::Keys::new(cfg.namespace.as_str());
    // On a cluster namespace without a hash tag (spread over the slots, docs/cluster.md) the
    // worker refuses resque-status classes: only the plain handlers (and the retry ones) run.
    let spread = cluster && !cfg.namespace.contains('{');
    let mut registry = registry(con, &keys);
    if std::env::var_os("COMPAT_RETRY").is_some() {
        registry = retry_jobs(registry);
    }
    registry = registry.retry("WfFlaky", resq::RetryPolicy::fixed(Duration::ZERO, 3));
    if !spread {
        registry = status_jobs(registry);
    }
    let running = builder.registry(registry).build()?.start().await?;
    running.announce()?;
    running.run_until_signal().await?;
    Ok(())
}
