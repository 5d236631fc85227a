//! What the worker tells the library about a tracked job: a new resque-status record (byte for
//! byte what resque-status's `create` writes), and the end of a run as the library writes it
//! (`record.lua` for resq's own jobs, `status.lua` for resque-status's).

use super::JobId;
use crate::wire::encode;
use crate::wire::number::FloatFormat;
use chrono::{DateTime, Utc};
use serde_json::Value;

/// A resque-status job's new record: `{"time","status":"queued","uuid","options"}`, as the
/// plugin's `create` writes it.
pub(crate) fn new_status(
    id: &JobId,
    options: &Value,
    now: DateTime<Utc>,
    f: FloatFormat,
) -> String {
    format!(
        r#"{{"time":{},"status":"queued","uuid":"{id}","options":{}}}"#,
        now.timestamp(),
        encode::to_json(options, f)
    )
}

/// How a tracked job's run ended, as the worker saw it.
#[derive(Debug, Clone)]
pub(crate) enum Ending {
    /// Ended well.
    Completed,
    /// Failed with this message (`e.message`, as resque-status writes it).
    Failed(String),
    /// Stopped on request.
    Killed,
    /// Put back at the head of its queue (at-least-once).
    Requeued,
}

/// Which record a tracked job has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// resq's own (`<ns>:resq:job:<id>`): the attempt this run is, and its job key.
    Tracked {
        /// The attempt (from 1; `None` when not known here: the library reads it, and the key).
        attempt: Option<u64>,
        /// The job key (`""` none).
        key: String,
    },
    /// resque-status's (`<ns>:status:<id>`), of this class.
    Statused {
        /// The class (resque-status's `name` when the record has none).
        class: String,
        /// Whether the payload is resque-status's (`args[0]` the id, `args[1]` the options),
        /// as opposed to a resq job of an earlier build whose record is this JSON (`resq_id`).
        id_in_args: bool,
    },
}

/// The end of a tracked job's run, for the function that completes it.
#[derive(Debug, Clone)]
pub(crate) struct TrackEnd {
    /// The job.
    pub id: JobId,
    /// Its record.
    pub kind: Kind,
    /// How it ended.
    pub ending: Ending,
    /// The handler's result (JSON text, already size-checked).
    pub result: Option<String>,
    /// How long a finished record is kept (seconds; 0 keeps it).
    pub ttl_secs: u64,
}

impl TrackEnd {
    /// The spec the library applies: the final state, or for a failure that will be retried
    /// at `retry_at` (epoch s) `retrying` (resque-status: `failed`, kept until it runs again).
    /// Fields are `\n`-separated and the last one may hold anything (an error message).
    pub(crate) fn spec(&self, now: DateTime<Utc>, retry_at: Option<i64>) -> String {
        let result = self.result.as_deref().unwrap_or("");
        match &self.kind {
            Kind::Tracked { attempt, key } => {
                let (state, when, error) = match (&self.ending, retry_at) {
                    (Ending::Failed(m), Some(at)) => {
                        ("retrying", at.saturating_mul(1000).to_string(), m.as_str())
                    }
                    (Ending::Failed(m), None) => ("failed", self.ttl_secs.to_string(), m.as_str()),
                    (Ending::Completed, _) => ("completed", self.ttl_secs.to_string(), ""),
                    (Ending::Killed, _) => ("killed", self.ttl_secs.to_string(), ""),
                    (Ending::Requeued, _) => ("queued", String::new(), ""),
                };
                // A key or an error cannot hold the separator where the library reads it.
                let key = key.replace('\n', " ");
                let attempt = attempt.map_or_else(String::new, |a| a.to_string());
                format!(
                    "r\n{}\n{attempt}\n{key}\n{state}\n{when}\n{}\n{error}",
                    self.id,
                    result.replace('\n', " ")
                )
            }
            Kind::Statused { class, .. } => {
                let when = crate::wire::time::started(now);
                let (state, message, ttl) = match (&self.ending, retry_at) {
                    (Ending::Failed(m), retry) => (
                        "failed",
                        format!("The task failed because of an error: {m}"),
                        if retry.is_some() { 0 } else { self.ttl_secs },
                    ),
                    (Ending::Completed, _) => {
                        ("completed", format!("Completed at {when}"), self.ttl_secs)
                    }
                    (Ending::Killed, _) => ("killed", format!("Killed at {when}"), self.ttl_secs),
                    (Ending::Requeued, _) => ("queued", format!("Requeued at {when}"), 0),
                };
                format!(
                    "s\n{}\n{}\n{state}\n{ttl}\n{}\n{}",
                    self.id,
                    class.replace('\n', " "),
                    encode::to_json(&message, FloatFormat::RubyJsonGem),
                    result.replace('\n', " ")
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_status_create_is_resque_status_bytes() {
        let id = JobId::parse("ba69034b39c05d28a5403ac10e276e79").unwrap();
        let now = DateTime::from_timestamp(1795495079, 0).unwrap();
        let opts = json!({"num":10,"label":"ünïcødé ✓","nested":{"a":[1,2.5,null,true]}});
        assert_eq!(
            new_status(&id, &opts, now, FloatFormat::RubyJsonGem),
            r#"{"time":1795495079,"status":"queued","uuid":"ba69034b39c05d28a5403ac10e276e79","options":{"num":10,"label":"ünïcødé ✓","nested":{"a":[1,2.5,null,true]}}}"#
        );
    }

    #[test]
    fn ends_say_what_the_library_writes() {
        let id = JobId::parse("ba69034b39c05d28a5403ac10e276e79").unwrap();
        let now = DateTime::from_timestamp(1795495081, 0).unwrap();
        let end = TrackEnd {
            id: id.clone(),
            kind: Kind::Tracked {
                attempt: Some(2),
                key: "inv-9".into(),
            },
            ending: Ending::Failed("boom:\n<bad>".into()),
            result: None,
            ttl_secs: 60,
        };
        assert_eq!(
            end.spec(now, None),
            format!("r\n{id}\n2\ninv-9\nfailed\n60\n\nboom:\n<bad>")
        );
        assert_eq!(
            end.spec(now, Some(1795495090)),
            format!("r\n{id}\n2\ninv-9\nretrying\n1795495090000\n\nboom:\n<bad>")
        );
        let done = TrackEnd {
            kind: Kind::Statused {
                class: "MyJob".into(),
                id_in_args: true,
            },
            ending: Ending::Completed,
            result: Some("{\"n\":1}".into()),
            ..end
        };
        assert_eq!(
            done.spec(now, None),
            format!("s\n{id}\nMyJob\ncompleted\n60\n\"Completed at 2026-11-24 04:38:01 +0000\"\n{{\"n\":1}}")
        );
    }
}
