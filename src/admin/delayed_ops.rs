//! resque-scheduler's delayed items, page by page, with the names of the two things
//! resque-scheduler's web tab does to one ([`DelayedAction`]: run it now, or delete it; done by
//! `Admin::delayed_act`, defined with the scheduler in `crate::scheduler::admin`, as it builds
//! the job the way the scheduler does), and the names of the schedules some scheduler fired.
//!
//! Items live in `<ns>:delayed:<ts>` lists, their timestamps in `<ns>:delayed_queue_schedule`
//! and a reverse index in `<ns>:timestamps:<item>` (wire notes §9.1). An item is named by its
//! id ([`super::list_ids`]) and its bucket.

use super::list_ids::element_id;
use super::{text, Admin};
use crate::error::Result;
use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;

/// One delayed item.
#[derive(Debug, Clone)]
pub struct DelayedEntry {
    /// Index in its bucket when read.
    pub index: usize,
    /// Its id.
    pub id: String,
    /// Its text.
    pub raw: String,
    /// Class.
    pub class: Option<String>,
    /// Queue it will go to.
    pub queue: Option<String>,
    /// Args, compact JSON.
    pub args: Option<String>,
}

/// One timestamp of the schedule with (the first of) its items.
#[derive(Debug, Clone)]
pub struct DelayedBucket {
    /// The timestamp (epoch seconds).
    pub ts: i64,
    /// As a time.
    pub at: Option<DateTime<Utc>>,
    /// Items in the bucket.
    pub size: usize,
    /// The first items.
    pub items: Vec<DelayedEntry>,
}

/// A page of the delayed schedule.
#[derive(Debug, Clone)]
pub struct DelayedPage {
    /// Timestamps in the schedule.
    pub timestamps: usize,
    /// The page's first timestamp rank.
    pub offset: usize,
    /// Buckets, earliest first.
    pub buckets: Vec<DelayedBucket>,
}

/// What to do with a delayed item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelayedAction {
    /// Enqueue it now.
    RunNow,
    /// Delete it.
    Delete,
}

/// What an action on a delayed item did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// Done.
    Done,
    /// Not in its bucket any more (moved by the scheduler, or deleted).
    Gone,
}

impl Admin {
    /// Timestamps `offset .. offset + limit` of the schedule, each with its first `per_bucket`
    /// items (two round trips).
    pub async fn delayed_page(
        &self,
        offset: usize,
        limit: usize,
        per_bucket: usize,
    ) -> Result<DelayedPage> {
        let mut con = self.con();
        let k = self.keys();
        let (timestamps, stamps): (usize, Vec<String>) = redis::pipe()
            .zcard(k.delayed_schedule())
            .zrange(
                k.delayed_schedule(),
                offset as isize,
                (offset + limit.max(1) - 1) as isize,
            )
            .query_async(&mut con)
            .await?;
        let stamps: Vec<i64> = stamps.iter().filter_map(|s| s.parse().ok()).collect();
        let mut page = DelayedPage {
            timestamps,
            offset,
            buckets: Vec::new(),
        };
        if stamps.is_empty() {
            return Ok(page);
        }
        let mut p = redis::pipe();
        for ts in &stamps {
            let key = k.delayed_bucket(*ts);
            p.llen(&key).lrange(&key, 0, per_bucket.max(1) as isize - 1);
        }
        let replies: Vec<(usize, Vec<Vec<u8>>)> = {
            let flat: Vec<redis::Value> = p.query_async(&mut con).await?;
            let mut it = flat.into_iter();
            let mut v = Vec::new();
            while let (Some(a), Some(b)) = (it.next(), it.next()) {
                v.push((
                    redis::from_redis_value(a).unwrap_or(0),
                    redis::from_redis_value(b).unwrap_or_default(),
                ));
            }
            v
        };
        for (ts, (size, raws)) in stamps.into_iter().zip(replies) {
            page.buckets.push(DelayedBucket {
                ts,
                at: Utc.timestamp_opt(ts, 0).single(),
                size,
                items: raws
                    .iter()
                    .enumerate()
                    .map(|(i, raw)| entry(i, raw))
                    .collect(),
            });
        }
        Ok(page)
    }

    /// Names in `<ns>:delayed:last_enqueued_at` (schedules some scheduler fired, including
    /// static ones whose config lives only in a Ruby process), with the time.
    pub async fn last_enqueued(&self) -> Result<Vec<(String, String)>> {
        let mut con = self.con();
        let mut v: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(self.keys().last_enqueued_at())
            .query_async(&mut con)
            .await?;
        v.sort();
        Ok(v)
    }
}

/// A delayed item read from its bytes.
fn entry(index: usize, raw: &[u8]) -> DelayedEntry {
    let v: Option<Value> = serde_json::from_slice(raw).ok();
    let field = |name: &str| {
        v.as_ref()
            .and_then(|v| v.get(name))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    DelayedEntry {
        index,
        id: element_id(raw),
        raw: text(raw),
        class: field("class"),
        queue: field("queue"),
        args: v.as_ref().and_then(|v| v.get("args")).map(Value::to_string),
    }
}
