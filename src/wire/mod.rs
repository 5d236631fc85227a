//! The JSON shapes and time strings of Resque and Jesque, parsed and written byte-compatibly.
//!
//! * [`payload`] — a job as it sits in a queue (`{"class","args"}`, Jesque's `vars`, extras).
//! * [`record`] — `<ns>:worker:<id>`, the job a worker is running.
//! * [`failure`] — an entry of `<ns>:failed`.
//! * [`time`] — every time format, written and read.
//! * `activejob` — Rails' ActiveJob wrapper payloads, read.
//! * `encode` / `number` — the bytes a producer writes: payloads and resque-scheduler items,
//!   floats spelled as the reading peer's JSON library spells them ([`number::FloatFormat`]).

pub(crate) mod activejob;
pub(crate) mod encode;
pub(crate) mod failure;
pub(crate) mod job_id;
pub(crate) mod number;
pub(crate) mod payload;
pub(crate) mod record;
pub mod time;

pub(crate) use failure::Failure;
pub(crate) use payload::Payload;
pub(crate) use record::WorkerRecord;
