//! Building a worker: its [`Config`] (from the environment, or set method by method) and its
//! handlers ([`Registry`]), checked once by [`WorkerBuilder::build`].

use super::config::Config;
use super::launcher::Worker;
use crate::error::Result;
use crate::registry::Registry;
use std::sync::Arc;

/// Builds a [`Worker`]: configuration (from the environment or by hand) plus handlers.
#[derive(Default)]
pub struct WorkerBuilder {
    /// The configuration so far.
    config: Config,
    /// Handlers.
    registry: Registry,
    /// Whether [`Worker::start`] starts listening for signals.
    signals_at_start: bool,
}

impl WorkerBuilder {
    /// Starts from [`Config::from_env`].
    pub fn from_env() -> Result<Self> {
        Ok(WorkerBuilder {
            config: Config::from_env()?,
            ..WorkerBuilder::default()
        })
    }

    /// Listen for QUIT, TERM, INT, USR1, USR2 and CONT from [`Worker::start`] on (as Ruby
    /// registers its handlers at startup), so a signal sent the moment the worker ids appear is
    /// held for [`Running::run_until_signal`](super::Running::run_until_signal) instead of
    /// getting its default action. Off by default: the library touches no signal disposition
    /// until `run_until_signal` is called.
    pub fn signals_at_start(mut self, on: bool) -> Self {
        self.signals_at_start = on;
        self
    }

    /// The configuration so far.
    pub fn current(&self) -> &Config {
        &self.config
    }

    /// Replaces the whole configuration.
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// `REDIS_URL`.
    pub fn redis_url(mut self, url: impl Into<String>) -> Self {
        self.config.redis_url = url.into();
        self
    }

    /// `RESQUE_NAMESPACE`.
    pub fn namespace(mut self, ns: impl Into<String>) -> Self {
        self.config.namespace = ns.into();
        self
    }

    /// `QUEUES` (Ruby syntax).
    pub fn queues(mut self, queues: &str) -> Result<Self> {
        self.config.queues = crate::queues::QueueList::parse(queues)?;
        Ok(self)
    }

    /// `CONCURRENCY`.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.config.concurrency = n;
        self
    }

    /// `INTERVAL`.
    pub fn interval(mut self, d: std::time::Duration) -> Self {
        self.config.interval = d;
        self
    }

    /// `RESQ_AT_LEAST_ONCE`: requeue interrupted jobs (crash, TERM timeout, USR1) at the head
    /// of their queue instead of recording them as failures; a job may then run twice.
    pub fn at_least_once(mut self, on: bool) -> Self {
        self.config.at_least_once = on;
        self
    }

    /// `RESQUE_TERM_TIMEOUT`: how long TERM/INT wait for running jobs before aborting them.
    pub fn term_timeout(mut self, d: std::time::Duration) -> Self {
        self.config.term_timeout = d;
        self
    }

    /// `RESQ_PRUNE`: whether this process prunes dead workers.
    pub fn prune(mut self, on: bool) -> Self {
        self.config.prune = on;
        self
    }

    /// `JESQUE_DELAYED_QUEUES`: queues of the list to run as Jesque delayed/recurring zset
    /// queues (see `super::jesque`).
    pub fn jesque_delayed_queues<I, S>(mut self, queues: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.config.jesque_delayed_queues = queues.into_iter().map(Into::into).collect();
        self
    }

    /// `RESQ_SCHEDULER`: also run the scheduler (delayed and recurring jobs, see
    /// [`crate::scheduler`]) in this process.
    pub fn scheduler(mut self, on: bool) -> Self {
        self.config.scheduler = on;
        self
    }

    /// `RESQ_SCHEDULER_INTERVAL`: the scheduler's poll period (default 1 s).
    pub fn scheduler_interval(mut self, d: std::time::Duration) -> Self {
        self.config.schedule.interval = d;
        self
    }

    /// The handlers.
    pub fn registry(mut self, registry: Registry) -> Self {
        self.registry = registry;
        self
    }

    /// `METRICS_ADDR`: serve Prometheus metrics, `/healthz` and `/readyz` on `addr`.
    pub fn metrics_addr(mut self, addr: std::net::SocketAddr) -> Self {
        self.config.metrics_addr = Some(addr);
        self
    }

    /// Checks the configuration and builds the worker.
    pub fn build(self) -> Result<Worker> {
        self.config.validate()?;
        Ok(Worker {
            config: self.config,
            registry: Arc::new(self.registry),
            signals_at_start: self.signals_at_start,
        })
    }
}
