//! The tracking layer: for a tracked job ([`crate::jobs`]), decides how its record ends —
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
            let (ending, outcome) = match outcome {
                Err(e) if e.exception == KILLED => (Ending::Killed, Ok(())),
                Err(e) if e.is_dont_perform() => (Ending::Completed, Err(e)),
                Err(e) => (Ending::Failed(e.message.clone()), Err(e)),
                Ok(()) => (Ending::Completed, Ok(())),
            };
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
