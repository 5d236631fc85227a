//! `prune`: what one round of dead-worker pruning did ([`PruneOutcome`]). The round itself,
//! `Admin::prune`, is the worker's (it runs the worker's own rules, so it is defined with them,
//! in `crate::worker::admin`).

use serde::Serialize;

/// One pruned worker.
#[derive(Debug, Clone, Serialize)]
pub struct PrunedWorker {
    /// Its id.
    pub id: String,
    /// `expired` (heartbeat older than the prune interval) or `dead_local` (a resq process of
    /// this host that is gone).
    pub reason: &'static str,
    /// `idle`, `failed` (its job became a failure entry) or `requeued`.
    pub job: &'static str,
}

/// What a round did.
#[derive(Debug, Clone, Serialize)]
pub struct PruneOutcome {
    /// False when another pruner held Ruby's lock (nothing was done).
    pub locked: bool,
    /// Workers removed.
    pub pruned: Vec<PrunedWorker>,
    /// Workers a rule selected but that were left alone, with why.
    pub skipped: Vec<(String, String)>,
}
