//! Whether a scheduler is running: who holds resque-scheduler's master lock
//! (`<ns>:<ns>:[<prefix>:]resque_scheduler_master_lock`, value `<host>:<pid>`, TTL 180 s,
//! renewed by its holder every poll). resque-scheduler, `resq scheduler` and a worker with
//! `RESQ_SCHEDULER=true` all take that lock, so whoever holds it moves delayed jobs and fires
//! recurring schedules; nobody holding it means nothing does.

use super::Admin;
use crate::error::Result;
use serde::Serialize;

/// Who holds the namespace's scheduler master lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchedulerStatus {
    /// Whether a scheduler holds the lock (the lock exists).
    pub running: bool,
    /// The lock key read.
    pub lock_key: String,
    /// The holder, `<host>:<pid>`, when held.
    pub master: Option<String>,
    /// Seconds until the lock expires unless its holder renews it (`None`: not held, or held
    /// without a TTL).
    pub expires_in_s: Option<i64>,
}

impl SchedulerStatus {
    /// One line for people: `running (master web1:4242, lock renewed within 170s)` or
    /// `none running (no master lock at <key>)`.
    pub fn describe(&self) -> String {
        match (&self.master, self.expires_in_s) {
            (Some(m), Some(ttl)) => format!("running (master {m}, lock expires in {ttl}s)"),
            (Some(m), None) => format!("running (master {m}, lock without expiry)"),
            (None, _) => format!(
                "none running (no master lock at {}): delayed and recurring jobs wait until \
                 one runs",
                self.lock_key
            ),
        }
    }
}

impl Admin {
    /// Reads the master lock; `lock_prefix` is resque-scheduler's
    /// `RESQUE_SCHEDULER_MASTER_LOCK_PREFIX` (empty for none).
    pub async fn scheduler_status(&self, lock_prefix: &str) -> Result<SchedulerStatus> {
        let key = self.keys().scheduler_master_lock_prefixed(lock_prefix);
        let (holder, pttl): (Option<Vec<u8>>, i64) = redis::pipe()
            .get(&key)
            .pttl(&key)
            .query_async(&mut self.con())
            .await?;
        let master = holder.map(|b| super::text(&b));
        Ok(SchedulerStatus {
            running: master.is_some(),
            expires_in_s: (master.is_some() && pttl >= 0).then(|| (pttl + 999) / 1000),
            master,
            lock_key: key,
        })
    }
}
