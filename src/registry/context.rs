//! What a handler receives: the job's args, its whole payload, where it came from.

use super::JobError;
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
}

impl JobContext {
    /// A context for `payload` reserved from `queue` by `worker`.
    pub fn new(payload: Arc<Payload>, queue: Arc<str>, worker: Arc<str>) -> Self {
        JobContext {
            payload,
            queue,
            worker,
        }
    }

    /// The class name.
    pub fn class(&self) -> &str {
        self.payload.class()
    }

    /// Positional arguments.
    pub fn args(&self) -> &[Value] {
        self.payload.args()
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
