//! What a layer around a job is: the [`Middleware`] trait, the rest of the chain it calls
//! ([`Next`]) and [`from_fn`]. Part of the job-handler API, next to [`JobContext`], because a
//! [`super::Registry`] holds the user's layers; resq's own layers, [`crate::middleware::Hooks`]
//! and the chain built from them are in [`crate::middleware`], which re-exports these.

use super::{Handler, JobContext, JobResult};
use futures::future::BoxFuture;
use std::sync::Arc;

/// Code that runs around every job (see [`crate::middleware`] for where it runs among resq's
/// own layers).
///
/// ```
/// use resq::middleware::{BoxFuture, Middleware, Next};
/// use resq::{JobContext, JobResult};
///
/// /// Logs every failure with the job's class.
/// struct ReportFailures;
///
/// impl Middleware for ReportFailures {
///     fn call<'a>(&'a self, ctx: JobContext, next: Next<'a>) -> BoxFuture<'a, JobResult> {
///         Box::pin(async move {
///             let class = ctx.class().to_string();
///             let outcome = next.run(ctx).await;
///             if let Err(e) = &outcome {
///                 eprintln!("{class} failed: {e}");
///             }
///             outcome
///         })
///     }
/// }
/// ```
pub trait Middleware: Send + Sync + 'static {
    /// Runs around the job: call `next.run(ctx)` to go on, or return without calling it to
    /// skip the job (it then counts as done). The result is the job's outcome: return it
    /// changed to change it (a failure's exception or message, a failure turned into a
    /// success, or the reverse).
    fn call<'a>(&'a self, ctx: JobContext, next: Next<'a>) -> BoxFuture<'a, JobResult>;
}

/// The rest of the chain, handed to a [`Middleware`].
pub struct Next<'a> {
    /// The layers still to run.
    layers: &'a [Arc<dyn Middleware>],
    /// The handler at the end.
    handler: &'a Handler,
}

impl<'a> Next<'a> {
    /// The chain of `layers` ending in `handler`.
    pub(crate) fn new(layers: &'a [Arc<dyn Middleware>], handler: &'a Handler) -> Self {
        Next { layers, handler }
    }

    /// Runs the rest of the chain (and the handler) with `ctx`.
    pub fn run(self, ctx: JobContext) -> BoxFuture<'a, JobResult> {
        match self.layers.split_first() {
            Some((first, rest)) => first.call(
                ctx,
                Next {
                    layers: rest,
                    handler: self.handler,
                },
            ),
            None => (self.handler)(ctx),
        }
    }
}

/// A [`Middleware`] from a function: `from_fn(|ctx, next| Box::pin(async move { … next.run(ctx).await … }))`.
pub fn from_fn<F>(f: F) -> impl Middleware
where
    F: for<'a> Fn(JobContext, Next<'a>) -> BoxFuture<'a, JobResult> + Send + Sync + 'static,
{
    FnMiddleware(f)
}

/// See [`from_fn`].
struct FnMiddleware<F>(F);

impl<F> Middleware for FnMiddleware<F>
where
    F: for<'a> Fn(JobContext, Next<'a>) -> BoxFuture<'a, JobResult> + Send + Sync + 'static,
{
    fn call<'a>(&'a self, ctx: JobContext, next: Next<'a>) -> BoxFuture<'a, JobResult> {
        (self.0)(ctx, next)
    }
}
