//! The heartbeat: every slot's `<ns>:workers:heartbeat` field, refreshed from Redis `TIME`
//! (and, on the same tick, the stat totals' history sample for the dashboard).
//!
//! It runs on its own OS thread with its own runtime and connection, so job code that hogs
//! the async threads cannot starve it. Each tick is two round trips for all slots together
//! (`TIME`, then `HSET` of every field plus `SMISMEMBER`), and a slot whose id someone removed
//! (a pruner) is registered again, its running job's record rewritten first (so whoever sees
//! the id registered again sees its job too). On a spread cluster namespace the heartbeat hash
//! and `<ns>:workers` are in different slots: the `HSET` and the `SMISMEMBER` are then sent one
//! after the other, each to its slot's node (the cluster connection splits the pipeline), and
//! registering again is one call per slot ([`super::lifecycle`]).
//!
//! Redis outages: a failed tick is retried with capped back-off (at most one interval apart)
//! until Redis answers again; the outage is logged once for the whole process (see
//! [`crate::conn::outage`]). Stopping never waits for Redis.

use super::slot::SlotState;
use crate::conn::{outage, Backoff};
use crate::keys::Keys;
use crate::wire::time;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What the heartbeat thread needs.
pub(crate) struct Heartbeat {
    /// Where Redis is.
    pub endpoint: crate::conn::Endpoint,
    /// Key names.
    pub keys: Keys,
    /// The slots' ids and states.
    pub slots: Vec<Arc<SlotState>>,
    /// Period.
    pub interval: Duration,
    /// When the process registered.
    pub started: DateTime<Utc>,
    /// Becomes true when the thread must stop.
    pub stop: watch::Receiver<bool>,
}

impl Heartbeat {
    /// Starts the thread; it ends when `stop` turns true.
    pub(crate) fn spawn(self) -> std::io::Result<std::thread::JoinHandle<()>> {
        std::thread::Builder::new()
            .name("resq-heartbeat".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::error!(error = %e, "heartbeat runtime failed to start");
                        return;
                    }
                };
                rt.block_on(self.run());
            })
    }

    async fn run(self) {
        let mut con = None;
        let mut backoff = Backoff::new(self.interval.min(Duration::from_secs(5)));
        let mut wait = self.interval;
        let mut failures = 0u32;
        let mut streak = outage::Streak::default();
        let mut stop = self.stop.clone();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            let result = tokio::select! {
                r = self.tick(&mut con) => r,
                _ = stop.wait_for(|s| *s) => return,
            };
            match result {
                Ok(()) => {
                    streak.succeeded("heartbeat");
                    failures = 0;
                    backoff = Backoff::new(self.interval.min(Duration::from_secs(5)));
                    wait = self.interval;
                }
                Err(e) => {
                    // The first failure after an outage elsewhere is usually this thread's own
                    // connection noticing late; it is only an outage if the retry fails too.
                    failures += 1;
                    if failures >= 2 {
                        streak.failed("heartbeat", &e);
                    }
                    // Try again soon rather than a whole interval later: the heartbeat is what
                    // keeps pruners (Ruby's and ours) away from these slots.
                    wait = backoff.next_delay().min(self.interval);
                }
            }
        }
    }

    /// Connects when needed, then beats.
    async fn tick(&self, con: &mut Option<crate::conn::Conn>) -> crate::Result<()> {
        if con.is_none() {
            *con = Some(self.endpoint.connect().await?);
        }
        match con.as_mut() {
            Some(c) => Ok(self.beat(c).await?),
            None => Ok(()),
        }
    }

    /// One tick: write every heartbeat, re-register ids that vanished, and sample the stat
    /// totals for the dashboard's history graphs ([`crate::admin::history`]; one sample per
    /// minute and per hour for the whole namespace, whoever takes it first).
    pub(crate) async fn beat(&self, con: &mut crate::conn::Conn) -> redis::RedisResult<()> {
        self.beat_slots(con).await?;
        if let Err(e) = crate::admin::history::sample(con, &self.keys).await {
            tracing::debug!(error = %e, "could not sample the stat history");
        }
        Ok(())
    }

    /// Writes every heartbeat, then re-registers ids that vanished.
    async fn beat_slots(&self, con: &mut crate::conn::Conn) -> redis::RedisResult<()> {
        let now = crate::conn::redis_time(con).await?;
        let hb = time::heartbeat(now);
        let ids: Vec<String> = self.slots.iter().map(|s| s.id.to_string()).collect();
        let fields: Vec<(&str, &str)> = ids.iter().map(|id| (id.as_str(), hb.as_str())).collect();
        let (_, present): ((), Vec<bool>) = redis::pipe()
            .hset_multiple(self.keys.heartbeats(), &fields)
            .ignore()
            .cmd("SMISMEMBER")
            .arg(self.keys.workers())
            .arg(&ids)
            .query_async(con)
            .await
            .map(|(p,): (Vec<bool>,)| ((), p))?;
        for (slot, here) in self.slots.iter().zip(present) {
            if here {
                continue;
            }
            tracing::warn!(worker = %slot.id, "worker id was removed by someone else; registering it again");
            // Hold the slot's record lock so a finishing job cannot race the rewrite.
            let record = slot.record.lock().await;
            // The record first: whoever sees the id registered again also sees its job.
            if let Some(r) = record.as_ref() {
                let _: () = redis::cmd("SET")
                    .arg(self.keys.worker(&slot.id))
                    .arg(r.as_slice())
                    .query_async(con)
                    .await?;
            }
            let id = [slot.id.to_string()];
            super::lifecycle::reregister(con, &self.keys, &id, self.started).await?;
        }
        Ok(())
    }
}
