//! What the worker layer adds to an [`Admin`] handle: one round of dead-worker pruning, run
//! from the CLI (`resq prune`) with the worker's own rules ([`super::prune`]: Ruby's lock,
//! Ruby's heartbeat expiry, dead local resq pids). Defined here, above `admin`, so the admin
//! side never imports the worker.
//!
//! The round acts as a resq process of this host: its lock value and host field are those of
//! a slot id of this process, so its pid rule can only ever match resq ids of this host whose
//! process is gone.

use super::prune::{Fate, Pruner, Reason};
use crate::admin::{Admin, PruneOutcome, PrunedWorker};
use crate::error::Result;
use crate::identity::{self, WorkerId};
use std::time::Duration;

impl Admin {
    /// Runs one pruning round. `prune_after` is Ruby's `prune_interval` (at least 300 s);
    /// with `at_least_once` interrupted jobs go back to their queue instead of failing.
    pub async fn prune(&self, prune_after: Duration, at_least_once: bool) -> Result<PruneOutcome> {
        let me = WorkerId::for_slot(
            &identity::hostname(),
            std::process::id(),
            0,
            &["resq-prune".to_string()],
        );
        let pruner = Pruner::new(
            self.keys().clone(),
            &[me.as_str().to_string()],
            std::process::id(),
            prune_after.max(Duration::from_secs(300)),
            at_least_once,
        );
        let mut con = self.con();
        let report = pruner.run_once(&mut con).await?;
        Ok(PruneOutcome {
            locked: report.locked,
            pruned: report
                .pruned
                .into_iter()
                .map(|p| PrunedWorker {
                    id: p.id,
                    reason: match p.reason {
                        Reason::Expired => "expired",
                        Reason::DeadLocal => "dead_local",
                    },
                    job: match p.fate {
                        Fate::Idle => "idle",
                        Fate::Failed => "failed",
                        Fate::Requeued => "requeued",
                    },
                })
                .collect(),
            skipped: report.skipped,
        })
    }
}
