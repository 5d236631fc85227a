//! Waiting for a tracked job to finish without polling: a dedicated RESP3 connection with
//! `CLIENT TRACKING ON` (Redis's default mode) reads the job's record key (`TYPE`) before each
//! read of the record, so Redis tells it of the next change, and the record is read again only
//! then. (Not `BCAST`: while a broadcast client is connected, Redis compares every key any
//! client writes with its prefixes, a cost the whole fleet would pay for each waiter.) Where
//! tracking is not available (Redis Cluster, a client built over a bare connection) the record
//! is read with a back-off from 50 ms to 1 s.

use super::{JobId, JobStatus};
use crate::client::Client;
use crate::error::Result;
use std::time::{Duration, Instant};

impl Client {
    /// Waits up to `timeout` for job `id` to finish. Returns its record: final, or as it
    /// stood at the timeout; `None` when there is no such record (never tracked, or expired).
    pub async fn wait(&self, id: &JobId, timeout: Duration) -> Result<Option<JobStatus>> {
        // A timeout too long to represent waits "forever" (a year).
        let deadline = Instant::now()
            .checked_add(timeout)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 3600));
        let key = self.keys().resque_status(id.as_str());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut watch = match self.endpoint() {
            Some(e) => e.tracking(tx).await.ok().flatten(),
            None => None,
        };
        let mut backoff = Duration::from_millis(50);
        loop {
            if let Some(con) = watch.as_mut() {
                // Read on the watching connection before the record is read, so a change
                // between the two is not missed.
                let armed = crate::conn::track_reads(con, std::slice::from_ref(&key)).await;
                if armed.is_err() {
                    watch = None;
                }
            }
            let status = self.status(id).await?;
            let Some(s) = status else { return Ok(None) };
            if s.state.is_final() {
                return Ok(Some(s));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Some(s));
            }
            if watch.is_some() {
                tokio::select! {
                    msg = rx.recv() => {
                        if msg.is_none() {
                            // The tracking connection is gone: read with a back-off from now on.
                            watch = None;
                        }
                    }
                    _ = tokio::time::sleep(left) => {}
                }
            } else {
                tokio::time::sleep(backoff.min(left)).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    }
}
