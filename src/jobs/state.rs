//! Where a tracked job is ([`State`]) and what its record says ([`JobStatus`]), read from
//! `<ns>:status:<id>`: resque-status's fields plus resq's own `resq` object.

use super::JobId;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};

/// A tracked job's state. resque-status knows five (`queued`, `working`, `completed`,
/// `failed`, `killed`); resq's finer states map onto them in the record's `status` field
/// (scheduled and retrying jobs read `queued`, a cancelled one `killed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// In a queue, waiting for a worker.
    Queued,
    /// In the delayed set, due later.
    Scheduled,
    /// Running on a worker.
    Working,
    /// Failed, waiting in the delayed set for its next attempt.
    Retrying,
    /// Ended well.
    Completed,
    /// Failed for good.
    Failed,
    /// Stopped while running, on request.
    Killed,
    /// Cancelled before it ran; it never runs.
    Cancelled,
}

impl State {
    /// Every state, in lifecycle order.
    pub const ALL: [State; 8] = [
        State::Queued,
        State::Scheduled,
        State::Working,
        State::Retrying,
        State::Completed,
        State::Failed,
        State::Killed,
        State::Cancelled,
    ];

    /// The state's name (`queued`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Scheduled => "scheduled",
            State::Working => "working",
            State::Retrying => "retrying",
            State::Completed => "completed",
            State::Failed => "failed",
            State::Killed => "killed",
            State::Cancelled => "cancelled",
        }
    }

    /// The state named `s`.
    pub fn parse(s: &str) -> Option<State> {
        State::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Whether the job is done (a final state never changes).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            State::Completed | State::Failed | State::Killed | State::Cancelled
        )
    }

    /// resque-status's `status` for this state.
    pub fn resque_status(self) -> &'static str {
        match self {
            State::Queued | State::Scheduled | State::Retrying => "queued",
            State::Working => "working",
            State::Completed => "completed",
            State::Failed => "failed",
            State::Killed | State::Cancelled => "killed",
        }
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for State {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<State> {
        State::parse(s).ok_or_else(|| {
            crate::Error::Rejected(format!(
                "{s:?} is not a job state ({})",
                State::ALL.map(State::as_str).join(", ")
            ))
        })
    }
}

/// One entry of a job's history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// What happened: `enqueued`, `scheduled`, `started`, `completed`, `failed`, `retrying`,
    /// `killed`, `cancelled`, `requeued`, `moved` (a due delayed job reached its queue).
    pub event: String,
    /// When.
    pub at: Option<DateTime<Utc>>,
    /// The rest: `worker`, `error`, `retry_at`, `queue`…
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

/// A tracked job's record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobStatus {
    /// The id.
    pub id: JobId,
    /// Where it is.
    pub state: State,
    /// resque-status's `status` as written.
    pub status: String,
    /// resque-status's `name` (`Class(options…)`), once a worker started it.
    pub name: Option<String>,
    /// The last message (`Completed at …`, a progress message, the failure).
    pub message: Option<String>,
    /// Progress: done so far.
    pub num: Option<f64>,
    /// Progress: out of.
    pub total: Option<f64>,
    /// Percent complete as resque-status computes it (completed 100, queued 0, else
    /// `num / total`).
    pub pct_complete: f64,
    /// Creation time (resque-status's `time`, epoch seconds).
    pub time: Option<i64>,
    /// resque-status's `options` (a resque-status job's options).
    pub options: Option<Value>,
    /// What the handler returned as its result.
    pub result: Option<Value>,
    /// The queue.
    pub queue: Option<String>,
    /// The class.
    pub class: Option<String>,
    /// The worker that runs (or last ran) it.
    pub worker: Option<String>,
    /// Attempts started.
    pub attempts: u64,
    /// Tags given at enqueue.
    pub tags: Vec<String>,
    /// The job key given at enqueue.
    pub key: Option<String>,
    /// When it was enqueued.
    pub enqueued_at: Option<DateTime<Utc>>,
    /// When its last attempt started.
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// The last failure.
    pub error: Option<String>,
    /// What happened to it, oldest first (the last 50 events).
    pub history: Vec<Event>,
    /// Other fields of the record (a job's custom progress keys).
    pub custom: Map<String, Value>,
}

/// Fields of the record that [`JobStatus`] reads itself.
const KNOWN: &[&str] = &[
    "time", "status", "uuid", "options", "name", "num", "total", "message", "result", "resq",
];

impl JobStatus {
    /// Job `id`'s record, read from Redis: `None` when its key is absent, an error naming the
    /// key when it holds something that is not a record.
    pub(crate) async fn read(
        con: &mut crate::conn::Conn,
        keys: &crate::Keys,
        id: &JobId,
    ) -> crate::error::Result<Option<JobStatus>> {
        let key = keys.resque_status(id.as_str());
        let text: Option<String> = redis::cmd("GET").arg(&key).query_async(con).await?;
        let Some(text) = text else { return Ok(None) };
        match JobStatus::parse(id, &text) {
            Some(s) => Ok(Some(s)),
            None => Err(crate::error::Error::Protocol(format!(
                "{key} holds {:?}, not a resque-status record (a JSON object)",
                text.chars().take(60).collect::<String>()
            ))),
        }
    }

    /// Reads the record text of job `id`; `None` when it is not a JSON object.
    pub fn parse(id: &JobId, text: &str) -> Option<JobStatus> {
        let mut obj: Map<String, Value> = serde_json::from_str(text).ok()?;
        let resq = match obj.remove("resq") {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        let status = match obj.get("status") {
            Some(Value::String(s)) => s.clone(),
            _ => "queued".to_string(),
        };
        let from_status = match status.as_str() {
            "queued" => Some(State::Queued),
            "working" => Some(State::Working),
            "completed" => Some(State::Completed),
            "failed" => Some(State::Failed),
            "killed" => Some(State::Killed),
            _ => None,
        };
        // resq writes `status` and its state together; a `status` that no longer matches the
        // state was written since by someone else (a Ruby resque-status worker running the
        // job merges the record and leaves `resq` as it was), so it is the newer word.
        let state = match (
            resq.get("state")
                .and_then(Value::as_str)
                .and_then(State::parse),
            from_status,
        ) {
            (Some(s), Some(f)) if s.resque_status() != status => f,
            (Some(s), _) => s,
            (None, f) => f.unwrap_or(State::Queued),
        };
        let num = obj.get("num").and_then(number);
        let total = obj.get("total").and_then(number);
        let pct_complete = match status.as_str() {
            "completed" => 100.0,
            "queued" => 0.0,
            _ => {
                let t = match total {
                    Some(t) if t != 0.0 => t,
                    _ => 1.0,
                };
                (num.unwrap_or(0.0) / t * 100.0).trunc()
            }
        };
        let string =
            |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_str).map(String::from);
        let ms = |k: &str| {
            resq.get(k)
                .and_then(Value::as_f64)
                .and_then(|v| DateTime::from_timestamp_millis(v as i64))
        };
        let history = match resq.get("history") {
            Some(Value::Array(events)) => events
                .iter()
                .filter_map(|e| {
                    let mut fields = e.as_object()?.clone();
                    let event = match fields.remove("event") {
                        Some(Value::String(s)) => s,
                        _ => return None,
                    };
                    let at = fields
                        .remove("at")
                        .and_then(|v| v.as_f64())
                        .and_then(|v| DateTime::from_timestamp_millis(v as i64));
                    Some(Event { event, at, fields })
                })
                .collect(),
            _ => Vec::new(),
        };
        let custom = obj
            .iter()
            .filter(|(k, _)| !KNOWN.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Some(JobStatus {
            id: id.clone(),
            state,
            name: string(&obj, "name"),
            message: string(&obj, "message"),
            num,
            total,
            pct_complete,
            time: obj.get("time").and_then(Value::as_f64).map(|t| t as i64),
            options: obj.get("options").cloned(),
            result: obj.get("result").cloned(),
            queue: string(&resq, "queue"),
            class: string(&resq, "class"),
            worker: string(&resq, "worker"),
            attempts: resq
                .get("attempts")
                .and_then(Value::as_f64)
                .map_or(0, |a| a as u64),
            tags: match resq.get("tags") {
                Some(Value::Array(t)) => t
                    .iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect(),
                _ => Vec::new(),
            },
            key: string(&resq, "key"),
            enqueued_at: ms("enqueued_at"),
            started_at: ms("started_at"),
            finished_at: ms("finished_at"),
            error: string(&resq, "error"),
            history,
            custom,
            status,
        })
    }
}

/// A number, or a numeric string as resque-status's readers accept (`to_f`).
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_resque_status_records_and_resqs_own() {
        let id = JobId::parse("ba69034b39c05d28a5403ac10e276e79").unwrap();
        let ruby = r#"{"time":1795495079,"status":"working","uuid":"ba69034b39c05d28a5403ac10e276e79","options":{"num":10},"name":"MyStatusJob({\"num\"=>10})","num":3,"total":10,"message":"msg"}"#;
        let s = JobStatus::parse(&id, ruby).unwrap();
        assert_eq!(s.state, State::Working);
        assert_eq!(s.pct_complete, 30.0);
        assert_eq!(s.time, Some(1795495079));
        let ours = r#"{"time":1,"status":"queued","uuid":"x","options":{},"resq":{"state":"retrying","attempts":2,"tags":["a"],"history":[{"event":"failed","at":1795495079000,"error":"boom"}]},"custom_key":"v"}"#;
        let s = JobStatus::parse(&id, ours).unwrap();
        assert_eq!(s.state, State::Retrying);
        assert_eq!(s.attempts, 2);
        assert_eq!(s.tags, ["a"]);
        assert_eq!(s.history[0].event, "failed");
        assert_eq!(s.history[0].fields["error"], "boom");
        assert_eq!(s.custom["custom_key"], "v");
        assert_eq!(s.pct_complete, 0.0);
        assert!(JobStatus::parse(&id, "[1]").is_none());
        // A resq-created job that a Ruby resque-status worker ran: `resq` is stale, `status`
        // is the truth.
        let ruby_ran = r#"{"time":1,"status":"completed","uuid":"x","options":{},"resq":{"state":"queued","attempts":0},"name":"J()","message":"Completed at 2026-11-24 04:38:01 +0000"}"#;
        let s = JobStatus::parse(&id, ruby_ran).unwrap();
        assert_eq!(s.state, State::Completed);
        assert_eq!(s.pct_complete, 100.0);
        // A cancelled job reads `killed`, as it should: the state stands.
        let cancelled = r#"{"time":1,"status":"killed","resq":{"state":"cancelled"}}"#;
        assert_eq!(
            JobStatus::parse(&id, cancelled).unwrap().state,
            State::Cancelled
        );
        assert!(State::Cancelled.is_final() && !State::Retrying.is_final());
    }
}
