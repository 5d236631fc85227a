//! The failure list (`<ns>:failed`): list, show, retry, remove, clear — Ruby's semantics,
//! made safe against a list that changes while we work on it.
//!
//! * retry (Ruby `Failure.requeue`): read the entry, add `retried_at` (in `failed_at`'s
//!   format), write it back in place with `LSET`, and enqueue `{"class","args"}` on the
//!   entry's `queue` (`SADD` + `RPUSH`); other payload fields are dropped, as Ruby drops them.
//! * remove (Ruby `Failure.remove`): `LSET` the entry to a unique sentinel, `LREM` it.
//! * clear (Ruby `Failure.clear` is `DEL`): `LTRIM` away the entries present when the command
//!   started, so a failure pushed meanwhile survives.
//!
//! Each change is a Lua script that checks the entry's bytes at its index and finds it again
//! by bytes when something moved it, so concurrent pushes (the common case: workers appending)
//! and concurrent removals never make us touch the wrong entry. Bulk operations walk the list
//! in chunks of [`CHUNK`] (one round trip per chunk to read, one per entry to retry, one
//! per chunk to remove).

use super::{text, Admin};
use crate::error::{Error, Result};
use crate::wire::failure::FailureEntry;
use crate::wire::{payload, time};
use serde::Serialize;
use serde_json::{Map, Value};

/// Entries read per round trip in bulk operations.
pub(crate) const CHUNK: usize = 500;

/// Which entries an operation applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// The entry at this index now.
    Index(usize),
    /// Every entry whose payload class is this.
    Class(String),
    /// Every entry that has been retried (resque-web's "clear retried").
    Retried,
    /// Every entry.
    All,
}

/// One failure entry as listed.
#[derive(Debug, Clone, Serialize)]
pub struct FailureRow {
    /// Its index in the list when read.
    pub index: usize,
    /// The parsed entry (`None` when it is not a JSON object; `raw` then says what it is).
    pub entry: Option<FailureEntry>,
    /// The payload's class, when it has one.
    pub class: Option<String>,
    /// The entry's bytes.
    #[serde(skip)]
    pub raw: Vec<u8>,
}

/// What a bulk operation did.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Outcome {
    /// Entries changed.
    pub done: usize,
    /// Entries selected but left alone (gone meanwhile, or not retryable), with why.
    pub skipped: Vec<String>,
}

impl FailureRow {
    /// The row for the entry `bytes` read at `index`.
    pub fn new(index: usize, bytes: &[u8]) -> Self {
        let entry: Option<FailureEntry> = serde_json::from_slice(bytes).ok();
        let class = entry
            .as_ref()
            .and_then(|e| e.payload.as_ref())
            .and_then(|p| p.get("class"))
            .and_then(Value::as_str)
            .map(str::to_string);
        FailureRow {
            index,
            entry,
            class,
            raw: bytes.to_vec(),
        }
    }

    /// The entry's bytes as text (invalid UTF-8 replaced).
    pub fn raw_text(&self) -> String {
        text(&self.raw)
    }

    fn matches(&self, sel: &Selector) -> bool {
        match sel {
            Selector::Index(i) => self.index == *i,
            Selector::Class(c) => self.class.as_deref() == Some(c.as_str()),
            Selector::Retried => self.entry.as_ref().is_some_and(|e| e.retried_at.is_some()),
            Selector::All => true,
        }
    }
}

impl Admin {
    /// Entries `offset .. offset + limit` of the failure list.
    pub async fn failures(&self, offset: usize, limit: usize) -> Result<Vec<FailureRow>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let raws = self.failure_range(offset, limit).await?;
        Ok(raws
            .iter()
            .enumerate()
            .map(|(i, b)| FailureRow::new(offset + i, b))
            .collect())
    }

    /// Number of entries in the failure list (`LLEN`, what Ruby's `info[:failed]` shows).
    pub async fn failure_count(&self) -> Result<usize> {
        let mut con = self.con();
        Ok(redis::cmd("LLEN")
            .arg(self.keys().failed())
            .query_async(&mut con)
            .await?)
    }

    /// The entry at `index`, or `None` past the end.
    pub async fn failure(&self, index: usize) -> Result<Option<FailureRow>> {
        let mut con = self.con();
        let raw: Option<Vec<u8>> = redis::cmd("LINDEX")
            .arg(self.keys().failed())
            .arg(index)
            .query_async(&mut con)
            .await?;
        Ok(raw.map(|b| FailureRow::new(index, &b)))
    }

    /// Retries the selected entries (Ruby's requeue).
    pub async fn retry_failures(&self, sel: &Selector) -> Result<Outcome> {
        let mut out = Outcome::default();
        let now = self.now().await?;
        let stamp = time::failed_at(now);
        // The entries there now, as Ruby's requeue_all counts them first: the failures of the
        // jobs this retries, pushed while it goes, are not retried again.
        let end = self.failure_count().await?;
        let mut offset = 0;
        loop {
            let rows = self.select_chunk(sel, &mut offset, end).await?;
            let Some(rows) = rows else { break };
            let chunk = self.retry_rows(&rows, &stamp).await?;
            out.done += chunk.done;
            out.skipped.extend(chunk.skipped);
            if matches!(sel, Selector::Index(_)) {
                break;
            }
        }
        if let (Selector::Index(i), 0, true) = (sel, out.done, out.skipped.is_empty()) {
            return Err(no_entry(*i));
        }
        Ok(out)
    }

    /// Removes the selected entries (Ruby's remove, sentinel + `LREM`).
    pub async fn remove_failures(&self, sel: &Selector) -> Result<Outcome> {
        let mut out = Outcome::default();
        let mut offset = 0;
        loop {
            let Some(rows) = self.select_chunk(sel, &mut offset, usize::MAX).await? else {
                break;
            };
            if rows.is_empty() {
                continue;
            }
            let removed = self.remove_rows(&rows).await?;
            out.done += removed;
            if removed < rows.len() {
                out.skipped.push(format!(
                    "{} entr{} gone before removal",
                    rows.len() - removed,
                    if rows.len() - removed == 1 {
                        "y"
                    } else {
                        "ies"
                    }
                ));
            }
            // Entries before `offset` shifted left by the removals in this chunk.
            offset = offset.saturating_sub(removed);
            if matches!(sel, Selector::Index(_)) {
                break;
            }
        }
        if let (Selector::Index(i), 0, true) = (sel, out.done, out.skipped.is_empty()) {
            return Err(no_entry(*i));
        }
        Ok(out)
    }

    /// Removes every entry present now, keeping any pushed while it runs. Returns how many.
    pub async fn clear_failures(&self) -> Result<usize> {
        let mut con = self.con();
        let n: usize = redis::cmd("LLEN")
            .arg(self.keys().failed())
            .query_async(&mut con)
            .await?;
        let _: () = redis::cmd("LTRIM")
            .arg(self.keys().failed())
            .arg(n)
            .arg(-1)
            .query_async(&mut con)
            .await?;
        Ok(n)
    }

    /// Retries `rows` (Ruby's requeue, each entry found again by its bytes if it moved) with
    /// `retried_at` = `stamp`: one pipeline of one call per row.
    pub async fn retry_rows(&self, rows: &[FailureRow], stamp: &str) -> Result<Outcome> {
        if self.keys().is_spread() {
            return self.retry_rows_spread(rows, stamp).await;
        }
        let mut out = Outcome::default();
        let mut pipe = redis::pipe();
        let mut sent = Vec::new();
        for row in rows {
            match retry_plan(row, stamp) {
                Ok(plan) => {
                    crate::scripts::FailedRetry {
                        failed: self.keys().failed(),
                        queues: self.keys().queues(),
                        queue: self.keys().queue(&plan.queue),
                        index: row.index,
                        seen: row.raw.as_slice(),
                        entry: plan.entry,
                        queue_name: &plan.queue,
                        job: plan.job,
                        prefix: self.keys().prefix(),
                        tracked: plan.tracked.as_deref().unwrap_or(""),
                        now_ms: chrono::Utc::now().timestamp_millis(),
                    }
                    .call()
                    .add_to(&mut pipe);
                    sent.push(row.index);
                }
                Err(why) => out.skipped.push(format!("#{}: {why}", row.index)),
            }
        }
        if sent.is_empty() {
            return Ok(out);
        }
        let mut con = self.con();
        crate::scripts::ensure_loaded(&mut con, &self.keys().failed()).await?;
        let replies: Vec<i64> = pipe.query_async(&mut con).await?;
        for (index, at) in sent.into_iter().zip(replies) {
            if at >= 0 {
                out.done += 1;
            } else if at == -2 {
                out.skipped.push(format!(
                    "#{index}: not retried: its tracked job is not failed (retried already?)"
                ));
            } else {
                out.skipped
                    .push(format!("#{index}: gone before it could be retried"));
            }
        }
        Ok(out)
    }

    /// [`Admin::retry_rows`] on a spread namespace, where the failure list, `<ns>:queues` and
    /// each queue are in slots of their own: the jobs are pushed first, each queue's in the
    /// rows' order (`SADD <ns>:queues` with their names, then one `RPUSH` per queue, each a
    /// single-slot command), then each entry still there is marked retried (`failed_mark.lua`,
    /// one pipeline on the failure list's slot). A crash between leaves a job queued with its
    /// entry unmarked (retried twice at worst), never a job lost; an entry removed meanwhile
    /// has had its job pushed all the same. A job resq tracks is not retried here (its record
    /// is in no slot of the spread layout).
    async fn retry_rows_spread(&self, rows: &[FailureRow], stamp: &str) -> Result<Outcome> {
        let mut out = Outcome::default();
        let mut plans: Vec<(&FailureRow, RetryPlan)> = Vec::new();
        for row in rows {
            match retry_plan(row, stamp) {
                Ok(plan) if plan.tracked.is_some() => out.skipped.push(format!(
                    "#{}: a tracked job is not retried on a spread namespace (docs/cluster.md)",
                    row.index
                )),
                Ok(plan) => plans.push((row, plan)),
                Err(why) => out.skipped.push(format!("#{}: {why}", row.index)),
            }
        }
        if plans.is_empty() {
            return Ok(out);
        }
        let k = self.keys();
        // A queue whose key holds something else than a list is not pushed onto (its entries
        // are skipped, nothing written for them): checked first, as a script checks its keys.
        let mut names: Vec<String> = Vec::new();
        for (_, plan) in &plans {
            if !names.contains(&plan.queue) {
                names.push(plan.queue.clone());
            }
        }
        let mut types = redis::pipe();
        for q in &names {
            types.cmd("TYPE").arg(k.queue(q));
        }
        let types: Vec<String> = types.query_async(&mut self.con()).await?;
        plans.retain(|(row, plan)| {
            let t = names
                .iter()
                .zip(&types)
                .find(|(q, _)| **q == plan.queue)
                .map_or("none", |(_, t)| t.as_str());
            let usable = matches!(t, "list" | "none");
            if !usable {
                out.skipped.push(format!(
                    "#{}: {} holds a {t}, not a list: not retried",
                    row.index,
                    k.queue(&plan.queue)
                ));
            }
            usable
        });
        if plans.is_empty() {
            return Ok(out);
        }
        let mut by_queue: Vec<(&str, Vec<&str>)> = Vec::new();
        for (_, plan) in &plans {
            match by_queue.iter_mut().find(|(q, _)| *q == plan.queue) {
                Some((_, jobs)) => jobs.push(&plan.job),
                None => by_queue.push((&plan.queue, vec![&plan.job])),
            }
        }
        let mut con = self.con();
        // (Before the pushes: a call that cannot be made must not follow them.)
        crate::scripts::ensure_loaded(&mut con, &k.failed()).await?;
        let names: Vec<&str> = by_queue.iter().map(|(q, _)| *q).collect();
        let _: i64 = redis::cmd("SADD")
            .arg(k.queues())
            .arg(&names)
            .query_async(&mut con)
            .await?;
        let mut pushes = redis::pipe();
        for (q, jobs) in &by_queue {
            for chunk in jobs.chunks(CHUNK) {
                pushes.rpush(k.queue(q), chunk).ignore();
            }
        }
        let _: () = pushes.query_async(&mut self.con()).await?;
        let mut marks = redis::pipe();
        for (row, plan) in &plans {
            crate::scripts::FailedMark {
                failed: k.failed(),
                index: row.index,
                seen: row.raw.as_slice(),
                entry: &plan.entry,
            }
            .call()
            .add_to(&mut marks);
        }
        let replies: Vec<i64> = marks.query_async(&mut con).await?;
        for ((row, _), at) in plans.iter().zip(replies) {
            out.done += 1;
            if at < 0 {
                out.skipped.push(format!(
                    "#{}: its job was queued again, but its entry was gone before it could be \
                     marked retried",
                    row.index
                ));
            }
        }
        Ok(out)
    }

    /// Removes `rows` (Ruby's remove: sentinel + `LREM`, each entry found again by its bytes
    /// if it moved) in one script call. Returns how many were still there and were removed.
    pub async fn remove_rows(&self, rows: &[FailureRow]) -> Result<usize> {
        if rows.is_empty() {
            return Ok(0);
        }
        let sentinel = format!("resq-removed-{:032x}", rand::random::<u128>());
        let inv = crate::scripts::FailedRemove {
            failed: self.keys().failed(),
            sentinel: &sentinel,
            seen: rows.iter().map(|r| (r.index, r.raw.as_slice())).collect(),
        };
        let mut con = self.con();
        Ok(inv.call().invoke_async(&mut con).await?)
    }

    async fn failure_range(&self, offset: usize, limit: usize) -> Result<Vec<Vec<u8>>> {
        let mut con = self.con();
        Ok(redis::cmd("LRANGE")
            .arg(self.keys().failed())
            .arg(offset)
            .arg(offset + limit - 1)
            .query_async(&mut con)
            .await?)
    }

    /// The next chunk's selected rows, advancing `offset`; `None` at the end of the list or at
    /// entry `end`.
    async fn select_chunk(
        &self,
        sel: &Selector,
        offset: &mut usize,
        end: usize,
    ) -> Result<Option<Vec<FailureRow>>> {
        if let Selector::Index(i) = sel {
            if *offset > 0 {
                return Ok(None);
            }
            *offset = 1;
            return match self.failure(*i).await? {
                Some(row) => Ok(Some(vec![row])),
                None => Err(no_entry(*i)),
            };
        }
        if *offset >= end {
            return Ok(None);
        }
        let raws = self
            .failure_range(*offset, CHUNK.min(end - *offset))
            .await?;
        if raws.is_empty() {
            return Ok(None);
        }
        let start = *offset;
        *offset += raws.len();
        Ok(Some(
            raws.iter()
                .enumerate()
                .map(|(i, b)| FailureRow::new(start + i, b))
                .filter(|r| r.matches(sel))
                .collect(),
        ))
    }
}

/// What a retry writes for one entry.
struct RetryPlan {
    /// The entry with `retried_at` set.
    entry: String,
    /// The queue to push onto.
    queue: String,
    /// `{"class","args"}` (with `resq_id` for a job resq tracks, so it keeps its record).
    job: String,
    /// The id of a job resq tracks.
    tracked: Option<String>,
}

/// The rewritten entry and the job to enqueue, or why the entry cannot be retried.
fn retry_plan(row: &FailureRow, stamp: &str) -> std::result::Result<RetryPlan, String> {
    let mut entry: Map<String, Value> =
        serde_json::from_slice(&row.raw).map_err(|_| "entry is not a JSON object".to_string())?;
    let queue = entry
        .get("queue")
        .and_then(Value::as_str)
        .filter(|q| !q.is_empty())
        .ok_or("entry has no queue")?
        .to_string();
    let payload = entry.get("payload").ok_or("entry has no payload")?;
    let class = payload
        .get("class")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .ok_or("payload has no class")?
        .to_string();
    let args: Vec<Value> = match payload.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(other) => vec![other.clone()],
    };
    // Ruby's requeue writes `{"class","args"}`; a job resq tracks also keeps its id, a field
    // every peer ignores, so the run is its record's.
    let tracked = payload
        .get("resq_id")
        .and_then(Value::as_str)
        .and_then(crate::wire::job_id::JobId::parse)
        .map(|id| id.to_string());
    let mut job = payload::encode_resque(&class, &args);
    if let Some(id) = &tracked {
        job.pop();
        job.push_str(&format!(r#","resq_id":"{id}"}}"#));
    }
    entry.insert("retried_at".into(), Value::String(stamp.to_string()));
    Ok(RetryPlan {
        entry: serde_json::to_string(&entry).map_err(|e| e.to_string())?,
        queue,
        job,
        tracked,
    })
}

fn no_entry(i: usize) -> Error {
    Error::Config {
        var: "INDEX",
        message: format!("no failure entry at index {i}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_keeps_key_order_and_number_text() {
        let raw = r#"{"failed_at":"2026/11/21 19:15:46 UTC","payload":{"class":"F","args":[1.0e+20,{"k":"é"}],"vars":{"x":1}},"exception":"E","error":"e","backtrace":[],"worker":"w","queue":"q"}"#;
        let row = FailureRow::new(0, raw.as_bytes());
        let plan = retry_plan(&row, "2026/11/21 20:00:00 UTC").unwrap();
        assert_eq!(
            plan.entry,
            raw.replace(
                r#""queue":"q"}"#,
                r#""queue":"q","retried_at":"2026/11/21 20:00:00 UTC"}"#
            )
        );
        assert_eq!(plan.queue, "q");
        assert_eq!(plan.job, r#"{"class":"F","args":[1.0e+20,{"k":"é"}]}"#);
    }

    #[test]
    fn not_retryable_entries_say_why() {
        let row = FailureRow::new(3, br#"{"payload":null,"queue":"q"}"#);
        assert_eq!(retry_plan(&row, "t").err().unwrap(), "payload has no class");
        let row = FailureRow::new(3, b"garbage");
        assert!(row.entry.is_none());
        assert!(retry_plan(&row, "t").is_err());
    }
}
