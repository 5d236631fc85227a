//! Unique jobs, producer side (hipq's `job_key`, Bee's duplicate check): an enqueue with a
//! unique key is a no-op — reported as [`Enqueued::Duplicate`] — while a job with the same key
//! waits (in a queue or the delayed set) or runs.
//!
//! The check and the push are one script (`unique_enqueue.lua`): `SET <ns>:resq:unique:<key>
//! <id> NX PX <ttl>`, then the usual push. The resq worker that finishes the job, or fails it
//! for the last time, deletes the lock if it still holds the job's id; a retry keeps it. The TTL
//! bounds how long a dead holder (a crashed worker, a job deleted by hand, a job run by a Ruby
//! or Java worker, which never releases) blocks the key: pick it above the longest wait + run.

use super::{encode, validate, Client};
use crate::error::Result;
use crate::keys::Keys;
use crate::registry::unique::{UniqueMark, FIELD};
use chrono::Utc;
use rand::Rng;
use serde_json::{Map, Value};
use std::time::Duration;

/// A unique key and how long its lock may outlive a dead holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unique {
    /// The key: jobs with equal keys are duplicates.
    pub key: String,
    /// The lock's lifetime (default one hour); a delayed job's lock also covers its delay.
    pub ttl: Duration,
}

impl Unique {
    /// A unique key with the default TTL.
    pub fn new(key: impl Into<String>) -> Self {
        Unique {
            key: key.into(),
            ttl: Duration::from_secs(3600),
        }
    }

    /// Sets the lock's TTL.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }
}

/// What a unique enqueue did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enqueued {
    /// The job was enqueued (or filed in the delayed set); its unique id.
    Pushed(String),
    /// A job with the same key waits or runs: nothing was written.
    Duplicate,
}

impl Enqueued {
    /// Whether the job was enqueued.
    pub fn pushed(&self) -> bool {
        matches!(self, Enqueued::Pushed(_))
    }
}

fn new_id() -> String {
    format!("{:016x}", rand::rng().random::<u64>())
}

fn mark(unique: &Unique, id: &str) -> Map<String, Value> {
    let mut extra = Map::new();
    let m = UniqueMark {
        key: unique.key.clone(),
        id: id.to_string(),
    };
    extra.insert(FIELD.to_string(), m.to_value());
    extra
}

impl Client {
    /// Enqueues `class` with `args` onto `queue` unless a job with `unique.key` waits or runs.
    /// The payload is Ruby's form plus a `resq_unique` field (so Ruby's args-based `destroy`
    /// does not match it).
    pub async fn enqueue_unique(
        &self,
        queue: &str,
        class: &str,
        args: &[Value],
        unique: &Unique,
    ) -> Result<Enqueued> {
        validate(queue, class)?;
        let id = new_id();
        let payload =
            encode::resque_payload_with(class, args, &mark(unique, &id), self.float_format);
        let ttl = unique.ttl;
        // A split queue's job goes to its shards in turn (crate::splits).
        let queue = self.route(queue, None).await?;
        self.unique_call(unique, &id, ttl, "rpush", &queue, &payload, 0)
            .await
    }

    /// Files a unique job in resque-scheduler's delayed set, due `delay` from now, unless a job
    /// with `unique.key` waits or runs. The lock lives `delay + unique.ttl`. The item carries
    /// the `resq_unique` field after `queue`; resq's scheduler keeps it when it moves the item
    /// (a Ruby resque-scheduler drops it, and the lock then expires by its TTL).
    pub async fn enqueue_unique_in(
        &self,
        queue: &str,
        delay: Duration,
        class: &str,
        args: &[Value],
        unique: &Unique,
    ) -> Result<Enqueued> {
        validate(queue, class)?;
        let ts = crate::wire::time::after_now(delay)?.timestamp();
        if ts <= Utc::now().timestamp() {
            return self.enqueue_unique(queue, class, args, unique).await;
        }
        let id = new_id();
        let item =
            encode::scheduler_item(queue, class, args, &mark(unique, &id), self.float_format);
        self.unique_call(unique, &id, delay + unique.ttl, "delayed", queue, &item, ts)
            .await
    }

    /// The id held by the lock of `key`, if a job with that key waits or runs.
    pub async fn unique_holder(&self, key: &str) -> Result<Option<String>> {
        use redis::AsyncCommands;
        Ok(self.con().get(self.keys.unique(key)).await?)
    }

    #[allow(clippy::too_many_arguments)]
    async fn unique_call(
        &self,
        unique: &Unique,
        id: &str,
        ttl: Duration,
        mode: &str,
        queue: &str,
        payload: &str,
        ts: i64,
    ) -> Result<Enqueued> {
        crate::error::not_spread(&self.keys, "unique jobs")?;
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let n: i64 = crate::scripts::UniqueEnqueue {
            lock: self.keys.unique(&unique.key),
            queues: self.keys.queues(),
            queue: self.keys.queue(queue),
            bucket: self.keys.delayed_bucket(ts),
            timestamps: self.keys.timestamps(payload),
            schedule: self.keys.delayed_schedule(),
            id,
            ttl_ms,
            mode,
            queue_name: queue,
            payload,
            ts,
            member: Keys::delayed_bucket_member(ts),
        }
        .call()
        .invoke_async(&mut self.con())
        .await?;
        Ok(if n == 1 {
            Enqueued::Pushed(id.to_string())
        } else {
            Enqueued::Duplicate
        })
    }
}
