//! A job's failure: the exception name, message and backtrace that go into `<ns>:failed`.

use std::fmt;

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
        JobError {
            exception: std::any::type_name::<E>().to_string(),
            message: e.to_string(),
            backtrace,
        }
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
}
