//! Redis URLs: the forms resq accepts, parsed into a [`Target`], and shown without secrets
//! ([`Redacted`]).
//!
//! ```text
//! redis://[user:pass@]host[:port][/db][?options]                 one server
//! rediss://…                                                     the same over TLS
//! redis+sentinel://[user:pass@]host:port,host:port,…/<master>[/db][?options]
//! redis+cluster://[user:pass@]host:port,host:port,…[?options]    Redis Cluster seed nodes
//! rediss+sentinel://…, rediss+cluster://…                        the same over TLS
//! unix:///path/to.sock?db=N, redis+unix://…                      a local socket (as redis-rs)
//! ```
//!
//! Options (URL query, each also an environment variable; the URL wins): `tls_ca` (PEM file of
//! the CA to trust instead of the system's, `REDIS_TLS_CA`), `tls_cert` and `tls_key` (client
//! certificate and key for mutual TLS, `REDIS_TLS_CERT` / `REDIS_TLS_KEY`),
//! `sentinel_username` / `sentinel_password` (when the sentinels themselves require AUTH), and
//! `protocol` (`resp2` or `resp3`). User name and password are percent-decoded, so any byte
//! can be given as `%XX`.

use crate::error::{Error, Result};
use std::fmt;

/// The deployment a URL names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// One server.
    Single,
    /// A master found through sentinels, by name.
    Sentinel {
        /// The master's name in the sentinels' configuration.
        master: String,
    },
    /// A Redis Cluster, through its seed nodes.
    Cluster,
    /// A unix socket URL, handed to redis-rs as it is.
    Unix,
}

/// A parsed Redis URL (secrets included: never print it; print [`Redacted`] instead).
#[derive(Clone)]
pub(crate) struct Target {
    /// The deployment.
    pub kind: Kind,
    /// `rediss…`: TLS to every node (and to the sentinels).
    pub tls: bool,
    /// Host and port of each server, sentinel or seed node, in URL order.
    pub hosts: Vec<(String, u16)>,
    /// ACL user.
    pub username: Option<String>,
    /// Password.
    pub password: Option<String>,
    /// Database index.
    pub db: i64,
    /// Options from the URL query.
    pub query: Vec<(String, String)>,
    /// The URL as given (only for [`Kind::Unix`], which redis-rs parses).
    pub raw: String,
}

/// The query options resq understands.
const OPTIONS: &[&str] = &[
    "tls_ca",
    "tls_cert",
    "tls_key",
    "sentinel_username",
    "sentinel_password",
    "protocol",
];

/// Default port of a Redis server.
const REDIS_PORT: u16 = 6379;
/// Default port of a sentinel.
const SENTINEL_PORT: u16 = 26379;

impl Target {
    /// Parses `url`; `cluster` turns a `redis://`/`rediss://` URL into a cluster seed list
    /// (`RESQ_CLUSTER=1`). Errors name `REDIS_URL` and show the URL redacted.
    pub(crate) fn parse(url: &str, cluster: bool) -> Result<Target> {
        let bad = |why: &str| Error::Config {
            var: "REDIS_URL",
            message: format!("{} is not a usable Redis URL: {why}", Redacted(url)),
        };
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(bad(
                "expected redis://, rediss://, redis+sentinel:// or redis+cluster:// \
                 (e.g. redis://127.0.0.1:6379/0)",
            ));
        };
        let (kind_name, tls) = match scheme.to_ascii_lowercase().as_str() {
            "redis" => ("single", false),
            "rediss" => ("single", true),
            "redis+sentinel" => ("sentinel", false),
            "rediss+sentinel" => ("sentinel", true),
            "redis+cluster" => ("cluster", false),
            "rediss+cluster" => ("cluster", true),
            "unix" | "redis+unix" => ("unix", false),
            _ => return Err(bad("unknown scheme")),
        };
        if kind_name == "unix" {
            if cluster {
                return Err(bad("RESQ_CLUSTER=1 needs redis:// or rediss:// seed nodes"));
            }
            return Ok(Target {
                kind: Kind::Unix,
                tls: false,
                hosts: Vec::new(),
                username: None,
                password: None,
                db: 0,
                query: Vec::new(),
                raw: url.to_string(),
            });
        }
        let (rest, fragment) = match rest.split_once('#') {
            Some((r, f)) => (r, Some(f)),
            None => (rest, None),
        };
        if let Some(f) = fragment {
            return Err(bad(&format!(
                "unsupported fragment #{f} (to trust a private CA, give tls_ca or REDIS_TLS_CA)"
            )));
        }
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, q),
            None => (rest, ""),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        let (userinfo, hostlist) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (username, password) = match userinfo {
            None => (None, None),
            Some(u) => {
                let (user, pass) = match u.split_once(':') {
                    Some((user, pass)) => (user, Some(pass)),
                    None => (u, None),
                };
                let user = decode(user).map_err(|_| bad("the user name is not UTF-8"))?;
                let pass = pass
                    .map(decode)
                    .transpose()
                    .map_err(|_| bad("the password is not UTF-8"))?;
                ((!user.is_empty()).then_some(user), pass)
            }
        };
        let default_port = if kind_name == "sentinel" {
            SENTINEL_PORT
        } else {
            REDIS_PORT
        };
        let mut hosts = Vec::new();
        for h in hostlist.split(',') {
            hosts.push(host_port(h, default_port).map_err(|why| bad(&why))?);
        }
        let mut query_pairs = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let k = decode(k).map_err(|_| bad("a query option is not UTF-8"))?;
            let v = decode(v).map_err(|_| bad("a query option is not UTF-8"))?;
            if !OPTIONS.contains(&k.as_str()) {
                return Err(bad(&format!(
                    "unknown option {k:?} (known: {})",
                    OPTIONS.join(", ")
                )));
            }
            query_pairs.push((k, v));
        }
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let db_of = |s: &str| -> Result<i64> {
            s.parse::<i64>()
                .ok()
                .filter(|d| *d >= 0)
                .ok_or_else(|| bad(&format!("{s:?} is not a database index")))
        };
        let (kind, db) = match (kind_name, cluster) {
            ("single", false) => {
                if hosts.len() > 1 {
                    return Err(bad(
                        "several hosts need redis+sentinel:// or redis+cluster:// \
                         (or RESQ_CLUSTER=1)",
                    ));
                }
                match segments.as_slice() {
                    [] => (Kind::Single, 0),
                    [db] => (Kind::Single, db_of(db)?),
                    _ => return Err(bad("the path is the database index, e.g. /0")),
                }
            }
            ("sentinel", false) => match segments.as_slice() {
                [master] => (
                    Kind::Sentinel {
                        master: decode(master).map_err(|_| bad("the master name is not UTF-8"))?,
                    },
                    0,
                ),
                [master, db] => (
                    Kind::Sentinel {
                        master: decode(master).map_err(|_| bad("the master name is not UTF-8"))?,
                    },
                    db_of(db)?,
                ),
                _ => return Err(bad(
                    "a sentinel URL names the master: redis+sentinel://host:port,…/<master>[/db]",
                )),
            },
            ("single", true) | ("cluster", _) => {
                let db = match segments.as_slice() {
                    [] => 0,
                    [db] => db_of(db)?,
                    _ => return Err(bad("the path is the database index, e.g. /0")),
                };
                if db != 0 {
                    return Err(bad("Redis Cluster has only database 0"));
                }
                (Kind::Cluster, 0)
            }
            _ => return Err(bad("RESQ_CLUSTER=1 needs redis:// or rediss:// seed nodes")),
        };
        Ok(Target {
            kind,
            tls,
            hosts,
            username,
            password,
            db,
            query: query_pairs,
            raw: String::new(),
        })
    }

    /// The query option `name`, if given.
    pub(crate) fn option(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Percent-decodes a URL part.
fn decode(s: &str) -> std::result::Result<String, std::str::Utf8Error> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .map(|c| c.into_owned())
}

/// `host[:port]` or `[v6][:port]`.
fn host_port(s: &str, default_port: u16) -> std::result::Result<(String, u16), String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("a host is missing".into());
    }
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("{s:?}: unclosed IPv6 bracket"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(format!("{s:?} is not host:port")),
        };
        (h, port)
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    if host.is_empty() || host == "0.0.0.0" || host == "::" {
        return Err(format!("{s:?} is not a host to connect to"));
    }
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("{p:?} is not a port"))?,
        None => default_port,
    };
    Ok((host.to_string(), port))
}

/// A URL shown without its secrets: the password in the user part and any `*password*`
/// query option become `***`; a user part without `:` (which some clients read as a
/// password) is hidden whole. Everything else is shown as given.
///
/// ```
/// use resq::conn::Redacted;
/// let url = "redis://app:s3cret@db:6379/2?sentinel_password=x";
/// assert_eq!(
///     Redacted(url).to_string(),
///     "redis://app:***@db:6379/2?sentinel_password=***"
/// );
/// ```
#[derive(Clone, Copy)]
pub struct Redacted<'a>(pub &'a str);

impl fmt::Display for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let url = self.0;
        let Some(start) = url.find("://").map(|i| i + 3) else {
            // Not a URL: it may still hold a secret, so show only its shape.
            return f.write_str("<not a URL>");
        };
        let rest = &url[start..];
        f.write_str(&url[..start])?;
        // The user part ends at the last `@` before the query, even when a password holds an
        // unencoded `/` (which would otherwise end the host part early and show the rest).
        let before_query = &rest[..rest.find(['?', '#']).unwrap_or(rest.len())];
        let rest = match before_query.rfind('@') {
            Some(at) => {
                match rest[..at].split_once(':') {
                    Some((user, _)) if !user.contains('/') => write!(f, "{user}:***@")?,
                    _ => f.write_str("***@")?,
                }
                &rest[at + 1..]
            }
            None => rest,
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        f.write_str(&rest[..end])?;
        let tail = &rest[end..];
        let (before_query, query_and_fragment) = match tail.find('?') {
            Some(q) => (&tail[..q], Some(&tail[q + 1..])),
            None => (tail, None),
        };
        f.write_str(before_query)?;
        if let Some(qf) = query_and_fragment {
            let (query, fragment) = match qf.find('#') {
                Some(h) => (&qf[..h], Some(&qf[h..])),
                None => (qf, None),
            };
            f.write_str("?")?;
            for (i, pair) in query.split('&').enumerate() {
                if i > 0 {
                    f.write_str("&")?;
                }
                match pair.split_once('=') {
                    Some((k, _)) if k.to_ascii_lowercase().contains("pass") => {
                        write!(f, "{k}=***")?
                    }
                    _ => f.write_str(pair)?,
                }
            }
            if let Some(fr) = fragment {
                f.write_str(fr)?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> Target {
        Target::parse(url, false).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn single_with_acl_user_and_db() {
        let t = parse("rediss://app:p%40ss@db.example:6380/3");
        assert_eq!(t.kind, Kind::Single);
        assert!(t.tls);
        assert_eq!(t.hosts, vec![("db.example".to_string(), 6380)]);
        assert_eq!(t.username.as_deref(), Some("app"));
        assert_eq!(t.password.as_deref(), Some("p@ss"));
        assert_eq!(t.db, 3);
        let t = parse("redis://:only@127.0.0.1");
        assert_eq!((t.username, t.password.as_deref()), (None, Some("only")));
        assert_eq!(t.hosts[0].1, 6379);
    }

    #[test]
    fn sentinel_and_cluster_forms() {
        let t = parse("redis+sentinel://u:p@10.0.0.1:26379,10.0.0.2,[::1]:26380/mymaster/2");
        assert_eq!(
            t.kind,
            Kind::Sentinel {
                master: "mymaster".into()
            }
        );
        assert_eq!(
            t.hosts,
            vec![
                ("10.0.0.1".to_string(), 26379),
                ("10.0.0.2".to_string(), 26379),
                ("::1".to_string(), 26380)
            ]
        );
        assert_eq!(t.db, 2);
        let t = parse("rediss+cluster://a:7000,b:7001?tls_ca=/etc/ca.pem");
        assert_eq!(t.kind, Kind::Cluster);
        assert_eq!(t.option("tls_ca"), Some("/etc/ca.pem"));
        let t = Target::parse("redis://a:7000,b:7001", true).unwrap();
        assert_eq!(t.kind, Kind::Cluster);
    }

    #[test]
    fn errors_name_the_variable_and_hide_the_password() {
        for url in [
            "redis+sentinel://u:hunter2@h:1",
            "redis://u:hunter2@a:1,b:2",
            "redis://u:hunter2@h:1/x",
            "redis+cluster://u:hunter2@h:1/3",
            "redis://u:hunter2@h:notaport",
            "redis://u:hunter2@h?bogus=1",
            "hunter2",
            "redis://u:hunter2@h#insecure",
        ] {
            let e = Target::parse(url, false).err().expect(url).to_string();
            assert!(e.starts_with("REDIS_URL:"), "{e}");
            assert!(!e.contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn redaction() {
        let r = |s: &str| Redacted(s).to_string();
        assert_eq!(r("redis://u:secret@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(r("redis://:secret@h"), "redis://:***@h");
        assert_eq!(r("redis://secret@h"), "redis://***@h");
        assert_eq!(r("redis://h:1/0"), "redis://h:1/0");
        assert_eq!(
            r("redis+sentinel://u:p@a:1,b:2/m?sentinel_password=s&tls_ca=/x"),
            "redis+sentinel://u:***@a:1,b:2/m?sentinel_password=***&tls_ca=/x"
        );
        assert_eq!(r("redis://u:pa/ss@h/0"), "redis://u:***@h/0");
        assert_eq!(r("redis://u:p@ss@h/0"), "redis://u:***@h/0");
        assert_eq!(r("no url secret"), "<not a URL>");
    }
}
