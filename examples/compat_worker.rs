//! The reference worker that compat tests and benchmarks run.
//!
//! Configured only by the environment (`REDIS_URL`, `RESQUE_NAMESPACE`, `QUEUES`, `CONCURRENCY`,
//! `INTERVAL`, …; see the README). Handlers: `Echo` (RPUSH the compact JSON array of its args
//! onto `<ns>:compat:echo`), `EchoPayload` (RPUSH the raw payload), `Noop`, `Sleep` (args[0]
//! ms), `Fail` (fails with message args[0]), `Panic` (panics with message args[0]).
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
    let (c2, k2) = (con, echo_key);
    Registry::new()
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
