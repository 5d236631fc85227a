//! Redis Cluster: one hash-tagged namespace, so every key of a job step lives in one slot.
//!
//! Each Resque step touches several keys at once (the reserve script alone reads the queues,
//! the worker record, the stats and the pause flag), and Redis Cluster runs a script or a
//! transaction only when all its keys hash to one slot. resq therefore requires, in Cluster
//! mode, a namespace with a hash tag (`{resque}`, `app:{jobs}`): Redis hashes only the part
//! between the first `{` and the next `}`, so every `<ns>:…` key lands in the tag's slot and on
//! the one master that owns it. The cluster gives that namespace high availability (a replica
//! takes over when its master fails), not sharding: one namespace is one slot is one master.
//! Several namespaces with different tags spread over the masters.
//!
//! The shared connection is redis-rs's cluster client (slot map, `MOVED`/`ASK`, refresh after
//! a failover). The queue watchers' dedicated blocking connections are plain connections to
//! the node that owns the tag's slot ([`BlockingCluster`]): they start at the last owner any
//! of them found (or a seed node) and follow `MOVED` replies, which a node that does not own
//! the slot — a replica, a node after a failover — sends before running anything.

use super::node::{split_addr, NodeAuth};
use crate::error::{Error, Result};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::{
    AsyncConnectionConfig, Cmd, ErrorKind, IntoConnectionInfo, Pipeline, RedisError, RedisFuture,
    RedisResult, ServerErrorKind, TlsMode, Value,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many `MOVED` replies one blocking command follows before giving up.
const MAX_REDIRECTS: usize = 5;

/// The hash tag of `namespace` (what Redis hashes for every `<ns>:…` key), if it has one.
pub fn hash_tag(namespace: &str) -> Option<&str> {
    let open = namespace.find('{')?;
    let len = namespace[open + 1..].find('}')?;
    (len > 0).then(|| &namespace[open + 1..open + 1 + len])
}

/// Rejects a namespace whose keys would not all hash to one slot.
pub(crate) fn check_namespace(namespace: &str) -> Result<()> {
    if hash_tag(namespace).is_some() {
        return Ok(());
    }
    Err(Error::Config {
        var: "RESQUE_NAMESPACE",
        message: format!(
            "{namespace:?} has no hash tag; in Redis Cluster every key of a job step must be in \
             one slot, so the namespace needs one, e.g. \"{{resque}}\" or \"{}{{jobs}}\" \
             (Ruby: Resque.redis.namespace = \"{{resque}}\")",
            if namespace.is_empty() {
                String::new()
            } else {
                format!("{namespace}:")
            }
        ),
    })
}

/// How to reach the cluster.
#[derive(Clone)]
pub(crate) struct Spec {
    /// Seed nodes.
    pub seeds: Vec<(String, u16)>,
    /// Credentials and TLS of every node.
    pub node: NodeAuth,
}

impl Spec {
    /// The redis-rs cluster client.
    fn client(&self) -> RedisResult<ClusterClient> {
        let infos = self
            .seeds
            .iter()
            .map(|(h, p)| {
                self.node
                    .addr(h, *p)
                    .into_connection_info()
                    .map(|i| i.set_redis_settings(self.node.redis_info()))
            })
            .collect::<RedisResult<Vec<_>>>()?;
        // redis-rs retries a request itself (MOVED, a dead node, a failover in progress); by
        // default for up to 16 times with waits from 1.28 s growing to minutes. Keep its own
        // retries short (about 1.3 s in all) and leave longer outages to `conn::retry`, which
        // logs them.
        let mut b = ClusterClientBuilder::new(infos)
            .use_protocol(self.node.protocol)
            .retries(6)
            .min_retry_wait(50)
            .max_retry_wait(1000)
            .retry_wait_formula(10, 2);
        if let Some(u) = &self.node.username {
            b = b.username(u);
        }
        if let Some(p) = &self.node.password {
            b = b.password(p);
        }
        if self.node.tls {
            b = b.tls(TlsMode::Secure);
            if let Some(certs) = &self.node.certs {
                b = b.certs(certs.clone());
            }
        }
        b.build()
    }

    /// The shared cluster connection.
    pub async fn connect(
        &self,
        response: Duration,
        connect: Duration,
    ) -> RedisResult<ClusterConnection> {
        let cfg = ClusterConfig::new()
            .set_response_timeout(response)
            .set_connection_timeout(connect);
        self.client()?.get_async_connection_with_config(cfg).await
    }
}

/// The node last known to own the namespace's slot (`host:port`), shared by an endpoint's
/// blocking connections.
#[derive(Clone, Default)]
pub(crate) struct OwnerHint(Arc<Mutex<Option<String>>>);

impl OwnerHint {
    fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, addr: &str) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(addr.to_string());
    }
}

/// A dedicated connection to the node that owns the slot, for blocking commands.
pub(crate) struct BlockingCluster {
    /// Where the nodes are.
    spec: Spec,
    /// Timeouts.
    config: AsyncConnectionConfig,
    /// Shared knowledge of the owner.
    owner: OwnerHint,
    /// The connection and the node it goes to.
    con: Option<(String, MultiplexedConnection)>,
}

impl BlockingCluster {
    /// Connects to the last known owner, else to the first seed that answers.
    pub async fn connect(
        spec: Spec,
        config: AsyncConnectionConfig,
        owner: OwnerHint,
    ) -> RedisResult<Self> {
        let mut b = BlockingCluster {
            spec,
            config,
            owner,
            con: None,
        };
        b.reconnect(None).await?;
        Ok(b)
    }

    async fn open(&self, addr: &str) -> RedisResult<MultiplexedConnection> {
        let (host, port) = split_addr(addr).ok_or_else(|| {
            RedisError::from((ErrorKind::Client, "bad node address", addr.to_string()))
        })?;
        self.spec
            .node
            .client(&host, port)?
            .get_multiplexed_async_connection_with_config(&self.config)
            .await
    }

    /// Connects to `to`, or to the owner hint, or to any seed.
    async fn reconnect(&mut self, to: Option<&str>) -> RedisResult<()> {
        self.con = None;
        let mut candidates: Vec<String> = Vec::new();
        if let Some(t) = to {
            candidates.push(t.to_string());
        } else {
            if let Some(h) = self.owner.get() {
                candidates.push(h);
            }
            candidates.extend(self.spec.seeds.iter().map(|(h, p)| format!("{h}:{p}")));
        }
        let mut last = None;
        for addr in candidates {
            match self.open(&addr).await {
                Ok(c) => {
                    self.con = Some((addr, c));
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            RedisError::from((ErrorKind::Client, "no cluster node to connect to"))
        }))
    }

    /// Sends `req`, following `MOVED` to the slot's owner.
    async fn run(&mut self, req: Req<'_>) -> RedisResult<Vec<Value>> {
        for _ in 0..MAX_REDIRECTS {
            if self.con.is_none() {
                self.reconnect(None).await?;
            }
            let Some((addr, con)) = self.con.as_mut() else {
                continue;
            };
            let addr = addr.clone();
            let r = match req {
                Req::Cmd(cmd) => con.req_packed_command(cmd).await.map(|v| vec![v]),
                Req::Pipe(p, offset, count) => con.req_packed_commands(p, offset, count).await,
            };
            match r {
                Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::Moved) => {
                    let Some((to, _slot)) = e.redirect_node() else {
                        return Err(e);
                    };
                    let to = to.to_string();
                    tracing::debug!(from = %addr, to = %to, "cluster: following MOVED");
                    self.owner.set(&to);
                    self.reconnect(Some(&to)).await?;
                }
                Err(e) => {
                    if e.is_io_error() || e.is_connection_dropped() || e.is_timeout() {
                        self.con = None;
                    }
                    return Err(e);
                }
                Ok(v) => {
                    self.owner.set(&addr);
                    return Ok(v);
                }
            }
        }
        Err(RedisError::from((
            ErrorKind::Server(ServerErrorKind::Moved),
            "too many MOVED redirects",
        )))
    }
}

/// One request of a blocking connection.
#[derive(Clone, Copy)]
enum Req<'a> {
    /// A command.
    Cmd(&'a Cmd),
    /// A pipeline, with the offset and count of the replies wanted.
    Pipe(&'a Pipeline, usize, usize),
}

impl ConnectionLike for BlockingCluster {
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
        Box::pin(self.run(Req::Pipe(pipeline, offset, count)))
    }

    fn get_db(&self) -> i64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_tags() {
        assert_eq!(hash_tag("{resque}"), Some("resque"));
        assert_eq!(hash_tag("app:{jobs}:x"), Some("jobs"));
        assert_eq!(hash_tag("{}resque"), None);
        assert_eq!(hash_tag("resque"), None);
        assert_eq!(hash_tag("res{que"), None);
        assert_eq!(hash_tag(""), None);
        assert!(check_namespace("{resque}").is_ok());
        let e = check_namespace("resque").unwrap_err().to_string();
        assert!(
            e.starts_with("RESQUE_NAMESPACE:") && e.contains("{resque}"),
            "{e}"
        );
    }
}
