//! TLS material for `rediss…` URLs: the CA to trust and the client certificate, read from the
//! files the URL options or the environment name.
//!
//! | URL option | variable | meaning |
//! |---|---|---|
//! | `tls_ca` | `REDIS_TLS_CA` | PEM file of the CA(s) to trust instead of the system's roots |
//! | `tls_cert` | `REDIS_TLS_CERT` | PEM client certificate (chain) for mutual TLS |
//! | `tls_key` | `REDIS_TLS_KEY` | PEM private key of that certificate |
//!
//! Without any of them the system's roots are trusted and no client certificate is sent.

use super::url::Target;
use crate::error::{Error, Result};
use redis::{ClientTlsConfig, TlsCertificates};
use std::path::Path;

/// Reads the TLS files for `target` (URL options first, then `env`); `None` when the URL is not
/// `rediss…` or names no file.
pub(crate) fn certificates(
    target: &Target,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<TlsCertificates>> {
    let ca = target.path_option("tls_ca", env, "REDIS_TLS_CA");
    let cert = target.path_option("tls_cert", env, "REDIS_TLS_CERT");
    let key = target.path_option("tls_key", env, "REDIS_TLS_KEY");
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
    Ok(Some(TlsCertificates {
        client_tls,
        root_cert,
    }))
}

/// Reads a PEM file; the error names the setting and the path (never the contents).
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
