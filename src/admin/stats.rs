//! `info`: the namespace's counters and totals, as Ruby's `Resque.info` plus what a fleet
//! operator also wants (paused, delayed).
//!
//! `failed` is `<ns>:stat:failed` (what Jesque reports); `failed_entries` is `LLEN <ns>:failed`
//! (what Ruby's `info[:failed]` and resque-web report). They differ by design (wire notes §5).

use super::Admin;
use crate::error::Result;
use serde::Serialize;

/// A namespace at a glance.
#[derive(Debug, Clone, Serialize)]
pub struct Info {
    /// The namespace.
    pub namespace: String,
    /// `<ns>:stat:processed`.
    pub processed: u64,
    /// `<ns>:stat:failed`.
    pub failed: u64,
    /// `LLEN <ns>:failed`.
    pub failed_entries: u64,
    /// Members of `<ns>:queues`.
    pub queues: usize,
    /// Jobs waiting in list queues (plus due members of Jesque zset queues).
    pub pending: u64,
    /// Registered workers.
    pub workers: usize,
    /// Workers with a job record.
    pub working: usize,
    /// Whether `<ns>:pause-all-workers` is set.
    pub paused: bool,
    /// resque-scheduler timestamps with items (`ZCARD <ns>:delayed_queue_schedule`).
    pub delayed_timestamps: u64,
}

/// processed, failed, `LLEN failed`, `ZCARD` schedule, worker ids, pause value.
type Counters = (
    Option<String>,
    Option<String>,
    u64,
    u64,
    Vec<Vec<u8>>,
    Option<Vec<u8>>,
);

impl Admin {
    /// Reads the counters and totals.
    pub async fn info(&self) -> Result<Info> {
        let queues = self.queues().await?;
        self.info_with(queues.len(), &queues).await
    }

    /// [`Admin::info`] reading about `max_names` queue names at most: `pending` then counts the
    /// queues read (the scan says whether that is all of them), `queues` every name.
    #[cfg_attr(not(feature = "web"), allow(dead_code))]
    pub(crate) async fn info_within(
        &self,
        max_names: usize,
    ) -> Result<(Info, super::queues::QueueScan)> {
        let scan = self.queues_within(None, max_names).await?;
        let n = usize::try_from(scan.names).unwrap_or(usize::MAX);
        let info = self.info_with(n, &scan.queues).await?;
        Ok((info, scan))
    }

    /// The counters, with `queues` names of which `read` were read.
    async fn info_with(&self, names: usize, read: &[super::QueueInfo]) -> Result<Info> {
        let mut con = self.con();
        let k = self.keys();
        let (processed, failed, failed_entries, delayed_timestamps, workers, paused): Counters =
            redis::pipe()
                .get(k.stat_processed())
                .get(k.stat_failed())
                .llen(k.failed())
                .zcard(k.delayed_schedule())
                .smembers(k.workers())
                .get(k.pause_all_workers())
                .query_async(&mut con)
                .await?;
        let workers = super::names::decode(&k.workers(), workers);
        let working = if workers.is_empty() {
            0
        } else {
            let keys: Vec<String> = workers.iter().map(|id| k.worker(id)).collect();
            let records: Vec<Option<Vec<u8>>> = if k.is_spread() {
                // (Each record in its slot's worker tag: one GET each, a pipeline per slot.)
                let mut p = redis::pipe();
                for key in &keys {
                    p.get(key);
                }
                p.query_async(&mut con).await?
            } else {
                redis::cmd("MGET").arg(&keys).query_async(&mut con).await?
            };
            records
                .iter()
                .filter(|r| r.as_ref().is_some_and(|b| !b.is_empty()))
                .count()
        };
        let pending = read.iter().map(|q| q.pending.unwrap_or(q.size)).sum();
        Ok(Info {
            namespace: k.namespace().to_string(),
            processed: counter(processed.as_deref()),
            failed: counter(failed.as_deref()),
            failed_entries,
            queues: names,
            pending,
            workers: workers.len(),
            working,
            paused: paused.is_some_and(|v| super::pause::is_true(&v)),
            delayed_timestamps,
        })
    }
}

/// A counter's value; absent or unreadable counts as 0 (as Ruby's `to_i` does).
fn counter(v: Option<&str>) -> u64 {
    v.and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}
