//! Rails fleets: ActiveJob jobs enqueued through Rails' Resque adapter, run by Rust handlers,
//! and ActiveJob jobs enqueued from Rust for Rails workers.
//!
//! Rails pushes every job as `{"class":"ActiveJob::QueueAdapters::ResqueAdapter::JobWrapper",
//! "args":[<job.serialize>]}`. A resq worker with no handler under that wrapper name looks at
//! `args[0]["job_class"]` and runs the handler registered under it (`"SendInvoiceJob"`), with
//! [`crate::JobContext::args`] giving the arguments decoded from ActiveJob's conventions into
//! plain JSON and [`crate::JobContext::activejob`] the metadata. The payload itself is never
//! re-encoded: the worker record and any failure entry hold the wrapper bytes as reserved, so
//! a Rails-side retry from resque-web works.
//!
//! Reading a wrapper payload is the wire format's (`crate::wire::activejob`, which the worker's
//! dispatch needs: `tags` — the reserved keys and serializer names; `decode` — serialized
//! arguments → plain JSON; `envelope` — the serialized job read from a wrapper payload,
//! [`ActiveJob`], [`Metadata`]); routing it to its handler is the registry's
//! (`crate::registry::activejob`). Writing one is here:
//! * `arg` — Rust values → serialized arguments ([`Arg`]);
//! * `job` — a new job's `serialize` hash and payloads ([`NewJob`]);
//! * `enqueue` — pushing it, now or delayed ([`ActiveJobClient`]);
//! * `rails` — the Rails version a job is written for ([`Rails`]).

pub(crate) mod arg;
pub(crate) mod enqueue;
pub(crate) mod job;
pub(crate) mod rails;

pub use crate::wire::activejob::{
    is_wrapper, job_class_of, ActiveJob, ActiveJobError, Decoded, Metadata, Unknown, WRAPPER_CLASS,
};
pub use arg::{Arg, DurationUnit, Key};
pub use enqueue::{ActiveJobClient, Enqueued};
pub use job::{NewJob, Serialized};
pub use rails::{Rails, UnknownRails};
