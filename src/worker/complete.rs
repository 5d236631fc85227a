//! The ending that needs more than the step's completion: a failure of a handler with a retry
//! policy, retried with back-off or given up (see [`crate::registry::retry`]; the retry layer,
//! `src/middleware/retry.rs`, decides whether and when — this writes what it decided, reading
//! resque-retry's attempt counter in the same compare-and-set round).
//!
//! Every other ending is the step's own completion, chosen in `src/worker/perform.rs` — a
//! success under a retry policy and a unique job's lock included (what those delete rides in
//! the step, `ends.lua`). The stepper applies an extended completion with the library's
//! `complete` — one atomic step, like the step's own completion — and then reserves with a
//! plain step (so a failure a policy covers costs one more round trip than others).
//!
//! On a spread cluster namespace ([`spread_completion`]) the same decision becomes the step's
//! own failure completion, whose entry is a retry entry for the slot's outbox
//! (`super::step::outbox`): the writes to resque-retry's keys and the queue or delayed set,
//! in other slots, follow the step.

use super::perform::failure_entry;
use super::step::outbox::RetryEntry;
use super::step::{Completion, JobRef, Stepper};
use crate::keys::Keys;
use crate::middleware::retry;
pub(crate) use crate::registry::extras::RetryPlan;
use crate::registry::unique::UniqueMark;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value as RedisValue};

/// A failure a retry policy covers, with what the chain's layers decided.
#[derive(Debug, Clone)]
pub(crate) struct Extended {
    /// The job it completes.
    pub job: JobRef,
    /// The retry plan.
    pub retry: Box<RetryPlan>,
    /// The unique job's lock to release (or keep, on a retry).
    pub unique: Option<UniqueMark>,
    /// A tracked job's end, written with the completion.
    pub track: Option<Box<crate::jobs::TrackEnd>>,
}

/// The completion of a job that failed under retry plan `retry` (its failure entry is made
/// when the plan is decided: a final one says how many runs it had).
pub(crate) fn retrying(
    retry: Box<RetryPlan>,
    unique: Option<UniqueMark>,
    track: Option<Box<crate::jobs::TrackEnd>>,
    job: JobRef,
) -> Completion {
    Completion::Extended(Box::new(Extended {
        job,
        retry,
        unique,
        track,
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
    let plan = &ext.retry;
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
            c.entry = retry_entry(plan);
            c.counter_new = attempt.to_string();
            c.retry_mode = if delay.is_zero() { "now" } else { "delayed" };
            c.retry_queue_name = plan.queue.clone();
            c.retry_payload = retry_job(plan, delay).to_string();
            c.due_s = ts;
            c.member = Keys::delayed_bucket_member(ts);
            c.failure_ttl_s = failure_ttl_s(delay);
            c.counter_ttl_s = counter_ttl_s(plan, delay);
            c.delay_ms = delay.as_millis() as u64;
            c.queues = keys.queues();
            c.retry_queue = keys.queue(&plan.queue);
            c.bucket = keys.delayed_bucket(ts);
            c.timestamps = keys.timestamps(&plan.item);
            c.schedule = keys.delayed_schedule();
            tracing::info!(retry_key = %plan.retry_key, attempt, delay_ms = delay.as_millis() as u64, queue = %plan.queue, "job failed; retrying");
        }
        retry::Decision::GiveUp { message } => {
            c.outcome = "failure";
            c.entry = final_entry(plan, message);
            c.clear_counter = "1";
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

/// The failure entry a retried attempt keeps in `failure-<key>`.
fn retry_entry(plan: &RetryPlan) -> String {
    failure_entry(
        Some(plan.raw.get()),
        &plan.from_queue,
        &plan.worker,
        &plan.error,
    )
}

/// The final failure entry of a job given up on, with the decision's `message`.
fn final_entry(plan: &RetryPlan, message: String) -> String {
    let mut last = plan.error.clone();
    last.message = message;
    failure_entry(Some(plan.raw.get()), &plan.from_queue, &plan.worker, &last)
}

/// `failure-<key>`'s TTL (s) for a retry after `delay` (0: not written).
fn failure_ttl_s(delay: std::time::Duration) -> u64 {
    delay.as_secs() * 2
}

/// The attempt counter's TTL (s) for a retry after `delay`.
fn counter_ttl_s(plan: &RetryPlan, delay: std::time::Duration) -> u64 {
    (plan.policy.counter_ttl.as_secs() + delay.as_secs()).max(1)
}

/// What a retry after `delay` files: the payload pushed now, or the delayed item.
fn retry_job(plan: &RetryPlan, delay: std::time::Duration) -> &str {
    if delay.is_zero() {
        &plan.payload
    } else {
        &plan.item
    }
}

/// On a spread namespace (`docs/cluster.md`): the step completion of `ext` — a failure whose
/// entry, pushed into the slot's outbox with the job's removal, is the decided retry or give-up
/// ([`RetryEntry`]), which the outbox's mover applies to resque-retry's keys and the queue or
/// the delayed set (other slots) after the step. The counter is read here, before the step, and
/// not compared again: two copies of one job failing at once may both count the same attempt
/// (last writer wins).
pub(crate) async fn spread_completion<C: ConnectionLike + Send>(
    con: &mut C,
    stepper: &Stepper,
    ext: &Extended,
) -> RedisResult<Completion> {
    let keys = stepper.keys();
    let plan = &ext.retry;
    let current: Option<String> = redis::cmd("GET")
        .arg(keys.retry_attempts(&plan.retry_key))
        .query_async(con)
        .await?;
    let now = chrono::Utc::now();
    let decision = retry::decide(plan, current.as_deref(), now.timestamp());
    let mut retry_at = None;
    let entry = match decision {
        retry::Decision::Retry { attempt, delay, at } => {
            retry_at = Some(at);
            tracing::info!(retry_key = %plan.retry_key, attempt, delay_ms = delay.as_millis() as u64, queue = %plan.queue, "job failed; retrying");
            RetryEntry::Retry {
                key: plan.retry_key.clone(),
                attempt,
                counter_ttl: counter_ttl_s(plan, delay),
                failure: retry_entry(plan),
                failure_ttl: failure_ttl_s(delay),
                queue: plan.queue.clone(),
                job: retry_job(plan, delay).to_string(),
                due: if delay.is_zero() { 0 } else { at },
            }
        }
        retry::Decision::GiveUp { message } => RetryEntry::GiveUp {
            key: plan.retry_key.clone(),
            failure: final_entry(plan, message),
        },
    };
    Ok(Completion::Failure {
        job: ext.job.clone(),
        entry: entry.encode(),
        track: ext.track.as_ref().map(|t| t.spec(now, retry_at)),
        ends: None,
    })
}
