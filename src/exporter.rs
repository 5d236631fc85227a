//! The metrics listener: `GET /metrics` (Prometheus text), `/healthz` (the process serves),
//! `/readyz` (the worker is registered, not shutting down, and Redis answers a `PING` within a
//! second). It lives as long as the worker that started it; the counters it exports are
//! [`crate::metrics`]'s.
//!
//! Queue, tracked-job and limit series are refreshed from Redis on each scrape (one `SMEMBERS`
//! and a pipeline for the queues, one pipeline of `ZCARD`s for the job states,
//! [`Admin::limit_reports`] for the limits), so a process nobody scrapes sends nothing extra to
//! Redis.

use crate::admin::Admin;
use crate::error::Result;
use crate::metrics::LimitSample;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the handlers share.
struct Shared {
    /// The namespace being worked.
    admin: Admin,
    /// Whether the worker is registered and taking jobs (`/readyz`).
    ready: Arc<AtomicBool>,
}

/// A running listener; it stops when dropped (with the worker that owns it).
pub(crate) struct Listener {
    /// The server task.
    task: tokio::task::JoinHandle<()>,
    /// What `/readyz` reports about the worker.
    ready: Arc<AtomicBool>,
}

impl Listener {
    /// Sets what `/readyz` reports about the worker.
    pub(crate) fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Binds `addr`, turns metrics on, and serves until the returned [`Listener`] is dropped.
pub(crate) async fn serve(addr: SocketAddr, admin: Admin) -> Result<Listener> {
    crate::metrics::install();
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let ready = Arc::new(AtomicBool::new(false));
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(Arc::new(Shared {
            admin,
            ready: ready.clone(),
        }));
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "metrics listener stopped");
        }
    });
    tracing::info!(%addr, "metrics listening");
    Ok(Listener { task, ready })
}

async fn metrics(State(s): State<Arc<Shared>>) -> impl IntoResponse {
    let m = crate::metrics::install();
    if let Some(queues) = scraped(s.admin.queues().await, "queues") {
        let rows: Vec<(String, i64, Option<f64>)> = queues
            .into_iter()
            .map(|q| {
                let depth = q.pending.unwrap_or(q.size);
                (
                    q.name,
                    i64::try_from(depth).unwrap_or(i64::MAX),
                    q.oldest_age_s,
                )
            })
            .collect();
        m.set_queues(&rows);
    }
    if let Some(counts) = scraped(s.admin.job_counts().await, "tracked-job counts") {
        let counts: Vec<(&str, u64)> = counts.iter().map(|(s, n)| (s.as_str(), *n)).collect();
        m.set_jobs(&counts);
    }
    if let Some((_, n)) = scraped(s.admin.batches(0, 0).await, "batches") {
        m.set_batches(n);
    }
    if let Some(reports) = scraped(s.admin.limit_reports().await, "limits") {
        let samples: Vec<LimitSample<'_>> = reports
            .iter()
            .map(|r| LimitSample {
                name: &r.limit.name,
                capacity: r.limit.capacity(),
                in_use: r.in_use(),
                held: r.held(),
                oldest_held_secs: r.oldest_held_secs().unwrap_or(0.0),
            })
            .collect();
        m.set_limits(&samples);
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        m.encode(),
    )
}

/// A scrape's read: its value, or `None` when Redis failed (counted and logged).
fn scraped<T>(r: crate::error::Result<T>, what: &str) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            crate::metrics::redis_error();
            tracing::debug!(error = %e, "metrics: could not read {what}");
            None
        }
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(s): State<Arc<Shared>>) -> (StatusCode, &'static str) {
    if !s.ready.load(Ordering::SeqCst) {
        return (StatusCode::SERVICE_UNAVAILABLE, "worker not running\n");
    }
    let mut con = s.admin.con();
    let ping = tokio::time::timeout(
        Duration::from_secs(1),
        redis::cmd("PING").query_async::<String>(&mut con),
    )
    .await;
    match ping {
        Ok(Ok(_)) => (StatusCode::OK, "ready\n"),
        _ => (StatusCode::SERVICE_UNAVAILABLE, "redis unreachable\n"),
    }
}
