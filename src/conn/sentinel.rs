//! Sentinel: the master is whatever the sentinels say it is now.
//!
//! [`Failover`] is the shared connection of a `redis+sentinel://` endpoint. It asks the
//! sentinels for the master (redis-rs's Sentinel client: `SENTINEL MASTERS` on each sentinel,
//! skipping a master flagged down, then `ROLE` on the node to confirm it is a master), opens a
//! multiplexed connection to it, and keeps using it until a reply says the node is gone or no
//! longer the master: an I/O error, a timeout, a dropped connection, or `READONLY` /
//! `MASTERDOWN` (the old master came back as a replica, or lost its link). Then the connection
//! is dropped and the next command asks the sentinels again. The failing command's error is
//! returned as it is; the caller's [`super::retry_until`] resends it, as after any outage.
//!
//! Reconnects are serialised: however many tasks fail at once, one asks the sentinels and the
//! others reuse its connection. The master it found is published on the endpoint
//! ([`MasterHint`]), so the dedicated blocking connections of the queue watchers, which would
//! otherwise wait on a demoted node until their timeout, notice the change on their next
//! command and reconnect (see [`BlockingSentinel`]).
//!
//! A master that is demoted while it stays up (a planned `SENTINEL FAILOVER`) answers as a
//! master until the sentinels reconfigure it, seconds later, and then discards every write it
//! took since the promotion. So the endpoint also follows the sentinels themselves (`watch`):
//! subscribed to their failover events, it holds the endpoint's commands back while the
//! leader promotes a replica (at most [`PAUSE_MAX`]), publishes the new master on the
//! [`MasterHint`] the moment the promoted replica says it is master, and every connection of
//! the endpoint checks the hint (two atomic loads) before each command and moves over before
//! sending anything more to the old one. A master the sentinels moved away from is not taken
//! back from a lookup for a while (the sentinels name it until their switch). A `WAIT` that
//! comes back short makes the next command ask the sentinels again.

use super::node::{permanent, server_errors, NodeAuth};
use super::url::Target;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    AsyncConnectionConfig, Client, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult,
    ServerError, ServerErrorKind, Value,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod watch;

/// How to reach the sentinels and the master.
#[derive(Clone)]
pub(crate) struct Spec {
    /// Sentinel addresses.
    pub sentinels: Vec<(String, u16)>,
    /// The master's name.
    pub master: String,
    /// Credentials, database and TLS of the data nodes (TLS applies to the sentinels too).
    pub node: NodeAuth,
    /// AUTH for the sentinels themselves, when they require it.
    pub sentinel_username: Option<String>,
    /// AUTH password for the sentinels.
    pub sentinel_password: Option<String>,
}

impl Spec {
    /// Reads the sentinel part of a parsed URL.
    pub(crate) fn new(target: &Target, master: &str, node: NodeAuth) -> Spec {
        Spec {
            sentinels: target.hosts.clone(),
            master: master.to_string(),
            node,
            sentinel_username: target.option("sentinel_username").map(str::to_string),
            sentinel_password: target.option("sentinel_password").map(str::to_string),
        }
    }

    /// A fresh redis-rs sentinel client (no I/O until used).
    fn client(&self) -> RedisResult<SentinelClient> {
        let addrs = self
            .sentinels
            .iter()
            .map(|(h, p)| self.node.addr(h, *p))
            .collect::<Vec<_>>();
        let mut b = SentinelClientBuilder::new(addrs, &self.master, SentinelServerType::Master)?
            .set_client_to_redis_db(self.node.db)
            .set_client_to_redis_protocol(self.node.protocol);
        if let Some(u) = &self.node.username {
            b = b.set_client_to_redis_username(u);
        }
        if let Some(p) = &self.node.password {
            b = b.set_client_to_redis_password(p);
        }
        if let Some(u) = &self.sentinel_username {
            b = b.set_client_to_sentinel_username(u);
        }
        if let Some(p) = &self.sentinel_password {
            b = b.set_client_to_sentinel_password(p);
        }
        #[cfg(feature = "tls")]
        if self.node.tls {
            b = b
                .set_client_to_redis_tls_mode(redis::TlsMode::Secure)
                .set_client_to_sentinel_tls_mode(redis::TlsMode::Secure);
            if let Some(certs) = &self.node.certs {
                b = b
                    .set_client_to_redis_certificates(certs.clone())
                    .set_client_to_sentinel_certificates(certs.clone());
            }
        }
        b.build()
    }

    /// The master to connect to (a one-off lookup, for dedicated connections): see
    /// [`resolve`]; its address.
    pub(crate) async fn master(&self, hint: &MasterHint) -> RedisResult<(Client, String)> {
        resolve(self, hint, &mut self.client()?, None).await
    }

    /// A client for the sentinel at `host:port`, with the sentinels' own credentials.
    fn sentinel(&self, host: &str, port: u16) -> RedisResult<Client> {
        let mut settings = redis::RedisConnectionInfo::default();
        if let Some(u) = &self.sentinel_username {
            settings = settings.set_username(u);
        }
        if let Some(p) = &self.sentinel_password {
            settings = settings.set_password(p);
        }
        self.node.client_as(host, port, settings)
    }
}

/// How long a lookup keeps asking while the sentinels name no usable master (a failover in
/// progress): the connect timeout.
const LOOKUP_PATIENCE: Duration = Duration::from_secs(5);
/// Pause between lookups meanwhile.
const LOOKUP_PAUSE: Duration = Duration::from_millis(100);

/// Asks the sentinels for the master until they name one that says it is the master (and is
/// not one they just moved away from), for up to [`LOOKUP_PATIENCE`]: during a failover, every
/// task waiting for the master gets it within [`LOOKUP_PAUSE`] of the switch instead of after
/// its own back-off.
async fn lookup(sentinels: &mut SentinelClient, hint: &MasterHint) -> RedisResult<Client> {
    let deadline = tokio::time::Instant::now() + LOOKUP_PATIENCE;
    loop {
        let found = sentinels.async_get_client().await.and_then(|c| {
            let addr = c.get_connection_info().addr().to_string();
            if hint.superseded(&addr) {
                Err(RedisError::from((
                    ErrorKind::Io,
                    "the sentinels still name the master they are moving away from",
                    addr,
                )))
            } else {
                Ok(c)
            }
        });
        match found {
            Ok(c) => return Ok(c),
            Err(e) if !permanent(&e) && tokio::time::Instant::now() + LOOKUP_PAUSE < deadline => {
                tracing::debug!(error = %e, "sentinel: no master yet; asking again");
                tokio::time::sleep(LOOKUP_PAUSE).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// How long the last known master may take to answer before the sentinels are asked instead
/// (it may be the one that died).
const CONFIRM_PATIENCE: Duration = Duration::from_secs(1);

/// Connects to `addr` and checks with `ROLE` that it is a master; the client to it.
async fn confirmed_master(spec: &Spec, addr: &str) -> RedisResult<Client> {
    let Some((host, port)) = super::node::split_addr(addr) else {
        return Err(RedisError::from((
            ErrorKind::InvalidClientConfig,
            "not a host:port",
            addr.to_string(),
        )));
    };
    let client = spec.node.client(&host, port)?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONFIRM_PATIENCE))
        .set_response_timeout(Some(CONFIRM_PATIENCE));
    let mut con = client
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    if watch::is_master(&mut con).await? {
        Ok(client)
    } else {
        Err(RedisError::from((
            ErrorKind::Server(ServerErrorKind::ReadOnly),
            "not a master (yet)",
            addr.to_string(),
        )))
    }
}

/// The master to connect to: the one the endpoint's hint names when it differs from `avoid`
/// (the node just left) and says it is master, else the one the sentinels name.
async fn resolve(
    spec: &Spec,
    hint: &MasterHint,
    sentinels: &mut SentinelClient,
    avoid: Option<&str>,
) -> RedisResult<(Client, String)> {
    if let Some(addr) = hint.get().filter(|a| Some(a.as_str()) != avoid) {
        match confirmed_master(spec, &addr).await {
            Ok(c) => return Ok((c, addr)),
            Err(e) => {
                tracing::debug!(master = %addr, error = %e, "sentinel: the last known master does not answer as one; asking the sentinels")
            }
        }
    }
    let client = lookup(sentinels, hint).await?;
    let addr = client.get_connection_info().addr().to_string();
    Ok((client, addr))
}

/// How long a master the sentinels moved away from is not taken back from a lookup: the
/// sentinels name it until their switch, and reconfigure it as a replica seconds after.
const SUPERSEDED_FOR: Duration = Duration::from_secs(60);

/// Where the master is, as every connection of one endpoint knows it: the address last found
/// (by a lookup, or from the sentinels' events), an epoch bumped on each change, and the
/// masters the sentinels moved away from.
#[derive(Clone, Default)]
pub(crate) struct MasterHint(Arc<HintState>);

/// What a [`MasterHint`] holds.
#[derive(Default)]
struct HintState {
    /// Bumped whenever the address changes (read before every command).
    epoch: AtomicU64,
    /// The address and the superseded masters.
    known: Mutex<Known>,
    /// Whether the sentinels' events are being followed for this endpoint.
    watching: AtomicBool,
    /// Set while the sentinels promote a replica: commands wait for the new master (up to
    /// [`PAUSE_MAX`]) instead of writing to the old one what it would discard.
    pausing: AtomicBool,
    /// Wakes the commands waiting meanwhile.
    resumed: tokio::sync::Notify,
    /// Wakes whoever waits for the master to move ([`MasterHint::moved`]).
    changed: tokio::sync::Notify,
}

/// The longest a promotion holds the endpoint's commands back.
const PAUSE_MAX: Duration = Duration::from_secs(2);

/// The addresses of a [`MasterHint`].
#[derive(Default)]
struct Known {
    /// The master's `host:port`.
    addr: Option<String>,
    /// Masters the sentinels moved away from, and since when.
    superseded: Vec<(String, Instant)>,
}

impl MasterHint {
    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.0.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The epoch: changes whenever the address does.
    pub(crate) fn epoch(&self) -> u64 {
        self.0.epoch.load(Ordering::Acquire)
    }

    /// Resolves once the epoch differs from `epoch` (the master moved since).
    pub(crate) async fn moved(&self, epoch: u64) {
        loop {
            let notified = self.0.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.epoch() != epoch {
                return;
            }
            notified.await;
        }
    }

    fn get(&self) -> Option<String> {
        self.known().addr.clone()
    }

    /// Records `addr`; true when it differs from the address known before.
    fn set(&self, addr: &str) -> bool {
        let mut k = self.known();
        let changed = k.addr.as_deref() != Some(addr);
        let moved = changed && k.addr.is_some();
        if changed {
            k.addr = Some(addr.to_string());
            self.0.epoch.fetch_add(1, Ordering::AcqRel);
            self.0.changed.notify_waiters();
        }
        moved
    }

    /// The sentinels moved the master from `old` to `new`; true when that is news.
    fn switched(&self, new: &str, old: &str) -> bool {
        {
            let mut k = self.known();
            k.superseded
                .retain(|(a, at)| a != new && at.elapsed() < SUPERSEDED_FOR);
            if old != new && !k.superseded.iter().any(|(a, _)| a == old) {
                k.superseded.push((old.to_string(), Instant::now()));
            }
        }
        let moved = self.set(new);
        self.resume();
        moved
    }

    /// Holds commands back: a replica is being promoted.
    fn pause(&self) {
        self.0.pausing.store(true, Ordering::Release);
    }

    /// Lets commands go on.
    fn resume(&self) {
        if self.0.pausing.swap(false, Ordering::AcqRel) {
            self.0.resumed.notify_waiters();
        }
    }

    /// Waits while a promotion holds commands back (at most [`PAUSE_MAX`]); nothing to wait
    /// for otherwise (one atomic load).
    async fn unpaused(&self) {
        if !self.0.pausing.load(Ordering::Acquire) {
            return;
        }
        let notified = self.0.resumed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.0.pausing.load(Ordering::Acquire) {
            let _ = tokio::time::timeout(PAUSE_MAX, notified).await;
        }
    }

    /// Whether the sentinels moved away from `addr` lately.
    fn superseded(&self, addr: &str) -> bool {
        self.known()
            .superseded
            .iter()
            .any(|(a, at)| a == addr && at.elapsed() < SUPERSEDED_FOR)
    }
}

/// Whether the error reply `e` says the node is no longer a writable master: `READONLY` (a
/// demoted master), `MASTERDOWN`, or `EXECABORT` (a transaction whose writes were refused,
/// `READONLY` among the possible reasons; asking the sentinels again costs one lookup).
fn demoted(e: &ServerError) -> bool {
    matches!(
        e.kind(),
        Some(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown | ServerErrorKind::ExecAbort)
    ) || e.code().contains("READONLY")
        || e.details().is_some_and(|d| d.contains("READONLY"))
}

/// Whether `e` means the node is gone or no longer the master, so the sentinels must be asked
/// again.
pub(crate) fn master_lost(e: &RedisError) -> bool {
    if e.is_io_error() || e.is_connection_dropped() || e.is_timeout() || e.is_unrecoverable_error()
    {
        return true;
    }
    if matches!(
        e.kind(),
        ErrorKind::Server(ServerErrorKind::ReadOnly)
            | ErrorKind::Server(ServerErrorKind::MasterDown)
    ) {
        return true;
    }
    // A write refused inside a script or a transaction on a replica may arrive wrapped
    // (`ERR … READONLY …`, `EXECABORT …`).
    let text = e.to_string();
    text.contains("READONLY") || text.contains("MASTERDOWN")
}

/// The current master connection and its generation.
struct Current {
    /// Bumped on every new connection.
    generation: u64,
    /// The hint's epoch the connection is known to agree with.
    epoch: u64,
    /// The connection, and the master's `host:port`.
    con: Option<(MultiplexedConnection, String)>,
    /// The master of the connection dropped last (not tried again from the hint).
    left: Option<String>,
}

/// The state of master lookups.
#[derive(Default)]
struct Lookup {
    /// The sentinel client (its connections to the sentinels are kept between lookups).
    client: Option<SentinelClient>,
    /// When the last lookup failed, and why.
    failed: Option<(tokio::time::Instant, RedisError)>,
}

/// What clones of one [`Failover`] share.
struct Shared {
    /// Where the sentinels are.
    spec: Spec,
    /// The sentinel client, and the last failed lookup (when it ended, its error); held while
    /// (re)connecting, so reconnects are one at a time.
    lookup: tokio::sync::Mutex<Lookup>,
    /// The master connection.
    current: Mutex<Current>,
    /// Timeouts of master connections.
    config: AsyncConnectionConfig,
    /// Where the master is, for the endpoint's other connections.
    hint: MasterHint,
}

/// The shared connection of a Sentinel endpoint: follows the master across failovers.
#[derive(Clone)]
pub(crate) struct Failover(Arc<Shared>);

impl Failover {
    /// Connects to the master the sentinels name now.
    pub(crate) async fn connect(
        spec: Spec,
        config: AsyncConnectionConfig,
        hint: MasterHint,
    ) -> RedisResult<Self> {
        let f = Failover(Arc::new(Shared {
            spec,
            lookup: tokio::sync::Mutex::new(Lookup::default()),
            current: Mutex::new(Current {
                generation: 0,
                epoch: 0,
                con: None,
                left: None,
            }),
            config,
            hint,
        }));
        watch::start(&f.0.spec, &f.0.hint);
        f.con().await?;
        Ok(f)
    }

    fn current(&self) -> std::sync::MutexGuard<'_, Current> {
        self.0.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The connection to use now, if there is one and the hint has not moved away from it.
    fn usable(&self) -> Option<(u64, MultiplexedConnection)> {
        let epoch = self.0.hint.epoch();
        let mut cur = self.current();
        if cur.epoch != epoch {
            let here = cur.con.as_ref()?.1.clone();
            if self.0.hint.get().as_deref() != Some(here.as_str()) {
                tracing::debug!(master = %here, "sentinel: the master moved; leaving the old one before the next command");
                cur.con = None;
                cur.left = Some(here);
                return None;
            }
            cur.epoch = epoch;
        }
        let generation = cur.generation;
        cur.con.as_ref().map(|(c, _)| (generation, c.clone()))
    }

    /// The master connection, asking the sentinels first when there is none (or when the
    /// endpoint learnt of a new master).
    async fn con(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        self.0.hint.unpaused().await;
        if let Some(c) = self.usable() {
            return Ok(c);
        }
        let mut guard = self.0.lookup.lock().await;
        // Someone else may have reconnected while this task waited for the lock.
        if let Some(c) = self.usable() {
            return Ok(c);
        }
        // A lookup that just failed (after asking for up to LOOKUP_PATIENCE) answers the tasks
        // that waited for it, instead of each of them asking that long again.
        if let Some((at, e)) = &guard.failed {
            if at.elapsed() < LOOKUP_PAUSE {
                return Err(e.clone());
            }
        }
        if guard.client.is_none() {
            guard.client = Some(self.0.spec.client()?);
        }
        let Some(sentinels) = guard.client.as_mut() else {
            return Err(RedisError::from((ErrorKind::Client, "no sentinel client")));
        };
        let epoch = self.0.hint.epoch();
        let left = self.current().left.clone();
        let (client, addr) =
            match resolve(&self.0.spec, &self.0.hint, sentinels, left.as_deref()).await {
                Ok(c) => c,
                Err(e) => {
                    guard.failed = Some((tokio::time::Instant::now(), e.clone()));
                    return Err(e);
                }
            };
        guard.failed = None;
        let con = client
            .get_multiplexed_async_connection_with_config(&self.0.config)
            .await?;
        let moved = self.0.hint.set(&addr);
        if moved || left.as_deref().is_some_and(|l| l != addr) {
            tracing::warn!(master = %addr, name = %self.0.spec.master, "sentinel: the master moved; now using the new one");
        } else {
            tracing::debug!(master = %addr, name = %self.0.spec.master, "sentinel: connected to the master");
        }
        let mut cur = self.current();
        cur.generation += 1;
        // The epoch read before resolving: any change since (this one included) is looked at
        // before the next command.
        cur.epoch = epoch;
        cur.con = Some((con.clone(), addr));
        Ok((cur.generation, con))
    }

    /// The connection of `generation` got a `WAIT` acknowledged by fewer replicas than asked:
    /// the master may be on its way out (its replicas follow another one), so the next
    /// command asks the sentinels.
    pub(crate) fn short_wait(&self, generation: u64) {
        let mut cur = self.current();
        if cur.generation == generation {
            if let Some((_, addr)) = cur.con.take() {
                tracing::debug!(master = %addr, "sentinel: WAIT came back short; asking the sentinels for the master");
                cur.left = Some(addr);
            }
        }
    }

    /// Sends `pipeline` whose last command is `WAIT <replicas> …`; when fewer replicas
    /// acknowledged, see [`Failover::short_wait`].
    pub(crate) async fn send_waited(
        &mut self,
        pipeline: &Pipeline,
        count: usize,
        replicas: u32,
    ) -> RedisResult<Vec<Value>> {
        let (generation, mut con) = self.con().await?;
        let r = con.req_packed_commands(pipeline, 0, count).await;
        self.inspect(generation, r.as_ref().map(Vec::as_slice));
        if let Ok(values) = &r {
            if matches!(values.last(), Some(Value::Int(n)) if *n < i64::from(replicas)) {
                self.short_wait(generation);
            }
        }
        r
    }

    /// Drops the connection of `generation` if `e` says the master is gone.
    fn check(&self, generation: u64, e: &dyn std::fmt::Display) {
        let mut cur = self.current();
        if cur.generation == generation {
            if let Some((_, addr)) = cur.con.take() {
                tracing::debug!(error = %e, "sentinel: master connection lost; will ask the sentinels again");
                cur.left = Some(addr);
            }
        }
    }

    /// Checks a reply: an error, or an error reply, that says the master is gone.
    fn inspect(&self, generation: u64, r: Result<&[Value], &RedisError>) {
        match r {
            Err(e) if master_lost(e) => self.check(generation, e),
            Ok(values) => {
                if let Some(e) = server_errors(values).find(|e| demoted(e)) {
                    self.check(generation, e);
                }
            }
            Err(_) => {}
        }
    }
}

impl ConnectionLike for Failover {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (generation, mut con) = self.con().await?;
            let r = con.req_packed_command(cmd).await;
            self.inspect(generation, r.as_ref().map(std::slice::from_ref));
            r
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (generation, mut con) = self.con().await?;
            let r = con.req_packed_commands(pipeline, offset, count).await;
            self.inspect(generation, r.as_ref().map(Vec::as_slice));
            r
        })
    }

    fn get_db(&self) -> i64 {
        self.0.spec.node.db
    }
}

/// A dedicated connection to the master for one blocking command at a time. Before each
/// command it checks that the endpoint still knows the same master; if another connection
/// has moved on, this one fails with an I/O error so its owner reconnects.
pub(crate) struct BlockingSentinel {
    /// The connection.
    con: MultiplexedConnection,
    /// The master it goes to.
    addr: String,
    /// Where the endpoint thinks the master is.
    hint: MasterHint,
    /// The hint's epoch when it connected.
    epoch: u64,
    /// Database index.
    db: i64,
}

impl BlockingSentinel {
    /// Connects to the master the endpoint knows (when it answers as one), else to the one the
    /// sentinels name.
    pub(crate) async fn connect(
        spec: &Spec,
        config: &AsyncConnectionConfig,
        hint: MasterHint,
    ) -> RedisResult<Self> {
        watch::start(spec, &hint);
        let epoch = hint.epoch();
        let (client, addr) = spec.master(&hint).await?;
        let con = client
            .get_multiplexed_async_connection_with_config(config)
            .await?;
        hint.set(&addr);
        Ok(BlockingSentinel {
            con,
            addr,
            hint,
            epoch,
            db: spec.node.db,
        })
    }

    fn moved(&self) -> Option<RedisError> {
        if self.hint.epoch() == self.epoch {
            return None;
        }
        match self.hint.get() {
            Some(now) if now != self.addr => Some(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                format!("the master moved from {} to {now}", self.addr),
            ))),
            _ => None,
        }
    }
}

impl ConnectionLike for BlockingSentinel {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            self.hint.unpaused().await;
            if let Some(e) = self.moved() {
                return Err(e);
            }
            self.con.req_packed_command(cmd).await
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            self.hint.unpaused().await;
            if let Some(e) = self.moved() {
                return Err(e);
            }
            self.con.req_packed_commands(pipeline, offset, count).await
        })
    }

    fn get_db(&self) -> i64 {
        self.db
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_moves_the_epoch_and_leaves_the_old_master_aside() {
        let h = MasterHint::default();
        assert!(!h.set("a:1"), "the first master found is no move");
        let e = h.epoch();
        assert!(!h.set("a:1"));
        assert_eq!(h.epoch(), e, "the same master: the same epoch");
        assert!(h.switched("b:2", "a:1"));
        assert_ne!(h.epoch(), e);
        assert_eq!(h.get().as_deref(), Some("b:2"));
        assert!(h.superseded("a:1") && !h.superseded("b:2"));
        // Moved back: the old master is a master again.
        assert!(h.switched("a:1", "b:2"));
        assert!(!h.superseded("a:1") && h.superseded("b:2"));
    }

    #[tokio::test]
    async fn commands_held_back_go_on_at_the_switch() {
        let h = MasterHint::default();
        h.set("a:1");
        h.pause();
        let waiting = tokio::spawn({
            let h = h.clone();
            async move { h.unpaused().await }
        });
        let moved = tokio::spawn({
            let (h, e) = (h.clone(), h.epoch());
            async move { h.moved(e).await }
        });
        tokio::task::yield_now().await;
        h.switched("b:2", "a:1");
        // Well before PAUSE_MAX.
        let quick = Duration::from_millis(500);
        tokio::time::timeout(quick, waiting)
            .await
            .expect("released at the switch")
            .expect("task");
        tokio::time::timeout(quick, moved)
            .await
            .expect("told of the move")
            .expect("task");
    }
}
