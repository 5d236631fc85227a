//! # resq — Resque's wire format, run by Rust
//!
//! resq runs Rust handlers as workers in a Resque fleet: the keys, JSON and time formats it
//! writes are the ones Ruby Resque (and resque-web), resque-scheduler, Jesque and node-resque
//! read, so a resq process can take a queue from a Ruby worker and nobody can tell from Redis
//! but by its speed.
//!
//! ```no_run
//! use resq::{Job, JobContext, JobResult, Registry, WorkerBuilder};
//!
//! struct Archive;
//! impl Job for Archive {
//!     const CLASS: &'static str = "Archive"; // the class name producers use
//!     type Args = (u64, String); // positional args, decoded with serde
//!     async fn perform(&self, (id, branch): Self::Args, _ctx: JobContext) -> JobResult {
//!         println!("archiving {id} on {branch}");
//!         Ok(())
//!     }
//! }
//!
//! fn main() -> resq::Result<()> {
//!     resq::logging::init_from_env();
//!     resq::runtime::build()?.block_on(async {
//!         let running = WorkerBuilder::from_env()? // REDIS_URL, QUEUES, CONCURRENCY, …
//!             .registry(Registry::new().job(Archive))
//!             .build()?
//!             .start()
//!             .await?;
//!         running.run_until_signal().await // QUIT/TERM/INT/USR1/USR2/CONT as in Resque
//!     })
//! }
//! ```
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
//! ## What is here
//! * Running jobs: [`Registry`] (class name → handler: a [`Job`], an async fn over a
//!   [`JobContext`], or a blocking fn), [`WorkerBuilder`] → [`Worker`] → [`Running`], all
//!   settings in one [`Config`] (Resque's environment variables, or set by hand);
//! * [`middleware`] — layers around every job and every enqueue, and Resque's hooks;
//! * [`client`] — enqueueing: typed ([`Client::enqueue`]), by class name, delayed, Jesque,
//!   unique; [`scheduler`] — resque-scheduler's delayed and recurring jobs;
//! * [`splits`] — split queues: one queue served as N shards in hash slots of their own
//!   (docs/cluster.md), their naming rule and the choice of a shard from a shard key;
//! * [`admin`] — the read side and repairs (what resque-web and `resq` show and do);
//! * [`activejob`] — Rails fleets: ActiveJob jobs run by Rust handlers, and enqueued for Rails;
//! * [`conn`] — where Redis is: one server, TLS, Sentinel, Cluster ([`conn::RedisOptions`]);
//! * [`logging`], [`runtime`] — the recommended tracing setup and tokio runtime;
//! * [`web`] — the dashboard as an axum router; [`cli`] — the `resq` command line, callable
//!   from your own binary with your handlers.
//!
//! ## Cargo features
//! All on by default; `default-features = false` leaves the worker, client, scheduler and
//! admin.
//! * `tls` — `rediss://` (rustls; no system OpenSSL);
//! * `metrics` — the Prometheus endpoint with `/healthz` and `/readyz` (`METRICS_ADDR`);
//! * `web` — [`web::router`], the dashboard;
//! * `cli` — [`cli::run`]; `top` — `resq top` (implies `cli`).
//!
//! ## Side effects
//! The library installs no signal handler until [`Running::run_until_signal`] (or
//! [`WorkerBuilder::signals_at_start`]), serves nothing unless a metrics address is set (the
//! listener lives and dies with the worker), and reads the environment only in the `from_env`
//! constructors. It chains one panic hook that records where a *job's* panic happened; panics
//! elsewhere reach the previous hook unchanged.

#![warn(unreachable_pub, unnameable_types)]

pub mod activejob;
pub mod admin;
#[cfg(feature = "cli")]
pub mod cli;
pub mod client;
pub mod conn;
#[cfg(any(feature = "cli", feature = "web"))]
mod coverage;
mod error;
#[cfg(feature = "metrics")]
mod exporter;
// Always built: limit reports (`resq::limits`) show intervals with it; the rest is for the CLI
// and the dashboard.
#[cfg_attr(not(any(feature = "cli", feature = "web")), allow(dead_code))]
mod human;
mod identity;
mod job_error;
pub mod jobs;
mod keys;
pub mod limits;
pub mod logging;
mod metrics;
pub mod middleware;
#[cfg(feature = "otel")]
pub mod otel;
mod queues;
mod registry;
pub mod runtime;
pub mod scheduler;
mod scripts;
mod settings;
pub mod splits;
#[cfg(test)]
mod testing;
#[cfg(feature = "web")]
pub mod web;
mod wire;
mod worker;
pub mod workflows;

pub use client::Client;
pub use error::{Error, Result};
pub use queues::QueueList;
pub use registry::{Delays, Job, JobContext, JobError, JobResult, Registry, RetryPolicy};
pub use wire::payload::{Payload, PayloadError};
pub use wire::time;
pub use worker::{Config, Phase, Running, Worker, WorkerBuilder};
