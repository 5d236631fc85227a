//! A spread slot's retry entries (`docs/cluster.md`): what a failure a retry policy covers
//! leaves in the slot's outbox (`<ns>:resq:outbox:<id>`) instead of a failure entry, and how the
//! outbox's mover applies it to resque-retry's and resque-scheduler's keys, which are in other
//! slots.
//!
//! The retry layer decides (`crate::middleware::retry::decide`, `crate::worker::complete`);
//! the step removes the job and pushes the entry in the slot's one atomic step, as it pushes a
//! failure entry; the mover then writes, one single-slot command each and in this order, what
//! `complete.lua` writes in one step elsewhere: a retry sets the attempt counter (with its TTL)
//! and `failure-<key>` (with its TTL), then files the job (`SADD <ns>:queues` + `RPUSH` its
//! queue, or, with a delay, the bucket `RPUSH`, the reverse index `SADD`, the schedule `ZADD`);
//! a give-up pushes its final failure entry to `<ns>:failed`, then deletes the counter and
//! `failure-<key>`. The outbox is trimmed only after: a crash or a lost reply in between applies
//! the entry again (the job retried twice, the counter set to the same value), never loses it.

use crate::keys::Keys;
use redis::aio::ConnectionLike;
use redis::RedisResult;
use serde::{Deserialize, Serialize};

/// What starts a retry entry: no failure entry (a JSON object) starts so.
const TAG: &str = "resq-retry ";

/// A decided failure of a job under a retry policy, as its slot's outbox holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case")]
pub(crate) enum RetryEntry {
    /// Run again.
    Retry {
        /// resque-retry's logical key (the counter's and `failure-<key>`'s name).
        key: String,
        /// The counter's new value.
        attempt: u32,
        /// The counter's TTL (s).
        counter_ttl: u64,
        /// The failure entry kept in `failure-<key>`.
        failure: String,
        /// `failure-<key>`'s TTL (s; 0: not written).
        failure_ttl: u64,
        /// The queue it runs on again.
        queue: String,
        /// The payload pushed (`due` 0) or the delayed item filed at `due`.
        job: String,
        /// When it is due (epoch s; 0: pushed now).
        due: i64,
    },
    /// Not run again: its final failure entry goes to `<ns>:failed`.
    GiveUp {
        /// resque-retry's logical key (its counter and `failure-<key>` are deleted).
        key: String,
        /// The final failure entry.
        failure: String,
    },
}

impl RetryEntry {
    /// The entry's bytes in the outbox.
    pub(crate) fn encode(&self) -> String {
        let json = serde_json::to_string(self).unwrap_or_default();
        format!("{TAG}{json}")
    }

    /// The retry entry `bytes` holds (`None`: a failure entry, or an entry it cannot read, which
    /// stays a failure entry).
    pub(crate) fn parse(bytes: &[u8]) -> Option<RetryEntry> {
        serde_json::from_slice(bytes.strip_prefix(TAG.as_bytes())?).ok()
    }

    /// Applies the entry (see the module doc), one single-slot command at a time.
    pub(crate) async fn apply<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        keys: &Keys,
    ) -> RedisResult<()> {
        match self {
            RetryEntry::Retry {
                key,
                attempt,
                counter_ttl,
                failure,
                failure_ttl,
                queue,
                job,
                due,
            } => {
                let _: () = redis::cmd("SET")
                    .arg(keys.retry_attempts(key))
                    .arg(attempt)
                    .arg("EX")
                    .arg(counter_ttl)
                    .query_async(con)
                    .await?;
                if *failure_ttl > 0 {
                    let _: () = redis::cmd("SET")
                        .arg(keys.retry_failure(key))
                        .arg(failure)
                        .arg("EX")
                        .arg(failure_ttl)
                        .query_async(con)
                        .await?;
                }
                if *due == 0 {
                    let _: i64 = redis::cmd("SADD")
                        .arg(keys.queues())
                        .arg(queue)
                        .query_async(con)
                        .await?;
                    let _: i64 = redis::cmd("RPUSH")
                        .arg(keys.queue(queue))
                        .arg(job)
                        .query_async(con)
                        .await?;
                } else {
                    crate::client::delayed::push_spread(con, keys, *due, job).await?;
                }
            }
            RetryEntry::GiveUp { key, failure } => {
                let _: i64 = redis::cmd("RPUSH")
                    .arg(keys.failed())
                    .arg(failure)
                    .query_async(con)
                    .await?;
                for k in [keys.retry_attempts(key), keys.retry_failure(key)] {
                    let _: i64 = redis::cmd("DEL").arg(k).query_async(con).await?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_entry_reads_back_and_a_failure_entry_is_none() {
        let e = RetryEntry::Retry {
            key: "resque-retry:R".into(),
            attempt: 2,
            counter_ttl: 10,
            failure: "{\"a\":1}".into(),
            failure_ttl: 4,
            queue: "q".into(),
            job: "{}".into(),
            due: 7,
        };
        assert_eq!(RetryEntry::parse(e.encode().as_bytes()), Some(e));
        assert_eq!(RetryEntry::parse(br#"{"failed_at":"x"}"#), None);
        assert_eq!(RetryEntry::parse(b"resq-retry {not json"), None);
    }
}
