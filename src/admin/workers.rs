//! Registered workers: id parts, state, current job, start time, heartbeat age and counts,
//! read from any peer's records.
//!
//! Sources per id (one pipeline for all ids): `<ns>:worker:<id>` (the job, Ruby/resq/goworker
//! `{"queue","run_at","payload"}`, Jesque's with `paused`, node-resque's with `worker`),
//! `<ns>:worker:<id>:started` (Ruby `Time#to_s`, Jesque ISO, node-resque epoch seconds,
//! goworker `Time.String`), `<ns>:workers:heartbeat` (Ruby and resq), node-resque's
//! `<ns>:worker:ping:<name>` JSON, and the per-worker stats (node-resque keys them by the name
//! without queues). Whatever cannot be read goes into the worker's `notes`.

use super::{secs_between, text, Admin};
use crate::error::Result;
use crate::identity;
use crate::wire::time;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

/// What a worker is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerState {
    /// No record: waiting for a job.
    Idle,
    /// A record: running a job.
    Busy,
    /// Jesque's paused record.
    Paused,
}

/// The job a busy worker runs.
#[derive(Debug, Clone, Serialize)]
pub struct CurrentJob {
    /// Queue it came from.
    pub queue: Option<String>,
    /// Class (`None` when the payload has none).
    pub class: Option<String>,
    /// Positional args as recorded.
    pub args: Value,
    /// `run_at` as written.
    pub run_at: Option<String>,
    /// Seconds since `run_at`, when it parses.
    pub running_for_s: Option<f64>,
}

/// One registered worker.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerInfo {
    /// The id as registered in `<ns>:workers`.
    pub id: String,
    /// Which runtime wrote it, guessed from the id and records (`resq`, `ruby`, `jesque`,
    /// `node-resque`, `goworker`, `unknown`).
    pub runtime: &'static str,
    /// Host field.
    pub host: String,
    /// Pid field as written (`1234`, `1234-0`, `1234+2`).
    pub pid: String,
    /// Queues from the id (Jesque's `JAVA_DYNAMIC_QUEUES` marker left out).
    pub queues: Vec<String>,
    /// Idle, busy or paused.
    pub state: WorkerState,
    /// The job, when busy.
    pub job: Option<CurrentJob>,
    /// `:started` as written.
    pub started: Option<String>,
    /// `:started` parsed.
    pub started_at: Option<DateTime<Utc>>,
    /// The heartbeat (or node-resque ping) as written.
    pub heartbeat: Option<String>,
    /// Seconds since the heartbeat, when it parses.
    pub heartbeat_age_s: Option<f64>,
    /// Per-worker processed count.
    pub processed: u64,
    /// Per-worker failed count.
    pub failed: u64,
    /// What could not be read.
    pub notes: Vec<String>,
}

/// Replies per id in the pipeline below.
const PER_ID: usize = 8;

impl Admin {
    /// Every id in `<ns>:workers`, sorted.
    pub async fn workers(&self) -> Result<Vec<WorkerInfo>> {
        let mut con = self.con();
        let mut ids: Vec<Vec<u8>> = redis::cmd("SMEMBERS")
            .arg(self.keys().workers())
            .query_async(&mut con)
            .await?;
        ids.sort();
        self.describe_ids(&ids).await
    }

    /// At most about `max` ids of `<ns>:workers` from SSCAN cursor `cursor` (0: the start),
    /// sorted within the page; the cursor to go on from (0: none left) and how many ids the
    /// set holds. A page reads a bounded number of keys whatever the fleet's size.
    pub async fn workers_within(
        &self,
        cursor: u64,
        max: usize,
    ) -> Result<(Vec<WorkerInfo>, u64, u64)> {
        let mut con = self.con();
        let k = self.keys();
        let max = max.max(1);
        let (mut cursor, mut ids) = (cursor, Vec::new());
        let mut calls = 0;
        loop {
            let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SSCAN")
                .arg(k.workers())
                .arg(cursor)
                .arg("COUNT")
                .arg(max.min(1000))
                .query_async(&mut con)
                .await?;
            ids.extend(batch);
            cursor = next;
            calls += 1;
            // An SSCAN call may answer nothing: a few more calls, never unbounded.
            if cursor == 0 || ids.len() >= max || calls >= 8 {
                break;
            }
        }
        let total: u64 = redis::cmd("SCARD")
            .arg(k.workers())
            .query_async(&mut con)
            .await?;
        ids.sort();
        ids.dedup();
        Ok((self.describe_ids(&ids).await?, cursor, total))
    }

    /// Reads and describes the workers `ids` (in that order): one pipeline of a few keys per
    /// id and their heartbeats.
    async fn describe_ids(&self, ids: &[Vec<u8>]) -> Result<Vec<WorkerInfo>> {
        let mut con = self.con();
        let now = self.now().await?;
        let k = self.keys();
        let ids: Vec<String> = ids.iter().map(|b| text(b)).collect();
        let mut p = redis::pipe();
        for id in &ids {
            let name = short_name(id);
            p.cmd("GET").arg(k.worker(id));
            p.cmd("GET").arg(k.worker_started(id));
            p.cmd("GET").arg(k.stat_processed_by(id));
            p.cmd("GET").arg(k.stat_failed_by(id));
            p.cmd("GET").arg(k.stat_processed_by(&name));
            p.cmd("GET").arg(k.stat_failed_by(&name));
            p.cmd("GET").arg(k.worker_ping(&name));
            p.cmd("HGET").arg(k.heartbeats()).arg(id);
        }
        let replies: Vec<redis::Value> = if ids.is_empty() {
            Vec::new()
        } else {
            p.query_async(&mut con).await?
        };
        let mut out = Vec::with_capacity(ids.len());
        for (id, chunk) in ids.iter().zip(replies.chunks(PER_ID)) {
            let get = |i: usize| -> Option<String> {
                match chunk.get(i) {
                    Some(redis::Value::BulkString(b)) => Some(text(b)),
                    _ => None,
                }
            };
            let raw = RawWorker {
                record: get(0),
                started: get(1),
                processed: get(2).or_else(|| get(4)),
                failed: get(3).or_else(|| get(5)),
                ping: get(6),
                heartbeat: get(7),
            };
            out.push(describe(id, raw, now));
        }
        Ok(out)
    }
}

/// The raw values read for one id.
#[derive(Debug, Default, Clone)]
pub(crate) struct RawWorker {
    /// `<ns>:worker:<id>`.
    pub record: Option<String>,
    /// `<ns>:worker:<id>:started`.
    pub started: Option<String>,
    /// Per-worker processed counter.
    pub processed: Option<String>,
    /// Per-worker failed counter.
    pub failed: Option<String>,
    /// node-resque's ping JSON.
    pub ping: Option<String>,
    /// The heartbeat field.
    pub heartbeat: Option<String>,
}

/// node-resque's worker name: the id without its queue field.
fn short_name(id: &str) -> String {
    match id.rsplit_once(':') {
        Some((name, _)) if name.contains(':') => name.to_string(),
        _ => id.to_string(),
    }
}

/// Builds a [`WorkerInfo`] from what was read; never fails.
pub(crate) fn describe(id: &str, raw: RawWorker, now: DateTime<Utc>) -> WorkerInfo {
    let mut notes = Vec::new();
    let (host, pid, mut queues) = match identity::parse(id) {
        Some(p) => (p.host, p.pid, p.queues),
        None => {
            notes.push("id does not split into host:pid:queues".to_string());
            let mut parts = id.splitn(2, ':');
            let host = parts.next().unwrap_or_default().to_string();
            (
                host,
                parts.next().unwrap_or_default().to_string(),
                Vec::new(),
            )
        }
    };
    let jesque = queues.first().is_some_and(|q| q == "JAVA_DYNAMIC_QUEUES");
    queues.retain(|q| q != "JAVA_DYNAMIC_QUEUES");
    let (state, job) = match raw.record.as_deref() {
        None | Some("") => (WorkerState::Idle, None),
        Some(text) => read_record(text, now, &mut notes),
    };
    let started_at = raw.started.as_deref().and_then(|s| {
        let t = time::parse_any(s);
        if t.is_none() {
            notes.push(format!("started time {s:?} not understood"));
        }
        t
    });
    let heartbeat = raw.heartbeat.clone().or_else(|| {
        raw.ping.as_deref().and_then(|p| {
            let v: Value = serde_json::from_str(p).ok()?;
            v.get("time").map(|t| match t {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
        })
    });
    let heartbeat_age_s = heartbeat.as_deref().and_then(|h| {
        let t = time::parse_any(h);
        if t.is_none() {
            notes.push(format!("heartbeat {h:?} not understood"));
        }
        t.map(|t| secs_between(t, now))
    });
    let count = |v: &Option<String>, what: &str, notes: &mut Vec<String>| -> u64 {
        match v.as_deref().map(str::trim) {
            None => 0,
            Some(s) => s.parse().unwrap_or_else(|_| {
                notes.push(format!("{what} counter {s:?} is not a number"));
                0
            }),
        }
    };
    let processed = count(&raw.processed, "processed", &mut notes);
    let failed = count(&raw.failed, "failed", &mut notes);
    let runtime = guess_runtime(&host, &pid, jesque, &raw);
    WorkerInfo {
        id: id.to_string(),
        runtime,
        host,
        pid,
        queues,
        state,
        job,
        started: raw.started,
        started_at,
        heartbeat,
        heartbeat_age_s,
        processed,
        failed,
        notes,
    }
}

fn read_record(
    text: &str,
    now: DateTime<Utc>,
    notes: &mut Vec<String>,
) -> (WorkerState, Option<CurrentJob>) {
    let Ok(Value::Object(rec)) = serde_json::from_str::<Value>(text) else {
        notes.push("job record is not a JSON object".to_string());
        let job = CurrentJob {
            queue: None,
            class: None,
            args: Value::Null,
            run_at: None,
            running_for_s: None,
        };
        return (WorkerState::Busy, Some(job));
    };
    let paused = rec.get("paused").and_then(Value::as_bool) == Some(true);
    let payload = rec.get("payload").cloned().unwrap_or(Value::Null);
    let run_at = rec.get("run_at").and_then(|v| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    });
    let running_for_s = run_at.as_deref().and_then(|r| {
        let t = time::parse_any(r);
        if t.is_none() {
            notes.push(format!("run_at {r:?} not understood"));
        }
        t.map(|t| secs_between(t, now))
    });
    if paused && payload.is_null() {
        return (WorkerState::Paused, None);
    }
    let class = payload
        .get("class")
        .and_then(Value::as_str)
        .map(str::to_string);
    if class.is_none() {
        notes.push("job payload has no class".to_string());
    }
    let job = CurrentJob {
        queue: rec.get("queue").and_then(Value::as_str).map(str::to_string),
        class,
        args: payload.get("args").cloned().unwrap_or(Value::Null),
        run_at,
        running_for_s,
    };
    (WorkerState::Busy, Some(job))
}

fn guess_runtime(host: &str, pid: &str, jesque: bool, raw: &RawWorker) -> &'static str {
    let started = raw.started.as_deref().unwrap_or("");
    if identity::is_resq_host(host) {
        "resq"
    } else if jesque {
        "jesque"
    } else if raw.ping.is_some()
        || pid.contains('+')
        || (!started.is_empty() && started.bytes().all(|b| b.is_ascii_digit()))
    {
        "node-resque"
    } else if pid.ends_with("-poller") || started.contains(" m=") {
        "goworker"
    } else if !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) {
        "ruby"
    } else {
        "unknown"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 21, 19, 16, 33).unwrap()
    }

    #[test]
    fn reads_a_node_resque_worker() {
        let raw = RawWorker {
            record: Some(r#"{"run_at":"Sat Nov 21 2026 19:15:33 GMT+0000 (Coordinated Universal Time)","queue":"a","payload":{"class":"X","queue":"a","args":[1]},"worker":"box:77"}"#.into()),
            started: Some("1795288473".into()),
            ping: Some(r#"{"time":1795288590,"name":"box:77","queues":"a,b"}"#.into()),
            ..RawWorker::default()
        };
        let w = describe("box:77:a,b", raw, now());
        assert_eq!(w.runtime, "node-resque");
        assert_eq!(w.state, WorkerState::Busy);
        let job = w.job.unwrap();
        assert_eq!(job.class.as_deref(), Some("X"));
        assert_eq!(job.running_for_s, Some(60.0));
        assert_eq!(w.heartbeat_age_s, Some(3.0));
        assert!(w.notes.is_empty(), "{:?}", w.notes);
    }

    #[test]
    fn bad_records_become_notes() {
        let raw = RawWorker {
            record: Some("not json".into()),
            started: Some("yesterday".into()),
            processed: Some("x".into()),
            ..RawWorker::default()
        };
        let w = describe("h:1", raw, now());
        assert_eq!(w.state, WorkerState::Busy);
        assert_eq!(w.notes.len(), 4, "{:?}", w.notes);
    }

    #[test]
    fn short_names() {
        assert_eq!(short_name("box:77:a,b"), "box:77");
        assert_eq!(short_name("box:77+2:a"), "box:77+2");
        assert_eq!(short_name("solo"), "solo");
    }
}
