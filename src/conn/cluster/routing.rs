//! Slot routing for cluster connections: the node that owns a request's slot, learned from
//! `MOVED` replies and shared by an endpoint's connections ([`Routes`]), and a connection that
//! sends each request there ([`ClusterConn`]).
//!
//! A request goes to the known owner of its first key's slot (keyless commands such as
//! `TIME`, `SCRIPT LOAD` or `FUNCTION LOAD` go to the node used last, normally the namespace's owner). A node
//! that does not own the slot answers `MOVED <slot> <host:port>` without running anything —
//! for a transaction, every queued command is refused and `EXEC` discards it — so the request
//! is sent again to that node. A node that cannot be reached is forgotten and the seeds are
//! asked instead. While a slot is not served (its master died and no replica has taken over:
//! `CLUSTERDOWN`, `MOVED` to the dead node) or is being moved to another node (`ASK`,
//! `TRYAGAIN`; resq's functions answer `TRYAGAIN` themselves then, before any write: see
//! `prelude.lua`) a request keeps asking every 100 ms for up to 5 s, so it completes as soon as
//! the cluster has failed over or the slot has moved; then, or when a connection breaks
//! mid-request, its error is returned for the caller's `crate::conn::retry_until` to resend, as
//! after any outage.
//!
//! A pipeline (not a transaction) whose commands are in several slots — a spread namespace's
//! shared keys, each in a slot of its own ([`crate::keys::Keys::spread`]) — is sent as its runs
//! of consecutive commands of one slot, one run after the other, each to its slot's owner; the
//! replies come back in the pipeline's order. Sent whole to one node, every command of another
//! slot would be refused (`MOVED`) while the others ran. A pipeline in one slot (every pipeline
//! of a tagged namespace) is sent whole, as one request, as before. A transaction is always
//! sent whole: Redis refuses one across slots (`CROSSSLOT`) before running any of it. A
//! pipeline whose keyed commands were all refused is sent again whole even when its keyless
//! ones (`TIME`) ran: they run anywhere.

use super::Spec;
use crate::conn::node::{permanent, server_errors, split_addr};
use futures::StreamExt;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{
    AsyncConnectionConfig, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult,
    ServerError, ServerErrorKind, Value,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How many `MOVED` replies one request follows at once; after that it follows them only
/// every [`PAUSE`], until [`PATIENCE`] runs out.
pub(super) const MAX_REDIRECTS: usize = 5;

use crate::keys::hash_slot as slot;

/// The first key of a command, if it has one (its first argument for most commands).
fn command_key(cmd: &Cmd) -> Option<Vec<u8>> {
    let mut args = cmd.args_iter().filter_map(|a| match a {
        redis::Arg::Simple(b) => Some(b),
        _ => None,
    });
    let name = args.next()?.to_ascii_uppercase();
    let key = match name.as_slice() {
        b"MULTI" | b"EXEC" | b"DISCARD" | b"UNWATCH" | b"PING" | b"TIME" | b"INFO" | b"SCRIPT"
        | b"FUNCTION" | b"CLIENT" | b"CONFIG" | b"WAIT" | b"DBSIZE" | b"ECHO" | b"HELLO"
        | b"AUTH" | b"SELECT" | b"CLUSTER" | b"COMMAND" | b"READONLY" | b"READWRITE"
        | b"FLUSHDB" | b"FLUSHALL" | b"KEYS" | b"SCAN" | b"RANDOMKEY" | b"ROLE" => None,
        b"EVAL" | b"EVALSHA" | b"EVAL_RO" | b"EVALSHA_RO" | b"FCALL" | b"FCALL_RO" => {
            let _script = args.next()?;
            let n: usize = std::str::from_utf8(args.next()?).ok()?.parse().ok()?;
            if n == 0 {
                None
            } else {
                args.next()
            }
        }
        b"OBJECT" | b"MEMORY" | b"XINFO" | b"XGROUP" => args.nth(1),
        _ => args.next(),
    };
    key.map(<[u8]>::to_vec)
}

/// One request: a command, or a pipeline with the offset and count of the replies wanted.
#[derive(Clone, Copy)]
enum Req<'a> {
    /// A command.
    Cmd(&'a Cmd),
    /// A pipeline.
    Pipe(&'a Pipeline, usize, usize),
}

/// Pipelines of one slot sent at once when a pipeline spans several.
const SLOTS_AT_ONCE: usize = 16;

/// The commands of each slot of a pipeline whose keyed commands are in more than one slot, by
/// index, in the order of their first command (a keyless command joins the group of the
/// command before it, or the first group); `None` when they are all in one slot (or none has a
/// key): the pipeline is sent whole.
fn slot_groups(p: &Pipeline) -> Option<Vec<Vec<usize>>> {
    let mut groups: Vec<(Option<u16>, Vec<usize>)> = Vec::new();
    let mut current = 0;
    for (i, c) in p.cmd_iter().enumerate() {
        match command_key(c).map(|k| slot(&k)) {
            None if groups.is_empty() => groups.push((None, vec![i])),
            None => groups[current].1.push(i),
            Some(s) => {
                if let Some(g) = groups.iter().position(|(gs, _)| *gs == Some(s)) {
                    current = g;
                } else if groups.len() == 1 && groups[0].0.is_none() {
                    groups[0].0 = Some(s);
                    current = 0;
                } else {
                    groups.push((Some(s), Vec::new()));
                    current = groups.len() - 1;
                }
                groups[current].1.push(i);
            }
        }
    }
    (groups.len() > 1).then(|| groups.into_iter().map(|(_, g)| g).collect())
}

impl Req<'_> {
    /// The slot of the request's first key.
    fn slot(&self) -> Option<u16> {
        let key = match self {
            Req::Cmd(c) => command_key(c),
            Req::Pipe(p, _, _) => p.cmd_iter().find_map(command_key),
        };
        key.map(|k| slot(&k))
    }

    fn is_transaction(&self) -> bool {
        matches!(self, Req::Pipe(p, _, _) if p.is_transaction())
    }

    /// Per reply of a whole pipeline (not a transaction), whether its command has a key; empty
    /// otherwise.
    fn keyed(&self) -> Vec<bool> {
        match self {
            Req::Pipe(p, 0, n) if !p.is_transaction() && *n == p.len() => {
                p.cmd_iter().map(|c| command_key(c).is_some()).collect()
            }
            _ => Vec::new(),
        }
    }
}

/// `MOVED <slot> <host:port>` as (slot, address).
fn moved(e: &ServerError) -> Option<(u16, String)> {
    if e.kind() != Some(ServerErrorKind::Moved) {
        return None;
    }
    let mut parts = e.details()?.split_ascii_whitespace();
    let slot = parts.next()?.parse().ok()?;
    Some((slot, parts.next()?.to_string()))
}

/// Whether `e` means the connection itself is unusable.
fn transport(e: &RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_timeout() || e.is_unrecoverable_error()
}

/// What an endpoint's cluster connections have learned.
#[derive(Default)]
struct Learned {
    /// Slot → owner (`host:port`).
    slots: HashMap<u16, String>,
    /// The node of the last keyed request that succeeded (for keyless commands).
    last: Option<String>,
}

/// Slot owners learned from `MOVED` replies and successful requests, shared by the clones of
/// an endpoint (the shared connection, the heartbeat's, the blocking watchers').
#[derive(Clone, Default)]
pub(crate) struct Routes(Arc<Mutex<Learned>>);

impl Routes {
    fn lock(&self) -> std::sync::MutexGuard<'_, Learned> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where to send a request for `slot` (or a keyless one).
    fn target(&self, slot: Option<u16>) -> Option<String> {
        let l = self.lock();
        slot.and_then(|s| l.slots.get(&s).cloned())
            .or_else(|| l.last.clone())
    }

    /// `slot` is served by `addr`.
    fn learn(&self, slot: Option<u16>, addr: &str) {
        let mut l = self.lock();
        if let Some(s) = slot {
            if l.slots.get(&s).map(String::as_str) != Some(addr) {
                l.slots.insert(s, addr.to_string());
            }
            if l.last.as_deref() != Some(addr) {
                l.last = Some(addr.to_string());
            }
        }
    }

    /// Forgets everything about `addr` (it could not be reached).
    fn forget(&self, addr: &str) {
        let mut l = self.lock();
        l.slots.retain(|_, a| a != addr);
        if l.last.as_deref() == Some(addr) {
            l.last = None;
        }
    }
}

/// What clones of one [`ClusterConn`] share.
struct Inner {
    /// Seeds and node settings.
    spec: Spec,
    /// Timeouts of node connections.
    config: AsyncConnectionConfig,
    /// The endpoint's routes.
    routes: Routes,
    /// One multiplexed connection per node in use.
    nodes: Mutex<HashMap<String, MultiplexedConnection>>,
    /// Held while connecting, so a burst of requests opens one connection per node.
    connecting: tokio::sync::Mutex<()>,
}

/// A connection to a Redis Cluster that routes each request to its slot's owner. Cheap to
/// clone; clones share one connection per node. A connection made for blocking commands
/// (see [`crate::conn::Endpoint::blocking`]) has connections of its own.
#[derive(Clone)]
pub(crate) struct ClusterConn(Arc<Inner>);

impl ClusterConn {
    /// Connects to a node (the last known owner, else the first seed that answers).
    pub(crate) async fn connect(
        spec: Spec,
        config: AsyncConnectionConfig,
        routes: Routes,
    ) -> RedisResult<Self> {
        let c = ClusterConn(Arc::new(Inner {
            spec,
            config,
            routes,
            nodes: Mutex::new(HashMap::new()),
            connecting: tokio::sync::Mutex::new(()),
        }));
        let want = c.0.routes.target(None);
        c.node(want.as_deref()).await?;
        Ok(c)
    }

    fn nodes(&self) -> std::sync::MutexGuard<'_, HashMap<String, MultiplexedConnection>> {
        self.0.nodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn open(&self, addr: &str) -> RedisResult<MultiplexedConnection> {
        let (host, port) = split_addr(addr).ok_or_else(|| {
            RedisError::from((ErrorKind::Client, "bad node address", addr.to_string()))
        })?;
        let con = self
            .0
            .spec
            .node
            .client(&host, port)?
            .get_multiplexed_async_connection_with_config(&self.0.config)
            .await?;
        self.nodes().insert(addr.to_string(), con.clone());
        Ok(con)
    }

    /// A connection to `want`, else to any node already connected, else to the first seed
    /// that answers; with the address it goes to.
    async fn node(&self, want: Option<&str>) -> RedisResult<(String, MultiplexedConnection)> {
        if let Some(a) = want {
            if let Some(c) = self.nodes().get(a) {
                return Ok((a.to_string(), c.clone()));
            }
        }
        let _connecting = self.0.connecting.lock().await;
        let mut last_err = None;
        if let Some(a) = want {
            if let Some(c) = self.nodes().get(a) {
                return Ok((a.to_string(), c.clone()));
            }
            match self.open(a).await {
                Ok(c) => return Ok((a.to_string(), c)),
                Err(e) => {
                    self.0.routes.forget(a);
                    last_err = Some(e);
                }
            }
        }
        let any = self
            .nodes()
            .iter()
            .next()
            .map(|(a, c)| (a.clone(), c.clone()));
        if let Some(found) = any {
            return Ok(found);
        }
        for (h, p) in &self.0.spec.seeds {
            let a = format!("{h}:{p}");
            if Some(a.as_str()) == want {
                continue;
            }
            match self.open(&a).await {
                Ok(c) => return Ok((a, c)),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| {
            RedisError::from((ErrorKind::Client, "no cluster node to connect to"))
        }))
    }

    /// Drops the connection to `addr` (it failed) and what was learned about it.
    fn drop_node(&self, addr: &str) {
        self.nodes().remove(addr);
        self.0.routes.forget(addr);
    }

    /// Sends `req` to its slot's owner, following `MOVED`. While the slot is not served (its
    /// master is down and no replica has taken over yet: nodes unreachable, `CLUSTERDOWN`,
    /// `TRYAGAIN`, `MOVED` back and forth to a dead node) it asks again every [`PAUSE`] for up to
    /// [`PATIENCE`], so a request made during a failover completes within about [`PAUSE`] of the
    /// takeover instead of after the caller's back-off. Only refusals (nothing ran) are retried
    /// here; a lost connection returns its error.
    async fn run(&self, req: Req<'_>) -> RedisResult<Vec<Value>> {
        let slot = req.slot();
        let keyed = req.keyed();
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let patient = || tokio::time::Instant::now() + PAUSE < deadline;
        let mut want = self.0.routes.target(slot);
        let mut redirects = 0;
        loop {
            let (addr, mut con) = match self.node(want.as_deref()).await {
                Ok(found) => found,
                Err(e) if patient() && !permanent(&e) => {
                    tokio::time::sleep(PAUSE).await;
                    want = self.0.routes.target(slot);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let r = match req {
                Req::Cmd(cmd) => con.req_packed_command(cmd).await.map(|v| vec![v]),
                Req::Pipe(p, offset, count) => con.req_packed_commands(p, offset, count).await,
            };
            match refusal(&r, req.is_transaction(), &keyed) {
                _ if matches!(&r, Err(e) if transport(e)) => {
                    self.drop_node(&addr);
                    return r;
                }
                Some(Refusal::Moved(s, to)) => {
                    tracing::debug!(from = %addr, to = %to, slot = s, "cluster: following MOVED");
                    self.0.routes.learn(Some(s), &to);
                    want = Some(to);
                    redirects += 1;
                    if redirects > MAX_REDIRECTS {
                        if !patient() {
                            return Err(RedisError::from((
                                ErrorKind::Server(ServerErrorKind::Moved),
                                "too many MOVED redirects",
                            )));
                        }
                        tokio::time::sleep(PAUSE).await;
                    }
                }
                Some(Refusal::Unserved) if patient() => {
                    tokio::time::sleep(PAUSE).await;
                    want = self.0.routes.target(slot);
                }
                _ => {
                    if let Ok(values) = &r {
                        // A MOVED among other replies: not resent, but learnt.
                        if let Some((s, to)) = server_errors(values).find_map(moved) {
                            self.0.routes.learn(Some(s), &to);
                        } else {
                            self.0.routes.learn(slot, &addr);
                        }
                    }
                    return r;
                }
            }
        }
    }
}

/// How long a request waits for its slot to be served again.
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);
/// Pause between tries meanwhile.
const PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// Why a node refused a whole request without running any of it.
enum Refusal {
    /// `MOVED <slot> <host:port>`.
    Moved(u16, String),
    /// `CLUSTERDOWN`, `TRYAGAIN`, `MASTERDOWN`: the slot is not served right now; `ASK`: it is
    /// being moved to another node (resq waits for the move to end instead of sending `ASKING`:
    /// a script there would read the keys not moved yet as absent).
    Unserved,
}

/// Whether the reply `r` refuses the whole request (nothing ran): a command refused; every
/// reply of a pipeline refused; a transaction discarded because its commands were refused.
/// The replies of keyless commands (`TIME`, `PING`) do not count: they run on any node, and
/// are sent again with the rest.
fn refusal(r: &RedisResult<Vec<Value>>, transaction: bool, keyed: &[bool]) -> Option<Refusal> {
    let errors: Vec<ServerError> = match r {
        Ok(values) => {
            let masked = keyed.len() == values.len() && keyed.contains(&true);
            let mut refused = Vec::new();
            for (i, v) in values.iter().enumerate() {
                if masked && !keyed[i] {
                    continue;
                }
                match v {
                    Value::ServerError(e) => refused.push(e.clone()),
                    _ => return None,
                }
            }
            if refused.is_empty() {
                return None;
            }
            refused
        }
        Err(e) if transaction => e
            .clone()
            .into_server_errors()?
            .iter()
            .map(|(_, e)| e.clone())
            .collect(),
        Err(_) => return None,
    };
    if let Some((s, to)) = errors.iter().find_map(moved) {
        return Some(Refusal::Moved(s, to));
    }
    let unserved = !errors.is_empty()
        && errors.iter().all(|e| {
            matches!(
                e.kind(),
                Some(
                    ServerErrorKind::ClusterDown
                        | ServerErrorKind::TryAgain
                        | ServerErrorKind::MasterDown
                        | ServerErrorKind::Ask
                )
            )
        });
    unserved.then_some(Refusal::Unserved)
}

impl ConnectionLike for ClusterConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut v = self.run(Req::Cmd(cmd)).await?;
            v.pop()
                .ok_or_else(|| RedisError::from((ErrorKind::Client, "no reply")))
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let whole = !pipeline.is_transaction() && offset == 0 && count == pipeline.len();
            let Some(groups) = whole.then(|| slot_groups(pipeline)).flatten() else {
                return self.run(Req::Pipe(pipeline, offset, count)).await;
            };
            // One pipeline per slot, several at once (no order between slots: a pipeline is
            // not a transaction), the replies put back in the order of the commands.
            let cmds: Vec<&Cmd> = pipeline.cmd_iter().collect();
            let parts: Vec<Pipeline> = groups
                .iter()
                .map(|g| {
                    let mut part = Pipeline::with_capacity(g.len());
                    for &i in g {
                        part.add_command(cmds[i].clone());
                    }
                    part
                })
                .collect();
            let mut calls = Vec::with_capacity(parts.len());
            for p in &parts {
                calls.push(self.run(Req::Pipe(p, 0, p.len())));
            }
            let answers: Vec<RedisResult<Vec<Value>>> = futures::stream::iter(calls)
                .buffered(SLOTS_AT_ONCE)
                .collect()
                .await;
            let mut replies = vec![Value::Nil; count];
            for (g, answer) in groups.iter().zip(answers) {
                for (&i, v) in g.iter().zip(answer?) {
                    replies[i] = v;
                }
            }
            Ok(replies)
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT`.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"{user1000}.followers"));
        assert_eq!(slot(b"{resque}:queue:default"), slot(b"resque"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_ne!(slot(b"foo{}{bar}"), slot(b"bar"));
    }

    #[test]
    fn keys_of_commands() {
        let k = |c: &Cmd| command_key(c).map(|k| String::from_utf8(k).unwrap());
        assert_eq!(
            k(redis::cmd("RPUSH").arg("a").arg("b")).as_deref(),
            Some("a")
        );
        assert_eq!(
            k(redis::cmd("EVALSHA").arg("sha").arg(2).arg("k1").arg("k2")).as_deref(),
            Some("k1")
        );
        assert_eq!(k(redis::cmd("EVALSHA").arg("sha").arg(0).arg("x")), None);
        assert_eq!(k(&redis::cmd("TIME")), None);
        assert_eq!(k(redis::cmd("SCRIPT").arg("LOAD").arg("return 1")), None);
    }

    #[test]
    fn pipelines_split_into_one_pipeline_per_slot() {
        // "a" and "b" are in different slots; "{a}x" is in "a"'s.
        assert_ne!(slot(b"a"), slot(b"b"));
        let mut p = redis::pipe();
        p.cmd("TIME")
            .get("a")
            .get("{a}x")
            .get("b")
            .cmd("TIME")
            .get("a");
        assert_eq!(slot_groups(&p), Some(vec![vec![0, 1, 2, 5], vec![3, 4]]));
        let mut one = redis::pipe();
        one.cmd("TIME").get("a").set("{a}y", 1).cmd("PING");
        assert_eq!(slot_groups(&one), None);
        assert_eq!(slot_groups(redis::pipe().cmd("TIME")), None);
        assert_eq!(slot_groups(&redis::pipe()), None);
    }

    #[tokio::test]
    async fn a_pipeline_over_every_master_runs_whole_with_its_replies_in_order() {
        let c = crate::testing::cluster::cluster();
        let mut con = crate::conn::Endpoint::open(&c.url())
            .unwrap()
            .connect()
            .await
            .unwrap();
        let ns = crate::testing::namespace("split");
        // Keys until every node holds one.
        let mut names = Vec::new();
        let mut owners = std::collections::BTreeSet::new();
        for n in 0.. {
            let k = format!("{ns}:k{n}");
            if owners.insert(c.owner(&k)) {
                names.push(k);
            }
            if owners.len() == c.ports.len() {
                break;
            }
        }
        let mut p = redis::pipe();
        for (i, k) in names.iter().enumerate() {
            p.set(k, i).ignore().cmd("TIME").ignore();
        }
        for k in names.iter().rev() {
            p.get(k);
        }
        let got: Vec<usize> = p.query_async(&mut con).await.expect("no MOVED reply");
        assert_eq!(got, (0..names.len()).rev().collect::<Vec<_>>());
        for (i, k) in names.iter().enumerate() {
            let v: usize = redis::cmd("GET")
                .arg(k)
                .query(&mut c.node(c.owner(k)))
                .unwrap();
            assert_eq!(v, i, "{k} written on its owner");
        }
    }
}
