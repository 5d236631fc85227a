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
    let count_failed = stepper.count_failed();
    let unused = keys.worker(id);
    let mut k: Vec<String> = vec![
        keys.worker(id),
        keys.stat_processed(),
        keys.stat_processed_by(id),
        keys.stat_failed(),
        keys.stat_failed_by(id),
        keys.failed(),
    ];
    k.resize(14, unused.clone());
    k.push(keys.claim_token(id));
    // ARGV[2..=16] after the record; defaults are "nothing to do".
    // `a[n]` is ARGV[n] (ARGV[1], the record, is sent as bytes); defaults do nothing.
    let mut a: Vec<String> = vec![String::new(); 24];
    a[21] = stepper.limits_json().to_string();
    a[22] = if limited { "1" } else { "0" }.into();
    a[23] = stepper.sweep().as_millis().to_string();
    a[4] = if count_failed { "1" } else { "0" }.into();
    a[5] = "-".into();
    a[7] = "0".into();
    a[12] = "0".into();
    a[14] = "0".into();
    a[15] = "0".into();
    a[16] = "0".into();
    if let Some(u) = &ext.unique {
        k[8] = keys.unique(&u.key);
        a[8] = u.id.clone();
    }
    let mut retry_at = None;
    match &ext.outcome {
        Outcome::Success { retry_key } => {
            a[2] = "success".into();
            if let Some(rk) = retry_key {
                k[6] = keys.retry_attempts(rk);
                k[7] = keys.retry_failure(rk);
                a[7] = "1".into();
            }
        }
        Outcome::Failure { entry, retry: None } => {
            a[2] = "failure".into();
            a[3] = entry.clone();
        }
        Outcome::Failure {
            retry: Some(plan), ..
        } => {
            k[6] = keys.retry_attempts(&plan.retry_key);
            k[7] = keys.retry_failure(&plan.retry_key);
            let current: Option<String> = redis::cmd("GET").arg(&k[6]).query_async(con).await?;
            // (The retry layer decides; this writes what it decided.)
            let decision = retry::decide(plan, current.as_deref(), chrono::Utc::now().timestamp());
            if cas {
                a[5] = current.unwrap_or_default();
            }
            match decision {
                retry::Decision::Retry {
                    attempt,
                    delay,
                    at: ts,
                } => {
                    a[2] = "retry".into();
                    retry_at = Some(ts);
                    a[3] = failure_entry(
                        Some(plan.raw.get()),
                        &plan.from_queue,
                        &plan.worker,
                        &plan.error,
                    );
                    a[6] = attempt.to_string();
                    a[9] = if delay.is_zero() { "now" } else { "delayed" }.into();
                    a[10] = plan.queue.clone();
                    a[11] = if delay.is_zero() {
                        plan.payload.clone()
                    } else {
                        plan.item.clone()
                    };
                    a[12] = ts.to_string();
                    a[13] = Keys::delayed_bucket_member(ts);
                    a[14] = (delay.as_secs() * 2).to_string();
                    a[15] = (plan.policy.counter_ttl.as_secs() + delay.as_secs())
                        .max(1)
                        .to_string();
                    a[16] = delay.as_millis().to_string();
                    k[9] = keys.queues();
                    k[10] = keys.queue(&plan.queue);
                    k[11] = keys.delayed_bucket(ts);
                    k[12] = keys.timestamps(&plan.item);
                    k[13] = keys.delayed_schedule();
                    tracing::info!(retry_key = %plan.retry_key, attempt, delay_ms = delay.as_millis() as u64, queue = %plan.queue, "job failed; retrying");
                }
                retry::Decision::GiveUp { message } => {
                    let mut last = plan.error.clone();
                    last.message = message;
                    a[2] = "failure".into();
                    a[3] =
                        failure_entry(Some(plan.raw.get()), &plan.from_queue, &plan.worker, &last);
                    a[7] = "1".into();
                }
            }
        }
    }
    let (mode, ident): (&str, &[u8]) = match &ext.job {
        JobRef::Record(r) => ("r", r),
        JobRef::Token(t) => ("t", t.as_bytes()),
    };
    a[17] = mode.into();
    let now = chrono::Utc::now();
    a[18] = keys.prefix().to_string();
    a[20] = now.timestamp_millis().to_string();
    if let Some(t) = &ext.track {
        a[19] = t.spec(now, retry_at);
    }
    let mut inv = crate::scripts::COMPLETE.prepare_invoke();
    for key in &k {
        inv.key(key);
    }
    inv.arg(ident);
    for arg in &a[2..] {
        inv.arg(arg.as_str());
    }
    let v: Vec<RedisValue> = inv.invoke_async(con).await?;
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
