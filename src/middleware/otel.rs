//! The OpenTelemetry layer (feature `otel`, on only when the `OTEL_*` variables configure
//! tracing: see [`crate::otel`]): a consumer span per job, continuing the trace its payload
//! carries (top-level `traceparent`/`tracestate`, or an Active Job wrapper's `__otel_headers`)
//! as a child or a linked root; the span is current while the handler runs, so what the
//! handler enqueues through a [`crate::Client`] carries it on. A failure is recorded on the
//! span (an `exception` event, status Error).

use super::{Middleware, Next};
use crate::otel::{self, JobFacts, Otel};
use crate::registry::{JobContext, JobResult};
use futures::future::BoxFuture;
use opentelemetry::context::FutureExt as _;

/// The layer, over the process's pipeline.
pub(crate) struct Trace(pub(crate) &'static Otel);

impl Middleware for Trace {
    fn call<'a>(&'a self, ctx: JobContext, next: Next<'a>) -> BoxFuture<'a, JobResult> {
        let parent = otel::extract(ctx.payload().object());
        let job = ctx.activejob();
        let tracked = ctx.job_id().map(ToString::to_string);
        let facts = JobFacts {
            queue: ctx.queue(),
            class: ctx.class(),
            id: job
                .and_then(|j| j.metadata().job_id.as_deref())
                .or(tracked.as_deref()),
            attempt: job.map(|j| j.metadata().executions + 1),
        };
        let cx = self.0.start_process(&parent, &facts);
        Box::pin(async move {
            let result = next.run(ctx).with_context(cx.clone()).await;
            match &result {
                Ok(()) => otel::end(&cx, None),
                Err(e) => otel::end(&cx, Some((&e.exception, &e.message))),
            }
            result
        })
    }
}
