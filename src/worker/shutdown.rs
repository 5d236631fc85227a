//! Shutdown phases, broadcast to every slot through a watch channel.

use tokio::sync::watch;

/// What the process is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Taking and running jobs.
    Running,
    /// QUIT: take no new job, let running ones finish.
    Quit,
    /// TERM/INT: take no new job; running ones are aborted after the term timeout.
    Term,
    /// Abort running jobs now (recorded as failures), then exit.
    Abort,
}

/// The sending side, held by the launcher.
#[derive(Clone, Debug)]
pub(crate) struct Shutdown {
    /// Current phase.
    tx: watch::Sender<Phase>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown {
            tx: watch::channel(Phase::Running).0,
        }
    }
}

impl Shutdown {
    /// Moves to `phase` (phases only advance).
    pub(crate) fn advance(&self, phase: Phase) {
        self.tx.send_if_modified(|p| {
            if phase > *p {
                *p = phase;
                true
            } else {
                false
            }
        });
    }

    /// A receiver for slots.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Phase> {
        self.tx.subscribe()
    }

    /// The current phase.
    pub(crate) fn phase(&self) -> Phase {
        *self.tx.borrow()
    }
}

/// Waits until the phase reaches at least `phase`.
pub(crate) async fn reached(rx: &mut watch::Receiver<Phase>, phase: Phase) {
    // The sender lives as long as the launcher; if it is gone, treat it as reached.
    let _ = rx.wait_for(|p| *p >= phase).await;
}
