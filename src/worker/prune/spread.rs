//! Pruning one dead worker id on a spread cluster namespace ([`Keys::spread`]), where its keys
//! are in several slots and no one step can hold them all (`prune.lua` does it in one step on
//! every other layout).
//!
//! The id's record `<ns>:worker:<id>` is in its queue's slot (a resq slot's id carries the
//! queue's `{tag}`), so the job's own transition — taken out of the record and, under
//! at-least-once, put back at the head of its queue — is one atomic step there
//! (`prune_slot.lua`), applied only while the record is still the one judged. Around it, in
//! this order:
//!
//! 1. the heartbeat is read again: a changed one (the worker is alive) stops here, nothing
//!    written;
//! 2. the shared writes that record the job, first: its failure entry `RPUSH`ed to
//!    `<ns>:failed` (as Ruby's `unregister_worker` writes it: no `stat:failed` increment on
//!    this path), or, under at-least-once, the queue name `SADD`ed to `<ns>:queues` (and the
//!    payload `LPUSH`ed to a queue of another slot than the record's: an id not made by resq);
//!    and the failure entries of jobs it ended that its outbox still holds
//!    (`<ns>:resq:outbox:<id>`, moved to `<ns>:failed`);
//! 3. the record-slot step (`prune_slot.lua`) removes the record and the id's other keys of
//!    that slot, putting the job back when its queue is there, and ends the job's tracked
//!    record when it is in that slot (an id `<hex>{<tag>}` of the slot's tag: failed, or
//!    queued again under at-least-once), as one server's prune does in its one step;
//! 4. the id's keys of other slots (`:started`, stats, token of a non-resq id) are deleted;
//! 5. the id leaves `<ns>:workers`; its heartbeat field goes last. The round's sweeps then take
//!    it out of the outbox index ([`sweep_outboxes`]) and give back the concurrency limits'
//!    units it held ([`sweep_shares`]), as for an id someone else unregistered.
//!
//! A crash anywhere leaves the job in Redis: before 3 the record still holds it (and the next
//! round, the heartbeat still expired, does it again: a failure entry or a queue entry may then
//! be there twice, never none); after 3 it is in `<ns>:failed` or its queue. The heartbeat
//! field, removed last, is what the next round finds the rest of the id from. When the record
//! changed between the look and step 3 (the worker was alive after all), the shared writes of
//! 2 are the only trace: the job listed twice at worst.

use crate::keys::{hash_slot, Keys};
use crate::scripts::Checked;
use crate::worker::lifecycle::{by_slot, own_keys};
use redis::aio::ConnectionLike;
use redis::RedisResult;

/// What the round judged about one id.
pub(super) struct Judged<'a> {
    /// The worker id.
    pub id: &'a str,
    /// Its heartbeat field as read ("" when absent).
    pub heartbeat: &'a str,
    /// Its record as read (empty when absent).
    pub record: &'a [u8],
    /// "fail", "requeue" or "" (idle).
    pub mode: &'static str,
    /// The failure entry ("fail").
    pub entry: String,
    /// The job's payload bytes ("requeue").
    pub payload: &'a str,
    /// The job's queue name ("fail", "requeue").
    pub queue: &'a str,
    /// The job's tracked ending, when its record is in the record's slot ('' none:
    /// [`tracked_here`]).
    pub track: String,
}

/// Whether the job in `payload`, run by worker `id`, is tracked with a record in the slot of
/// `id`'s worker record (its id carries that slot's tag): the only record the prune step of
/// that slot may end.
pub(super) fn tracked_here(keys: &Keys, id: &str, payload: &str) -> bool {
    let Some((job, crate::jobs::Kind::Tracked { .. })) = crate::jobs::tracked_in_payload(payload)
    else {
        return false;
    };
    job.slot_tag().is_some()
        && hash_slot(keys.job_record(job.as_str()).as_bytes())
            == hash_slot(keys.worker(id).as_bytes())
}

/// Prunes the id; 1 when it was pruned now, 0 when it changed while judged (see the module
/// docs for the order of the writes).
pub(super) async fn prune<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    j: &Judged<'_>,
) -> RedisResult<i64> {
    let now: Option<String> = redis::cmd("HGET")
        .arg(keys.heartbeats())
        .arg(j.id)
        .query_async(con)
        .await?;
    if now.as_deref().unwrap_or("") != j.heartbeat {
        return Ok(0);
    }
    let record = keys.worker(j.id);
    let queue = keys.queue(j.queue);
    let same_slot = hash_slot(queue.as_bytes()) == hash_slot(record.as_bytes());
    match j.mode {
        "fail" => {
            Checked::new()
                .rpush(&keys.failed(), j.entry.as_str())
                .run(con)
                .await?
        }
        "requeue" => {
            let mut w = Checked::new();
            w.sadd(&keys.queues(), j.queue);
            w.run(con).await?;
            if !same_slot {
                Checked::new().lpush(&queue, j.payload).run(con).await?;
            }
        }
        _ => {}
    }
    // The failure entries the slot's last steps left in its outbox go to `<ns>:failed` too.
    crate::worker::step::spread::move_outboxes(con, keys, &[j.id]).await?;
    let mut groups = by_slot(own_keys(keys, j.id).into_iter().skip(1));
    let others = groups
        .remove(&hash_slot(record.as_bytes()))
        .unwrap_or_default();
    let requeue_here = j.mode == "requeue" && same_slot;
    let applied: i64 = crate::scripts::PruneSlot {
        queue: if requeue_here { queue } else { record.clone() },
        worker: record,
        others,
        record: j.record,
        mode: if requeue_here { "requeue" } else { "" },
        payload: j.payload,
        track: j.track.clone(),
        prefix: keys.prefix(),
        now_ms: chrono::Utc::now().timestamp_millis(),
    }
    .call()
    .invoke_async(con)
    .await?;
    if applied != 1 {
        return Ok(0);
    }
    for slot in groups.into_values() {
        let mut w = Checked::new();
        for key in &slot {
            w.del(key);
        }
        w.run(con).await?;
    }
    Checked::new().srem(&keys.workers(), j.id).run(con).await?;
    Checked::new()
        .hdel(&keys.heartbeats(), j.id)
        .run(con)
        .await?;
    Ok(1)
}

/// Ids of the outbox index a page of the sweep reads.
const SWEEP_PAGE: usize = 500;

/// Moves to `<ns>:failed` the outboxes of ids someone else unregistered — Ruby's pruning or
/// resque-web, which know nothing of outboxes — and takes them out of the outbox index
/// (`<ns>:resq:outboxes`): the members whose heartbeat field is gone when read after the member
/// (the index is written after the heartbeat and cleared before it: `lifecycle`). A page of
/// members at a time; how many ids it settled.
pub(super) async fn sweep_outboxes<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
) -> RedisResult<usize> {
    let mut cursor = 0u64;
    let mut settled = 0;
    loop {
        let (next, members): (u64, Vec<String>) = redis::cmd("SSCAN")
            .arg(keys.outboxes())
            .arg(cursor)
            .arg("COUNT")
            .arg(SWEEP_PAGE)
            .query_async(con)
            .await?;
        if !members.is_empty() {
            let beats: Vec<Option<String>> = redis::cmd("HMGET")
                .arg(keys.heartbeats())
                .arg(&members)
                .query_async(con)
                .await?;
            let gone: Vec<&str> = members
                .iter()
                .zip(&beats)
                .filter(|(_, beat)| beat.is_none())
                .map(|(id, _)| id.as_str())
                .collect();
            if !gone.is_empty() {
                crate::worker::step::spread::move_outboxes(con, keys, &gone).await?;
                Checked::new()
                    .srem(&keys.outboxes(), &gone)
                    .run(con)
                    .await?;
                settled += gone.len();
            }
        }
        if next == 0 {
            return Ok(settled);
        }
        cursor = next;
    }
}

/// Gives back the units of concurrency limits (`<ns>:resq:limit:<name>:shares`, a group's
/// units under its first slot's id: crate::limits::spread) held by ids no longer registered —
/// pruned by this round, or unregistered by someone else (Ruby's pruning, resque-web), whose
/// handlers run nothing any more: the holders whose heartbeat field is gone. How many fields
/// it removed.
pub(super) async fn sweep_shares<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
) -> RedisResult<usize> {
    let mut removed = 0;
    for key in crate::limits::spread::share_keys(con, keys).await? {
        let holders: Vec<String> = redis::cmd("HKEYS").arg(&key).query_async(con).await?;
        if holders.is_empty() {
            continue;
        }
        let beats: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(keys.heartbeats())
            .arg(&holders)
            .query_async(con)
            .await?;
        let gone: Vec<&str> = holders
            .iter()
            .zip(&beats)
            .filter(|(_, beat)| beat.is_none())
            .map(|(id, _)| id.as_str())
            .collect();
        if !gone.is_empty() {
            Checked::new().hdel(&key, &gone).run(con).await?;
            removed += gone.len();
        }
    }
    Ok(removed)
}
