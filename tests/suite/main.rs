//! The integration tests that may share one process and one `redis-server`: one binary, so the
//! crate and the test support are compiled and linked once for all of them (they were 41
//! binaries, one a file). Each former file is a module of the same name, so a failure still
//! names it; `cargo test --test suite cli_ops::` runs one of them.
//!
//! Each test works in a namespace of its own (`support::namespace`) on the binary's server and
//! asks it nothing server-wide (no `CONFIG SET`, `FLUSHALL`, `MONITOR`, `CLIENT PAUSE`, command
//! statistics, a scan of the whole keyspace), sets no environment variable and no global
//! subscriber: a test that needs any of these starts a server of its own
//! (`support::RedisServer::start`) or lives in a binary of its own (`tests/faults/`,
//! `tests/web_http.rs`, `tests/web_bounded.rs`, the browser tests, `tests/otel_trace.rs`).

#[path = "../admin_common/mod.rs"]
mod admin_common;
#[path = "../keydump/mod.rs"]
mod keydump;
#[path = "../support/mod.rs"]
mod support;
#[path = "../web_common/mod.rs"]
mod web_common;

mod activejob_decode;
mod activejob_worker;
mod admin_failures;
mod admin_queues;
mod admin_workers;
mod cli_admin;
mod cli_batch;
mod cli_coverage;
mod cli_enqueue;
mod cli_jobs;
mod cli_jobs_records;
mod cli_limits;
mod cli_ops;
mod cli_polish;
mod client_enqueue;
mod deploy;
mod docs_examples;
mod example_contact_sheet;
mod flows_derived;
mod flows_foreign_end;
mod golden_resque;
mod jesque_delayed;
mod jobs_listing;
mod jobs_records;
mod jobs_tracking;
mod limits;
mod limits_bad_key;
mod limits_converge;
mod metrics_endpoint;
mod middleware;
mod readme;
mod retry_backoff;
mod retry_success_cost;
mod scheduler_delayed;
mod scheduler_recurring;
mod signals;
mod splits;
mod unique_jobs;
mod web_batches;
mod web_every_namespace;
mod worker_core;
mod workflows;
mod workflows_hostile;
