//! Client-side middleware: code that runs around every enqueue made through a
//! [`crate::Client`]'s Resque-form methods (`enqueue`, `enqueue_to`, `enqueue_front`,
//! `enqueue_at`, `enqueue_in`), in the order added with [`crate::Client::layer`], outermost
//! first.
//!
//! A layer sees the job about to be written ([`Outgoing`]: queue, class, args, extra payload
//! fields, due time), may change it (a field every peer ignores, a different queue), and calls
//! `next.run(job)` to go on — or returns `Ok(false)` without calling it to drop the enqueue, as
//! a Resque `before_enqueue` hook returning `false` does. The result says whether the job was
//! written. Jesque-form, batch, raw and unique enqueues write exactly what they are given and
//! do not run the chain.

use crate::error::Result;
use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use serde_json::{Map, Value};
use std::sync::Arc;

/// A job about to be enqueued.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    /// The queue.
    pub queue: String,
    /// The class name.
    pub class: String,
    /// Positional arguments.
    pub args: Vec<Value>,
    /// Payload fields besides `class` and `args` (written after them, in this order); Ruby
    /// Resque, Jesque and node-resque ignore fields they do not know.
    pub extra: Map<String, Value>,
    /// When it is due (`None`: now; a time not after now enqueues at once).
    pub at: Option<DateTime<Utc>>,
    /// Tracking (an id, tags, a job key), for a job enqueued with
    /// [`crate::Client::enqueue_tracked`]; its id is also in `extra` as `resq_id`.
    pub track: Option<crate::jobs::Track>,
    /// The shard key of a job for a split queue (docs/cluster.md, "Split queues"): the job
    /// goes to shard `crc32(key) % N` of `queue` (round robin without one); unused for a queue
    /// that is not split.
    pub shard_key: Option<String>,
}

/// Code that runs around every enqueue (see the [module docs](self)).
pub trait EnqueueMiddleware: Send + Sync + 'static {
    /// Runs around the enqueue: call `next.run(job)` to go on; the result says whether the job
    /// was written.
    fn call<'a>(&'a self, job: Outgoing, next: EnqueueNext<'a>) -> BoxFuture<'a, Result<bool>>;
}

/// The write at the end of a client's chain.
pub(crate) type Terminal<'a> = dyn Fn(Outgoing) -> BoxFuture<'a, Result<bool>> + Send + Sync + 'a;

/// The rest of the enqueue chain, handed to an [`EnqueueMiddleware`].
pub struct EnqueueNext<'a> {
    /// The layers still to run.
    layers: &'a [Arc<dyn EnqueueMiddleware>],
    /// The write.
    terminal: &'a Terminal<'a>,
}

impl<'a> EnqueueNext<'a> {
    /// The chain of `layers` ending in `terminal`.
    pub(crate) fn new(
        layers: &'a [Arc<dyn EnqueueMiddleware>],
        terminal: &'a Terminal<'a>,
    ) -> Self {
        EnqueueNext { layers, terminal }
    }

    /// Runs the rest of the chain and the write.
    pub fn run(self, job: Outgoing) -> BoxFuture<'a, Result<bool>> {
        match self.layers.split_first() {
            Some((first, rest)) => first.call(
                job,
                EnqueueNext {
                    layers: rest,
                    terminal: self.terminal,
                },
            ),
            None => (self.terminal)(job),
        }
    }
}
