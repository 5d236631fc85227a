//! What a handler receives: the job's args, its whole payload, where it came from.

use super::JobError;
use crate::activejob::ActiveJob;
use crate::wire::Payload;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::sync::Arc;

/// The job being performed.
#[derive(Clone, Debug)]
pub struct JobContext {
    /// The decoded payload (raw bytes kept).
    payload: Arc<Payload>,
    /// Queue it was reserved from.
    queue: Arc<str>,
    /// Id of the slot running it.
    worker: Arc<str>,
    /// The ActiveJob job, when the payload is Rails' wrapper dispatched by its `job_class`.
    activejob: Option<Arc<ActiveJob>>,
}

impl JobContext {
    /// A context for `payload` reserved from `queue` by `worker`.
    pub fn new(payload: Arc<Payload>, queue: Arc<str>, worker: Arc<str>) -> Self {
        JobContext {
            payload,
            queue,
            worker,
            activejob: None,
        }
    }

    /// The same context for an ActiveJob-wrapped payload dispatched by its `job_class`.
    pub fn with_activejob(mut self, job: Arc<ActiveJob>) -> Self {
        self.activejob = Some(job);
        self
    }

    /// The ActiveJob job (metadata, decoded and serialized arguments) when the payload is
    /// Rails' `JobWrapper` dispatched by its `job_class`; `None` otherwise.
    pub fn activejob(&self) -> Option<&ActiveJob> {
        self.activejob.as_deref()
    }

    /// The class name the job was dispatched by: the payload's class, or for an ActiveJob job
    /// its `job_class` (`payload().class()` is then the wrapper).
    pub fn class(&self) -> &str {
        match &self.activejob {
            Some(job) => job.job_class(),
            None => self.payload.class(),
        }
    }

    /// Positional arguments: the payload's, or for an ActiveJob job its arguments decoded
    /// into plain JSON (see [`crate::activejob::decode`]).
    pub fn args(&self) -> &[Value] {
        match &self.activejob {
            Some(job) => job.arguments(),
            None => self.payload.args(),
        }
    }

    /// Jesque's named arguments (`vars`), when present.
    pub fn vars(&self) -> Option<&Map<String, Value>> {
        self.payload.vars()
    }

    /// The whole payload object, extra fields included.
    pub fn payload(&self) -> &Payload {
        &self.payload
    }

    /// The queue the job came from.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The worker (slot) id running it.
    pub fn worker_id(&self) -> &str {
        &self.worker
    }

    /// Decodes the positional args into `T` (a tuple, a `Vec`, or a struct that reads a
    /// sequence); a mismatch is a `Resq::InvalidArgs` failure.
    pub fn decode_args<T: DeserializeOwned>(&self) -> Result<T, JobError> {
        let args = Value::Array(self.args().to_vec());
        serde_json::from_value(args)
            .map_err(|e| JobError::new("Resq::InvalidArgs", format!("{}: {e}", self.class())))
    }

    /// Decodes the first positional arg into `T`.
    pub fn arg<T: DeserializeOwned>(&self, index: usize) -> Result<T, JobError> {
        let v = self.args().get(index).cloned().unwrap_or(Value::Null);
        serde_json::from_value(v).map_err(|e| {
            JobError::new(
                "Resq::InvalidArgs",
                format!("{} argument {index}: {e}", self.class()),
            )
        })
    }
}
