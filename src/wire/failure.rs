//! An entry of `<ns>:failed`, in Ruby's `Resque::Failure::Redis` shape.
//!
//! Keys in Ruby's order: `failed_at, payload, exception, error, backtrace, worker, queue`
//! (plus `retried_at` once retried). The payload is spliced in as its exact text; a payload that
//! could not be parsed is written as `null` (which resque-web and Jesque both accept) and its
//! text goes into `error`. Readers accept Jesque's, node-resque's and goworker's shapes too.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A failure entry to write.
#[derive(Debug, Clone)]
pub(crate) struct Failure<'a> {
    /// `YYYY/MM/DD HH:MM:SS UTC`.
    pub failed_at: String,
    /// The job's exact JSON text as reserved, or `None` (written `null`) when it could not
    /// be parsed. Spliced in unchanged: callers pass only text that is one JSON value.
    pub payload: Option<&'a str>,
    /// A stable class-like name (`RuntimeError`, `Resq::Panic`, …).
    pub exception: String,
    /// The message.
    pub error: String,
    /// One line per frame or cause.
    pub backtrace: Vec<String>,
    /// The worker id.
    pub worker: &'a str,
    /// The queue the job came from.
    pub queue: &'a str,
}

impl Failure<'_> {
    /// The entry's JSON text, keys in Ruby's order.
    pub(crate) fn encode(&self) -> String {
        let s = |v: &str| serde_json::Value::String(v.to_string()).to_string();
        let backtrace = serde_json::to_string(&self.backtrace).unwrap_or_else(|_| "[]".into());
        format!(
            r#"{{"failed_at":{},"payload":{},"exception":{},"error":{},"backtrace":{},"worker":{},"queue":{}}}"#,
            s(&self.failed_at),
            self.payload.unwrap_or("null"),
            s(&self.exception),
            s(&self.error),
            backtrace,
            s(self.worker),
            s(self.queue),
        )
    }
}

/// A failure entry as any peer writes it, for reading.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct FailureEntry {
    /// When it failed, as written (any peer's format; see [`super::time::parse_any`]).
    #[serde(default)]
    pub failed_at: Option<String>,
    /// The payload object (or null).
    #[serde(default)]
    pub payload: Option<Value>,
    /// Exception class name.
    #[serde(default)]
    pub exception: Option<String>,
    /// Message.
    #[serde(default)]
    pub error: Option<String>,
    /// Backtrace lines.
    #[serde(default)]
    pub backtrace: Option<Value>,
    /// Worker id (node-resque writes the name without queues).
    #[serde(default)]
    pub worker: Option<Value>,
    /// Queue.
    #[serde(default)]
    pub queue: Option<String>,
    /// When it was retried, once retried.
    #[serde(default)]
    pub retried_at: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ruby_key_order_and_raw_payload() {
        let raw = r#"{"class":"F","args":["x"],"extra":1}"#;
        let f = Failure {
            failed_at: "2026/11/21 19:15:46 UTC".into(),
            payload: Some(raw),
            exception: "RuntimeError".into(),
            error: "boom".into(),
            backtrace: vec!["src/x.rs:1".into()],
            worker: "h~resq:1-0:q",
            queue: "q",
        };
        assert_eq!(
            f.encode(),
            r#"{"failed_at":"2026/11/21 19:15:46 UTC","payload":{"class":"F","args":["x"],"extra":1},"exception":"RuntimeError","error":"boom","backtrace":["src/x.rs:1"],"worker":"h~resq:1-0:q","queue":"q"}"#
        );
    }
}
