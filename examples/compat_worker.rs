//! The reference worker that compat tests and benchmarks run.
//!
//! Configured only by the environment (`REDIS_URL`, `RESQUE_NAMESPACE`, `QUEUES`, `CONCURRENCY`,
//! `INTERVAL`, …; see the README). Handlers: `Echo` (RPUSH the compact JSON array of its args
//! onto `<ns>:compat:echo`), `EchoPayload` (RPUSH the raw payload), `Noop`, `Sleep` (args[0]
//! ms), `Fail` (fails with message args[0]), `Panic` (panics with message args[0]), `Gauge`
//! (records how many run at once; see [`gauge`]).
//! `RESQ_SCHEDULER=1` also runs the scheduler in-process (delayed and recurring jobs);
//! `JESQUE_DELAYED_QUEUES=a,b` runs those queues as Jesque zset queues (both read by
//! `WorkerBuilder::from_env`). `METRICS_ADDR=127.0.0.1:9100` serves Prometheus metrics,
//! `/healthz` and `/readyz` there (also read by `WorkerBuilder::from_env`).
//! Prints `worker <id>` per slot at start; exits 0 after unregistering on QUIT, TERM or INT.

use anyhow::Context;
use redis::AsyncCommands;
use resq::{JobContext, JobError, Registry, WorkerBuilder};
use std::time::Duration;

fn registry(con: resq::conn::Conn, echo_key: String) -> Registry {
    let (c1, k1) = (con.clone(), echo_key.clone());
    let (c2, k2) = (con.clone(), echo_key.clone());
    let (c3, k3) = (con, echo_key);
    Registry::new()
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
/// `<echo key>:running` (a zset scored by when the lease ends, so a killed process's leases
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

fn main() -> anyhow::Result<()> {
    resq::runtime::build()?.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    resq::logging::init_from_env();
    let builder = WorkerBuilder::from_env()?.signals_at_start(true);
    let cfg = builder.current();
    let con = resq::conn::Endpoint::with_options(&cfg.redis_url, &cfg.redis)?
        .connect()
        .await
        .with_context(|| format!("connecting to {}", resq::conn::Redacted(&cfg.redis_url)))?;
    let echo = resq::Keys::new(cfg.namespace.as_str()).compat_echo();
    let running = builder
        .registry(registry(con, echo))
        .build()?
        .start()
        .await?;
    running.announce()?;
    running.run_until_signal().await?;
    Ok(())
}
