//! How to talk to one Redis node: credentials, database, protocol and TLS, shared by every
//! deployment kind (the server of a plain URL, a master found by the sentinels, a cluster node
//! a `MOVED` reply names).

use super::tls::Certificates;
use super::url::Target;
use crate::error::{Error, Result};
use redis::{
    Client, ConnectionAddr, IntoConnectionInfo, ProtocolVersion, RedisConnectionInfo, RedisResult,
    ServerError, Value,
};

/// Everything but the address.
#[derive(Clone)]
pub(crate) struct NodeAuth {
    /// ACL user.
    pub username: Option<String>,
    /// Password.
    pub password: Option<String>,
    /// Database index.
    pub db: i64,
    /// RESP version.
    pub protocol: ProtocolVersion,
    /// Whether to use TLS.
    pub tls: bool,
    /// CA and client certificate, when not the system's defaults.
    pub certs: Option<Certificates>,
}

impl NodeAuth {
    /// Takes credentials, database, protocol and TLS from a parsed URL.
    pub(crate) fn from_target(target: &Target, certs: Option<Certificates>) -> Result<Self> {
        let protocol = match target.option("protocol") {
            None | Some("2") | Some("resp2") => ProtocolVersion::RESP2,
            Some("3") | Some("resp3") => ProtocolVersion::RESP3,
            Some(other) => {
                return Err(Error::Config {
                    var: "REDIS_URL",
                    message: format!("protocol={other:?} is not resp2 or resp3"),
                })
            }
        };
        Ok(NodeAuth {
            username: target.username.clone(),
            password: target.password.clone(),
            db: target.db,
            protocol,
            tls: target.tls,
            certs,
        })
    }

    /// The settings sent on connect (`HELLO`/`AUTH`, `SELECT`).
    pub(crate) fn redis_info(&self) -> RedisConnectionInfo {
        let mut info = RedisConnectionInfo::default()
            .set_db(self.db)
            .set_protocol(self.protocol);
        if let Some(u) = &self.username {
            info = info.set_username(u);
        }
        if let Some(p) = &self.password {
            info = info.set_password(p);
        }
        info
    }

    /// The address of `host:port` with this TLS mode.
    pub(crate) fn addr(&self, host: &str, port: u16) -> ConnectionAddr {
        if self.tls {
            ConnectionAddr::TcpTls {
                host: host.to_string(),
                port,
                insecure: false,
                tls_params: None,
            }
        } else {
            ConnectionAddr::Tcp(host.to_string(), port)
        }
    }

    /// A redis-rs client for the node at `host:port`.
    pub(crate) fn client(&self, host: &str, port: u16) -> RedisResult<Client> {
        self.client_as(host, port, self.redis_info())
    }

    /// A redis-rs client for `host:port` with this TLS mode and `settings` (a sentinel's own
    /// credentials).
    pub(crate) fn client_as(
        &self,
        host: &str,
        port: u16,
        settings: RedisConnectionInfo,
    ) -> RedisResult<Client> {
        let info = self
            .addr(host, port)
            .into_connection_info()?
            .set_redis_settings(settings);
        match &self.certs {
            #[cfg(feature = "tls")]
            Some(certs) if self.tls => Client::build_with_tls(info, certs.clone()),
            _ => Client::open(info),
        }
    }
}

/// `host:port` as `MOVED` replies and `ConnectionAddr`'s display write it (IPv6 unbracketed:
/// the port is after the last colon).
pub(crate) fn split_addr(addr: &str) -> Option<(String, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_string(), port.parse().ok()?))
}

/// The server errors in a reply (redis-rs hands a server's error reply back as
/// `Ok(Value::ServerError)`; the caller's typed query turns it into an `Err` later): the reply
/// itself, or the replies of a pipeline.
pub(crate) fn server_errors(values: &[Value]) -> impl Iterator<Item = &ServerError> {
    values.iter().filter_map(|v| match v {
        Value::ServerError(e) => Some(e),
        _ => None,
    })
}

/// Whether connecting failed for a reason retrying cannot fix: credentials refused, a
/// certificate refused either way, an invalid setting.
pub(crate) fn permanent(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    match e.kind() {
        ErrorKind::AuthenticationFailed
        | ErrorKind::InvalidClientConfig
        | ErrorKind::Server(ServerErrorKind::NoPerm) => true,
        // TLS failures (a certificate refused by either side, TLS spoken to a plain port) come
        // as an I/O error wrapping rustls's error.
        #[cfg(feature = "tls")]
        ErrorKind::Io => io_error(e)
            .and_then(|io| io.get_ref())
            .is_some_and(|inner| inner.is::<rustls::Error>()),
        _ => matches!(e.code(), Some("WRONGPASS" | "NOAUTH")),
    }
}

/// The I/O error inside a redis-rs error (held behind an `Arc`).
#[cfg(feature = "tls")]
fn io_error(e: &redis::RedisError) -> Option<&std::io::Error> {
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    let cause = std::error::Error::source(e)?;
    cause.downcast_ref::<std::io::Error>().or_else(|| {
        cause
            .downcast_ref::<Shared>()
            .and_then(|a| a.downcast_ref::<std::io::Error>())
    })
}
