//! Middleware: code that runs around every job, and around every enqueue.
//!
//! A server-side [`Middleware`] gets the job's [`JobContext`] and the rest of the chain
//! ([`Next`]); it may act before, call `next.run(ctx)`, act after, look at the outcome and
//! change it — or not call `next` at all, which skips the job the way Resque's `DontPerform`
//! does (the job counts as done). A client-side [`EnqueueMiddleware`] does the same around an
//! enqueue (see [`enqueue`]). [`Hooks`] offers Resque's job hooks (`before_perform`,
//! `after_perform`, `on_failure`, `before_enqueue`, `after_enqueue`) on top.
//!
//! Everything cross-cutting that resq itself does around a job is a layer of the same chain,
//! in this order (outermost first). A layer with nothing to do for a job (no retry policy, no
//! time limit, metrics not served, an untracked job) hands it straight on, without a future
//! of its own:
//!
//! 1. **panic net** — a panic anywhere in the chain (a middleware's own) becomes a failure
//!    (only with middleware of yours: resq's own layers do not panic);
//! 2. **span** — one tracing span per job (class, queue, worker) and the outcome's log line
//!    with `duration_ms` (`span`);
//!    With the `otel` feature and the `OTEL_*` variables set, an **OpenTelemetry** layer
//!    follows: the job's consumer span, continuing the trace its payload carries (`otel`;
//!    see [`crate::otel`]);
//! 3. **metrics** — busy slots, processed/failed counts, the duration histogram (`metrics`);
//! 4. **tracking** — a tracked job's record ends completed (with its result), failed or
//!    killed, written with the completion (`tracking`; see [`crate::jobs`]);
//! 5. **retry** — a failure of a handler with a retry policy is retried through the delayed
//!    set with back-off, in resque-retry's keys (`retry`);
//! 6. **unique** — a unique job's lock is released when it ends (`unique`);
//! 7. **your middleware**, in the order added with [`crate::Registry::layer`];
//! 8. **time limit** — the handler's (or `JOB_TIMEOUT`'s) limit (`time_limit`);
//! 9. **panic capture** — the handler's panic becomes a `Resq::Panic` failure your
//!    middleware sees like any error;
//! 10. the handler.
//!
//! The handler is resolved **once**, before the chain, and travels in the context
//! ([`JobContext::class`], the per-handler options): a Rails ActiveJob wrapper payload resolves
//! to the handler registered under its `job_class`, so every layer (the retry policy, the time
//! limit, your middleware) sees the same handler.
//!
//! Layers that change what the job's completion writes to Redis (retry, unique) do not write
//! anything themselves: they attach what they decided to the context, and the worker writes it
//! with the job's completion, in the same atomic step.

pub mod enqueue;
pub mod hooks;
pub(crate) mod metrics;
#[cfg(feature = "otel")]
pub(crate) mod otel;
pub(crate) mod panics;
pub(crate) mod retry;
pub(crate) mod span;
pub(crate) mod time_limit;
pub(crate) mod tracking;
pub(crate) mod unique;

pub use enqueue::{EnqueueMiddleware, EnqueueNext, Outgoing};
/// The boxed future a middleware returns (`Box::pin(async move { … })`).
pub use futures::future::BoxFuture;
pub use hooks::Hooks;
// What a layer is belongs to the job-handler API (the registry holds the user's layers).
pub use crate::registry::layer::{from_fn, Middleware, Next};

use crate::registry::{Handler, JobContext, JobResult};
use std::sync::Arc;
use std::time::Duration;

/// The whole server-side chain of a worker: resq's layers around the user's, in the documented
/// order. Built once per worker, shared by its slots.
pub(crate) struct Chain {
    /// Every layer, outermost first.
    layers: Vec<Arc<dyn Middleware>>,
}

impl Chain {
    /// The chain for `user` layers, with `default_timeout` for handlers without their own.
    pub(crate) fn new(user: &[Arc<dyn Middleware>], default_timeout: Option<Duration>) -> Chain {
        let mut layers: Vec<Arc<dyn Middleware>> = Vec::with_capacity(user.len() + 8);
        if !user.is_empty() {
            // Without layers of yours, the net would only guard resq's own (which do not
            // panic): the handler's panics are captured innermost either way.
            layers.push(Arc::new(panics::PanicNet));
        }
        layers.push(Arc::new(span::Span));
        #[cfg(feature = "otel")]
        if let Some(o) = crate::otel::get() {
            layers.push(Arc::new(otel::Trace(o)));
        }
        layers.extend([
            Arc::new(metrics::Metrics) as Arc<dyn Middleware>,
            Arc::new(tracking::Tracking),
            Arc::new(retry::Retry),
            Arc::new(unique::Unique),
        ]);
        layers.extend(user.iter().cloned());
        layers.push(Arc::new(time_limit::TimeLimit(default_timeout)));
        layers.push(Arc::new(panics::PanicCapture));
        Chain { layers }
    }

    /// Runs the chain around `handler` for `ctx`.
    pub(crate) fn run<'a>(
        &'a self,
        handler: &'a Handler,
        ctx: JobContext,
    ) -> BoxFuture<'a, JobResult> {
        Next::new(&self.layers, handler).run(ctx)
    }
}
