//! A spread namespace's concurrency limits on a class (`docs/cluster.md`): a job's class is
//! known only once a step has popped it, so its unit is taken after the pop, before its
//! handler runs, and the job waits in its slot (reserved, its worker record written) until one
//! is granted. No handler of the class runs without a unit: the limit is never exceeded.
//!
//! One [`ClassGate`] per class limit per process, held under the process's first slot id in
//! the limit's shares (crate::limits::spread, `limit_share.lua`). The units are asked for by
//! the batcher right after the step call that reserved the jobs: one share call per class limit
//! for all the call's jobs of its class ([`ClassGates::after_call`]; written as what the process
//! holds then, so a lost reply is corrected by the next call). A job granted one runs at once;
//! a job refused one waits in its slot, asking again (one share call) when a unit of the
//! process comes back, or after [`RETRY`](super::step::gate::RETRY). A unit comes back when the
//! handler ends, locally at once and in Redis with the next share call or the flusher's within
//! [`FLUSH_EVERY`](super::step::spread::FLUSH_EVERY).

use crate::keys::Keys;
use crate::limits::Limit;
use redis::aio::ConnectionLike;
use redis::RedisResult;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{Mutex, Notify};

/// One process's share of one class limit.
#[derive(Debug)]
pub(crate) struct ClassGate {
    keys: Keys,
    /// The limit.
    limit: Limit,
    /// The holder: the process's first slot id.
    holder: String,
    /// Units its handlers hold, as last written (less what came back since: `returned`).
    held: Mutex<usize>,
    /// Units that came back since the last share call.
    returned: AtomicUsize,
    /// Units came back and are not yet written.
    dirty: AtomicBool,
    /// A unit came back.
    freed: Notify,
    /// Slots whose job was granted a unit by [`ClassGates::after_call`], not yet taken by
    /// its handler.
    granted: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// A unit a handler holds; it comes back when dropped (the handler ended, or was dropped).
#[derive(Debug)]
pub(crate) struct Unit(Arc<ClassGate>);

impl Drop for Unit {
    fn drop(&mut self) {
        self.0.returned.fetch_add(1, Ordering::SeqCst);
        self.0.dirty.store(true, Ordering::SeqCst);
        self.0.freed.notify_waiters();
    }
}

impl ClassGate {
    /// The process's share of `limit` (a concurrency limit on a class), held as `holder`.
    pub(crate) fn new(keys: &Keys, limit: &Limit, holder: &str) -> Self {
        ClassGate {
            keys: keys.clone(),
            limit: limit.clone(),
            holder: holder.to_string(),
            held: Mutex::new(0),
            returned: AtomicUsize::new(0),
            dirty: AtomicBool::new(false),
            freed: Notify::new(),
            granted: Default::default(),
        }
    }

    /// The holder (the process's first slot id).
    pub(crate) fn holder(&self) -> &str {
        &self.holder
    }

    /// Whether a job of `class` taken from `queue` is under this limit.
    pub(crate) fn covers(&self, class: &str, queue: &str) -> bool {
        self.limit.class.as_deref() == Some(class)
            && self
                .limit
                .queue
                .as_deref()
                .is_none_or(|q| q == queue || crate::splits::is_shard_of(queue, q))
    }

    /// One share call: what the process holds now, plus `want` more if they fit.
    async fn call<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        held: &mut usize,
        want: usize,
    ) -> RedisResult<usize> {
        *held = held.saturating_sub(self.returned.swap(0, Ordering::SeqCst));
        self.dirty.store(false, Ordering::SeqCst);
        let r = crate::limits::spread::share(
            con,
            &self.keys,
            &self.limit.name,
            &self.holder,
            *held,
            want,
            crate::limits::spread::capacity(&self.limit),
        )
        .await;
        match &r {
            Ok(g) => *held += g,
            // Applied or not: the next call writes what the process holds.
            Err(_) => self.dirty.store(true, Ordering::SeqCst),
        }
        r
    }

    /// Waits until a unit is granted (see the module doc).
    pub(crate) async fn acquire<C: ConnectionLike + Send>(self: &Arc<Self>, con: &mut C) -> Unit {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut held = self.held.lock().await;
                match self.call(con, &mut held, 1).await {
                    Ok(1) => return Unit(self.clone()),
                    Ok(_) => {}
                    Err(e) => {
                        tracing::debug!(error = %e, limit = %self.limit.name, "could not take a unit of a class limit; asking again")
                    }
                }
            }
            let _ = tokio::time::timeout(super::step::gate::RETRY, freed).await;
        }
    }

    /// The unit granted to slot `slot`'s job after its step call, if any.
    fn take_granted(self: &Arc<Self>, slot: &str) -> Option<Unit> {
        let mut granted = self.granted.lock().unwrap_or_else(|p| p.into_inner());
        granted.remove(slot).then(|| Unit(self.clone()))
    }

    /// Asks for a unit for each of `slots` (their jobs just reserved, of this limit) in one
    /// share call; those granted wait for their handlers. A unit a slot was granted before and
    /// did not use (its job never reached a handler) comes back.
    async fn grant<C: ConnectionLike + Send>(&self, con: &mut C, slots: &[&str]) {
        {
            let mut granted = self.granted.lock().unwrap_or_else(|p| p.into_inner());
            for s in slots {
                if granted.remove(*s) {
                    self.returned.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        let mut held = self.held.lock().await;
        let g = match self.call(con, &mut held, slots.len()).await {
            Ok(g) => g,
            Err(e) => {
                tracing::debug!(error = %e, limit = %self.limit.name, "could not take units of a class limit; the jobs ask again");
                0
            }
        };
        let mut granted = self.granted.lock().unwrap_or_else(|p| p.into_inner());
        for s in slots.iter().take(g) {
            granted.insert(s.to_string());
        }
    }

    /// Writes what the process holds, when units came back since the last write.
    pub(crate) async fn flush<C: ConnectionLike + Send>(&self, con: &mut C) {
        if !self.dirty.load(Ordering::SeqCst) {
            return;
        }
        let mut held = self.held.lock().await;
        if let Err(e) = self.call(con, &mut held, 0).await {
            tracing::debug!(error = %e, limit = %self.limit.name, "could not give units of a class limit back; trying again");
        }
    }

    /// On the way out, once every slot has stopped: the process's share goes.
    pub(crate) async fn leave<C: ConnectionLike + Send>(&self, con: &mut C) -> RedisResult<()> {
        let mut held = self.held.lock().await;
        *held = 0;
        self.returned.store(0, Ordering::SeqCst);
        self.granted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        crate::limits::spread::share(con, &self.keys, &self.limit.name, &self.holder, 0, 0, 0)
            .await
            .map(|_| ())
    }
}

/// A process's class gates, and the connection their share calls go on.
pub(crate) struct ClassGates {
    /// The gates.
    pub gates: Vec<Arc<ClassGate>>,
    /// The process's shared connection.
    pub con: crate::conn::Conn,
}

impl ClassGates {
    /// Before the handler of slot `slot`'s job of `class` taken from `queue` runs: the unit of
    /// the class limit covering it — the one granted after its step call, or one asked for
    /// now, once granted (`None`: no limit covers it).
    pub(crate) async fn admit(&self, slot: &str, class: &str, queue: &str) -> Option<Unit> {
        let g = self.gates.iter().find(|g| g.covers(class, queue))?;
        if let Some(u) = g.take_granted(slot) {
            return Some(u);
        }
        let mut con = self.con.clone();
        Some(g.acquire(&mut con).await)
    }

    /// Slot `slot`'s job does not reach a handler (its record could not be read): a unit
    /// granted to it goes back.
    pub(crate) fn forget(&self, slot: &str) {
        for g in &self.gates {
            drop(g.take_granted(slot));
        }
    }

    /// After a step call of `batch` answered `replies`: units for the jobs it reserved whose
    /// class a limit covers, one share call per limit.
    pub(crate) async fn after_call<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        batch: &[super::step::StepRequest],
        replies: &[super::step::StepReply],
    ) {
        /// What a worker record says of its job (the rest is not read).
        #[derive(serde::Deserialize)]
        struct Record {
            queue: String,
            payload: Payload,
        }
        #[derive(serde::Deserialize)]
        struct Payload {
            class: String,
        }
        let mut by_gate: Vec<Vec<&str>> = vec![Vec::new(); self.gates.len()];
        for (r, reply) in batch.iter().zip(replies) {
            let super::step::Reply::Job(record, _) = &reply.reply else {
                continue;
            };
            let Ok(rec) = serde_json::from_slice::<Record>(record) else {
                continue; // the handler asks for its unit itself, if it runs at all
            };
            if let Some(i) = self
                .gates
                .iter()
                .position(|g| g.covers(&rec.payload.class, &rec.queue))
            {
                by_gate[i].push(r.stepper.id());
            }
        }
        for (g, slots) in self.gates.iter().zip(&by_gate) {
            if !slots.is_empty() {
                g.grant(con, slots).await;
            }
        }
    }
}
