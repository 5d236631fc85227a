//! At-least-once: putting an interrupted job back at the head of its queue, byte for byte.
//!
//! Used for a slot's job aborted by TERM/INT after the term timeout or by USR1 (when the
//! worker is configured `at_least_once`), and by pruning for a dead worker's job. The job then
//! runs again from the start — possibly twice in total, which is what at-least-once means.

use crate::keys::Keys;
use crate::wire::WorkerRecord;
use redis::aio::ConnectionLike;
use redis::RedisResult;

/// The job a worker record holds: its queue and its payload's exact bytes.
#[derive(Debug)]
pub(crate) struct HeldJob {
    /// The queue the job came from.
    pub queue: String,
    /// The payload's bytes exactly as they sit inside the record.
    pub payload: String,
}

impl HeldJob {
    /// Reads the queue and raw payload out of a worker record; `None` when the record is not a
    /// JSON object with a string `queue` and an object `payload`.
    pub(crate) fn from_record(record: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(record).ok()?;
        let r = WorkerRecord::parse(text).ok()?;
        if !r.payload.get().starts_with('{') {
            return None;
        }
        Some(HeldJob {
            queue: r.queue,
            payload: r.payload_text,
        })
    }
}

/// Moves the job of slot `id` (whose record is exactly `record`) back to the head of its queue
/// and removes the record, atomically. Returns whether it was moved now (false: the record had
/// already changed, e.g. this is a resend whose first reply was lost).
pub(crate) async fn requeue<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    id: &str,
    record: &[u8],
    job: &HeldJob,
    limits: &str,
    limited: bool,
) -> RedisResult<bool> {
    let track = crate::jobs::ending_in_payload(
        &job.payload,
        crate::jobs::Ending::Requeued,
        crate::jobs::DEFAULT_TTL,
    )
    .unwrap_or_default();
    let n: i64 = crate::scripts::Requeue {
        worker: keys.worker(id),
        queue: keys.queue(&job.queue),
        queues: keys.queues(),
        record,
        payload: job.payload.as_str(),
        queue_name: job.queue.as_str(),
        prefix: keys.prefix(),
        ending: track,
        now_ms: chrono::Utc::now().timestamp_millis(),
        limits,
        limited: if limited { "1" } else { "0" },
    }
    .call()
    .invoke_async(con)
    .await?;
    Ok(n == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_exact_payload_bytes() {
        let rec = br#"{"queue":"q:1","run_at":"x","payload":{ "class":"A","args":[1.0e+20] }}"#;
        let j = HeldJob::from_record(rec).unwrap();
        assert_eq!(j.queue, "q:1");
        assert_eq!(j.payload, r#"{ "class":"A","args":[1.0e+20] }"#);
        assert!(HeldJob::from_record(br#"{"queue":"q","payload":null}"#).is_none());
        assert!(HeldJob::from_record(b"\xff").is_none());
    }
}
