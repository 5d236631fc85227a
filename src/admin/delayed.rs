//! Delayed jobs: resque-scheduler's (`<ns>:delayed_queue_schedule` + `<ns>:delayed:<ts>`
//! buckets, also node-resque's) and Jesque's delayed/recurring zset queues.

use super::{text, Admin};
use crate::error::Result;
use chrono::{DateTime, TimeZone, Utc};
use serde::Serialize;
use serde_json::Value;

/// Where a delayed item lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DelayedSource {
    /// A resque-scheduler bucket.
    Scheduler,
    /// A Jesque zset queue.
    Jesque,
}

/// One delayed item.
#[derive(Debug, Clone, Serialize)]
pub struct DelayedItem {
    /// When it is due.
    pub at: Option<DateTime<Utc>>,
    /// Where it lives.
    pub source: DelayedSource,
    /// The queue it will go to.
    pub queue: Option<String>,
    /// Its class.
    pub class: Option<String>,
    /// Its args.
    pub args: Value,
    /// For a Jesque recurring job: the period in seconds.
    pub every_s: Option<f64>,
    /// The item's text.
    pub raw: String,
}

/// A zset's `(member, score)` pairs and its `:frequency` hash `(member, ms)` pairs.
type ZsetAndPeriods = (Vec<(Vec<u8>, f64)>, Vec<(Vec<u8>, String)>);

impl Admin {
    /// Up to `limit` delayed items of each source, earliest first.
    pub async fn delayed(&self, limit: usize) -> Result<Vec<DelayedItem>> {
        let mut out = self.scheduler_items(limit).await?;
        out.extend(self.jesque_items(limit).await?);
        out.sort_by_key(|i| i.at);
        out.truncate(limit);
        Ok(out)
    }

    async fn scheduler_items(&self, limit: usize) -> Result<Vec<DelayedItem>> {
        let mut con = self.con();
        let k = self.keys();
        let stamps: Vec<String> = redis::cmd("ZRANGE")
            .arg(k.delayed_schedule())
            .arg(0)
            .arg(limit.saturating_sub(1))
            .query_async(&mut con)
            .await?;
        let stamps: Vec<i64> = stamps.iter().filter_map(|s| s.parse().ok()).collect();
        if stamps.is_empty() {
            return Ok(Vec::new());
        }
        let mut p = redis::pipe();
        for ts in &stamps {
            p.cmd("LRANGE").arg(k.delayed_bucket(*ts)).arg(0).arg(limit);
        }
        let buckets: Vec<Vec<Vec<u8>>> = p.query_async(&mut con).await?;
        let mut out = Vec::new();
        for (ts, items) in stamps.iter().zip(buckets) {
            for raw in items {
                if out.len() >= limit {
                    return Ok(out);
                }
                let v: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
                out.push(DelayedItem {
                    at: Utc.timestamp_opt(*ts, 0).single(),
                    source: DelayedSource::Scheduler,
                    queue: v.get("queue").and_then(Value::as_str).map(str::to_string),
                    class: v.get("class").and_then(Value::as_str).map(str::to_string),
                    args: v.get("args").cloned().unwrap_or(Value::Null),
                    every_s: None,
                    raw: text(&raw),
                });
            }
        }
        Ok(out)
    }

    async fn jesque_items(&self, limit: usize) -> Result<Vec<DelayedItem>> {
        let mut con = self.con();
        let k = self.keys();
        let mut names = super::names::smembers(&mut con, &k.queues()).await?;
        names.sort();
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let mut p = redis::pipe();
        for n in &names {
            p.cmd("TYPE").arg(k.queue(n));
        }
        let types: Vec<String> = p.query_async(&mut con).await?;
        let mut out = Vec::new();
        for (name, t) in names.iter().zip(types) {
            if t != "zset" {
                continue;
            }
            let (members, freq): ZsetAndPeriods = redis::pipe()
                .cmd("ZRANGE")
                .arg(k.queue(name))
                .arg(0)
                .arg(limit.saturating_sub(1))
                .arg("WITHSCORES")
                .cmd("HGETALL")
                .arg(k.queue_frequency(name))
                .query_async(&mut con)
                .await?;
            for (raw, score) in members {
                let v: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
                let every_s = freq
                    .iter()
                    .find(|(m, _)| *m == raw)
                    .and_then(|(_, ms)| ms.trim().parse::<f64>().ok())
                    .map(|ms| ms / 1000.0);
                out.push(DelayedItem {
                    at: Utc.timestamp_millis_opt(score as i64).single(),
                    source: DelayedSource::Jesque,
                    queue: Some(name.clone()),
                    class: v.get("class").and_then(Value::as_str).map(str::to_string),
                    args: v.get("args").cloned().unwrap_or(Value::Null),
                    every_s,
                    raw: text(&raw),
                });
            }
        }
        Ok(out)
    }
}
