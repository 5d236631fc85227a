//! The scheduler on a namespace spread over a Redis Cluster's slots (`docs/cluster.md`), where
//! resque-scheduler's keys stay where and as Ruby reads them — the master lock, the schedule
//! zset, each bucket `<ns>:delayed:<ts>`, each reverse index `<ns>:timestamps:<item>`,
//! `<ns>:resq:schedule_next` and `<ns>:delayed:last_enqueued_at` each in the slot its name
//! hashes to — so no call may touch two of them. Each transition is a row of single-slot
//! steps, ordered so that a crash, a lost reply or a lock handover between two of them may do
//! something twice (enqueue a due job twice, fire an occurrence twice, leave a reverse-index
//! entry or an empty bucket's zset member for the next round to clean), never lose a job:
//!
//! * **A delayed enqueue** ([`crate::Client::enqueue_at`], `client::delayed::push_spread`):
//!   `SADD` the reverse index, `RPUSH` the bucket, `ZADD` the zset last (the zset makes it
//!   visible to every scheduler).
//! * **A due bucket moved** ([`Mover::batch`]): the lock checked (`GET`), the head read
//!   (`LRANGE`); items that cannot be enqueued pushed to `<ns>:failed`, the jobs pushed to their
//!   queues (`SADD <ns>:queues`, `RPUSH` per queue); then [`take`]: the pushed items removed
//!   from the bucket only while it still starts with them (`delayed_remove.lua`), their
//!   reverse-index members removed where no copy is left, and once the bucket is empty,
//!   [`settle`]: its zset member removed, the bucket's length read again and the member put
//!   back when a producer pushed meanwhile (a producer pushes before it adds the member, so one
//!   of the two sees the other).
//! * **A recurring fire** ([`fire`]): the lock checked, the job pushed,
//!   `<ns>:delayed:last_enqueued_at` written, then the fire token moved only if still the one
//!   read (`schedule_token.lua`): a crash before the token moved, or a lost race, fires the
//!   occurrence again; none is skipped.

use super::job;
use super::lock::{MasterLock, Mastery};
use super::mover::{Batch, Mover};
use crate::error::Result;
use crate::keys::Keys;
use redis::aio::ConnectionLike;

/// Takes or keeps the master lock (its one key), then, as master, reads the earliest due
/// timestamp (`ZRANGEBYSCORE … LIMIT 0 1`, a command of its own).
pub(crate) async fn poll<C: ConnectionLike + Send>(
    lock: &MasterLock,
    con: &mut C,
    now: i64,
) -> Result<(Mastery, Option<i64>)> {
    let held: i64 = crate::scripts::SchedulerLock {
        lock: &lock.key,
        value: &lock.value,
        timeout_s: lock.timeout.as_secs().max(1),
        release: "",
    }
    .call()
    .invoke_async(con)
    .await?;
    let mastery = match held {
        1 => Mastery::Acquired,
        2 => Mastery::Kept,
        _ => return Ok((Mastery::No, None)),
    };
    let due: Vec<String> = redis::cmd("ZRANGEBYSCORE")
        .arg(&lock.schedule_key)
        .arg("-inf")
        .arg(now)
        .arg("LIMIT")
        .arg(0)
        .arg(1)
        .query_async(con)
        .await?;
    Ok((mastery, due.first().and_then(|s| s.parse().ok())))
}

/// Deletes the lock if it is still ours.
pub(crate) async fn release<C: ConnectionLike + Send>(
    lock: &MasterLock,
    con: &mut C,
) -> Result<bool> {
    let n: i64 = crate::scripts::SchedulerLock {
        lock: &lock.key,
        value: &lock.value,
        timeout_s: 1,
        release: "release",
    }
    .call()
    .invoke_async(con)
    .await?;
    Ok(n == 1)
}

/// Whether the lock at `key` still holds `value`.
async fn holds<C: ConnectionLike + Send>(con: &mut C, key: &str, value: &str) -> Result<bool> {
    let v: Option<Vec<u8>> = redis::cmd("GET").arg(key).query_async(con).await?;
    Ok(v.as_deref() == Some(value.as_bytes()))
}

/// Pushes `jobs` (queue, payload), in order within each queue, as Resque enqueues on a spread
/// namespace: `SADD <ns>:queues` of every queue first, then one `RPUSH` per queue (a pipeline
/// the connection sends per slot).
pub(crate) async fn push_jobs<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    jobs: &[(String, String)],
) -> Result<()> {
    let mut by_queue: Vec<(&str, Vec<&str>)> = Vec::new();
    for (q, payload) in jobs {
        match by_queue.iter_mut().find(|(name, _)| name == q) {
            Some((_, list)) => list.push(payload),
            None => by_queue.push((q, vec![payload])),
        }
    }
    if by_queue.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = by_queue.iter().map(|(q, _)| *q).collect();
    let _: i64 = redis::cmd("SADD")
        .arg(keys.queues())
        .arg(&names)
        .query_async(con)
        .await?;
    let mut pipe = redis::pipe();
    for (q, list) in &by_queue {
        pipe.rpush(keys.queue(q), list).ignore();
    }
    let _: () = pipe.query_async(con).await?;
    Ok(())
}

/// Takes `items` out of bucket `ts` (their jobs pushed already, or deleted): the bucket first
/// (`delayed_remove.lua`), then the reverse-index member of each item no copy of which is left
/// there, then, once the bucket is empty, its zset member ([`settle`]). Returns how many copies
/// were taken out.
pub(crate) async fn take<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    ts: i64,
    items: &[&[u8]],
) -> Result<u64> {
    let bucket = keys.delayed_bucket(ts);
    let r: Vec<i64> = crate::scripts::DelayedRemove {
        bucket: &bucket,
        n: items.len(),
        items: items.to_vec(),
    }
    .call()
    .invoke_async(con)
    .await?;
    let removed = r.first().copied().unwrap_or(0);
    let left = r.get(1).copied().unwrap_or(0);
    let member = Keys::delayed_bucket_member(ts);
    let mut pipe = redis::pipe();
    let mut any = false;
    for (i, item) in items.iter().enumerate() {
        if r.get(2 + i).copied().unwrap_or(0) == 0 {
            pipe.srem(keys.timestamps(&String::from_utf8_lossy(item)), &member)
                .ignore();
            any = true;
        }
    }
    if any {
        let _: () = pipe.query_async(con).await?;
    }
    if left == 0 {
        settle(con, keys, ts).await?;
    }
    Ok(u64::try_from(removed).unwrap_or(0))
}

/// Removes the zset member of bucket `ts`, found empty: `ZREM`, then the bucket's length read
/// again, and the member put back (`ZADD`) when a producer pushed to it meanwhile. A producer
/// pushes the bucket before it adds the member: if its push came before the `LLEN`, the member
/// is put back here; if after, its own `ZADD` comes after the `ZREM`.
pub(crate) async fn settle<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    ts: i64,
) -> Result<()> {
    let schedule = keys.delayed_schedule();
    let _: i64 = redis::cmd("ZREM")
        .arg(&schedule)
        .arg(ts)
        .query_async(con)
        .await?;
    let left: i64 = redis::cmd("LLEN")
        .arg(keys.delayed_bucket(ts))
        .query_async(con)
        .await?;
    if left > 0 {
        let _: i64 = redis::cmd("ZADD")
            .arg(&schedule)
            .arg(ts)
            .arg(ts)
            .query_async(con)
            .await?;
    }
    Ok(())
}

impl Mover {
    /// One batch of bucket `ts` on a spread namespace (see the module doc): the lock checked,
    /// the head read, its jobs (and failure entries) pushed, then the items taken out.
    pub(crate) async fn batch_spread<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        ts: i64,
    ) -> Result<Batch> {
        if !holds(con, &self.lock_key, &self.lock_value).await? {
            return Ok(Batch::NotMaster);
        }
        let stop = isize::try_from(self.batch.max(1)).unwrap_or(isize::MAX) - 1;
        let items: Vec<Vec<u8>> = redis::cmd("LRANGE")
            .arg(self.keys.delayed_bucket(ts))
            .arg(0)
            .arg(stop)
            .query_async(con)
            .await?;
        if items.is_empty() {
            settle(con, &self.keys, ts).await?;
            return Ok(Batch::Moved(0));
        }
        let mut failures = Vec::new();
        let mut jobs = Vec::new();
        for bytes in &items {
            let made = std::str::from_utf8(bytes)
                .map_err(|_| "the item is not UTF-8 text".to_string())
                .and_then(|item| job::from_item(item, self.float_format));
            match made {
                Ok(j) => jobs.push((j.queue, j.payload)),
                Err(why) => {
                    let item = String::from_utf8_lossy(bytes);
                    tracing::error!(item = %item, error = %why, "delayed item cannot be enqueued; recording a failure");
                    failures.push(self.unschedulable(&item, &why));
                }
            }
        }
        if !failures.is_empty() {
            let _: i64 = redis::cmd("RPUSH")
                .arg(self.keys.failed())
                .arg(&failures)
                .query_async(con)
                .await?;
        }
        push_jobs(con, &self.keys, &jobs).await?;
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        take(con, &self.keys, ts, &refs).await?;
        Ok(Batch::Moved(items.len()))
    }
}

/// What a recurring fire on a spread namespace writes.
pub(crate) struct Fire<'a> {
    /// The master lock's key and our value.
    pub lock: (&'a str, &'a str),
    /// The schedule's name.
    pub name: &'a str,
    /// The token read, and the one to put in its place.
    pub token: &'a str,
    /// The new token.
    pub new_token: &'a str,
    /// The job (queue, payload), or `None` to only move the token.
    pub job: Option<(&'a str, &'a str)>,
    /// `<ns>:delayed:last_enqueued_at`'s text for this fire.
    pub last_enqueued_at: &'a str,
}

/// Fires (or only advances) a recurring schedule on a spread namespace (see the module doc).
/// Returns 1 when it fired or moved the token, 0 when the lock is not ours or (nothing pushed)
/// the token moved meanwhile.
pub(crate) async fn fire<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    f: &Fire<'_>,
) -> Result<i64> {
    if !holds(con, f.lock.0, f.lock.1).await? {
        return Ok(0);
    }
    if let Some((queue, payload)) = f.job {
        push_jobs(con, keys, &[(queue.to_string(), payload.to_string())]).await?;
        let _: i64 = redis::cmd("HSET")
            .arg(keys.last_enqueued_at())
            .arg(f.name)
            .arg(f.last_enqueued_at)
            .query_async(con)
            .await?;
    }
    let moved: i64 = crate::scripts::ScheduleToken {
        schedule_next: keys.schedule_next(),
        name: f.name,
        token: f.token,
        new_token: f.new_token,
    }
    .call()
    .invoke_async(con)
    .await?;
    if moved == 0 && f.job.is_some() {
        tracing::warn!(schedule = %f.name, "recurring schedule fired while its token moved elsewhere: this occurrence may run twice");
        return Ok(1);
    }
    Ok(moved)
}
