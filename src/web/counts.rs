//! Counts of the failure list by class, exception and queue, computed off the request path.
//!
//! Counting 100,000 entries takes longer than a page may, so a count runs as a background task
//! ([`crate::admin::Admin::count_failures`], chunk by chunk), at most one at a time, and its
//! result is kept for [`FRESH`]. A page asks for counts and waits at most [`WAIT`]: it gets the
//! fresh result, or the previous one with its age, or the progress of the first count (the page
//! then reloads itself).

use crate::admin::failure_scan::FailureCounts;
use crate::admin::Admin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How long a count is served without counting again.
pub(crate) const FRESH: Duration = Duration::from_secs(30);
/// How long a page waits for a count under way.
pub(crate) const WAIT: Duration = Duration::from_millis(150);

/// What a page gets.
#[derive(Debug, Clone)]
pub(crate) enum Counts {
    /// A finished count and how old it is.
    Ready(Arc<FailureCounts>, Duration),
    /// The first count is still running: entries counted so far.
    Counting(usize),
    /// The last count failed.
    Failed(String),
}

/// The last finished count, and whether one is running.
#[derive(Default)]
struct Slot {
    /// The last result and when it finished.
    last: Option<(Instant, Result<Arc<FailureCounts>, String>)>,
    /// Whether a count is under way.
    running: bool,
}

/// The cache (one per router).
pub(crate) struct CountCache {
    /// Its state.
    slot: Mutex<Slot>,
    /// Entries counted by the running count.
    progress: Arc<AtomicUsize>,
    /// Bumped when a count finishes.
    done: watch::Sender<u64>,
}

impl Default for CountCache {
    fn default() -> Self {
        CountCache {
            slot: Mutex::new(Slot::default()),
            progress: Arc::new(AtomicUsize::new(0)),
            done: watch::channel(0).0,
        }
    }
}

impl CountCache {
    /// The counts, starting a count when the last one is older than [`FRESH`].
    pub(crate) async fn get(self: &Arc<Self>, admin: &Admin) -> Counts {
        let mut finished = self.done.subscribe();
        let start = {
            let Ok(mut slot) = self.slot.lock() else {
                return Counts::Failed("count cache poisoned".into());
            };
            let stale = slot
                .last
                .as_ref()
                .is_none_or(|(at, _)| at.elapsed() >= FRESH);
            let start = stale && !slot.running;
            if start {
                slot.running = true;
            }
            start
        };
        if start {
            let me = Arc::clone(self);
            let admin = admin.clone();
            tokio::spawn(async move {
                me.progress.store(0, Ordering::Relaxed);
                let result = admin
                    .count_failures(&me.progress)
                    .await
                    .map(Arc::new)
                    .map_err(|e| e.to_string());
                if let Ok(mut slot) = me.slot.lock() {
                    slot.last = Some((Instant::now(), result));
                    slot.running = false;
                }
                me.done.send_modify(|n| *n += 1);
            });
        }
        let running = self.slot.lock().map(|s| s.running).unwrap_or(false);
        if running {
            let _ = tokio::time::timeout(WAIT, finished.changed()).await;
        }
        let Ok(slot) = self.slot.lock() else {
            return Counts::Failed("count cache poisoned".into());
        };
        match &slot.last {
            Some((at, Ok(c))) => Counts::Ready(Arc::clone(c), at.elapsed()),
            Some((_, Err(e))) if !slot.running => Counts::Failed(e.clone()),
            _ => Counts::Counting(self.progress.load(Ordering::Relaxed)),
        }
    }
}
