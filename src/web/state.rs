//! What every handler shares: the namespace's [`Admin`], the settings, the per-process CSRF
//! token, the pluggable sources, the failure-count cache and the history sampler's clock.

use super::auth::Auth;
use super::counts::CountCache;
use super::sources::{JobsSource, LimitsSource, QueuePauses};
use crate::admin::Admin;
use crate::client::FloatFormat;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// The router's shared state.
pub(crate) struct App {
    /// The namespace, over the shared connection (requests use [`App::admin`]).
    admin: Admin,
    /// Each request's own connection.
    pub pool: super::pool::Pool,
    /// No action is offered or accepted.
    pub read_only: bool,
    /// Who may use it.
    pub auth: Auth,
    /// The token every form must carry (random per process).
    pub csrf: String,
    /// Tracked jobs.
    pub jobs: Option<Arc<dyn JobsSource>>,
    /// Flow-control limits.
    pub limits: Option<Arc<dyn LimitsSource>>,
    /// Per-queue pause.
    pub pauses: Option<Arc<dyn QueuePauses>>,
    /// How re-encoded args write floats (schedules enqueued now).
    pub float_format: FloatFormat,
    /// Entries a filtered failure page may examine.
    pub search_budget: usize,
    /// The hosts it answers to.
    pub hosts: super::origin::Hosts,
    /// The handlers the Coverage page compares with.
    pub registry: Option<Arc<crate::Registry>>,
    /// Failure counts by class, exception and queue.
    pub counts: Arc<CountCache>,
    /// When the live endpoint last took a history sample (unix ms).
    last_sample_ms: AtomicI64,
}

impl App {
    /// The state for `config`.
    pub(crate) fn new(config: super::WebConfig) -> Self {
        App {
            admin: config.admin,
            pool: Default::default(),
            read_only: config.read_only,
            auth: config.auth,
            csrf: new_token(),
            jobs: config.jobs,
            limits: config.limits,
            pauses: config.pauses,
            float_format: config.float_format,
            search_budget: config.search_budget.max(1),
            hosts: super::origin::Hosts::new(&config.hosts),
            registry: config.registry,
            counts: Arc::new(CountCache::default()),
            last_sample_ms: AtomicI64::new(0),
        }
    }

    /// The namespace over the connection lent to the request being served (`pool`).
    pub(crate) fn admin(&self) -> Admin {
        super::pool::current(&self.admin)
    }

    /// The namespace over the shared connection.
    pub(crate) fn shared_admin(&self) -> &Admin {
        &self.admin
    }

    /// Whether a history sample is due at `now_ms` (at most one every 20 s from this
    /// process; the sample itself is `SET NX`, so several processes do not double it).
    pub(crate) fn sample_due(&self, now_ms: i64) -> bool {
        let last = self.last_sample_ms.load(Ordering::Relaxed);
        now_ms - last >= 20_000
            && self
                .last_sample_ms
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

/// 32 random bytes as hex.
fn new_token() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
