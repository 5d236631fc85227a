//! `<ns>:worker:<id>`: the job a worker is running.
//!
//! resq writes `{"queue":…,"run_at":…,"payload":…}` (Ruby's key order) with the payload's raw
//! bytes spliced in unchanged. The bytes are built in two places that must agree: the reserve
//! script (from the queue name this module encodes) and [`head`], which the claim promotion
//! streams into its `SET` with the payload after it.

use serde::Deserialize;
use serde_json::value::RawValue;

/// A worker record as read back from Redis.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct WorkerRecord {
    /// Queue the job came from.
    pub queue: String,
    /// The payload as one JSON value (surrounding whitespace trimmed by the JSON reader).
    pub payload: Box<RawValue>,
    /// The payload's exact text as it was in the queue, surrounding whitespace included.
    #[serde(skip)]
    pub payload_text: String,
}

impl WorkerRecord {
    /// Parses a record text; `payload_text` is cut from the text itself, so it is exactly the
    /// bytes the reserve script spliced in.
    pub(crate) fn parse(text: &str) -> Result<Self, serde_json::Error> {
        let mut r: WorkerRecord = serde_json::from_str(text)?;
        r.payload_text = exact_payload(text)
            .unwrap_or_else(|| r.payload.get())
            .to_string();
        Ok(r)
    }
}

/// The payload's text in a record resq built: everything between the first `","payload":` (a
/// sequence no JSON-encoded queue name or `run_at` can contain, as its quotes would be
/// escaped) and the closing `}`.
fn exact_payload(text: &str) -> Option<&str> {
    const MARK: &str = r#"","payload":"#;
    let start = text.find(MARK)? + MARK.len();
    text.get(start..text.len().checked_sub(1)?)
        .filter(|_| text.ends_with('}'))
}

/// A queue name as a JSON string, the form the reserve script splices into records.
pub(crate) fn encode_queue(queue: &str) -> String {
    serde_json::Value::String(queue.to_string()).to_string()
}

/// A record's text up to its payload: the payload's raw bytes and a closing `}` follow.
pub(crate) fn head(queue_json: &str, run_at: &str) -> String {
    format!(r#"{{"queue":{queue_json},"run_at":"{run_at}","payload":"#)
}

/// Record text from an already-encoded queue name, a `run_at` and the raw payload.
#[cfg(test)]
fn encode(queue_json: &str, run_at: &str, payload_raw: &str) -> String {
    format!("{}{payload_raw}}}", head(queue_json, run_at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_byte_for_byte() {
        let text = r#"{"queue":"q:1","run_at":"2026-11-21T19:15:33.678+0000","payload":{ "args":[1.0e+20], "class":"A" }}"#;
        let r = WorkerRecord::parse(text).unwrap();
        assert_eq!(r.queue, "q:1");
        assert_eq!(r.payload_text, r#"{ "args":[1.0e+20], "class":"A" }"#);
        let padded = r#"{"queue":"q","run_at":"t","payload": {"class":"A"}
}"#;
        let p = WorkerRecord::parse(padded).unwrap();
        assert_eq!(p.payload_text, " {\"class\":\"A\"}\n");
        assert_eq!(
            encode(&encode_queue(&p.queue), "t", &p.payload_text),
            padded
        );
        assert_eq!(r.payload.get(), r#"{ "args":[1.0e+20], "class":"A" }"#);
        assert_eq!(
            encode(
                &encode_queue(&r.queue),
                "2026-11-21T19:15:33.678+0000",
                &r.payload_text
            ),
            text
        );
    }
}
