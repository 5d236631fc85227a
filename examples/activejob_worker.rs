//! A worker for a Rails fleet's ActiveJob jobs, used by `compat-tests/activejob`.
//!
//! Configured like `compat_worker` (`REDIS_URL`, `RESQUE_NAMESPACE`, `QUEUES`, `CONCURRENCY`,
//! `INTERVAL`, …). Handlers are registered under ActiveJob class names; Rails' wrapper payloads
//! are dispatched to them by `job_class`:
//! * `EchoJob` — `RPUSH <ns>:compat:echo {"job_class","args","unknown","keywords","metadata",
//!   "queue","payload_class"}` (args decoded to plain JSON, metadata as sent);
//! * `SendInvoiceJob` — a typed [`resq::Job`] taking `perform(invoice_id, notify:, cc: [])` into
//!   serde types; echoes `{"job_class","typed":{…},"metadata"}`;
//! * `FailJob` — fails with `RuntimeError` and message `args[0]`;
//! * `SleepJob` — sleeps `args[0]` ms.
//!
//! Prints `worker <id>` per slot at start; exits 0 after unregistering on QUIT, TERM or INT.

use anyhow::Context;
use redis::AsyncCommands;
use resq::{Job, JobContext, JobError, JobResult, Registry, WorkerBuilder};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::time::Duration;

/// Where echo handlers write.
#[derive(Clone)]
struct Echo {
    /// Shared connection.
    con: resq::conn::Conn,
    /// `<ns>:compat:echo`.
    key: String,
}

impl Echo {
    async fn push(&self, v: serde_json::Value) -> JobResult {
        let mut con = self.con.clone();
        let _: () = con.rpush(&self.key, serde_json::to_string(&v)?).await?;
        Ok(())
    }
}

/// `SendInvoiceJob#perform(invoice_id, notify:, cc: [])`: the keywords arrive as the last
/// argument, a hash.
struct SendInvoice(Echo);

/// The keyword arguments of `SendInvoiceJob`.
#[derive(Deserialize, Serialize)]
struct InvoiceOptions {
    notify: bool,
    #[serde(default)]
    cc: Vec<String>,
}

impl Job for SendInvoice {
    const CLASS: &'static str = "SendInvoiceJob";
    type Args = (u64, InvoiceOptions);

    async fn perform(&self, (invoice_id, opts): Self::Args, ctx: JobContext) -> JobResult {
        let meta = ctx.activejob().map(|j| j.metadata().clone());
        self.0
            .push(json!({
                "job_class": ctx.class(),
                "typed": {"invoice_id": invoice_id, "notify": opts.notify, "cc": opts.cc},
                "metadata": meta,
            }))
            .await
    }
}

fn registry(echo: Echo) -> Registry {
    let e = echo.clone();
    Registry::new()
        .handler("EchoJob", move |ctx: JobContext| {
            let e = e.clone();
            async move {
                let job = ctx
                    .activejob()
                    .ok_or_else(|| JobError::msg("EchoJob expects an ActiveJob payload"))?;
                e.push(json!({
                    "job_class": ctx.class(),
                    "args": ctx.args(),
                    "unknown": job.unknown(),
                    "keywords": job.has_keywords(),
                    "metadata": job.metadata(),
                    "queue": ctx.queue(),
                    "payload_class": ctx.payload().class(),
                }))
                .await
            }
        })
        .job(SendInvoice(echo))
        .handler("FailJob", |ctx: JobContext| async move {
            let msg: String = ctx.arg(0).unwrap_or_else(|_| "failed".into());
            Err(JobError::msg(msg))
        })
        .handler("SleepJob", |ctx: JobContext| async move {
            let ms: u64 = ctx.arg(0)?;
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(())
        })
}

fn main() -> anyhow::Result<()> {
    resq::runtime::build()?.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    resq::logging::init_from_env();
    let builder = WorkerBuilder::from_env()?.signals_at_start(true);
    let c = builder.current();
    let con = resq::conn::Endpoint::with_options(&c.redis_url, &c.redis)?
        .connect()
        .await
        .with_context(|| format!("connecting to {}", resq::conn::Redacted(&c.redis_url)))?;
    let echo = Echo {
        con,
        key: format!("{}:compat:echo", c.namespace.as_str()),
    };
    let running = builder.registry(registry(echo)).build()?.start().await?;
    running.announce()?;
    running.run_until_signal().await?;
    Ok(())
}
