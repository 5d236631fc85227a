//! The dashboard's error type, and how an error becomes a response: a short HTML page with the
//! right status, the message escaped, and no detail that could carry a secret (Redis errors
//! from [`crate::conn`] never include a password).

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use maud::{html, DOCTYPE};

/// Everything that can go wrong serving the dashboard.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// Redis (or the library under it) failed.
    #[error("{0}")]
    Resq(#[from] crate::error::Error),
    /// The request is malformed (a missing or bad parameter).
    #[error("bad request: {0}")]
    BadRequest(String),
    /// Nothing there.
    #[error("not found: {0}")]
    NotFound(String),
    /// Refused: read-only mode, or a missing or wrong CSRF token.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// A setting is wrong (auth variables, an unsafe bind address).
    #[error("{0}")]
    Config(String),
    /// Binding or serving failed.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

impl WebError {
    /// The HTTP status it answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            WebError::Resq(crate::error::Error::Rejected(_)) => StatusCode::CONFLICT,
            WebError::Resq(_) | WebError::Io(_) => StatusCode::SERVICE_UNAVAILABLE,
            WebError::BadRequest(_) => StatusCode::BAD_REQUEST,
            WebError::NotFound(_) => StatusCode::NOT_FOUND,
            WebError::Forbidden(_) => StatusCode::FORBIDDEN,
            WebError::Config(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(error = %self, "resq web: request failed");
        }
        (status, error_page(status, &self.to_string())).into_response()
    }
}

/// A standalone error page (no stylesheet: it may be served outside any mount point).
pub(crate) fn error_page(status: StatusCode, message: &str) -> Html<String> {
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                head { meta charset="utf-8"; title { "resq web: " (status.as_str()) } }
                body {
                    h1 { (status.as_str()) " " (status.canonical_reason().unwrap_or("")) }
                    p.error { (message) }
                }
            }
        }
        .into_string(),
    )
}

/// Result with [`WebError`].
pub(crate) type WebResult<T> = std::result::Result<T, WebError>;
