//! Tracked jobs: an id, a state you can query, wait for and cancel, progress and a result
//! (docs/jobs.md).
//!
//! * A job is tracked when it is enqueued with tracking ([`crate::Client::enqueue_tracked`];
//!   its id travels in the payload field `resq_id`, which Resque, Jesque and node-resque
//!   ignore), or when its class is a resque-status job ([`crate::Registry::statused`]:
//!   `args[0]` is the id, `args[1]` the options; [`crate::Client::create_status`] enqueues one
//!   as resque-status's `create` does).
//! * resq's own tracked jobs keep their record in a hash, `<ns>:resq:job:<id>`, that each move
//!   of the job writes a few fields of, in the call that moves it (the library's `record.lua`);
//!   resque-status jobs keep resque-status's JSON record, `<ns>:status:<id>`, which Ruby reads
//!   and writes too (`status.lua`).
//! * Only finished jobs are indexed (`<ns>:resq:jobs:<state>`, by end time), and tags
//!   (`<ns>:resq:tag:<tag>`): a queued, scheduled, retrying or working job is found where it
//!   is — its queue (or a limit's held set), the delayed set, a worker's record.
//! * Query ([`crate::admin::Admin::job`], [`crate::admin::Admin::jobs`] and
//!   [`crate::admin::Admin::jobs_from`], [`crate::admin::Admin::job_counts`]), wait
//!   ([`crate::Client::wait`]), cancel ([`crate::Client::cancel`]); a running job reports
//!   progress and sees cancellation through its [`crate::JobContext`].
//! * Finished records expire (24 h by default, per class with [`crate::Registry::track_ttl`]).
//!
//! Modules: `state` ([`State`], [`JobStatus`]), `own` and `statused` (the two records read
//! into a [`JobStatus`]), `read` (records read from Redis), `record` (what the worker tells the
//! library), `running` (a job while it runs), `track` ([`Track`]: how a job is tracked when
//! it is enqueued; the enqueue, the wait and the client's cancel are the client's), `query`
//! (listing), `position` ([`JobPosition`]), `walk` and `places` (the sources a listing reads),
//! `counts`, `control` (cancel, purge).

mod control;
mod counts;
mod own;
mod places;
mod position;
mod query;
mod read;
pub(crate) mod record;
mod running;
mod state;
mod statused;
mod track;
mod walk;

pub use crate::wire::job_id::JobId;
pub use position::JobPosition;
pub use query::{JobFilter, JobPage};
pub use state::{BadField, Event, JobStatus, State};
pub use track::{IfDepFailed, Track};

pub(crate) use control::cancel;
pub use control::{Cancelled, Settling};
pub(crate) use record::new_status;
pub(crate) use record::{Ending, Kind, TrackEnd};
pub(crate) use running::{killed, TrackedRun, Tracker, KILLED};
pub(crate) use walk::index_keys;

use serde_json::Value;
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

/// The record a payload text may be tracked under, where the job's class is not known to be
/// statused: its `resq_id` (resq's own), else an `args[0]` of an id's shape (a resque-status
/// job, of the payload's class). The endings sent with it apply only to a record that exists.
pub(crate) fn tracked_in_payload(text: &str) -> Option<(JobId, Kind)> {
    if !text.contains("resq_id") && !text.contains("\"args\"") {
        return None;
    }
    let v: serde_json::Map<String, Value> = serde_json::from_str(text).ok()?;
    if let Some(id) = v
        .get("resq_id")
        .and_then(Value::as_str)
        .and_then(JobId::parse)
    {
        let kind = Kind::Tracked {
            attempt: None,
            key: String::new(),
        };
        return Some((id, kind));
    }
    let id = v
        .get("args")?
        .as_array()?
        .first()?
        .as_str()
        .and_then(JobId::parse)?;
    let class = v
        .get("class")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Some((
        id,
        Kind::Statused {
            class,
            id_in_args: true,
        },
    ))
}

/// The `r:<id>` / `s:<id>` the scheduler's move names a tracked item by ('' none).
pub(crate) fn item_ref(text: &str) -> String {
    match tracked_in_payload(text) {
        Some((id, Kind::Tracked { .. })) => crate::scripts::texts::item_ref(false, id.as_str()),
        Some((id, Kind::Statused { .. })) => crate::scripts::texts::item_ref(true, id.as_str()),
        None => String::new(),
    }
}

/// The ending of a job found in payload text `text` (by [`tracked_in_payload`]), or `None`
/// when the job is not tracked.
pub(crate) fn ending_in_payload(text: &str, ending: Ending, ttl: Duration) -> Option<String> {
    let (id, kind) = tracked_in_payload(text)?;
    Some(
        TrackEnd {
            id,
            kind,
            ending,
            result: None,
            ttl_secs: ttl.as_secs(),
        }
        .spec(chrono::Utc::now(), None),
    )
}

/// What a tracked job's record said when the step started it (the step's reply,
/// `r\t<attempt>\t<key>\t<batch>` or `s`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Started {
    /// A job resq tracks: the attempt this run is, its job key (`""` none) and its batch.
    Tracked {
        /// The attempt number (from 1).
        attempt: u64,
        /// The job key.
        key: String,
        /// The batch it is a member of.
        batch: Option<crate::wire::job_id::BatchId>,
    },
    /// A resque-status job.
    Statused,
}

impl Started {
    /// Reads the step's `r\t<attempt>\t<key>\t<batch>` or `s` (a job start,
    /// [`crate::scripts::texts::parse_start`]); `None` for anything else.
    pub(crate) fn parse(data: &[u8]) -> Option<Started> {
        Self::of(crate::scripts::texts::parse_start(data)?)
    }

    /// What a job start's text says of the run; `None` for `drop` and `absent`.
    fn of(text: crate::scripts::texts::StartText<'_>) -> Option<Started> {
        use crate::scripts::texts::StartText;
        match text {
            StartText::Statused => Some(Started::Statused),
            StartText::Tracked {
                attempt,
                key,
                batch,
            } => Some(Started::Tracked {
                attempt,
                key: key.to_string(),
                batch: crate::wire::job_id::BatchId::parse(batch),
            }),
            StartText::Drop | StartText::Absent(_) => None,
        }
    }
}

/// What the start of a claimed tracked job (its payload too large for the step to read) said:
/// `None` when its record says it was cancelled (it must not run), else what the step would
/// have said ([`Started`], `None` inside when its record could not be
/// written: the job runs all the same).
pub(crate) async fn start_claimed(
    con: &mut crate::conn::Conn,
    keys: &crate::keys::Keys,
    id: &JobId,
    statused: bool,
    class: &str,
    worker: &str,
) -> Option<Option<Started>> {
    let now = chrono::Utc::now().timestamp_millis();
    let key = if statused {
        keys.resque_status(id.as_str())
    } else {
        keys.job_record(id.as_str())
    };
    let reply: redis::RedisResult<String> = crate::scripts::JobStart {
        record: key,
        prefix: keys.prefix(),
        kind: if statused { "s" } else { "r" },
        id: id.as_str(),
        worker,
        now_ms: now,
        class,
    }
    .call()
    .invoke_async(con)
    .await;
    match reply {
        Ok(r) => match crate::scripts::texts::parse_start(r.as_bytes()) {
            Some(crate::scripts::texts::StartText::Drop) => None,
            Some(crate::scripts::texts::StartText::Absent(problem)) => {
                report_problem(problem);
                Some(None)
            }
            text => Some(text.and_then(Started::of)),
        },
        Err(e) => {
            report_problem(&format!("{id} {}", crate::conn::errors::display(&e)));
            Some(None)
        }
    }
}

/// Logs a tracked job whose record could not be written (the job itself moved as usual), at a
/// bounded rate: each problem line (it names its key) once per 10 s, and at most 20 lines per
/// 10 s in all (how many more were left out is said with the next line logged).
pub(crate) fn report_problem(problem: &str) {
    struct Seen {
        lines: std::collections::HashMap<String, std::time::Instant>,
        window: Option<std::time::Instant>,
        logged: u32,
        left_out: u64,
    }
    static SEEN: std::sync::Mutex<Option<Seen>> = std::sync::Mutex::new(None);
    const EVERY: Duration = Duration::from_secs(10);
    let mut guard = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    let seen = guard.get_or_insert_with(|| Seen {
        lines: std::collections::HashMap::new(),
        window: None,
        logged: 0,
        left_out: 0,
    });
    let now = std::time::Instant::now();
    if seen.window.is_none_or(|w| now >= w + EVERY) {
        seen.window = Some(now);
        seen.logged = 0;
        seen.lines.retain(|_, at| now < *at + EVERY);
    }
    for line in crate::scripts::texts::problem_lines(problem) {
        if seen.lines.get(line).is_some_and(|at| now < *at + EVERY) {
            continue;
        }
        if seen.logged >= 20 || seen.lines.len() >= 10_000 {
            seen.left_out += 1;
            continue;
        }
        seen.logged += 1;
        seen.lines.insert(line.to_string(), now);
        let left_out = std::mem::take(&mut seen.left_out);
        tracing::warn!(problem = line, left_out, "a tracked job's record, a workflow's bookkeeping or a limit's share could not be written (a key of the wrong type, or a record gone); the job itself moved as usual, and a share left behind is returned by a prune round once the key is usable (the same problem is logged once per 10 s, at most 20 a 10 s; left_out: how many were not logged before this one)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_found_in_payloads() {
        let id = "ba69034b39c05d28a5403ac10e276e79";
        let t = format!(r#"{{"class":"A","args":[1],"resq_id":"{id}"}}"#);
        let (found, kind) = tracked_in_payload(&t).unwrap();
        assert_eq!(found.as_str(), id);
        assert!(matches!(kind, Kind::Tracked { attempt: None, .. }));
        let s = format!(r#"{{"class":"S","args":["{id}",{{}}]}}"#);
        assert_eq!(
            tracked_in_payload(&s).unwrap().1,
            Kind::Statused {
                class: "S".into(),
                id_in_args: true
            }
        );
        assert_eq!(item_ref(&s), format!("s:{id}"));
        assert!(tracked_in_payload(r#"{"class":"A","args":["nope"]}"#).is_none());
        let p = crate::wire::Payload::parse(s.as_bytes()).unwrap();
        let statused = ["S".to_string()].into_iter().collect();
        assert!(tracked_id(&p, &statused).unwrap().1);
        assert!(tracked_id(&p, &Default::default()).is_none());
    }
}
