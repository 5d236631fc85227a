//! Routing a wrapper payload to the handler registered under its ActiveJob class.
//!
//! The worker calls [`route`] only when no handler is registered under the payload's class
//! itself, so an application can still take over the wrapper class wholesale.

use super::envelope::ActiveJob;
use super::tags::WRAPPER_CLASS;
use crate::registry::{Entry, JobContext, JobError, Registry};
use std::sync::Arc;

/// Whether `class` is Rails' Resque wrapper class.
pub fn is_wrapper(class: &str) -> bool {
    class == WRAPPER_CLASS
}

/// Reads the ActiveJob job in `ctx`'s (wrapper) payload and finds the handler registered under
/// its `job_class`; returns it with `ctx` carrying the job (decoded arguments, metadata).
///
/// Errors: `Resq::MalformedPayload` when `args[0]` is not a serialized job,
/// `Resq::UnknownJobClass` when no handler has the job's class name.
pub fn route(registry: &Registry, ctx: JobContext) -> Result<(&Entry, JobContext), JobError> {
    let job = ActiveJob::from_payload(ctx.payload())
        .map_err(|e| JobError::new("Resq::MalformedPayload", e.to_string()))?;
    let Some(entry) = registry.get(job.job_class()) else {
        return Err(JobError::new(
            "Resq::UnknownJobClass",
            format!(
                "no handler registered for ActiveJob class {} (payload class {WRAPPER_CLASS})",
                job.job_class()
            ),
        ));
    };
    if !job.unknown().is_empty() {
        tracing::warn!(
            job_class = job.job_class(),
            unknown = ?job.unknown(),
            "ActiveJob arguments kept as serialized: no built-in serializer matches them"
        );
    }
    Ok((entry, ctx.with_activejob(Arc::new(job))))
}
