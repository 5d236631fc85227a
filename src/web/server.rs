//! Serving the dashboard on its own address (what `resq web` does), and the history sampler.
//!
//! [`serve`] refuses a non-loopback address without authentication, binds, serves
//! [`super::router`] and runs [`spawn_sampler`] beside it, so the per-minute history keeps
//! being recorded while the dashboard runs (even when nobody watches).

use super::error::WebError;
use super::WebConfig;
use crate::admin::{history, Admin};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::task::JoinHandle;

/// How often the sampler samples (the first sample of each minute is kept).
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(15);

/// A running dashboard.
pub struct WebServer {
    /// The bound address (the real port when `:0` was asked for).
    pub addr: SocketAddr,
    /// The server task.
    server: JoinHandle<()>,
    /// The sampler task.
    sampler: JoinHandle<()>,
}

impl WebServer {
    /// Stops serving and sampling.
    pub fn stop(&self) {
        self.server.abort();
        self.sampler.abort();
    }
}

impl Drop for WebServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Checks that `bind` may be served with `config`'s authentication: a non-loopback address
/// needs some.
pub fn check_bind(bind: SocketAddr, config: &WebConfig) -> Result<(), WebError> {
    if bind.ip().is_loopback() || config.auth.is_enabled() {
        return Ok(());
    }
    Err(WebError::Config(format!(
        "refusing to serve the dashboard on {bind} without authentication: set RESQ_WEB_TOKEN \
         (bearer) or RESQ_WEB_USER and RESQ_WEB_PASSWORD (basic), or bind 127.0.0.1"
    )))
}

/// Serves the dashboard on `bind` until [`WebServer::stop`] (or drop).
pub async fn serve(bind: SocketAddr, mut config: WebConfig) -> Result<WebServer, WebError> {
    check_bind(bind, &config)?;
    let listener = tokio::net::TcpListener::bind(bind).await?;
    let addr = listener.local_addr()?;
    // The bound address answers to itself (`10.0.0.5:5678`), whatever else it answers to.
    if !addr.ip().is_unspecified() {
        config.hosts.push(addr.to_string());
    }
    let sampler = spawn_sampler(config.admin.clone(), SAMPLE_EVERY);
    let app = super::router(config);
    let server = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "resq web stopped");
        }
    });
    Ok(WebServer {
        addr,
        server,
        sampler,
    })
}

/// Samples the stat totals into the history keys every `every` (see
/// [`Admin::sample_history`]); Redis errors are logged at debug level and retried on
/// the next tick.
pub fn spawn_sampler(admin: Admin, every: Duration) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let mut con = admin.con();
            if let Err(e) = history::sample(&mut con, admin.keys()).await {
                tracing::debug!(error = %e, "resq web: history sample failed");
            }
        }
    })
}
