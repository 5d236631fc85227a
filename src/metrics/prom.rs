//! The Prometheus registry and the hot-path hooks (compiled with the `metrics` feature). The
//! series read from Redis at scrape time are set by `crate::exporter` from plain values, so
//! this module knows nothing of queues' admin reads, tracked jobs or limits.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::OnceLock;

/// Job duration buckets, seconds.
const DURATION_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 120.0, 300.0,
];

/// Labels of job series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct JobLabels {
    /// Queue the job came from.
    pub queue: String,
    /// Its class.
    pub class: String,
}

/// Labels of queue series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct QueueLabels {
    /// Queue name.
    pub queue: String,
}

/// Labels of tracked-job series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StateLabels {
    /// The state (`queued`, `working`, `completed`, …).
    pub state: String,
}

/// Labels of flow-control limit series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct LimitLabels {
    /// The limit's name.
    pub limit: String,
}

/// Constructor of duration histograms.
type HistogramNew = fn() -> Histogram;

/// One flow-control limit at a scrape, as the limit series show it.
pub(crate) struct LimitSample<'a> {
    /// The limit's name.
    pub name: &'a str,
    /// Its capacity (concurrency units or starts per interval), when it has one.
    pub capacity: Option<u32>,
    /// Units in use (concurrency) or starts in the current window (rate).
    pub in_use: u64,
    /// Jobs it holds out of their queues.
    pub held: u64,
    /// Age of the oldest job it holds (0 when none).
    pub oldest_held_secs: f64,
}

/// Every series this process exports.
pub(crate) struct Metrics {
    /// The registry `/metrics` encodes.
    registry: Registry,
    /// Jobs that ended, by queue and class.
    processed: Family<JobLabels, Counter>,
    /// Jobs that failed, by queue and class.
    failed: Family<JobLabels, Counter>,
    /// Job durations.
    duration: Family<JobLabels, Histogram, HistogramNew>,
    /// Slots running a job now.
    busy: Gauge,
    /// Slots in this process.
    slots: Gauge,
    /// Queue sizes at the last scrape.
    queue_depth: Family<QueueLabels, Gauge>,
    /// Age of each queue's oldest job at the last scrape, where knowable.
    queue_latency: Family<QueueLabels, Gauge<f64, AtomicU64>>,
    /// Jobs in each state at the last scrape ([`crate::admin::Admin::job_counts`]).
    jobs: Family<StateLabels, Gauge>,
    /// Each limit's capacity at the last scrape.
    limit_capacity: Family<LimitLabels, Gauge>,
    /// Units in use (or starts in the window) of each limit at the last scrape.
    limit_in_use: Family<LimitLabels, Gauge>,
    /// Jobs held by each limit at the last scrape.
    limit_held: Family<LimitLabels, Gauge>,
    /// Age of each limit's oldest held job at the last scrape.
    limit_oldest_held: Family<LimitLabels, Gauge<f64, AtomicU64>>,
    /// Batches at the last scrape ([`crate::workflows`]).
    batches: Gauge,
    /// Failed Redis steps.
    redis_errors: Counter,
    /// Redis steps that succeeded after failures.
    redis_reconnects: Counter,
}

static METRICS: OnceLock<Metrics> = OnceLock::new();

fn new_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS.iter().copied())
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("resq");
        let m = Metrics {
            registry: Registry::default(),
            processed: Family::default(),
            failed: Family::default(),
            duration: Family::new_with_constructor(new_histogram as HistogramNew),
            busy: Gauge::default(),
            slots: Gauge::default(),
            queue_depth: Family::default(),
            queue_latency: Family::default(),
            jobs: Family::default(),
            limit_capacity: Family::default(),
            limit_in_use: Family::default(),
            limit_held: Family::default(),
            limit_oldest_held: Family::default(),
            batches: Gauge::default(),
            redis_errors: Counter::default(),
            redis_reconnects: Counter::default(),
        };
        registry.register(
            "jobs_processed",
            "Jobs that ended (success or failure), by queue and class",
            m.processed.clone(),
        );
        registry.register(
            "jobs_failed",
            "Jobs that failed, by queue and class",
            m.failed.clone(),
        );
        registry.register(
            "job_duration_seconds",
            "Time spent performing jobs, by queue and class",
            m.duration.clone(),
        );
        registry.register("busy_slots", "Slots running a job now", m.busy.clone());
        registry.register("slots", "Slots in this process", m.slots.clone());
        registry.register(
            "queue_depth",
            "Jobs waiting in each queue (read from Redis at scrape time)",
            m.queue_depth.clone(),
        );
        registry.register(
            "queue_latency_seconds",
            "Age of the oldest job in each queue, where the payload tells it",
            m.queue_latency.clone(),
        );
        registry.register(
            "jobs",
            "Jobs in each state, read from Redis at scrape time: queued, scheduled and working count every job in the queues (and held by limits), the delayed set (retries too) and on the workers; waiting and the finished states count resq's tracked jobs",
            m.jobs.clone(),
        );
        registry.register(
            "batches",
            "Batches created and not yet expired or purged (read from Redis at scrape time)",
            m.batches.clone(),
        );
        registry.register(
            "limit_capacity",
            "Capacity of each flow-control limit (concurrency units or starts per interval)",
            m.limit_capacity.clone(),
        );
        registry.register(
            "limit_in_use",
            "Units in use (concurrency) or starts in the current window (rate) of each limit",
            m.limit_in_use.clone(),
        );
        registry.register(
            "limit_held",
            "Jobs each limit holds out of their queues",
            m.limit_held.clone(),
        );
        registry.register(
            "limit_oldest_held_seconds",
            "Age of the oldest job each limit holds (0 when none)",
            m.limit_oldest_held.clone(),
        );
        registry.register(
            "redis_errors",
            "Redis steps that failed (each retried)",
            m.redis_errors.clone(),
        );
        registry.register(
            "redis_reconnects",
            "Times Redis was reached again after failures",
            m.redis_reconnects.clone(),
        );
        Metrics { registry, ..m }
    }

    /// The text exposition of every series.
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Sets the job series to `counts` (every state counted, zeros included).
    pub(crate) fn set_jobs(&self, counts: &[(&str, u64)]) {
        for (state, n) in counts {
            let l = StateLabels {
                state: state.to_string(),
            };
            self.jobs
                .get_or_create(&l)
                .set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
    }

    /// Sets the batch count.
    pub(crate) fn set_batches(&self, n: u64) {
        self.batches.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Replaces the limit series with `limits` (a limit removed since the last scrape goes).
    pub(crate) fn set_limits(&self, limits: &[LimitSample<'_>]) {
        self.limit_capacity.clear();
        self.limit_in_use.clear();
        self.limit_held.clear();
        self.limit_oldest_held.clear();
        let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        for r in limits {
            let l = LimitLabels {
                limit: r.name.to_string(),
            };
            if let Some(c) = r.capacity {
                self.limit_capacity.get_or_create(&l).set(i64::from(c));
            }
            self.limit_in_use.get_or_create(&l).set(int(r.in_use));
            self.limit_held.get_or_create(&l).set(int(r.held));
            self.limit_oldest_held
                .get_or_create(&l)
                .set(r.oldest_held_secs);
        }
    }

    /// Replaces the queue series with `queues` (name, depth, oldest age if known).
    pub(crate) fn set_queues(&self, queues: &[(String, i64, Option<f64>)]) {
        self.queue_depth.clear();
        self.queue_latency.clear();
        for (name, depth, age) in queues {
            let l = QueueLabels {
                queue: name.clone(),
            };
            self.queue_depth.get_or_create(&l).set(*depth);
            if let Some(age) = age {
                self.queue_latency.get_or_create(&l).set(*age);
            }
        }
    }
}

/// Turns metrics on for this process (idempotent) and returns them.
pub(crate) fn install() -> &'static Metrics {
    METRICS.get_or_init(Metrics::new)
}

/// The metrics, when on.
pub(super) fn get() -> Option<&'static Metrics> {
    METRICS.get()
}

/// Sets the number of slots this process runs.
pub(crate) fn set_slots(n: usize) {
    if let Some(m) = get() {
        m.slots.set(i64::try_from(n).unwrap_or(i64::MAX));
    }
}

/// Marks a slot busy until the returned guard drops.
pub(crate) fn job_started() -> Busy {
    let on = match get() {
        Some(m) => {
            m.busy.inc();
            true
        }
        None => false,
    };
    Busy(on)
}

/// A busy slot; decrements `busy_slots` when dropped.
pub(crate) struct Busy(bool);

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0 {
            if let Some(m) = get() {
                m.busy.dec();
            }
        }
    }
}

/// Whether metrics are being counted (the worker serves them).
pub(crate) fn on() -> bool {
    get().is_some()
}

/// Records a job that ended after `secs`.
pub(crate) fn job_finished(queue: &str, class: &str, ok: bool, secs: f64) {
    let Some(m) = get() else { return };
    let l = JobLabels {
        queue: queue.to_string(),
        class: class.to_string(),
    };
    m.processed.get_or_create(&l).inc();
    if !ok {
        m.failed.get_or_create(&l).inc();
    }
    m.duration.get_or_create(&l).observe(secs);
}

/// Records a failed Redis step.
pub(crate) fn redis_error() {
    if let Some(m) = get() {
        m.redis_errors.inc();
    }
}

/// Records that Redis was reached again after failures.
pub(crate) fn redis_reconnect() {
    if let Some(m) = get() {
        m.redis_reconnects.inc();
    }
}
