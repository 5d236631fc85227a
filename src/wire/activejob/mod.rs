//! Rails' ActiveJob jobs as they sit in a Resque payload: the wrapper class, the serialized
//! job in its `args[0]` and ActiveJob's argument conventions, read into plain JSON. The worker
//! reads them to dispatch a wrapper payload by its `job_class` (`crate::registry`); writing
//! them, and the public API, is [`crate::activejob`].
//!
//! * `tags` — the reserved keys and serializer names;
//! * `decode` — serialized arguments → plain JSON;
//! * `envelope` — the serialized job read from a wrapper payload ([`ActiveJob`]).

pub(crate) mod decode;
pub(crate) mod envelope;
mod error;
pub(crate) mod tags;

pub use decode::{Decoded, Unknown};
pub use envelope::{is_wrapper, job_class_of, ActiveJob, Metadata};
pub use error::ActiveJobError;
pub use tags::WRAPPER_CLASS;
