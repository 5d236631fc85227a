//! Registering and unregistering a process's slots, with exactly Ruby Resque's keys.
//!
//! Register: `SADD <ns>:workers <id>`, `SET <ns>:worker:<id>:started <Time#to_s>` and a first
//! heartbeat from Redis `TIME`. Unregister: `SREM` the id, `DEL` its record, `:started` and
//! per-worker stats, `HDEL` its heartbeat. Each is one atomic step for all slots, every key's
//! type checked before anything is written ([`Checked`]).
//!
//! On a spread cluster namespace ([`Keys::spread`]) those keys are in different slots and no
//! one step may hold them all: `<ns>:workers` and `<ns>:workers:heartbeat` each have a slot of
//! their own, and each id's keys (`:started`, the record, its stats and token) are in the slot
//! of its queue (the id's `{tag}`). Each step is then one checked call per slot, in an order
//! that keeps the heartbeat field the first key written and the last removed:
//!
//! * register: the heartbeat fields (`HSET`), then the ids into the outbox index
//!   (`<ns>:resq:outboxes`), then each slot's `:started` keys, then `SADD <ns>:workers` last;
//! * unregister (its outboxes already moved): `SREM <ns>:workers` first, then each slot's keys
//!   (`DEL`), then the ids out of the outbox index, then the heartbeat fields (`HDEL`) last.
//!
//! The outbox index is how the prune round finds an outbox whose id someone else unregistered
//! (Ruby's pruning or resque-web, which know nothing of outboxes): a member whose heartbeat
//! field is gone. It is written after the heartbeat and removed before it, so a member without
//! one has been unregistered.
//!
//! Why this order: a pruner takes an id for dead only by its heartbeat (Ruby's loop 1 and
//! resq's: older than the prune interval) or, for resq, by a registered id of its own host
//! whose pid is gone (Ruby's loop 2 never matches a `~resq` host). While a live process is
//! between two calls its heartbeat field is fresh (written first, removed last) and its pid
//! alive, so no pruner takes it. If the process dies between two calls, whatever is left is
//! reachable from its heartbeat field, which expires: both pruners then remove every key of the
//! id (`workers` member, record, `:started`, stats), so nothing is left behind — an id in
//! `<ns>:workers` without a heartbeat field, which no pruner of another host would ever remove,
//! never exists. An id is in `<ns>:workers` (what Ruby's `Worker.all` and resque-web list) only
//! while its `:started` key is there.

use crate::keys::{hash_slot, Keys};
use crate::scripts::Checked;
use crate::wire::time;
use chrono::{DateTime, Utc};
use redis::aio::ConnectionLike;
use redis::RedisResult;
use std::collections::BTreeMap;

/// Redis server time (in `conn`, which the admin side reads it with too; this path is the
/// one the pruner uses).
pub(crate) use crate::conn::redis_time;

/// Registers `ids` as Ruby does, with `started` the local start time.
pub(crate) async fn register<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    ids: &[String],
    started: DateTime<Utc>,
) -> RedisResult<()> {
    let now = redis_time(con).await?;
    let hb = time::heartbeat(now);
    let since = time::started(started);
    if keys.is_spread() {
        let mut beats = Checked::new();
        for id in ids {
            beats.hset(&keys.heartbeats(), id.as_str(), hb.as_str());
        }
        beats.run(con).await?;
        Checked::new().sadd(&keys.outboxes(), ids).run(con).await?;
        let starts = ids.iter().map(|id| keys.worker_started(id));
        for slot in by_slot(starts).into_values() {
            let mut w = Checked::new();
            for key in &slot {
                w.set(key, since.as_str());
            }
            w.run(con).await?;
        }
        return Checked::new().sadd(&keys.workers(), ids).run(con).await;
    }
    let mut w = Checked::new();
    w.sadd(&keys.workers(), ids);
    for id in ids {
        w.set(&keys.worker_started(id), since.as_str());
        w.hset(&keys.heartbeats(), id.as_str(), hb.as_str());
    }
    w.run(con).await
}

/// Re-registers ids someone else removed (a pruner), keeping their original start time.
pub(crate) async fn reregister<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    ids: &[String],
    started: DateTime<Utc>,
) -> RedisResult<()> {
    register(con, keys, ids, started).await
}

/// Unregisters `ids` as Ruby's `unregister_worker` does.
pub(crate) async fn unregister<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    ids: &[String],
) -> RedisResult<()> {
    if keys.is_spread() {
        Checked::new().srem(&keys.workers(), ids).run(con).await?;
        for slot in by_slot(ids.iter().flat_map(|id| own_keys(keys, id))).into_values() {
            let mut w = Checked::new();
            for key in &slot {
                w.del(key);
            }
            w.run(con).await?;
        }
        Checked::new().srem(&keys.outboxes(), ids).run(con).await?;
        return Checked::new().hdel(&keys.heartbeats(), ids).run(con).await;
    }
    let mut w = Checked::new();
    w.srem(&keys.workers(), ids);
    for id in ids {
        for key in own_keys(keys, id) {
            w.del(&key);
        }
    }
    w.hdel(&keys.heartbeats(), ids);
    w.run(con).await
}

/// The keys of worker `id` alone that unregistering (or pruning) it deletes: its record,
/// `:started`, its stats and its claimed job's token. On a spread namespace a resq slot's are
/// all in its queue's slot.
pub(crate) fn own_keys(keys: &Keys, id: &str) -> [String; 5] {
    [
        keys.worker(id),
        keys.worker_started(id),
        keys.stat_processed_by(id),
        keys.stat_failed_by(id),
        keys.claim_token(id),
    ]
}

/// `keys` grouped by hash slot (each group in the order given; groups by slot number).
pub(crate) fn by_slot(keys: impl IntoIterator<Item = String>) -> BTreeMap<u16, Vec<String>> {
    let mut groups: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    for k in keys {
        groups.entry(hash_slot(k.as_bytes())).or_default().push(k);
    }
    groups
}
