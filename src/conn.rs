//! Redis connections: where Redis is ([`Endpoint`]), the shared self-reconnecting connection
//! every slot multiplexes over ([`Conn`]), dedicated connections for blocking waits
//! ([`Blocking`]), and the retry policy every Redis step follows. Everything else talks to
//! Redis through these types, so the kind of deployment is decided here alone:
//!
//! * one server, plain or TLS (`redis://`, `rediss://`; ACL user, password and database in the
//!   URL; CA and client certificate from URL options or `REDIS_TLS_*`, see `tls`);
//! * Sentinel (`redis+sentinel://h:p,h:p,…/<master>[/db]`): the master is looked up through the
//!   sentinels and looked up again when it fails or is demoted (`sentinel`);
//! * Cluster (`redis+cluster://h:p,h:p,…`, or any `redis://` URL with `RESQ_CLUSTER=1`) with a
//!   hash-tagged namespace (`cluster`).
//!
//! URL forms are in `url`; settings beyond the URL in [`RedisOptions`] (part of
//! [`crate::Config`]). A URL is only ever shown through [`Redacted`] (no password), and no
//! error of this module includes one. `RESQ_WAIT_REPLICAS=N` (opt-in, not in Cluster mode)
//! makes the shared connection follow every request with `WAIT N <RESQ_WAIT_TIMEOUT>`, so a
//! write is only acknowledged once N replicas have it (see docs/production-redis.md).

mod bound;
pub(crate) mod cluster;
pub(crate) mod errors;
mod node;
mod options;
pub(crate) mod sentinel;
pub(crate) mod tls;
pub(crate) mod url;

pub use options::RedisOptions;
pub use url::Redacted;

use crate::error::{Error, Result};
use rand::Rng;
use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::{
    AsyncConnectionConfig, Client, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult,
    Value,
};
use std::fmt;
use std::future::Future;
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

/// `RESQ_WAIT_REPLICAS` / `RESQ_WAIT_TIMEOUT`.
#[derive(Clone, Copy, Debug)]
struct Wait {
    /// Replicas that must acknowledge.
    replicas: u32,
    /// How long `WAIT` may block, in milliseconds.
    timeout_ms: u64,
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

    /// Opens `url` with `options`, checks `namespace` suits the deployment (hash-tagged in
    /// Cluster mode) and connects: what a client or admin handle starts with.
    pub(crate) async fn connect_namespace(
        url: &str,
        namespace: &str,
        options: &RedisOptions,
    ) -> Result<Conn> {
        let endpoint = Self::with_options(url, options)?;
        endpoint.check_namespace(namespace)?;
        endpoint.connect().await
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

    /// Checks that `namespace` can be used on this deployment: in Cluster mode it needs a hash
    /// tag (`{resque}`), so that every key of a job step is in one slot.
    pub fn check_namespace(&self, namespace: &str) -> Result<()> {
        match self.0.deploy {
            Deploy::Cluster(_) => cluster::check_namespace(namespace),
            _ => Ok(()),
        }
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
                .unwrap_or_else(|_| Err(bound::timed_out(b, "no connection").into())),
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
                spec.master().await?
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

/// The oldest Redis resq runs on: `LPOP` with a count, `BLMOVE`, `SMISMEMBER` are 6.2's.
pub(crate) const MIN_REDIS: (u32, u32) = (6, 2);

/// Checks that the server is Redis (or a compatible server reporting a `redis_version`) ≥
/// [`MIN_REDIS`]; an older one is refused with a clear message instead of failing later in
/// confusing ways.
pub(crate) async fn check_server<C: ConnectionLike + Send>(
    con: &mut C,
    target: &str,
) -> Result<()> {
    let info: String = redis::cmd("INFO").arg("server").query_async(con).await?;
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .map(str::trim)
        .unwrap_or("");
    if !version_ok(version) {
        return Err(Error::Unsupported(format!(
            "redis {target} runs Redis {} but resq needs Redis {}.{} or newer (LPOP with a \
             count, BLMOVE, SMISMEMBER); upgrade the server",
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

fn async_config(response: Duration) -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_response_timeout(Some(response))
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
}

/// The connection behind a [`Conn`].
#[derive(Clone)]
enum ConnInner {
    /// One server, through redis-rs's reconnecting manager.
    Single(ConnectionManager),
    /// The current Sentinel master.
    Sentinel(sentinel::Failover),
    /// A cluster, routed by slot.
    Cluster(cluster::ClusterConn),
}

/// The shared connection; cheap to clone (clones share one socket and pipeline per node).
///
/// A connection the server (its `timeout`), a proxy or a NAT closed while it was idle fails the
/// next request at once, before anything is sent; such a request — one sent after at least
/// `IDLE` without traffic, failing as a dropped connection within `QUICK` — is sent again,
/// once, on the reconnected connection, so a handler's command through resq's connection
/// survives an idle close. The close is logged (at a bounded rate).
#[derive(Clone)]
pub struct Conn {
    /// The connection.
    inner: ConnInner,
    /// `RESQ_WAIT_REPLICAS`.
    wait: Option<Wait>,
    /// How long each request may wait for its reply (`None`: redis-rs's response timeout).
    bound: Option<Duration>,
    /// Traffic on it, to recognise an idle close.
    activity: Arc<Activity>,
    /// Where it goes, for messages.
    label: Arc<str>,
}

/// Requests of this process that failed in a way a server restart or a failover gives (a
/// dropped or refused connection, a timeout, `LOADING`, `READONLY`, `MASTERDOWN`): what the
/// process learned from Redis before one may no longer hold (a replica promoted before it had
/// every write). See [`faults`].
static FAULTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many requests of this process failed as a restart or a failover makes them fail; a
/// value that changed since something was learned from Redis says it must be read again.
pub(crate) fn faults() -> u64 {
    FAULTS.load(std::sync::atomic::Ordering::SeqCst)
}

/// Whether a restart or a failover could be behind `e`.
fn is_fault(e: &RedisError) -> bool {
    matches!(e.code(), Some("LOADING" | "READONLY" | "MASTERDOWN"))
        || e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
}

/// Counts `e` in [`faults`] when a restart or a failover could be behind it.
fn note_fault(e: &RedisError) {
    if is_fault(e) {
        FAULTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// How long without traffic makes a connection idle.
const IDLE: Duration = Duration::from_secs(1);
/// How soon a request on an idle-closed connection fails.
const QUICK: Duration = Duration::from_millis(250);

/// Traffic on a shared connection.
struct Activity {
    /// When the connection was opened.
    base: std::time::Instant,
    /// When a request last got an answer (ms after `base`).
    last_ok_ms: std::sync::atomic::AtomicU64,
    /// Requests waiting for an answer.
    in_flight: std::sync::atomic::AtomicUsize,
    /// Bounded-rate reports of idle closes.
    closes: std::sync::Mutex<errors::Reporter>,
}

impl Activity {
    fn new() -> Self {
        Activity {
            base: std::time::Instant::now(),
            last_ok_ms: Default::default(),
            in_flight: Default::default(),
            closes: Default::default(),
        }
    }

    /// Whether nothing was in flight and nothing answered for [`IDLE`].
    fn idle(&self) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.base.elapsed().as_millis() as u64;
        self.in_flight.load(SeqCst) == 0
            && now.saturating_sub(self.last_ok_ms.load(SeqCst)) >= IDLE.as_millis() as u64
    }

    fn answered(&self) {
        let now = self.base.elapsed().as_millis() as u64;
        self.last_ok_ms
            .store(now, std::sync::atomic::Ordering::SeqCst);
    }

    fn report_close(&self, e: &RedisError) {
        let due = self.closes.lock().unwrap_or_else(|p| p.into_inner()).due();
        if let Some(times) = due {
            tracing::info!(times, error = %e, "redis connection was closed while idle (server timeout, proxy or NAT); reconnected and sent the request again");
        }
    }
}

/// Counts a request in flight while it lives.
struct InFlight<'a>(&'a Activity);

impl<'a> InFlight<'a> {
    fn new(a: &'a Activity) -> Self {
        a.in_flight
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        InFlight(a)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Conn {
    /// `WAIT` for the configured replicas after a successful request.
    async fn wait_replicas(&mut self) -> RedisResult<()> {
        let Some(w) = self.wait else { return Ok(()) };
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(w.replicas).arg(w.timeout_ms);
        let v = self.inner_request(&cmd).await?;
        w.check(v)
    }

    /// A command and its `WAIT` in one round trip.
    async fn request_and_wait(&mut self, cmd: &Cmd, w: Wait) -> RedisResult<Value> {
        let mut p = redis::pipe();
        p.add_command(cmd.clone())
            .cmd("WAIT")
            .arg(w.replicas)
            .arg(w.timeout_ms);
        let mut replies = match &mut self.inner {
            ConnInner::Single(c) => c.req_packed_commands(&p, 0, 2).await,
            ConnInner::Sentinel(c) => c.req_packed_commands(&p, 0, 2).await,
            ConnInner::Cluster(c) => c.req_packed_commands(&p, 0, 2).await,
        }?;
        let (Some(acked), Some(reply)) = (replies.pop(), replies.pop()) else {
            return Err(RedisError::from((ErrorKind::Client, "missing reply")));
        };
        w.check(acked)?;
        Ok(reply)
    }

    fn inner_request<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.inner {
            ConnInner::Single(c) => c.req_packed_command(cmd),
            ConnInner::Sentinel(c) => c.req_packed_command(cmd),
            ConnInner::Cluster(c) => c.req_packed_command(cmd),
        }
    }
}

impl Wait {
    /// Checks a `WAIT` reply.
    fn check(&self, reply: Value) -> RedisResult<()> {
        let acked: i64 = redis::from_redis_value(reply)?;
        if acked < i64::from(self.replicas) {
            return Err(RedisError::from((
                ErrorKind::Client,
                "write not acknowledged by enough replicas",
                format!(
                    "WAIT {} {}: {acked} replica(s) acknowledged (RESQ_WAIT_REPLICAS)",
                    self.replicas, self.timeout_ms
                ),
            )));
        }
        Ok(())
    }
}

impl Conn {
    /// Where the connection goes, for messages (`127.0.0.1:6380`).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// One request, followed by `WAIT` when configured.
    async fn request(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        match self.wait {
            None => self.inner_request(cmd).await,
            Some(w) => self.request_and_wait(cmd, w).await,
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let activity = self.activity.clone();
            let idle = activity.idle();
            let started = std::time::Instant::now();
            let bound = self.bound;
            let first = {
                let _f = InFlight::new(&activity);
                bound::within(bound, self.request(cmd)).await
            };
            if let Err(e) = &first {
                note_fault(e);
            }
            if let Ok(Value::ServerError(se)) = &first {
                note_fault(&RedisError::from(se.clone()));
            }
            let result = match first {
                Err(e) if idle && e.is_connection_dropped() && started.elapsed() < QUICK => {
                    activity.report_close(&e);
                    let _f = InFlight::new(&activity);
                    bound::within(bound, self.request(cmd)).await
                }
                other => other,
            };
            if result.is_ok() {
                activity.answered();
            }
            match result {
                // redis-rs hands an error reply back as a value; the typed query turns it
                // into an error later.
                Ok(Value::ServerError(se)) if se.code() == "WRONGTYPE" => {
                    Err(errors::name_the_key(RedisError::from(se), cmd))
                }
                Err(e) => Err(errors::name_the_key(e, cmd)),
                ok => ok,
            }
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let (wait, bound) = (self.wait.is_some(), self.bound);
        Box::pin(async move {
            let sent = bound::within(bound, async {
                match &mut self.inner {
                    ConnInner::Single(c) => c.req_packed_commands(pipeline, offset, count).await,
                    ConnInner::Sentinel(c) => c.req_packed_commands(pipeline, offset, count).await,
                    ConnInner::Cluster(c) => c.req_packed_commands(pipeline, offset, count).await,
                }
            });
            let mut v = sent.await.inspect_err(note_fault)?;
            errors::name_the_keys(&mut v, pipeline);
            if wait {
                bound::within(bound, self.wait_replicas()).await?;
            }
            Ok(v)
        })
    }

    fn get_db(&self) -> i64 {
        match &self.inner {
            ConnInner::Single(c) => c.get_db(),
            ConnInner::Sentinel(c) => c.get_db(),
            ConnInner::Cluster(c) => c.get_db(),
        }
    }
}

/// The connection behind a [`Blocking`].
enum BlockingInner {
    /// One server.
    Single(MultiplexedConnection),
    /// The Sentinel master.
    Sentinel(sentinel::BlockingSentinel),
    /// The node that owns the slot.
    Cluster(cluster::ClusterConn),
}

/// A dedicated connection for blocking commands (the queue watchers' `BLMOVE`). It does not
/// reconnect by itself: on an error, drop it and ask [`Endpoint::blocking`] for a new one.
pub struct Blocking(BlockingInner);

impl ConnectionLike for Blocking {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.0 {
            BlockingInner::Single(c) => c.req_packed_command(cmd),
            BlockingInner::Sentinel(c) => c.req_packed_command(cmd),
            BlockingInner::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.0 {
            BlockingInner::Single(c) => c.req_packed_commands(pipeline, offset, count),
            BlockingInner::Sentinel(c) => c.req_packed_commands(pipeline, offset, count),
            BlockingInner::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.0 {
            BlockingInner::Single(c) => c.get_db(),
            BlockingInner::Sentinel(c) => c.get_db(),
            BlockingInner::Cluster(c) => c.get_db(),
        }
    }
}

/// Capped exponential back-off with full jitter: 50 ms doubling to `cap`.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    /// Attempts made so far.
    attempt: u32,
    /// Longest wait.
    cap: Duration,
}

impl Backoff {
    /// A fresh back-off capped at `cap`.
    pub(crate) fn new(cap: Duration) -> Self {
        Backoff { attempt: 0, cap }
    }

    /// The next wait.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let base = Duration::from_millis(50).saturating_mul(1u32 << self.attempt.min(16));
        self.attempt += 1;
        let max = base.min(self.cap);
        let ms = rand::rng().random_range(max.as_millis() as u64 / 2..=max.as_millis() as u64);
        Duration::from_millis(ms)
    }

    /// Whether any attempt failed since the last reset.
    pub(crate) fn failing(&self) -> bool {
        self.attempt > 0
    }
}

/// Runs `op` until it succeeds, waiting with [`Backoff`] between failures, or gives up
/// (returns `None`) when `stop` resolves, even while an attempt is in flight: nothing waits on
/// Redis without also waiting on shutdown. `what` names the step in logs; the process says once
/// that Redis is unreachable (or refuses writes) and once that it is back (see `outage`),
/// however many tasks retry meanwhile; an error that needs a repair
/// (`errors::Class::Permanent`) is reported at a bounded rate while it lasts.
pub(crate) async fn retry_until<T, F, Fut>(
    what: &str,
    mut op: F,
    stop: impl Future<Output = ()>,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = RedisResult<T>>,
{
    let mut backoff = Backoff::new(Duration::from_secs(5));
    let mut streak = outage::Streak::default();
    let mut reporter = errors::Reporter::default();
    tokio::pin!(stop);
    loop {
        let result = tokio::select! {
            r = op() => r,
            _ = &mut stop => return None,
        };
        match result {
            Ok(v) => {
                if backoff.failing() {
                    crate::metrics::redis_reconnect();
                    streak.succeeded(what);
                }
                return Some(v);
            }
            Err(e) => {
                crate::metrics::redis_error();
                if errors::classify(&e) == errors::Class::Permanent {
                    if let Some(times) = reporter.due() {
                        tracing::error!(step = what, times, "{}", errors::describe_here(&e));
                    }
                } else {
                    streak.failed_request(what, &e);
                }
                tokio::select! {
                    _ = tokio::time::sleep(backoff.next_delay()) => {}
                    _ = &mut stop => return None,
                }
            }
        }
    }
}

/// Process-wide outage state, so an outage is logged once for the whole process: a warning
/// when the first task sees Redis fail, an info line when a task that had failed gets through
/// again — not once per task or per attempt. A failure still belongs to the outage already
/// logged when it comes within [`outage::GRACE`] after the recovery (a connection that notices
/// the restart late), or from a task whose own run of failures began before the recovery (it
/// was backing off while another task got through first).
pub(crate) mod outage {
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    /// How long after a recovery a new failure still counts as the same outage.
    pub(crate) const GRACE: Duration = Duration::from_secs(1);

    /// The shared state.
    struct State {
        /// A warning was logged for the current outage and no recovery logged since.
        logged: bool,
        /// When the last logged outage ended.
        recovered_at: Option<Instant>,
    }

    static STATE: Mutex<State> = Mutex::new(State {
        logged: false,
        recovered_at: None,
    });

    fn state() -> std::sync::MutexGuard<'static, State> {
        STATE.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One task's run of failures: reports them and its recovery to the process-wide state.
    #[derive(Debug, Default)]
    pub(crate) struct Streak {
        /// When the current run of failures began (`None` while succeeding).
        since: Option<Instant>,
    }

    impl Streak {
        /// Reports a failure of this task.
        pub(crate) fn failed(&mut self, what: &str, e: &dyn std::fmt::Display) {
            let since = *self.since.get_or_insert_with(Instant::now);
            report_failure(what, e, since);
        }

        /// Reports a failed Redis request of this task, described by its class.
        pub(crate) fn failed_request(&mut self, what: &str, e: &redis::RedisError) {
            let text = super::errors::describe_here(e);
            self.failed(what, &text);
        }

        /// Reports a success of this task; the end of the outage is logged if it was.
        pub(crate) fn succeeded(&mut self, what: &str) {
            if self.since.take().is_some() {
                recovered(what);
            }
        }
    }

    /// Reports a failed Redis step of a task failing since `since`; logs the first failure of
    /// an outage.
    fn report_failure(what: &str, e: &dyn std::fmt::Display, since: Instant) {
        let mut s = state();
        let aftershock = same_outage(s.recovered_at, since, Instant::now());
        if !s.logged && !aftershock {
            s.logged = true;
            drop(s);
            let text = e.to_string();
            if text.starts_with("Redis refuses writes") {
                tracing::warn!(step = what, "{text}; retrying with back-off");
            } else {
                tracing::warn!(step = what, error = %text, "redis unreachable; retrying with back-off");
            }
        } else {
            drop(s);
            tracing::debug!(step = what, error = %e, "redis step failed; retrying");
        }
    }

    /// Whether a failure at `now`, of a task failing since `since`, belongs to the outage whose
    /// recovery was logged at `recovered_at`.
    fn same_outage(recovered_at: Option<Instant>, since: Instant, now: Instant) -> bool {
        recovered_at.is_some_and(|t| since < t || now.saturating_duration_since(t) < GRACE)
    }

    /// Reports that a step which had failed succeeded; logs the end of the outage once.
    fn recovered(what: &str) {
        let mut s = state();
        if s.logged {
            s.logged = false;
            s.recovered_at = Some(Instant::now());
            drop(s);
            tracing::info!(step = what, "redis reachable again");
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn server_versions() {
            assert!(super::super::version_ok("7.0.15"));
            assert!(super::super::version_ok("6.2.0"));
            assert!(super::super::version_ok("10.0.1"));
            assert!(!super::super::version_ok("6.0.16"));
            assert!(!super::super::version_ok("5.0.7"));
            assert!(!super::super::version_ok(""));
        }

        #[test]
        fn late_failures_of_the_same_outage() {
            let t = Instant::now();
            let s = Duration::from_secs(1);
            // Nothing recovered yet: a new outage.
            assert!(!same_outage(None, t, t));
            // Within the grace period after the recovery.
            assert!(same_outage(Some(t), t + s / 2, t + s / 2));
            // Long after, but the task has been failing since before the recovery (it was
            // backing off while another task got through first).
            assert!(same_outage(Some(t + s), t, t + 10 * s));
            // Long after, from a task that had succeeded since: a new outage.
            assert!(!same_outage(Some(t), t + 5 * s, t + 5 * s));
        }
    }
}

#[cfg(test)]
mod fault_tests {
    use super::*;

    #[test]
    fn restarts_and_failovers_count_as_faults_and_refusals_do_not() {
        let io = |kind| RedisError::from(std::io::Error::new(kind, "x"));
        assert!(is_fault(&io(std::io::ErrorKind::ConnectionReset)));
        assert!(is_fault(&io(std::io::ErrorKind::ConnectionRefused)));
        assert!(is_fault(&io(std::io::ErrorKind::TimedOut)));
        let reply = |code: &str| redis::make_extension_error(code.to_string(), None);
        for code in ["LOADING", "READONLY", "MASTERDOWN"] {
            assert!(is_fault(&reply(code)), "{code}");
        }
        // Answers of a server that is where it was: what was learned from it still holds.
        for code in ["WRONGTYPE", "NOSCRIPT", "OOM", "BUSY", "NOTINTEGER"] {
            assert!(!is_fault(&reply(code)), "{code}");
        }
    }
}
