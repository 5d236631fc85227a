//! The texts resq writes about tracked jobs: a new job's record (byte for byte what
//! resque-status's `create` writes, plus resq's `resq` object), and the end of a job as the
//! scripts apply it (state, resque-status's message, result, history entry, expiry).

use super::{JobId, State};
use crate::client::{encode, FloatFormat};
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

/// The record of a job being enqueued: resque-status's `{"time","status","uuid","options"}`
/// (`options` only for a resque-status job: its `args[1]`) then `resq`.
pub(crate) fn new_record(
    id: &JobId,
    state: State,
    options: Option<&Value>,
    resq: &Value,
    now: DateTime<Utc>,
    format: FloatFormat,
) -> String {
    let options = options.map_or_else(|| "{}".to_string(), |o| encode::to_json(o, format));
    format!(
        r#"{{"time":{},"status":"{}","uuid":"{id}","options":{options},"resq":{}}}"#,
        now.timestamp(),
        state.resque_status(),
        resq
    )
}

/// resq's object of a job being enqueued (`state` queued or scheduled).
#[allow(clippy::too_many_arguments)]
pub(crate) fn new_resq(
    state: State,
    queue: &str,
    class: &str,
    tags: &[String],
    key: Option<&str>,
    now: DateTime<Utc>,
    run_at: Option<DateTime<Utc>>,
) -> Value {
    let mut ev = Map::new();
    ev.insert(
        "event".into(),
        json!(if state == State::Scheduled {
            "scheduled"
        } else {
            "enqueued"
        }),
    );
    ev.insert("at".into(), json!(now.timestamp_millis()));
    if let Some(t) = run_at {
        ev.insert("run_at".into(), json!(t.timestamp_millis()));
    }
    let mut m = Map::new();
    m.insert("state".into(), json!(state.as_str()));
    m.insert("queue".into(), json!(queue));
    m.insert("class".into(), json!(class));
    m.insert("attempts".into(), json!(0));
    m.insert("enqueued_at".into(), json!(now.timestamp_millis()));
    if !tags.is_empty() {
        m.insert("tags".into(), json!(tags));
    }
    if let Some(k) = key {
        m.insert("key".into(), json!(k));
    }
    m.insert("history".into(), Value::Array(vec![Value::Object(ev)]));
    Value::Object(m)
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
}

/// The end of a tracked job's run, for the script that completes it.
#[derive(Debug, Clone)]
pub(crate) struct TrackEnd {
    /// The job.
    pub id: JobId,
    /// How it ended.
    pub ending: Ending,
    /// The handler's result (JSON text, already size-checked).
    pub result: Option<String>,
    /// How long a finished record is kept (seconds; 0 keeps it).
    pub ttl_secs: u64,
}

impl TrackEnd {
    /// The spec the scripts apply (see `track.lua`'s `track`): the final state, or
    /// `retry_at` (epoch s) for a failure that will be retried. It applies to a record that is
    /// not finished (a finished record never changes), and creates a missing one, as
    /// resque-status does. A completion is written as track.lua's `done` lines (its fast
    /// lane reads them without a JSON decode): `done`, the id, the TTL, finished_at (epoch
    /// ms), the message's JSON text and the result's (empty for none).
    pub(crate) fn spec(&self, now: DateTime<Utc>, retry_at: Option<i64>) -> String {
        if let Ending::Completed = self.ending {
            let (_, message, _) = self.outcome(now, None);
            return format!(
                "done\n{}\n{}\n{}\n{}\n{}",
                self.id.as_str(),
                self.ttl_secs,
                now.timestamp_millis(),
                message,
                self.result.as_deref().unwrap_or("")
            );
        }
        self.spec_with(
            now,
            retry_at,
            &["queued", "scheduled", "working", "retrying"],
            true,
        )
    }

    /// [`TrackEnd::spec`] for a record that must be working (a job found by pruning, or whose
    /// payload could not be read): nothing else is touched, nothing is created.
    pub(crate) fn spec_only_working(&self, now: DateTime<Utc>) -> String {
        self.spec_with(now, None, &["working"], false)
    }

    /// The state the run ends in, resque-status's message for it (as JSON text) and the
    /// history entry.
    fn outcome(&self, now: DateTime<Utc>, retry_at: Option<i64>) -> (State, String, Value) {
        let when = crate::wire::time::started(now);
        let (state, message, event) = match (&self.ending, retry_at) {
            (Ending::Failed(m), Some(at)) => (
                State::Retrying,
                format!("The task failed because of an error: {m}"),
                json!({"event": "retrying", "error": m, "retry_at": at * 1000}),
            ),
            (Ending::Failed(m), None) => (
                State::Failed,
                format!("The task failed because of an error: {m}"),
                json!({"event": "failed", "error": m}),
            ),
            (Ending::Completed, _) => (
                State::Completed,
                format!("Completed at {when}"),
                json!({"event": "completed"}),
            ),
            (Ending::Killed, _) => (
                State::Killed,
                format!("Killed at {when}"),
                json!({"event": "killed"}),
            ),
        };
        (
            state,
            encode::to_json(&message, FloatFormat::RubyJsonGem),
            event,
        )
    }

    fn spec_with(
        &self,
        now: DateTime<Utc>,
        retry_at: Option<i64>,
        only_if: &[&str],
        create: bool,
    ) -> String {
        let (state, message, event) = self.outcome(now, retry_at);
        let mut set = vec![json!(["message", message])];
        if let Some(r) = &self.result {
            set.push(json!(["result", r]));
        }
        let mut extra = Map::new();
        if state.is_final() {
            extra.insert("finished_at".into(), json!(now.timestamp_millis()));
        }
        if let Ending::Failed(m) = &self.ending {
            extra.insert("error".into(), json!(m));
        }
        json!({
            "id": self.id.as_str(),
            "state": state.as_str(),
            "set": set,
            "event": event,
            "extra": extra,
            "ttl": if state.is_final() { self.ttl_secs } else { 0 },
            "create": create,
            "only_if": only_if,
        })
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statused_create_is_resque_status_bytes_then_resq() {
        let id = JobId::parse("ba69034b39c05d28a5403ac10e276e79").unwrap();
        let now = DateTime::from_timestamp(1795495079, 0).unwrap();
        let opts = json!({"num":10,"label":"ünïcødé ✓","nested":{"a":[1,2.5,null,true]}});
        let resq = new_resq(
            State::Queued,
            "statused",
            "MyStatusJob",
            &[],
            None,
            now,
            None,
        );
        let text = new_record(
            &id,
            State::Queued,
            Some(&opts),
            &resq,
            now,
            FloatFormat::RubyJsonGem,
        );
        assert!(text.starts_with(
            r#"{"time":1795495079,"status":"queued","uuid":"ba69034b39c05d28a5403ac10e276e79","options":{"num":10,"label":"ünïcødé ✓","nested":{"a":[1,2.5,null,true]}},"resq":{"state":"queued""#
        ), "{text}");
    }

    #[test]
    fn ends_carry_resque_status_messages() {
        let end = TrackEnd {
            id: JobId::new(),
            ending: Ending::Failed("boom: <bad>".into()),
            result: None,
            ttl_secs: 60,
        };
        let now = DateTime::from_timestamp(1795495081, 0).unwrap();
        let spec: Value = serde_json::from_str(&end.spec(now, None)).unwrap();
        assert_eq!(spec["state"], "failed");
        assert_eq!(
            spec["set"][0][1],
            r#""The task failed because of an error: boom: <bad>""#
        );
        assert_eq!(spec["ttl"], 60);
        let retry: Value = serde_json::from_str(&end.spec(now, Some(1795495090))).unwrap();
        assert_eq!(retry["state"], "retrying");
        assert_eq!(retry["ttl"], 0);
        let done = TrackEnd {
            ending: Ending::Completed,
            result: Some("{\"n\":1}".into()),
            ..end
        };
        assert_eq!(
            done.spec(now, None),
            format!(
                "done\n{}\n60\n1795495081000\n\"Completed at 2026-11-24 04:38:01 +0000\"\n{{\"n\":1}}",
                done.id.as_str()
            )
        );
    }
}
