//! Running one reserved job: decode, dispatch by class, time limit, panic capture, and the
//! completion (success, or the failure entry) that the next step writes.

use super::step::Completion;
use crate::registry::{panic, JobContext, JobError, Registry};
use crate::wire::{time, Failure, Payload, WorkerRecord};
use serde_json::value::RawValue;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Exception name of a job that ran over its time limit.
pub const TIMEOUT_EXCEPTION: &str = "Resq::JobTimeout";
/// Exception name of a job interrupted by TERM/INT (Ruby's, so dashboards group them).
pub const TERM_EXCEPTION: &str = "Resque::TermException";

/// Runs the job whose record is `record`, and says how it ended.
///
/// `abort` resolves when the job must be interrupted (shutdown); the job is then dropped and
/// recorded as a `Resque::TermException` failure.
pub async fn perform(
    registry: &Registry,
    record: Vec<u8>,
    worker: &Arc<str>,
    default_timeout: Option<Duration>,
    abort: impl Future<Output = ()>,
) -> Completion {
    let parsed = std::str::from_utf8(&record)
        .ok()
        .and_then(|t| WorkerRecord::parse(t).ok());
    let Some(rec) = parsed else {
        // The reserve script only writes records it built, so this is corruption by someone
        // else; keep what we can read.
        let err = JobError::new("Resq::MalformedPayload", "worker record is not valid JSON");
        let entry = failure_entry(None, "", worker, &err);
        return Completion::Failure { record, entry };
    };
    let payload = match Payload::from_raw(rec.payload.clone()) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            let err = JobError::new(
                "Resq::MalformedPayload",
                format!("{e}: {}", rec.payload.get()),
            );
            tracing::warn!(queue = %rec.queue, worker = %worker, error = %err, "malformed payload");
            let entry = failure_entry(None, &rec.queue, worker, &err);
            return Completion::Failure { record, entry };
        }
    };
    let span =
        tracing::info_span!("job", class = payload.class(), queue = %rec.queue, worker = %worker);
    let _e = span.enter();
    drop(_e);
    let started = Instant::now();
    let result = run(
        registry,
        &payload,
        &rec.queue,
        worker,
        default_timeout,
        abort,
    )
    .await;
    let secs = started.elapsed().as_secs_f64();
    match result {
        Ok(()) => {
            span.in_scope(|| tracing::info!(duration_s = secs, outcome = "success", "job done"));
            Completion::Success { record }
        }
        Err(err) => {
            span.in_scope(|| {
                tracing::warn!(duration_s = secs, outcome = "failure", exception = %err.exception, error = %err.message, "job failed")
            });
            let entry = failure_entry(Some(payload.raw()), &rec.queue, worker, &err);
            Completion::Failure { record, entry }
        }
    }
}

async fn run(
    registry: &Registry,
    payload: &Arc<Payload>,
    queue: &str,
    worker: &Arc<str>,
    default_timeout: Option<Duration>,
    abort: impl Future<Output = ()>,
) -> Result<(), JobError> {
    let Some(entry) = registry.get(payload.class()) else {
        return Err(JobError::new(
            "Resq::UnknownJobClass",
            format!("no handler registered for class {}", payload.class()),
        ));
    };
    let ctx = JobContext::new(payload.clone(), Arc::from(queue), worker.clone());
    let fut = panic::catch_async((entry.handler)(ctx));
    let limit = entry.timeout.or(default_timeout);
    let timed = async {
        match limit {
            Some(l) => tokio::time::timeout(l, fut).await.unwrap_or_else(|_| {
                let mut msg = format!("job exceeded its time limit of {}s", l.as_secs_f64());
                if entry.blocking {
                    msg.push_str(
                        " (blocking handler: it cannot be cancelled and may still be running)",
                    );
                }
                Err(JobError::new(TIMEOUT_EXCEPTION, msg))
            }),
            None => fut.await,
        }
    };
    tokio::select! {
        r = timed => r,
        _ = abort => Err(JobError::new(TERM_EXCEPTION, "SIGTERM")),
    }
}

/// The failure entry for `err`; `payload` is `None` when the job could not be parsed.
pub fn failure_entry(
    payload: Option<&RawValue>,
    queue: &str,
    worker: &str,
    err: &JobError,
) -> String {
    Failure {
        failed_at: time::failed_at(chrono::Utc::now()),
        payload,
        exception: err.exception.clone(),
        error: err.message.clone(),
        backtrace: err.backtrace.clone(),
        worker,
        queue,
    }
    .encode()
}
