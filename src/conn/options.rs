//! How to reach Redis beyond what a URL says: Cluster mode for a plain `redis://` URL, TLS
//! files, and `WAIT` after every write. Part of [`crate::Config`]; read from the environment
//! only by [`RedisOptions::from_env`] (or [`crate::Config::from_env`]), never below.

use crate::error::{Error, Result};
use std::path::PathBuf;
use std::time::Duration;

/// Connection settings that are not in the URL. URL options (`?tls_ca=…`) win over these.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisOptions {
    /// `RESQ_CLUSTER`: treat a plain `redis://`/`rediss://` URL as a Cluster seed list.
    pub cluster: bool,
    /// `REDIS_TLS_CA`: PEM file of the CA(s) to trust instead of the system's roots.
    pub tls_ca: Option<PathBuf>,
    /// `REDIS_TLS_CERT`: PEM client certificate (chain) for mutual TLS.
    pub tls_cert: Option<PathBuf>,
    /// `REDIS_TLS_KEY`: PEM private key of that certificate.
    pub tls_key: Option<PathBuf>,
    /// `RESQ_WAIT_REPLICAS`: follow every request with `WAIT <n>` so a write is acknowledged
    /// only once `n` replicas have it (0: off, the default; refused with Cluster).
    pub wait_replicas: u32,
    /// `RESQ_WAIT_TIMEOUT`: how long each `WAIT` may block (default 1 s).
    pub wait_timeout: Duration,
    /// How long each request may wait for its reply before it fails as a timeout that says so
    /// (`redis 127.0.0.1:6380: no reply within 5s`); `None` (the default, a worker's) leaves
    /// only redis-rs's 30 s response timeout, which notices a dead peer. The `resq` CLI and
    /// `resq web` set it (`--redis-timeout`, `RESQ_REDIS_TIMEOUT`, 5 s by default); it is not
    /// read from the environment here. With `WAIT`, a request may take at least
    /// `wait_timeout` and a second more.
    pub response_timeout: Option<Duration>,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            cluster: false,
            tls_ca: None,
            tls_cert: None,
            tls_key: None,
            wait_replicas: 0,
            wait_timeout: Duration::from_secs(1),
            response_timeout: None,
        }
    }
}

impl RedisOptions {
    /// Reads `RESQ_CLUSTER`, `REDIS_TLS_CA`, `REDIS_TLS_CERT`, `REDIS_TLS_KEY`,
    /// `RESQ_WAIT_REPLICAS` and `RESQ_WAIT_TIMEOUT` from the environment.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// [`RedisOptions::from_env`] through `get` instead of the environment; a malformed value
    /// is an error naming its variable.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut o = RedisOptions::default();
        if let Some(v) = get("RESQ_CLUSTER") {
            o.cluster = crate::settings::parse_bool("RESQ_CLUSTER", &v)?;
        }
        let path = |var| get(var).filter(|s| !s.trim().is_empty()).map(PathBuf::from);
        o.tls_ca = path("REDIS_TLS_CA");
        o.tls_cert = path("REDIS_TLS_CERT");
        o.tls_key = path("REDIS_TLS_KEY");
        if let Some(v) = get("RESQ_WAIT_REPLICAS").filter(|v| !v.trim().is_empty()) {
            o.wait_replicas = v.trim().parse().map_err(|_| Error::Config {
                var: "RESQ_WAIT_REPLICAS",
                message: format!("{v:?} is not a whole number of replicas"),
            })?;
        }
        if let Some(v) = get("RESQ_WAIT_TIMEOUT") {
            o.wait_timeout = crate::settings::parse_secs("RESQ_WAIT_TIMEOUT", &v)?;
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_variable_and_names_a_bad_one() {
        let env = [
            ("RESQ_CLUSTER", "yes"),
            ("REDIS_TLS_CA", "/ca.pem"),
            ("REDIS_TLS_CERT", " "),
            ("RESQ_WAIT_REPLICAS", "2"),
            ("RESQ_WAIT_TIMEOUT", "0.5"),
        ];
        let o = RedisOptions::from_lookup(|k| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
        .unwrap();
        assert!(o.cluster);
        assert_eq!(o.tls_ca, Some(PathBuf::from("/ca.pem")));
        assert_eq!(o.tls_cert, None);
        assert_eq!(o.wait_replicas, 2);
        assert_eq!(o.wait_timeout, Duration::from_millis(500));
        let e = RedisOptions::from_lookup(|k| (k == "RESQ_WAIT_REPLICAS").then(|| "x".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("RESQ_WAIT_REPLICAS"), "{e}");
        let e = RedisOptions::from_lookup(|k| (k == "RESQ_CLUSTER").then(|| "maybe".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("RESQ_CLUSTER"), "{e}");
    }
}
