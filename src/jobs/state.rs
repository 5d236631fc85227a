//! Where a tracked job is ([`State`]) and what its record says ([`JobStatus`]): resq's own
//! record (a hash, `<ns>:resq:job:<id>`, read by `own.rs`) or resque-status's (a JSON text,
//! `<ns>:status:<id>`, read by `statused.rs`), in one shape.

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

/// A field of a record that holds something it should not (not UTF-8, not a number, not a
/// state…): what was read from it is left out of the [`JobStatus`], and named here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BadField {
    /// The field (`state`, `attempts`, `p.num`; a resque-status record's member: `status`).
    pub field: String,
    /// What it holds, quoted (at most 60 characters of it), or `(absent)`.
    pub holds: String,
}

impl BadField {
    /// `field` holding the bytes `v`.
    pub(crate) fn new(field: &str, v: &[u8]) -> BadField {
        let t = String::from_utf8_lossy(v);
        let cut: String = t.chars().take(60).collect();
        BadField {
            field: field.to_string(),
            holds: format!("{cut:?}"),
        }
    }

    /// `field` missing from the record.
    pub(crate) fn absent(field: &str) -> BadField {
        BadField {
            field: field.to_string(),
            holds: "(absent)".to_string(),
        }
    }
}

impl std::fmt::Display for BadField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} holds {}", self.field, self.holds)
    }
}

/// A tracked job's record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobStatus {
    /// The id.
    pub id: JobId,
    /// Where it is: the record's state (a resque-status record's `status`), except that a
    /// record saying `working` whose worker is gone reads `failed`; in a listing of where jobs
    /// are (queued, scheduled, retrying, working), where it was found.
    pub state: State,
    /// resque-status's `status`: as written in a resque-status record, else the one of
    /// [`JobStatus::state`] ([`State::resque_status`]).
    pub status: String,
    /// Whether it is a resque-status job (its record is resque-status's JSON,
    /// `<ns>:status:<id>`), not one of resq's own (a hash, `<ns>:resq:job:<id>`).
    pub statused: bool,
    /// resque-status's `name` (`Class(options…)`); resq's own jobs: the class.
    pub name: Option<String>,
    /// The last message: a progress message, or resque-status's (`Completed at …`, the
    /// failure).
    pub message: Option<String>,
    /// Progress: done so far.
    pub num: Option<f64>,
    /// Progress: out of.
    pub total: Option<f64>,
    /// Percent complete as resque-status computes it (completed 100, queued 0, else
    /// `num / total`).
    pub pct_complete: f64,
    /// Creation time (resque-status's `time`; resq's own: the enqueue time), epoch seconds.
    pub time: Option<i64>,
    /// resque-status's `options` (a resque-status job's options).
    pub options: Option<Value>,
    /// What the handler returned as its result.
    pub result: Option<Value>,
    /// The queue (resq's own: where it was enqueued, or moved to; a resque-status record has
    /// none, unless a listing found the job in one).
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
    /// When it is due (scheduled: its time; retrying: its next attempt).
    pub due_at: Option<DateTime<Utc>>,
    /// When its last attempt started.
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// The last failure.
    pub error: Option<String>,
    /// Whether it was asked to stop (resq's own: the record's `kill` field; a resque-status
    /// job: its id in `<ns>:_kill`).
    pub stop_requested: bool,
    /// What happened to it, oldest first (the last 50 attempts).
    pub history: Vec<Event>,
    /// Other fields of the record (a job's custom progress keys).
    pub custom: Map<String, Value>,
    /// Fields that hold something they should not; what was read is shown without them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<BadField>,
}

impl JobStatus {
    /// Whether the record's state could be read (else [`JobStatus::state`] is a guess:
    /// `queued`).
    pub fn state_readable(&self) -> bool {
        !self
            .unreadable
            .iter()
            .any(|b| b.field == "state" || b.field == "status")
    }
}

/// resque-status's percent complete: completed 100, queued 0, else `num / total`.
pub(crate) fn pct(status: &str, num: Option<f64>, total: Option<f64>) -> f64 {
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

/// A number, or a numeric string as resque-status's readers accept (`to_f`); `Err` for
/// anything else but null (absent).
pub(crate) fn number(v: &Value) -> Result<Option<f64>, ()> {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => Ok(n.as_f64()),
        Value::String(s) => s.trim().parse().map(Some).map_err(|_| ()),
        _ => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_name_themselves() {
        for s in State::ALL {
            assert_eq!(State::parse(s.as_str()), Some(s));
        }
        assert!(State::Cancelled.is_final() && !State::Retrying.is_final());
        assert_eq!(State::Cancelled.resque_status(), "killed");
        assert!("lost".parse::<State>().is_err());
        assert_eq!(pct("working", Some(3.0), Some(10.0)), 30.0);
        assert_eq!(number(&Value::from("2.5")), Ok(Some(2.5)));
        assert_eq!(number(&Value::Null), Ok(None));
        assert!(number(&serde_json::json!([1])).is_err());
        let b = BadField::new("state", b"\xff\x00x");
        assert_eq!(b.to_string(), "state holds \"\u{fffd}\\0x\"");
    }
}
