//! The process's bound on jobs at once when it has more slots than `CONCURRENCY` (a spread
//! namespace: `CONCURRENCY` slots for each queue, so one busy queue can use them all, and at
//! most `CONCURRENCY` jobs running in the process).
//!
//! A slot holds a permit from before its reserve until its step brings no job back. After a
//! job it has held the permit for [`TURN`] or longer, it hands it on when another slot waits
//! for one (the semaphore serves waiters first, in the order they came), so a busy queue keeps
//! the others out for one turn at most. Within a turn the slot's end and its next reserve stay
//! one request: handing on after every job would split each into two, which measured +70 %
//! Redis CPU a job on short jobs (`scripts/cluster-cost`, `split`). Unbounded (every other
//! layout: the slots are the bound) it holds nothing and costs nothing.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// How long a slot keeps its permit across jobs before handing it to a waiting slot.
pub(crate) const TURN: Duration = Duration::from_millis(100);

/// One slot's side of the process's bound.
#[derive(Default)]
pub(crate) struct Turns {
    /// The process's permits (`None`: no bound).
    permits: Option<Arc<Semaphore>>,
    /// The permit the slot holds, and since when.
    held: Option<(OwnedSemaphorePermit, Instant)>,
}

impl Turns {
    /// A slot's side of `permits`.
    pub(crate) fn bounded(permits: Arc<Semaphore>) -> Self {
        Turns {
            permits: Some(permits),
            held: None,
        }
    }

    /// Whether the slot may reserve now: it holds a permit, or took one without waiting.
    pub(crate) fn try_hold(&mut self) -> bool {
        let Some(permits) = &self.permits else {
            return true;
        };
        if self.held.is_none() {
            self.held = permits
                .clone()
                .try_acquire_owned()
                .ok()
                .map(|p| (p, Instant::now()));
        }
        self.held.is_some()
    }

    /// Waits for a permit (at once when unbounded or already held).
    pub(crate) async fn hold(&mut self) {
        if let (Some(permits), None) = (&self.permits, &self.held) {
            self.held = permits
                .clone()
                .acquire_owned()
                .await
                .ok()
                .map(|p| (p, Instant::now()));
        }
    }

    /// Gives the permit back (to the first slot waiting, if any).
    pub(crate) fn release(&mut self) {
        self.held = None;
    }

    /// After a job: gives the permit back once it was held for a [`TURN`] (taken again at once
    /// when no slot waits, for a new turn).
    pub(crate) fn job_done(&mut self) {
        if self
            .held
            .as_ref()
            .is_some_and(|(_, since)| since.elapsed() >= TURN)
        {
            self.held = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_released_permit_goes_to_the_slot_that_waits_for_it() {
        let permits = Arc::new(Semaphore::new(1));
        let mut a = Turns::bounded(permits.clone());
        let mut b = Turns::bounded(permits);
        assert!(a.try_hold());
        assert!(!b.try_hold(), "a second job while the bound is reached");
        let waiting = tokio::spawn(async move {
            b.hold().await;
            b
        });
        // On this one-thread runtime the task runs until it waits for the permit.
        tokio::task::yield_now().await;
        a.job_done();
        assert!(a.try_hold(), "within its turn the slot keeps the permit");
        // (The turn's length is what is tested, not a wait for an event.)
        tokio::time::sleep(TURN).await;
        a.job_done();
        assert!(
            !a.try_hold(),
            "the released permit went to the slot waiting for it"
        );
        let mut b = waiting.await.expect("b");
        b.release();
        assert!(a.try_hold());
    }

    #[test]
    fn unbounded_always_admits() {
        let mut g = Turns::default();
        assert!(g.try_hold());
        assert!(g.try_hold());
    }
}
