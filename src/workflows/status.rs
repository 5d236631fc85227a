//! A batch as it stands ([`BatchStatus`]), listed newest first, and what holds one up
//! ([`BatchReport`]): its members that have not ended, and whether a worker of another runtime
//! ran one (Ruby, Java and Node workers run members but do not count them).

use super::BatchId;
use crate::admin::Admin;
use crate::error::Result;
use crate::jobs::JobId;
use chrono::{DateTime, Utc};
use serde::Serialize;

/// A batch's counts and times.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchStatus {
    /// Its id.
    pub id: BatchId,
    /// `open` (visible), or `staging` (its creator has not made it visible: it died midway).
    pub state: String,
    /// What it is for.
    pub description: Option<String>,
    /// Members (a child batch counts as one).
    pub total: u64,
    /// Members not attempted yet.
    pub pending: u64,
    /// Members that completed.
    pub succeeded: u64,
    /// Members that failed for good (or were killed or cancelled).
    pub failed: u64,
    /// The batch it is a member of.
    pub parent: Option<BatchId>,
    /// The callbacks' queue.
    pub queue: Option<String>,
    /// When it was created.
    pub created_at: Option<DateTime<Utc>>,
    /// When every member had been attempted (`on_complete`).
    pub complete_at: Option<DateTime<Utc>>,
    /// When every member had completed (`on_success`).
    pub success_at: Option<DateTime<Utc>>,
    /// When the first member failed for good (`on_death`).
    pub death_at: Option<DateTime<Utc>>,
    /// What could not be read — a count that is no count (`pending = "x"`), a key of another
    /// type (the batch's own, in a listing: its state is then `unreadable`) — each naming what
    /// it found. Counts that cannot be read show as 0.
    pub unreadable: Vec<String>,
}

impl BatchStatus {
    /// Reads a batch's hash fields (any bytes: what does not read is left out).
    pub(super) fn from_fields(id: BatchId, f: &[(String, Vec<u8>)]) -> BatchStatus {
        let get = |k: &str| {
            f.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        };
        let num = |k: &str| {
            get(k)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .map_or(0, |n| u64::try_from(n).unwrap_or(0))
        };
        let at = |k: &str| {
            get(k)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .and_then(DateTime::from_timestamp_millis)
        };
        let total = num("total");
        let unreadable = ["total", "pending", "unsucceeded", "failed"]
            .iter()
            .filter_map(|k| {
                let v = get(k)?;
                let ok = v.trim().parse::<i64>().is_ok_and(|n| n >= 0);
                (!ok).then(|| format!("{k} = {v:?}"))
            })
            .collect();
        BatchStatus {
            id,
            state: get("state").unwrap_or_else(|| "open".into()),
            description: get("description"),
            total,
            pending: num("pending"),
            succeeded: total.saturating_sub(num("unsucceeded")),
            failed: num("failed"),
            parent: get("parent").and_then(|p| BatchId::parse(&p)),
            queue: get("queue"),
            created_at: at("created_at"),
            complete_at: at("complete_at"),
            success_at: at("success_at"),
            death_at: at("death_at"),
            unreadable,
        }
    }

    /// A batch whose hash cannot be read (`why` names the key and what it holds).
    pub(super) fn unreadable(id: BatchId, why: String) -> BatchStatus {
        BatchStatus {
            id,
            state: "unreadable".into(),
            description: None,
            total: 0,
            pending: 0,
            succeeded: 0,
            failed: 0,
            parent: None,
            queue: None,
            created_at: None,
            complete_at: None,
            success_at: None,
            death_at: None,
            unreadable: vec![why],
        }
    }
}

/// What holds a batch up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchReport {
    /// The batch.
    pub status: BatchStatus,
    /// Members that have not ended, by state (`queued`, `working`, `waiting`, …), with up to
    /// ten ids each (a member whose record is gone ended: records expire only once ended).
    pub unfinished: Vec<(String, u64, Vec<JobId>)>,
    /// Members whose record says `queued` but whose job is no longer in its queue (nor held by
    /// a flow-control limit): a worker of another runtime (which does not count a batch's
    /// members) ran them, or someone removed them. While any is, the batch cannot complete.
    pub gone: Vec<JobId>,
    /// Workers of another runtime that poll a queue of the batch's unfinished members.
    pub foreign_workers: Vec<String>,
    /// Whether the report looked at every member (a batch of more than 10,000 is sampled).
    pub complete: bool,
}

/// Members looked at by a report.
const REPORT_MEMBERS: usize = 10_000;

/// Queue entries a report scans to find its queued members, over all their queues.
const REPORT_SCAN: usize = 100_000;

/// The `resq_id` a payload carries, if any (found by its text: no JSON parse per entry).
fn resq_id(payload: &[u8]) -> Option<&[u8]> {
    const NEEDLE: &[u8] = b"\"resq_id\":\"";
    let at = memchr::memmem::find(payload, NEEDLE)? + NEEDLE.len();
    let rest = &payload[at..];
    let end = memchr::memchr(b'"', rest)?;
    Some(&rest[..end])
}

impl Admin {
    /// Batch `id` as it stands (`None`: there is none).
    pub async fn batch(&self, id: &BatchId) -> Result<Option<BatchStatus>> {
        let mut con = self.con();
        let f: Vec<(String, Vec<u8>)> = redis::cmd("HGETALL")
            .arg(self.keys().batch(id.as_str()))
            .query_async(&mut con)
            .await?;
        if f.is_empty() {
            return Ok(None);
        }
        Ok(Some(BatchStatus::from_fields(id.clone(), &f)))
    }

    /// Batches, newest first, from `offset`: up to `limit`, and how many there are.
    pub async fn batches(&self, offset: usize, limit: usize) -> Result<(Vec<BatchStatus>, u64)> {
        let mut con = self.con();
        let keys = self.keys();
        let total: u64 = redis::cmd("ZCARD")
            .arg(keys.batches())
            .query_async(&mut con)
            .await?;
        if limit == 0 {
            return Ok((Vec::new(), total));
        }
        let ids: Vec<Vec<u8>> = redis::cmd("ZREVRANGE")
            .arg(keys.batches())
            .arg(offset)
            .arg(offset + limit - 1)
            .query_async(&mut con)
            .await?;
        let ids = crate::admin::names::decode(&keys.batches(), ids);
        let ids: Vec<BatchId> = ids.iter().filter_map(|i| BatchId::parse(i)).collect();
        let mut pipe = redis::pipe();
        // An error reply is a value here, so one unreadable batch does not fail the page.
        pipe.ignore_errors();
        for id in &ids {
            pipe.cmd("HGETALL").arg(keys.batch(id.as_str()));
        }
        let all: Vec<redis::Value> = pipe.query_async(&mut con).await?;
        let mut out = Vec::new();
        for (id, v) in ids.into_iter().zip(all) {
            // A batch key of another type is listed as unreadable, naming it: not an error for
            // the page, not left out silently.
            match redis::from_redis_value::<Vec<(String, Vec<u8>)>>(v) {
                Ok(f) if f.is_empty() => {}
                Ok(f) => out.push(BatchStatus::from_fields(id, &f)),
                Err(e) => {
                    let why = format!("{}: {e}", keys.batch(id.as_str()));
                    out.push(BatchStatus::unreadable(id, why));
                }
            }
        }
        Ok((out, total))
    }

    /// What holds batch `id` up (`None`: there is none).
    pub async fn batch_report(&self, id: &BatchId) -> Result<Option<BatchReport>> {
        let Some(mut status) = self.batch(id).await? else {
            return Ok(None);
        };
        let keys = self.keys();
        let mut con = self.con();
        // A member set of another type: the batch's hash is still shown, the key named.
        let members: Vec<String> = match redis::cmd("SRANDMEMBER")
            .arg(keys.batch_jobs(id.as_str()))
            .arg(REPORT_MEMBERS + 1)
            .query_async::<Vec<Vec<u8>>>(&mut con)
            .await
        {
            Ok(m) => crate::admin::names::decode(&keys.batch_jobs(id.as_str()), m),
            Err(e)
                if crate::conn::errors::classify(&e) == crate::conn::errors::Class::Permanent =>
            {
                status
                    .unreadable
                    .push(format!("{}: {e}", keys.batch_jobs(id.as_str())));
                Vec::new()
            }
            Err(e) => return Err(e.into()),
        };
        let complete = members.len() <= REPORT_MEMBERS;
        let members: Vec<JobId> = members
            .iter()
            .take(REPORT_MEMBERS)
            .filter_map(|m| JobId::parse(m))
            .collect();
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for m in &members {
            pipe.cmd("HMGET")
                .arg(keys.job_record(m.as_str()))
                .arg("state")
                .arg("queue");
        }
        let rows: Vec<redis::Value> = if members.is_empty() {
            Vec::new()
        } else {
            pipe.query_async(&mut con).await?
        };
        let mut by_state: std::collections::BTreeMap<String, (u64, Vec<JobId>)> =
            Default::default();
        let mut queued: std::collections::BTreeMap<String, Vec<JobId>> = Default::default();
        for (m, row) in members.iter().zip(rows) {
            let Ok((state, queue)) =
                redis::from_redis_value::<(Option<String>, Option<String>)>(row)
            else {
                continue;
            };
            // No record: it ended and its record expired (or was purged); a record is made
            // with the job and given a TTL only once the job has ended.
            let Some(state) = state else {
                continue;
            };
            if ["completed", "failed", "killed", "cancelled"].contains(&state.as_str()) {
                continue;
            }
            let e = by_state.entry(state.clone()).or_default();
            e.0 += 1;
            if e.1.len() < 10 {
                e.1.push(m.clone());
            }
            if state == "queued" {
                if let Some(q) = queue {
                    queued.entry(q).or_default().push(m.clone());
                }
            }
        }
        // Queued members not found in their queue: each queue read whole while the scan
        // budget (REPORT_SCAN entries over all queues) lasts; a queue longer than what is left
        // of it is not looked at (none of its members is called gone). One pass over each
        // queue's entries, then one lookup per member.
        let mut gone = Vec::new();
        let mut budget = REPORT_SCAN;
        for (q, ids) in &queued {
            let len: usize = redis::cmd("LLEN")
                .arg(keys.queue(q))
                .query_async(&mut con)
                .await
                .unwrap_or(usize::MAX);
            if len > budget {
                continue;
            }
            budget -= len;
            let items: Vec<Vec<u8>> = redis::cmd("LRANGE")
                .arg(keys.queue(q))
                .arg(0)
                .arg(len.saturating_sub(1))
                .query_async(&mut con)
                .await
                .unwrap_or_default();
            let present: std::collections::HashSet<&[u8]> =
                items.iter().filter_map(|i| resq_id(i)).collect();
            for id in ids {
                if !present.contains(id.as_str().as_bytes()) {
                    gone.push(id.clone());
                }
            }
        }
        // Not taken by a foreign worker: one a resq worker took meanwhile, one a limit holds.
        let gone = super::held::confirm_gone(&mut con, keys, gone).await;
        let workers = crate::admin::names::smembers(&mut con, &keys.workers())
            .await
            .unwrap_or_default();
        let unfinished_queues: Vec<&String> = queued.keys().collect();
        let foreign_workers = workers
            .into_iter()
            .filter(|w| !w.contains("~resq:"))
            .filter(|w| {
                let polls = w.splitn(3, ':').nth(2).unwrap_or("");
                polls.split(',').any(|x| {
                    unfinished_queues
                        .iter()
                        .any(|q| x == q.as_str() || crate::queues::fnmatch(x, q))
                })
            })
            .collect();
        Ok(Some(BatchReport {
            status,
            unfinished: by_state
                .into_iter()
                .map(|(s, (n, ids))| (s, n, ids))
                .collect(),
            gone,
            foreign_workers,
            complete,
        }))
    }
}
