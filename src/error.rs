//! The library's error type.

/// Everything that can go wrong in resq's library code.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration value is missing or malformed; `var` names the setting.
    #[error("{var}: {message}")]
    Config {
        /// The environment variable (or builder setting) at fault.
        var: &'static str,
        /// What is wrong and what to do.
        message: String,
    },
    /// Redis refused a command or the connection failed. Shown once, in words, naming the
    /// server or the key (`redis 127.0.0.1:6380: connection refused`, `WRONGTYPE at <key>: …`).
    #[error("{}", crate::conn::errors::display(.0))]
    Redis(#[from] redis::RedisError),
    /// A value read from Redis is not what the wire format says it must be.
    #[error("unexpected reply from redis: {0}")]
    Protocol(String),
    /// JSON encoding or decoding failed.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// An I/O error (signals, processes).
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// A producer request refused before anything was written (no class or queue, a Jesque
    /// time in the past, a queue key of the wrong type, a malformed schedule).
    #[error("rejected: {0}")]
    Rejected(String),
    /// A tracked job's parent ([`crate::jobs::Track::parent`], `--parent`) is no tracked job,
    /// or has ended: cancelling it would never reach the child. Nothing was enqueued.
    #[error("parent {0}; nothing was enqueued")]
    Parent(String),
    /// The Redis server cannot be used (too old).
    #[error("{0}")]
    Unsupported(String),
    /// A queue cannot be split as asked (its name, the number of shards); nothing was written.
    #[error("split: {0}")]
    Split(#[from] crate::splits::SplitError),
    /// An ActiveJob job cannot be read or written.
    #[error("activejob: {0}")]
    ActiveJob(#[from] crate::wire::activejob::ActiveJobError),
}

/// Result with resq's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
