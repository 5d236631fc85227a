//! A spread namespace's concurrency limits on a class (`docs/cluster.md`): a job's class is
//! known only once a step has popped it, so its unit is taken after the pop, before its
//! handler runs, and the job waits in its slot (reserved, its worker record written) until one
//! is granted. No handler of the class runs without a unit: the limit is never exceeded.
//!
//! One [`ClassGate`] per class limit per process, held under the process's first slot id in
//! the limit's shares (crate::limits::spread, `limit_share.lua`). Taking a unit is one share
//! call (written as what the process holds then, so a lost reply is corrected by the next
//! call); a unit comes back when the handler ends, locally at once (a slot of the process
//! waiting for one gets it at its next call) and in Redis with the next share call or the
//! flusher's within [`FLUSH_EVERY`](super::step::spread::FLUSH_EVERY). A slot refused a unit
//! asks again when one of the process comes back, or after [`RETRY`](super::step::gate::RETRY).

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
    /// Before the handler of a job of `class` taken from `queue` runs: the unit of the class
    /// limit covering it, once granted (`None`: no limit covers it).
    pub(crate) async fn admit(&self, class: &str, queue: &str) -> Option<Unit> {
        let g = self.gates.iter().find(|g| g.covers(class, queue))?;
        let mut con = self.con.clone();
        Some(g.acquire(&mut con).await)
    }
}
