//! Routing a Rails ActiveJob wrapper payload to the handler registered under its
//! `job_class` (the payload's format is read by [`crate::wire::activejob`]).
//!
//! The worker calls [`route`] only when no handler is registered under the payload's class
//! itself, so an application can still take over the wrapper class wholesale.

use super::{Entry, JobContext, JobError, Registry};
use crate::wire::activejob::{ActiveJob, WRAPPER_CLASS};
use std::sync::Arc;

/// Reads the ActiveJob job in `ctx`'s (wrapper) payload and finds the handler registered under
/// its `job_class`; returns it with `ctx` carrying the job (decoded arguments, metadata).
///
/// Errors: `Resq::MalformedPayload` when `args[0]` is not a serialized job,
/// `Resq::UnknownJobClass` when no handler has the job's class name.
pub(crate) fn route(
    registry: &Registry,
    ctx: JobContext,
) -> Result<(Arc<Entry>, JobContext), JobError> {
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
        tracing::debug!(
            job_class = job.job_class(),
            unknown = ?job.unknown(),
            "ActiveJob arguments kept as serialized: no built-in serializer matches them"
        );
    }
    Ok((entry.clone(), ctx.with_activejob(Arc::new(job))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::activejob::job_class_of;
    use crate::wire::Payload;

    fn entry_for<'r>(registry: &'r Registry, payload: &Payload) -> Option<&'r Arc<Entry>> {
        registry.entry_for(payload)
    }

    #[test]
    fn entries_are_found_by_job_class_unless_the_wrapper_has_one() {
        let wrapped = Payload::parse(
            format!(r#"{{"class":"{WRAPPER_CLASS}","args":[{{"job_class":"A"}}]}}"#).as_bytes(),
        )
        .unwrap();
        let plain = Payload::parse(br#"{"class":"A","args":[]}"#).unwrap();
        assert_eq!(job_class_of(&wrapped), Some("A"));
        assert_eq!(job_class_of(&plain), None);
        let ok = |_ctx: JobContext| async { Ok(()) };
        let r = Registry::new()
            .handler("A", ok)
            .timeout("A", std::time::Duration::from_secs(3));
        assert_eq!(
            entry_for(&r, &wrapped).and_then(|e| e.timeout),
            Some(std::time::Duration::from_secs(3))
        );
        let r = Registry::new().handler(WRAPPER_CLASS, ok);
        assert!(entry_for(&r, &wrapped).is_some_and(|e| e.timeout.is_none()));
        assert!(entry_for(&Registry::new(), &plain).is_none());
    }
}
