//! The unique layer: a unique job's lock (see [`crate::client::Unique`]) is released when the
//! job ends — or kept, and extended over the delay, when it is retried. The layer reads the
//! mark the unique enqueue put in the payload and hands it to the completion, which releases
//! the lock in the same atomic step.

use super::{Middleware, Next};
use crate::registry::unique::UniqueMark;
use crate::registry::{JobContext, JobResult};
use futures::future::BoxFuture;

/// The layer.
pub(crate) struct Unique;

impl Middleware for Unique {
    fn call<'a>(&'a self, ctx: JobContext, next: Next<'a>) -> BoxFuture<'a, JobResult> {
        if let Some(mark) = UniqueMark::from_payload(ctx.payload()) {
            ctx.extras(|x| x.unique = Some(mark));
        }
        next.run(ctx)
    }
}
