//! The tracking layer: for a tracked job ([`crate::jobs`]), decides how its record ends ([`ending`]) —
//! completed (with the handler's result), failed (resque-status's message), killed (the
//! handler returned after being asked to stop) — and attaches it to the context; the worker
//! writes it with the job's completion, in the same call. A killed job is a success for
//! Resque (counted as processed, no failure entry), as resque-status makes it.

use super::{Middleware, Next};
use crate::jobs::{Ending, TrackEnd, KILLED};
use crate::registry::{JobContext, JobResult};
use futures::future::BoxFuture;

/// The layer.
pub(crate) struct Tracking;

impl Middleware for Tracking {
    fn call<'a>(&'a self, ctx: JobContext, next: Next<'a>) -> BoxFuture<'a, JobResult> {
        let Some(run) = ctx.tracked().cloned() else {
            return next.run(ctx);
        };
        Box::pin(async move {
            let outcome = next.run(ctx.clone()).await;
            let (ending, outcome) = ending(outcome);
            let end = TrackEnd {
                id: run.id.clone(),
                kind: run.kind.clone(),
                ending,
                result: run.take_result(),
                ttl_secs: run.ttl.as_secs(),
            };
            ctx.extras(|x| x.track = Some(Box::new(end)));
            outcome
        })
    }
}

/// How a tracked run ends, from what the handler (and the layers inside this one) returned —
/// the one rule, also applied by the worker to a run it aborted (`src/worker/perform.rs`),
/// which this layer never saw return: the record's ending, and the outcome for Resque (a
/// killed job succeeded). Whether a failure is retried (`retrying`) is the retry layer's
/// (`src/middleware/retry.rs`).
pub(crate) fn ending(outcome: JobResult) -> (Ending, JobResult) {
    match outcome {
        Err(e) if e.exception == KILLED => (Ending::Killed, Ok(())),
        Err(e) if e.is_dont_perform() => (Ending::Completed, Err(e)),
        Err(e) => (Ending::Failed(e.message.clone()), Err(e)),
        Ok(()) => (Ending::Completed, Ok(())),
    }
}
