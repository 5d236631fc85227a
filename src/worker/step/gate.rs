//! A spread namespace's concurrency limit on one group of slots (`docs/cluster.md`): units
//! taken before the step call that reserves with them, given back once unused or once their
//! job has ended (crate::limits::spread holds the layout and the share call).
//!
//! The group knows which of its slots hold a unit: one granted for a reserve whose reply is
//! not known yet (`Pending`), or one whose job runs (`Job`, named by its record). Each share
//! call writes the number it holds, not a change, so a call whose reply was lost (applied or
//! not) is corrected by the next one; meanwhile Redis may count more than the group holds,
//! never less. Around a step call ([`Gate::admit`], [`Gate::settle`]):
//!
//! 1. the units of the jobs the call completes are given back (their handlers have returned;
//!    a completion sent again after a failed call gives back nothing more);
//! 2. the slots that reserve and hold no unit ask for one each, in one share call; those
//!    beyond what was granted do not reserve in this call, and are told [`Reply::Limited`];
//! 3. after the call, a granted unit whose slot got no job is given back at once (one more
//!    share call, only when the queue ran dry); a call that failed keeps its units pending
//!    (the slot sends it again and gets its job back if it was reserved).
//!
//! Units given back without a reserve in the same call are written by the flusher within
//! [`FLUSH_EVERY`](super::spread::FLUSH_EVERY) (or by the group's next share call): nothing
//! more on a job's own path. A slot told [`Reply::Limited`] asks again when a unit of its group
//! comes back, or after [`RETRY`] (units of other processes).

use super::{Completion, JobRef, Reply, StepReply, StepRequest};
use crate::keys::Keys;
use redis::aio::ConnectionLike;
use redis::RedisResult;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::{Mutex, Notify};

/// How long a slot the limit refused waits before asking again (when no unit of its own
/// group came back meanwhile).
pub(crate) const RETRY: Duration = Duration::from_millis(100);

/// What a slot's unit is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// Granted for a reserve whose reply is not known.
    Pending,
    /// The job whose record hashes to this runs.
    Job(u64),
}

/// One group's share of one concurrency limit.
#[derive(Debug)]
pub(crate) struct Gate {
    keys: Keys,
    /// The limit's name.
    name: String,
    /// Its capacity.
    capacity: u32,
    /// The holder: the group's first slot id.
    holder: String,
    /// Slot id → its unit.
    held: Mutex<HashMap<String, Hold>>,
    /// Units were given back locally and not yet written.
    dirty: AtomicBool,
    /// A unit of the group came back.
    freed: Notify,
}

fn record_hash(record: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    record.hash(&mut h);
    h.finish()
}

impl Gate {
    /// The share of `limit` of the group whose first slot is `holder`.
    pub(crate) fn new(keys: &Keys, limit: &crate::limits::Limit, holder: &str) -> Self {
        Gate {
            keys: keys.clone(),
            name: limit.name.clone(),
            capacity: crate::limits::spread::capacity(limit),
            holder: holder.to_string(),
            held: Mutex::new(HashMap::new()),
            dirty: AtomicBool::new(false),
            freed: Notify::new(),
        }
    }

    /// The holder: the group's first slot id.
    pub(crate) fn holder(&self) -> &str {
        &self.holder
    }

    /// Before a call of `batch` (`polls`: the call polls a queue): gives back the units of the
    /// jobs it completes and takes one for each reserving slot that holds none. Returns, per
    /// request, whether the limit refused it (its `reserve` is then cleared).
    pub(crate) async fn admit<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        batch: &mut [StepRequest],
        polls: bool,
    ) -> Vec<bool> {
        let mut refused = vec![false; batch.len()];
        let mut held = self.held.lock().await;
        let mut gave = false;
        for r in batch.iter() {
            let ended = match &r.completion {
                Some(Completion::Success { job, .. } | Completion::Failure { job, .. }) => job,
                Some(Completion::Extended(e)) => &e.job,
                None => continue,
            };
            let id = r.stepper.id();
            if let (Some(Hold::Job(h)), JobRef::Record(rec)) = (held.get(id), ended) {
                if *h == record_hash(rec) {
                    held.remove(id);
                    gave = true;
                }
            }
        }
        if gave {
            self.dirty.store(true, Ordering::SeqCst);
            self.freed.notify_waiters();
        }
        let asking: Vec<usize> = batch
            .iter()
            .enumerate()
            .filter(|(_, r)| r.reserve && !held.contains_key(r.stepper.id()))
            .map(|(i, _)| i)
            .collect();
        if asking.is_empty() || !polls {
            return refused;
        }
        let granted = match crate::limits::spread::share(
            con,
            &self.keys,
            &self.name,
            &self.holder,
            held.len(),
            asking.len(),
            self.capacity,
        )
        .await
        {
            Ok(g) => {
                self.dirty.store(false, Ordering::SeqCst);
                g
            }
            Err(e) => {
                // Applied or not: the next share call writes what the group holds.
                self.dirty.store(true, Ordering::SeqCst);
                tracing::debug!(error = %e, limit = %self.name, "could not take units of a limit; asking again");
                0
            }
        };
        for (k, &i) in asking.iter().enumerate() {
            if k < granted {
                held.insert(batch[i].stepper.id().to_string(), Hold::Pending);
            } else {
                batch[i].reserve = false;
                refused[i] = true;
            }
        }
        refused
    }

    /// After the call of `batch` answered `replies`: a pending unit becomes its job's, or
    /// goes back (written at once).
    pub(crate) async fn settle<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        batch: &[StepRequest],
        replies: &[StepReply],
    ) {
        let mut held = self.held.lock().await;
        let mut gave = false;
        for (r, reply) in batch.iter().zip(replies) {
            let id = r.stepper.id();
            if held.get(id) != Some(&Hold::Pending) {
                continue;
            }
            match &reply.reply {
                Reply::Job(record, _) => {
                    held.insert(id.to_string(), Hold::Job(record_hash(record)));
                }
                _ => {
                    held.remove(id);
                    gave = true;
                }
            }
        }
        if gave {
            self.freed.notify_waiters();
            self.write(con, &held).await;
        }
    }

    /// Writes what the group holds, when units were given back since the last write.
    pub(crate) async fn flush<C: ConnectionLike + Send>(&self, con: &mut C) {
        if !self.dirty.load(Ordering::SeqCst) {
            return;
        }
        let held = self.held.lock().await;
        self.write(con, &held).await;
    }

    /// On the way out, once the group's slots have stopped: its share goes (units still
    /// pending or held by a job left for pruning included: the pruner records those jobs, no
    /// handler runs them any more).
    pub(crate) async fn leave<C: ConnectionLike + Send>(&self, con: &mut C) -> RedisResult<()> {
        let mut held = self.held.lock().await;
        held.clear();
        crate::limits::spread::share(con, &self.keys, &self.name, &self.holder, 0, 0, 0)
            .await
            .map(|_| ())
    }

    async fn write<C: ConnectionLike + Send>(&self, con: &mut C, held: &HashMap<String, Hold>) {
        self.dirty.store(false, Ordering::SeqCst);
        let r = crate::limits::spread::share(
            con,
            &self.keys,
            &self.name,
            &self.holder,
            held.len(),
            0,
            self.capacity,
        )
        .await;
        if let Err(e) = r {
            self.dirty.store(true, Ordering::SeqCst);
            tracing::debug!(error = %e, limit = %self.name, "could not give units of a limit back; trying again");
        }
    }

    /// Waits until a unit of the group comes back, or [`RETRY`].
    pub(crate) async fn wait(&self) {
        let _ = tokio::time::timeout(RETRY, self.freed.notified()).await;
    }
}
