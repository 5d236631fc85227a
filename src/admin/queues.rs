//! Queues: every member of `<ns>:queues` with its size and, where knowable, the age of its
//! oldest job.
//!
//! A Resque payload carries no enqueue time, so the age is known only when the head job says
//! it: a top-level `enqueued_at` (epoch seconds or a time text) or ActiveJob's
//! `args[0].enqueued_at`. A Jesque delayed queue is a ZSET scored by due time in epoch ms: its
//! size is the member count, `pending` the members already due, and the age the time since
//! its earliest member fell due.

use super::{secs_between, Admin};
use crate::error::Result;
use crate::wire::time;
use chrono::{DateTime, TimeZone, Utc};
use serde::Serialize;
use serde_json::Value;

/// What kind of key holds a queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueKind {
    /// A Resque list.
    List,
    /// A Jesque delayed/recurring zset.
    Zset,
    /// Listed in `<ns>:queues` but holding nothing.
    Empty,
    /// Some other type (named).
    Other(String),
}

/// One queue.
#[derive(Debug, Clone, Serialize)]
pub struct QueueInfo {
    /// Queue name.
    pub name: String,
    /// The key's type.
    pub kind: QueueKind,
    /// Jobs in it (list length or zset size).
    pub size: u64,
    /// For a zset: members already due.
    pub pending: Option<u64>,
    /// Seconds since the oldest job was enqueued (or fell due), when knowable.
    pub oldest_age_s: Option<f64>,
}

/// Queues read within a budget of names ([`Admin::queues_within`]).
#[derive(Debug, Clone, Default)]
#[cfg_attr(not(feature = "web"), allow(dead_code))]
pub(crate) struct QueueScan {
    /// The queues read, sorted by name.
    pub queues: Vec<QueueInfo>,
    /// Members of `<ns>:queues` in all.
    pub names: u64,
    /// Names looked at (read, or skipped by the pattern).
    pub examined: usize,
    /// Whether every name was looked at.
    pub complete: bool,
}

/// Names asked of `SSCAN` at a time.
const SCAN_COUNT: usize = 1_000;

impl Admin {
    /// Every queue in `<ns>:queues`, sorted by name.
    pub async fn queues(&self) -> Result<Vec<QueueInfo>> {
        let mut con = self.con();
        let names = super::names::smembers(&mut con, &self.keys().queues()).await?;
        self.queue_infos(names).await
    }

    /// The queues of `<ns>:queues` whose name contains `contains` (case-sensitive; all
    /// without), looking at about `max_names` names at most (`SSCAN`, 1,000 at a time): a page
    /// costs the same whether the set holds 500 names or 200,000 empty ones.
    pub(crate) async fn queues_within(
        &self,
        contains: Option<&str>,
        max_names: usize,
    ) -> Result<QueueScan> {
        let mut con = self.con();
        let key = self.keys().queues();
        let total: u64 = redis::cmd("SCARD").arg(&key).query_async(&mut con).await?;
        let pattern = contains.map(|c| {
            let mut p = String::from("*");
            for ch in c.chars() {
                if matches!(ch, '*' | '?' | '[' | ']' | '\\') {
                    p.push('\\');
                }
                p.push(ch);
            }
            p.push('*');
            p
        });
        let mut cursor = 0u64;
        let mut raw: Vec<Vec<u8>> = Vec::new();
        let mut examined = 0usize;
        loop {
            let mut c = redis::cmd("SSCAN");
            c.arg(&key).arg(cursor);
            if let Some(p) = &pattern {
                c.arg("MATCH").arg(p);
            }
            // (No more names asked for than the budget has room for.)
            let count = SCAN_COUNT.min(max_names.saturating_sub(examined).max(1));
            c.arg("COUNT").arg(count);
            let (next, mut got): (u64, Vec<Vec<u8>>) = c.query_async(&mut con).await?;
            examined += count;
            raw.append(&mut got);
            cursor = next;
            if cursor == 0 || examined >= max_names {
                break;
            }
        }
        let mut names = super::names::decode(&key, raw);
        names.sort();
        names.dedup();
        let complete = cursor == 0;
        Ok(QueueScan {
            queues: self.queue_infos(names).await?,
            names: total,
            examined: if complete {
                usize::try_from(total).unwrap_or(usize::MAX)
            } else {
                examined
            },
            complete,
        })
    }

    /// The queues named `names`: their kind, size and age, in two round trips.
    async fn queue_infos(&self, mut names: Vec<String>) -> Result<Vec<QueueInfo>> {
        let mut con = self.con();
        let now = self.now().await?;
        names.sort();
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let mut p = redis::pipe();
        for n in &names {
            p.cmd("TYPE").arg(self.keys().queue(n));
        }
        let types: Vec<String> = p.query_async(&mut con).await?;
        let now_ms = now.timestamp_millis();
        let mut p = redis::pipe();
        for (n, t) in names.iter().zip(&types) {
            let key = self.keys().queue(n);
            match t.as_str() {
                "list" => {
                    p.cmd("LLEN").arg(&key).cmd("LINDEX").arg(&key).arg(0);
                }
                "zset" => {
                    p.cmd("ZCARD").arg(&key);
                    p.cmd("ZCOUNT").arg(&key).arg(0).arg(now_ms);
                    p.cmd("ZRANGE").arg(&key).arg(0).arg(0).arg("WITHSCORES");
                }
                _ => {}
            }
        }
        let replies: Vec<redis::Value> = if types.iter().any(|t| t == "list" || t == "zset") {
            p.query_async(&mut con).await?
        } else {
            Vec::new()
        };
        let mut it = replies.into_iter();
        let mut out = Vec::with_capacity(names.len());
        for (name, t) in names.into_iter().zip(types) {
            let info = match t.as_str() {
                "list" => {
                    let size = as_u64(it.next());
                    let head = as_bytes(it.next());
                    let age = head
                        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                        .and_then(|v| enqueued_at(&v))
                        .map(|t| secs_between(t, now));
                    QueueInfo {
                        name,
                        kind: QueueKind::List,
                        size,
                        pending: None,
                        oldest_age_s: age,
                    }
                }
                "zset" => {
                    let size = as_u64(it.next());
                    let pending = as_u64(it.next());
                    let first_score = first_score(it.next());
                    let age = first_score
                        .filter(|ms| *ms <= now_ms as f64)
                        .and_then(|ms| Utc.timestamp_millis_opt(ms as i64).single())
                        .map(|t| secs_between(t, now));
                    QueueInfo {
                        name,
                        kind: QueueKind::Zset,
                        size,
                        pending: Some(pending),
                        oldest_age_s: age,
                    }
                }
                "none" => QueueInfo {
                    name,
                    kind: QueueKind::Empty,
                    size: 0,
                    pending: None,
                    oldest_age_s: None,
                },
                other => QueueInfo {
                    name,
                    kind: QueueKind::Other(other.to_string()),
                    size: 0,
                    pending: None,
                    oldest_age_s: None,
                },
            };
            out.push(info);
        }
        Ok(out)
    }
}

/// When a payload says it was enqueued: top-level `enqueued_at` or ActiveJob's
/// `args[0].enqueued_at`.
pub(crate) fn enqueued_at(payload: &Value) -> Option<DateTime<Utc>> {
    let direct = payload.get("enqueued_at");
    let activejob = payload
        .get("args")
        .and_then(|a| a.get(0))
        .and_then(|a| a.get("enqueued_at"));
    direct.or(activejob).and_then(time_value)
}

/// A time written as a JSON number (epoch seconds, fractional allowed, or ms) or text.
fn time_value(v: &Value) -> Option<DateTime<Utc>> {
    match v {
        Value::String(s) => time::parse_any(s),
        Value::Number(n) => {
            let f = n.as_f64()?;
            let ms = if f > 100_000_000_000.0 { f } else { f * 1000.0 };
            Utc.timestamp_millis_opt(ms as i64).single()
        }
        _ => None,
    }
}

fn as_u64(v: Option<redis::Value>) -> u64 {
    match v {
        Some(redis::Value::Int(n)) => u64::try_from(n).unwrap_or(0),
        _ => 0,
    }
}

fn as_bytes(v: Option<redis::Value>) -> Option<Vec<u8>> {
    match v {
        Some(redis::Value::BulkString(b)) => Some(b),
        _ => None,
    }
}

/// The score of a one-member `ZRANGE … WITHSCORES` reply (RESP2 flat or RESP3 pairs).
fn first_score(v: Option<redis::Value>) -> Option<f64> {
    let redis::Value::Array(items) = v? else {
        return None;
    };
    let score = match items.get(1) {
        Some(s) => s.clone(),
        None => match items.first() {
            Some(redis::Value::Array(pair)) => pair.get(1)?.clone(),
            _ => return None,
        },
    };
    match score {
        redis::Value::BulkString(b) => std::str::from_utf8(&b).ok()?.parse().ok(),
        redis::Value::Double(d) => Some(d),
        redis::Value::Int(n) => Some(n as f64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn enqueued_at_from_sidekiq_style_and_activejob() {
        let t = enqueued_at(&json!({"class":"A","args":[],"enqueued_at":1795288533.5})).unwrap();
        assert_eq!(t.timestamp_millis(), 1_795_288_533_500);
        let aj = json!({"class":"ActiveJob::QueueAdapters::ResqueAdapter::JobWrapper",
            "args":[{"job_class":"X","enqueued_at":"2026-11-21T19:15:33.123456789Z"}]});
        assert_eq!(enqueued_at(&aj).unwrap().timestamp(), 1_795_288_533);
        assert!(enqueued_at(&json!({"class":"A","args":[1]})).is_none());
    }
}
