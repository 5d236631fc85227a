//! The JSON shapes and time strings of Resque and Jesque, parsed and written byte-compatibly.
//!
//! * [`payload`] — a job as it sits in a queue (`{"class","args"}`, Jesque's `vars`, extras).
//! * [`record`] — `<ns>:worker:<id>`, the job a worker is running.
//! * [`failure`] — an entry of `<ns>:failed`.
//! * [`time`] — every time format, written and read.

pub mod failure;
pub mod payload;
pub mod record;
pub mod time;

pub use failure::Failure;
pub use payload::{Payload, PayloadError};
pub use record::WorkerRecord;
