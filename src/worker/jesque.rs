//! Jesque's delayed and recurring zset queues, run by resq workers that are told a queue is one
//! (`JESQUE_DELAYED_QUEUES=a,b`, or [`crate::WorkerBuilder::jesque_delayed_queues`]).
//!
//! Jesque turns `<ns>:queue:<q>` into a ZSET of job JSON scored by due time in epoch ms, with
//! recurring periods in `<ns>:queue:<q>:frequency` (wire notes §9.2). A resq slot reserves from
//! such a queue with Jesque's pop rules, inside the same step call that writes its worker
//! record (`jesque.lua`'s `Jes.step_next`, the reserve's hook): the lowest member scored ≤ now is taken; a recurring one is re-scored
//! `score + period` (so it catches up one period per pop when behind, as in Jesque), others are
//! removed. The member's bytes become the record's payload unchanged.
//!
//! Opt-in per queue, never by wildcard: a queue matched by `QUEUES=*` but not named here is
//! skipped as before. Ruby workers cannot run these queues at all (LPOP → WRONGTYPE, and the
//! worker exits), and a Jesque delayed enqueue adds its queue to `<ns>:queues`, so every Ruby
//! worker with a wildcard list must exclude them (`QUEUES=*,!scheduled`).
//!
//! Wake-ups: a zset queue is not a list, so its watcher cannot block on it; instead it reads the
//! earliest score and sleeps until then, at most `min(INTERVAL, 1 s)` (so a new, earlier job is
//! seen within a second).

use crate::keys::Keys;
use chrono::{DateTime, Utc};
use redis::aio::ConnectionLike;
use redis::RedisResult;
use std::time::Duration;

/// Longest sleep of a zset queue's watcher.
pub(crate) const MAX_ZSET_WAIT: Duration = Duration::from_secs(1);

/// Which of a slot's queues are Jesque zset queues, in the step script's layout.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct JesqueQueues {
    /// One character per queue, `1` for a zset queue; empty when none is.
    flags: String,
    /// `<queue key>:frequency` per queue (aligned with the queues); empty when none is.
    frequency: Vec<String>,
    /// The zset queues' keys.
    zset_keys: Vec<String>,
}

impl JesqueQueues {
    /// Marks the queues of `names` that appear in `zsets`.
    pub(crate) fn new(keys: &Keys, names: &[String], zsets: &[String]) -> Self {
        if !names.iter().any(|n| zsets.contains(n)) {
            return Self::default();
        }
        JesqueQueues {
            flags: names
                .iter()
                .map(|n| if zsets.contains(n) { '1' } else { '0' })
                .collect(),
            frequency: names.iter().map(|n| keys.queue_frequency(n)).collect(),
            zset_keys: names
                .iter()
                .filter(|n| zsets.contains(n))
                .map(|n| keys.queue(n))
                .collect(),
        }
    }

    /// Whether `key` is one of the zset queues' keys.
    pub(crate) fn is_zset_key(&self, key: &str) -> bool {
        self.zset_keys.iter().any(|k| k == key)
    }

    /// Whether the queue at `index` is a zset queue.
    pub(crate) fn is_zset_index(&self, index: usize) -> bool {
        self.flags.as_bytes().get(index) == Some(&b'1')
    }

    /// The same marks for the queues at `picked` (indexes, in order).
    pub(crate) fn subset(&self, picked: &[usize]) -> Self {
        if !picked.iter().any(|&i| self.is_zset_index(i)) {
            return Self::default();
        }
        let frequency: Vec<String> = picked.iter().map(|&i| self.frequency[i].clone()).collect();
        JesqueQueues {
            flags: picked
                .iter()
                .map(|&i| if self.is_zset_index(i) { '1' } else { '0' })
                .collect(),
            zset_keys: picked
                .iter()
                .filter(|&&i| self.is_zset_index(i))
                .filter_map(|&i| {
                    self.frequency[i]
                        .strip_suffix(":frequency")
                        .map(str::to_string)
                })
                .collect(),
            frequency,
        }
    }
}

/// How long a watcher may sleep before the zset queue `key` has a due member: `None` when one
/// is due now, else the time to the earliest score, capped at `cap`.
pub(crate) async fn due_in<C: ConnectionLike + Send>(
    con: &mut C,
    key: &str,
    now: DateTime<Utc>,
    cap: Duration,
) -> RedisResult<Option<Duration>> {
    let head: Vec<(Vec<u8>, f64)> = redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(0)
        .arg("WITHSCORES")
        .query_async(con)
        .await?;
    let Some((_, score)) = head.first() else {
        return Ok(Some(cap));
    };
    let now_ms = now.timestamp_millis() as f64;
    if *score <= now_ms {
        return Ok(None);
    }
    let wait = Duration::from_secs_f64(((score - now_ms) / 1000.0).min(cap.as_secs_f64()));
    Ok(Some(wait))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_follow_queue_order() {
        let keys = Keys::new("ns");
        let names: Vec<String> = ["a", "z", "b"].map(String::from).to_vec();
        let j = JesqueQueues::new(&keys, &names, &["z".to_string()]);
        assert_eq!(j.flags, "010");
        assert_eq!(j.frequency[1], "ns:queue:z:frequency");
        assert!(j.is_zset_key("ns:queue:z"));
        assert!(!j.is_zset_key("ns:queue:a"));
        assert_eq!(
            JesqueQueues::new(&keys, &names, &["other".to_string()]),
            JesqueQueues::default()
        );
    }
}
