//! A batch as it stands ([`BatchStatus`]), listed newest first, and what holds one up
//! ([`BatchReport`]): its members that have not ended, and whether a worker of another runtime
//! ran one (Ruby, Java and Node workers run members but do not count them).

use super::BatchId;
use crate::admin::Admin;
use crate::error::Result;
use crate::jobs::JobId;
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};

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
    /// Every one found among the members read.
    pub gone: Vec<JobId>,
    /// Members whose record says `working` for a worker that is no longer registered (it died,
    /// or another runtime pruned it): nothing will end them. Every one found among the members
    /// read.
    pub orphaned: Vec<JobId>,
    /// Workers of another runtime that poll a queue of the batch's unfinished members.
    pub foreign_workers: Vec<String>,
    /// Whether the report read every member (`members_read` of `members_total`).
    pub complete: bool,
    /// Members in the batch's member set when it was read.
    pub members_total: u64,
    /// Members read (their records looked at): up to 100,000 a report.
    pub members_read: u64,
    /// Queued members that could not be looked for (their queue is longer than a report reads,
    /// or could not be read): neither found nor said gone.
    pub unchecked: u64,
    /// Where the member set's `SSCAN` stopped (0: it read to the end):
    /// [`Admin::batch_report_from`] goes on from it.
    pub next_cursor: u64,
}

/// Members a report reads at most (their records, a page of [`SCAN_PAGE`] a round trip).
const REPORT_MEMBERS: usize = 100_000;

/// Members asked of `SSCAN` per round trip.
const SCAN_PAGE: usize = 1000;

/// Queue entries a report reads at most (over every queue), to find its queued members.
const REPORT_SCAN: usize = 200_000;

/// Queue entries read per round trip.
const QUEUE_PAGE: usize = 10_000;

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

    /// What holds batch `id` up (`None`: there is none). Bounded: it reads up to 100,000
    /// members (by `SSCAN`, their records a page per round trip) and up to 200,000 queue
    /// entries, and says how many it read ([`BatchReport::members_read`],
    /// [`BatchReport::unchecked`]); every stuck member among those read is named.
    pub async fn batch_report(&self, id: &BatchId) -> Result<Option<BatchReport>> {
        self.batch_report_from(id, 0).await
    }

    /// What holds batch `id` up, of its members from `SSCAN` cursor `cursor` on (0: from the
    /// start): a report of a batch too large for one ([`BatchReport::next_cursor`] not 0) goes
    /// on this way, each part bounded as [`Admin::batch_report`] is.
    pub async fn batch_report_from(
        &self,
        id: &BatchId,
        cursor: u64,
    ) -> Result<Option<BatchReport>> {
        let Some(mut status) = self.batch(id).await? else {
            return Ok(None);
        };
        let keys = self.keys();
        let mut con = self.con();
        let set = keys.batch_jobs(id.as_str());
        // A member set of another type: the batch's hash is still shown, the key named.
        let permanent = |e: &redis::RedisError| {
            crate::conn::errors::classify(e) == crate::conn::errors::Class::Permanent
        };
        let members_total: u64 = match redis::cmd("SCARD").arg(&set).query_async(&mut con).await {
            Ok(n) => n,
            Err(e) if permanent(&e) => {
                status.unreadable.push(format!("{set}: {e}"));
                0
            }
            Err(e) => return Err(e.into()),
        };
        let mut seen: HashSet<String> = HashSet::new();
        let mut by_state: BTreeMap<String, (u64, Vec<JobId>)> = BTreeMap::new();
        let mut queued: BTreeMap<String, Vec<JobId>> = BTreeMap::new();
        let mut working: Vec<(JobId, String)> = Vec::new();
        let mut cursor = cursor;
        let started_at = cursor;
        let mut complete = true;
        if members_total > 0 {
            loop {
                if seen.len() >= REPORT_MEMBERS {
                    break;
                }
                let (next, page): (u64, Vec<Vec<u8>>) = match redis::cmd("SSCAN")
                    .arg(&set)
                    .arg(cursor)
                    .arg("COUNT")
                    .arg(SCAN_PAGE)
                    .query_async(&mut con)
                    .await
                {
                    Ok(r) => r,
                    Err(e) if permanent(&e) => {
                        status.unreadable.push(format!("{set}: {e}"));
                        complete = false;
                        cursor = 0;
                        break;
                    }
                    Err(e) => return Err(e.into()),
                };
                // (SSCAN may return a member twice.)
                let page: Vec<JobId> = crate::admin::names::decode(&set, page)
                    .into_iter()
                    .filter(|m| seen.insert(m.clone()))
                    .filter_map(|m| JobId::parse(&m))
                    .collect();
                self.report_page(&mut con, &page, &mut by_state, &mut queued, &mut working)
                    .await?;
                cursor = next;
                if cursor == 0 {
                    break;
                }
            }
        } else {
            cursor = 0;
        }
        let members_read = seen.len() as u64;
        let complete = complete && started_at == 0 && cursor == 0;
        drop(seen);
        // Queued members not found in their queue, nor held by a limit, nor taken meanwhile.
        let (gone, unchecked) = self.not_in_queues(&mut con, &queued).await;
        let gone = super::held::confirm_gone(&mut con, keys, gone).await;
        // Working members whose worker is not registered (and that still say working).
        let orphaned = super::held::confirm_orphaned(&mut con, keys, working).await;
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
            orphaned,
            foreign_workers,
            complete,
            members_total,
            members_read,
            unchecked,
            next_cursor: cursor,
        }))
    }

    /// One page of members: their records' state, queue and worker, counted by state; the
    /// queued ones by queue, the working ones with their worker.
    async fn report_page(
        &self,
        con: &mut crate::conn::Conn,
        page: &[JobId],
        by_state: &mut BTreeMap<String, (u64, Vec<JobId>)>,
        queued: &mut BTreeMap<String, Vec<JobId>>,
        working: &mut Vec<(JobId, String)>,
    ) -> Result<()> {
        if page.is_empty() {
            return Ok(());
        }
        let keys = self.keys();
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for m in page {
            pipe.cmd("HMGET")
                .arg(keys.job_record(m.as_str()))
                .arg("state")
                .arg("queue")
                .arg("worker");
        }
        let rows: Vec<redis::Value> = pipe.query_async(con).await?;
        for (m, row) in page.iter().zip(rows) {
            let Ok((state, queue, worker)) =
                redis::from_redis_value::<(Option<String>, Option<String>, Option<String>)>(row)
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
            match (state.as_str(), queue, worker) {
                ("queued", Some(q), _) => queued.entry(q).or_default().push(m.clone()),
                ("working", _, Some(w)) => working.push((m.clone(), w)),
                _ => {}
            }
        }
        Ok(())
    }

    /// Of the queued members, by queue, those not found in their queue (each queue read a page
    /// at a time, up to [`REPORT_SCAN`] entries over all), and how many could not be looked for.
    async fn not_in_queues(
        &self,
        con: &mut crate::conn::Conn,
        queued: &BTreeMap<String, Vec<JobId>>,
    ) -> (Vec<JobId>, u64) {
        let keys = self.keys();
        let mut budget = REPORT_SCAN;
        let mut gone = Vec::new();
        let mut unchecked = 0u64;
        for (q, ids) in queued {
            let mut left: HashSet<&str> = ids.iter().map(JobId::as_str).collect();
            let mut from = 0usize;
            let mut read_all = false;
            while !left.is_empty() && budget > 0 {
                let n = QUEUE_PAGE.min(budget);
                let items: Vec<Vec<u8>> = match redis::cmd("LRANGE")
                    .arg(keys.queue(q))
                    .arg(from)
                    .arg(from + n - 1)
                    .query_async(con)
                    .await
                {
                    Ok(v) => v,
                    Err(_) => break,
                };
                budget -= items.len().min(budget);
                from += items.len();
                for item in &items {
                    for found in super::held::resq_ids(item) {
                        left.remove(found);
                    }
                }
                if items.len() < n {
                    read_all = true;
                    break;
                }
            }
            if left.is_empty() {
                continue;
            }
            if read_all {
                gone.extend(ids.iter().filter(|i| left.contains(i.as_str())).cloned());
            } else {
                unchecked += left.len() as u64;
            }
        }
        (gone, unchecked)
    }
}

/// Members a discard removes per call (each call holds Redis for a few milliseconds at most).
const DISCARD_CHUNK: usize = 1000;

impl Admin {
    /// Removes batch `id` whose creation stopped before its commit (state `staging`: its
    /// members are in no queue and never run): its members' records, staged payloads, the batch
    /// and its entry in the list of batches, a thousand members per call; a parent batch stops
    /// counting it. Returns how many members were removed. Refused (nothing removed) for a
    /// batch that is not staging.
    pub async fn discard_batch(&self, id: &BatchId) -> Result<u64> {
        let keys = self.keys();
        let mut con = self.con();
        let mut removed = 0u64;
        loop {
            let (n, left): (u64, u64) = crate::scripts::BatchDiscard {
                batch: keys.batch(id.as_str()),
                jobs: keys.batch_jobs(id.as_str()),
                queues_staged: keys.batch_queues(id.as_str()),
                batches: keys.batches(),
                prefix: keys.prefix(),
                bid: id.as_str(),
                now_ms: chrono::Utc::now().timestamp_millis(),
                chunk: DISCARD_CHUNK,
            }
            .call()
            .invoke_async(&mut con)
            .await?;
            removed += n;
            if left == 0 {
                return Ok(removed);
            }
        }
    }
}
