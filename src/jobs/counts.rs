//! How many jobs each state holds ([`Admin::job_counts`]), for `resq jobs`, `resq top`, the
//! dashboard's tabs and the `resq_jobs{state}` metric.
//!
//! * `completed`, `failed`, `killed`, `cancelled` and `waiting`: the entries of resq's index of
//!   that state (resq's own tracked jobs; resque-status records are listed under their status,
//!   not counted: resque-status keeps no index by status).
//! * `queued`, `scheduled`, `working`: where jobs are, as resque-web shows them — the jobs in
//!   the queues of `<ns>:queues` (a Jesque delayed queue: its jobs due) plus those the limits
//!   hold (the held sets in their index, `<ns>:resq:held:sets`), the items of the delayed set, the workers running a job. These count every job,
//!   tracked or not.
//! * `retrying` is not counted: a retry waits in the delayed set like any delayed job, and is
//!   counted as `scheduled` (`resq jobs --state retrying` lists them).

use super::read::{bytes, each};
use super::walk::held_sets;
use super::State;
use crate::admin::Admin;
use crate::error::Result;
use redis::Value;

/// Delayed timestamps counted per round trip.
const STAMPS: usize = 1000;

impl Admin {
    /// How many jobs each state holds, in lifecycle order (every state but `retrying`): the
    /// finished states
    /// and `waiting` from resq's indexes (resq's own tracked jobs); `queued`, `scheduled` and
    /// `working` from the queues, the limits' held sets, the delayed set and the workers'
    /// records — every job, tracked or not, as resque-web counts them. `retrying` is not
    /// reported: a retry waiting in the delayed set counts as `scheduled`. A key of the wrong
    /// type counts nothing.
    pub async fn job_counts(&self) -> Result<Vec<(State, u64)>> {
        Ok(self.job_counts_within(None).await?.0)
    }

    /// [`Admin::job_counts`] reading about `max_keys` queue names, as many held sets, delayed
    /// timestamps and worker ids at most (`None`: all): `queued`, `scheduled` and `working`
    /// then count the jobs of those read, and the flag says whether that was all of them.
    pub(crate) async fn job_counts_within(
        &self,
        max_keys: Option<usize>,
    ) -> Result<(Vec<(State, u64)>, bool)> {
        let keys = self.keys();
        let mut con = self.con();
        let (queues, mut complete) = match max_keys {
            None => (self.queues().await?, true),
            Some(max) => {
                let scan = self.queues_within(None, max).await?;
                (scan.queues, scan.complete)
            }
        };
        let queued: u64 = queues.iter().map(|q| q.pending.unwrap_or(q.size)).sum();
        let (held, more) = held_sets(&mut con, keys, std::ops::Bound::Unbounded, max_keys).await?;
        complete &= !more;
        let (workers, all_workers) = worker_ids(&mut con, keys, max_keys).await?;
        complete &= all_workers;
        let indexed = [
            State::Waiting,
            State::Completed,
            State::Failed,
            State::Killed,
            State::Cancelled,
        ];
        // (Spread: each index's parts, one per slot, added up.)
        let mut cmds: Vec<redis::Cmd> = Vec::new();
        let mut parts: Vec<usize> = Vec::new();
        for s in indexed {
            let ks = super::walk::index_keys(&mut con, keys, keys.job_state(s.as_str())).await?;
            parts.push(ks.len());
            for k in &ks {
                cmds.push(cmd("ZCARD", k));
            }
        }
        for h in &held {
            cmds.push(cmd("ZCARD", h));
        }
        for w in &workers {
            cmds.push(cmd("STRLEN", &keys.worker(w)));
        }
        let replies = each(&mut con, cmds.into_iter()).await?;
        let n = |r: &redis::RedisResult<Value>| match r {
            Ok(Value::Int(i)) => u64::try_from(*i).unwrap_or(0),
            _ => 0,
        };
        let (ix_parts, rest) = replies.split_at(parts.iter().sum::<usize>().min(replies.len()));
        let mut ix: Vec<u64> = Vec::new();
        let mut from = 0;
        for p in &parts {
            let to = (from + p).min(ix_parts.len());
            ix.push(ix_parts[from.min(to)..to].iter().map(n).sum());
            from = to;
        }
        let (held_n, busy) = rest.split_at(held.len().min(rest.len()));
        let queued = queued + held_n.iter().map(n).sum::<u64>();
        let working = busy.iter().filter(|r| n(r) > 0).count() as u64;
        let (scheduled, all_delayed) = self.delayed_items(&mut con, max_keys).await?;
        let complete = complete && all_delayed;
        let mut out = vec![(State::Queued, queued), (State::Scheduled, scheduled)];
        out.push((State::Waiting, ix.first().copied().unwrap_or(0)));
        out.push((State::Working, working));
        for (s, c) in indexed.iter().zip(&ix).skip(1) {
            out.push((*s, *c));
        }
        Ok((out, complete))
    }

    /// The items of the buckets of the delayed set, of about `max` buckets at most (`None`:
    /// all); and whether that was all of them.
    async fn delayed_items(
        &self,
        con: &mut crate::conn::Conn,
        max: Option<usize>,
    ) -> Result<(u64, bool)> {
        let keys = self.keys();
        let mut total = 0u64;
        let mut from = 0usize;
        loop {
            if max.is_some_and(|m| from >= m) {
                let left: u64 = redis::cmd("ZCARD")
                    .arg(keys.delayed_schedule())
                    .query_async(con)
                    .await
                    .unwrap_or(0);
                return Ok((total, left as usize <= from));
            }
            let step = max.map_or(STAMPS, |m| STAMPS.min(m - from));
            let stamps: Vec<Vec<u8>> = match redis::cmd("ZRANGE")
                .arg(keys.delayed_schedule())
                .arg(from)
                .arg(from + step - 1)
                .query_async(con)
                .await
            {
                Ok(s) => s,
                Err(e) if e.code() == Some("WRONGTYPE") => Vec::new(),
                Err(e) => return Err(e.into()),
            };
            let got = stamps.len();
            let lens = each(
                con,
                stamps.into_iter().filter_map(|ts| {
                    let ts: i64 = String::from_utf8_lossy(&ts).trim().parse().ok()?;
                    Some(cmd("LLEN", &keys.delayed_bucket(ts)))
                }),
            )
            .await?;
            total += lens
                .into_iter()
                .filter_map(|r| r.ok().and_then(bytes))
                .filter_map(|b| String::from_utf8_lossy(&b).parse::<u64>().ok())
                .sum::<u64>();
            if got < step {
                return Ok((total, true));
            }
            from += step;
        }
    }
}

/// The ids of `<ns>:workers`, about `max` of them at most (`SSCAN`; `None`: all); and whether
/// that was all of them. A key of another type holds none.
async fn worker_ids(
    con: &mut crate::conn::Conn,
    keys: &crate::keys::Keys,
    max: Option<usize>,
) -> Result<(Vec<String>, bool)> {
    let key = keys.workers();
    let Some(max) = max else {
        return match crate::admin::names::smembers(con, &key).await {
            Ok(w) => Ok((w, true)),
            Err(e) if e.code() == Some("WRONGTYPE") => Ok((Vec::new(), true)),
            Err(e) => Err(e.into()),
        };
    };
    let (mut raw, mut cursor, mut asked) = (Vec::new(), 0u64, 0usize);
    loop {
        let count = (max - asked).clamp(1, 1_000);
        let r: redis::RedisResult<(u64, Vec<Vec<u8>>)> = redis::cmd("SSCAN")
            .arg(&key)
            .arg(cursor)
            .arg("COUNT")
            .arg(count)
            .query_async(con)
            .await;
        let (next, mut got) = match r {
            Ok(v) => v,
            Err(e) if e.code() == Some("WRONGTYPE") => (0, Vec::new()),
            Err(e) => return Err(e.into()),
        };
        raw.append(&mut got);
        asked += count;
        cursor = next;
        if cursor == 0 || asked >= max {
            break;
        }
    }
    let mut ids = crate::admin::names::decode(&key, raw);
    ids.sort();
    ids.dedup();
    Ok((ids, cursor == 0))
}

/// `name key`.
fn cmd(name: &str, key: &str) -> redis::Cmd {
    let mut c = redis::cmd(name);
    c.arg(key);
    c
}
