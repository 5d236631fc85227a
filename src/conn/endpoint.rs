//! Where Redis is: an [`Endpoint`] parsed from a URL and [`RedisOptions`], the kind of
//! [`Deployment`] it talks to, and the connections it opens (the shared [`Conn`], a dedicated
//! [`Blocking`] one, a RESP3 one Redis pushes invalidations on); the URL and server-version
//! checks.

use super::{
    cluster, errors, node, sentinel, tls, url, Activity, Blocking, BlockingInner, Conn, ConnInner,
    Redacted, RedisOptions, Wait,
};
use crate::error::{Error, Result};
use crate::keys::Keys;
use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::{AsyncConnectionConfig, Client, RedisResult};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// How long the shared connection waits for a reply before it calls the peer dead.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The kind of deployment an [`Endpoint`] talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deployment {
    /// One server (`redis://`, `rediss://`, a unix socket).
    Single,
    /// A master found through sentinels (`redis+sentinel://`).
    Sentinel,
    /// A Redis Cluster (`redis+cluster://`, or `RESQ_CLUSTER=1`).
    Cluster,
}

/// How an endpoint reaches its nodes.
enum Deploy {
    /// One server.
    Single(Client),
    /// Through sentinels.
    Sentinel(sentinel::Spec),
    /// A cluster.
    Cluster(cluster::Spec),
}

/// What clones of an [`Endpoint`] share.
struct EndpointInner {
    /// The URL, redacted.
    shown: String,
    /// Where connections go, for messages: `host:port`, `master <name> via sentinels h:p,…`,
    /// `cluster h:p,…`, or the socket path.
    label: Arc<str>,
    /// How to reach the nodes.
    deploy: Deploy,
    /// `RESQ_WAIT_REPLICAS`.
    wait: Option<Wait>,
    /// [`RedisOptions::response_timeout`]: how long each request of its connections may wait.
    bound: Option<Duration>,
    /// The Sentinel master last found by any connection of this endpoint.
    master: sentinel::MasterHint,
    /// Cluster slot owners learned by any connection of this endpoint.
    routes: cluster::Routes,
    /// A RESP3 client for the invalidation-tracking connection (one server only; Sentinel
    /// builds one from the master it finds).
    tracking: Option<Client>,
}

/// Where Redis is: parsed from a URL; opens connections. Cheap to clone (clones share what
/// they learn about the deployment, e.g. where the Sentinel master is now).
#[derive(Clone)]
pub struct Endpoint(Arc<EndpointInner>);

impl Endpoint {
    /// Parses `url` (Cluster, TLS files and `WAIT` only as the URL itself says); nothing is
    /// sent yet. [`Endpoint::with_options`] adds settings from a [`crate::Config`].
    pub fn open(url: &str) -> Result<Self> {
        Self::with_options(url, &RedisOptions::default())
    }

    /// Parses `url` with `options` (URL options win over them) and reads the TLS files they
    /// name; nothing is sent yet.
    pub fn with_options(url: &str, options: &RedisOptions) -> Result<Self> {
        let target = url::Target::parse(url, options.cluster)?;
        let certs = tls::certificates(&target, options)?;
        let wait = (options.wait_replicas > 0).then(|| Wait {
            replicas: options.wait_replicas,
            timeout_ms: (options.wait_timeout.as_millis() as u64).max(1),
        });
        let mut tracking = None;
        let deploy = match &target.kind {
            url::Kind::Unix => {
                let client = Client::open(target.raw.as_str())?;
                let info = client.get_connection_info().clone();
                let resp3 = info
                    .redis_settings()
                    .clone()
                    .set_protocol(redis::ProtocolVersion::RESP3);
                tracking = Client::open(info.set_redis_settings(resp3)).ok();
                Deploy::Single(client)
            }
            url::Kind::Single => {
                let node = node::NodeAuth::from_target(&target, certs)?;
                let (host, port) = &target.hosts[0];
                let mut resp3 = node.clone();
                resp3.protocol = redis::ProtocolVersion::RESP3;
                tracking = resp3.client(host, *port).ok();
                Deploy::Single(node.client(host, *port)?)
            }
            url::Kind::Sentinel { master } => {
                let node = node::NodeAuth::from_target(&target, certs)?;
                Deploy::Sentinel(sentinel::Spec::new(&target, master, node))
            }
            url::Kind::Cluster => {
                if wait.is_some() {
                    return Err(Error::Config {
                        var: "RESQ_WAIT_REPLICAS",
                        message: "not supported with Redis Cluster (WAIT is per node); unset it"
                            .into(),
                    });
                }
                Deploy::Cluster(cluster::Spec {
                    seeds: target.hosts.clone(),
                    node: node::NodeAuth::from_target(&target, certs)?,
                })
            }
        };
        let hosts = target
            .hosts
            .iter()
            .map(|(h, p)| format!("{h}:{p}"))
            .collect::<Vec<_>>()
            .join(",");
        let label: Arc<str> = match &target.kind {
            url::Kind::Single => hosts.into(),
            url::Kind::Sentinel { master } => {
                format!("master {master} via sentinels {hosts}").into()
            }
            url::Kind::Cluster => format!("cluster {hosts}").into(),
            url::Kind::Unix => Redacted(url).to_string().into(),
        };
        errors::set_target(&label);
        Ok(Endpoint(Arc::new(EndpointInner {
            label,
            shown: Redacted(url).to_string(),
            deploy,
            wait,
            bound: options.response_timeout.map(|b| match wait {
                // A request's `WAIT` may block that long by itself.
                Some(w) => b.max(Duration::from_millis(w.timeout_ms) + Duration::from_secs(1)),
                None => b,
            }),
            master: sentinel::MasterHint::default(),
            routes: cluster::Routes::default(),
            tracking,
        })))
    }

    /// Opens `url` with `options`, checks `namespace` suits the deployment and connects: what a
    /// client or admin handle starts with. Returns the connection and the namespace's keys
    /// ([`Endpoint::keys`]).
    pub(crate) async fn connect_namespace(
        url: &str,
        namespace: &str,
        options: &RedisOptions,
    ) -> Result<(Conn, Keys)> {
        let endpoint = Self::with_options(url, options)?;
        let keys = endpoint.keys(namespace)?;
        Ok((endpoint.connect().await?, keys))
    }

    /// Where connections go, for messages (`127.0.0.1:6380`; never a password).
    pub fn label(&self) -> &str {
        &self.0.label
    }

    /// The kind of deployment.
    pub fn deployment(&self) -> Deployment {
        match self.0.deploy {
            Deploy::Single(_) => Deployment::Single,
            Deploy::Sentinel(_) => Deployment::Sentinel,
            Deploy::Cluster(_) => Deployment::Cluster,
        }
    }

    /// Checks that `namespace` can be used on this deployment (any namespace can: on a cluster,
    /// one with a hash tag keeps every key in the tag's slot, one without is spread over the
    /// slots: docs/cluster.md).
    pub fn check_namespace(&self, namespace: &str) -> Result<()> {
        self.keys(namespace).map(|_| ())
    }

    /// The keys of `namespace` on this deployment: on a Redis Cluster, a namespace without a
    /// hash tag is spread over the cluster's slots (each queue's keys in the queue's slot,
    /// `docs/cluster.md`); anywhere else, and with a tag, every key is where it always was.
    pub(crate) fn keys(&self, namespace: &str) -> Result<Keys> {
        let keys = Keys::new(namespace);
        Ok(match self.0.deploy {
            Deploy::Cluster(_) if cluster::hash_tag(namespace).is_none() => keys.spread(),
            _ => keys,
        })
    }

    /// Opens the shared connection: it reconnects by itself (to the new master after a
    /// Sentinel failover; to the new slot owner in a cluster), and commands time out after
    /// 30 s so a dead peer is noticed, or after [`RedisOptions::response_timeout`] when set
    /// (connecting then takes at most that long too).
    pub async fn connect(&self) -> Result<Conn> {
        match self.0.bound {
            None => self.open_shared().await,
            Some(b) => tokio::time::timeout(b, self.open_shared())
                .await
                .unwrap_or_else(|_| Err(super::bound::timed_out(b, "no connection").into())),
        }
    }

    /// [`Endpoint::connect`] without the bound.
    async fn open_shared(&self) -> Result<Conn> {
        let inner = match &self.0.deploy {
            Deploy::Single(client) => {
                // The manager retries its first connection for several seconds whatever the
                // error; a refused password or certificate is reported at once instead.
                if let Err(e) = client
                    .get_multiplexed_async_connection_with_config(&async_config(CONNECT_TIMEOUT))
                    .await
                {
                    if node::permanent(&e) {
                        return Err(e.into());
                    }
                }
                // One reconnect attempt per failed request (redis-rb's default), not six
                // spread over seconds: a request that waited inside the manager's own loop
                // would hide the outage from `retry`, which backs off, logs it once and
                // resends safely.
                let cfg = ConnectionManagerConfig::new()
                    .set_response_timeout(Some(RESPONSE_TIMEOUT))
                    .set_connection_timeout(Some(CONNECT_TIMEOUT))
                    .set_number_of_retries(1)
                    .set_max_delay(Duration::from_secs(2));
                ConnInner::Single(ConnectionManager::new_with_config(client.clone(), cfg).await?)
            }
            Deploy::Sentinel(spec) => ConnInner::Sentinel(
                sentinel::Failover::connect(
                    spec.clone(),
                    async_config(RESPONSE_TIMEOUT),
                    self.0.master.clone(),
                )
                .await?,
            ),
            Deploy::Cluster(spec) => ConnInner::Cluster(
                cluster::ClusterConn::connect(
                    spec.clone(),
                    async_config(RESPONSE_TIMEOUT),
                    self.0.routes.clone(),
                )
                .await?,
            ),
        };
        Ok(Conn {
            inner,
            wait: self.0.wait,
            bound: self.0.bound,
            activity: Arc::new(Activity::new()),
            label: self.0.label.clone(),
            origin: self.clone(),
        })
    }

    /// A dedicated connection for a blocking command whose server-side timeout is `block`: to
    /// the server, the current Sentinel master, or the cluster node owning the slot.
    pub async fn blocking(&self, block: Duration) -> RedisResult<Blocking> {
        let cfg = async_config(block + Duration::from_secs(10));
        Ok(Blocking(match &self.0.deploy {
            Deploy::Single(client) => BlockingInner::Single(
                client
                    .get_multiplexed_async_connection_with_config(&cfg)
                    .await?,
            ),
            Deploy::Sentinel(spec) => BlockingInner::Sentinel(
                sentinel::BlockingSentinel::connect(spec, &cfg, self.0.master.clone()).await?,
            ),
            Deploy::Cluster(spec) => BlockingInner::Cluster(
                cluster::ClusterConn::connect(spec.clone(), cfg, self.0.routes.clone()).await?,
            ),
        }))
    }
}

impl Endpoint {
    /// A dedicated RESP3 connection on which Redis pushes `invalidate` messages, handed to
    /// `tx`, for the next write to each key the connection reads (`CLIENT TRACKING ON`, Redis's
    /// default mode; never `BCAST`, which would make Redis compare every written key with the
    /// prefixes). `Ok(None)` for Redis Cluster (tracking is per node; the caller falls back).
    pub(crate) async fn tracking(
        &self,
        tx: tokio::sync::mpsc::UnboundedSender<redis::PushInfo>,
    ) -> RedisResult<Option<MultiplexedConnection>> {
        let client = match &self.0.deploy {
            Deploy::Single(_) => match &self.0.tracking {
                Some(c) => c.clone(),
                None => return Ok(None),
            },
            Deploy::Sentinel(spec) => {
                let mut spec = spec.clone();
                spec.node.protocol = redis::ProtocolVersion::RESP3;
                spec.master(&self.0.master).await?.0
            }
            Deploy::Cluster(_) => return Ok(None),
        };
        let cfg = async_config(Duration::from_secs(10)).set_push_sender(tx);
        let mut con = client
            .get_multiplexed_async_connection_with_config(&cfg)
            .await?;
        redis::cmd("CLIENT")
            .arg("TRACKING")
            .arg("ON")
            .query_async::<()>(&mut con)
            .await?;
        Ok(Some(con))
    }
}

impl Endpoint {
    /// Where the master is, as a number that changes whenever it moves (Sentinel; `0`
    /// otherwise). With [`Endpoint::master_moved`], a dedicated connection that is not sent
    /// commands often (the invalidation-tracking one) leaves a master the sentinels left.
    pub(crate) fn master_epoch(&self) -> u64 {
        match self.0.deploy {
            Deploy::Sentinel(_) => self.0.master.epoch(),
            _ => 0,
        }
    }

    /// Resolves once the master moved since [`Endpoint::master_epoch`] said `epoch`; never
    /// without Sentinel.
    pub(crate) async fn master_moved(&self, epoch: u64) {
        match self.0.deploy {
            Deploy::Sentinel(_) => self.0.master.moved(epoch).await,
            _ => std::future::pending().await,
        }
    }
}

/// Reads `keys` (`TYPE`, which answers whatever they hold) on a connection made by
/// [`Endpoint::tracking`], so Redis tells it of the next write to each; returns their types.
pub(crate) async fn track_reads(
    con: &mut MultiplexedConnection,
    keys: &[String],
) -> RedisResult<Vec<String>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for k in keys {
        pipe.cmd("TYPE").arg(k);
    }
    pipe.query_async(con).await
}

/// Whether a `redis_version` is at least [`MIN_REDIS`].
fn version_ok(version: &str) -> bool {
    let mut parts = version
        .split('.')
        .map(|p| p.trim().parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= MIN_REDIS
}

/// The value of `INFO` field `name` (`name:value` lines).
fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// The eviction policy of a server that may evict keys (`INFO`'s `maxmemory` set and
/// `maxmemory_policy` other than `noeviction`), else `None`.
fn eviction(info: &str) -> Option<&str> {
    let limited = info_field(info, "maxmemory").is_some_and(|m| m != "0");
    info_field(info, "maxmemory_policy").filter(|p| limited && *p != "noeviction")
}

/// The oldest Redis resq runs on: its scripts are a Redis Functions library (`FUNCTION LOAD`,
/// `FCALL`), which came with 7.0.
pub(crate) const MIN_REDIS: (u32, u32) = (7, 0);

/// Checks that the server is Redis (or a compatible server reporting a `redis_version`) ≥
/// [`MIN_REDIS`]; an older one is refused with a clear message instead of failing later in
/// confusing ways. A server that may evict keys is named in a warning ([`eviction`]).
pub(crate) async fn check_server<C: ConnectionLike + Send>(
    con: &mut C,
    target: &str,
) -> Result<()> {
    // (The default sections: `server` and `memory`. One section a call before Redis 7.)
    let info: String = redis::cmd("INFO").query_async(con).await?;
    if let Some(policy) = eviction(&info) {
        tracing::warn!(
            redis = %target,
            policy,
            "Redis may evict keys when it is full (maxmemory-policy {policy}): queued jobs, jobs \
             in progress, records and locks could vanish without a trace; set maxmemory-policy \
             noeviction (a full Redis then refuses writes, which resq waits out: \
             docs/production-redis.md)"
        );
    }
    let version = info_field(&info, "redis_version").unwrap_or("");
    if !version_ok(version) {
        return Err(Error::Unsupported(format!(
            "redis {target} runs Redis {} but resq needs Redis {}.{} or newer (its scripts are \
             a Redis Functions library); upgrade the server",
            if version.is_empty() {
                "of an unknown version"
            } else {
                version
            },
            MIN_REDIS.0,
            MIN_REDIS.1
        )));
    }
    Ok(())
}

impl fmt::Display for Endpoint {
    /// The URL without its password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.shown)
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.0.shown)
            .field("deployment", &self.deployment())
            .finish()
    }
}

/// Checks that `url` is a Redis URL resq can use (as [`Endpoint::with_options`], without
/// reading any file); the error names `REDIS_URL` and never shows the password.
pub(crate) fn check_url(url: &str, options: &RedisOptions) -> Result<()> {
    url::Target::parse(url, options.cluster).map(|_| ())
}

/// Checks that `v` is a Redis URL resq can use (`redis://`, `rediss://`, `redis+sentinel://`,
/// `redis+cluster://`, unix sockets; see [`url`]) and returns it. The error never shows the
/// password.
pub(crate) fn parse_url(v: &str, options: &RedisOptions) -> Result<String> {
    check_url(v, options)?;
    Ok(v.to_string())
}

fn async_config(response: Duration) -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_response_timeout(Some(response))
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
}

#[cfg(test)]
mod tests {
    #[test]
    fn server_versions() {
        assert!(super::version_ok("7.0.15"));
        assert!(super::version_ok("7.0.0"));
        assert!(super::version_ok("10.0.1"));
        assert!(!super::version_ok("6.2.14"));
        assert!(!super::version_ok("6.0.16"));
        assert!(!super::version_ok("5.0.7"));
        assert!(!super::version_ok(""));
    }

    #[test]
    fn eviction_is_named_only_when_it_can_happen() {
        let info = |max: &str, policy: &str| {
            format!(
                "# Memory\r\nmaxmemory:{max}\r\nmaxmemory_human:x\r\nmaxmemory_policy:{policy}\r\n"
            )
        };
        assert_eq!(
            super::eviction(&info("104857600", "allkeys-lru")),
            Some("allkeys-lru")
        );
        assert_eq!(
            super::eviction(&info("104857600", "volatile-lru")),
            Some("volatile-lru")
        );
        assert_eq!(super::eviction(&info("104857600", "noeviction")), None);
        // No limit: nothing is ever evicted, whatever the policy.
        assert_eq!(super::eviction(&info("0", "allkeys-lru")), None);
        assert_eq!(
            super::eviction("# Server\r\nredis_version:7.0.15\r\n"),
            None
        );
    }
}
