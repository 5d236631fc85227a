//! Where a tracked job is ([`State`]) and what its record says ([`JobStatus`]): resq's own
//! record (a hash, `<ns>:resq:job:<id>`) or resque-status's (a JSON text, `<ns>:status:<id>`),
//! read into one shape.

use super::JobId;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};

/// A tracked job's state. resque-status knows five (`queued`, `working`, `completed`,
/// `failed`, `killed`); resq's finer states map onto them ([`State::resque_status`]: scheduled,
/// waiting and retrying jobs read `queued`, a cancelled one `killed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// In a queue, waiting for a worker.
    Queued,
    /// In the delayed set, due later.
    Scheduled,
    /// Waiting for other jobs to finish first (its dependencies).
    Waiting,
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
    pub const ALL: [State; 9] = [
        State::Queued,
        State::Scheduled,
        State::Waiting,
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
            State::Waiting => "waiting",
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
            State::Queued | State::Scheduled | State::Waiting | State::Retrying => "queued",
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

/// Fields of a resque-status record that [`JobStatus`] reads itself.
const KNOWN: &[&str] = &[
    "time", "status", "uuid", "options", "name", "num", "total", "message", "result", "resq",
];

/// resque-status's percent complete: completed 100, queued 0, else `num / total`.
fn pct(status: &str, num: Option<f64>, total: Option<f64>) -> f64 {
    match status {
        "completed" => 100.0,
        "queued" => 0.0,
        _ => {
            let t = match total {
                Some(t) if t != 0.0 => t,
                _ => 1.0,
            };
            (num.unwrap_or(0.0) / t * 100.0).trunc()
        }
    }
}

impl JobStatus {
    /// A resque-status record's text for job `id`; `None` when it is not a JSON object.
    pub fn parse(id: &JobId, text: &str) -> Option<JobStatus> {
        let mut obj: Map<String, Value> = serde_json::from_str(text).ok()?;
        // Records written by resq before its own jobs had a record of their own carried resq's
        // state in a `resq` member: read as it says.
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
        let string =
            |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_str).map(String::from);
        let ms = |k: &str| {
            resq.get(k)
                .and_then(Value::as_f64)
                .and_then(|v| DateTime::from_timestamp_millis(v as i64))
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
            pct_complete: pct(&status, num, total),
            time: obj.get("time").and_then(Value::as_f64).map(|t| t as i64),
            options: obj.get("options").cloned(),
            result: obj.get("result").cloned(),
            queue: string(&resq, "queue"),
            class: string(&resq, "class").or_else(|| {
                string(&obj, "name").and_then(|n| n.split('(').next().map(String::from))
            }),
            worker: string(&resq, "worker"),
            attempts: resq
                .get("attempts")
                .and_then(Value::as_f64)
                .map_or(0, |a| a as u64),
            tags: Vec::new(),
            key: None,
            enqueued_at: ms("enqueued_at"),
            started_at: ms("started_at"),
            finished_at: ms("finished_at"),
            error: string(&resq, "error"),
            history: Vec::new(),
            custom,
            status,
        })
    }

    /// resq's own record of job `id`, from its hash fields (any bytes: a field that does not
    /// read as what it should is left out, never an error).
    pub fn from_fields(id: &JobId, fields: &[(String, Vec<u8>)]) -> JobStatus {
        let text = |v: &[u8]| String::from_utf8_lossy(v).into_owned();
        let get = |k: &str| fields.iter().find(|(f, _)| f == k).map(|(_, v)| text(v));
        let json =
            |k: &str| get(k).map(|t| serde_json::from_str::<Value>(&t).unwrap_or(Value::String(t)));
        let ms = |k: &str| {
            get(k)
                .and_then(|t| t.trim().parse::<f64>().ok())
                .and_then(|v| DateTime::from_timestamp_millis(v as i64))
        };
        let state = get("state")
            .and_then(|s| State::parse(&s))
            .unwrap_or(State::Queued);
        let status = state.resque_status().to_string();
        let num = json("p.num").as_ref().and_then(number);
        let total = json("p.total").as_ref().and_then(number);
        let message = json("p.message").and_then(|m| match m {
            Value::String(s) => Some(s),
            Value::Null => None,
            other => Some(other.to_string()),
        });
        let custom = fields
            .iter()
            .filter_map(|(f, v)| {
                let k = f.strip_prefix("p.")?;
                if ["num", "total", "message"].contains(&k) {
                    return None;
                }
                let t = text(v);
                Some((
                    k.to_string(),
                    serde_json::from_str(&t).unwrap_or(Value::String(t)),
                ))
            })
            .collect();
        let class = get("class");
        JobStatus {
            id: id.clone(),
            state,
            name: class.clone(),
            message,
            num,
            total,
            pct_complete: pct(&status, num, total),
            time: ms("enqueued_at").map(|t| t.timestamp()),
            options: None,
            result: json("result"),
            queue: get("queue"),
            class,
            worker: get("worker"),
            attempts: get("attempts")
                .and_then(|a| a.trim().parse::<u64>().ok())
                .unwrap_or(0),
            tags: get("tags")
                .map(|t| t.split_whitespace().map(String::from).collect())
                .unwrap_or_default(),
            key: get("key").filter(|k| !k.is_empty()),
            enqueued_at: ms("enqueued_at"),
            started_at: ms("started_at"),
            finished_at: ms("ended_at"),
            error: get("error"),
            history: history(fields),
            custom,
            status,
        }
    }
}

/// A record's history, from its fields (`enqueued_at`, `a<n>.moved`, `a<n>.start`, `a<n>.end`,
/// `cancelled_at`), oldest first.
fn history(fields: &[(String, Vec<u8>)]) -> Vec<Event> {
    let mut out: Vec<(i64, usize, Event)> = Vec::new();
    let at = |ms: i64| DateTime::from_timestamp_millis(ms);
    let mut push = |ms: i64, order: usize, event: &str, extra: Map<String, Value>| {
        out.push((
            ms,
            order,
            Event {
                event: event.to_string(),
                at: at(ms),
                fields: extra,
            },
        ));
    };
    for (f, v) in fields {
        let t = String::from_utf8_lossy(v);
        let first = |t: &str| t.split(' ').next().and_then(|x| x.parse::<i64>().ok());
        if f == "enqueued_at" {
            if let Some(ms) = first(&t) {
                push(ms, 0, "enqueued", Map::new());
            }
        } else if f == "cancelled_at" {
            if let Some(ms) = first(&t) {
                push(ms, 9, "cancelled", Map::new());
            }
        } else if let Some(rest) = f.strip_prefix('a') {
            let Some((n, what)) = rest.split_once('.') else {
                continue;
            };
            let Ok(n) = n.parse::<usize>() else { continue };
            match what {
                "moved" => {
                    if let Some(ms) = first(&t) {
                        push(ms, n * 3, "moved", Map::new());
                    }
                }
                "start" => {
                    let mut parts = t.splitn(2, ' ');
                    let ms = parts.next().and_then(|x| x.parse::<i64>().ok());
                    let mut extra = Map::new();
                    if let Some(w) = parts.next() {
                        extra.insert("worker".into(), Value::String(w.to_string()));
                    }
                    if let Some(ms) = ms {
                        push(ms, n * 3 + 1, "started", extra);
                    }
                }
                "end" => {
                    let mut parts = t.splitn(3, ' ');
                    let event = parts.next().unwrap_or("").to_string();
                    let ms = parts.next().and_then(|x| x.parse::<i64>().ok());
                    let mut extra = Map::new();
                    if let Some(e) = parts.next() {
                        extra.insert("error".into(), Value::String(e.to_string()));
                    }
                    if let Some(ms) = ms {
                        push(ms, n * 3 + 2, &event, extra);
                    }
                }
                _ => {}
            }
        }
    }
    out.sort_by_key(|(ms, order, _)| (*ms, *order));
    out.into_iter().map(|(_, _, e)| e).collect()
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
    fn reads_resque_status_records() {
        let id = JobId::parse("ba69034b39c05d28a5403ac10e276e79").unwrap();
        let ruby = r#"{"time":1795495079,"status":"working","uuid":"ba69034b39c05d28a5403ac10e276e79","options":{"num":10},"name":"MyStatusJob({\"num\"=>10})","num":3,"total":10,"message":"msg","custom_key":"v"}"#;
        let s = JobStatus::parse(&id, ruby).unwrap();
        assert_eq!(s.state, State::Working);
        assert_eq!(s.pct_complete, 30.0);
        assert_eq!(s.time, Some(1795495079));
        assert_eq!(s.class.as_deref(), Some("MyStatusJob"));
        assert_eq!(s.custom["custom_key"], "v");
        assert!(JobStatus::parse(&id, "[1]").is_none());
        let killed = r#"{"time":1,"status":"killed"}"#;
        assert_eq!(JobStatus::parse(&id, killed).unwrap().state, State::Killed);
        assert!(State::Cancelled.is_final() && !State::Retrying.is_final());
    }

    #[test]
    fn reads_resqs_own_records_whatever_their_fields_hold() {
        let id = JobId::parse("ba69034b39c05d28a5403ac10e276e79").unwrap();
        let f = |k: &str, v: &[u8]| (k.to_string(), v.to_vec());
        let fields = vec![
            f("state", b"retrying"),
            f("class", b"Export"),
            f("queue", b"q"),
            f("enqueued_at", b"1795495079000"),
            f("attempts", b"2"),
            f("tags", b"a b"),
            f("a1.start", b"1795495079100 host~resq:1-0:q"),
            f("a1.end", b"retrying 1795495079200 boom: it broke"),
            f("a2.start", b"1795495080000 host~resq:1-0:q"),
            f("p.num", b"3"),
            f("p.total", b"4"),
            f("p.message", b"\"half\""),
            f("p.rows", b"[1,2]"),
            f("result", b"{\"ok\":true}"),
            f("error", b"\xff\xfe not UTF-8"),
        ];
        let s = JobStatus::from_fields(&id, &fields);
        assert_eq!(s.state, State::Retrying);
        assert_eq!(s.attempts, 2);
        assert_eq!(s.tags, ["a", "b"]);
        assert_eq!(s.num, Some(3.0));
        assert_eq!(s.message.as_deref(), Some("half"));
        assert_eq!(s.custom["rows"], serde_json::json!([1, 2]));
        assert_eq!(s.result, Some(serde_json::json!({"ok": true})));
        assert!(s.error.unwrap().ends_with("not UTF-8"));
        let events: Vec<&str> = s.history.iter().map(|e| e.event.as_str()).collect();
        assert_eq!(events, ["enqueued", "started", "retrying", "started"]);
        assert_eq!(s.history[2].fields["error"], "boom: it broke");
        // Garbage in every field: read as far as it goes, never an error.
        let junk = vec![f("state", b"\x00"), f("attempts", b"-1"), f("a1.end", b"x")];
        let s = JobStatus::from_fields(&id, &junk);
        assert_eq!(s.state, State::Queued);
        assert_eq!(s.attempts, 0);
        assert!(s.history.is_empty());
    }
}
