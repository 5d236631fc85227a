//! Wake-ups: how idle slots learn that a job is waiting, without polling.
//!
//! Slots never poll on a timer. A slot whose reserve finds nothing parks here. For each queue
//! it polls (up to [`MAX_WATCHED`]), a watcher task holds a blocking `BLMOVE q q LEFT LEFT` on
//! a connection of its own while any slot is parked: that command returns the moment the list
//! is non-empty and moves its head element back onto its head, so it never changes the queue.
//! The watcher then wakes one parked slot, which runs the reserve script. Idle cost: one
//! command per queue per `INTERVAL` (the blocking timeout); pick-up: one round trip.
//!
//! The same task refreshes a wildcard queue list from `<ns>:queues` every `INTERVAL` and, while
//! `<ns>:pause-all-workers` is set, re-reads it every `INTERVAL`.

use super::step::QueueKeys;
use crate::conn::Backoff;
use crate::conn::Conn;
use crate::keys::Keys;
use crate::queues::QueueList;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tokio::task::JoinSet;

/// Queues watched with a blocking command; further queues are polled every `INTERVAL`.
pub const MAX_WATCHED: usize = 32;

/// Shared by the slots and the watcher tasks of one process.
pub struct Fetch {
    /// Key names.
    keys: Keys,
    /// The configured queue list.
    list: QueueList,
    /// The list resolved to keys (changes only for wildcard lists).
    resolved: watch::Sender<Arc<QueueKeys>>,
    /// Wakes one parked slot.
    work: Notify,
    /// Parked slots.
    idle: AtomicUsize,
    /// Signalled when `idle` grows.
    idle_changed: Notify,
    /// Reserve attempts made so far.
    attempts: AtomicU64,
    /// Signalled after each reserve attempt.
    attempted: Notify,
    /// `<ns>:pause-all-workers` was seen set.
    remote_paused: watch::Sender<bool>,
    /// Paused by USR2.
    local_paused: watch::Sender<bool>,
    /// `INTERVAL`.
    interval: Duration,
    /// Queues to run as Jesque zset queues (see [`super::jesque`]).
    jesque: Vec<String>,
}

/// Decrements the parked count when a parked slot leaves, however it leaves.
struct Parked<'a>(&'a AtomicUsize);

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Fetch {
    /// Resolves the queue list once and returns the shared state.
    pub async fn new(
        keys: Keys,
        list: QueueList,
        interval: Duration,
        con: &mut Conn,
    ) -> redis::RedisResult<Arc<Self>> {
        Self::with_jesque(keys, list, Vec::new(), interval, con).await
    }

    /// [`Fetch::new`] for a worker that runs the queues named in `jesque` as Jesque zset
    /// queues.
    pub async fn with_jesque(
        keys: Keys,
        list: QueueList,
        jesque: Vec<String>,
        interval: Duration,
        con: &mut Conn,
    ) -> redis::RedisResult<Arc<Self>> {
        let names = resolve(&keys, &list, con).await?;
        let resolved = watch::channel(Arc::new(QueueKeys::with_jesque(&keys, &names, &jesque))).0;
        Ok(Arc::new(Fetch {
            keys,
            list,
            resolved,
            work: Notify::new(),
            idle: AtomicUsize::new(0),
            idle_changed: Notify::new(),
            attempts: AtomicU64::new(0),
            attempted: Notify::new(),
            remote_paused: watch::channel(false).0,
            local_paused: watch::channel(false).0,
            interval,
            jesque,
        }))
    }

    /// The queues to reserve from now.
    pub fn queues(&self) -> Arc<QueueKeys> {
        self.resolved.borrow().clone()
    }

    /// Parks a slot until a watcher says a job may be waiting.
    pub async fn park(&self) {
        self.idle.fetch_add(1, Ordering::SeqCst);
        let _parked = Parked(&self.idle);
        self.idle_changed.notify_waiters();
        self.work.notified().await;
    }

    /// Reserve attempts made so far by all slots.
    pub fn attempts(&self) -> u64 {
        self.attempts.load(Ordering::SeqCst)
    }

    /// Called by a slot after every reserve attempt.
    pub fn attempted(&self) {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        self.attempted.notify_waiters();
    }

    /// Records that the reserve script saw `<ns>:pause-all-workers`.
    pub fn set_remote_paused(&self) {
        self.remote_paused.send_replace(true);
    }

    /// Pauses or resumes this process (USR2 / CONT).
    pub fn set_local_paused(&self, paused: bool) {
        self.local_paused.send_replace(paused);
    }

    /// Whether USR2 paused this process.
    pub fn locally_paused(&self) -> bool {
        *self.local_paused.borrow()
    }

    /// Waits until neither pause is in force.
    pub async fn unpaused(&self) {
        let mut remote = self.remote_paused.subscribe();
        let mut local = self.local_paused.subscribe();
        loop {
            if !*remote.borrow_and_update() && !*local.borrow_and_update() {
                return;
            }
            tokio::select! {
                _ = remote.changed() => {}
                _ = local.changed() => {}
            }
        }
    }

    fn paused(&self) -> bool {
        *self.remote_paused.borrow() || *self.local_paused.borrow()
    }

    async fn until_someone_parked(&self) {
        loop {
            let n = self.idle_changed.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            if self.idle.load(Ordering::SeqCst) > 0 && !self.paused() {
                return;
            }
            tokio::select! {
                _ = n => {}
                _ = self.unpaused(), if self.paused() => {}
            }
        }
    }

    async fn until_attempt_after(&self, seen: u64) {
        let wait = async {
            loop {
                let n = self.attempted.notified();
                tokio::pin!(n);
                n.as_mut().enable();
                if self.attempts.load(Ordering::SeqCst) > seen {
                    return;
                }
                n.await;
            }
        };
        let _ = tokio::time::timeout(self.interval, wait).await;
    }

    /// Runs the watchers, the wildcard refresh and the pause check until `stop` turns true.
    pub async fn run(
        self: Arc<Self>,
        endpoint: crate::conn::Endpoint,
        mut con: Conn,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut watchers = JoinSet::new();
        let mut watched: Vec<String> = Vec::new();
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.wait_for(|s| *s) => break,
            }
            if self.list.is_dynamic() {
                match resolve(&self.keys, &self.list, &mut con).await {
                    Ok(names) => {
                        let next =
                            Arc::new(QueueKeys::with_jesque(&self.keys, &names, &self.jesque));
                        self.resolved.send_if_modified(|cur| {
                            let changed = **cur != *next;
                            if changed {
                                *cur = next.clone();
                            }
                            changed
                        });
                    }
                    Err(e) => tracing::debug!(error = %e, "could not refresh the queue list"),
                }
            }
            let current = self.queues();
            let want: Vec<String> = current
                .queues
                .iter()
                .take(MAX_WATCHED)
                .map(|(_, k, _)| k.clone())
                .collect();
            if want != watched {
                watchers.abort_all();
                for key in &want {
                    watchers.spawn(self.clone().watch_queue(endpoint.clone(), key.clone()));
                }
                watched = want;
            }
            if current.queues.len() > MAX_WATCHED && self.idle.load(Ordering::SeqCst) > 0 {
                // Queues beyond the watched ones are polled at INTERVAL, as Ruby polls all.
                self.work.notify_one();
            }
            if *self.remote_paused.borrow() {
                let v: redis::RedisResult<Option<String>> = redis::cmd("GET")
                    .arg(self.keys.pause_all_workers())
                    .query_async(&mut con)
                    .await;
                if let Ok(v) = v {
                    let paused = v.is_some_and(|s| s.trim().eq_ignore_ascii_case("true"));
                    if !paused {
                        tracing::info!("pause-all-workers cleared; resuming");
                        self.remote_paused.send_replace(false);
                    }
                }
            }
        }
        watchers.abort_all();
    }

    async fn watch_queue(self: Arc<Self>, endpoint: crate::conn::Endpoint, key: String) {
        let block = self.interval.max(Duration::from_secs(1));
        let mut con = None;
        let mut backoff = Backoff::new(self.interval.max(Duration::from_secs(1)));
        loop {
            self.until_someone_parked().await;
            if con.is_none() {
                match endpoint.blocking(block).await {
                    Ok(c) => con = Some(c),
                    Err(_) => {
                        tokio::time::sleep(backoff.next_delay()).await;
                        continue;
                    }
                }
            }
            let Some(c) = con.as_mut() else { continue };
            let seen = self.attempts.load(Ordering::SeqCst);
            if self.queues().jesque.is_zset_key(&key) {
                // A Jesque zset queue: nothing to block on; wake a slot when a member is due.
                let cap = self.interval.min(super::jesque::MAX_ZSET_WAIT);
                match super::jesque::due_in(c, &key, chrono::Utc::now(), cap).await {
                    Ok(None) => {
                        self.work.notify_one();
                        self.until_attempt_after(seen).await;
                        continue;
                    }
                    Ok(Some(wait)) => {
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                    // Still a list: watch it as one.
                    Err(e) if e.code() == Some("WRONGTYPE") => {}
                    Err(_) => {
                        con = None;
                        tokio::time::sleep(backoff.next_delay()).await;
                        continue;
                    }
                }
            }
            let r: redis::RedisResult<Option<Vec<u8>>> = redis::cmd("BLMOVE")
                .arg(&key)
                .arg(&key)
                .arg("LEFT")
                .arg("LEFT")
                .arg(block.as_secs_f64())
                .query_async(c)
                .await;
            match r {
                Ok(Some(_)) => {
                    backoff = Backoff::new(self.interval.max(Duration::from_secs(1)));
                    self.work.notify_one();
                    self.until_attempt_after(seen).await;
                }
                // Redis answered: a later outage starts its back-off from the bottom again.
                Ok(None) => backoff = Backoff::new(self.interval.max(Duration::from_secs(1))),
                Err(e) if e.code() == Some("WRONGTYPE") => {
                    // Not a list (a Jesque zset queue): never block on it; the reserve script
                    // skips it too.
                    tokio::time::sleep(self.interval).await;
                }
                Err(_) => {
                    con = None;
                    tokio::time::sleep(backoff.next_delay()).await;
                    // Jobs may have arrived while the connection was down.
                    self.work.notify_one();
                }
            }
        }
    }
}

/// Resolves the configured list against `<ns>:queues` (only read for wildcard lists).
async fn resolve(keys: &Keys, list: &QueueList, con: &mut Conn) -> redis::RedisResult<Vec<String>> {
    if !list.is_dynamic() {
        return Ok(list.resolve(&[]));
    }
    let known: Vec<String> = redis::cmd("SMEMBERS")
        .arg(keys.queues())
        .query_async(con)
        .await?;
    Ok(list.resolve(&known))
}
