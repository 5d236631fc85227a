//! Tracked jobs: an id, a state you can query, wait for and cancel, progress and a result — in
//! resque-status's layout, so resque-status's Ruby readers and web tab see resq's jobs and resq
//! sees theirs (docs/jobs.md).
//!
//! * A job is tracked when it is enqueued with tracking ([`crate::Client::enqueue_tracked`];
//!   its id travels in the payload field `resq_id`, which Resque, Jesque and node-resque
//!   ignore), or when its class is a resque-status job ([`crate::Registry::statused`]: `args[0]`
//!   is the id, `args[1]` the options; [`crate::Client::create_status`] enqueues one as
//!   resque-status's `create` does).
//! * Its record is `<ns>:status:<id>`: resque-status's JSON status, plus resq's `resq` object
//!   (state, queue, class, worker, attempts, times, tags, job key, history). Every change is
//!   written by the script that moves the job (enqueue, reserve, completion, retry, delayed
//!   move, requeue, prune), in the same call.
//! * Query ([`crate::admin::Admin::job`], [`crate::admin::Admin::jobs`],
//!   [`crate::admin::Admin::job_counts`]), wait ([`crate::Client::wait`]), cancel
//!   ([`crate::Client::cancel`]); a running job reports progress and sees cancellation through
//!   its [`crate::JobContext`].
//! * Finished records expire (24 h by default, per class with
//!   [`crate::Registry::track_ttl`]); the indexes forget them with them.
//!
//! Modules: `id` ([`JobId`]), `state` ([`State`], [`JobStatus`]), `record` (the texts written),
//! `running` (a job while it runs), `enqueue`, `query`, `control`, `wait`.

mod control;
mod enqueue;
mod id;
mod query;
pub(crate) mod record;
mod running;
mod state;
mod wait;

pub use enqueue::Track;
pub use id::JobId;
pub use query::{JobFilter, JobPage};
pub use state::{Event, JobStatus, State};

pub use control::Cancelled;
#[cfg(feature = "cli")]
pub(crate) use enqueue::tracked_reply;
pub(crate) use record::{Ending, TrackEnd};
pub(crate) use running::{killed, TrackedRun, Tracker, KILLED};

use serde_json::{json, Value};
use std::time::Duration;

/// How long a finished record is kept by default (24 h).
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);

/// The largest result kept by default (64 KiB of JSON).
pub const DEFAULT_RESULT_MAX: usize = 64 * 1024;

/// The tracked id of a payload and whether it is a resque-status job: its `resq_id`, or
/// `args[0]` when its class is one of `statused`.
pub(crate) fn tracked_id(
    payload: &crate::wire::Payload,
    statused: &std::collections::HashSet<String>,
) -> Option<(JobId, bool)> {
    if let Some(id) = payload
        .object()
        .get("resq_id")
        .and_then(Value::as_str)
        .and_then(JobId::parse)
    {
        return Some((id, false));
    }
    if statused.contains(payload.class()) {
        let id = payload.args().first()?.as_str().and_then(JobId::parse)?;
        return Some((id, true));
    }
    None
}

/// The id a payload text may be tracked under: its `resq_id`, else an `args[0]` of an id's shape
/// (a resque-status job). Used where the job's class is not known to be statused: the
/// transitions sent with it apply only to an existing record in the expected state.
pub(crate) fn id_in_payload(text: &str) -> Option<JobId> {
    if !text.contains("resq_id") && !text.contains("\"args\"") {
        return None;
    }
    let v: serde_json::Map<String, Value> = serde_json::from_str(text).ok()?;
    if let Some(id) = v
        .get("resq_id")
        .and_then(Value::as_str)
        .and_then(JobId::parse)
    {
        return Some(id);
    }
    v.get("args")?
        .as_array()?
        .first()?
        .as_str()
        .and_then(JobId::parse)
}

/// The transition of a running job put back at the head of its queue (at-least-once).
pub(crate) fn requeued_spec(id: &JobId) -> String {
    json!({
        "id": id.as_str(),
        "state": "queued",
        "event": {"event": "requeued"},
        "only_if": ["working"],
    })
    .to_string()
}

/// The transition of a running job whose worker died (found by pruning).
pub(crate) fn died_spec(id: &JobId, worker: &str, ttl: Duration) -> String {
    let why = format!("worker {worker} died while running it");
    TrackEnd {
        id: id.clone(),
        ending: Ending::Failed(why),
        result: None,
        ttl_secs: ttl.as_secs(),
    }
    .spec_only_working(chrono::Utc::now())
}

/// The start of a claimed job (its payload too large for the reserve script to read):
/// `name` is abbreviated to `Class(…)`.
pub(crate) fn started_spec(
    id: &JobId,
    class: &str,
    worker: &str,
    queue: &str,
    now_ms: i64,
) -> String {
    json!({
        "id": id.as_str(),
        "state": "working",
        "set": [["name", crate::client::encode::to_json(&format!("{class}(…)"), crate::client::FloatFormat::RubyJsonGem)]],
        "event": {"event": "started", "worker": worker},
        "extra": {"worker": worker, "started_at": now_ms, "queue": queue, "class": class},
        "attempts_inc": true,
        "create": true,
        "only_if": ["", "queued", "scheduled", "working", "retrying", "completed", "failed", "killed"],
    })
    .to_string()
}

/// Marks a claimed tracked job working (its payload was too large for the reserve script);
/// `false` when its record says it was cancelled: it must not run.
pub(crate) async fn start_claimed(
    con: &mut crate::conn::Conn,
    keys: &crate::keys::Keys,
    id: &JobId,
    class: &str,
    worker: &str,
    queue: &str,
) -> bool {
    let now = chrono::Utc::now().timestamp_millis();
    let reply: redis::RedisResult<String> = crate::scripts::TRACK_APPLY
        .arg(keys.prefix())
        .arg(started_spec(id, class, worker, queue, now))
        .arg(now)
        .invoke_async(con)
        .await;
    match reply {
        Ok(r) => r != "skip",
        Err(e) => {
            report_problem(&format!("{id} {}", crate::conn::errors::display(&e)));
            true
        }
    }
}

/// The end of a job whose payload the worker cannot read after the reserve script marked it
/// working (`text`, when known, is searched for its id).
pub(crate) fn ending_of_unreadable(message: &str, text: Option<&str>) -> Option<String> {
    let id = id_in_payload(text?)?;
    Some(
        TrackEnd {
            id,
            ending: Ending::Failed(message.to_string()),
            result: None,
            ttl_secs: DEFAULT_TTL.as_secs(),
        }
        .spec_only_working(chrono::Utc::now()),
    )
}

/// Logs a tracked job whose record could not be written (the job itself moved as usual), at a
/// bounded rate.
pub(crate) fn report_problem(problem: &str) {
    static DUE: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);
    let mut due = DUE.lock().unwrap_or_else(|p| p.into_inner());
    let now = std::time::Instant::now();
    if due.is_none_or(|d| now >= d) {
        *due = Some(now + Duration::from_secs(10));
        tracing::warn!(problem, "a tracked job's record or a limit's share could not be written (a key of the wrong type); the job itself moved as usual, and a share left behind is returned by a prune round once the key is usable (repeats within 10 s are not logged)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_found_in_payloads() {
        let id = "ba69034b39c05d28a5403ac10e276e79";
        let t = format!(r#"{{"class":"A","args":[1],"resq_id":"{id}"}}"#);
        assert_eq!(id_in_payload(&t).unwrap().as_str(), id);
        let s = format!(r#"{{"class":"S","args":["{id}",{{}}]}}"#);
        assert_eq!(id_in_payload(&s).unwrap().as_str(), id);
        assert!(id_in_payload(r#"{"class":"A","args":["nope"]}"#).is_none());
        let p = crate::wire::Payload::parse(s.as_bytes()).unwrap();
        let statused = ["S".to_string()].into_iter().collect();
        assert!(tracked_id(&p, &statused).unwrap().1);
        assert!(tracked_id(&p, &Default::default()).is_none());
    }
}
