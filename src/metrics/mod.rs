//! Prometheus metrics, opt-in: nothing is counted until the worker serves them
//! (`METRICS_ADDR` / `--metrics-addr` / [`crate::WorkerBuilder::metrics_addr`]); without the
//! `metrics` feature the hooks compile to nothing.
//!
//! This module is the counters and the series registry, a leaf every layer may count into
//! (`conn`, `middleware`, `worker`). The HTTP listener — `/metrics` (Prometheus text),
//! `/healthz`, `/readyz`, and the series it reads from Redis at each scrape — is
//! `crate::exporter`, above the admin side, tracked jobs and limits it reads.
//!
//! Series (all prefixed `resq_`): `jobs_processed_total` and `jobs_failed_total` by queue and
//! class (processed counts every job that ended, failed the ones that failed),
//! `job_duration_seconds` (histogram, by queue and class), `busy_slots`, `slots`,
//! `queue_depth` and `queue_latency_seconds` by queue (read from Redis at scrape time; latency
//! only where the oldest job's age is knowable, see [`crate::admin::QueueInfo`]), `jobs` by
//! state (read from Redis at scrape time, [`crate::admin::Admin::job_counts`]: `queued`,
//! `scheduled` and `working` count every job in the queues and held by limits, in the delayed
//! set and on the workers, tracked or not; `waiting` and the finished states count resq's own
//! tracked jobs; `retrying` has no series, its jobs count as `scheduled`), `batches` (created
//! and not yet expired or purged, [`crate::workflows`]; read at scrape time), `limit_capacity`,
//! `limit_in_use`, `limit_held` and `limit_oldest_held_seconds` by limit (flow control,
//! [`crate::limits`]; read from Redis at scrape time),
//! `redis_errors_total` and `redis_reconnects_total`.
//!
//! The hot-path hooks ([`job_started`], [`job_finished`]) cost one atomic load when metrics
//! are off; when on, a label lookup and a few atomic updates per job.

#[cfg(feature = "metrics")]
mod prom;

#[cfg(feature = "metrics")]
pub(crate) use prom::{install, LimitSample};
#[cfg(feature = "metrics")]
pub(crate) use prom::{job_finished, job_started, on, redis_error, redis_reconnect, set_slots};

#[cfg(not(feature = "metrics"))]
mod off {
    //! The hooks without the `metrics` feature: nothing.

    /// A busy slot (nothing to count).
    pub(crate) struct Busy;

    /// Nothing.
    pub(crate) fn job_started() -> Busy {
        Busy
    }

    /// Nothing.
    pub(crate) fn job_finished(_queue: &str, _class: &str, _ok: bool, _secs: f64) {}

    /// Never counting.
    pub(crate) fn on() -> bool {
        false
    }

    /// Nothing.
    pub(crate) fn redis_error() {}

    /// Nothing.
    pub(crate) fn redis_reconnect() {}
}

#[cfg(not(feature = "metrics"))]
pub(crate) use off::{job_finished, job_started, on, redis_error, redis_reconnect};
