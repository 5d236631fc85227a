//! What every response and every request goes through: security headers on everything
//! (a CSP that allows no inline script, no framing, no MIME sniffing), authentication, and the
//! method rule (only `GET`/`HEAD` read, only `POST` changes, nothing changes in read-only mode).
//! The CSRF check is on every form a `POST` carries ([`super::ctx::CheckedForm`]); before it,
//! [`origin`] refuses a `Host` the server does not answer to and a `POST` from another origin
//! ([`super::origin`]).

use super::error::{error_page, WebError};
use super::state::App;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderValue, Method, Request, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The Content-Security-Policy: scripts, styles and fetches from this origin only, no inline
/// script or style, no plugins, no framing, forms posted only here.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; \
     frame-ancestors 'none'";

/// Adds the security headers to every response.
pub(crate) async fn security_headers(req: Request<Body>, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    res
}

/// Refuses requests without valid credentials (401 with a challenge).
pub(crate) async fn authenticate(
    State(app): State<Arc<App>>,
    req: Request<Body>,
    next: Next,
) -> Response {
    if app.auth.allows(req.headers()) {
        return next.run(req).await;
    }
    let mut res = (
        StatusCode::UNAUTHORIZED,
        error_page(StatusCode::UNAUTHORIZED, "credentials required"),
    )
        .into_response();
    res.headers_mut()
        .insert(header::WWW_AUTHENTICATE, app.auth.challenge());
    res
}

/// Only `GET`, `HEAD` and `POST`; no `POST` in read-only mode.
pub(crate) async fn methods(
    State(app): State<Arc<App>>,
    req: Request<Body>,
    next: Next,
) -> Response {
    let m = req.method();
    if m == Method::GET || m == Method::HEAD {
        return next.run(req).await;
    }
    if m != Method::POST {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            error_page(StatusCode::METHOD_NOT_ALLOWED, "only GET and POST"),
        )
            .into_response();
    }
    if app.read_only {
        return WebError::Forbidden("the dashboard is read-only".into()).into_response();
    }
    next.run(req).await
}

/// Refuses a request naming a `Host` the dashboard does not answer to (`421`), and a `POST`
/// whose `Origin` (or `Referer`) is not the dashboard's own (`403`): see [`super::origin`].
pub(crate) async fn origin(
    State(app): State<Arc<App>>,
    req: Request<Body>,
    next: Next,
) -> Response {
    let h = req.headers();
    let text = |name: header::HeaderName| h.get(name).and_then(|v| v.to_str().ok());
    let host = h
        .get(header::HOST)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"))
        .or_else(|| req.uri().authority().map(|a| a.as_str()));
    let from = text(header::ORIGIN).or_else(|| text(header::REFERER));
    // Other methods are refused by `methods`.
    let changes = req.method() == Method::POST;
    match super::origin::refusal(&app.hosts, host, from, changes) {
        None => next.run(req).await,
        Some(why) => {
            let status = if host.is_some_and(|h| !app.hosts.allows(h)) {
                StatusCode::MISDIRECTED_REQUEST
            } else {
                StatusCode::FORBIDDEN
            };
            (status, error_page(status, why)).into_response()
        }
    }
}

/// Collects, while the request is served, the names its reads found that are not UTF-8 (the
/// page lists them: [`crate::admin::names`]).
pub(crate) async fn collect_notes(req: Request<Body>, next: Next) -> Response {
    crate::admin::names::collect(next.run(req)).await
}
