//! Wake-up lanes. Everywhere but a spread cluster namespace every slot parks in the process's
//! one lane. On a spread namespace each queue's slots (a group: crate::worker::spread) park
//! in a lane of that queue, so a job seen on one queue (its watcher, an invalidation, a call
//! that found more) wakes a slot of that queue only: an idle queue's (or shard's) slots are
//! never woken for another queue's jobs, and cost nothing between jobs; a busy queue's parked
//! slots are woken for it and not handed to idle ones.

use super::Fetch;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use tokio::sync::Notify;

/// One lane: its parked slots and its reserve attempts.
#[derive(Default)]
pub(crate) struct Lane {
    /// Wakes one parked slot.
    pub(super) work: Notify,
    /// Parked slots.
    pub(super) idle: AtomicUsize,
    /// Signalled when `idle` grows.
    pub(super) idle_changed: Notify,
    /// Reserve attempts made so far.
    pub(super) attempts: AtomicU64,
    /// Signalled after each reserve attempt.
    pub(super) attempted: Notify,
    /// Whether a watcher blocks on its queue now (its connection up): then the periodic
    /// reserve leaves the lane alone.
    pub(super) watched: AtomicBool,
}

/// Marks a lane watched while it lives (a watcher task's; dropped when the task ends or is
/// aborted).
pub(super) struct Watching<'a>(pub(super) &'a Lane);

impl Watching<'_> {
    /// The watcher's connection is up (`true`) or lost (`false`).
    pub(super) fn set(&self, up: bool) {
        self.0.watched.store(up, Ordering::SeqCst);
    }
}

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        self.set(false);
    }
}

impl Lane {
    /// Whether a slot of it is parked.
    pub(super) fn has_idle(&self) -> bool {
        self.idle.load(Ordering::SeqCst) > 0
    }
}

impl Fetch {
    /// Gives each queue key of `keys` (a spread namespace's groups) a lane of its own; once,
    /// before the slots start.
    pub(crate) fn set_lanes(&self, keys: &[String]) {
        let lanes: HashMap<String, Lane> =
            keys.iter().map(|k| (k.clone(), Lane::default())).collect();
        let _ = self.lanes.set(lanes);
    }

    /// The lane of queue key `key` (the process's one lane when it has no lanes by queue).
    pub(super) fn lane(&self, key: Option<&str>) -> &Lane {
        key.and_then(|k| self.lanes.get()?.get(k))
            .unwrap_or(&self.lane)
    }

    /// Every lane.
    fn lanes(&self) -> impl Iterator<Item = &Lane> {
        std::iter::once(&self.lane).chain(self.lanes.get().into_iter().flat_map(|l| l.values()))
    }

    /// Wakes one parked slot of every lane (something may concern every queue).
    pub(super) fn wake_all(&self) {
        for lane in self.lanes() {
            lane.work.notify_one();
        }
    }

    /// The periodic reserve's wake-up: one parked slot of the process's lane, and of each
    /// queue's lane that no watcher covers now (a queue beyond the watched ones, a watcher
    /// without a connection). A queue whose watcher blocks on it is told of its next job by
    /// the watcher, so its idle slots send nothing between jobs.
    pub(super) fn wake_unwatched(&self) {
        self.lane.work.notify_one();
        for lane in self.lanes.get().into_iter().flat_map(|l| l.values()) {
            if !lane.watched.load(Ordering::SeqCst) {
                lane.work.notify_one();
            }
        }
    }

    /// Whether a slot of any lane is parked.
    pub(super) fn any_idle(&self) -> bool {
        self.lanes().any(Lane::has_idle)
    }

    /// Reserve attempts made so far by all slots.
    pub(crate) fn attempts(&self) -> u64 {
        self.lanes()
            .map(|l| l.attempts.load(Ordering::SeqCst))
            .sum()
    }
}
