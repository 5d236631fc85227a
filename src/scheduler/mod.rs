//! The scheduler: resque-scheduler's master loop, safe to run in many resq processes and next to
//! a real resque-scheduler (they share its master lock, so one of them works at a time).
//!
//! Every `interval` (1 s by default, so a delayed job runs within about a second of its time):
//! 1. take or keep the master lock and find the earliest due timestamp — one script
//!    (`lock`); a process that is not master does nothing else;
//! 2. move every due delayed item onto its queue, bucket by bucket, one atomic script per
//!    batch that rechecks the lock (`mover`);
//! 3. fire due recurring schedules, one atomic script per fire that rechecks the lock and the
//!    schedule's fire token (`recurring`).
//!
//! On a namespace spread over a Redis Cluster's slots each of these is a row of single-slot
//! steps instead (`spread`: a due job or an occurrence may be enqueued twice there, never lost
//! or skipped). On stop, the lock is released if still ours. Redis errors are logged and the
//! next tick tries again. Runs in a worker process (`RESQ_SCHEDULER=1` or [`crate::WorkerBuilder::scheduler`])
//! or alone (`resq scheduler`). Modules: `job` (item → job), `schedule` (cron/every),
//! [`store`] (`persistent_schedules`), `admin` (what the scheduler adds to
//! [`crate::admin::Admin`]: run a delayed item now or delete it, list and enqueue stored
//! schedules).

mod admin;
pub(crate) mod job;
pub(crate) mod lock;
pub(crate) mod mover;
pub(crate) mod recurring;
pub(crate) mod schedule;
mod spread;
#[cfg(test)]
mod spread_tests;
pub mod store;

use crate::client::FloatFormat;
use crate::conn::Conn;
use crate::conn::RedisOptions;
use crate::error::{Error, Result};
use chrono::Utc;
use chrono_tz::Tz;
pub use lock::{MasterLock, Mastery};
use mover::Mover;
use recurring::Recurring;
use serde_json::{Map, Value};
use std::time::Duration;
use tokio::sync::watch;

/// Scheduler settings.
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// `REDIS_URL`.
    pub redis_url: String,
    /// `RESQUE_NAMESPACE`.
    pub namespace: String,
    /// `RESQ_SCHEDULER_INTERVAL`: the poll period (default 1 s; resque-scheduler's is 5 s).
    pub interval: Duration,
    /// `DELAYED_REQUEUE_BATCH_SIZE`: items per move (default 100).
    pub batch_size: usize,
    /// `LOCK_TIMEOUT`: the master lock's TTL (default 180 s).
    pub lock_timeout: Duration,
    /// `RESQUE_SCHEDULER_MASTER_LOCK_PREFIX` (default none).
    pub lock_prefix: String,
    /// Host part of the lock value (`<host>:<pid>`).
    pub hostname: String,
    /// `RESQ_SCHEDULER_TZ`: zone of cron expressions that name none (default UTC).
    pub time_zone: Tz,
    /// `RAILS_ENV`: the env `rails_env`/`env` schedule filters compare with.
    pub env: Option<String>,
    /// Float text of re-encoded args (`RESQ_FLOAT_FORMAT=oj` for an Oj fleet).
    pub float_format: FloatFormat,
    /// Whether recurring schedules are fired (default true).
    pub recurring: bool,
    /// Schedules given in code: name → config (a stored schedule of the same name wins).
    pub schedules: Vec<(String, Map<String, Value>)>,
    /// Connection settings beyond the URL (Cluster, TLS files, `WAIT`).
    pub redis: RedisOptions,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            redis_url: crate::settings::DEFAULT_REDIS_URL.into(),
            namespace: crate::settings::DEFAULT_NAMESPACE.into(),
            interval: Duration::from_secs(1),
            batch_size: 100,
            lock_timeout: Duration::from_secs(180),
            lock_prefix: String::new(),
            hostname: crate::identity::hostname(),
            time_zone: Tz::UTC,
            env: None,
            float_format: FloatFormat::default(),
            recurring: true,
            schedules: Vec::new(),
            redis: RedisOptions::default(),
        }
    }
}

impl SchedulerConfig {
    /// Reads the environment over the defaults.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads settings through `get`.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut s = SchedulerConfig {
            redis: RedisOptions::from_lookup(&get)?,
            ..SchedulerConfig::default()
        };
        if let Some(v) = get("REDIS_URL") {
            s.redis_url = crate::conn::parse_url(&v, &s.redis)?;
        }
        if let Some(v) = get("RESQUE_NAMESPACE") {
            s.namespace = v;
        }
        if let Some(v) = get("RESQ_SCHEDULER_INTERVAL") {
            s.interval = crate::settings::parse_secs("RESQ_SCHEDULER_INTERVAL", &v)?;
        }
        if let Some(v) = get("DELAYED_REQUEUE_BATCH_SIZE") {
            s.batch_size =
                v.trim()
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| Error::Config {
                        var: "DELAYED_REQUEUE_BATCH_SIZE",
                        message: format!("{v:?} is not a positive whole number"),
                    })?;
        }
        if let Some(v) = get("LOCK_TIMEOUT") {
            s.lock_timeout = crate::settings::parse_secs("LOCK_TIMEOUT", &v)?;
        }
        if let Some(v) = get("RESQUE_SCHEDULER_MASTER_LOCK_PREFIX") {
            s.lock_prefix = v;
        }
        if let Some(v) = get("RESQ_SCHEDULER_TZ") {
            s.time_zone = v.trim().parse().map_err(|_| Error::Config {
                var: "RESQ_SCHEDULER_TZ",
                message: format!("{v:?} is not an IANA zone name (e.g. Europe/Paris)"),
            })?;
        }
        if let Some(v) = get("RAILS_ENV").filter(|v| !v.is_empty()) {
            s.env = Some(v);
        }
        if let Some(v) = get("RESQ_FLOAT_FORMAT") {
            s.float_format = parse_float_format(&v)?;
        }
        Ok(s)
    }

    /// Adds a schedule given in code (see `schedule` for the config's fields).
    pub fn schedule(mut self, name: &str, config: Map<String, Value>) -> Self {
        self.schedules.push((name.to_string(), config));
        self
    }
}

/// `RESQ_FLOAT_FORMAT`: `json` (the json gem, default) or `oj`.
pub(crate) fn parse_float_format(v: &str) -> Result<FloatFormat> {
    match v.trim().to_ascii_lowercase().as_str() {
        "json" | "json_gem" | "gem" => Ok(FloatFormat::RubyJsonGem),
        "oj" => Ok(FloatFormat::RubyOj),
        _ => Err(Error::Config {
            var: "RESQ_FLOAT_FORMAT",
            message: format!("{v:?} is neither json nor oj"),
        }),
    }
}

/// What one tick did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tick {
    /// Whether this process held the master lock.
    pub master: bool,
    /// Delayed items moved.
    pub moved: usize,
    /// Recurring schedules fired.
    pub fired: usize,
}

/// A scheduler bound to one namespace.
pub struct Scheduler {
    /// The shared connection.
    con: Conn,
    /// The master lock.
    lock: MasterLock,
    /// Moves delayed items.
    mover: Mover,
    /// Fires recurring schedules.
    recurring: Option<Recurring>,
    /// Poll period.
    interval: Duration,
}

impl Scheduler {
    /// Connects with `cfg`.
    pub async fn connect(cfg: SchedulerConfig) -> Result<Self> {
        let con = crate::conn::Endpoint::with_options(&cfg.redis_url, &cfg.redis)?
            .connect()
            .await?;
        Ok(Self::new(con, cfg))
    }

    /// A scheduler over an existing connection (the lock value is `<host>:<this pid>`).
    pub fn new(con: Conn, cfg: SchedulerConfig) -> Self {
        let value = format!("{}:{}", cfg.hostname, std::process::id());
        Self::with_lock_value(con, cfg, value)
    }

    /// A scheduler with an explicit lock value (tests run several "processes" in one).
    pub fn with_lock_value(con: Conn, cfg: SchedulerConfig, value: String) -> Self {
        let keys = con.keys(&cfg.namespace);
        let lock_key = keys.scheduler_master_lock_prefixed(&cfg.lock_prefix);
        let lock = MasterLock {
            key: lock_key.clone(),
            value: value.clone(),
            timeout: cfg.lock_timeout,
            schedule_key: keys.delayed_schedule(),
        };
        let mover = Mover {
            keys: keys.clone(),
            lock_key: lock_key.clone(),
            lock_value: value.clone(),
            batch: cfg.batch_size.max(1),
            float_format: cfg.float_format,
        };
        let recurring = cfg.recurring.then(|| {
            let mut r = Recurring::new(keys.clone(), lock_key, value);
            r.default_tz = cfg.time_zone;
            r.env = cfg.env.clone();
            r.float_format = cfg.float_format;
            r.statics = cfg.schedules.clone();
            r
        });
        Scheduler {
            con,
            lock,
            mover,
            recurring,
            interval: cfg.interval.max(Duration::from_millis(10)),
        }
    }

    /// The lock this scheduler takes.
    pub fn lock(&self) -> &MasterLock {
        &self.lock
    }

    /// Takes or keeps the lock and, as master, names the earliest due timestamp: one script, or
    /// on a spread namespace (the lock and the zset in different slots) two steps.
    async fn poll(&self, con: &mut Conn, now: i64) -> Result<(Mastery, Option<i64>)> {
        if self.mover.keys.is_spread() {
            return spread::poll(&self.lock, con, now).await;
        }
        self.lock.poll(con, now).await
    }

    /// One pass: take or keep the lock; as master, move every due item and fire due schedules.
    pub async fn tick(&self) -> Result<Tick> {
        let mut con = self.con.clone();
        let mut t = Tick::default();
        let now = Utc::now();
        let (mastery, mut due) = self.poll(&mut con, now.timestamp()).await?;
        if mastery == Mastery::Acquired {
            tracing::info!(lock = %self.lock.key, value = %self.lock.value, "scheduler is master");
        }
        if !mastery.is_master() {
            return Ok(t);
        }
        t.master = true;
        while let Some(ts) = due {
            let moved = match self.mover.drain(&mut con, ts).await? {
                None => {
                    tracing::info!("scheduler lost the master lock");
                    t.master = false;
                    return Ok(t);
                }
                Some(n) => n,
            };
            t.moved += moved;
            let (m, next) = self.poll(&mut con, Utc::now().timestamp()).await?;
            if !m.is_master() {
                t.master = false;
                return Ok(t);
            }
            // The same bucket again with nothing moved: it keeps changing under us; leave it
            // to the next tick rather than spin.
            if next == Some(ts) && moved == 0 {
                break;
            }
            due = next;
        }
        if let Some(r) = &self.recurring {
            t.fired = r
                .tick(&mut con, Utc::now())
                .await?
                .iter()
                .filter(|f| matches!(f, recurring::Fired::Fired(_)))
                .count();
        }
        if t.moved > 0 || t.fired > 0 {
            tracing::debug!(moved = t.moved, fired = t.fired, "scheduler tick");
        }
        Ok(t)
    }

    /// Ticks every interval until `stop` turns true, then releases the lock if ours.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.wait_for(|s| *s) => break,
            }
            match self.tick().await {
                Ok(_) => {
                    if failing {
                        tracing::info!("scheduler reaches redis again");
                    }
                    failing = false;
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(error = %e, "scheduler tick failed; retrying next tick");
                    }
                    failing = true;
                }
            }
        }
        let released = match self.mover.keys.is_spread() {
            true => spread::release(&self.lock, &mut self.con.clone()).await,
            false => self.lock.release(&mut self.con.clone()).await,
        };
        match released {
            Ok(true) => tracing::info!("scheduler released the master lock"),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "could not release the master lock"),
        }
    }
}

/// What `resq enqueue` reads from the scheduler (by this path, `src/cli/enqueue.rs`): the due
/// time of a delayed enqueue. The scheduler's own commands are in `crate::cli::schedule`.
#[cfg(feature = "cli")]
pub(crate) mod cli {
    use crate::error::{Error, Result};
    use std::time::Duration;

    /// The due time of `resq enqueue --in SECS` / `--at EPOCH_SECS`.
    pub(crate) fn due_time(
        in_secs: Option<&str>,
        at_epoch: Option<&str>,
    ) -> Result<Option<chrono::DateTime<chrono::Utc>>> {
        if let Some(s) = in_secs {
            let d: Duration = crate::settings::parse_secs("--in", s)?;
            return Ok(Some(crate::wire::time::after_now(d)?));
        }
        if let Some(s) = at_epoch {
            let secs: f64 = s.trim().parse().map_err(|_| Error::Config {
                var: "--at",
                message: format!("{s:?} is not epoch seconds"),
            })?;
            let ms = (secs * 1000.0).round() as i64;
            return chrono::DateTime::from_timestamp_millis(ms)
                .map(Some)
                .ok_or_else(|| Error::Config {
                    var: "--at",
                    message: format!("{s:?} is out of range"),
                });
        }
        Ok(None)
    }
}
