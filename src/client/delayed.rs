//! resque-scheduler's delayed jobs, written exactly as its `enqueue_at_with_queue` writes them
//! (wire notes §9.1, items 39–40), so a Ruby resque-scheduler moves them and
//! `Resque.remove_delayed` removes them:
//!
//! * `RPUSH <ns>:delayed:<secs> {"class":…,"args":[…],"queue":…}`
//! * `SADD <ns>:timestamps:<item> delayed:<secs>`
//! * `ZADD <ns>:delayed_queue_schedule <secs> <secs>`
//!
//! in one MULTI (Ruby sends them as three commands; on a namespace spread over a Redis Cluster's
//! slots resq does too, in that order: [`Client::delayed_push_raw`]). `<secs>` is the due time
//! truncated to whole seconds; a due time not after now enqueues at once, as Ruby does.

use super::{encode, validate, Client};
use crate::error::Result;
use crate::keys::Keys;
use chrono::{DateTime, Utc};
use redis::AsyncCommands;
use serde_json::{Map, Value};
use std::time::Duration;

/// What [`Client::enqueue_at`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheduled {
    /// Filed in the delayed set, due at these epoch seconds.
    Delayed(i64),
    /// The time had come: enqueued on the queue at once.
    Now,
    /// An enqueue middleware dropped it.
    Dropped,
}

/// Epoch seconds of `at`, truncated as Ruby's `Time#to_i`.
pub(crate) fn epoch_secs(at: DateTime<Utc>) -> i64 {
    at.timestamp()
}

impl Client {
    /// `Resque.enqueue_at_with_queue(queue, at, class, *args)`: files the job in the delayed
    /// set, or enqueues it now when `at` (in whole seconds) is not after now.
    pub async fn enqueue_at(
        &self,
        queue: &str,
        at: DateTime<Utc>,
        class: &str,
        args: &[Value],
    ) -> Result<Scheduled> {
        validate(queue, class)?;
        let due = std::sync::Mutex::new(None);
        let job = crate::middleware::Outgoing {
            queue: queue.to_string(),
            class: class.to_string(),
            args: args.to_vec(),
            extra: Map::new(),
            at: Some(at),
            track: None,
            shard_key: None,
        };
        // What the chain finally wrote decides the answer (a layer may move the due time).
        let written = self
            .dispatch_seen(job, |j| {
                *due.lock().unwrap_or_else(|p| p.into_inner()) = j.at.map(epoch_secs)
            })
            .await?;
        if !written {
            return Ok(Scheduled::Dropped);
        }
        let ts = due.into_inner().unwrap_or_else(|p| p.into_inner());
        Ok(match ts {
            Some(ts) if ts > epoch_secs(Utc::now()) => Scheduled::Delayed(ts),
            _ => Scheduled::Now,
        })
    }

    /// `Resque.enqueue_in_with_queue(queue, delay, class, *args)`.
    pub async fn enqueue_in(
        &self,
        queue: &str,
        delay: Duration,
        class: &str,
        args: &[Value],
    ) -> Result<Scheduled> {
        let at = crate::wire::time::after_now(delay)?;
        self.enqueue_at(queue, at, class, args).await
    }

    /// Files an item due at `ts` whatever the time (resque-scheduler's `delayed_push`).
    pub async fn delayed_push(
        &self,
        ts: i64,
        queue: &str,
        class: &str,
        args: &[Value],
    ) -> Result<()> {
        validate(queue, class)?;
        let item = encode::scheduler_item(queue, class, args, &Map::new(), self.float_format);
        self.delayed_push_raw(ts, &item).await
    }

    /// Files an already-encoded item due at `ts`.
    pub async fn delayed_push_raw(&self, ts: i64, item: &str) -> Result<()> {
        if self.keys.is_spread() {
            return self.delayed_push_spread(ts, item).await;
        }
        crate::scripts::Checked::new()
            .rpush(&self.keys.delayed_bucket(ts), item)
            .sadd(&self.keys.timestamps(item), Keys::delayed_bucket_member(ts))
            .zadd(&self.keys.delayed_schedule(), ts, ts)
            .run(&mut self.con())
            .await?;
        Ok(())
    }

    /// [`Client::delayed_push_raw`] on a namespace spread over a Redis Cluster's slots
    /// ([`push_spread`]).
    async fn delayed_push_spread(&self, ts: i64, item: &str) -> Result<()> {
        push_spread(&mut self.con(), &self.keys, ts, item).await?;
        Ok(())
    }

    /// `Resque.remove_delayed_in_queue(class, queue, *args)`: removes every delayed copy of the
    /// byte-identical item and returns how many. The schedule zset is left for the scheduler to
    /// clean, as Ruby leaves it.
    pub async fn remove_delayed(&self, queue: &str, class: &str, args: &[Value]) -> Result<u64> {
        let item = encode::scheduler_item(queue, class, args, &Map::new(), self.float_format);
        self.remove_delayed_raw(&item).await
    }

    /// Removes every delayed copy of an encoded item (`SMEMBERS timestamps:<item>`, then `LREM`
    /// + `SREM` per bucket in one MULTI).
    pub async fn remove_delayed_raw(&self, item: &str) -> Result<u64> {
        let mut con = self.con();
        let ts_key = self.keys.timestamps(item);
        let members: Vec<String> = con.smembers(&ts_key).await?;
        if members.is_empty() {
            return Ok(0);
        }
        if self.keys.is_spread() {
            // The bucket and the reverse index are in different slots: each bucket's `LREM`
            // first, then its member (a crash between leaves a member naming a bucket without
            // the item, which the next removal drops, as Ruby's removal does).
            let mut removed = 0;
            for m in &members {
                if let Some(ts) = member_ts(m) {
                    let n: u64 = con.lrem(self.keys.delayed_bucket(ts), 0, item).await?;
                    removed += n;
                }
                let _: u64 = con.srem(&ts_key, m.as_str()).await?;
            }
            return Ok(removed);
        }
        let mut w = crate::scripts::Checked::new();
        let mut lrems = Vec::new();
        for m in &members {
            // A member that is not `delayed:<int>` names no bucket; it is only dropped.
            lrems.push(member_ts(m).is_some());
            if let Some(ts) = member_ts(m) {
                w.lrem(&self.keys.delayed_bucket(ts), 0, item);
            }
            w.srem(&ts_key, m.as_str());
        }
        let replies: Vec<u64> = w.query(&mut con).await?;
        // Replies alternate LREM (when there was a bucket) and SREM.
        let mut removed = 0;
        let mut r = replies.iter();
        for has_bucket in lrems {
            if has_bucket {
                removed += r.next().copied().unwrap_or(0);
            }
            r.next();
        }
        Ok(removed)
    }

    /// Timestamps (epoch seconds) of the delayed set from index `start`, earliest first
    /// (`delayed_queue_peek`).
    pub async fn delayed_queue_peek(&self, start: isize, count: isize) -> Result<Vec<i64>> {
        if count <= 0 {
            return Ok(Vec::new());
        }
        let v: Vec<String> = self
            .con()
            .zrange(self.keys.delayed_schedule(), start, start + count - 1)
            .await?;
        Ok(v.iter().filter_map(|s| s.parse().ok()).collect())
    }

    /// Number of timestamps in the delayed set (`delayed_queue_schedule_size`).
    pub async fn delayed_queue_schedule_size(&self) -> Result<u64> {
        Ok(self.con().zcard(self.keys.delayed_schedule()).await?)
    }

    /// Raw items due at `ts` from index `start` (`delayed_timestamp_peek`).
    pub async fn delayed_timestamp_peek(
        &self,
        ts: i64,
        start: isize,
        count: isize,
    ) -> Result<Vec<String>> {
        if count <= 0 {
            return Ok(Vec::new());
        }
        Ok(self
            .con()
            .lrange(self.keys.delayed_bucket(ts), start, start + count - 1)
            .await?)
    }

    /// Number of items due at `ts` (`delayed_timestamp_size`).
    pub async fn delayed_timestamp_size(&self, ts: i64) -> Result<u64> {
        Ok(self.con().llen(self.keys.delayed_bucket(ts)).await?)
    }

    /// Items in the whole delayed set (`count_all_scheduled_jobs`).
    pub async fn count_all_scheduled_jobs(&self) -> Result<u64> {
        let all = self.delayed_queue_peek(0, isize::MAX).await?;
        if all.is_empty() {
            return Ok(0);
        }
        let mut pipe = redis::pipe();
        for ts in &all {
            pipe.llen(self.keys.delayed_bucket(*ts));
        }
        let sizes: Vec<u64> = pipe.query_async(&mut self.con()).await?;
        Ok(sizes.iter().sum())
    }

    /// When the item for (`queue`, `class`, `args`) is due, one entry per bucket holding it
    /// (`scheduled_at`).
    pub async fn scheduled_at(&self, queue: &str, class: &str, args: &[Value]) -> Result<Vec<i64>> {
        let item = encode::scheduler_item(queue, class, args, &Map::new(), self.float_format);
        let members: Vec<String> = self.con().smembers(self.keys.timestamps(&item)).await?;
        let mut v: Vec<i64> = members.iter().filter_map(|m| member_ts(m)).collect();
        v.sort_unstable();
        Ok(v)
    }
}

/// The `<ts>` of a `delayed:<ts>` member.
fn member_ts(member: &str) -> Option<i64> {
    member.strip_prefix("delayed:")?.parse().ok()
}

/// Files `item` in resque-scheduler's delayed set, due at `ts`, on a namespace spread over a
/// Redis Cluster's slots (docs/cluster.md), where its three keys are in three slots: the same
/// three writes as one server's step, one command each — the reverse index first, then the
/// bucket, the zset last. The zset makes the bucket visible to the scheduler, whose mover
/// removes an emptied bucket's member only after reading the bucket again; the reverse index
/// goes first so that a mover that takes the item has its member to remove (after the bucket,
/// a mover taking the item between the two would leave the member behind for good). A crash
/// or an error between them leaves, at worst, a reverse-index member naming a bucket without
/// the item (dropped by the next removal of that item, as Ruby's removal drops it), or an item
/// no scheduler sees yet (the call failed, so the caller knows it is not scheduled), which
/// runs with the next item scheduled for the same second. Every spread delayed write (the
/// `Client`'s, a retry's) goes through here.
pub(crate) async fn push_spread<C: redis::aio::ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    ts: i64,
    item: &str,
) -> redis::RedisResult<()> {
    let _: i64 = redis::cmd("SADD")
        .arg(keys.timestamps(item))
        .arg(Keys::delayed_bucket_member(ts))
        .query_async(con)
        .await?;
    let _: i64 = redis::cmd("RPUSH")
        .arg(keys.delayed_bucket(ts))
        .arg(item)
        .query_async(con)
        .await?;
    let _: i64 = redis::cmd("ZADD")
        .arg(keys.delayed_schedule())
        .arg(ts)
        .arg(ts)
        .query_async(con)
        .await?;
    Ok(())
}
