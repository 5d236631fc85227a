//! The span layer: one tracing span per job — class, queue, worker — and one log line for its
//! outcome with `duration_ms` (`debug` for a success: a line per job would cost more CPU than
//! the job's Redis step; `warn` for a failure, with its exception and message).

use super::{Middleware, Next};
use crate::registry::{JobContext, JobResult};
use futures::future::BoxFuture;
use std::time::Instant;

/// The layer.
pub(crate) struct Span;

impl Middleware for Span {
    fn call<'a>(&'a self, ctx: JobContext, next: Next<'a>) -> BoxFuture<'a, JobResult> {
        let span = tracing::info_span!(
            "job",
            class = ctx.class(),
            queue = ctx.queue(),
            worker = ctx.worker_id()
        );
        Box::pin(tracing::Instrument::instrument(
            async move {
                let started = Instant::now();
                let result = next.run(ctx).await;
                let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
                match &result {
                    Ok(()) => tracing::debug!(duration_ms, outcome = "success", "job done"),
                    Err(e) => tracing::warn!(
                        duration_ms,
                        outcome = "failure",
                        exception = %e.exception,
                        error = %e.message,
                        "job failed"
                    ),
                }
                result
            },
            span,
        ))
    }
}
