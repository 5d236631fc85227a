//! Middleware example: report every failed job to an error tracker.
//!
//! `ErrorReporter` wraps every job; when the job fails it hands a `Report` (class, queue,
//! worker, args, exception, message, backtrace) to a `Sink`. Panics and time-outs reach
//! middleware as ordinary failures (`Resq::Panic`, `Resque::TermException`…), so one layer
//! sees them all. Plug your tracker in as the sink (a Sentry or Honeybadger client, an HTTP
//! call); here the sink prints one JSON line per report on stdout.
//!
//! Run with `REDIS_URL` pointing at a Redis you can write to:
//! `REDIS_URL=redis://127.0.0.1:6379 cargo run --example error_reporter`. It enqueues three
//! jobs in namespace `resq-example-reporter`, runs them, prints the two reports and exits.

use resq::middleware::{BoxFuture, Middleware, Next};
use resq::{Client, JobContext, JobError, JobResult, Phase, Registry, Worker};
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::sync::mpsc;

/// What the tracker receives about one failed job.
#[derive(Debug, Serialize)]
struct Report {
    class: String,
    queue: String,
    worker: String,
    args: Vec<Value>,
    exception: String,
    message: String,
    backtrace: Vec<String>,
}

/// Where reports go (your error tracker).
trait Sink: Send + Sync + 'static {
    fn send(&self, report: Report);
}

/// Reports every failure to `sink`, then lets the failure continue to Resque's failed list.
struct ErrorReporter<S>(Arc<S>);

impl<S: Sink> Middleware for ErrorReporter<S> {
    fn call<'a>(&'a self, ctx: JobContext, next: Next<'a>) -> BoxFuture<'a, JobResult> {
        Box::pin(async move {
            let outcome = next.run(ctx.clone()).await;
            // DontPerform is a skip, not a failure.
            match &outcome {
                Err(e) if !e.is_dont_perform() => self.0.send(Report {
                    class: ctx.class().to_string(),
                    queue: ctx.queue().to_string(),
                    worker: ctx.worker_id().to_string(),
                    args: ctx.args().to_vec(),
                    exception: e.exception.clone(),
                    message: e.message.clone(),
                    backtrace: e.backtrace.clone(),
                }),
                _ => {}
            }
            outcome
        })
    }
}

/// The demo's sink: prints each report and tells `main` one arrived.
struct PrintSink(mpsc::UnboundedSender<()>);

impl Sink for PrintSink {
    fn send(&self, report: Report) {
        println!("reported: {}", json!(report));
        let _ = self.0.send(());
    }
}

fn main() -> anyhow::Result<()> {
    resq::logging::init_from_env();
    resq::runtime::build()?.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let ns = std::env::var("RESQUE_NAMESPACE").unwrap_or_else(|_| "resq-example-reporter".into());
    let (tx, mut reports) = mpsc::unbounded_channel();

    let registry = Registry::new()
        .layer(ErrorReporter(Arc::new(PrintSink(tx))))
        .handler("Charge", |ctx: JobContext| async move {
            let cents: i64 = ctx.arg(1)?;
            if cents < 0 {
                return Err(JobError::new("ArgumentError", "negative amount"));
            }
            println!("charged {cents} cents");
            Ok(())
        })
        .handler("Explode", |_ctx: JobContext| async move {
            panic!("the handler panicked");
        });

    let client = Client::connect(&url, &ns).await?;
    client
        .enqueue_class("Charge", &[json!("alice"), json!(1250)])
        .await?;
    client
        .enqueue_class("Charge", &[json!("bob"), json!(-5)])
        .await?;
    client.enqueue_class("Explode", &[]).await?;

    let running = Worker::builder()
        .redis_url(&url)
        .namespace(&ns)
        .registry(registry)
        .build()?
        .start()
        .await?;
    for _ in 0..2 {
        reports.recv().await;
    }
    running.stop(Phase::Quit);
    running.wait().await?;
    Ok(())
}
