//! A worker process on a spread cluster namespace (`docs/cluster.md`): its slots, one group per
//! queue, what it refuses there, and its shared counters' flusher.
//!
//! On a Redis Cluster namespace without a hash tag every queue's list lands in the slot its name
//! hashes to. A step call must touch one slot, so a slot serves one queue: the process runs
//! `COUNT` slots for each queue it is given, each with an id that carries the queue's tag
//! (`host~resq{tag}:pid-k:queue`), so its worker record and stats share the queue's slot. The
//! calls of one queue's slots go together; those of different queues never share a call.
//!
//! Refused there, before anything is registered: features whose keys would span slots in one
//! call (limits other than a concurrency limit on a queue or a class, resque-status classes,
//! Jesque zset queues) and wildcard queue lists. The in-process scheduler runs there
//! (`crate::scheduler`'s spread steps), and so do retry policies (a decided retry goes through
//! the slot's outbox: `super::step::outbox`). A concurrency limit is enforced with shares in the
//! limit's slot, one per group ([`gates`], `step/gate.rs`).

use super::class_gate::ClassGate;
use super::config::Config;
use super::step::gate::Gate;
use super::step::spread::Shared;
use super::step::QueueKeys;
use crate::error::{Error, Result};
use crate::identity::WorkerId;
use crate::keys::Keys;
use crate::registry::Registry;
use std::sync::Arc;
use tokio::sync::watch;

/// One queue's slots on a spread namespace (or, elsewhere, every slot, polling the process's
/// list).
pub(crate) struct Group {
    /// The queue its slots poll (`None`: the process's list, as the fetch resolves it).
    pub queues: Option<Arc<QueueKeys>>,
    /// Its slots' worker ids.
    pub ids: Vec<String>,
}

/// The start error for `what`, which cannot run on the spread namespace of `cfg`.
fn refusal(cfg: &Config, what: &str) -> Error {
    Error::Config {
        var: "RESQUE_NAMESPACE",
        message: format!(
            "{:?} has no hash tag, so on this Redis Cluster its queues are spread over the \
             slots, where {what} cannot run yet; use a hash-tagged namespace such as \
             \"{{{}}}\" for them (docs/cluster.md)",
            cfg.namespace, cfg.namespace
        ),
    }
}

/// Refuses what a spread namespace cannot run (see the module doc).
pub(crate) fn refuse(cfg: &Config, registry: &Registry) -> Result<()> {
    let refused = |what: &str| Err(refusal(cfg, what));
    if cfg.queues.is_dynamic() {
        return refused("a wildcard queue list (QUEUES with * or !)");
    }
    if !cfg.jesque_delayed_queues.is_empty() {
        return refused("Jesque delayed (zset) queues");
    }
    if let Some(why) = registry
        .declared_limits()
        .iter()
        .find_map(crate::limits::spread::unsupported)
    {
        return refused(&format!(
            "limits other than a concurrency limit on a queue or a class ({why})"
        ));
    }
    if !registry.statused_classes().is_empty() {
        return refused("resque-status classes");
    }
    Ok(())
}

/// The process's slot groups: on a spread namespace `cfg.concurrency` slots per queue of
/// `names` (its list as resolved at start: split queues' shards included), each with its
/// queue's tag; elsewhere one group of `cfg.concurrency` slots.
pub(crate) fn groups(cfg: &Config, keys: &Keys, pid: u32, names: &[String]) -> Vec<Group> {
    if !keys.is_spread() {
        let ids = (0..cfg.concurrency)
            .map(|k| {
                WorkerId::for_slot(&cfg.hostname, pid, k, cfg.queues.entries())
                    .as_str()
                    .to_string()
            })
            .collect();
        return vec![Group { queues: None, ids }];
    }
    names
        .iter()
        .enumerate()
        .map(|(n, q)| {
            let tag = keys.queue_tag(q);
            Group {
                queues: Some(Arc::new(QueueKeys::with_jesque(
                    keys,
                    std::slice::from_ref(q),
                    &[],
                ))),
                ids: (0..cfg.concurrency)
                    .map(|k| {
                        let slot = n * cfg.concurrency + k;
                        WorkerId::for_queue_slot(&cfg.hostname, tag, pid, slot, q)
                            .as_str()
                            .to_string()
                    })
                    .collect(),
            }
        })
        .collect()
}

/// Declares the registry's limits and reads those in force; each group's share of the limit
/// on its queue (`None`: no limit there) and the process's share of each class limit. A limit
/// in force that a spread namespace cannot enforce, or a queue or class with two, refuses the
/// start (see [`refuse`]).
pub(crate) async fn gates(
    cfg: &Config,
    con: &mut crate::conn::Conn,
    keys: &Keys,
    registry: &Registry,
    groups: &[Group],
) -> Result<Gates> {
    let refused = |what: String| Err(refusal(cfg, &what));
    crate::limits::store::declare(con, keys, registry.declared_limits()).await?;
    let stored = crate::limits::store::read(con, keys).await?;
    let text = |r: std::result::Result<crate::limits::store::Texts, String>| match r {
        Ok(t) => Ok(t),
        Err(why) => Err(Error::Config {
            var: "RESQUE_NAMESPACE",
            message: format!("the stored limits cannot be read: {why}"),
        }),
    };
    let (limits, problems) =
        crate::limits::store::merge_bytes(text(stored.declared)?, text(stored.set)?);
    if let Some(p) = problems.first() {
        return refused(format!("a stored limit that cannot be read ({p})"));
    }
    if let Some(why) = limits.iter().find_map(crate::limits::spread::unsupported) {
        return refused(format!(
            "limits other than a concurrency limit on a queue or a class ({why})"
        ));
    }
    let classes = match crate::limits::spread::class_limits(&limits) {
        Ok(ls) => ls,
        Err(why) => return refused(format!("two limits on one class ({why})")),
    };
    let holder = groups
        .iter()
        .find_map(|g| g.ids.first())
        .cloned()
        .unwrap_or_default();
    let classes: Vec<Arc<ClassGate>> = classes
        .into_iter()
        .map(|l| Arc::new(ClassGate::new(keys, l, &holder)))
        .collect();
    let mut out = Vec::with_capacity(groups.len());
    for g in groups {
        let (Some(q), Some(holder)) = (g.queues.as_ref(), g.ids.first()) else {
            out.push(None);
            continue;
        };
        let Some((name, _, _)) = q.queues.first() else {
            out.push(None);
            continue;
        };
        match crate::limits::spread::for_queue(&limits, name) {
            Ok(l) => out.push(l.map(|l| Arc::new(Gate::new(keys, l, holder)))),
            Err(why) => return refused(format!("two limits on one queue ({why})")),
        }
    }
    Ok(Gates {
        queues: out,
        classes,
    })
}

/// A spread process's shares of limits ([`gates`]).
pub(crate) struct Gates {
    /// Per group, the share of the limit on its queue.
    pub queues: Vec<Option<Arc<Gate>>>,
    /// The process's share of each class limit.
    pub classes: Vec<Arc<ClassGate>>,
}

/// Adds the shared counters' increments every [`FLUSH_EVERY`](super::step::spread::FLUSH_EVERY)
/// until `stop`, then once more.
pub(crate) async fn flush_counts(
    shared: Arc<Shared>,
    gates: Vec<Arc<Gate>>,
    classes: Vec<Arc<ClassGate>>,
    mut con: crate::conn::Conn,
    keys: Keys,
    mut stop: watch::Receiver<bool>,
) {
    let mut streak = crate::conn::outage::Streak::default();
    loop {
        let stopping = tokio::select! {
            _ = tokio::time::sleep(super::step::spread::FLUSH_EVERY) => false,
            _ = stop.wait_for(|s| *s) => true,
        };
        // Units given back off a reserve's call (step/gate.rs).
        for g in &gates {
            g.flush(&mut con).await;
        }
        for g in &classes {
            g.flush(&mut con).await;
        }
        match shared.flush(&mut con, &keys).await {
            Ok(()) => streak.succeeded("shared counters"),
            Err(e) => streak.failed("shared counters", &e),
        }
        if stopping {
            return;
        }
    }
}

/// On the way out: the counts not yet added and the outboxes' failure entries go to the shared
/// keys. Returns the ids whose outbox could not be moved: they stay registered, for the pruner
/// to move it once their heartbeat expires.
pub(crate) async fn settle(
    shared: &Shared,
    gates: &[Arc<Gate>],
    classes: &[Arc<ClassGate>],
    con: &mut crate::conn::Conn,
    keys: &Keys,
    ids: &[String],
) -> Vec<String> {
    // The groups' shares of limits go (their slots have stopped); the holder of one that
    // cannot stays registered, for the pruner to remove it once its heartbeat expires.
    let mut kept = Vec::new();
    for g in gates {
        if let Err(e) = g.leave(con).await {
            tracing::warn!(error = %e, "could not give a limit's units back; the pruner removes them once this process's heartbeats expire");
            kept.push(g.holder().to_string());
        }
    }
    for g in classes {
        if let Err(e) = g.leave(con).await {
            tracing::warn!(error = %e, "could not give a limit's units back; the pruner removes them once this process's heartbeats expire");
            kept.push(g.holder().to_string());
        }
    }
    if let Err(e) = shared.flush(con, keys).await {
        tracing::warn!(error = %e, "could not add the last counts to the shared stats");
    }
    let all: Vec<&str> = ids.iter().map(String::as_str).collect();
    match super::step::spread::move_outboxes(con, keys, &all).await {
        Ok(_) => kept,
        Err(e) => {
            tracing::warn!(error = %e, "could not move the slots' failure entries to the failed list; the ids stay registered and the pruner moves them");
            ids.to_vec()
        }
    }
}
