//! A spread namespace's shared writes around its step calls (`docs/cluster.md`).
//!
//! On a cluster namespace without a hash tag each step call touches one hash slot, its queue's:
//! the worker record, the worker's own stats and its outbox (`<ns>:resq:outbox:<id>`) carry a
//! tag that puts them there. What every worker shares lives in other slots and is written by
//! the worker, one key per command, after the call:
//!
//! * the counters `<ns>:stat:processed` and `<ns>:stat:failed`: each call reports its
//!   increments, which [`Shared`] adds up and a flusher adds to Redis every [`FLUSH_EVERY`] and
//!   on the way out (a process killed between two flushes leaves that interval's counts out;
//!   the per-worker counters, written in the step, are exact);
//! * failure entries: the step pushes them into the slot's outbox, atomically with the job's
//!   removal, and the worker moves them to `<ns>:failed` (`RPUSH` there, then `LTRIM` the
//!   outbox): a crash between the two lists an entry twice, never loses it; an outbox a dead
//!   process left is moved by the pruner;
//! * what a job's end deletes besides the job (resque-retry's counter, a unique lock): deleted
//!   once the call applied the end.

use super::{Completion, StepReply, StepRequest};
use crate::keys::Keys;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How often the shared counters' increments go to Redis.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_millis(200);

/// A spread process's counts not yet added to the shared counters.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    processed: AtomicU64,
    failed: AtomicU64,
}

impl Shared {
    /// Adds the call's increments (`'<processed> <failed>'`, step.lua's last reply value).
    pub(super) fn add(&self, v: &Value) -> RedisResult<u64> {
        let Value::BulkString(text) = v else {
            return Err(super::call::bad_reply());
        };
        let text = std::str::from_utf8(text).map_err(|_| super::call::bad_reply())?;
        let mut parts = text.split(' ').map(str::parse::<u64>);
        let (Some(Ok(p)), Some(Ok(f)), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(super::call::bad_reply());
        };
        self.processed.fetch_add(p, Ordering::Relaxed);
        self.failed.fetch_add(f, Ordering::Relaxed);
        Ok(f)
    }

    /// Adds what was counted since the last flush to `<ns>:stat:processed|failed`; what could
    /// not be added is kept for the next.
    pub(crate) async fn flush<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        keys: &Keys,
    ) -> RedisResult<()> {
        for (counter, key) in [
            (&self.processed, keys.stat_processed()),
            (&self.failed, keys.stat_failed()),
        ] {
            let n = counter.swap(0, Ordering::Relaxed);
            if n == 0 {
                continue;
            }
            let r: RedisResult<i64> = redis::cmd("INCRBY").arg(&key).arg(n).query_async(con).await;
            if let Err(e) = r {
                counter.fetch_add(n, Ordering::Relaxed);
                return Err(e);
            }
        }
        Ok(())
    }
}

/// Moves slot `id`'s outbox to `<ns>:failed`; how many entries it moved.
pub(crate) async fn move_outbox<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    id: &str,
) -> RedisResult<usize> {
    let outbox = keys.outbox(id);
    let entries: Vec<Vec<u8>> = redis::cmd("LRANGE")
        .arg(&outbox)
        .arg(0)
        .arg(-1)
        .query_async(con)
        .await?;
    if entries.is_empty() {
        return Ok(0);
    }
    let _: i64 = redis::cmd("RPUSH")
        .arg(keys.failed())
        .arg(&entries)
        .query_async(con)
        .await?;
    let _: () = redis::cmd("LTRIM")
        .arg(&outbox)
        .arg(entries.len())
        .arg(-1)
        .query_async(con)
        .await?;
    Ok(entries.len())
}

/// After a spread call: the failure entries of its slots to `<ns>:failed` (when it wrote any:
/// `failed`) and the ends of the jobs it ended. A command that fails is logged: the entries
/// stay in their outbox for the next move.
pub(super) async fn after_call<C: ConnectionLike + Send>(
    con: &mut C,
    requests: &[StepRequest],
    replies: &[StepReply],
    failed: u64,
) {
    for (r, reply) in requests.iter().zip(replies) {
        let keys = r.stepper.keys();
        if failed > 0 {
            if let Err(e) = move_outbox(con, keys, r.stepper.id()).await {
                tracing::warn!(worker = %r.stepper.id(), error = %e, "could not move failure entries to the failed list; they stay in the slot's outbox for the next move");
            }
        }
        let ends = match &r.completion {
            Some(Completion::Success { ends, .. }) | Some(Completion::Failure { ends, .. }) => ends,
            _ => &None,
        };
        if let (Some(ends), true) = (ends, reply.applied) {
            let [counter, failure, lock, id] = ends.args(keys);
            if let Err(e) = end_job(con, &counter, &failure, &lock, &id).await {
                tracing::warn!(worker = %r.stepper.id(), error = %e, "could not delete what the job's end deletes (retry counter, unique lock)");
            }
        }
    }
}

/// Deletes resque-retry's `counter` and `failure` and the unique `lock` while it holds `id`
/// (`""`: none), one key per command.
async fn end_job<C: ConnectionLike + Send>(
    con: &mut C,
    counter: &str,
    failure: &str,
    lock: &str,
    id: &str,
) -> RedisResult<()> {
    for key in [counter, failure] {
        if !key.is_empty() {
            let _: i64 = redis::cmd("DEL").arg(key).query_async(con).await?;
        }
    }
    if !lock.is_empty() {
        let held: Option<Vec<u8>> = redis::cmd("GET")
            .arg(lock)
            .query_async(con)
            .await
            .ok()
            .flatten();
        if held.as_deref() == Some(id.as_bytes()) {
            let _: i64 = redis::cmd("DEL").arg(lock).query_async(con).await?;
        }
    }
    Ok(())
}
