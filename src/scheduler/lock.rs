//! resque-scheduler's master lock, shared with every resque-scheduler and resq scheduler of the
//! namespace: key `<ns>:<ns>:[<prefix>:]resque_scheduler_master_lock`, value `<host>:<pid>`,
//! TTL 180 s (`LOCK_TIMEOUT`). Acquire is `SETNX` + `EXPIRE`; "still mine?" is `GET == value`
//! → `EXPIRE`; both in one script per tick together with the due-timestamp lookup. Every write
//! the scheduler makes checks the lock again inside its own script, so nothing is moved or
//! fired by a process that has just lost it.

use crate::error::Result;
use redis::aio::ConnectionLike;
use redis::Value;
use std::time::Duration;

/// Whether this process is master after a poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mastery {
    /// Someone else holds the lock.
    No,
    /// Just acquired.
    Acquired,
    /// Held and extended.
    Kept,
}

impl Mastery {
    /// Whether this process may move and fire.
    pub fn is_master(self) -> bool {
        self != Mastery::No
    }
}

/// The master lock of one namespace, as held by this process.
#[derive(Debug, Clone)]
pub struct MasterLock {
    /// The lock key.
    pub key: String,
    /// Our value, `<host>:<pid>`.
    pub value: String,
    /// Its TTL.
    pub timeout: Duration,
    /// `<ns>:delayed_queue_schedule`.
    pub schedule_key: String,
}

impl MasterLock {
    /// Takes or keeps the lock, and as master returns the earliest due timestamp (≤ `now`).
    pub async fn poll<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        now: i64,
    ) -> Result<(Mastery, Option<i64>)> {
        let v: Vec<Value> = crate::scripts::SchedulerPoll {
            lock: &self.key,
            schedule: &self.schedule_key,
            value: &self.value,
            timeout_s: self.timeout.as_secs().max(1),
            now_s: now,
            release: "",
        }
        .call()
        .invoke_async(con)
        .await?;
        let mastery = match v.first() {
            Some(Value::Int(1)) => Mastery::Acquired,
            Some(Value::Int(2)) => Mastery::Kept,
            _ => Mastery::No,
        };
        let due = match v.get(1) {
            Some(Value::BulkString(b)) => std::str::from_utf8(b).ok().and_then(|s| s.parse().ok()),
            _ => None,
        };
        Ok((mastery, due))
    }

    /// Deletes the lock if it is still ours (on shutdown).
    pub async fn release<C: ConnectionLike + Send>(&self, con: &mut C) -> Result<bool> {
        let v: Vec<Value> = crate::scripts::SchedulerPoll {
            lock: &self.key,
            schedule: &self.schedule_key,
            value: &self.value,
            timeout_s: 1,
            now_s: 0,
            release: "release",
        }
        .call()
        .invoke_async(con)
        .await?;
        Ok(matches!(v.first(), Some(Value::Int(1))))
    }
}
