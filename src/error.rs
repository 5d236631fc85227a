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
    /// A feature that writes keys of several hash slots in one step (tracked jobs with a job
    /// key, unique jobs, delayed jobs, batches and flows, limits, Jesque's zset queues,
    /// resque-status jobs) asked of a namespace
    /// spread over a Redis Cluster's slots (one without a hash tag): refused before anything
    /// was written.
    #[error(
        "{feature}: not available on namespace {namespace:?}, which has no hash tag and so is \
         spread over the Redis Cluster's slots, where this would write keys of several slots \
         in one step; use a hash-tagged namespace such as \"{{{namespace}}}\" for it \
         (docs/cluster.md). Nothing was written"
    )]
    Spread {
        /// What was asked (`tracked jobs with a job key`, `delayed jobs`, …).
        feature: &'static str,
        /// The namespace.
        namespace: String,
    },
    /// A queue cannot be split as asked (its name, the number of shards); nothing was written.
    #[error("split: {0}")]
    Split(#[from] crate::splits::SplitError),
    /// An ActiveJob job cannot be read or written.
    #[error("activejob: {0}")]
    ActiveJob(#[from] crate::wire::activejob::ActiveJobError),
}

/// Result with resq's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Refuses `feature` on a namespace spread over a Redis Cluster's slots
/// ([`crate::keys::Keys::is_spread`]) with [`Error::Spread`]: what writes keys of several slots
/// in one step (tracked and unique jobs, batches and flows, limits, Jesque's zset queues) is
/// not available there. Called before anything is written.
pub(crate) fn not_spread(keys: &crate::keys::Keys, feature: &'static str) -> Result<()> {
    if keys.is_spread() {
        return Err(Error::Spread {
            feature,
            namespace: keys.namespace().to_string(),
        });
    }
    Ok(())
}
