//! Running one reserved job: decode, dispatch by class, time limit, panic capture, and the
//! completion (success, or the failure entry) that the next step writes.

use super::step::{Completion, JobRef};
use crate::activejob;
use crate::registry::{panic, JobContext, JobError, Registry};
use crate::wire::{time, Failure, Payload, WorkerRecord};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Exception name of a job that ran over its time limit.
pub const TIMEOUT_EXCEPTION: &str = "Resq::JobTimeout";
/// Exception name of a job interrupted by TERM/INT (Ruby's, so dashboards group them).
pub const TERM_EXCEPTION: &str = "Resque::TermException";

/// A job a slot holds, ready to run.
#[derive(Debug)]
pub enum Reserved {
    /// Reserved and checked by the step script: its worker record's exact bytes.
    Record(Vec<u8>),
    /// Claimed, checked by the worker and promoted (see [`super::claim`]).
    Claimed {
        /// The decoded payload.
        payload: Payload,
        /// The queue it came from.
        queue: String,
        /// The claim's token, which names the job in its completion.
        token: String,
    },
}

/// Runs `job` and says how it ended.
///
/// `abort` resolves, with the name of the signal that asked for it (`SIGTERM`, `SIGUSR1`), when
/// the job must be interrupted; the job is then dropped and recorded as a
/// `Resque::TermException` failure whose message is that name.
pub async fn perform(
    registry: &Registry,
    job: Reserved,
    worker: &Arc<str>,
    default_timeout: Option<Duration>,
    abort: impl Future<Output = &'static str>,
) -> Completion {
    let (payload, queue, job) = match job {
        Reserved::Claimed {
            payload,
            queue,
            token,
        } => (Arc::new(payload), queue, JobRef::Token(token)),
        Reserved::Record(record) => match decode_record(record, worker) {
            Ok((payload, queue, record)) => (payload, queue, JobRef::Record(record)),
            Err(failed) => return failed,
        },
    };
    let rec_queue = queue;
    // One span per job: class, queue, worker, then duration and outcome once it ends.
    let span = tracing::info_span!(
        "job",
        class = payload.class(),
        queue = %rec_queue,
        worker = %worker,
        duration_s = tracing::field::Empty,
        outcome = tracing::field::Empty
    );
    let _busy = crate::metrics::job_started();
    let started = Instant::now();
    let result = tracing::Instrument::instrument(
        run(
            registry,
            &payload,
            &rec_queue,
            worker,
            default_timeout,
            abort,
        ),
        span.clone(),
    )
    .await;
    let secs = started.elapsed().as_secs_f64();
    let class = activejob::job_class_of(&payload).unwrap_or(payload.class());
    crate::metrics::job_finished(&rec_queue, class, result.is_ok(), secs);
    match result {
        Ok(()) => {
            span.record("duration_s", secs).record("outcome", "success");
            // Debug, not info: a line per successful job costs more CPU than the job's whole
            // Redis step (docs/performance.md); Ruby logs per job only when VERBOSE.
            span.in_scope(|| tracing::debug!(duration_s = secs, outcome = "success", "job done"));
            super::complete::success(registry, &payload, job)
        }
        Err(err) => {
            span.record("duration_s", secs).record("outcome", "failure");
            span.in_scope(|| {
                tracing::warn!(duration_s = secs, outcome = "failure", exception = %err.exception, error = %err.message, "job failed")
            });
            let entry = failure_entry(Some(payload.text()), &rec_queue, worker, &err);
            super::complete::failure(registry, &payload, &rec_queue, worker, job, entry, err)
        }
    }
}

/// The payload and queue of a record the step script wrote, or the failure completion of a
/// record that cannot be read after all.
fn decode_record(
    record: Vec<u8>,
    worker: &Arc<str>,
) -> Result<(Arc<Payload>, String, Vec<u8>), Completion> {
    let parsed = std::str::from_utf8(&record)
        .ok()
        .and_then(|t| WorkerRecord::parse(t).ok());
    let Some(rec) = parsed else {
        // The reserve script checks payloads with Lua's cjson, which also reads a few things
        // strict JSON does not (NaN, Infinity, hex numbers, raw control characters in
        // strings); such a record lands here. Keep its queue and text.
        let (queue, text) = salvage(&record);
        let err = JobError::new(
            "Resq::MalformedPayload",
            format!("payload is not valid JSON: {text}"),
        );
        tracing::warn!(queue = %queue, worker = %worker, "malformed payload");
        let entry = failure_entry(None, &queue, worker, &err);
        return Err(Completion::Failure {
            job: JobRef::Record(record),
            entry,
        });
    };
    match Payload::from_text(&rec.payload_text) {
        Ok(p) => Ok((Arc::new(p), rec.queue, record)),
        Err(e) => {
            let err = JobError::new(
                "Resq::MalformedPayload",
                format!("{e}: {}", rec.payload_text),
            );
            tracing::warn!(queue = %rec.queue, worker = %worker, error = %err, "malformed payload");
            let entry = failure_entry(None, &rec.queue, worker, &err);
            Err(Completion::Failure {
                job: JobRef::Record(record),
                entry,
            })
        }
    }
}

async fn run(
    registry: &Registry,
    payload: &Arc<Payload>,
    queue: &str,
    worker: &Arc<str>,
    default_timeout: Option<Duration>,
    abort: impl Future<Output = &'static str>,
) -> Result<(), JobError> {
    let ctx = JobContext::new(payload.clone(), Arc::from(queue), worker.clone());
    let (entry, ctx) = match registry.get(payload.class()) {
        Some(entry) => (entry, ctx),
        // Rails' ActiveJob wrapper: dispatch by its `job_class` (issue 8).
        None if activejob::is_wrapper(payload.class()) => activejob::route(registry, ctx)?,
        None => {
            return Err(JobError::new(
                "Resq::UnknownJobClass",
                format!("no handler registered for class {}", payload.class()),
            ))
        }
    };
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
        signal = abort => Err(JobError::new(TERM_EXCEPTION, signal)),
    }
}

/// The queue and payload text of a record built by the reserve script
/// (`{"queue":<json>,"run_at":"…","payload":<raw>}`) that strict JSON cannot read.
fn salvage(record: &[u8]) -> (String, String) {
    let text = String::from_utf8_lossy(record);
    let queue = text
        .strip_prefix(r#"{"queue":"#)
        .and_then(|rest| {
            serde_json::Deserializer::from_str(rest)
                .into_iter::<String>()
                .next()
                .and_then(Result::ok)
        })
        .unwrap_or_default();
    let payload = text
        .find(r#","payload":"#)
        .and_then(|i| text.get(i + 11..text.len().saturating_sub(1)))
        .unwrap_or(&text)
        .to_string();
    (queue, payload)
}

/// The failure entry for `err`; `payload` is `None` when the job could not be parsed.
pub fn failure_entry(payload: Option<&str>, queue: &str, worker: &str, err: &JobError) -> String {
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
