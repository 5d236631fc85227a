//! The runtime: N slots in one process, each a Resque worker of its own.
//!
//! * [`config`] — [`Config`], every setting of a worker process (and the constructors of the
//!   client, admin and scheduler settings from one).
//! * [`builder`] — [`WorkerBuilder`]: the configuration and the handlers of a worker.
//! * [`launcher`] — the process: registration, heartbeat, signals, slots, shutdown.
//! * [`slot`] — one worker: reserve → perform → finish/fail, in a loop.
//! * [`step`] — the one Lua script that finishes a job and reserves the next.
//! * [`batch`] — sends the steps of all slots ready at the same moment as one call.
//! * [`fetch`] — wake-ups: idle slots pick up jobs at once, on any of 1,000 queues, without
//!   polling.
//! * [`perform`] — runs a handler with panic capture and time limit.
//! * [`class_gate`] — a spread namespace's class limits: a unit before a handler runs.
//! * [`lifecycle`] — register / unregister.
//! * [`heartbeat`] — the heartbeat thread.
//! * [`prune`] — removing dead workers (Ruby's rules, Ruby's lock).
//! * [`requeue`] — at-least-once: interrupted jobs back to the head of their queue.
//! * [`shutdown`] — the shutdown phases slots obey.
//! * [`complete`] — endings with a retry or a unique lock (one more atomic script).
//! * [`jesque`] — Jesque delayed/recurring zset queues, for workers told about them.
//! * [`claim`] — payloads too large (or unusual) to check inside Redis: claimed, checked by the
//!   worker, promoted.
//! * [`tracking`] — invalidation messages that wake idle slots whatever the number of queues.
//! * `admin` — what the worker adds to [`crate::admin::Admin`]: a pruning round (`resq prune`).

mod admin;
pub(crate) mod batch;
pub(crate) mod builder;
pub(crate) mod claim;
pub(crate) mod class_gate;
pub(crate) mod complete;
pub(crate) mod config;
pub(crate) mod fetch;
pub(crate) mod heartbeat;
pub(crate) mod jesque;
pub(crate) mod launcher;
pub(crate) mod lifecycle;
pub(crate) mod perform;
pub(crate) mod prune;
pub(crate) mod requeue;
pub(crate) mod shutdown;
pub(crate) mod slot;
pub(crate) mod spread;
pub(crate) mod step;
pub(crate) mod tracking;

pub use builder::WorkerBuilder;
pub use config::Config;
pub use launcher::{Running, Worker};
pub use shutdown::Phase;

#[cfg(test)]
mod spread_tests;
#[cfg(test)]
mod tests;
