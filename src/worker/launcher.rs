//! The process: builds the slots, registers them, runs the heartbeat and the watchers, obeys
//! signals, and unregisters on the way out.
//!
//! Signals (Ruby Resque's meanings; `docs/operations.md` has the full table and exit codes):
//! * QUIT — take no new job, let running ones finish, unregister, exit;
//! * TERM/INT — take no new job, wait `RESQUE_TERM_TIMEOUT` for running ones, then abort them
//!   (each recorded as a `Resque::TermException` "SIGTERM" failure, or requeued at the head of
//!   its queue under `at_least_once`), unregister, exit; a second TERM/INT aborts at once;
//! * USR1 — abort running jobs now (recorded as above, message "SIGUSR1") and keep working;
//! * USR2 — pause (take no new job); CONT — resume.
//!
//! Signals keep being obeyed during shutdown (QUIT then TERM escalates; USR1 aborts the jobs a
//! QUIT is waiting for). Exit is always after unregistering.
//!
//! Pruning ([`super::prune`]) runs once before registering and then every minute.

use super::batch::Batcher;
use super::builder::WorkerBuilder;
use super::config::Config;
use super::fetch::Fetch;
use super::heartbeat::Heartbeat;
use super::lifecycle;
use super::prune::{self, Pruner};
use super::shutdown::{Phase, Shutdown};
use super::slot::{Slot, SlotState};
use super::step::Stepper;
use crate::error::{Error, Result};
use crate::keys::Keys;
use crate::registry::Registry;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// A configured worker process, not yet started.
pub struct Worker {
    /// Configuration.
    pub(super) config: Config,
    /// Handlers.
    pub(super) registry: Arc<Registry>,
    /// Whether [`Worker::start`] starts listening for signals.
    pub(super) signals_at_start: bool,
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
    ///
    /// Signals are left alone unless [`WorkerBuilder::signals_at_start`] was set;
    /// [`Running::run_until_signal`] listens for them otherwise, and a process that embeds a
    /// worker without calling it stops it with [`Running::stop`] and [`Running::wait`].
    pub async fn start(self) -> Result<Running> {
        crate::registry::panic::install_hook();
        let signals = if self.signals_at_start {
            Some(Signals::install()?)
        } else {
            None
        };
        let cfg = self.config;
        let endpoint = crate::conn::Endpoint::with_options(&cfg.redis_url, &cfg.redis)?;
        let keys = endpoint.keys(&cfg.namespace)?;
        let mut con = endpoint.connect().await?;
        crate::conn::check_server(&mut con, endpoint.label()).await?;
        crate::scripts::preload(&mut con).await;
        let metrics = match cfg.metrics_addr {
            None => None,
            #[cfg(feature = "metrics")]
            Some(addr) => {
                // Bound before registering, so a bad address fails before anything is written.
                let admin = crate::admin::Admin::new(con.clone(), keys.clone());
                let listener = crate::exporter::serve(addr, admin).await?;
                crate::metrics::set_slots(cfg.concurrency);
                Some(listener)
            }
            #[cfg(not(feature = "metrics"))]
            Some(_) => {
                return Err(Error::Config {
                    var: "METRICS_ADDR",
                    message: "resq was built without its `metrics` feature".into(),
                })
            }
        };
        if keys.is_spread() {
            super::spread::refuse(&cfg, &self.registry)?;
        }
        let pid = std::process::id();
        let names = match keys.is_spread() {
            true => super::fetch::resolve_names(&keys, &cfg.queues, &mut con).await?,
            false => Vec::new(),
        };
        let groups = super::spread::groups(&cfg, &keys, pid, &names);
        let gates = match keys.is_spread() {
            true => super::spread::gates(&cfg, &mut con, &keys, &self.registry, &groups).await?,
            false => super::spread::Gates {
                queues: vec![None; groups.len()],
                classes: Vec::new(),
            },
        };
        let class_gates = (!gates.classes.is_empty()).then(|| {
            Arc::new(super::class_gate::ClassGates {
                gates: gates.classes.clone(),
                con: con.clone(),
            })
        });
        let ids: Vec<String> = groups.iter().flat_map(|g| g.ids.iter().cloned()).collect();
        let started = chrono::Utc::now();
        let pruner = Pruner::new(keys.clone(), &ids, pid, cfg.prune_after, cfg.at_least_once);
        if cfg.prune {
            // Ruby prunes before it registers; a failed round is only logged.
            // (Its second look at missed queued jobs is left to the next round: no wait here.)
            let first = pruner.clone().without_second_look();
            if let Err(e) = first.run_once(&mut con).await {
                tracing::warn!(error = %e, "startup prune failed; will try again in a minute");
            }
        }
        lifecycle::register(&mut con, &keys, &ids, started).await?;
        let fetch = Fetch::with_jesque(
            keys.clone(),
            cfg.queues.clone(),
            cfg.jesque_delayed_queues.clone(),
            cfg.interval,
            &mut con,
        )
        .await?;
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
        let prune_task = cfg
            .prune
            .then(|| tokio::spawn(prune_periodically(pruner, con.clone(), stop_rx.clone())));
        let scheduler_task = match cfg.scheduler {
            true => {
                let sc = crate::scheduler::SchedulerConfig::from_config(&cfg);
                let sched = crate::scheduler::Scheduler::new(con.clone(), sc);
                Some(tokio::spawn(sched.run(stop_rx.clone())))
            }
            false => None,
        };
        let tracker =
            crate::jobs::Tracker::new(con.clone(), keys.clone(), cfg.job_ttl, cfg.result_max);
        tokio::spawn(tracker.clone().watch_kills(stop_rx.clone()));
        let limits = crate::limits::cache::LimitsCache::new(
            keys.clone(),
            self.registry.declared_limits().to_vec(),
        );
        // (Spread: a step there reads no limit; the queues' limits are the groups' gates.)
        if !keys.is_spread() {
            limits.start(&mut con).await?;
            tokio::spawn(limits.clone().run(con.clone(), stop_rx.clone()));
        }
        let _ = fetch.limits.set(limits.clone());
        let fetch_task = tokio::spawn(fetch.clone().run(
            endpoint.clone(),
            con.clone(),
            stop_rx.clone(),
        ));
        let (abort_jobs, abort_rx) = watch::channel(0u64);
        let chain = Arc::new(crate::middleware::Chain::new(
            self.registry.layers(),
            cfg.job_timeout,
        ));
        let steps = Batcher::start(
            con.clone(),
            super::batch::LANES.min(states.len()),
            fetch.clone(),
            limits.clone(),
            class_gates.clone(),
        );
        let shared = keys
            .is_spread()
            .then(|| Arc::new(super::step::spread::Shared::default()));
        if let Some(s) = &shared {
            tokio::spawn(super::spread::flush_counts(
                s.clone(),
                gates.queues.iter().flatten().cloned().collect(),
                gates.classes.clone(),
                con.clone(),
                keys.clone(),
                stop_rx.clone(),
            ));
        }
        let settings = super::step::Settings {
            count_failed: cfg.count_failed_as_processed,
            max_payload: cfg.max_payload,
            statused: self.registry.statused_classes(),
            sweep: self.registry.longest_track_ttl(cfg.job_ttl),
            shared: shared.clone(),
        };
        // A spread namespace's groups each park in a wake-up lane of their queue.
        let lanes: Vec<String> = groups
            .iter()
            .filter_map(|g| g.queues.as_ref()?.queues.first().map(|(_, k, _)| k.clone()))
            .collect();
        fetch.set_lanes(&lanes);
        // Each group's slots share a config (a spread namespace's one per queue).
        let mut placed = Vec::with_capacity(states.len());
        for (g, gate) in groups.iter().zip(&gates.queues) {
            let config = super::step::StepConfig::new(&keys, &g.ids, &settings);
            for i in 0..g.ids.len() {
                placed.push((config.clone(), i + 1, g.queues.clone(), gate.clone()));
            }
        }
        // More slots than CONCURRENCY (a spread namespace's slots per queue): at most
        // CONCURRENCY jobs at once all the same.
        let bound = (states.len() > cfg.concurrency)
            .then(|| Arc::new(tokio::sync::Semaphore::new(cfg.concurrency)));
        let mut slots = JoinSet::new();
        for (state, (config, index, queues, gate)) in states.iter().zip(placed) {
            let slot = Slot {
                stepper: Arc::new(
                    Stepper::in_process(&keys, &state.id, config, index, settings.clone())
                        .with_limits(limits.clone())
                        .with_gate(gate),
                ),
                queues,
                steps: steps.clone(),
                state: state.clone(),
                con: con.clone(),
                endpoint: endpoint.clone(),
                fetch: fetch.clone(),
                registry: self.registry.clone(),
                chain: chain.clone(),
                tracker: tracker.clone(),
                limits: limits.clone(),
                class_gates: class_gates.clone(),
                shutdown: shutdown.subscribe(),
                abort_jobs: abort_rx.clone(),
                at_least_once: cfg.at_least_once,
                keys: keys.clone(),
                term_timeout: cfg.term_timeout,
                turns: bound
                    .clone()
                    .map(super::slot::Turns::bounded)
                    .unwrap_or_default(),
            };
            slots.spawn(slot.run());
        }
        tracing::info!(slots = ids.len(), queues = ?cfg.queues.entries(), namespace = %cfg.namespace, "worker started");
        #[cfg(feature = "metrics")]
        if let Some(m) = &metrics {
            m.set_ready(true);
        }
        Ok(Running {
            signals,
            ids,
            shared,
            gates: gates.queues.into_iter().flatten().collect(),
            classes: gates.classes,
            keys,
            con,
            fetch,
            shutdown,
            slots,
            left: Vec::new(),
            metrics,
            stop: stop_tx,
            heartbeat: Some(heartbeat),
            fetch_task,
            prune_task,
            scheduler_task,
            abort_jobs,
            term_timeout: cfg.term_timeout,
        })
    }
}

/// Prunes every [`prune::PERIOD`] until `stop`; a round that fails (Redis away) is retried
/// next period, its outage logged once.
async fn prune_periodically(
    pruner: Pruner,
    mut con: crate::conn::Conn,
    mut stop: watch::Receiver<bool>,
) {
    let mut streak = crate::conn::outage::Streak::default();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(prune::PERIOD) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        // One quick second try: the first command after an outage elsewhere often only
        // finds this connection broken.
        let mut result = pruner.run_once(&mut con).await;
        if result.is_err() {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            result = pruner.run_once(&mut con).await;
        }
        match result {
            Ok(_) => streak.succeeded("prune"),
            Err(e) => streak.failed("prune", &e),
        }
    }
}

/// A started worker process.
///
/// A service that embeds a worker stops it itself instead of handing it the process's
/// signals:
///
/// ```no_run
/// # async fn demo(registry: resq::Registry) -> resq::Result<()> {
/// use resq::{Phase, Worker};
///
/// let running = Worker::builder().registry(registry).build()?.start().await?;
/// // … the service runs; on its own shutdown:
/// running.stop(Phase::Quit); // finish running jobs, take no new ones
/// running.wait().await?; // slots done, ids unregistered
/// # Ok(())
/// # }
/// ```
pub struct Running {
    /// The signals listened to since start, when asked for.
    signals: Option<Signals>,
    /// Slot ids, in slot order.
    ids: Vec<String>,
    /// A spread namespace's counts not yet added to the shared counters.
    shared: Option<Arc<super::step::spread::Shared>>,
    /// A spread namespace's groups' shares of their queues' limits.
    gates: Vec<Arc<super::step::gate::Gate>>,
    /// A spread namespace's process shares of its class limits.
    classes: Vec<Arc<super::class_gate::ClassGate>>,
    /// Key names.
    keys: Keys,
    /// Shared connection.
    con: crate::conn::Conn,
    /// Wake-ups and pause state.
    fetch: Arc<Fetch>,
    /// Shutdown phases.
    shutdown: Shutdown,
    /// Slot tasks.
    slots: JoinSet<super::slot::Stopped>,
    /// Ids whose slots left a record for pruning (not unregistered).
    left: Vec<Arc<str>>,
    /// The metrics listener, when serving (it stops with the worker).
    #[cfg(feature = "metrics")]
    metrics: Option<crate::exporter::Listener>,
    /// Never set without the `metrics` feature.
    #[cfg(not(feature = "metrics"))]
    #[allow(dead_code)]
    metrics: Option<std::convert::Infallible>,
    /// Stops the heartbeat and watcher tasks.
    stop: watch::Sender<bool>,
    /// The heartbeat thread.
    heartbeat: Option<std::thread::JoinHandle<()>>,
    /// The watcher supervisor.
    fetch_task: tokio::task::JoinHandle<()>,
    /// The periodic pruner, when pruning is on.
    prune_task: Option<tokio::task::JoinHandle<()>>,
    /// The in-process scheduler, when `RESQ_SCHEDULER` is on (it releases its lock on stop).
    scheduler_task: Option<tokio::task::JoinHandle<()>>,
    /// Bumped to abort running jobs (USR1).
    abort_jobs: watch::Sender<u64>,
    /// `RESQUE_TERM_TIMEOUT`.
    term_timeout: std::time::Duration,
}

impl Running {
    /// Notes how a slot ended.
    fn note(&mut self, stopped: super::slot::Stopped) {
        if let super::slot::Stopped::LeftRecord(id) = stopped {
            self.left.push(id);
        }
    }

    /// The slots' worker ids.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// Reserve attempts made so far by all slots (steps that asked for a job, whatever came
    /// back: a job, nothing, or "paused").
    pub fn reserve_attempts(&self) -> u64 {
        self.fetch.attempts()
    }

    /// Prints one line `worker <id>` per slot on stdout and flushes (what the compat worker
    /// and `resq work` announce at start, for supervisors and tests).
    pub fn announce(&self) -> std::io::Result<()> {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        for id in &self.ids {
            writeln!(out, "worker {id}")?;
        }
        out.flush()
    }

    /// Asks the process to stop: [`Phase::Quit`] lets jobs finish, [`Phase::Term`] aborts them
    /// after the term timeout, [`Phase::Abort`] at once.
    pub fn stop(&self, phase: Phase) {
        #[cfg(feature = "metrics")]
        if let Some(m) = &self.metrics {
            m.set_ready(false);
        }
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

    /// Aborts every running job now and keeps working, as USR1 does: each is recorded as a
    /// `Resque::TermException` "SIGUSR1" failure, or requeued under `at_least_once`.
    pub fn abort_running_jobs(&self) {
        self.abort_jobs.send_modify(|n| *n += 1);
    }

    /// TERM/INT: the first starts the graceful stop, a second one aborts at once.
    fn terminate(&self, name: &str) {
        if self.shutdown.phase() >= Phase::Term {
            tracing::info!(signal = name, "second TERM/INT: aborting running jobs now");
            self.stop(Phase::Abort);
        } else {
            tracing::info!(
                signal = name,
                timeout_ms = self.term_timeout.as_millis() as u64,
                "stopping: no new jobs; running jobs are aborted after the term timeout"
            );
            self.stop(Phase::Term);
        }
    }

    /// Obeys signals until every slot has stopped (after QUIT, TERM or INT), then unregisters.
    /// USR1, USR2, CONT and a later TERM/INT keep working during the shutdown too.
    pub async fn run_until_signal(self) -> Result<()> {
        let mut this = self;
        let Signals {
            mut quit,
            mut term,
            mut int,
            mut usr1,
            mut usr2,
            mut cont,
        } = match this.signals.take() {
            Some(s) => s,
            None => Signals::install()?,
        };
        loop {
            tokio::select! {
                _ = quit.recv() => { tracing::info!("QUIT: no new jobs; finishing running jobs"); this.stop(Phase::Quit); }
                _ = term.recv() => this.terminate("TERM"),
                _ = int.recv() => this.terminate("INT"),
                _ = usr1.recv() => { tracing::info!("USR1: aborting running jobs, continuing"); this.abort_running_jobs(); }
                _ = usr2.recv() => { tracing::info!("USR2: paused"); this.pause(true); }
                _ = cont.recv() => { tracing::info!("CONT: resumed"); this.pause(false); }
                r = this.slots.join_next() => match r {
                    None => break,
                    Some(Err(e)) => tracing::error!(error = %e, "a slot task ended abnormally"),
                    Some(Ok(stopped)) => this.note(stopped),
                },
            }
        }
        this.wait().await
    }

    /// Waits for every slot to end (call [`Running::stop`] first), then unregisters (for at
    /// most `UNREGISTER_PATIENCE`: when Redis does not answer, the ids are left for pruning
    /// and the log says so).
    pub async fn wait(mut self) -> Result<()> {
        while let Some(r) = self.slots.join_next().await {
            if let Ok(stopped) = r {
                self.note(stopped);
            }
        }
        let _ = self.stop.send(true);
        if let Some(t) = self.scheduler_task.take() {
            // The scheduler releases its lock on stop; it never holds the exit longer than this.
            let _ = tokio::time::timeout(UNREGISTER_PATIENCE, t).await;
        }
        self.fetch_task.abort();
        if let Some(t) = self.prune_task.take() {
            t.abort();
        }
        if let Some(h) = self.heartbeat.take() {
            let _ = tokio::task::spawn_blocking(move || h.join()).await;
        }
        // The last jobs' spans leave before the process may end (tracing on only).
        #[cfg(feature = "otel")]
        if crate::otel::enabled() {
            let _ = tokio::task::spawn_blocking(crate::otel::flush).await;
        }
        // A slot that could not record its last job keeps its id registered and its record in
        // place: pruning records the job once the heartbeat expires (unregistering would
        // delete the record, and the job with it).
        let mut ids: Vec<String> = self
            .ids
            .iter()
            .filter(|id| !self.left.iter().any(|l| &**l == id.as_str()))
            .cloned()
            .collect();
        if !self.left.is_empty() {
            tracing::warn!(
                ids = ?self.left,
                "left registered for pruning: their records hold jobs that could not be recorded"
            );
        }
        let keys = self.keys.clone();
        let con = self.con.clone();
        if let Some(shared) = &self.shared {
            let mut con = con.clone();
            let settle =
                super::spread::settle(shared, &self.gates, &self.classes, &mut con, &keys, &ids);
            let kept = tokio::time::timeout(UNREGISTER_PATIENCE, settle)
                .await
                .unwrap_or_else(|_| ids.clone());
            ids.retain(|id| !kept.contains(id));
        }
        let done = crate::conn::retry_until(
            "unregister",
            || {
                let mut con = con.clone();
                let (keys, ids) = (&keys, &ids);
                async move { lifecycle::unregister(&mut con, keys, ids).await }
            },
            tokio::time::sleep(UNREGISTER_PATIENCE),
        )
        .await;
        match done {
            Some(()) => tracing::info!(slots = ids.len(), "worker unregistered"),
            None => tracing::warn!(
                ids = ?ids,
                "could not unregister: Redis did not answer; these worker ids (and any record \
                 they hold) are left for pruning, which removes them once their heartbeats \
                 expire ({} s)",
                crate::worker::prune::DEFAULT_PRUNE_AFTER_SECS
            ),
        }
        Ok(())
    }
}

/// How long exiting waits for Redis to unregister the slots (and for the scheduler to release
/// its lock) before leaving them for pruning.
pub(crate) const UNREGISTER_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// The signal streams a worker process obeys.
struct Signals {
    /// QUIT.
    quit: tokio::signal::unix::Signal,
    /// TERM.
    term: tokio::signal::unix::Signal,
    /// INT.
    int: tokio::signal::unix::Signal,
    /// USR1.
    usr1: tokio::signal::unix::Signal,
    /// USR2.
    usr2: tokio::signal::unix::Signal,
    /// CONT.
    cont: tokio::signal::unix::Signal,
}

impl Signals {
    /// Starts listening (the process no longer gets these signals' default actions).
    fn install() -> std::io::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            quit: signal(SignalKind::quit())?,
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            usr1: signal(SignalKind::user_defined1())?,
            usr2: signal(SignalKind::user_defined2())?,
            cont: signal(SignalKind::from_raw(libc_sigcont()))?,
        })
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
