//! Registering and unregistering a process's slots, with exactly Ruby Resque's keys.
//!
//! Register: `SADD <ns>:workers <id>`, `SET <ns>:worker:<id>:started <Time#to_s>` and a first
//! heartbeat from Redis `TIME`. Unregister: `SREM` the id, `DEL` its record, `:started` and
//! per-worker stats, `HDEL` its heartbeat. Each is one atomic step for all slots, every key's
//! type checked before anything is written ([`Checked`]).

use crate::keys::Keys;
use crate::scripts::Checked;
use crate::wire::time;
use chrono::{DateTime, Utc};
use redis::aio::ConnectionLike;
use redis::RedisResult;

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
    let mut w = Checked::new();
    w.sadd(&keys.workers(), ids);
    for id in ids {
        w.set(&keys.worker_started(id), time::started(started));
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
    let mut w = Checked::new();
    w.srem(&keys.workers(), ids);
    for id in ids {
        w.del(&keys.worker(id))
            .del(&keys.worker_started(id))
            .del(&keys.stat_processed_by(id))
            .del(&keys.stat_failed_by(id))
            .del(&keys.claim_token(id));
    }
    w.hdel(&keys.heartbeats(), ids);
    w.run(con).await
}
