//! # resq — Resque's wire format, run by Rust
//!
//! resq runs Rust handlers as workers in a Resque fleet: the keys, JSON and time formats it
//! writes are the ones Ruby Resque (and resque-web), Jesque and node-resque read, so a resq
//! process can take a queue from a Ruby worker and nobody can tell from Redis but by its speed.
//!
//! A job's path, each arrow one atomic Redis step:
//!
//! ```text
//! producer ──SADD+RPUSH──▶ <ns>:queue:<q> ──reserve (Lua)──▶ <ns>:worker:<id>
//!                                                 ├──finish (Lua)──▶ gone, stat:processed++
//!                                                 └──fail (Lua)────▶ <ns>:failed, stat:failed++
//! ```
//! (finish of one job and reserve of the next are one script call: one round trip per job).
//!
//! The map:
//! * [`keys`] — every Redis key name; [`wire`] — payloads, worker records, failure entries and
//!   every time format; [`identity`] — worker ids; [`queues`] — Ruby's queue-list semantics;
//! * [`registry`] — class name → handler (async, typed with serde, or blocking);
//! * [`worker`] — the runtime (slots, reserve, perform, heartbeat, signals, shutdown);
//! * [`client`] — enqueueing (now, delayed, Jesque zsets, unique); [`scheduler`] — delayed and
//!   recurring jobs onto their queues, under resque-scheduler's master lock;
//! * [`config`] — settings from env, builder or flags;
//! * [`conn`] — Redis connections and the retry policy; [`error`] — the library's errors.
//! * [`activejob`] — Rails fleets: ActiveJob-wrapped jobs run by handlers, enqueued for Rails.
//! * [`admin`] — the read side and repairs (info, queues, workers, failures, delayed, pause,
//!   prune); [`cli`] — the `resq` command line and `resq top`, callable with your handlers;
//!   [`metrics`] — opt-in Prometheus endpoint with `/healthz` and `/readyz`; [`web`] — the web
//!   dashboard (`resq web`, or a router to nest in a service).

pub mod activejob;
pub mod admin;
pub mod cli;
pub mod client;
pub mod config;
pub mod conn;
pub mod error;
pub mod identity;
pub mod keys;
pub mod logging;
pub mod metrics;
pub mod queues;
pub mod registry;
pub mod runtime;
pub mod scheduler;
mod scripts;
#[cfg(test)]
mod testing;
pub mod web;
pub mod wire;
pub mod worker;

pub use client::Client;
pub use config::Config;
pub use error::{Error, Result};
pub use keys::Keys;
pub use registry::{Job, JobContext, JobError, JobResult, Registry};
pub use worker::{Phase, Running, Worker, WorkerBuilder};
