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
//! 1. the units of the jobs the call completes become spare (their handlers have returned; a
//!    completion sent again after a failed call frees nothing more);
//! 2. each slot that reserves and holds no unit takes a spare one, or, when there are too few,
//!    the group asks for the rest in one share call; those beyond what was granted do not
//!    reserve in this call, and are told [`Reply::Limited`];
//! 3. after the call, a granted unit whose slot got no job goes back at once (one share call,
//!    only when the queue had fewer jobs than slots asking), and the group's next call asks for
//!    one unit only until a job is found again (its other slots park as on an empty queue); a
//!    call that failed keeps its units pending (the slot sends it again and gets its job back
//!    if it was reserved).
//!
//! The units of ended jobs are spare: still counted in Redis, so a slot taking one again needs
//! no share call (a busy group whose slots end a job and reserve the next in the same call
//! sends none). The flusher gives the spare units back every [`FLUSH_EVERY`](super::spread::FLUSH_EVERY) (they
//! are held meanwhile: other processes may get less, never more). A slot told
//! [`Reply::Limited`] asks again when a unit of its group comes back, or after [`RETRY`]
//! (units of other processes).

use super::{Completion, JobRef, Reply, StepReply, StepRequest};
use crate::keys::Keys;
use redis::aio::ConnectionLike;
use redis::RedisResult;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
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

/// What a group holds, and what Redis counts for it.
#[derive(Debug, Default)]
struct Held {
    /// Slot id → its unit.
    slots: HashMap<String, Hold>,
    /// Units Redis counts for the group at least (what the last share call wrote, or, when
    /// its reply was lost, the least it may have written): never below `slots.len()`. The
    /// difference is spare: units of jobs that ended, or granted and not used, that slots of
    /// the group may take again without a share call until the flusher gives them back.
    written: usize,
    /// Redis may count more than `written` (a share call's reply was lost).
    unsure: bool,
    /// The last call found the queue empty: the next one asks for one unit only (a probe),
    /// its other reserving slots park as on an empty queue.
    probe: bool,
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
    /// What it holds.
    held: Mutex<Held>,
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
            held: Mutex::new(Held::default()),
            freed: Notify::new(),
        }
    }

    /// The holder: the group's first slot id.
    pub(crate) fn holder(&self) -> &str {
        &self.holder
    }

    /// Before a call of `batch` (`polls`: the call polls a queue): the units of the jobs it
    /// completes become spare, and each reserving slot that holds none takes one — a spare one,
    /// or one of those a share call grants. Returns, per request, whether the limit refused
    /// it (its `reserve` is then cleared), and the slots granted a unit now.
    pub(crate) async fn admit<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        batch: &mut [StepRequest],
        polls: bool,
    ) -> (Vec<bool>, Vec<String>) {
        let mut refused = vec![false; batch.len()];
        let mut now = Vec::new();
        let mut held = self.held.lock().await;
        let mut gave = false;
        for r in batch.iter() {
            let ended = match &r.completion {
                Some(Completion::Success { job, .. } | Completion::Failure { job, .. }) => job,
                Some(Completion::Extended(e)) => &e.job,
                None => continue,
            };
            let id = r.stepper.id();
            if let (Some(Hold::Job(h)), JobRef::Record(rec)) = (held.slots.get(id), ended) {
                if *h == record_hash(rec) {
                    held.slots.remove(id);
                    gave = true;
                }
            }
        }
        if gave {
            self.freed.notify_waiters();
        }
        let mut asking: Vec<usize> = batch
            .iter()
            .enumerate()
            .filter(|(_, r)| r.reserve && !held.slots.contains_key(r.stepper.id()))
            .map(|(i, _)| i)
            .collect();
        if asking.is_empty() || !polls {
            return (refused, now);
        }
        if held.probe && asking.len() > 1 {
            // (Answered "nothing" as from an empty queue: they park.)
            for &i in &asking[1..] {
                batch[i].reserve = false;
            }
            asking.truncate(1);
        }
        let spare = held.written - held.slots.len();
        let mut granted = spare.min(asking.len());
        if asking.len() > spare {
            match crate::limits::spread::share(
                con,
                &self.keys,
                &self.name,
                &self.holder,
                held.written,
                asking.len() - spare,
                self.capacity,
            )
            .await
            {
                Ok(g) => {
                    held.written += g;
                    held.unsure = false;
                    granted += g;
                }
                Err(e) => {
                    // Applied or not: Redis counts `written` at least; the next share call
                    // writes what the group holds.
                    held.unsure = true;
                    tracing::debug!(error = %e, limit = %self.name, "could not take units of a limit; asking again");
                }
            }
        }
        for (k, &i) in asking.iter().enumerate() {
            if k < granted {
                let id = batch[i].stepper.id().to_string();
                held.slots.insert(id.clone(), Hold::Pending);
                now.push(id);
            } else {
                batch[i].reserve = false;
                refused[i] = true;
            }
        }
        (refused, now)
    }

    /// The units granted to `slots` by [`Gate::admit`] for a call that is not made go back
    /// (spare; the flusher writes them).
    pub(crate) async fn unsent(&self, slots: &[String]) {
        let mut held = self.held.lock().await;
        for id in slots {
            if held.slots.get(id) == Some(&Hold::Pending) {
                held.slots.remove(id);
            }
        }
        self.freed.notify_waiters();
    }

    /// After the call of `batch` answered `replies`: a pending unit becomes its job's, or,
    /// when the queue had no job for it, goes back at once (one share call) and the next
    /// call probes the queue with one unit.
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
            // (A slot whose unit is pending from a call that failed, and that did not reserve
            // in this one, keeps it: that call may have reserved its job.)
            if !r.reserve || held.slots.get(id) != Some(&Hold::Pending) {
                continue;
            }
            match &reply.reply {
                Reply::Job(record, _) => {
                    held.slots
                        .insert(id.to_string(), Hold::Job(record_hash(record)));
                    held.probe = false;
                }
                _ => {
                    held.slots.remove(id);
                    gave = true;
                }
            }
        }
        if gave {
            held.probe = true;
            self.freed.notify_waiters();
            self.write(con, &mut held).await;
        }
    }

    /// Writes what the group holds (its spare units go back).
    async fn write<C: ConnectionLike + Send>(&self, con: &mut C, held: &mut Held) {
        let have = held.slots.len();
        match crate::limits::spread::share(
            con,
            &self.keys,
            &self.name,
            &self.holder,
            have,
            0,
            self.capacity,
        )
        .await
        {
            Ok(_) => held.unsure = false,
            Err(e) => {
                held.unsure = true;
                tracing::debug!(error = %e, limit = %self.name, "could not give units of a limit back; trying again");
            }
        }
        // Applied or not, Redis counts `have` at least.
        held.written = have;
    }

    /// Gives the spare units back (writes what the group holds), if any (the flusher's,
    /// every [`FLUSH_EVERY`](super::spread::FLUSH_EVERY)).
    pub(crate) async fn flush<C: ConnectionLike + Send>(&self, con: &mut C) {
        let mut held = self.held.lock().await;
        if held.written == held.slots.len() && !held.unsure {
            return;
        }
        self.write(con, &mut held).await;
    }

    /// On the way out, once the group's slots have stopped: its share goes (units still
    /// pending or held by a job left for pruning included: the pruner records those jobs, no
    /// handler runs them any more).
    pub(crate) async fn leave<C: ConnectionLike + Send>(&self, con: &mut C) -> RedisResult<()> {
        let mut held = self.held.lock().await;
        held.slots.clear();
        held.written = 0;
        crate::limits::spread::share(con, &self.keys, &self.name, &self.holder, 0, 0, 0)
            .await
            .map(|_| ())
    }

    /// Waits until a unit of the group comes back, or [`RETRY`].
    pub(crate) async fn wait(&self) {
        let _ = tokio::time::timeout(RETRY, self.freed.notified()).await;
    }
}
