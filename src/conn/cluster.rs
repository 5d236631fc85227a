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
//! Connections route by slot ([`routing::ClusterConn`]): each request goes to the node known
//! to own its first key's slot, and a `MOVED` reply — which a node sends before running
//! anything — teaches the new owner and the request is sent there. redis-rs's own cluster
//! client is not used: it does not follow `MOVED` for transactions (`MULTI` … `EXEC`, every
//! Resque enqueue), and while a failed master's slots are being taken over it sends requests
//! to random nodes without refreshing its map, so after a failover every enqueue kept failing.

mod routing;

pub(crate) use routing::{ClusterConn, Routes};

use super::node::NodeAuth;
use crate::error::{Error, Result};

/// The hash tag of `namespace` (what Redis hashes for every `<ns>:…` key), if it has one.
pub(crate) fn hash_tag(namespace: &str) -> Option<&str> {
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
