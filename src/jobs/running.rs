//! A tracked job while it runs: its id, its kill switch and its result, as the handler reaches
//! them through [`crate::JobContext`] (`job_id`, `progress`, `cancelled`, `set_result`).
//!
//! A kill request is the `kill` field of resq's own record, or (a resque-status job) the id in
//! `<ns>:_kill`. One watcher per process looks for those of the tracked jobs it runs (every
//! [`KILL_POLL`], only while at least one runs) and flips their switches; `progress` also
//! checks, in the call that writes the progress, as resque-status's `at` does.

use super::{JobId, Kind};
use crate::conn::Conn;
use crate::job_error::JobError;
use crate::keys::Keys;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// How often the process looks for kill requests of the tracked jobs it runs.
pub(crate) const KILL_POLL: Duration = Duration::from_millis(500);

/// resque-status's exception for a killed job (raised by `at`/`tick`, swallowed by the plugin:
/// for Resque the job succeeded).
pub(crate) const KILLED: &str = "Resque::Plugins::Status::Killed";

/// Per-process tracking settings and the kill watch.
pub(crate) struct Tracker {
    /// The shared connection.
    pub con: Conn,
    /// Key names.
    pub keys: Keys,
    /// How long a finished record is kept, unless its handler says otherwise.
    pub ttl: Duration,
    /// The largest result kept (bytes of JSON).
    pub result_max: usize,
    /// Kill switches of the tracked jobs running here, and whether each is a resque-status job.
    running: Mutex<HashMap<JobId, (bool, watch::Sender<bool>)>>,
    /// Wakes the watcher when the first job starts.
    started: tokio::sync::Notify,
}

impl Tracker {
    /// The tracker of a worker process.
    pub(crate) fn new(con: Conn, keys: Keys, ttl: Duration, result_max: usize) -> Arc<Self> {
        Arc::new(Tracker {
            con,
            keys,
            ttl,
            result_max,
            running: Mutex::default(),
            started: tokio::sync::Notify::new(),
        })
    }

    /// Starts following job `id` (until the returned run is dropped).
    pub(crate) fn begin(
        self: &Arc<Self>,
        id: JobId,
        kind: Kind,
        ttl: Option<Duration>,
        batch: Option<crate::wire::job_id::BatchId>,
    ) -> Arc<TrackedRun> {
        let (tx, rx) = watch::channel(false);
        let statused = matches!(kind, Kind::Statused { .. });
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), (statused, tx));
        self.started.notify_one();
        Arc::new(TrackedRun {
            id,
            statused,
            kind,
            batch,
            ttl: ttl.unwrap_or(self.ttl),
            tracker: self.clone(),
            kill: rx,
            kill_seen: AtomicBool::new(false),
            result: Mutex::new(None),
        })
    }

    fn end(&self, id: &JobId) {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }

    /// The ids running here, and whether each is a resque-status job.
    fn ids(&self) -> Vec<(JobId, bool)> {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(id, (s, _))| (id.clone(), *s))
            .collect()
    }

    fn kill(&self, id: &JobId) {
        if let Some(tx) = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
        {
            let _ = tx.1.send(true);
        }
    }

    /// Watches the kill requests of the running tracked jobs until `stop` turns true.
    pub(crate) async fn watch_kills(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        loop {
            let ids = self.ids();
            if ids.is_empty() {
                tokio::select! {
                    _ = self.started.notified() => continue,
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
            let mut con = self.con.clone();
            let mut pipe = redis::pipe();
            let statused: Vec<&str> = ids
                .iter()
                .filter(|(_, s)| *s)
                .map(|(i, _)| i.as_str())
                .collect();
            if !statused.is_empty() {
                pipe.cmd("SMISMEMBER")
                    .arg(self.keys.resque_status_kill())
                    .arg(&statused);
            }
            for (id, _) in ids.iter().filter(|(_, s)| !*s) {
                pipe.cmd("HEXISTS")
                    .arg(self.keys.job_record(id.as_str()))
                    .arg("kill");
            }
            let replies: redis::RedisResult<Vec<redis::Value>> = pipe.query_async(&mut con).await;
            if let Ok(replies) = replies {
                let mut rest = replies.into_iter();
                if !statused.is_empty() {
                    if let Some(redis::Value::Array(flags)) = rest.next() {
                        for ((id, _), on) in ids.iter().filter(|(_, s)| *s).zip(flags) {
                            if on == redis::Value::Int(1) {
                                self.kill(id);
                            }
                        }
                    }
                }
                for ((id, _), on) in ids.iter().filter(|(_, s)| !*s).zip(rest) {
                    if on == redis::Value::Int(1) {
                        self.kill(id);
                    }
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(KILL_POLL) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }
}

/// A tracked job being run (see the module docs).
pub(crate) struct TrackedRun {
    /// The id.
    pub id: JobId,
    /// Whether its record is resque-status's JSON (a resque-status job, or a resq job of an
    /// earlier build).
    pub statused: bool,
    /// Its record, as the step that started it said.
    pub kind: Kind,
    /// The batch it is a member of.
    pub batch: Option<crate::wire::job_id::BatchId>,
    /// How long its record is kept once finished.
    pub ttl: Duration,
    tracker: Arc<Tracker>,
    kill: watch::Receiver<bool>,
    /// Whether the handler was told it is killed (by `progress`).
    kill_seen: AtomicBool,
    result: Mutex<Option<String>>,
}

impl TrackedRun {
    /// Whether its payload is resque-status's: `args[0]` the id, `args[1]` the options.
    pub(crate) fn id_in_args(&self) -> bool {
        matches!(
            self.kind,
            Kind::Statused {
                id_in_args: true,
                ..
            }
        )
    }
}

impl Drop for TrackedRun {
    fn drop(&mut self) {
        self.tracker.end(&self.id);
    }
}

impl TrackedRun {
    /// Resolves once the job is asked to stop.
    pub(crate) async fn cancelled(&self) {
        let mut rx = self.kill.clone();
        let _ = rx.wait_for(|k| *k).await;
    }

    /// Whether the job has been asked to stop (as far as this process knows).
    pub(crate) fn is_cancelled(&self) -> bool {
        *self.kill.borrow() || self.kill_seen.load(Ordering::SeqCst)
    }

    /// Keeps `json` as the job's result; refuses one over the size cap.
    pub(crate) fn set_result(&self, json: String) -> Result<(), JobError> {
        if json.len() > self.tracker.result_max {
            return Err(JobError::new(
                "Resq::ResultTooLarge",
                format!(
                    "a result of {} bytes exceeds the {}-byte cap (RESQ_RESULT_MAX)",
                    json.len(),
                    self.tracker.result_max
                ),
            ));
        }
        *self.result.lock().unwrap_or_else(|p| p.into_inner()) = Some(json);
        Ok(())
    }

    /// The result, once.
    pub(crate) fn take_result(&self) -> Option<String> {
        self.result.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Writes progress (`num`/`total`/`message` and custom fields, resque-status's `at`) unless
    /// the job is asked to stop, which is an error the handler returns (`?`): the job then ends
    /// killed.
    pub(crate) async fn progress(
        &self,
        num: Option<f64>,
        total: Option<f64>,
        message: Option<&str>,
        fields: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<(), JobError> {
        let format = crate::wire::number::FloatFormat::RubyJsonGem;
        let number = |x: f64| {
            if x.fract() == 0.0 && x.abs() < 9.0e15 {
                format!("{}", x as i64)
            } else {
                crate::wire::encode::to_json(&x, format)
            }
        };
        if let Some(t) = total {
            if t <= 0.0 {
                // resque-status's NotANumber, with its message.
                return Err(JobError::new(
                    "Resque::Plugins::Status::NotANumber",
                    format!("Called at() with total={} which is not a number", number(t)),
                ));
            }
        }
        let mut set: Vec<(String, String)> = Vec::new();
        if let Some(n) = num {
            set.push(("num".into(), number(n)));
        }
        if let Some(t) = total {
            set.push(("total".into(), number(t)));
        }
        if let Some(m) = message {
            set.push(("message".into(), crate::wire::encode::to_json(m, format)));
        }
        for (k, v) in fields {
            set.push((k.clone(), crate::wire::encode::to_json(v, format)));
        }
        let mut con = self.tracker.con.clone();
        let keys = &self.tracker.keys;
        let reply: redis::RedisResult<String> = crate::scripts::JobProgress {
            // (Spread: a key of the record's slot, for the call to be routed there.)
            kill: if keys.is_spread() && !self.statused {
                keys.job_record(self.id.as_str())
            } else {
                keys.resque_status_kill()
            },
            record: if self.statused {
                self.tracker.keys.resque_status(self.id.as_str())
            } else {
                self.tracker.keys.job_record(self.id.as_str())
            },
            id: self.id.as_str(),
            kind: if self.statused { "s" } else { "r" },
            fields: &set,
        }
        .call()
        .invoke_async(&mut con)
        .await;
        match reply.as_deref() {
            Ok("killed") => {
                self.kill_seen.store(true, Ordering::SeqCst);
                Err(killed())
            }
            Ok(_) => Ok(()),
            Err(e) => Err(JobError::new(
                "Redis::CommandError",
                format!(
                    "progress of job {}: {}",
                    self.id,
                    crate::conn::errors::display(e)
                ),
            )),
        }
    }
}

impl TrackedRun {
    /// The records of the jobs it waited for (its record's `deps`), in that order; a
    /// dependency whose record is gone or unreadable is left out.
    pub(crate) async fn dependencies(&self) -> Result<Vec<super::JobStatus>, JobError> {
        let redis_error = |e: redis::RedisError| {
            JobError::new(
                "Redis::CommandError",
                format!(
                    "dependencies of job {}: {}",
                    self.id,
                    crate::conn::errors::display(&e)
                ),
            )
        };
        let mut con = self.tracker.con.clone();
        let deps: Option<String> = redis::cmd("HGET")
            .arg(self.tracker.keys.job_record(self.id.as_str()))
            .arg("deps")
            .query_async(&mut con)
            .await
            .map_err(redis_error)?;
        let mut out = Vec::new();
        for d in deps.unwrap_or_default().split_whitespace() {
            let Some(id) = JobId::parse(d) else { continue };
            if let Ok(super::read::Found::Record(s)) =
                super::read::find(&mut con, &self.tracker.keys, &id).await
            {
                out.push(*s);
            }
        }
        Ok(out)
    }
}

/// The error `progress` returns once a job is asked to stop.
pub(crate) fn killed() -> JobError {
    JobError::new(KILLED, "the job was asked to stop")
}
