//! What an operator looks through, a page at a time: a batch's members as they stand
//! ([`BatchMember`]), the jobs waiting for others ([`WaitingJob`]), and where a batch is in its
//! life ([`BatchStatus::phase`]). Every page is bounded: members by `SSCAN`, waiting jobs by
//! their index's range; a record that cannot be read is shown with what could be.

use super::{BatchId, BatchStatus};
use crate::admin::Admin;
use crate::error::Result;
use crate::jobs::JobId;
use chrono::{DateTime, Utc};
use redis::Value as RedisValue;
use serde::Serialize;

/// Dependencies listed per waiting job at most (with their states).
const DEPS_SHOWN: usize = 50;

impl BatchStatus {
    /// Where the batch is: `staging` (its creator has not made it visible), `running` (not
    /// every member attempted yet), `complete` (every member attempted, some retrying),
    /// `succeeded` (every member completed), `failed` (every member attempted, one or more
    /// failed for good), `unreadable` (its hash is of another type: see `unreadable`).
    pub fn phase(&self) -> &'static str {
        if self.state == "staging" {
            "staging"
        } else if self.state == "unreadable" {
            "unreadable"
        } else if self.success_at.is_some() {
            "succeeded"
        } else if self.complete_at.is_none() {
            "running"
        } else if self.failed > 0 {
            "failed"
        } else {
            "complete"
        }
    }
}

/// One member of a batch as it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchMember {
    /// A member job's id, or a child batch's id.
    pub id: String,
    /// Whether it is a child batch (counted as one member).
    pub child_batch: bool,
    /// A job's state as its record says, or a child batch's [`BatchStatus::phase`]; `None`
    /// when there is no record (expired or purged).
    pub state: Option<String>,
    /// Its class (a job).
    pub class: Option<String>,
    /// Its queue (a job).
    pub queue: Option<String>,
    /// Attempts started (a job).
    pub attempts: u64,
    /// Its last failure (a job).
    pub error: Option<String>,
    /// When it ended (a job).
    pub ended_at: Option<DateTime<Utc>>,
}

/// A job waiting for others ([`crate::jobs::Track::after`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WaitingJob {
    /// Its id.
    pub id: JobId,
    /// Its class.
    pub class: Option<String>,
    /// The queue it goes to once released.
    pub queue: Option<String>,
    /// When it was enqueued.
    pub since: Option<DateTime<Utc>>,
    /// Its dependencies (the first 50) and each one's state (`None`: no record any more).
    pub deps: Vec<(String, Option<String>)>,
    /// How many dependencies it has in all.
    pub deps_total: usize,
    /// How many have not ended, as its record counts them.
    pub deps_left: u64,
    /// What a dependency that did not complete means for it: `run`, `fail` or `cancel`.
    pub if_dep_failed: Option<String>,
    /// The first dependency that ended otherwise than completed.
    pub dep_failed: Option<String>,
    /// The batch it is a member of.
    pub batch: Option<String>,
    /// Whether its record still says `waiting` (one released meanwhile is shown as it was
    /// listed).
    pub still_waiting: bool,
}

/// Hash fields as text (anything that is not a hash reads as no field).
fn fields(v: RedisValue) -> Vec<(String, Vec<u8>)> {
    redis::from_redis_value(v).unwrap_or_default()
}

/// Field `k` of `f` as text.
fn get(f: &[(String, Vec<u8>)], k: &str) -> Option<String> {
    f.iter()
        .find(|(n, _)| n == k)
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
}

/// Field `k` of `f` as a time in epoch ms.
fn ms(f: &[(String, Vec<u8>)], k: &str) -> Option<DateTime<Utc>> {
    get(f, k)
        .and_then(|v| v.trim().parse::<f64>().ok())
        .and_then(|v| DateTime::from_timestamp_millis(v as i64))
}

impl Admin {
    /// Members of batch `id` from `SSCAN` cursor `cursor` (0 to start): about `count` of them
    /// (Redis's count is a hint), sorted by id, and the cursor to go on from (0: no more).
    pub async fn batch_members(
        &self,
        id: &BatchId,
        cursor: u64,
        count: usize,
    ) -> Result<(Vec<BatchMember>, u64)> {
        let keys = self.keys();
        let mut con = self.con();
        let (next, ids): (u64, Vec<Vec<u8>>) = redis::cmd("SSCAN")
            .arg(keys.batch_jobs(id.as_str()))
            .arg(cursor)
            .arg("COUNT")
            .arg(count.max(1))
            .query_async(&mut con)
            .await?;
        let mut ids = crate::admin::names::decode(&keys.batch_jobs(id.as_str()), ids);
        ids.sort();
        ids.dedup();
        if ids.is_empty() {
            return Ok((Vec::new(), next));
        }
        // A key of another type reads as no record (its error reply is a value here).
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for m in &ids {
            match m.strip_prefix('@') {
                Some(child) => pipe.cmd("HGETALL").arg(keys.batch(child)),
                None => pipe.cmd("HGETALL").arg(keys.job_record(m)),
            };
        }
        let rows: Vec<RedisValue> = pipe.query_async(&mut con).await?;
        let out = ids
            .into_iter()
            .zip(rows)
            .map(|(m, row)| {
                let f = fields(row);
                match m.strip_prefix('@') {
                    Some(child) => BatchMember {
                        state: BatchId::parse(child)
                            .filter(|_| !f.is_empty())
                            .map(|b| BatchStatus::from_fields(b, &f).phase().to_string()),
                        id: child.to_string(),
                        child_batch: true,
                        class: None,
                        queue: None,
                        attempts: 0,
                        error: None,
                        ended_at: None,
                    },
                    None => BatchMember {
                        state: get(&f, "state"),
                        class: get(&f, "class"),
                        queue: get(&f, "queue"),
                        attempts: get(&f, "attempts")
                            .and_then(|a| a.trim().parse().ok())
                            .unwrap_or(0),
                        error: get(&f, "error"),
                        ended_at: ms(&f, "ended_at"),
                        id: m,
                        child_batch: false,
                    },
                }
            })
            .collect();
        Ok((out, next))
    }

    /// Jobs waiting for others (`<ns>:resq:jobs:waiting`), longest waiting first, from
    /// `offset`: up to `limit`, each with its dependencies' states, and how many wait in all.
    pub async fn waiting_jobs(
        &self,
        offset: usize,
        limit: usize,
    ) -> Result<(Vec<WaitingJob>, u64)> {
        let keys = self.keys();
        let index = keys.job_state("waiting");
        let mut con = self.con();
        let total: u64 = redis::cmd("ZCARD")
            .arg(&index)
            .query_async(&mut con)
            .await?;
        if limit == 0 {
            return Ok((Vec::new(), total));
        }
        let listed: Vec<(Vec<u8>, f64)> = redis::cmd("ZRANGE")
            .arg(&index)
            .arg(offset)
            .arg(offset + limit - 1)
            .arg("WITHSCORES")
            .query_async(&mut con)
            .await?;
        let listed = crate::admin::names::decode_scored(&index, listed);
        let listed: Vec<(JobId, f64)> = listed
            .into_iter()
            .filter_map(|(id, at)| JobId::parse(&id).map(|id| (id, at)))
            .collect();
        if listed.is_empty() {
            return Ok((Vec::new(), total));
        }
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for (id, _) in &listed {
            pipe.cmd("HMGET").arg(keys.job_record(id.as_str())).arg(&[
                "state",
                "class",
                "queue",
                "deps",
                "deps_left",
                "if_dep_failed",
                "dep_failed",
                "batch",
            ]);
        }
        let rows: Vec<RedisValue> = pipe.query_async(&mut con).await?;
        let mut jobs = Vec::with_capacity(listed.len());
        for ((id, at), row) in listed.into_iter().zip(rows) {
            let v: Vec<Option<String>> = redis::from_redis_value(row).unwrap_or_default();
            let field = |i: usize| v.get(i).cloned().flatten().filter(|s| !s.is_empty());
            let deps: Vec<String> = field(3)
                .map(|d| d.split_whitespace().map(String::from).collect())
                .unwrap_or_default();
            jobs.push(WaitingJob {
                still_waiting: field(0).as_deref() == Some("waiting"),
                class: field(1),
                queue: field(2),
                since: DateTime::from_timestamp_millis(at as i64),
                deps_total: deps.len(),
                deps: deps
                    .into_iter()
                    .take(DEPS_SHOWN)
                    .map(|d| (d, None))
                    .collect(),
                deps_left: field(4).and_then(|n| n.trim().parse().ok()).unwrap_or(0),
                if_dep_failed: field(5),
                dep_failed: field(6),
                batch: field(7),
                id,
            });
        }
        // The dependencies' states, in one round trip.
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        let mut asked = 0;
        for j in &jobs {
            for (d, _) in &j.deps {
                pipe.cmd("HGET").arg(keys.job_record(d)).arg("state");
                asked += 1;
            }
        }
        if asked > 0 {
            let states: Vec<RedisValue> = pipe.query_async(&mut con).await?;
            let mut states = states.into_iter();
            for j in &mut jobs {
                for (_, s) in &mut j.deps {
                    *s = states
                        .next()
                        .and_then(|v| redis::from_redis_value::<Option<String>>(v).ok())
                        .flatten();
                }
            }
        }
        Ok((jobs, total))
    }
}
