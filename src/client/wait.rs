//! Waiting for a tracked job to finish without polling: a dedicated RESP3 connection with
//! `CLIENT TRACKING ON` (Redis's default mode) reads the job's record keys (`TYPE`: resq's own
//! and resque-status's) and `<ns>:workers` before each read of the record, so Redis tells it of
//! the next change, and the record is read again only then (a record saying `working` whose
//! worker left `<ns>:workers` reads `failed`). Not `BCAST`: while a broadcast client is
//! connected, Redis compares every key any client writes with its prefixes, a cost the whole
//! fleet would pay for each waiter. Where tracking is not available (Redis Cluster, a client
//! built over a bare connection) the record is read with a back-off from 50 ms to 1 s.

use super::Client;
use crate::error::Result;
use crate::jobs::{JobId, JobStatus};
use std::time::{Duration, Instant};

impl Client {
    /// Waits up to `timeout` for job `id` to finish. Returns its record: final, or as it
    /// stood at the timeout; `None` when there is no such record (never tracked, or expired).
    ///
    /// The timeout holds while Redis is slow or away: a read that has not answered by then
    /// ends the wait with the record as last read (a first read has at least a second), and a
    /// connection that drops (a restart, a failover) is read again with a back-off until the
    /// timeout. An error that needs a repair (a key of the wrong type, a record whose state
    /// cannot be read: [`JobStatus::state_readable`]) ends it at once.
    pub async fn wait(&self, id: &JobId, timeout: Duration) -> Result<Option<JobStatus>> {
        // A timeout too long to represent waits "forever" (a year).
        let deadline = Instant::now()
            .checked_add(timeout)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 3600));
        // `<ns>:workers` too: a record saying working reads failed once its worker is gone.
        let watched = [
            self.keys().job_record(id.as_str()),
            self.keys().resque_status(id.as_str()),
            self.keys().workers(),
        ];
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut watch = match self.endpoint() {
            Some(e) => tokio::time::timeout(
                deadline.saturating_duration_since(Instant::now()),
                e.tracking(tx),
            )
            .await
            .ok()
            .and_then(|t| t.ok().flatten()),
            None => None,
        };
        let mut backoff = Duration::from_millis(50);
        let mut last: Option<JobStatus> = None;
        loop {
            if let Some(con) = watch.as_mut() {
                // Read on the watching connection before the record is read, so a change
                // between the two is not missed.
                let left = deadline.saturating_duration_since(Instant::now());
                let armed =
                    tokio::time::timeout(left, crate::conn::track_reads(con, &watched)).await;
                if !matches!(armed, Ok(Ok(_))) {
                    watch = None;
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let budget = if last.is_none() {
                left.max(Duration::from_secs(1))
            } else {
                left
            };
            match tokio::time::timeout(budget, self.status(id)).await {
                Ok(Ok(None)) => return Ok(None),
                Ok(Ok(Some(s))) => {
                    // A state that cannot be read needs a repair: no change would end the wait.
                    if s.state.is_final() || !s.state_readable() {
                        return Ok(Some(s));
                    }
                    last = Some(s);
                }
                Ok(Err(crate::Error::Redis(e)))
                    if crate::conn::errors::classify(&e)
                        != crate::conn::errors::Class::Permanent =>
                {
                    // Away for now (a restart, a failover): read again until the timeout.
                    if Instant::now() >= deadline {
                        return match last {
                            Some(s) => Ok(Some(s)),
                            None => Err(crate::Error::Redis(e)),
                        };
                    }
                    watch = None;
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => {
                    return match last {
                        Some(s) => Ok(Some(s)),
                        None => Err(crate::Error::Redis(redis::RedisError::from(
                            std::io::Error::new(
                                std::io::ErrorKind::TimedOut,
                                format!("no answer from redis for the record of job {id}"),
                            ),
                        ))),
                    }
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(last);
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
