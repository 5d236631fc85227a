//! `GET /api/live`: the counters the overview's script polls —
//! `{"t": <Redis time, unix ms>, "processed": n, "failed": n, "failed_entries": n}` in one
//! pipeline. It also records a history sample when this process has not for 20 s, so an
//! embedded dashboard that someone is watching keeps history even without `resq web`'s sampler.
//! When Redis fails or does not answer in time it answers 503 with `{"error": "<what went
//! wrong>"}`.

use super::error::{WebError, WebResult};
use super::state::App;
use crate::admin::history;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// `GET /api/live`.
pub(crate) async fn live(State(app): State<Arc<App>>) -> Response {
    match counters(&app).await {
        Ok(r) => r,
        Err(e) => {
            let status = e.status();
            if status.is_server_error() {
                tracing::warn!(error = %e, "resq web: request failed");
            }
            let body = serde_json::json!({ "error": e.to_string() }).to_string();
            (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
        }
    }
}

/// The live counters as a response.
async fn counters(app: &App) -> WebResult<Response> {
    let admin = app.admin();
    let k = admin.keys();
    let mut con = admin.con();
    let ((secs, micros), processed, failed, entries): (
        (i64, i64),
        Option<String>,
        Option<String>,
        u64,
    ) = redis::pipe()
        .cmd("TIME")
        .get(k.stat_processed())
        .get(k.stat_failed())
        .llen(k.failed())
        .query_async(&mut con)
        .await
        .map_err(|e| WebError::Resq(e.into()))?;
    let t = secs * 1000 + micros / 1000;
    if app.sample_due(t) {
        if let Err(e) = history::sample(&mut con, k).await {
            tracing::debug!(error = %e, "resq web: history sample failed");
        }
    }
    let n = |v: Option<String>| v.and_then(|s| s.trim().parse::<u64>().ok()).unwrap_or(0);
    let body = serde_json::json!({
        "t": t,
        "processed": n(processed),
        "failed": n(failed),
        "failed_entries": entries,
    });
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response())
}
