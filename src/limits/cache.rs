//! A worker process's copy of the limits in force, what its scripts are given, and its release
//! timer.
//!
//! The copy is read again whenever the stored definitions change (Redis tells the process,
//! through the invalidation tracking connection that also watches the queues), at the next
//! time-window boundary, and every minute (every 5 s while a limit is in force: each round
//! first runs the sweep, `limits_sweep.lua`, which derives the units in use from where jobs
//! are, re-judges the held jobs of a limit whose scope changed and forgets idle partitions).
//! Held jobs that only time releases (rate and window limits) are put back by
//! `limits_release.lua` at the earliest time any reserve of this process reported, and at each
//! refresh; a concurrency-held job is released by the call that returns a share, so it needs
//! no timer.
//!
//! A stored hash that cannot be read (a key of another type) or a definition in it that does not
//! parse never lifts a limit: what this process last read of that hash, or of that definition,
//! stays in force, and a warning naming the key is logged at a bounded rate until it is mended
//! (then one line says the stored limits apply again). A process that starts while a hash
//! cannot be read starts with what it can know — its own declarations and what the other hash
//! holds — and logs an error naming the key (docs/limits.md, "Bad input").

use super::store;
use super::Limit;
use crate::conn::errors::{self, Reporter};
use crate::conn::Conn;
use crate::keys::Keys;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{watch, Notify};

/// How often the limits are read again without being told.
const REFRESH: Duration = Duration::from_secs(60);

/// Most held jobs one release call puts back.
const RELEASE_BUDGET: u32 = 1000;

/// How often, while a limit is in force, the units in use are derived again from where jobs
/// are, held jobs of a changed limit re-judged and idle partitions forgotten
/// (`limits_sweep.lua`): the bound within which a limit converges after a key is mended.
const SWEEP: Duration = Duration::from_secs(5);

/// The limits as one process sees them.
#[derive(Debug)]
pub(crate) struct LimitsCache {
    keys: Keys,
    /// Declared by this process's registry.
    declared: Vec<Limit>,
    /// In force: the definitions, and the scripts' JSON (empty when there are none).
    current: Mutex<(Vec<Limit>, Arc<str>)>,
    /// Earliest release time a reserve reported (epoch ms).
    due: Mutex<Option<i64>>,
    /// Wakes the refresher.
    wake: Notify,
    /// The foreign workers last warned about (so a warning is not repeated every refresh).
    warned: Mutex<Vec<String>>,
    /// Counts the changes of the limits in force, for [`LimitsCache::changes`].
    version: watch::Sender<u64>,
    /// What was last read of each stored hash.
    known: Mutex<Known>,
    /// The stored limits' problems met at the last read, each reported at a bounded rate.
    problems: Mutex<BTreeMap<String, Reporter>>,
    /// The sweep's problems (limit keys it cannot use), reported at a bounded rate.
    swept: Mutex<Reporter>,
}

/// What this process last read of the stored definitions, per hash: what stays in force when a
/// hash, or one definition in it, cannot be read.
#[derive(Debug, Default)]
struct Known {
    /// Of `<ns>:resq:limits` (this process's own declarations until it is first read).
    declared: BTreeMap<String, Limit>,
    /// Of `<ns>:resq:limits:set`.
    set: BTreeMap<String, Limit>,
    /// Whether this process's declarations are written (a key of another type refuses them;
    /// each read writes them again until they are).
    written: bool,
}

/// Replaces `last`, what was last read of the hash `key`, with what `read` found in it: a
/// definition that does not parse keeps its last read one (if any), a hash that cannot be
/// read keeps all of them; each problem is added to `problems`, naming the key.
fn settle(
    last: &mut BTreeMap<String, Limit>,
    read: Result<store::Texts, String>,
    key: &str,
    problems: &mut Vec<String>,
) {
    let texts = match read {
        Ok(t) => t,
        Err(why) => {
            let names: Vec<&str> = last.keys().map(String::as_str).collect();
            problems.push(if names.is_empty() {
                format!("{why}; no limit read from it is known, so none of it applies until it is mended")
            } else {
                format!(
                    "{why}; the limits last read from it stay in force until it is mended: {}",
                    names.join(", ")
                )
            });
            return;
        }
    };
    let mut now = BTreeMap::new();
    for (name, text) in texts {
        let name = String::from_utf8_lossy(&name).into_owned();
        match store::parse(&name, &text) {
            Ok(l) => {
                now.insert(name, l);
            }
            Err(why) => match last.get(&name) {
                Some(l) => {
                    problems.push(format!(
                        "limit {name:?} in {key} cannot be read ({why}); the definition last \
                         read stays in force until it is mended"
                    ));
                    now.insert(name, l.clone());
                }
                None => problems.push(format!(
                    "limit {name:?} in {key} cannot be read ({why}); none was read before, so \
                     it does not apply until it is mended"
                )),
            },
        }
    }
    *last = now;
}

impl LimitsCache {
    /// The cache of a process whose registry declares `declared`.
    pub(crate) fn new(keys: Keys, declared: Vec<Limit>) -> Arc<Self> {
        let known = Known {
            declared: declared
                .iter()
                .map(|l| (l.name.clone(), l.clone()))
                .collect(),
            ..Known::default()
        };
        Arc::new(LimitsCache {
            keys,
            declared,
            current: Mutex::new((Vec::new(), Arc::from(""))),
            due: Mutex::new(None),
            wake: Notify::new(),
            warned: Mutex::new(Vec::new()),
            version: watch::channel(0).0,
            known: Mutex::new(known),
            problems: Mutex::new(BTreeMap::new()),
            swept: Mutex::new(Reporter::default()),
        })
    }

    /// Changes each time the limits in force change, once this process has read them: a
    /// queue a limit closed may be open now, and only a reserve made with the new limits can
    /// tell (one made on the notice of the change, before they were read, still sees it
    /// closed).
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// How many times the limits in force have changed; read it before [`LimitsCache::json`]
    /// to know whether a call was made with limits since replaced.
    pub(crate) fn version(&self) -> u64 {
        *self.version.borrow()
    }

    /// The scripts' JSON of the limits in force (`""` when there are none).
    pub(crate) fn json(&self) -> Arc<str> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .clone()
    }

    /// The limits in force.
    pub(crate) fn limits(&self) -> Vec<Limit> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .clone()
    }

    /// A reserve held a job that time will release at `ms`.
    pub(crate) fn note_due(&self, ms: i64) {
        let mut due = self.due.lock().unwrap_or_else(|p| p.into_inner());
        if due.is_none_or(|d| ms < d) {
            *due = Some(ms);
            self.wake.notify_one();
        }
    }

    /// The stored limits changed: read them again now.
    pub(crate) fn changed(&self) {
        self.wake.notify_one();
    }

    /// Declares this process's limits and reads the limits in force (before the first reserve).
    /// A stored hash that cannot be read does not stop the process (see the module's doc); Redis
    /// that cannot be reached does.
    pub(crate) async fn start(&self, con: &mut Conn) -> crate::Result<()> {
        self.refresh(con, true).await?;
        Ok(())
    }

    /// Derives the units in use again, goes on with the re-judging of held jobs (starting it
    /// again for `moved`, the limits this process saw change in what they hold) and forgets
    /// idle partitions (`limits_sweep.lua`).
    async fn sweep(&self, con: &mut Conn, moved: &[String]) -> redis::RedisResult<()> {
        let (corrected, back, forgotten, problems): (u64, u64, u64, String) =
            crate::scripts::LimitsSweep {
                sharing: self.keys.sharing(),
                prefix: self.keys.prefix(),
                limits: &self.json(),
                now_ms: Utc::now().timestamp_millis(),
                budget: RELEASE_BUDGET,
                moved,
            }
            .call()
            .invoke_async(con)
            .await?;
        if corrected + back + forgotten > 0 {
            tracing::debug!(
                corrected,
                back,
                forgotten,
                "limits derived from where jobs are"
            );
        }
        if !problems.is_empty() {
            let mut swept = self.swept.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(times) = swept.due() {
                tracing::warn!(%problems, times, "limit keys that cannot be used (repeats within 10 s are not logged)");
            }
        }
        Ok(())
    }

    /// Writes this process's declarations, unless they are written. A key that refuses them
    /// (of another type) is a problem returned (they are written again at the next read).
    async fn declare(&self, con: &mut Conn, starting: bool) -> crate::Result<Option<String>> {
        if self.known.lock().unwrap_or_else(|p| p.into_inner()).written {
            return Ok(None);
        }
        match store::declare(con, &self.keys, &self.declared).await {
            Ok(()) => {
                self.known.lock().unwrap_or_else(|p| p.into_inner()).written = true;
                Ok(None)
            }
            Err(crate::Error::Redis(e)) if errors::classify(&e) == errors::Class::Permanent => {
                Ok(Some(format!(
                    "this process's limit declarations cannot be written: {}; they apply in \
                     this process, and are written again once it is mended",
                    errors::describe_here(&e)
                )))
            }
            Err(e) if starting => Err(e),
            Err(e) => {
                tracing::debug!(error = %e, "writing the limit declarations failed; trying again");
                Ok(None)
            }
        }
    }

    /// Logs each of `problems` (a warning, an error at start) at a bounded rate while it lasts,
    /// and once that the stored limits apply again when the last one is gone.
    fn report(&self, problems: &[String], starting: bool) {
        let mut known = self.problems.lock().unwrap_or_else(|p| p.into_inner());
        let had = !known.is_empty();
        known.retain(|p, _| problems.contains(p));
        for p in problems {
            let Some(times) = known.entry(p.clone()).or_default().due() else {
                continue;
            };
            if starting {
                tracing::error!(problem = %p, "the stored limits cannot all be read");
            } else {
                tracing::warn!(problem = %p, times, "the stored limits cannot all be read (repeats within 10 s are not logged)");
            }
        }
        if had && known.is_empty() {
            tracing::info!("the stored limits can be read again; they are in force");
        }
    }

    /// Reads the limits in force again; returns the names that are no longer in force, and
    /// those whose definition changed in what they hold ([`Limit::holds_alike`]). A hash or a
    /// definition that cannot be read keeps what was last read of it in force.
    async fn refresh(
        &self,
        con: &mut Conn,
        starting: bool,
    ) -> crate::Result<(Vec<String>, Vec<String>)> {
        let mut problems: Vec<String> = self.declare(con, starting).await?.into_iter().collect();
        let stored = store::read(con, &self.keys).await?;
        let limits: Vec<Limit> = {
            let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
            let k = &mut *known;
            settle(
                &mut k.declared,
                stored.declared,
                &self.keys.limits_declared(),
                &mut problems,
            );
            settle(
                &mut k.set,
                stored.set,
                &self.keys.limits_set(),
                &mut problems,
            );
            let mut merged = k.declared.clone();
            merged.extend(k.set.iter().map(|(n, l)| (n.clone(), l.clone())));
            merged.into_values().collect()
        };
        self.report(&problems, starting);
        self.warn_foreign(con, &limits).await;
        let json: Arc<str> = Arc::from(store::script_json(&limits, Utc::now()));
        let mut cur = self.current.lock().unwrap_or_else(|p| p.into_inner());
        let gone = cur
            .0
            .iter()
            .filter(|old| !limits.iter().any(|l| l.name == old.name))
            .map(|l| l.name.clone())
            .collect();
        let moved = cur
            .0
            .iter()
            .filter(|old| {
                limits
                    .iter()
                    .any(|l| l.name == old.name && !l.holds_alike(old))
            })
            .map(|l| l.name.clone())
            .collect();
        let changed = cur.1 != json;
        *cur = (limits, json);
        drop(cur);
        if changed {
            self.version.send_modify(|v| *v += 1);
        }
        Ok((gone, moved))
    }

    /// Logs, once per change, the workers of other runtimes (Ruby, Jesque, node-resque) that
    /// poll a queue a limit covers: they run its jobs without honouring it (docs/limits.md).
    async fn warn_foreign(&self, con: &mut Conn, limits: &[Limit]) {
        if limits.is_empty() {
            return;
        }
        let workers: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.keys.workers())
            .query_async(con)
            .await
            .unwrap_or_default();
        let mut seen: Vec<String> = Vec::new();
        for l in limits {
            let f = super::report::foreign(l, &workers);
            if !f.is_empty() {
                seen.push(format!(
                    "{}: {}",
                    l.name,
                    f.iter().map(|w| w.as_str()).collect::<Vec<_>>().join(", ")
                ));
            }
        }
        let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
        if seen != *warned {
            for s in &seen {
                tracing::warn!(limit_and_workers = %s, "workers of another runtime poll a queue under a resq limit: they run its jobs without honouring it");
            }
            *warned = seen;
        }
    }

    /// The next time-window boundary of the limits in force.
    fn next_boundary(&self) -> Option<DateTime<Utc>> {
        let now = Utc::now();
        self.limits()
            .iter()
            .filter_map(|l| store::window_state(l, now).1)
            .min()
    }

    /// Puts back held jobs whose time has come (and those of `gone` limits, and any that fit
    /// a concurrency limit now); returns when a held job is next due.
    async fn release(&self, con: &mut Conn, gone: &[String]) -> redis::RedisResult<Option<i64>> {
        let now = Utc::now().timestamp_millis();
        let (n, next): (u64, String) = crate::scripts::LimitsRelease {
            held_due: self.keys.held_due(),
            prefix: self.keys.prefix(),
            limits: &self.json(),
            now_ms: now,
            budget: RELEASE_BUDGET,
            gone,
        }
        .call()
        .invoke_async(con)
        .await?;
        if n > 0 {
            tracing::debug!(released = n, "held jobs back in their queues");
        }
        Ok(next.parse::<f64>().ok().map(|v| v as i64))
    }

    /// Keeps the copy fresh and releases held jobs on time, until `stop` turns true.
    pub(crate) async fn run(self: Arc<Self>, mut con: Conn, mut stop: watch::Receiver<bool>) {
        let mut gone: Vec<String> = Vec::new();
        let mut moved: Vec<String> = Vec::new();
        loop {
            if !self.json().is_empty() || !gone.is_empty() {
                moved.extend(gone.iter().cloned());
                moved.sort();
                moved.dedup();
                match self.sweep(&mut con, &moved).await {
                    Ok(()) => moved.clear(),
                    Err(e) => tracing::debug!(error = %e, "the limits sweep failed; trying again"),
                }
                match self.release(&mut con, &gone).await {
                    Ok(next) => {
                        gone.clear();
                        // A time already past is kept: it fires at once (release.lua only ever
                        // names a time after the one it ran at, so this cannot spin).
                        let mut due = self.due.lock().unwrap_or_else(|p| p.into_inner());
                        *due = next.or(*due);
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "releasing held jobs failed; trying again")
                    }
                }
            }
            let now = Utc::now();
            let due = *self.due.lock().unwrap_or_else(|p| p.into_inner());
            let mut wait = if self.json().is_empty() {
                REFRESH
            } else {
                SWEEP
            };
            if let Some(d) = due {
                let left = u64::try_from(d - now.timestamp_millis()).unwrap_or(0);
                wait = wait.min(Duration::from_millis(left.max(1)));
            }
            if let Some(b) = self.next_boundary() {
                wait = wait
                    .min((b - now).to_std().unwrap_or(Duration::ZERO) + Duration::from_millis(5));
            }
            let timed_out = tokio::select! {
                _ = tokio::time::sleep(wait) => true,
                _ = self.wake.notified() => false,
                _ = stop.wait_for(|s| *s) => return,
            };
            if timed_out && due.is_some_and(|d| d <= Utc::now().timestamp_millis()) {
                *self.due.lock().unwrap_or_else(|p| p.into_inner()) = None;
            }
            match self.refresh(&mut con, false).await {
                Ok((g, m)) => {
                    gone.extend(g);
                    moved.extend(m);
                }
                Err(e) => {
                    tracing::debug!(error = %e, "reading the limits failed; keeping the last ones")
                }
            }
        }
    }
}
