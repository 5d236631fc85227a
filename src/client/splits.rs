//! The producer's side of split queues (crate::splits): which physical queue a job for queue
//! `q` goes to. The declarations are read from `<ns>:resq:splits` one queue at a time (`HGET`)
//! and kept [`TTL`], absence included, so an unsplit queue costs one `HGET` per 5 s per client
//! and nothing per enqueue.

use super::Client;
use crate::error::Result;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a declaration (or its absence) read by a client is used before it is read again.
pub(crate) const TTL: Duration = Duration::from_secs(5);

/// Queues a client keeps declarations of before it starts over.
const MAX_ENTRIES: usize = 10_000;

/// A queue's current shards as last read (`None`: not split), and when.
type Entry = (Instant, Option<Arc<Vec<String>>>);

/// A client's cache of declarations and its round-robin counter (shared by its clones).
#[derive(Default)]
pub(crate) struct SplitCache {
    /// Per queue: when read, and its current shards (`None`: not split).
    entries: Mutex<HashMap<String, Entry>>,
    /// The next shard of a job without a shard key.
    next: AtomicUsize,
}

impl SplitCache {
    fn get(&self, queue: &str) -> Option<Option<Arc<Vec<String>>>> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(queue)
            .filter(|(at, _)| at.elapsed() < TTL)
            .map(|(_, s)| s.clone())
    }

    fn put(&self, queue: &str, shards: Option<Arc<Vec<String>>>) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(queue.to_string(), (Instant::now(), shards));
    }
}

impl Client {
    /// The physical queue a job for `queue` goes to now: `queue` itself unless it is split,
    /// else shard `crc32(shard_key) % N`, or the next shard in turn without a key.
    pub(crate) async fn route(&self, queue: &str, shard_key: Option<&str>) -> Result<String> {
        let Some(shards) = self.shards_of(queue).await? else {
            return Ok(queue.to_string());
        };
        let i = match shard_key {
            Some(k) => crate::splits::shard_index(k.as_bytes(), shards.len()),
            None => self.splits.next.fetch_add(1, Ordering::Relaxed) % shards.len(),
        };
        Ok(shards[i].clone())
    }

    /// The current shards of `queue` (`None`: not split), from the cache or one `HGET`.
    async fn shards_of(&self, queue: &str) -> Result<Option<Arc<Vec<String>>>> {
        // A name that cannot be split (a shard's own name among them) is never looked up.
        if crate::splits::check_queue(queue).is_err() {
            return Ok(None);
        }
        if let Some(s) = self.splits.get(queue) {
            return Ok(s);
        }
        let r: redis::RedisResult<Option<Vec<u8>>> = redis::cmd("HGET")
            .arg(self.keys.splits())
            .arg(queue)
            .query_async(&mut self.con())
            .await;
        let shards = match r {
            Ok(v) => v
                .and_then(|v| crate::splits::Split::parse(&v))
                .map(|s| s.shards)
                .filter(|s| !s.is_empty())
                .map(Arc::new),
            // Not a hash: no queue is split.
            Err(e) if e.code() == Some("WRONGTYPE") => None,
            Err(e) => return Err(e.into()),
        };
        self.splits.put(queue, shards.clone());
        Ok(shards)
    }
}
