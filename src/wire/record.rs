//! `<ns>:worker:<id>`: the job a worker is running.
//!
//! resq writes `{"queue":…,"run_at":…,"payload":…}` (Ruby's key order) with the payload's raw
//! bytes spliced in unchanged. The bytes are built in two places that must agree: the reserve
//! script (from the queue name this module encodes) and [`WorkerRecord::encode`].

use serde::Deserialize;
use serde_json::value::RawValue;

/// A worker record as read back from Redis.
#[derive(Debug, Clone, Deserialize)]
pub struct WorkerRecord {
    /// Queue the job came from.
    pub queue: String,
    /// When the job started, as written.
    pub run_at: String,
    /// The payload's raw bytes.
    pub payload: Box<RawValue>,
}

impl WorkerRecord {
    /// Parses the record text the reserve script returned.
    pub fn parse(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The record text for this job, byte-identical to what the reserve script writes.
    pub fn encode(&self) -> String {
        encode(&encode_queue(&self.queue), &self.run_at, self.payload.get())
    }
}

/// A queue name as a JSON string, the form the reserve script splices into records.
pub fn encode_queue(queue: &str) -> String {
    serde_json::Value::String(queue.to_string()).to_string()
}

/// Record text from an already-encoded queue name, a `run_at` and the raw payload.
pub fn encode(queue_json: &str, run_at: &str, payload_raw: &str) -> String {
    format!(r#"{{"queue":{queue_json},"run_at":"{run_at}","payload":{payload_raw}}}"#)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_byte_for_byte() {
        let text = r#"{"queue":"q:1","run_at":"2026-11-21T19:15:33.678+0000","payload":{ "args":[1.0e+20], "class":"A" }}"#;
        let r = WorkerRecord::parse(text).unwrap();
        assert_eq!(r.queue, "q:1");
        assert_eq!(r.payload.get(), r#"{ "args":[1.0e+20], "class":"A" }"#);
        assert_eq!(r.encode(), text);
    }
}
