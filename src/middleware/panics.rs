//! The panic layers: [`PanicCapture`], innermost, turns the handler's panic into a
//! `Resq::Panic` failure that the middleware around it sees like any error; [`PanicNet`],
//! outermost, does the same for a panic in a middleware, so nothing in the chain can take a
//! slot down.

use super::{Middleware, Next};
use crate::registry::{panic, JobContext, JobResult};
use futures::future::BoxFuture;

/// Innermost: the handler's panics.
pub(crate) struct PanicCapture;

impl Middleware for PanicCapture {
    fn call<'a>(&'a self, ctx: JobContext, next: Next<'a>) -> BoxFuture<'a, JobResult> {
        Box::pin(panic::catch_async(next.run(ctx)))
    }
}

/// Outermost: a middleware's panics.
pub(crate) struct PanicNet;

impl Middleware for PanicNet {
    fn call<'a>(&'a self, ctx: JobContext, next: Next<'a>) -> BoxFuture<'a, JobResult> {
        Box::pin(panic::catch_async(next.run(ctx)))
    }
}
