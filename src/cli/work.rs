//! `resq work`: run a worker process for the handlers in the registry the binary was built
//! with (see `docs/cli.md`: a service's own binary calls [`crate::cli::run`] with its handlers).

use crate::config::{self, Config};
use crate::error::Result;
use crate::queues::QueueList;
use crate::registry::Registry;
use crate::worker::Worker;
use clap::Args;
use std::net::SocketAddr;

/// `resq work [--queues Q] [--concurrency N] [--interval S] [--metrics-addr ADDR]`.
#[derive(Args, Debug, Clone)]
pub struct WorkArgs {
    /// Queues, Ruby syntax (`a,b`, `*`, globs, `!skip`).
    #[arg(long, env = "QUEUES", default_value = "default")]
    pub queues: String,
    /// Slots.
    #[arg(long, env = "CONCURRENCY", default_value_t = 1)]
    pub concurrency: usize,
    /// Poll interval in seconds.
    #[arg(long, env = "INTERVAL", default_value = "5")]
    pub interval: String,
    /// Serve Prometheus metrics, /healthz and /readyz on this address (e.g. 127.0.0.1:9100).
    #[arg(long, env = "METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,
}

/// Runs the worker until QUIT, TERM or INT.
pub async fn run(url: &str, namespace: &str, w: WorkArgs, registry: Registry) -> Result<()> {
    if registry.classes().is_empty() {
        tracing::warn!(
            "no handlers registered: every job will fail as an unknown class \
             (build your own binary around resq::cli::run; see docs/cli.md)"
        );
    }
    let cfg = Config {
        redis_url: config::parse_url(url)?,
        namespace: namespace.to_string(),
        queues: QueueList::parse(&w.queues)?,
        concurrency: w.concurrency,
        interval: config::parse_secs("INTERVAL", &w.interval)?,
        metrics_addr: w.metrics_addr,
        ..Config::from_env()?
    };
    let running = Worker::builder()
        .config(cfg)
        .registry(registry)
        .build()?
        .start()
        .await?;
    running.announce()?;
    running.run_until_signal().await
}
