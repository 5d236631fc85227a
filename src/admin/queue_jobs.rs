//! The jobs inside one queue: a page of them, and the repairs resque-web lacks — delete one job
//! by its exact bytes, clear a queue, remove a queue (resque-web's `Resque.remove_queue`).
//!
//! A Resque queue is a list; a Jesque delayed or recurring queue is a zset scored by due time
//! in epoch milliseconds (its `:frequency` hash holds the period of recurring members). Jobs
//! are named by their id ([`super::list_ids`]) with their index as a hint; deleting is
//! `LREM key 1 <bytes>` (or `ZREM`), so it removes those bytes or nothing, wherever they
//! moved meanwhile.

use super::list_ids::{self, element_id};
use super::queues::enqueued_at;
use super::{text, Admin};
use crate::error::Result;
use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;

/// How far below its last index a queued job is looked for (workers pop from the head).
pub(crate) const LOCATE_BELOW: usize = 20_000;
/// How far above.
pub(crate) const LOCATE_ABOVE: usize = 200;
/// How far below its last rank a Jesque zset member is looked for.
pub(crate) const ZSET_BELOW: usize = 2_000;

/// One job in a queue.
#[derive(Debug, Clone)]
pub struct QueuedJob {
    /// Index (list) or rank by due time (zset) when read.
    pub index: usize,
    /// Its id.
    pub id: String,
    /// Its bytes as text (invalid UTF-8 replaced).
    pub raw: String,
    /// Payload class.
    pub class: Option<String>,
    /// Args, compact JSON.
    pub args: Option<String>,
    /// When it was enqueued, if the payload says.
    pub enqueued_at: Option<DateTime<Utc>>,
    /// For a zset member: when it is due.
    pub due: Option<DateTime<Utc>>,
    /// For a recurring Jesque member: the period in seconds.
    pub every_s: Option<f64>,
}

/// A page of a queue.
#[derive(Debug, Clone)]
pub struct QueuePage {
    /// The key's type (`list`, `zset`, `none`, or another).
    pub kind: String,
    /// Jobs in the queue.
    pub size: usize,
    /// The page's first index.
    pub offset: usize,
    /// The jobs.
    pub jobs: Vec<QueuedJob>,
}

/// What deleting a job did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleted {
    /// Removed.
    Done,
    /// Not found where it was seen (taken by a worker, or deleted).
    Gone,
}

impl Admin {
    /// Jobs `offset .. offset + limit` of queue `name` (read atomically with its size).
    pub async fn queue_page(&self, name: &str, offset: usize, limit: usize) -> Result<QueuePage> {
        let mut con = self.con();
        let key = self.keys().queue(name);
        let kind: String = redis::cmd("TYPE").arg(&key).query_async(&mut con).await?;
        let last = offset + limit.max(1) - 1;
        let mut page = QueuePage {
            kind: kind.clone(),
            size: 0,
            offset,
            jobs: Vec::new(),
        };
        match kind.as_str() {
            "list" => {
                let (size, raws): (usize, Vec<Vec<u8>>) = redis::pipe()
                    .atomic()
                    .llen(&key)
                    .lrange(&key, offset as isize, last as isize)
                    .query_async(&mut con)
                    .await?;
                page.size = size;
                page.jobs = raws
                    .iter()
                    .enumerate()
                    .map(|(k, raw)| job(offset + k, raw, None, None))
                    .collect();
            }
            "zset" => {
                let (size, members): (usize, Vec<(Vec<u8>, f64)>) = redis::pipe()
                    .atomic()
                    .zcard(&key)
                    .zrange_withscores(&key, offset as isize, last as isize)
                    .query_async(&mut con)
                    .await?;
                let periods: Vec<Option<String>> = if members.is_empty() {
                    Vec::new()
                } else {
                    let mut cmd = redis::cmd("HMGET");
                    cmd.arg(self.keys().queue_frequency(name));
                    for (m, _) in &members {
                        cmd.arg(m.as_slice());
                    }
                    cmd.query_async(&mut con).await?
                };
                page.size = size;
                page.jobs = members
                    .iter()
                    .enumerate()
                    .map(|(k, (raw, score))| {
                        let every = periods
                            .get(k)
                            .cloned()
                            .flatten()
                            .and_then(|ms| ms.trim().parse::<f64>().ok())
                            .map(|ms| ms / 1000.0);
                        job(offset + k, raw, Some(*score), every)
                    })
                    .collect();
            }
            _ => {}
        }
        Ok(page)
    }

    /// Deletes the job with id `id` from queue `name`, looked for from index `hint`.
    pub async fn delete_queued_job(&self, name: &str, id: &str, hint: usize) -> Result<Deleted> {
        let mut con = self.con();
        let key = self.keys().queue(name);
        let kind: String = redis::cmd("TYPE").arg(&key).query_async(&mut con).await?;
        let bytes = match kind.as_str() {
            "list" => list_ids::locate(&mut con, &key, id, hint, LOCATE_BELOW, LOCATE_ABOVE)
                .await?
                .map(|l| l.bytes),
            "zset" => self.find_member(&key, id, hint).await?,
            _ => None,
        };
        let Some(bytes) = bytes else {
            return Ok(Deleted::Gone);
        };
        let removed: i64 = if kind == "list" {
            redis::cmd("LREM")
                .arg(&key)
                .arg(1)
                .arg(bytes.as_slice())
                .query_async(&mut con)
                .await?
        } else {
            let (n,): (i64,) = redis::pipe()
                .atomic()
                .zrem(&key, bytes.as_slice())
                .hdel(self.keys().queue_frequency(name), bytes.as_slice())
                .ignore()
                .query_async(&mut con)
                .await?;
            n
        };
        Ok(if removed > 0 {
            Deleted::Done
        } else {
            Deleted::Gone
        })
    }

    /// Makes the Jesque delayed member with id `id` of queue `name` due now (`ZADD XX` with
    /// the current time in ms): the next Jesque or resq pop takes it.
    pub async fn run_zset_member_now(&self, name: &str, id: &str, hint: usize) -> Result<Deleted> {
        let key = self.keys().queue(name);
        let Some(bytes) = self.find_member(&key, id, hint).await? else {
            return Ok(Deleted::Gone);
        };
        let now = self.now().await?.timestamp_millis();
        let mut con = self.con();
        let changed: i64 = redis::cmd("ZADD")
            .arg(&key)
            .arg("XX")
            .arg("CH")
            .arg(now)
            .arg(bytes.as_slice())
            .query_async(&mut con)
            .await?;
        let exists: bool = redis::cmd("ZSCORE")
            .arg(&key)
            .arg(bytes.as_slice())
            .query_async::<Option<f64>>(&mut con)
            .await?
            .is_some();
        Ok(if changed > 0 || exists {
            Deleted::Done
        } else {
            Deleted::Gone
        })
    }

    /// Deletes every job of queue `name` (`DEL`); it stays listed in `<ns>:queues`. Returns
    /// how many jobs it held.
    pub async fn clear_queue(&self, name: &str) -> Result<u64> {
        self.drop_queue(name, false).await
    }

    /// resque-web's "remove queue" (`Resque.remove_queue`): `SREM <ns>:queues` and `DEL` its
    /// key. Returns how many jobs it held.
    pub async fn remove_queue(&self, name: &str) -> Result<u64> {
        self.drop_queue(name, true).await
    }

    async fn drop_queue(&self, name: &str, unlist: bool) -> Result<u64> {
        let mut con = self.con();
        let key = self.keys().queue(name);
        let kind: String = redis::cmd("TYPE").arg(&key).query_async(&mut con).await?;
        if !matches!(kind.as_str(), "list" | "zset" | "none") {
            // Another type: refuse rather than delete something that is not a queue.
            return Err(crate::error::Error::Rejected(format!(
                "queue {name:?} is held in a {kind}, not a list or zset: left alone"
            )));
        }
        if self.keys().is_spread() && unlist {
            // The list and `<ns>:queues` are in different slots: the size, then Ruby's
            // `remove_queue` order (`SREM`, then `DEL`), each a single-slot command (a job
            // pushed between the size and the `DEL` goes uncounted).
            let n: u64 = match kind.as_str() {
                "zset" => redis::cmd("ZCARD"),
                _ => redis::cmd("LLEN"),
            }
            .arg(&key)
            .query_async(&mut con)
            .await?;
            let _: i64 = redis::cmd("SREM")
                .arg(self.keys().queues())
                .arg(name)
                .query_async(&mut con)
                .await?;
            let _: i64 = redis::cmd("DEL").arg(&key).query_async(&mut con).await?;
            return Ok(n);
        }
        let mut p = redis::pipe();
        p.atomic();
        match kind.as_str() {
            "zset" => p.zcard(&key),
            _ => p.llen(&key),
        };
        if unlist {
            p.srem(self.keys().queues(), name).ignore();
        }
        p.del(&key).ignore();
        let (n,): (u64,) = p.query_async(&mut con).await?;
        Ok(n)
    }

    /// The zset member with id `id`, looked for at rank `hint` and around it.
    async fn find_member(&self, key: &str, id: &str, hint: usize) -> Result<Option<Vec<u8>>> {
        let mut con = self.con();
        let lo = hint.saturating_sub(ZSET_BELOW);
        let hi = hint + LOCATE_ABOVE;
        let members: Vec<Vec<u8>> = redis::cmd("ZRANGE")
            .arg(key)
            .arg(lo)
            .arg(hi)
            .query_async(&mut con)
            .await?;
        Ok(members.into_iter().find(|m| element_id(m) == id))
    }
}

/// A queued job read from its bytes.
fn job(index: usize, raw: &[u8], score: Option<f64>, every_s: Option<f64>) -> QueuedJob {
    let v: Option<Value> = serde_json::from_slice(raw).ok();
    QueuedJob {
        index,
        id: element_id(raw),
        raw: text(raw),
        class: v
            .as_ref()
            .and_then(|v| v.get("class"))
            .and_then(Value::as_str)
            .map(str::to_string),
        args: v.as_ref().and_then(|v| v.get("args")).map(Value::to_string),
        enqueued_at: v.as_ref().and_then(enqueued_at),
        due: score.and_then(|ms| Utc.timestamp_millis_opt(ms as i64).single()),
        every_s,
    }
}
