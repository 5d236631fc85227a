//! Whether a namespace holds any Resque data, so the CLI can say so when a command finds
//! nothing: the usual cause is a wrong `RESQUE_NAMESPACE` (or database in `REDIS_URL`).

use super::Admin;
use crate::error::Result;

impl Admin {
    /// Whether any of the keys every Resque-family peer writes exists under the namespace:
    /// the queue set, the worker set, the stats, the failure list, resque-scheduler's delayed
    /// schedule and stored schedules, the pause switch, resque-status's (and resq's tracked
    /// jobs') `_statuses`, resq's limits (declared and set), paused queues and split queues.
    /// One `EXISTS`, so it costs nothing on a large database (no `SCAN`); every key shares the
    /// namespace's hash tag under Cluster (one `EXISTS` per key, a pipeline per slot, on a
    /// spread namespace).
    pub async fn has_data(&self) -> Result<bool> {
        let k = self.keys();
        let keys = [
            k.queues(),
            k.workers(),
            k.stat_processed(),
            k.stat_failed(),
            k.failed(),
            k.delayed_schedule(),
            k.persistent_schedules(),
            k.pause_all_workers(),
            k.resque_statuses(),
            k.limits_declared(),
            k.limits_set(),
            k.paused_queues(),
            k.splits(),
        ];
        if k.is_spread() {
            // Each key in a slot of its own: one `EXISTS` each, a pipeline per slot.
            let mut p = redis::pipe();
            for key in &keys {
                p.cmd("EXISTS").arg(key);
            }
            let found: Vec<u64> = p.query_async(&mut self.con()).await?;
            return Ok(found.iter().any(|n| *n > 0));
        }
        let n: u64 = redis::cmd("EXISTS")
            .arg(&keys[..])
            .query_async(&mut self.con())
            .await?;
        Ok(n > 0)
    }
}
