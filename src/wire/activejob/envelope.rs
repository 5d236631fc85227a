//! An ActiveJob-wrapped Resque payload, read: the job's metadata (what `job.serialize` writes
//! besides the arguments) and its arguments, serialized and decoded.
//!
//! Reading is as lenient as ActiveJob's own `deserialize`, which checks nothing but
//! `job_class`: a field of an unexpected type reads as absent.

use super::decode::{self, Decoded, Unknown};
use super::error::ActiveJobError;
use super::tags::WRAPPER_CLASS;
use crate::wire::{time, Payload};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};

/// Whether `class` is Rails' Resque wrapper class.
pub fn is_wrapper(class: &str) -> bool {
    class == WRAPPER_CLASS
}

/// The `job_class` of a wrapper payload (`None` for any other payload, or a wrapper without
/// one), read without decoding the arguments.
pub fn job_class_of(payload: &Payload) -> Option<&str> {
    if !is_wrapper(payload.class()) {
        return None;
    }
    match payload.args().first()?.get("job_class")? {
        Value::String(c) if !c.is_empty() => Some(c),
        _ => None,
    }
}

/// The job's metadata, as `ActiveJob::Core#serialize` writes it (Rails 6.1–8.1).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metadata {
    /// The ActiveJob class (`"SendInvoiceJob"`); the handler is looked up by it.
    pub job_class: String,
    /// ActiveJob's UUID for the job.
    pub job_id: Option<String>,
    /// The adapter's id (the Resque adapter never sets one).
    pub provider_job_id: Option<String>,
    /// The queue ActiveJob enqueued to.
    pub queue_name: Option<String>,
    /// The priority (the Resque adapter ignores it).
    pub priority: Option<i64>,
    /// How many times the job ran before (ActiveJob's retries re-enqueue with +1).
    pub executions: u64,
    /// Per-exception retry counts (`{"[Net::ReadTimeout]": 2}`).
    pub exception_executions: Map<String, Value>,
    /// The I18n locale of the enqueuer.
    pub locale: Option<String>,
    /// The `Time.zone` name of the enqueuer (`"UTC"`, `"Eastern Time (US & Canada)"`).
    pub timezone: Option<String>,
    /// When it was enqueued, as sent (`2026-11-21T19:15:33Z`; 7.1+ with nanoseconds).
    pub enqueued_at: Option<String>,
    /// When it was scheduled for, as sent (Rails 7.1+ only; `None` when not delayed).
    pub scheduled_at: Option<String>,
}

impl Metadata {
    /// [`Metadata::enqueued_at`] as a time, when it parses.
    pub fn enqueued_at_time(&self) -> Option<DateTime<Utc>> {
        self.enqueued_at.as_deref().and_then(time::parse_any)
    }

    /// [`Metadata::scheduled_at`] as a time, when it parses.
    pub fn scheduled_at_time(&self) -> Option<DateTime<Utc>> {
        self.scheduled_at.as_deref().and_then(time::parse_any)
    }
}

/// An ActiveJob job read from a wrapper payload.
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveJob {
    /// The metadata.
    meta: Metadata,
    /// The whole serialized job object (`args[0]`), custom keys included.
    data: Map<String, Value>,
    /// `arguments` as serialized.
    serialized: Vec<Value>,
    /// `arguments` decoded.
    decoded: Decoded,
}

impl ActiveJob {
    /// Reads the serialized job from a wrapper payload's `args[0]` (the class is not checked:
    /// see [`super::is_wrapper`]).
    pub fn from_payload(payload: &Payload) -> Result<Self, ActiveJobError> {
        match payload.args().first() {
            Some(Value::Object(data)) => Self::from_job_data(data.clone()),
            _ => Err(ActiveJobError::NoJobData),
        }
    }

    /// Reads a serialized job object (what `job.serialize` returns).
    pub fn from_job_data(data: Map<String, Value>) -> Result<Self, ActiveJobError> {
        let job_class = match data.get("job_class") {
            Some(Value::String(c)) if !c.is_empty() => c.clone(),
            _ => return Err(ActiveJobError::NoJobClass),
        };
        let serialized = match data.get("arguments") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(_) => return Err(ActiveJobError::ArgumentsNotArray),
        };
        let text = |k: &str| match data.get(k) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        let meta = Metadata {
            job_class,
            job_id: text("job_id"),
            provider_job_id: text("provider_job_id"),
            queue_name: text("queue_name"),
            priority: data.get("priority").and_then(Value::as_i64),
            executions: data.get("executions").and_then(Value::as_u64).unwrap_or(0),
            exception_executions: data
                .get("exception_executions")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            locale: text("locale"),
            timezone: text("timezone"),
            enqueued_at: text("enqueued_at"),
            scheduled_at: text("scheduled_at"),
        };
        let decoded = decode::decode(&serialized);
        Ok(ActiveJob {
            meta,
            data,
            serialized,
            decoded,
        })
    }

    /// The metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.meta
    }

    /// The ActiveJob class name.
    pub fn job_class(&self) -> &str {
        &self.meta.job_class
    }

    /// The arguments decoded into plain JSON (see `super::decode`).
    pub fn arguments(&self) -> &[Value] {
        &self.decoded.args
    }

    /// The arguments exactly as serialized (ActiveJob's conventions), for handlers that need
    /// what plain JSON loses (which keys were symbols, a Duration's parts, a custom object).
    pub fn serialized_arguments(&self) -> &[Value] {
        &self.serialized
    }

    /// Serialized objects kept as-is because no built-in serializer matches them.
    pub fn unknown(&self) -> &[Unknown] {
        &self.decoded.unknown
    }

    /// Whether the last argument was Ruby keyword arguments (`perform(a, b:)`).
    pub fn has_keywords(&self) -> bool {
        self.decoded.keywords
    }

    /// The whole serialized job object, including keys a job's own `serialize` added.
    pub fn job_data(&self) -> &Map<String, Value> {
        &self.data
    }
}
