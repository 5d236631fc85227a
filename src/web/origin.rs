//! Only the dashboard's own origin drives it: the `Host` a request names must be one the
//! server answers to (loopback names, the bound address, and each name added with
//! [`super::WebConfig::host`] / `resq web --host`), and a `POST` must come from a page of that
//! same origin (`Origin`, or `Referer` when a client sends no `Origin`).
//!
//! This is what defeats DNS rebinding: a page at `http://evil.test:5678/` whose name was made
//! to resolve to 127.0.0.1 reaches the dashboard's port, but its requests say
//! `Host: evil.test:5678`, so they are refused before any page (and its CSRF token) is read.
//! A request without `Host` (HTTP/1.0, or the router called in-process) is not a browser's:
//! its `POST` still needs a matching `Origin` or `Referer`.

/// The hosts a dashboard answers to.
#[derive(Debug, Clone)]
pub(crate) struct Hosts {
    /// Names (lowercase) accepted with any port, and `name:port` accepted exactly.
    names: Vec<String>,
}

/// The loopback names every dashboard answers to.
const LOOPBACK: &[&str] = &["localhost", "127.0.0.1", "[::1]"];

impl Hosts {
    /// Loopback names and `extra` (each `name` or `name:port`).
    pub(crate) fn new(extra: &[String]) -> Self {
        let mut names: Vec<String> = LOOPBACK.iter().map(|s| s.to_string()).collect();
        names.extend(extra.iter().map(|h| h.trim().to_ascii_lowercase()));
        Hosts { names }
    }

    /// Whether `host` (a `Host` header's value or an origin's authority) is one of them.
    pub(crate) fn allows(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        let name = host_name(&host);
        self.names.iter().any(|n| *n == host || *n == name)
    }
}

/// The name part of `host[:port]` (an IPv6 literal keeps its brackets).
fn host_name(authority: &str) -> &str {
    if authority.starts_with('[') {
        return match authority.find(']') {
            Some(end) => &authority[..=end],
            None => authority,
        };
    }
    match authority.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => authority,
    }
}

/// The authority (`host[:port]`) of an `http(s)://` URL or origin, lowercase; `None` for
/// anything else (`null`, another scheme).
pub(crate) fn authority(url: &str) -> Option<String> {
    let url = url.trim();
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let auth = &rest[..end];
    // No credentials in an origin we accept.
    if auth.is_empty() || auth.contains('@') {
        return None;
    }
    Some(auth.to_ascii_lowercase())
}

/// Why a request is refused, or `None` when it may go on: `host` is its `Host` header,
/// `origin` its `Origin` (or, absent, its `Referer`), `changes` whether it is a `POST`.
pub(crate) fn refusal(
    hosts: &Hosts,
    host: Option<&str>,
    origin: Option<&str>,
    changes: bool,
) -> Option<&'static str> {
    if let Some(h) = host {
        if !hosts.allows(h) {
            return Some(
                "this dashboard does not answer to that host name (resq web --host NAME adds one)",
            );
        }
    }
    if !changes {
        return None;
    }
    let Some(from) = origin.and_then(authority) else {
        return Some("a change must come from the dashboard's own page (no Origin or Referer)");
    };
    let same = match host {
        Some(h) => from == h.trim().to_ascii_lowercase(),
        None => hosts.allows(&from),
    };
    (!same).then_some("a change must come from the dashboard's own page (another origin)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_origins() {
        let h = Hosts::new(&["ops.example.com".into(), "10.0.0.5:5678".into()]);
        for ok in [
            "localhost",
            "127.0.0.1:5678",
            "[::1]:80",
            "LOCALHOST:1",
            "ops.example.com:443",
            "10.0.0.5:5678",
        ] {
            assert!(h.allows(ok), "{ok}");
        }
        for bad in [
            "evil.test:5678",
            "10.0.0.5:1",
            "127.0.0.1.evil.test",
            "",
            "[::2]",
        ] {
            assert!(!h.allows(bad), "{bad}");
        }
        let host = Some("127.0.0.1:5678");
        assert_eq!(refusal(&h, host, None, false), None);
        assert!(refusal(&h, Some("evil.test:5678"), None, false).is_some());
        assert_eq!(refusal(&h, host, Some("http://127.0.0.1:5678"), true), None);
        assert_eq!(
            refusal(&h, host, Some("http://127.0.0.1:5678/failed?x=1"), true),
            None
        );
        for bad in [
            None,
            Some("null"),
            Some("http://evil.test:5678"),
            Some("http://127.0.0.1:5679"),
            Some("http://u@127.0.0.1:5678"),
            Some("file:///x"),
        ] {
            assert!(refusal(&h, host, bad, true).is_some(), "{bad:?}");
        }
        assert_eq!(refusal(&h, None, Some("http://localhost:9"), true), None);
        assert!(refusal(&h, None, Some("http://evil.test"), true).is_some());
    }
}
