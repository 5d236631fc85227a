//! Firing recurring schedules, on the master only, at most once per occurrence across every
//! process.
//!
//! Each schedule has a fire token in `<ns>:resq:schedule_next`: `<next due epoch s> <digest of
//! its cron/every>`. Every tick the master reads the schedules and tokens (one pipeline), and
//! for a schedule whose due time has come calls `fire_schedule.lua`, which — only if the lock is
//! still ours and the token is still what was read — enqueues the job, writes resque-scheduler's
//! `<ns>:delayed:last_enqueued_at` (name → `Time#to_s` of the fire, UTC) and moves the token to
//! the first occurrence after now. Hence:
//! * no double fire: two masters (a lock lost mid-tick) or a resent call cannot both pass the
//!   token check;
//! * no catch-up storm: after downtime a schedule fires **once** for all the occurrences it
//!   missed, then keeps its cadence (cron: the next occurrence; every: the same phase);
//! * a schedule seen for the first time (or whose cron/every changed) does not fire at once: its
//!   token is set to its next occurrence (`every`: one period or `first_in` from now);
//! * an occurrence a Ruby resque-scheduler already fired while it was master (its
//!   `last_enqueued_at` is not before the due time) only moves the token.
//!
//! On a namespace spread over a Redis Cluster's slots the fire is a row of single-slot steps
//! (`super::spread::fire`: the job pushed first, the token moved last), so a crash or a lost
//! race there may fire one occurrence twice; none is skipped.

use super::job;
use super::schedule::Schedule;
use crate::client::FloatFormat;
use crate::error::Result;
use crate::keys::Keys;
use crate::wire::time;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use redis::aio::ConnectionLike;
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// The recurring half of a scheduler.
#[derive(Debug)]
pub(crate) struct Recurring {
    /// Key names.
    pub keys: Keys,
    /// The master lock's key.
    pub lock_key: String,
    /// Our lock value.
    pub lock_value: String,
    /// Zone of cron expressions without one.
    pub default_tz: Tz,
    /// The scheduler's env (`RAILS_ENV`), for `rails_env`/`env` filters.
    pub env: Option<String>,
    /// Float text of schedule args.
    pub float_format: FloatFormat,
    /// Schedules given in code (a stored schedule of the same name wins, as in Ruby).
    pub statics: Vec<(String, Map<String, Value>)>,
    /// Schedule problems already logged (name + config), so each is logged once.
    logged: Mutex<HashSet<String>>,
}

/// What happened to one schedule in a tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fired {
    /// The job was enqueued.
    Fired(String),
    /// The token was set or moved without enqueueing.
    Advanced(String),
}

impl Recurring {
    /// A recurring firer for `keys` under the lock `lock_key` held with `lock_value`.
    pub(crate) fn new(keys: Keys, lock_key: String, lock_value: String) -> Self {
        Recurring {
            keys,
            lock_key,
            lock_value,
            default_tz: Tz::UTC,
            env: None,
            float_format: FloatFormat::default(),
            statics: Vec::new(),
            logged: Mutex::new(HashSet::new()),
        }
    }

    /// Fires what is due at `now`; returns what it did (empty when nothing was due).
    pub(crate) async fn tick<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        now: DateTime<Utc>,
    ) -> Result<Vec<Fired>> {
        let (stored, tokens, last): (
            HashMap<String, String>,
            HashMap<String, String>,
            HashMap<String, String>,
        ) = redis::pipe()
            .hgetall(self.keys.persistent_schedules())
            .hgetall(self.keys.schedule_next())
            .hgetall(self.keys.last_enqueued_at())
            .del(self.keys.schedules_changed())
            .ignore()
            .query_async(con)
            .await?;
        let mut configs: Vec<(String, Map<String, Value>)> = self
            .statics
            .iter()
            .filter(|(n, _)| !stored.contains_key(n))
            .cloned()
            .collect();
        for (name, text) in &stored {
            match serde_json::from_str::<Map<String, Value>>(text) {
                Ok(c) => configs.push((name.clone(), c)),
                Err(e) => self.log_once(name, text, &format!("not a JSON object: {e}")),
            }
        }
        configs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut done = Vec::new();
        let mut live: HashSet<&str> = HashSet::new();
        for (name, config) in &configs {
            live.insert(name);
            let schedule = match Schedule::from_config(name, config, self.default_tz) {
                Ok(s) => s,
                Err(e) => {
                    self.log_once(name, &Value::Object(config.clone()).to_string(), &e);
                    continue;
                }
            };
            if !schedule.runs_in(self.env.as_deref()) {
                continue;
            }
            if let Some(f) = self
                .one(con, &schedule, tokens.get(name), last.get(name), now)
                .await?
            {
                done.push(f);
            }
        }
        let stale: Vec<&String> = tokens
            .keys()
            .filter(|n| !live.contains(n.as_str()))
            .collect();
        if !stale.is_empty() {
            let _: () = redis::cmd("HDEL")
                .arg(self.keys.schedule_next())
                .arg(stale)
                .query_async(con)
                .await?;
        }
        Ok(done)
    }

    async fn one<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        s: &Schedule,
        token: Option<&String>,
        last: Option<&String>,
        now: DateTime<Utc>,
    ) -> Result<Option<Fired>> {
        let digest = s.digest();
        let parsed = token.and_then(|t| crate::scripts::texts::parse_schedule_token(t));
        let due = match parsed {
            Some((due, d)) if d == digest => due,
            _ => {
                // New or changed: start the cadence, no fire now.
                let Some(first) = s.first_due(now) else {
                    return Ok(None);
                };
                let ok = self
                    .call(
                        con,
                        s,
                        token,
                        &crate::scripts::texts::schedule_token(first, &digest),
                        None,
                        now,
                    )
                    .await?;
                return Ok(ok.then(|| Fired::Advanced(s.name.clone())));
            }
        };
        if now.timestamp() < due {
            return Ok(None);
        }
        let Some(next) = s.due_after(due, now) else {
            return Ok(None);
        };
        let new_token = crate::scripts::texts::schedule_token(next, &digest);
        let fired_elsewhere = last
            .and_then(|l| time::parse_any(l))
            .is_some_and(|t| t.timestamp() >= due);
        let job = if fired_elsewhere {
            None
        } else {
            match job::from_config(&s.config, false, self.float_format) {
                Ok(j) => Some(j),
                Err(e) => {
                    self.log_once(&s.name, &Value::Object(s.config.clone()).to_string(), &e);
                    None
                }
            }
        };
        let firing = job.is_some();
        let ok = self
            .call(con, s, token, &new_token, job.as_ref(), now)
            .await?;
        if ok && firing {
            tracing::info!(schedule = %s.name, class = ?s.config.get("class"), "recurring schedule fired");
        }
        Ok(ok.then(|| {
            if firing {
                Fired::Fired(s.name.clone())
            } else {
                Fired::Advanced(s.name.clone())
            }
        }))
    }

    async fn call<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        s: &Schedule,
        token: Option<&String>,
        new_token: &str,
        job: Option<&job::QueuedJob>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let queue = job.map(|j| j.queue.as_str()).unwrap_or_default();
        // With tracing on, a fire is a send (`<queue> send`, a new trace, as Ruby's
        // resque-scheduler pushing through Resque.push) whose context the payload carries.
        #[cfg(feature = "otel")]
        let traced = job.and_then(|j| {
            crate::otel::get().and_then(|o| o.start_send_encoded(&j.queue, &j.payload))
        });
        #[cfg(feature = "otel")]
        let payload = traced.as_ref().map(|(_, p)| p.as_str());
        #[cfg(not(feature = "otel"))]
        let payload: Option<&str> = None;
        let payload = payload.or(job.map(|j| j.payload.as_str()));
        let n: Result<i64> = if self.keys.is_spread() {
            let fire = super::spread::Fire {
                lock: (&self.lock_key, &self.lock_value),
                name: &s.name,
                token: token.map(String::as_str).unwrap_or_default(),
                new_token,
                job: job.map(|_| (queue, payload.unwrap_or_default())),
                last_enqueued_at: &time::started(now),
            };
            super::spread::fire(con, &self.keys, &fire).await
        } else {
            crate::scripts::FireSchedule {
                lock: &self.lock_key,
                schedule_next: self.keys.schedule_next(),
                last_enqueued_at: self.keys.last_enqueued_at(),
                queues: self.keys.queues(),
                queue: self.keys.queue(queue),
                lock_value: &self.lock_value,
                name: &s.name,
                token: token.map(String::as_str).unwrap_or_default(),
                new_token,
                mode: if job.is_some() { "fire" } else { "advance" },
                last_enqueued_at_text: time::started(now),
                queue_name: queue,
                payload: payload.unwrap_or_default(),
            }
            .call()
            .invoke_async(con)
            .await
            .map_err(Into::into)
        };
        #[cfg(feature = "otel")]
        crate::otel::end_send(traced.map(|(cx, _)| cx), &n);
        Ok(n? == 1)
    }

    fn log_once(&self, name: &str, config: &str, problem: &str) {
        let key = format!("{name}\u{0}{config}\u{0}{problem}");
        let new = self
            .logged
            .lock()
            .map(|mut l| l.insert(key))
            .unwrap_or(true);
        if new {
            tracing::error!(schedule = %name, config = %config, error = %problem, "schedule skipped");
        }
    }
}
