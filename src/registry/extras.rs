//! What a job's middleware layers decide for its completion ([`Extras`]: a retry plan, a
//! retry counter to clear, a unique lock, a tracked job's end), carried by its
//! [`super::JobContext`] to the worker, which writes it with the job's completion in the same
//! atomic step (`src/worker/perform.rs` chooses how: the step's own completion, or
//! `src/worker/complete.rs` for a failure a retry policy covers).

use super::retry::RetryPolicy;
use super::unique::UniqueMark;
use crate::job_error::JobError;
use serde_json::value::RawValue;
use std::sync::Arc;

/// Everything a retry needs, prepared when the job failed.
#[derive(Debug, Clone)]
pub(crate) struct RetryPlan {
    /// The handler's policy.
    pub policy: Arc<RetryPolicy>,
    /// resque-retry's logical key (`resque-retry:<class>[:<digest>]`).
    pub retry_key: String,
    /// The queue to retry on.
    pub queue: String,
    /// The resque-scheduler item (`{"class","args","queue"}` + extra payload fields).
    pub item: String,
    /// The payload for a retry without delay (`{"class","args"}` + extra fields).
    pub payload: String,
    /// The error, to restate in the final failure with the attempt count.
    pub error: JobError,
    /// The payload as reserved, for the final failure entry.
    pub raw: Box<RawValue>,
    /// The queue the job came from.
    pub from_queue: String,
    /// The worker id.
    pub worker: Arc<str>,
}

/// What the chain's layers decided for a job's completion (see [`crate::middleware`]): written
/// with the completion, in the same atomic step.
#[derive(Debug, Default, Clone)]
pub(crate) struct Extras {
    /// A failure to retry (the retry layer's plan).
    pub retry: Option<Box<RetryPlan>>,
    /// resque-retry's logical key whose attempt counter a success clears.
    pub clear_retry: Option<String>,
    /// The unique lock to release (or keep, when retried).
    pub unique: Option<UniqueMark>,
    /// A tracked job's end (the tracking layer's).
    pub track: Option<Box<crate::jobs::TrackEnd>>,
}
