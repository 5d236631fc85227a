//! The process: builds the slots, registers them, runs the heartbeat and the watchers, obeys
//! signals, and unregisters on the way out.
//!
//! Signals (Ruby Resque's meanings): QUIT — finish running jobs, then exit; TERM/INT — take no
//! new job, wait `RESQUE_TERM_TIMEOUT` for running ones, then abort them (each recorded as a
//! `Resque::TermException` failure) and exit; USR2 — pause; CONT — resume. Exit is always
//! after unregistering.

use super::fetch::Fetch;
use super::heartbeat::Heartbeat;
use super::lifecycle;
use super::shutdown::{Phase, Shutdown};
use super::slot::{Slot, SlotState};
use super::step::Stepper;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::identity::WorkerId;
use crate::keys::Keys;
use crate::registry::Registry;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Builds a [`Worker`]: configuration (from the environment or by hand) plus handlers.
#[derive(Default)]
pub struct WorkerBuilder {
    /// The configuration so far.
    config: Config,
    /// Handlers.
    registry: Registry,
}

impl WorkerBuilder {
    /// Starts from [`Config::from_env`].
    pub fn from_env() -> Result<Self> {
        Ok(WorkerBuilder {
            config: Config::from_env()?,
            registry: Registry::new(),
        })
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

    /// The handlers.
    pub fn registry(mut self, registry: Registry) -> Self {
        self.registry = registry;
        self
    }

    /// Checks the configuration and builds the worker.
    pub fn build(self) -> Result<Worker> {
        self.config.validate()?;
        Ok(Worker {
            config: self.config,
            registry: Arc::new(self.registry),
        })
    }
}

/// A configured worker process, not yet started.
pub struct Worker {
    /// Configuration.
    config: Config,
    /// Handlers.
    registry: Arc<Registry>,
}

impl Worker {
    /// A builder with default configuration.
    pub fn builder() -> WorkerBuilder {
        WorkerBuilder::default()
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Connects, registers every slot and starts them.
    pub async fn start(self) -> Result<Running> {
        crate::registry::panic::install_hook();
        let cfg = self.config;
        let keys = Keys::new(cfg.namespace.clone());
        let endpoint = crate::conn::Endpoint::open(&cfg.redis_url)?;
        let mut con = endpoint.connect().await?;
        let pid = std::process::id();
        let ids: Vec<String> = (0..cfg.concurrency)
            .map(|k| {
                WorkerId::for_slot(&cfg.hostname, pid, k, cfg.queues.entries())
                    .as_str()
                    .to_string()
            })
            .collect();
        let started = chrono::Utc::now();
        lifecycle::register(&mut con, &keys, &ids, started).await?;
        let fetch = Fetch::new(keys.clone(), cfg.queues.clone(), cfg.interval, &mut con).await?;
        let shutdown = Shutdown::default();
        let (stop_tx, stop_rx) = watch::channel(false);
        let states: Vec<Arc<SlotState>> = ids
            .iter()
            .map(|id| {
                Arc::new(SlotState {
                    id: Arc::from(id.as_str()),
                    record: tokio::sync::Mutex::new(None),
                })
            })
            .collect();
        let heartbeat = Heartbeat {
            endpoint: endpoint.clone(),
            keys: keys.clone(),
            slots: states.clone(),
            interval: cfg.heartbeat_interval,
            started,
            stop: stop_rx.clone(),
        }
        .spawn()?;
        let fetch_task = tokio::spawn(fetch.clone().run(endpoint.clone(), con.clone(), stop_rx));
        let mut slots = JoinSet::new();
        for state in &states {
            let slot = Slot {
                stepper: Stepper::new(&keys, &state.id, cfg.count_failed_as_processed),
                state: state.clone(),
                con: con.clone(),
                fetch: fetch.clone(),
                registry: self.registry.clone(),
                shutdown: shutdown.subscribe(),
                job_timeout: cfg.job_timeout,
            };
            slots.spawn(slot.run());
        }
        tracing::info!(slots = ids.len(), queues = ?cfg.queues.entries(), namespace = %cfg.namespace, "worker started");
        Ok(Running {
            ids,
            keys,
            con,
            fetch,
            shutdown,
            slots,
            stop: stop_tx,
            heartbeat: Some(heartbeat),
            fetch_task,
            term_timeout: cfg.term_timeout,
        })
    }
}

/// A started worker process.
pub struct Running {
    /// Slot ids, in slot order.
    ids: Vec<String>,
    /// Key names.
    keys: Keys,
    /// Shared connection.
    con: crate::conn::Conn,
    /// Wake-ups and pause state.
    fetch: Arc<Fetch>,
    /// Shutdown phases.
    shutdown: Shutdown,
    /// Slot tasks.
    slots: JoinSet<()>,
    /// Stops the heartbeat and watcher tasks.
    stop: watch::Sender<bool>,
    /// The heartbeat thread.
    heartbeat: Option<std::thread::JoinHandle<()>>,
    /// The watcher supervisor.
    fetch_task: tokio::task::JoinHandle<()>,
    /// `RESQUE_TERM_TIMEOUT`.
    term_timeout: std::time::Duration,
}

impl Running {
    /// The slots' worker ids.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// Asks the process to stop: [`Phase::Quit`] lets jobs finish, [`Phase::Term`] aborts them
    /// after the term timeout, [`Phase::Abort`] at once.
    pub fn stop(&self, phase: Phase) {
        self.shutdown.advance(phase);
        if phase == Phase::Term {
            let s = self.shutdown.clone();
            let t = self.term_timeout;
            tokio::spawn(async move {
                tokio::time::sleep(t).await;
                s.advance(Phase::Abort);
            });
        }
    }

    /// Pauses (`true`) or resumes this process, as USR2 / CONT do.
    pub fn pause(&self, paused: bool) {
        self.fetch.set_local_paused(paused);
    }

    /// Runs until QUIT, TERM or INT, obeying USR2/CONT on the way; then waits for the slots and
    /// unregisters.
    pub async fn run_until_signal(self) -> Result<()> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut quit = signal(SignalKind::quit())?;
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let mut usr2 = signal(SignalKind::user_defined2())?;
        let mut cont = signal(SignalKind::from_raw(libc_sigcont()))?;
        let mut this = self;
        loop {
            tokio::select! {
                _ = quit.recv() => { tracing::info!("QUIT: finishing running jobs"); this.stop(Phase::Quit); break; }
                _ = term.recv() => { tracing::info!("TERM: stopping"); this.stop(Phase::Term); break; }
                _ = int.recv() => { tracing::info!("INT: stopping"); this.stop(Phase::Term); break; }
                _ = usr2.recv() => { tracing::info!("USR2: paused"); this.pause(true); }
                _ = cont.recv() => { tracing::info!("CONT: resumed"); this.pause(false); }
                _ = this.slots.join_next(), if !this.slots.is_empty() => {}
            }
        }
        this.wait().await
    }

    /// Waits for every slot to end (call [`Running::stop`] first), then unregisters.
    pub async fn wait(mut self) -> Result<()> {
        while self.slots.join_next().await.is_some() {}
        let _ = self.stop.send(true);
        self.fetch_task.abort();
        if let Some(h) = self.heartbeat.take() {
            let _ = tokio::task::spawn_blocking(move || h.join()).await;
        }
        let ids = self.ids.clone();
        let keys = self.keys.clone();
        let con = self.con.clone();
        crate::conn::retry("unregister", || {
            let mut con = con.clone();
            let (keys, ids) = (&keys, &ids);
            async move { lifecycle::unregister(&mut con, keys, ids).await }
        })
        .await;
        tracing::info!(slots = self.ids.len(), "worker unregistered");
        Ok(())
    }
}

/// SIGCONT's number (18 on Linux and most Unixes; 19 on macOS/BSD).
fn libc_sigcont() -> i32 {
    if cfg!(any(
        target_os = "macos",
        target_os = "freebsd",
        target_os = "openbsd"
    )) {
        19
    } else {
        18
    }
}

impl From<std::convert::Infallible> for Error {
    fn from(e: std::convert::Infallible) -> Self {
        match e {}
    }
}
