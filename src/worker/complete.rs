//! Endings that need more than the step's completion: retry with back-off (see
//! [`crate::registry::retry`]; the retry layer, `src/middleware/retry.rs`, decides whether
//! and when — this writes what it decided) and unique jobs (see [`crate::registry::unique`]).
//!
//! [`success`] and [`failure`] turn a job's result and what the chain's layers decided
//! ([`Extras`]: a retry plan, a lock to release) into a [`Completion`]: the plain variants when
//! nothing extra applies (the hot path), [`Completion::Extended`] otherwise.
//! The stepper applies an extended completion with the library's `complete` — one atomic step, like the
//! step's own completion — and then reserves with a plain step (so these jobs cost one
//! more round trip than others).

use super::perform::failure_entry;
use super::step::{Completion, JobRef, Stepper};
use crate::keys::Keys;
use crate::middleware::retry;
pub(crate) use crate::registry::extras::{Extras, RetryPlan};
use crate::registry::unique::UniqueMark;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value as RedisValue};

/// A completion with extras.
#[derive(Debug, Clone)]
pub(crate) struct Extended {
    /// The job it completes.
    pub job: JobRef,
    /// How it ended.
    pub outcome: Outcome,
    /// The unique job's lock to release (or keep, on a retry).
    pub unique: Option<UniqueMark>,
    /// A tracked job's end, written with the completion.
    pub track: Option<Box<crate::jobs::TrackEnd>>,
}

/// How an extended job ended.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// Succeeded; `retry_key` is resque-retry's logical key to clean, if the handler retries.
    Success {
        /// `resque-retry:<class>[:<digest>]`.
        retry_key: Option<String>,
    },
    /// Failed; with a plan, the failure may be retried.
    Failure {
        /// The failure entry as the plain path would write it.
        entry: String,
        /// The retry plan, when the handler has a policy.
        retry: Option<Box<RetryPlan>>,
    },
}

/// The completion of a job that succeeded.
pub(crate) fn success(extras: Extras, job: JobRef) -> Completion {
    if extras.is_empty() {
        let track = extras.track.map(|t| t.spec(chrono::Utc::now(), None));
        return Completion::Success { job, track };
    }
    Completion::Extended(Box::new(Extended {
        job,
        outcome: Outcome::Success {
            retry_key: extras.clear_retry,
        },
        unique: extras.unique,
        track: extras.track,
    }))
}

/// The completion of a job that failed (`entry` is its failure entry).
pub(crate) fn failure(extras: Extras, job: JobRef, entry: String) -> Completion {
    if extras.retry.is_none() && extras.unique.is_none() {
        let track = extras.track.map(|t| t.spec(chrono::Utc::now(), None));
        return Completion::Failure { job, entry, track };
    }
    Completion::Extended(Box::new(Extended {
        job,
        outcome: Outcome::Failure {
            entry,
            retry: extras.retry,
        },
        unique: extras.unique,
        track: extras.track,
    }))
}

/// Applies `ext` for the slot of `stepper`. Returns whether it was applied now (false: it had
/// been already).
pub(crate) async fn apply<C: ConnectionLike + Send>(
    con: &mut C,
    stepper: &Stepper,
    ext: &Extended,
    limited: bool,
) -> RedisResult<bool> {
    // A counter that keeps moving under us means another copy of the same job fails at the
    // same moment; a few rounds settle it, and the last one does not check.
    for round in 0..5 {
        let (applied, status) = attempt(con, stepper, ext, round < 4, limited).await?;
        if status != "conflict" {
            return Ok(applied);
        }
    }
    Ok(false)
}

/// One try; `cas` checks the counter was not changed since it was read.
async fn attempt<C: ConnectionLike + Send>(
    con: &mut C,
    stepper: &Stepper,
    ext: &Extended,
    cas: bool,
    limited: bool,
) -> RedisResult<(bool, String)> {
    let keys = stepper.keys();
    let id = stepper.id();
    let limits = stepper.limits_json();
    let (mode, ident): (&'static str, &[u8]) = match &ext.job {
        JobRef::Record(r) => ("r", r),
        JobRef::Token(t) => ("t", t.as_bytes()),
    };
    // Keys a call does not use are the slot's record key; the other defaults do nothing.
    let unused = keys.worker(id);
    let mut c = crate::scripts::Complete {
        worker: keys.worker(id),
        processed: keys.stat_processed(),
        processed_by: keys.stat_processed_by(id),
        failed_count: keys.stat_failed(),
        failed_by: keys.stat_failed_by(id),
        failed: keys.failed(),
        retry_counter: unused.clone(),
        retry_failure: unused.clone(),
        unique: unused.clone(),
        queues: unused.clone(),
        retry_queue: unused.clone(),
        bucket: unused.clone(),
        timestamps: unused.clone(),
        schedule: unused,
        token: keys.claim_token(id),
        ident,
        outcome: "",
        entry: String::new(),
        count_failed: if stepper.count_failed() { "1" } else { "0" },
        counter_seen: "-".into(),
        counter_new: String::new(),
        clear_counter: "0",
        unique_id: String::new(),
        retry_mode: "",
        retry_queue_name: String::new(),
        retry_payload: String::new(),
        due_s: 0,
        member: String::new(),
        failure_ttl_s: 0,
        counter_ttl_s: 0,
        delay_ms: 0,
        mode,
        prefix: keys.prefix(),
        ending: String::new(),
        now_ms: 0,
        limits: &limits,
        limited: if limited { "1" } else { "0" },
        sweep_ms: stepper.sweep().as_millis() as u64,
    };
    if let Some(u) = &ext.unique {
        c.unique = keys.unique(&u.key);
        c.unique_id = u.id.clone();
    }
    let mut retry_at = None;
    match &ext.outcome {
        Outcome::Success { retry_key } => {
            c.outcome = "success";
            if let Some(rk) = retry_key {
                c.retry_counter = keys.retry_attempts(rk);
                c.retry_failure = keys.retry_failure(rk);
                c.clear_counter = "1";
            }
        }
        Outcome::Failure { entry, retry: None } => {
            c.outcome = "failure";
            c.entry = entry.clone();
        }
        Outcome::Failure {
            retry: Some(plan), ..
        } => {
            c.retry_counter = keys.retry_attempts(&plan.retry_key);
            c.retry_failure = keys.retry_failure(&plan.retry_key);
            let current: Option<String> = redis::cmd("GET")
                .arg(&c.retry_counter)
                .query_async(con)
                .await?;
            // (The retry layer decides; this writes what it decided.)
            let decision = retry::decide(plan, current.as_deref(), chrono::Utc::now().timestamp());
            if cas {
                c.counter_seen = current.unwrap_or_default();
            }
            match decision {
                retry::Decision::Retry {
                    attempt,
                    delay,
                    at: ts,
                } => {
                    c.outcome = "retry";
                    retry_at = Some(ts);
                    c.entry = failure_entry(
                        Some(plan.raw.get()),
                        &plan.from_queue,
                        &plan.worker,
                        &plan.error,
                    );
                    c.counter_new = attempt.to_string();
                    c.retry_mode = if delay.is_zero() { "now" } else { "delayed" };
                    c.retry_queue_name = plan.queue.clone();
                    c.retry_payload = if delay.is_zero() {
                        plan.payload.clone()
                    } else {
                        plan.item.clone()
                    };
                    c.due_s = ts;
                    c.member = Keys::delayed_bucket_member(ts);
                    c.failure_ttl_s = delay.as_secs() * 2;
                    c.counter_ttl_s = (plan.policy.counter_ttl.as_secs() + delay.as_secs()).max(1);
                    c.delay_ms = delay.as_millis() as u64;
                    c.queues = keys.queues();
                    c.retry_queue = keys.queue(&plan.queue);
                    c.bucket = keys.delayed_bucket(ts);
                    c.timestamps = keys.timestamps(&plan.item);
                    c.schedule = keys.delayed_schedule();
                    tracing::info!(retry_key = %plan.retry_key, attempt, delay_ms = delay.as_millis() as u64, queue = %plan.queue, "job failed; retrying");
                }
                retry::Decision::GiveUp { message } => {
                    let mut last = plan.error.clone();
                    last.message = message;
                    c.outcome = "failure";
                    c.entry =
                        failure_entry(Some(plan.raw.get()), &plan.from_queue, &plan.worker, &last);
                    c.clear_counter = "1";
                }
            }
        }
    }
    let now = chrono::Utc::now();
    c.now_ms = now.timestamp_millis();
    if let Some(t) = &ext.track {
        c.ending = t.spec(now, retry_at);
    }
    let v: Vec<RedisValue> = c.call().invoke_async(con).await?;
    let applied = matches!(v.first(), Some(RedisValue::Int(1)));
    let status = match v.get(1) {
        Some(RedisValue::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(RedisValue::SimpleString(s)) => s.clone(),
        _ => String::new(),
    };
    if let Some(RedisValue::BulkString(p)) = v.get(2) {
        if !p.is_empty() {
            crate::jobs::report_problem(&String::from_utf8_lossy(p));
        }
    }
    Ok((applied, status))
}
