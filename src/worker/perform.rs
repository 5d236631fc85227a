//! Running one reserved job: decode it, resolve its handler once, run the middleware chain
//! around it (see [`crate::middleware`]), and turn the outcome into the completion the next
//! step writes — the step's own, with what its end deletes besides the job, for every ending
//! but a failure a retry policy covers ([`super::complete`]).

use super::step::{Completion, Ends, JobRef, Started};
use crate::middleware::Chain;
use crate::registry::{JobContext, JobError, Registry};
use crate::wire::{time, Failure, Payload, WorkerRecord};
use std::future::Future;
use std::sync::Arc;

/// Exception name of a job interrupted by TERM/INT (Ruby's, so dashboards group them).
pub(crate) const TERM_EXCEPTION: &str = "Resque::TermException";

/// A job a slot holds, ready to run.
#[derive(Debug)]
pub(crate) enum Reserved {
    /// Reserved and checked by the step: its worker record's exact bytes, and what a tracked
    /// job's record said when the step started it.
    Record(Vec<u8>, Option<Started>),
    /// Claimed, checked by the worker and promoted (see [`super::claim`]).
    Claimed {
        /// The decoded payload.
        payload: Payload,
        /// The queue it came from.
        queue: String,
        /// The claim's token, which names the job in its completion.
        token: String,
        /// What a tracked job's record said when it started.
        started: Option<Started>,
    },
}

/// Runs `job` through the middleware `chain` and says how it ended.
///
/// The handler is resolved once ([`Registry::resolve`]); a job whose class has no handler runs
/// the chain around a handler that fails with `Resq::UnknownJobClass`, so it is logged and
/// counted like any failure. `abort` resolves, with the name of the signal that asked for it
/// (`SIGTERM`, `SIGUSR1`), when the job must be interrupted; the job is then dropped and
/// recorded as a `Resque::TermException` failure whose message is that name.
pub(crate) async fn perform(
    chain: &Chain,
    registry: &Registry,
    tracker: Option<&Arc<crate::jobs::Tracker>>,
    job: Reserved,
    worker: &Arc<str>,
    abort: impl Future<Output = &'static str>,
    gates: Option<&super::class_gate::ClassGates>,
) -> Completion {
    let (payload, queue, job, started) = match job {
        Reserved::Claimed {
            payload,
            queue,
            token,
            started,
        } => (Arc::new(payload), queue, JobRef::Token(token), started),
        Reserved::Record(record, started) => match decode_record(record, worker) {
            Ok((payload, queue, record)) => (payload, queue, JobRef::Record(record), started),
            Err(failed) => {
                if let Some(g) = gates {
                    g.forget(worker);
                }
                return failed;
            }
        },
    };
    let ctx = JobContext::new(payload.clone(), Arc::from(queue.as_str()), worker.clone());
    let (handler, ctx) = match registry.resolve(ctx) {
        Ok((entry, ctx)) => (entry.handler.clone(), ctx),
        Err(refused) => {
            let (err, ctx) = *refused;
            (refusing(err), ctx)
        }
    };
    let tracked = crate::jobs::tracked_id(&payload, registry.statused_set());
    let handler = if tracked.is_none() && registry.statused_set().contains(payload.class()) {
        // A resque-status job without its id: it cannot be followed, so it does not run.
        refusing(JobError::new(
            "Resq::BadJobId",
            format!(
                "{} is a resque-status job: args[0] must be its id (32 lowercase hex characters), not {}",
                payload.class(),
                payload.args().first().map_or("nothing".to_string(), |a| a.to_string())
            ),
        ))
    } else {
        handler
    };
    // Followed only when the step wrote its record's start (a job whose record is gone runs
    // untracked).
    let kind = match (&tracked, started) {
        (
            Some((_, false)),
            Some(Started::Tracked {
                attempt,
                key,
                batch,
            }),
        ) => Some((
            crate::jobs::Kind::Tracked {
                attempt: Some(attempt),
                key,
            },
            batch,
        )),
        // (A resq job of an earlier build whose record is resque-status's JSON is followed
        // there: track.lua.)
        (Some((_, id_in_args)), Some(Started::Statused)) => Some((
            crate::jobs::Kind::Statused {
                class: payload.class().to_string(),
                id_in_args: *id_in_args,
            },
            None,
        )),
        _ => None,
    };
    let ctx = match (tracker, tracked, kind) {
        (Some(t), Some((id, _)), Some((kind, batch))) => {
            let run = t.begin(id, kind, ctx.handler_track_ttl(), batch);
            ctx.with_tracked(run)
        }
        _ => ctx,
    };
    // On a spread namespace, a class limit's unit first (class_gate.rs): held while the
    // handler runs, back when it ends or is dropped.
    let run = async {
        let _unit = match gates {
            Some(g) => g.admit(worker, payload.class(), &queue).await,
            None => None,
        };
        chain.run(&handler, ctx.clone()).await
    };
    let result = tokio::select! {
        r = run => r,
        signal = abort => {
            tracing::warn!(class = ctx.class(), queue = %queue, worker = %worker, signal, "job aborted");
            Err(JobError::new(TERM_EXCEPTION, signal))
        }
    };
    let mut extras = ctx.take_extras();
    if let (Some(run), Err(err), None) = (ctx.tracked(), &result, &extras.track) {
        // Aborted: the tracking layer never saw an outcome; its rule decides all the same.
        let (ending, _) = crate::middleware::tracking::ending(Err(err.clone()));
        extras.track = Some(Box::new(crate::jobs::TrackEnd {
            id: run.id.clone(),
            kind: run.kind.clone(),
            ending,
            result: None,
            ttl_secs: run.ttl.as_secs(),
        }));
    }
    // Resque's DontPerform from any middleware: skipped, counts as done.
    let failed = match result {
        Ok(()) => None,
        Err(err) if err.is_dont_perform() => None,
        Err(err) => Some(err),
    };
    let track = extras.track;
    let spec = |t: Option<Box<crate::jobs::TrackEnd>>| t.map(|t| t.spec(chrono::Utc::now(), None));
    // The step's own completion, with what the end deletes besides the job (a retry policy's
    // keys on a success, a unique job's lock); a failure a retry policy covers is decided and
    // written apart (complete.rs).
    match (failed, extras.retry) {
        (None, _) => Completion::Success {
            job,
            track: spec(track),
            ends: Ends::of(extras.clear_retry, extras.unique),
        },
        (Some(_), Some(plan)) => super::complete::retrying(plan, extras.unique, track, job),
        (Some(err), None) => Completion::Failure {
            job,
            entry: failure_entry(Some(payload.text()), &queue, worker, &err),
            track: spec(track),
            ends: Ends::of(None, extras.unique),
        },
    }
}

/// A handler that fails with `err` (a job whose handler could not be resolved).
fn refusing(err: JobError) -> crate::registry::Handler {
    Arc::new(move |_ctx| {
        let err = err.clone();
        Box::pin(async move { Err(err) })
    })
}

/// The payload and queue of a record the step wrote, or the failure completion of a
/// record that cannot be read after all.
fn decode_record(
    record: Vec<u8>,
    worker: &Arc<str>,
) -> Result<(Arc<Payload>, String, Vec<u8>), Completion> {
    let parsed = std::str::from_utf8(&record)
        .ok()
        .and_then(|t| WorkerRecord::parse(t).ok());
    let Some(rec) = parsed else {
        // The step checks payloads with Lua's cjson, which also reads a few things
        // strict JSON does not (NaN, Infinity, hex numbers, raw control characters in
        // strings); such a record lands here. Keep its queue and text.
        let (queue, text) = salvage(&record);
        let err = JobError::new(
            "Resq::MalformedPayload",
            format!("payload is not valid JSON: {text}"),
        );
        tracing::warn!(queue = %queue, worker = %worker, "malformed payload");
        let entry = failure_entry(None, &queue, worker, &err);
        let track = crate::jobs::ending_in_payload(
            &text,
            crate::jobs::Ending::Failed(err.message.clone()),
            crate::jobs::DEFAULT_TTL,
        );
        return Err(Completion::Failure {
            job: JobRef::Record(record),
            entry,
            track,
            ends: None,
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
            let track = crate::jobs::ending_in_payload(
                &rec.payload_text,
                crate::jobs::Ending::Failed(err.message.clone()),
                crate::jobs::DEFAULT_TTL,
            );
            Err(Completion::Failure {
                job: JobRef::Record(record),
                entry,
                track,
                ends: None,
            })
        }
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
pub(crate) fn failure_entry(
    payload: Option<&str>,
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
