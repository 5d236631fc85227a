//! Redis Cluster: where a namespace's keys live, and connections that follow the slots.
//!
//! Redis Cluster runs a script or a transaction only when all its keys hash to one slot. A
//! namespace with a hash tag (`{resque}`, `app:{jobs}`) puts every `<ns>:…` key in the tag's
//! slot, on one master: every feature works as on one server, and the cluster gives it high
//! availability, not sharding. A namespace without one is *spread* ([`crate::keys::Keys::spread`],
//! `docs/cluster.md`): each queue's list lands in the slot its name hashes to, and what moves
//! with a job taken from it (the worker record, the worker's stats) carries a tag that puts it in
//! the same slot, so each step touches one slot and different queues load different masters.
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

/// The hash tag of `namespace` (what Redis hashes for every `<ns>:…` key), if it has one.
pub(crate) fn hash_tag(namespace: &str) -> Option<&str> {
    let open = namespace.find('{')?;
    let len = namespace[open + 1..].find('}')?;
    (len > 0).then(|| &namespace[open + 1..open + 1 + len])
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
    }
}
