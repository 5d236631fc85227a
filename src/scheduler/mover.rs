//! Moving due delayed items (resque-scheduler's `handle_delayed_items`), batch by batch.
//!
//! For each due timestamp, earliest first: read up to `batch` items from the head of its bucket
//! (`LRANGE`), turn each into its job ([`super::job`]), then apply the whole batch with one
//! script (`move_delayed.lua`) that checks the master lock is still ours and the bucket still
//! starts with those exact items, pushes the jobs, `SREM`s each item's `timestamps:` member,
//! trims the bucket, and removes the bucket and its zset member once empty. A changed bucket
//! is simply read again. Round trips: one `LRANGE` and one script call per batch. On a
//! namespace spread over a Redis Cluster's slots the batch is a row of single-slot steps
//! instead (`super::spread`): a due job may be enqueued twice there, never lost.

use super::job;
use crate::client::FloatFormat;
use crate::error::Result;
use crate::keys::Keys;
use crate::wire::{time, Failure};
use redis::aio::ConnectionLike;

/// What one batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Batch {
    /// Moved this many items (0: the bucket was empty and is cleaned up).
    Moved(usize),
    /// The lock is not ours any more.
    NotMaster,
}

/// What the mover needs to know.
#[derive(Debug, Clone)]
pub(crate) struct Mover {
    /// Key names.
    pub keys: Keys,
    /// The master lock's key.
    pub lock_key: String,
    /// Our lock value (`<host>:<pid>`).
    pub lock_value: String,
    /// Items per batch (`DELAYED_REQUEUE_BATCH_SIZE`, 100).
    pub batch: usize,
    /// Float text for args that are re-encoded.
    pub float_format: FloatFormat,
}

impl Mover {
    /// Moves every item of bucket `ts`; returns how many, or `None` when the lock was lost.
    pub(crate) async fn drain<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        ts: i64,
    ) -> Result<Option<usize>> {
        let mut total = 0;
        loop {
            match self.batch(con, ts).await? {
                Batch::NotMaster => return Ok(None),
                Batch::Moved(n) => {
                    total += n;
                    if n < self.batch {
                        return Ok(Some(total));
                    }
                }
            }
        }
    }

    /// Moves one batch of bucket `ts`, reading it again while other writers change it (up to
    /// 50 times; then it reports nothing moved and the next tick tries again).
    pub(crate) async fn batch<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        ts: i64,
    ) -> Result<Batch> {
        if self.keys.is_spread() {
            return self.batch_spread(con, ts).await;
        }
        let bucket = self.keys.delayed_bucket(ts);
        for _ in 0..50 {
            let stop = isize::try_from(self.batch.max(1)).unwrap_or(isize::MAX) - 1;
            let items: Vec<String> = redis::cmd("LRANGE")
                .arg(&bucket)
                .arg(0)
                .arg(stop)
                .query_async(con)
                .await?;
            let member = Keys::delayed_bucket_member(ts);
            let mut items_keys = Vec::with_capacity(items.len());
            let mut moved = Vec::with_capacity(items.len());
            for item in &items {
                let (queue, body) = match job::from_item(item, self.float_format) {
                    Ok(j) => (j.queue, j.payload),
                    Err(why) => {
                        tracing::error!(item = %item, error = %why, "delayed item cannot be enqueued; recording a failure");
                        (String::new(), self.unschedulable(item, &why))
                    }
                };
                let tracked = crate::jobs::item_ref(item);
                items_keys.push((self.keys.timestamps(item), self.keys.queue(&queue)));
                moved.push((item.as_str(), queue, body, tracked));
            }
            let r: i64 = crate::scripts::MoveDelayed {
                lock: &self.lock_key,
                schedule: self.keys.delayed_schedule(),
                bucket: &bucket,
                queues: self.keys.queues(),
                failed: self.keys.failed(),
                items_keys,
                lock_value: &self.lock_value,
                ts,
                member: &member,
                n: items.len(),
                prefix: self.keys.prefix(),
                now_ms: chrono::Utc::now().timestamp_millis(),
                items: moved,
            }
            .call()
            .invoke_async(con)
            .await?;
            match r {
                -1 => return Ok(Batch::NotMaster),
                -2 => continue,
                n => return Ok(Batch::Moved(usize::try_from(n).unwrap_or(0))),
            }
        }
        Ok(Batch::Moved(0))
    }

    /// The failure entry of an item that cannot be enqueued.
    pub(super) fn unschedulable(&self, item: &str, why: &str) -> String {
        let queue = serde_json::from_str::<serde_json::Value>(item)
            .ok()
            .and_then(|v| v.get("queue").and_then(|q| q.as_str().map(str::to_string)))
            .unwrap_or_default();
        Failure {
            failed_at: time::failed_at(chrono::Utc::now()),
            payload: None,
            exception: "Resq::UnschedulableItem".into(),
            error: format!("{why}: {item}"),
            backtrace: Vec::new(),
            worker: &self.lock_value,
            queue: &queue,
        }
        .encode()
    }
}
