//! The time-limit layer: the handler's own limit ([`crate::Registry::timeout`]) or the
//! worker's default (`JOB_TIMEOUT`); past it, the job fails with `Resq::JobTimeout`.

use super::{Middleware, Next};
use crate::registry::{JobContext, JobError, JobResult};
use futures::future::BoxFuture;
use std::time::Duration;

/// Exception name of a job that ran over its time limit.
pub(crate) const TIMEOUT_EXCEPTION: &str = "Resq::JobTimeout";

/// The layer, with the worker's default limit.
pub(crate) struct TimeLimit(pub Option<Duration>);

impl Middleware for TimeLimit {
    fn call<'a>(&'a self, ctx: JobContext, next: Next<'a>) -> BoxFuture<'a, JobResult> {
        let limit = ctx.handler_timeout().or(self.0);
        let Some(limit) = limit else {
            return next.run(ctx);
        };
        let blocking = ctx.handler_is_blocking();
        Box::pin(async move {
            match tokio::time::timeout(limit, next.run(ctx)).await {
                Ok(r) => r,
                Err(_) => {
                    let mut msg =
                        format!("job exceeded its time limit of {}s", limit.as_secs_f64());
                    if blocking {
                        msg.push_str(
                            " (blocking handler: it cannot be cancelled and may still be running)",
                        );
                    }
                    Err(JobError::new(TIMEOUT_EXCEPTION, msg))
                }
            }
        })
    }
}
