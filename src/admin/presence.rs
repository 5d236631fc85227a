//! Whether a namespace holds any Resque data, so the CLI can say so when a command finds
//! nothing: the usual cause is a wrong `RESQUE_NAMESPACE` (or database in `REDIS_URL`).

use super::Admin;
use crate::error::Result;

impl Admin {
    /// Whether any of the keys every Resque-family peer writes exists under the namespace:
    /// the queue set, the worker set, the stats, the failure list, resque-scheduler's delayed
    /// schedule and stored schedules, the pause switch, resque-status's (and resq's tracked
    /// jobs') `_statuses`, resq's limits (declared and set), paused queues and split queues. One `EXISTS`, so it costs nothing on a
    /// large database (no `SCAN`); every key shares the namespace's hash tag under Cluster.
    pub async fn has_data(&self) -> Result<bool> {
        let k = self.keys();
        let n: u64 = redis::cmd("EXISTS")
            .arg(k.queues())
            .arg(k.workers())
            .arg(k.stat_processed())
            .arg(k.stat_failed())
            .arg(k.failed())
            .arg(k.delayed_schedule())
            .arg(k.persistent_schedules())
            .arg(k.pause_all_workers())
            .arg(k.resque_statuses())
            .arg(k.limits_declared())
            .arg(k.limits_set())
            .arg(k.paused_queues())
            .arg(k.splits())
            .query_async(&mut self.con())
            .await?;
        Ok(n > 0)
    }
}
