//! The metrics layer: busy slots while a job runs, then processed/failed by queue and class and
//! the duration histogram (see [`crate::metrics`]; nothing when the `metrics` feature is off).

use super::{Middleware, Next};
use crate::registry::{JobContext, JobResult};
use futures::future::BoxFuture;
use std::time::Instant;

/// The layer.
pub(crate) struct Metrics;

impl Middleware for Metrics {
    fn call<'a>(&'a self, ctx: JobContext, next: Next<'a>) -> BoxFuture<'a, JobResult> {
        if !crate::metrics::on() {
            // Not counting: no future of its own around the job.
            return next.run(ctx);
        }
        Box::pin(async move {
            let _busy = crate::metrics::job_started();
            let started = Instant::now();
            let result = next.run(ctx.clone()).await;
            crate::metrics::job_finished(
                ctx.queue(),
                ctx.class(),
                result.is_ok(),
                started.elapsed().as_secs_f64(),
            );
            result
        })
    }
}
