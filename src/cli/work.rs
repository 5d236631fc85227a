//! `resq work`: run a worker process for the handlers in the registry the binary was built
//! with (see `docs/cli.md`: a service's own binary calls [`crate::cli::run`] with its handlers).
//!
//! Flags and environment variables are read through [`Config::from_lookup`], flag first, so a
//! malformed value is reported the way the library reports it, naming the variable
//! (`CONCURRENCY: "lots" is not a whole number`), whichever of the two gave it.

use crate::error::{Error, Result};
use crate::registry::Registry;
use crate::worker::Worker;
use crate::Config;
use clap::Args;

/// `resq work [--queues Q] [--concurrency N] [--interval S] [--metrics-addr ADDR]
/// [--allow-no-handlers]`.
///
/// The values are kept as text: [`Config::from_lookup`] checks them, so an error names the
/// variable as it does for the environment.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct WorkArgs {
    /// Queues in priority order, Ruby syntax (`a,b`, `*`, `high_*`, `!skip`); QUEUE is read
    /// too; default: default.
    #[arg(long, env = "QUEUES")]
    pub queues: Option<String>,
    /// Slots (each a Resque worker of its own) in this process; default 1.
    #[arg(long, env = "CONCURRENCY")]
    pub concurrency: Option<String>,
    /// Seconds: the idle blocking timeout, and how often a wildcard queue list or a pause is
    /// re-read (idle slots block on their queues and take a job the moment it lands); default 5.
    #[arg(long, env = "INTERVAL", allow_negative_numbers = true)]
    pub interval: Option<String>,
    /// Serve Prometheus metrics, /healthz and /readyz on this address (e.g. 127.0.0.1:9100).
    #[arg(long, env = "METRICS_ADDR")]
    pub metrics_addr: Option<String>,
    /// Run even though this binary registers no handlers (every job taken then fails as an
    /// unknown class); only useful to test wiring.
    #[arg(long)]
    pub allow_no_handlers: bool,
}

impl WorkArgs {
    /// The worker's configuration: these flags, then the environment, over the defaults.
    pub(crate) fn config(&self, url: &str, namespace: &str) -> Result<Config> {
        self.config_with(url, namespace, |k| std::env::var(k).ok())
    }

    /// [`WorkArgs::config`] with `env` standing in for the environment.
    pub(crate) fn config_with(
        &self,
        url: &str,
        namespace: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Config> {
        Config::from_lookup(|k| match k {
            "REDIS_URL" => Some(url.to_string()),
            "RESQUE_NAMESPACE" => Some(namespace.to_string()),
            "QUEUES" => self.queues.clone().or_else(|| env(k)),
            "CONCURRENCY" => self.concurrency.clone().or_else(|| env(k)),
            "INTERVAL" => self.interval.clone().or_else(|| env(k)),
            "METRICS_ADDR" => self.metrics_addr.clone().or_else(|| env(k)),
            _ => env(k),
        })
    }
}

/// Runs the worker until QUIT, TERM or INT.
///
/// Refuses to start when `registry` has no handlers, unless `--allow-no-handlers`: such a
/// worker would take every job of its queues and fail each one as an unknown class.
pub(crate) async fn run(url: &str, namespace: &str, w: WorkArgs, registry: Registry) -> Result<()> {
    let cfg = w.config(url, namespace)?;
    if registry.classes().is_empty() {
        if !w.allow_no_handlers {
            return Err(Error::Config {
                var: "handlers",
                message: "this binary registers no job handlers, so every job it took from \
                          its queues would fail as an unknown class. Build your own binary \
                          around resq::cli::run(registry) (docs/cli.md), or pass \
                          --allow-no-handlers to run anyway"
                    .into(),
            });
        }
        tracing::warn!(
            "no handlers registered: every job will fail as an unknown class \
             (--allow-no-handlers)"
        );
    }
    let running = Worker::builder()
        .config(cfg)
        .signals_at_start(true)
        .registry(registry)
        .build()?
        .start()
        .await?;
    running.announce()?;
    running.run_until_signal().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(concurrency: Option<&str>) -> WorkArgs {
        WorkArgs {
            concurrency: concurrency.map(str::to_string),
            ..WorkArgs::default()
        }
    }

    #[test]
    fn flags_come_before_the_environment() {
        let env = |k: &str| match k {
            "CONCURRENCY" => Some("3".to_string()),
            "QUEUE" => Some("from_queue".to_string()),
            _ => None,
        };
        let c = args(Some("8"))
            .config_with("redis://h:1", "ns", env)
            .expect("config");
        assert_eq!(c.concurrency, 8);
        assert_eq!(c.namespace, "ns");
        // No --queues and no QUEUES: QUEUE applies, as it does for the library.
        assert_eq!(c.queues.entries(), &["from_queue"]);
        let c = args(None)
            .config_with("redis://h:1", "ns", env)
            .expect("config");
        assert_eq!(c.concurrency, 3);
    }

    #[test]
    fn bad_values_name_their_variable() {
        let e = args(Some("lots"))
            .config_with("redis://h:1", "ns", |_| None)
            .expect_err("lots");
        assert_eq!(
            e.to_string(),
            r#"CONCURRENCY: "lots" is not a whole number"#
        );
    }
}
