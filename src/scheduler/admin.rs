//! What the scheduler adds to an [`Admin`] handle: the two things resque-scheduler's web tab
//! does to a delayed item (run it now, or delete it), and its recurring schedules (list the
//! stored ones, enqueue one now). Defined here, above `admin`, because they build jobs the way
//! the scheduler does; the item pages are read by `crate::admin::delayed_ops`.
//!
//! Taking an item out is one script (`delayed_take.lua`): `LREM 1` of its bytes, the reverse
//! index and an emptied bucket cleaned as resque-scheduler cleans them, and — for "run now" —
//! the job pushed as resque-scheduler's `enqueue_from_config` would ([`super::job::from_item`]:
//! the item's `queue` is not carried into the job). On a namespace spread over a Redis
//! Cluster's slots the job is pushed first and the item taken out after, each a single-slot
//! step (`super::spread`).

use super::{job, store};
use crate::admin::{element_id, text, Admin, DelayedAction, Taken};
use crate::client::FloatFormat;
use crate::error::{Error, Result};
use crate::keys::Keys;
use serde_json::Value;

impl Admin {
    /// Runs now or deletes the item with id `id` of bucket `ts` (looked for among its first
    /// `hint + 1000` items).
    pub async fn delayed_act(
        &self,
        ts: i64,
        id: &str,
        hint: usize,
        action: DelayedAction,
        format: FloatFormat,
    ) -> Result<Taken> {
        let mut con = self.con();
        let k = self.keys();
        let bucket = k.delayed_bucket(ts);
        let items: Vec<Vec<u8>> = redis::cmd("LRANGE")
            .arg(&bucket)
            .arg(0)
            .arg(hint + 1000)
            .query_async(&mut con)
            .await?;
        let Some(bytes) = items.into_iter().find(|b| element_id(b) == id) else {
            return Ok(Taken::Gone);
        };
        let (queue, payload) = match action {
            DelayedAction::Delete => (String::new(), String::new()),
            DelayedAction::RunNow => {
                let item = std::str::from_utf8(&bytes)
                    .map_err(|_| Error::Rejected("the item is not UTF-8 text".into()))?;
                let j = job::from_item(item, format).map_err(Error::Rejected)?;
                (j.queue, j.payload)
            }
        };
        if k.is_spread() {
            // The bucket, the zset, the reverse index and the queue are in different slots:
            // the job pushed first, the item taken out after (a crash between, or the
            // scheduler moving it meanwhile, enqueues it twice at worst; never loses it).
            if !queue.is_empty() {
                super::spread::push_jobs(&mut con, k, &[(queue, payload)]).await?;
            }
            let taken = super::spread::take(&mut con, k, ts, &[bytes.as_slice()]).await?;
            let done = taken > 0 || matches!(action, DelayedAction::RunNow);
            return Ok(if done { Taken::Done } else { Taken::Gone });
        }
        let queue_key = if queue.is_empty() {
            bucket.clone()
        } else {
            k.queue(&queue)
        };
        let taken: i64 = crate::scripts::DelayedTake {
            bucket: &bucket,
            schedule: k.delayed_schedule(),
            timestamps: k.timestamps(&text(&bytes)),
            queues: k.queues(),
            queue: queue_key,
            item: bytes.as_slice(),
            ts,
            member: Keys::delayed_bucket_member(ts),
            queue_name: &queue,
            payload: &payload,
        }
        .call()
        .invoke_async(&mut con)
        .await?;
        Ok(if taken > 0 { Taken::Done } else { Taken::Gone })
    }

    /// Every stored recurring schedule (resque-scheduler's `persistent_schedules`), with
    /// `last_enqueued_at` and resq's next due time.
    pub async fn schedules(&self) -> Result<Vec<store::StoredSchedule>> {
        let mut con = self.con();
        store::list(&mut con, self.keys()).await
    }

    /// Stores (or replaces) recurring schedule `name` (resque-scheduler's `set_schedule(…,
    /// persist: true)`: checked to parse, then marked changed so every scheduler reloads it);
    /// `default_tz` is the zone of a cron line that names none.
    pub async fn add_schedule(
        &self,
        name: &str,
        config: &serde_json::Map<String, Value>,
        default_tz: chrono_tz::Tz,
    ) -> Result<()> {
        store::add(&mut self.con(), self.keys(), name, config, default_tz).await
    }

    /// Removes stored schedule `name` (resque-scheduler's `remove_schedule`); whether it
    /// existed.
    pub async fn remove_schedule(&self, name: &str) -> Result<bool> {
        store::remove(&mut self.con(), self.keys(), name).await
    }

    /// Enqueues stored schedule `name` now, as resque-scheduler's web "Queue now" does
    /// (`enqueue_from_config`; `last_enqueued_at` is left to the scheduler). Returns the queue.
    pub async fn enqueue_schedule_now(&self, name: &str, format: FloatFormat) -> Result<String> {
        let mut con = self.con();
        let stored = store::get(&mut con, self.keys(), name)
            .await?
            .ok_or_else(|| Error::Rejected(format!("no stored schedule named {name:?}")))?;
        let config: serde_json::Map<String, Value> = serde_json::from_str(&stored)
            .map_err(|_| Error::Rejected(format!("schedule {name:?} is not a JSON object")))?;
        let j = job::from_config(&config, false, format).map_err(Error::Rejected)?;
        if self.keys().is_spread() {
            super::spread::push_jobs(&mut con, self.keys(), &[(j.queue.clone(), j.payload)])
                .await?;
            return Ok(j.queue);
        }
        let _: () = redis::pipe()
            .atomic()
            .sadd(self.keys().queues(), &j.queue)
            .ignore()
            .rpush(self.keys().queue(&j.queue), &j.payload)
            .ignore()
            .query_async(&mut con)
            .await?;
        Ok(j.queue)
    }
}
