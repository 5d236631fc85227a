//! Wake-ups: how idle slots learn that a job is waiting, without polling, whatever the number of
//! queues.
//!
//! Slots never poll on a timer for work. A slot whose reserve finds nothing parks here, and is
//! woken by one of:
//!
//! * **invalidations** ([`super::tracking`]): a queue a reserve found empty is *armed* (read on
//!   a tracking connection), so Redis pushes its name at the next write to it (a Ruby `RPUSH`,
//!   a scheduler's move). That wakes a parked slot at once, whichever of 1,000 queues it is;
//!   idle, nothing is sent, and a queue being drained (not armed) sends nothing either;
//! * **watchers**, the fallback when tracking is unavailable (Redis Cluster, an ACL without
//!   `CLIENT`, a proxy without RESP3): a blocking `BLMOVE q q LEFT LEFT` per queue on a
//!   connection of its own, for the first [`MAX_WATCHED`] queues;
//! * **the periodic reserve**, while invalidations are not arriving: every `INTERVAL`, while
//!   any slot is parked, one slot reserves from every queue whatever the watchers said — so a
//!   queue beyond the watched ones, a lost connection or a watcher that cannot reconnect (Redis
//!   at `maxclients`) never leaves a job waiting longer than `INTERVAL`, as with Ruby's own
//!   polling. While invalidations arrive nothing can be missed (Redis delivers them while the
//!   connection lives, and every queue is polled again when it is re-established), so an idle
//!   process sends nothing. On a spread cluster namespace each queue's slots park in a lane of
//!   their own ([`lanes`]), and the periodic reserve leaves alone a queue its watcher blocks on.
//!
//! The same state makes reserves cheap with many queues: the step script reports which queues
//! it found empty, and while tracking is on, a queue found empty stays out of the next reserves
//! until an invalidation for it arrives ([`Fetch::pick`]). Priority order is unchanged: the
//! queues left out are known to be empty.
//!
//! The supervisor task ([`Fetch::run`]) also refreshes the queue list: a wildcard list from
//! `<ns>:queues` every `INTERVAL` (at once when it gains a member), and every list's split
//! queues from `<ns>:resq:splits` at once when it changes (every `INTERVAL` while tracking is
//! off: one `HGETALL` when nothing is split), whose shards form groups of equal priority polled
//! in a rotating order ([`Fetch::pick`], crate::splits); and, while
//! `<ns>:pause-all-workers` is set, re-reads it every `INTERVAL`.

use super::step::{Found, QueueKeys};
use crate::conn::Backoff;
use crate::conn::Conn;
use crate::keys::Keys;
use crate::queues::QueueList;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tokio::task::JoinSet;

mod lanes;
mod pause;
mod task;

use lanes::Lane;

use task::resolve;
pub(crate) use task::resolve_names;

/// Queues watched with a blocking command when tracking is unavailable.
pub(crate) const MAX_WATCHED: usize = 32;

/// What is known of one queue key.
#[derive(Debug, Default, Clone, Copy)]
struct QueueState {
    /// Invalidations seen for it.
    gen: u64,
    /// The `gen` at which a reserve found it empty (empty since, while equal to `gen`).
    empty_at: Option<u64>,
    /// Whether it is one of the queues this process reserves from now.
    ours: bool,
    /// Whether the tracking connection was asked to read it since its last invalidation (so
    /// Redis will tell of the next write to it).
    armed: bool,
    /// What the last call that polled it found (paused and blocked queues are not armed).
    last: Found,
}

impl QueueState {
    /// Out of the known-empty queues: the next reserve polls it.
    fn reopen(&mut self) {
        self.gen += 1;
        self.last = Found::Jobs;
    }
}

/// Shared by the slots, the step lanes and the wake-up tasks of one process.
pub(crate) struct Fetch {
    /// Key names.
    keys: Keys,
    /// The configured queue list.
    list: QueueList,
    /// The list resolved to keys (changes only for wildcard lists).
    resolved: watch::Sender<Arc<QueueKeys>>,
    /// The process's wake-up lane ([`lanes`]).
    lane: Lane,
    /// A spread namespace's lanes, one per queue of its groups.
    lanes: std::sync::OnceLock<HashMap<String, Lane>>,
    /// `<ns>:pause-all-workers` was seen set.
    remote_paused: watch::Sender<bool>,
    /// Paused by USR2.
    local_paused: watch::Sender<bool>,
    /// On a spread namespace, the queues `<ns>:resq:paused_queues` named when last read
    /// ([`pause`]).
    spread_paused: Mutex<Vec<String>>,
    /// `INTERVAL`.
    interval: Duration,
    /// Queues to run as Jesque zset queues (see [`super::jesque`]).
    jesque: Vec<String>,
    /// Per queue key: invalidations and emptiness.
    state: Mutex<HashMap<String, QueueState>>,
    /// Whether invalidations are being received (only then may a queue be known empty).
    tracking: AtomicBool,
    /// Queue keys for the tracking connection to arm.
    arm: tokio::sync::mpsc::UnboundedSender<String>,
    /// Its receiving end, until the tracking task takes it.
    arm_rx: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<String>>>,
    /// The next woken slot reserves from every queue (the periodic fallback).
    full_due: AtomicBool,
    /// Asks the supervisor to refresh a wildcard list now.
    refresh: Notify,
    /// Signalled once the first tracking attempt is over (connected or refused).
    pub(crate) tracking_tried: Notify,
    /// Turns taken by the groups of equal priority (see [`Fetch::pick`]).
    turn: AtomicUsize,
    /// The queues of those groups the last call that polled them found empty.
    group_empty: Mutex<std::collections::HashSet<String>>,
    /// The process's limits, told when their stored definitions change.
    pub(crate) limits: std::sync::OnceLock<Arc<crate::limits::cache::LimitsCache>>,
}

/// The queues one step call polls (see [`Fetch::pick`]).
#[derive(Debug)]
pub(crate) struct Pick {
    /// The queues, in priority order.
    pub queues: Arc<QueueKeys>,
    /// Their keys and invalidation counts when picked, to record what the call finds empty.
    seen: Vec<(String, u64)>,
    /// Whether emptiness may be recorded (tracking was on when picked).
    tracked: bool,
    /// Whether the list has groups of equal priority (their emptiness orders the next picks).
    grouped: bool,
}

/// Orders the picked queues (indexes in increasing order, with their `gens`) of each group of
/// equal priority: those not `last_empty` first, rotated by `turn`, then the others, so that no
/// queue of a group is always polled first and each that has jobs gets a turn in as many calls.
fn rotate_groups(
    groups: &[std::ops::Range<usize>],
    picked: &mut [usize],
    gens: &mut [u64],
    turn: usize,
    last_empty: impl Fn(usize) -> bool,
) {
    for g in groups {
        let from = picked.partition_point(|&i| i < g.start);
        let to = picked.partition_point(|&i| i < g.end);
        if to - from < 2 {
            continue;
        }
        let mut run: Vec<(usize, u64)> = picked[from..to]
            .iter()
            .copied()
            .zip(gens[from..to].iter().copied())
            .collect();
        // (A stable sort: each part keeps the group's order.)
        run.sort_by_key(|&(i, _)| last_empty(i));
        let busy = run.iter().filter(|&&(i, _)| !last_empty(i)).count();
        if busy > 1 {
            run[..busy].rotate_left(turn % busy);
        }
        for (k, (i, gen)) in run.into_iter().enumerate() {
            picked[from + k] = i;
            gens[from + k] = gen;
        }
    }
}

/// Decrements the parked count when a parked slot leaves, however it leaves.
struct Parked<'a>(&'a AtomicUsize);

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Fetch {
    /// The shared fetch state for a worker that runs `list` (the queues named in `jesque` as
    /// Jesque zset queues); resolves the queue list once.
    pub(crate) async fn with_jesque(
        keys: Keys,
        list: QueueList,
        jesque: Vec<String>,
        interval: Duration,
        con: &mut Conn,
    ) -> redis::RedisResult<Arc<Self>> {
        let (names, groups) = resolve(&keys, &list, con).await?;
        let first = Arc::new(QueueKeys::with_jesque(&keys, &names, &jesque).with_groups(groups));
        let resolved = watch::channel(first.clone()).0;
        let (arm, arm_rx) = tokio::sync::mpsc::unbounded_channel();
        let fetch = Arc::new(Fetch {
            arm,
            arm_rx: Mutex::new(Some(arm_rx)),
            keys,
            list,
            resolved,
            lane: Lane::default(),
            lanes: std::sync::OnceLock::new(),
            remote_paused: watch::channel(false).0,
            local_paused: watch::channel(false).0,
            spread_paused: Mutex::new(Vec::new()),
            interval,
            jesque,
            state: Mutex::new(HashMap::new()),
            tracking: AtomicBool::new(false),
            full_due: AtomicBool::new(false),
            refresh: Notify::new(),
            tracking_tried: Notify::new(),
            turn: AtomicUsize::new(0),
            group_empty: Mutex::default(),
            limits: std::sync::OnceLock::new(),
        });
        fetch.mark_ours(&first);
        Ok(fetch)
    }

    /// Marks the keys of `queues` as this process's queues (and no others).
    fn mark_ours(&self, queues: &QueueKeys) {
        let mut states = self.states();
        for st in states.values_mut() {
            st.ours = false;
        }
        for (_, key, _) in &queues.queues {
            states.entry(key.clone()).or_default().ours = true;
        }
    }

    /// The queues to reserve from now.
    pub(crate) fn queues(&self) -> Arc<QueueKeys> {
        self.resolved.borrow().clone()
    }

    /// Parks a slot (of the lane of queue key `lane`: [`lanes`]) until a wake-up says a job
    /// may be waiting.
    pub(crate) async fn park(&self, lane: Option<&str>) {
        let lane = self.lane(lane);
        lane.idle.fetch_add(1, Ordering::SeqCst);
        let _parked = Parked(&lane.idle);
        lane.idle_changed.notify_waiters();
        lane.work.notified().await;
    }

    /// Whether the slot just woken must reserve from every queue (the periodic fallback);
    /// true for one slot per period.
    pub(crate) fn take_full(&self) -> bool {
        self.full_due.swap(false, Ordering::SeqCst)
    }

    /// Called by a slot (of the lane of queue key `lane`) after every reserve attempt.
    pub(crate) fn attempted(&self, lane: Option<&str>) {
        let lane = self.lane(lane);
        lane.attempts.fetch_add(1, Ordering::SeqCst);
        lane.attempted.notify_waiters();
    }

    /// Records that the reserve script saw `<ns>:pause-all-workers`.
    pub(crate) fn set_remote_paused(&self) {
        self.remote_paused.send_replace(true);
    }

    /// Pauses or resumes this process (USR2 / CONT).
    pub(crate) fn set_local_paused(&self, paused: bool) {
        self.local_paused.send_replace(paused);
    }

    /// Whether USR2 paused this process.
    pub(crate) fn locally_paused(&self) -> bool {
        *self.local_paused.borrow()
    }

    /// Waits until neither pause is in force.
    pub(crate) async fn unpaused(&self) {
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

    fn states(&self) -> std::sync::MutexGuard<'_, HashMap<String, QueueState>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The queues of `all` a step call should poll: none when no slot of it reserves; all of
    /// them for the periodic fallback (`full`) or while tracking is off; otherwise those not
    /// known to be empty (Jesque zset queues always: their jobs become due without a write),
    /// and, in a call that completes a job (which may return a share of a limit), those a full
    /// limit closed.
    pub(crate) fn pick(
        &self,
        all: &Arc<QueueKeys>,
        reserving: bool,
        full: bool,
        completing: bool,
    ) -> Pick {
        let tracked = self.tracking.load(Ordering::SeqCst);
        if !reserving {
            return Pick {
                queues: Arc::new(QueueKeys::default()),
                seen: Vec::new(),
                tracked: false,
                grouped: false,
            };
        }
        let paused = self.keys.is_spread().then(|| self.paused_queues());
        let states = self.states();
        let mut picked = Vec::with_capacity(all.queues.len());
        let mut gens = Vec::with_capacity(all.queues.len());
        for (i, (name, key, _)) in all.queues.iter().enumerate() {
            if paused.as_ref().is_some_and(|p| p.contains(name)) {
                continue;
            }
            let st = states.get(key).copied().unwrap_or_default();
            let known_empty = tracked && st.empty_at == Some(st.gen);
            if full
                || !known_empty
                || (completing && st.last == Found::Blocked)
                || all.jesque.is_zset_index(i)
            {
                picked.push(i);
                gens.push(st.gen);
            }
        }
        drop(states);
        if !all.groups.is_empty() {
            // A split queue and its shards have equal priority: each call starts at another
            // of those not found empty last time (those go last, so that an empty one does not
            // hand its turn to the next: a share each, with or without tracking).
            let turn = self.turn.fetch_add(1, Ordering::Relaxed);
            let empty = self.group_empty.lock().unwrap_or_else(|p| p.into_inner());
            let last_empty = |i: usize| empty.contains(&all.queues[i].1);
            rotate_groups(&all.groups, &mut picked, &mut gens, turn, last_empty);
        }
        let seen: Vec<(String, u64)> = picked
            .iter()
            .zip(gens)
            .map(|(&i, gen)| (all.queues[i].1.clone(), gen))
            .collect();
        let in_order = picked.iter().enumerate().all(|(k, &i)| k == i);
        let queues = if in_order && picked.len() == all.queues.len() {
            all.clone()
        } else {
            Arc::new(all.subset(&picked))
        };
        Pick {
            queues,
            seen,
            tracked,
            grouped: !all.groups.is_empty(),
        }
    }

    /// Records what a step call found: a queue found empty stays out of reserves until an
    /// invalidation for it arrives (if none arrived since it was picked), and is armed so that
    /// one does; a paused queue stays out until the paused set changes, and one a full limit
    /// closed until a call completes a job, the limits change or a process is woken (neither
    /// is armed: their jobs would wake the slots in a loop). When a queue still had jobs after
    /// the call, one more parked slot is woken, so a burst fans out to every idle slot without
    /// waiting for a wake-up per job.
    /// `limits_replaced`: the limits in force changed after the call read them, so a queue it
    /// found closed by a limit is polled again instead.
    pub(crate) fn found_empty(&self, pick: &Pick, found: &[Found], limits_replaced: bool) {
        let mut more = false;
        if pick.grouped {
            let mut empty = self.group_empty.lock().unwrap_or_else(|p| p.into_inner());
            for ((key, _), &f) in pick.seen.iter().zip(found) {
                if f == Found::Empty {
                    empty.insert(key.clone());
                } else {
                    empty.remove(key);
                }
            }
        }
        // The slot that made the call is not idle yet, and parks next: it must find a wake-up
        // waiting (the change's own wake-up came while the call was on its way).
        let reopen = limits_replaced && found.contains(&Found::Blocked);
        if pick.tracked {
            let mut states = self.states();
            for ((key, gen), &f) in pick.seen.iter().zip(found) {
                if f == Found::Jobs || (reopen && f == Found::Blocked) {
                    more = true;
                    continue;
                }
                let st = states.entry(key.clone()).or_default();
                st.empty_at = Some(*gen);
                st.last = f;
                if f == Found::Empty && !st.armed {
                    // Told of the next write from now on (or woken at once when a job
                    // arrived since this call).
                    st.armed = true;
                    let _ = self.arm.send(key.clone());
                }
            }
        } else {
            more = found.contains(&Found::Jobs);
        }
        // (A call polls the queues of one lane: on a spread namespace one queue.)
        let lane = self.lane(pick.seen.first().map(|(k, _)| k.as_str()));
        if reopen || (more && lane.has_idle()) {
            lane.work.notify_one();
        }
    }

    /// The watched keys' tracking connection is (again) up: a change of the limits or of the
    /// paused set may have been missed, so the limits are read again and the queues found
    /// paused are polled again (the others are armed on the queues' connection, which is
    /// unaffected).
    pub(crate) fn keys_connected(&self) {
        if let Some(l) = self.limits.get() {
            l.changed();
        }
        self.repoll(|st| matches!(st.last, Found::Paused | Found::Blocked));
    }

    /// Polls again the queues known empty for which `which` holds, waking a parked slot.
    fn repoll(&self, which: impl Fn(&QueueState) -> bool) {
        let mut states = self.states();
        let mut any = false;
        for st in states.values_mut().filter(|st| which(st)) {
            st.reopen();
            any = true;
        }
        drop(states);
        if any {
            self.wake_all();
        }
    }

    /// An invalidation for `key` (or, with `None`, for every key: the server flushed, or the
    /// queues' tracking connection was just (re)established and anything may have been
    /// missed: nothing is armed any more).
    pub(crate) fn invalidated(&self, key: Option<&str>) {
        if let Some(k) = key {
            if k == self.keys.paused_queues() || k == self.keys.wake() {
                // A queue paused or resumed, or a limit opened: every queue may have work
                // again (the armed ones stay armed: Redis still tells of their next write).
                if let Some(l) = self.limits.get() {
                    l.changed();
                }
                return self.repoll(|_| true);
            }
            if k == self.keys.queues() {
                // A new queue: a wildcard list may take it, a split queue's group may (a job
                // put back onto a shard already dropped).
                if self.list.is_dynamic() || !self.queues().groups.is_empty() {
                    self.refresh.notify_one();
                }
                return;
            }
            if k == self.keys.splits() {
                // A split declared or changed: its shards are served at once.
                self.refresh.notify_one();
                return;
            }
            if k.starts_with(&self.keys.limits_declared()) {
                // Read again; a limit raised or cleared opens the queues it closed once the
                // new limits are read (the changes task in `run`), not before.
                if let Some(l) = self.limits.get() {
                    l.changed();
                }
                return;
            }
        }
        if key.is_none() {
            if let Some(l) = self.limits.get() {
                l.changed();
            }
        }
        let mut states = self.states();
        match key {
            Some(k) => {
                // Only this process's queues are kept (the map stays as small as the list).
                let ours = match states.get_mut(k) {
                    Some(st) => {
                        st.reopen();
                        st.armed = false;
                        st.ours
                    }
                    None => false,
                };
                drop(states);
                if ours {
                    self.lane(Some(k)).work.notify_one();
                }
            }
            None => {
                for st in states.values_mut() {
                    st.reopen();
                    st.armed = false;
                }
                drop(states);
                self.wake_all();
            }
        }
    }

    /// Turns invalidation-driven reserves on or off (off: every reserve polls every queue).
    pub(crate) fn set_tracking(&self, on: bool) {
        if on {
            self.invalidated(None);
        }
        self.tracking.store(on, Ordering::SeqCst);
    }

    async fn until_someone_parked(&self, lane: &Lane) {
        loop {
            let n = lane.idle_changed.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            if lane.has_idle() && !self.paused() {
                return;
            }
            tokio::select! {
                _ = n => {}
                _ = self.unpaused(), if self.paused() => {}
            }
        }
    }

    async fn until_attempt_after(&self, lane: &Lane, seen: u64) {
        let wait = async {
            loop {
                let n = lane.attempted.notified();
                tokio::pin!(n);
                n.as_mut().enable();
                if lane.attempts.load(Ordering::SeqCst) > seen {
                    return;
                }
                n.await;
            }
        };
        let _ = tokio::time::timeout(self.interval, wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::rotate_groups;

    /// Each queue of a group with jobs is polled first in as many calls, whichever of the
    /// group are empty (an empty one does not hand its turn to the next); queues outside the
    /// group keep their places.
    #[test]
    fn a_group_takes_turns_among_the_queues_with_jobs() {
        for empty in [vec![], vec![1usize], vec![1, 3]] {
            let mut first = [0usize; 6];
            for turn in 0..600 {
                let mut picked = [0usize, 1, 2, 3, 4, 5];
                let mut gens = [10u64, 11, 12, 13, 14, 15];
                rotate_groups(
                    &[std::ops::Range { start: 1, end: 5 }],
                    &mut picked,
                    &mut gens,
                    turn,
                    |i| empty.contains(&i),
                );
                assert_eq!((picked[0], picked[5]), (0, 5));
                for (i, g) in picked.iter().zip(gens) {
                    assert_eq!(g, 10 + *i as u64, "gens follow their queues");
                }
                first[picked[1]] += 1;
                let mut sorted = picked;
                sorted.sort();
                assert_eq!(sorted, [0, 1, 2, 3, 4, 5]);
            }
            let busy: Vec<usize> = (1..5).filter(|i| !empty.contains(i)).collect();
            for (i, n) in first.iter().enumerate().take(5).skip(1) {
                let want = if busy.contains(&i) {
                    600 / busy.len()
                } else {
                    0
                };
                assert_eq!(*n, want, "queue {i} first, with {empty:?} empty");
            }
        }
    }
}
