//! The dashboard's static files, embedded in the binary (no CDN, works offline): one
//! stylesheet, one small script (live counters and graph, confirmation of destructive forms)
//! and the icon. Cached for a day; their URLs carry the crate version.

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

/// The stylesheet.
pub(crate) const CSS: &str = include_str!("assets/app.css");
/// The script.
pub(crate) const JS: &str = include_str!("assets/app.js");
/// The icon.
pub(crate) const ICON: &str = include_str!("assets/favicon.svg");

/// `GET /assets/<name>`.
pub(crate) async fn asset(Path(name): Path<String>) -> Response {
    let (body, kind) = match name.as_str() {
        "app.css" => (CSS, "text/css; charset=utf-8"),
        "app.js" => (JS, "text/javascript; charset=utf-8"),
        "favicon.svg" => (ICON, "image/svg+xml"),
        _ => return (StatusCode::NOT_FOUND, "no such asset").into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        body,
    )
        .into_response()
}
