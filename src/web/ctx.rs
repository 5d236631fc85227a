//! Per request: where the mount point is relative to this URL (so every link is relative and
//! the router works under any prefix), the query parameters, checked forms (CSRF token, size)
//! and redirects after a form.
//!
//! Links: a page at depth 1 (`/queues`) links `./failed`, one at depth 2 `../failed`. The
//! overview is the one route whose URL has no trailing segment: served at `/` it links
//! `./queues`; nested at `/ops/resq` (axum flattens the nested `/` to `/ops/resq`) it links
//! `resq/queues`, found from axum's [`NestedPath`].

use super::auth::same;
use super::error::WebError;
use super::state::App;
use axum::extract::{FromRequest, FromRequestParts, NestedPath, Request};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// Largest form body accepted.
const MAX_FORM: usize = 64 * 1024;

/// The request's view of the dashboard.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    /// Prefix that turns a route name (`failed`) into a link relative to this URL.
    pub base: String,
    /// The CSRF token to put in forms.
    pub csrf: String,
    /// Read-only mode: no action is shown.
    pub read_only: bool,
    /// The query parameters.
    pub query: Params,
}

impl Ctx {
    /// A link to route `path` (with its query string, if any).
    pub(crate) fn link(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl FromRequestParts<Arc<App>> for Ctx {
    type Rejection = WebError;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, WebError> {
        let path = parts.uri.path();
        let base = if path == "/" {
            let nested = NestedPath::from_request_parts(parts, app).await.ok();
            match nested
                .as_ref()
                .map(|n| n.as_str().trim_end_matches('/'))
                .and_then(|n| n.rsplit('/').next())
                .filter(|last| !last.is_empty())
            {
                Some(last) => format!("{last}/"),
                None => "./".to_string(),
            }
        } else {
            match path.matches('/').count() {
                0 | 1 => "./".to_string(),
                n => "../".repeat(n - 1),
            }
        };
        Ok(Ctx {
            base,
            csrf: app.csrf.clone(),
            read_only: app.read_only,
            query: Params::parse(parts.uri.query().unwrap_or("").as_bytes()),
        })
    }
}

/// Decoded `name=value` pairs (a query string or a form).
#[derive(Debug, Clone, Default)]
pub(crate) struct Params(Vec<(String, String)>);

impl Params {
    /// Parses `application/x-www-form-urlencoded` bytes.
    pub(crate) fn parse(bytes: &[u8]) -> Self {
        Params(
            form_urlencoded::parse(bytes)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// The first non-empty value of `name` (trimmed).
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.trim())
            .find(|v| !v.is_empty())
    }

    /// `name` as text, required.
    pub(crate) fn need(&self, name: &str) -> Result<&str, WebError> {
        self.get(name)
            .ok_or_else(|| WebError::BadRequest(format!("{name} is required")))
    }

    /// `name` as a whole number, if present; an error if present and not one.
    pub(crate) fn number(&self, name: &str) -> Result<Option<usize>, WebError> {
        self.get(name)
            .map(|v| {
                v.parse()
                    .map_err(|_| WebError::BadRequest(format!("{name} must be a whole number")))
            })
            .transpose()
    }

    /// `name` as an element id (16 hex digits), required.
    pub(crate) fn id(&self, name: &str) -> Result<&str, WebError> {
        let v = self.need(name)?;
        if crate::admin::list_ids::is_id(v) {
            Ok(v)
        } else {
            Err(WebError::BadRequest(format!("{name} is not an id")))
        }
    }

    /// A query string of the pairs whose names are in `keep` (for links and redirects that
    /// keep a view's filters), without a leading `?`.
    pub(crate) fn keep(&self, keep: &[&str]) -> String {
        let mut s = form_urlencoded::Serializer::new(String::new());
        for (k, v) in &self.0 {
            if keep.contains(&k.as_str()) && !v.trim().is_empty() {
                s.append_pair(k, v.trim());
            }
        }
        s.finish()
    }
}

/// A query string from pairs (values encoded), without a leading `?`.
pub(crate) fn query(pairs: &[(&str, &str)]) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        if !v.is_empty() {
            s.append_pair(k, v);
        }
    }
    s.finish()
}

/// A form posted to the dashboard, its CSRF token checked (read-only mode is refused before,
/// by [`super::guard::methods`]).
#[derive(Debug)]
pub(crate) struct CheckedForm(pub Params);

impl FromRequest<Arc<App>> for CheckedForm {
    type Rejection = WebError;

    async fn from_request(req: Request, app: &Arc<App>) -> Result<Self, WebError> {
        if app.read_only {
            return Err(WebError::Forbidden("the dashboard is read-only".into()));
        }
        let form_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
        if !form_type {
            return Err(WebError::BadRequest("expected a form".into()));
        }
        let body = axum::body::to_bytes(req.into_body(), MAX_FORM)
            .await
            .map_err(|_| WebError::BadRequest("form too large".into()))?;
        let params = Params::parse(&body);
        let token = params.get("_csrf").unwrap_or("");
        if !same(token.as_bytes(), app.csrf.as_bytes()) {
            return Err(WebError::Forbidden(
                "missing or wrong CSRF token: reload the page and try again".into(),
            ));
        }
        Ok(CheckedForm(params))
    }
}

/// `303 See Other` to route `path` (relative to the mount point), as a relative URL.
pub(crate) fn see_other(ctx: &Ctx, path: &str) -> Response {
    let location = ctx.link(path);
    (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response()
}

/// `v` encoded for a query string value.
pub(crate) fn enc(v: &str) -> String {
    form_urlencoded::byte_serialize(v.as_bytes()).collect()
}

/// Appends `extra` (`k=v&…`) to a query string.
pub(crate) fn join_query(q: &str, extra: &str) -> String {
    match (q.is_empty(), extra.is_empty()) {
        (true, _) => extra.to_string(),
        (_, true) => q.to_string(),
        _ => format!("{q}&{extra}"),
    }
}
