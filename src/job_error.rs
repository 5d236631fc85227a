//! A job's failure: the exception name, message and backtrace that go into `<ns>:failed` (a
//! leaf: the handler API, the tracked-job layer and the worker all speak it; re-exported as
//! [`crate::JobError`]).

use std::fmt;

/// Resque's exception for a job its hooks chose not to perform.
const DONT_PERFORM: &str = "Resque::Job::DontPerform";

/// Why a job failed.
///
/// Any `std::error::Error` converts into it (`?` works in handlers): the exception name is the
/// error's Rust type path, the message its `Display`, the backtrace its `source()` chain, one
/// line each. [`JobError::msg`] gives Ruby's `RuntimeError` for a plain message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobError {
    /// Stable class-like name (`RuntimeError`, `Resq::Panic`, `std::io::error::Error`).
    pub exception: String,
    /// The message.
    pub message: String,
    /// Source chain, panic location, or other context: one line each.
    pub backtrace: Vec<String>,
}

impl JobError {
    /// A failure with an explicit exception name.
    pub fn new(exception: impl Into<String>, message: impl Into<String>) -> Self {
        JobError {
            exception: exception.into(),
            message: message.into(),
            backtrace: Vec::new(),
        }
    }

    /// A plain message, recorded as Ruby's `RuntimeError` (what `raise "msg"` gives).
    pub fn msg(message: impl Into<String>) -> Self {
        Self::new("RuntimeError", message)
    }

    /// Resque's `DontPerform`: returned by a `before_perform` hook (or any middleware) to skip
    /// the job, which then counts as done without running.
    pub fn dont_perform() -> Self {
        Self::new(DONT_PERFORM, "")
    }

    /// Whether this is [`JobError::dont_perform`].
    pub fn is_dont_perform(&self) -> bool {
        self.exception == DONT_PERFORM
    }

    /// Adds backtrace lines.
    pub fn with_backtrace(mut self, lines: Vec<String>) -> Self {
        self.backtrace = lines;
        self
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.exception, self.message)
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for JobError {
    fn from(e: E) -> Self {
        let mut backtrace = Vec::new();
        let mut source = e.source();
        while let Some(s) = source {
            backtrace.push(format!("caused by: {s}"));
            source = s.source();
        }
        let any: &dyn std::any::Any = &e;
        let exception = stable_name(any).unwrap_or_else(|| std::any::type_name::<E>().to_string());
        JobError {
            exception,
            message: e.to_string(),
            backtrace,
        }
    }
}

/// A stable, readable exception name for the errors handlers meet most, instead of a Rust type
/// path that changes with crate versions: Redis errors are named as redis-rb names them (so a
/// dashboard groups a Rust job's `Redis::CommandError` with a Ruby job's), JSON errors as
/// Ruby's `JSON::ParserError`, I/O errors as Ruby's `IOError`.
fn stable_name(e: &dyn std::any::Any) -> Option<String> {
    let redis = e.downcast_ref::<redis::RedisError>().or_else(|| {
        e.downcast_ref::<crate::Error>().and_then(|e| match e {
            crate::Error::Redis(r) => Some(r),
            _ => None,
        })
    });
    if let Some(r) = redis {
        return Some(redis_exception(r).to_string());
    }
    if e.is::<serde_json::Error>() {
        return Some("JSON::ParserError".into());
    }
    if e.is::<std::io::Error>() {
        return Some("IOError".into());
    }
    None
}

/// redis-rb's exception class for a Redis error.
pub(super) fn redis_exception(e: &redis::RedisError) -> &'static str {
    if e.is_connection_refusal() {
        "Redis::CannotConnectError"
    } else if e.is_timeout() {
        "Redis::TimeoutError"
    } else if e.is_io_error() || e.is_connection_dropped() {
        "Redis::ConnectionError"
    } else if e.code().is_some() {
        "Redis::CommandError"
    } else {
        "Redis::BaseError"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn errors_keep_type_and_chain() {
        let e: JobError = Outer(std::io::Error::other("inner")).into();
        assert!(e.exception.ends_with("Outer"));
        assert_eq!(e.message, "outer");
        assert_eq!(e.backtrace, vec!["caused by: inner"]);
    }

    #[test]
    fn redis_errors_have_stable_names() {
        let e: JobError = redis::make_extension_error("WRONGTYPE".into(), Some("x".into())).into();
        assert_eq!(e.exception, "Redis::CommandError");
        let refused =
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let e: JobError = refused.into();
        assert_eq!(e.exception, "Redis::CannotConnectError");
        let e: JobError = crate::Error::Redis(redis::RedisError::from(std::io::Error::from(
            std::io::ErrorKind::BrokenPipe,
        )))
        .into();
        assert_eq!(e.exception, "Redis::ConnectionError");
        let e: JobError = serde_json::from_str::<u8>("x").unwrap_err().into();
        assert_eq!(e.exception, "JSON::ParserError");
    }
}
