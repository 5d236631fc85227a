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
//!   process left is moved by the pruner. The outboxes of a call's slots are moved together:
//!   three round trips whatever their number.
//!
//! * retry entries (`outbox.rs`): a failure a retry policy covers leaves its decided retry or
//!   give-up in the outbox instead of a failure entry, and the move applies it (resque-retry's
//!   keys, the queue or the delayed set) before the trim: applied twice at worst, never lost;
//! * what a success under a retry policy deletes (resque-retry's counter and `failure-<key>`,
//!   in other slots): deleted after the call, one key per command.
//!
//! A unique lock an end would release is in another slot too; unique jobs are refused on a
//! spread namespace.

use super::outbox::RetryEntry;
use super::{Completion, StepRequest};
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

/// Moves the outboxes of slots `ids` to `<ns>:failed` (their entries in the order of `ids`):
/// one pipeline of `LRANGE`s, one `RPUSH`, one pipeline of `LTRIM`s; how many entries it moved.
pub(crate) async fn move_outboxes<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    ids: &[&str],
) -> RedisResult<usize> {
    if ids.is_empty() {
        return Ok(0);
    }
    let mut read = redis::pipe();
    for id in ids {
        read.cmd("LRANGE").arg(keys.outbox(id)).arg(0).arg(-1);
    }
    let boxes: Vec<Vec<Vec<u8>>> = read.query_async(con).await?;
    let entries: Vec<&Vec<u8>> = boxes.iter().flatten().collect();
    if entries.is_empty() {
        return Ok(0);
    }
    if entries.iter().any(|e| RetryEntry::parse(e).is_some()) {
        for (id, moved) in ids.iter().zip(&boxes) {
            apply_box(con, keys, id, moved).await?;
        }
        return Ok(entries.len());
    }
    push_failed(con, keys, &entries).await?;
    let mut trim = redis::pipe();
    for (id, moved) in ids.iter().zip(&boxes) {
        if !moved.is_empty() {
            trim.cmd("LTRIM")
                .arg(keys.outbox(id))
                .arg(moved.len())
                .arg(-1)
                .ignore();
        }
    }
    let _: () = trim.query_async(con).await?;
    Ok(entries.len())
}

/// The entries `moved` of slot `id`'s outbox when some are retry entries (`outbox.rs`): applied
/// in the outbox's order (the failure entries between them pushed to `<ns>:failed` as they
/// come), then trimmed from the outbox. An entry that cannot be applied (a key of the wrong
/// type) stops the move there: what was applied before it is trimmed first (so it is not
/// applied again at the next move), it and the rest stay for the next move.
async fn apply_box<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    id: &str,
    moved: &[Vec<u8>],
) -> RedisResult<()> {
    let mut run: Vec<&Vec<u8>> = Vec::new();
    let mut done = 0;
    let mut result = Ok(());
    for e in moved {
        let Some(retry) = RetryEntry::parse(e) else {
            run.push(e);
            continue;
        };
        result = push_failed(con, keys, &run).await;
        if result.is_err() {
            break;
        }
        done += run.len();
        run.clear();
        result = retry.apply(con, keys).await;
        if result.is_err() {
            break;
        }
        done += 1;
    }
    if result.is_ok() {
        result = push_failed(con, keys, &run).await;
        if result.is_ok() {
            done += run.len();
        }
    }
    if done > 0 {
        let _: () = redis::cmd("LTRIM")
            .arg(keys.outbox(id))
            .arg(done)
            .arg(-1)
            .query_async(con)
            .await?;
    }
    result
}

/// `RPUSH <ns>:failed` of `entries` (none: nothing sent).
async fn push_failed<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    entries: &[&Vec<u8>],
) -> RedisResult<()> {
    if !entries.is_empty() {
        let _: i64 = redis::cmd("RPUSH")
            .arg(keys.failed())
            .arg(entries)
            .query_async(con)
            .await?;
    }
    Ok(())
}

/// After a spread call that wrote failure entries (`failed`): the outboxes of its slots that
/// may hold one (a failed job's, or a reserving slot's: an item that is no job is failed into
/// it) go to `<ns>:failed`. A command that fails is logged: the entries stay in their outbox for
/// the next move.
pub(super) async fn after_call<C: ConnectionLike + Send>(
    con: &mut C,
    requests: &[StepRequest],
    failed: u64,
) {
    let Some(first) = requests.first() else {
        return;
    };
    clear_retries(con, first.stepper.keys(), requests).await;
    if failed == 0 {
        return;
    }
    let ids: Vec<&str> = requests
        .iter()
        .filter(|r| r.reserve || matches!(r.completion, Some(Completion::Failure { .. })))
        .map(|r| r.stepper.id())
        .collect();
    if let Err(e) = move_outboxes(con, first.stepper.keys(), &ids).await {
        tracing::warn!(error = %e, "could not move failure entries to the failed list; they stay in the slots' outboxes for the next move");
    }
}

/// After a spread call: resque-retry's attempt counter and `failure-<key>` of the jobs that
/// succeeded under a retry policy (their ends, which the step leaves out there: other slots),
/// deleted one key per command. A crash or an error before leaves them to their TTL: the next
/// failure of the same job then counts on from them.
async fn clear_retries<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    requests: &[StepRequest],
) {
    for r in requests {
        let Some(Completion::Success { ends: Some(e), .. }) = &r.completion else {
            continue;
        };
        let Some(key) = &e.retry_key else {
            continue;
        };
        for k in [keys.retry_attempts(key), keys.retry_failure(key)] {
            let d: RedisResult<i64> = redis::cmd("DEL").arg(&k).query_async(con).await;
            if let Err(e) = d {
                tracing::warn!(error = %e, key = %k, "could not delete a retry key after a success; it expires with its TTL");
            }
        }
    }
}
