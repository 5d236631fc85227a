//! Authentication: HTTP basic auth and/or a bearer token, from the environment
//! (`RESQ_WEB_USER` + `RESQ_WEB_PASSWORD`, `RESQ_WEB_TOKEN`) or set by the embedding service.
//!
//! Secrets are compared in constant time, never logged and never shown by `Debug`. Without
//! any, the dashboard is open: [`super::serve`] and `resq web` then refuse to bind anything
//! but a loopback address.

use super::error::WebError;
use axum::http::{header, HeaderMap, HeaderValue};
use base64::Engine;
use std::fmt;

/// Who may use the dashboard.
#[derive(Clone, Default)]
pub struct Auth {
    /// `Authorization: Bearer <token>` accepted.
    token: Option<String>,
    /// `Authorization: Basic` with this user and password accepted.
    basic: Option<(String, String)>,
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

impl Auth {
    /// No authentication (loopback only when served by [`super::serve`]).
    pub fn none() -> Self {
        Auth::default()
    }

    /// Also accept `Authorization: Bearer <token>`.
    pub fn with_bearer(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Also accept basic auth with `user` and `password`.
    pub fn with_basic(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.basic = Some((user.into(), password.into()));
        self
    }

    /// From `RESQ_WEB_TOKEN`, `RESQ_WEB_USER` and `RESQ_WEB_PASSWORD`.
    pub fn from_env() -> Result<Self, WebError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// From the variables `get` returns. A user without a password (or the reverse), or a
    /// variable set but empty, is an error naming it.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, WebError> {
        let nonempty = |k: &str| -> Result<Option<String>, WebError> {
            match get(k) {
                Some(v) if v.is_empty() => Err(WebError::Config(format!("{k} is set but empty"))),
                v => Ok(v),
            }
        };
        let mut auth = Auth::none();
        if let Some(t) = nonempty("RESQ_WEB_TOKEN")? {
            auth = auth.with_bearer(t);
        }
        match (nonempty("RESQ_WEB_USER")?, nonempty("RESQ_WEB_PASSWORD")?) {
            (Some(u), Some(p)) => auth = auth.with_basic(u, p),
            (None, None) => {}
            (Some(_), None) => {
                return Err(WebError::Config(
                    "RESQ_WEB_USER is set without RESQ_WEB_PASSWORD".into(),
                ))
            }
            (None, Some(_)) => {
                return Err(WebError::Config(
                    "RESQ_WEB_PASSWORD is set without RESQ_WEB_USER".into(),
                ))
            }
        }
        Ok(auth)
    }

    /// Whether any credential is required.
    pub fn is_enabled(&self) -> bool {
        self.token.is_some() || self.basic.is_some()
    }

    /// What is required, for logs (never the secrets).
    pub fn describe(&self) -> &'static str {
        match (self.basic.is_some(), self.token.is_some()) {
            (true, true) => "basic auth or bearer token",
            (true, false) => "basic auth",
            (false, true) => "bearer token",
            (false, false) => "none",
        }
    }

    /// Whether the request's `Authorization` header satisfies it.
    pub fn allows(&self, headers: &HeaderMap) -> bool {
        if !self.is_enabled() {
            return true;
        }
        let Some(value) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
        else {
            return false;
        };
        let (scheme, rest) = value.trim().split_once(' ').unwrap_or((value, ""));
        let rest = rest.trim();
        if scheme.eq_ignore_ascii_case("bearer") {
            return self
                .token
                .as_deref()
                .is_some_and(|t| same(t.as_bytes(), rest.as_bytes()));
        }
        if scheme.eq_ignore_ascii_case("basic") {
            let Some((user, password)) = &self.basic else {
                return false;
            };
            let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(rest) else {
                return false;
            };
            let mut want = Vec::with_capacity(user.len() + password.len() + 1);
            want.extend_from_slice(user.as_bytes());
            want.push(b':');
            want.extend_from_slice(password.as_bytes());
            return same(&want, &decoded);
        }
        false
    }

    /// The `WWW-Authenticate` challenge of a 401 (basic first, so browsers prompt).
    pub fn challenge(&self) -> HeaderValue {
        if self.basic.is_some() {
            HeaderValue::from_static("Basic realm=\"resq\", charset=\"UTF-8\"")
        } else {
            HeaderValue::from_static("Bearer realm=\"resq\"")
        }
    }
}

/// Constant-time equality (the length is not secret).
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(auth: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(auth).unwrap());
        h
    }

    #[test]
    fn basic_and_bearer() {
        let a = Auth::none().with_basic("ops", "s3cret").with_bearer("tok");
        // base64("ops:s3cret") = b3BzOnMzY3JldA==
        assert!(a.allows(&headers("Basic b3BzOnMzY3JldA==")));
        assert!(!a.allows(&headers("Basic b3BzOnMzY3JldA")));
        assert!(a.allows(&headers("Bearer tok")));
        assert!(!a.allows(&headers("Bearer tok2")));
        assert!(!a.allows(&HeaderMap::new()));
        assert!(Auth::none().allows(&HeaderMap::new()));
        assert!(!format!("{a:?}").contains("s3cret"));
    }

    #[test]
    fn env_errors_name_the_variable() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let e = Auth::from_lookup(env(&[("RESQ_WEB_USER", "u")])).unwrap_err();
        assert!(e.to_string().contains("RESQ_WEB_PASSWORD"), "{e}");
        let e = Auth::from_lookup(env(&[("RESQ_WEB_TOKEN", "")])).unwrap_err();
        assert!(e.to_string().contains("RESQ_WEB_TOKEN"), "{e}");
        let a = Auth::from_lookup(env(&[("RESQ_WEB_TOKEN", "t")])).unwrap();
        assert_eq!(a.describe(), "bearer token");
        assert!(!Auth::from_lookup(env(&[])).unwrap().is_enabled());
    }
}
