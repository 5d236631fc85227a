//! TLS material for `rediss…` URLs: the CA to trust and the client certificate, read from the
//! files the URL options or [`RedisOptions`] (the `REDIS_TLS_*` variables) name.
//!
//! | URL option | variable | meaning |
//! |---|---|---|
//! | `tls_ca` | `REDIS_TLS_CA` | PEM file of the CA(s) to trust instead of the system's roots |
//! | `tls_cert` | `REDIS_TLS_CERT` | PEM client certificate (chain) for mutual TLS |
//! | `tls_key` | `REDIS_TLS_KEY` | PEM private key of that certificate |
//!
//! Without any of them the system's roots are trusted and no client certificate is sent.
//!
//! TLS needs the `tls` feature (on by default); without it a `rediss…` URL is refused when it
//! is parsed, naming the feature.

use super::url::Target;
use super::RedisOptions;
use crate::error::{Error, Result};
#[cfg(feature = "tls")]
use redis::ClientTlsConfig;
#[cfg(feature = "tls")]
use std::path::Path;

/// The CA and client certificate handed to the TLS connector.
#[cfg(feature = "tls")]
pub(crate) type Certificates = redis::TlsCertificates;

/// Without the `tls` feature there are never certificates (the type has no values).
#[cfg(not(feature = "tls"))]
#[derive(Clone)]
pub(crate) enum Certificates {}

/// Without the `tls` feature: a `rediss…` URL is a configuration error naming the feature.
#[cfg(not(feature = "tls"))]
pub(crate) fn certificates(
    target: &Target,
    _options: &RedisOptions,
) -> Result<Option<Certificates>> {
    if target.tls {
        return Err(Error::Config {
            var: "REDIS_URL",
            message: "rediss:// needs resq built with its `tls` feature".into(),
        });
    }
    Ok(None)
}

/// Reads the TLS files for `target` (URL options first, then `env`); `None` when the URL is not
/// `rediss…` or names no file.
#[cfg(feature = "tls")]
pub(crate) fn certificates(
    target: &Target,
    options: &RedisOptions,
) -> Result<Option<Certificates>> {
    let path = |name, given: &Option<std::path::PathBuf>| {
        target
            .option(name)
            .filter(|s| !s.trim().is_empty())
            .map(std::path::PathBuf::from)
            .or_else(|| given.clone())
    };
    let ca = path("tls_ca", &options.tls_ca);
    let cert = path("tls_cert", &options.tls_cert);
    let key = path("tls_key", &options.tls_key);
    if !target.tls {
        if target.option("tls_ca").is_some()
            || target.option("tls_cert").is_some()
            || target.option("tls_key").is_some()
        {
            return Err(Error::Config {
                var: "REDIS_URL",
                message: "tls_ca, tls_cert and tls_key need a rediss:// URL".into(),
            });
        }
        // The variables may be set for another deployment; a plain URL ignores them.
        return Ok(None);
    }
    if ca.is_none() && cert.is_none() && key.is_none() {
        return Ok(None);
    }
    let client_tls = match (cert, key) {
        (Some(cert), Some(key)) => Some(ClientTlsConfig {
            client_cert: read("REDIS_TLS_CERT", &cert)?,
            client_key: read("REDIS_TLS_KEY", &key)?,
        }),
        (None, None) => None,
        (Some(_), None) => {
            return Err(Error::Config {
                var: "REDIS_TLS_KEY",
                message: "a client certificate (tls_cert / REDIS_TLS_CERT) needs its key".into(),
            })
        }
        (None, Some(_)) => {
            return Err(Error::Config {
                var: "REDIS_TLS_CERT",
                message: "a client key (tls_key / REDIS_TLS_KEY) needs its certificate".into(),
            })
        }
    };
    let root_cert = ca.map(|p| read("REDIS_TLS_CA", &p)).transpose()?;
    Ok(Some(Certificates {
        client_tls,
        root_cert,
    }))
}

/// Reads a PEM file; the error names the setting and the path (never the contents).
#[cfg(feature = "tls")]
fn read(var: &'static str, path: &Path) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).map_err(|e| Error::Config {
        var,
        message: format!("cannot read {}: {e}", path.display()),
    })?;
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(Error::Config {
            var,
            message: format!("{} is not a PEM file", path.display()),
        });
    }
    Ok(bytes)
}
