//! Each request's own Redis connection: a small pool of connections opened like the
//! namespace's ([`crate::conn::Conn::open_another`]), one lent to a request for as long as it
//! runs ([`lend`], a middleware), so a slow request's traffic never stands in front of
//! another's: over one shared connection, an `/overview` would wait behind every reply queued
//! for the slow page. Handlers reach the lent connection through [`App::admin`].
//!
//! [`App::admin`]: super::state::App::admin

use super::state::App;
use crate::admin::Admin;
use crate::conn::Conn;
use axum::body::Body;
use axum::extract::State;
use axum::http::Request;
use axum::middleware::Next;
use axum::response::Response;
use std::sync::{Arc, Mutex};

/// Idle connections kept for the next requests (more are opened while more requests run at
/// once, and closed when they end).
const KEEP: usize = 8;

tokio::task_local! {
    /// The namespace over the connection lent to the request being served.
    static LENT: Admin;
}

/// Connections not lent now.
#[derive(Default)]
pub(crate) struct Pool {
    idle: Mutex<Vec<Conn>>,
}

impl Pool {
    /// A connection of its own for a request: an idle one, or a new one; when none can be
    /// opened, the shared one (`false`: not to be kept).
    async fn take(&self, base: &Admin) -> (Conn, bool) {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        if let Some(c) = idle {
            return (c, true);
        }
        match base.con().open_another().await {
            Ok(c) => (c, true),
            Err(e) => {
                tracing::debug!(error = %e, "resq web: no connection of its own for a request; using the shared one");
                (base.con(), false)
            }
        }
    }

    /// A request is done with `con`.
    fn give_back(&self, con: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < KEEP {
            idle.push(con);
        }
    }
}

/// Serves the request with a connection of its own (see the module's doc).
pub(crate) async fn lend(State(app): State<Arc<App>>, req: Request<Body>, next: Next) -> Response {
    let base = app.shared_admin();
    let (con, keep) = app.pool.take(base).await;
    let admin = Admin::new(con.clone(), base.keys().clone());
    let response = LENT.scope(admin, next.run(req)).await;
    if keep {
        app.pool.give_back(con);
    }
    response
}

/// The namespace over the connection lent to the request being served; `base` outside one.
pub(crate) fn current(base: &Admin) -> Admin {
    LENT.try_with(Admin::clone).unwrap_or_else(|_| base.clone())
}
