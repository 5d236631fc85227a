//! Redis connections: where Redis is ([`Endpoint`]), the shared self-reconnecting connection
//! every slot multiplexes over ([`Conn`]), dedicated connections for blocking waits
//! ([`Blocking`]), and the retry policy every Redis step follows. Everything else talks to
//! Redis through these types, so the kind of deployment is decided here alone:
//!
//! * one server, plain or TLS (`redis://`, `rediss://`; ACL user, password and database in the
//!   URL; CA and client certificate from URL options or `REDIS_TLS_*`, see `tls`);
//! * Sentinel (`redis+sentinel://h:p,h:p,…/<master>[/db]`): the master is looked up through the
//!   sentinels, followed through their failover events, and looked up again when it fails, is
//!   demoted, or a `WAIT` comes back short (`sentinel`);
//! * Cluster (`redis+cluster://h:p,h:p,…`, or any `redis://` URL with `RESQ_CLUSTER=1`) with a
//!   hash-tagged namespace (`cluster`).
//!
//! URL forms are in `url`; settings beyond the URL in [`RedisOptions`] (part of
//! [`crate::Config`]). A URL is only ever shown through [`Redacted`] (no password), and no
//! error of this module includes one. `RESQ_WAIT_REPLICAS=N` (opt-in, not in Cluster mode)
//! makes the shared connection follow every request with `WAIT N <RESQ_WAIT_TIMEOUT>`, so a
//! write is only acknowledged once N replicas have it (see docs/production-redis.md).
//!
//! This file holds the connections themselves ([`Conn`], [`Blocking`]); `endpoint` opens them,
//! `retry` resends a step until Redis answers and logs an outage once.

mod bound;
pub(crate) mod cluster;
mod endpoint;
pub(crate) mod errors;
mod node;
mod options;
mod retry;
pub(crate) mod sentinel;
pub(crate) mod tls;
pub(crate) mod url;

pub(crate) use endpoint::{check_server, parse_url, track_reads};
pub use endpoint::{Deployment, Endpoint};
pub use options::RedisOptions;
pub(crate) use retry::{outage, retry_until, Backoff};
pub use url::Redacted;

use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult, Value};
use std::sync::Arc;
use std::time::Duration;

/// `RESQ_WAIT_REPLICAS` / `RESQ_WAIT_TIMEOUT`.
#[derive(Clone, Copy, Debug)]
struct Wait {
    /// Replicas that must acknowledge.
    replicas: u32,
    /// How long `WAIT` may block, in milliseconds.
    timeout_ms: u64,
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
    /// The endpoint it was opened from, to open another like it ([`Conn::open_another`]).
    origin: Endpoint,
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
        let v = match &mut self.inner {
            // A short `WAIT` makes the next command ask the sentinels first.
            ConnInner::Sentinel(c) => {
                let mut p = redis::pipe();
                p.add_command(cmd);
                c.send_waited(&p, 1, w.replicas)
                    .await?
                    .pop()
                    .ok_or_else(|| RedisError::from((ErrorKind::Client, "missing reply")))?
            }
            _ => self.inner_request(&cmd).await?,
        };
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
            ConnInner::Sentinel(c) => c.send_waited(&p, 2, w.replicas).await,
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
    /// A new connection of its own (its own socket) to where this one goes, with the same
    /// settings: for work that must not wait behind this connection's traffic (the dashboard
    /// gives each request one, `web::pool`).
    #[cfg_attr(not(feature = "web"), allow(dead_code))]
    pub(crate) async fn open_another(&self) -> crate::error::Result<Conn> {
        self.origin.connect().await
    }

    /// The keys of `namespace` where this connection goes: spread over the slots on a Redis
    /// Cluster when it has no hash tag ([`Endpoint::keys`]).
    pub(crate) fn keys(&self, namespace: &str) -> crate::keys::Keys {
        self.origin
            .keys(namespace)
            .unwrap_or_else(|_| crate::keys::Keys::new(namespace))
    }

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
            // A pipeline built from an empty list asks nothing: it is answered with nothing,
            // where redis-rs would fail it as an "empty command".
            if count == 0 {
                return Ok(Vec::new());
            }
            let sent = bound::within(bound, async {
                match &mut self.inner {
                    ConnInner::Single(c) => c.req_packed_commands(pipeline, offset, count).await,
                    ConnInner::Sentinel(c) => c.req_packed_commands(pipeline, offset, count).await,
                    ConnInner::Cluster(c) => c.req_packed_commands(pipeline, offset, count).await,
                }
            });
            let mut v = sent.await?;
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

/// Redis server time: every heartbeat is written with it, so every age is measured against it.
pub(crate) async fn redis_time<C: ConnectionLike + Send>(
    con: &mut C,
) -> RedisResult<chrono::DateTime<chrono::Utc>> {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(con).await?;
    crate::wire::time::from_redis_time(secs, micros).ok_or_else(|| {
        redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, "TIME out of range"))
    })
}
