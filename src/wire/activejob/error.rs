//! What can go wrong reading or writing an ActiveJob job.

/// Why an ActiveJob payload cannot be read, or a job cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActiveJobError {
    /// The wrapper's `args[0]` is missing or not an object.
    #[error("ActiveJob wrapper payload has no serialized job object in args[0]")]
    NoJobData,
    /// The serialized job has no `job_class` string.
    #[error("serialized ActiveJob job has no job_class")]
    NoJobClass,
    /// The serialized job's `arguments` is present but not an array.
    #[error("serialized ActiveJob arguments must be an array")]
    ArgumentsNotArray,
    /// A hash argument uses a key ActiveJob reserves for its own markers.
    #[error("can't serialize a Hash with reserved key {0:?}")]
    ReservedKey(String),
    /// A value the targeted Rails version cannot deserialize (e.g. a Range for Rails 6.1).
    #[error("{what} is not supported by ActiveJob {rails}")]
    Unsupported {
        /// The kind of value.
        what: &'static str,
        /// The targeted Rails version.
        rails: &'static str,
    },
    /// A value that does not have the shape its type requires.
    #[error("invalid {what}: {value}")]
    Invalid {
        /// The kind of value.
        what: &'static str,
        /// The offending text.
        value: String,
    },
}
