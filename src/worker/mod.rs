//! The runtime: N slots in one process, each a Resque worker of its own.
//!
//! * [`launcher`] — the process: registration, heartbeat, signals, slots, shutdown.
//! * [`slot`] — one worker: reserve → perform → finish/fail, in a loop.
//! * [`step`] — the one Lua script that finishes a job and reserves the next.
//! * [`fetch`] — wake-ups: blocking waits on the queues so idle slots pick up jobs at once.
//! * [`perform`] — runs a handler with panic capture and time limit.
//! * [`lifecycle`] — register / unregister.
//! * [`heartbeat`] — the heartbeat thread.
//! * [`shutdown`] — the shutdown phases slots obey.

pub mod fetch;
pub mod heartbeat;
pub mod launcher;
pub mod lifecycle;
pub mod perform;
pub mod shutdown;
pub mod slot;
pub mod step;

pub use launcher::{Running, Worker, WorkerBuilder};
pub use shutdown::Phase;
