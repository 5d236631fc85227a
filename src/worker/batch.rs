//! Step batching: the steps of all slots that are ready at the same moment go to Redis as one
//! step call.
//!
//! A slot hands its [`StepRequest`] (previous job's completion + "reserve the next") to the
//! process's [`Batcher`] and waits for its [`StepReply`]. Each of a few lanes takes the first
//! waiting request, adds every other request already waiting (up to [`MAX_BATCH`]), sends them as
//! one `FCALL` ([`call_step`]) and hands each slot its own reply, as the call read it. Nothing
//! waits for a batch to fill: a lone request is sent at once, and requests that arrive while a
//! call is in flight form the next one. Under load this turns 64
//! slots' round trips into a couple of calls, cutting Redis's per-call work and the process's
//! reads, writes and wake-ups; each slot's transition stays exactly what it was (its own
//! conditions, its own reply), and the whole call is atomic.
//!
//! A lane sends each call once: when it fails, every slot of the batch gets the error and
//! decides for itself what to do (retry with back-off, or give up at shutdown), so a failing
//! call never holds a lane, and a slot's refusal (a key of its own that is unusable) is its own
//! reply, not the batch's.
//!
//! The queues a call polls are those the process's wake-up state ([`super::fetch::Fetch`]) does
//! not know to be empty: with 1,000 queues of which one has jobs, a reserve costs one `LPOP`,
//! not a thousand. A batch of reserves only, all of whose queues are known empty, is answered
//! "nothing" without a call.

use super::fetch::Fetch;
use super::step::{call_step, Reply, StepReply, StepRequest};
use crate::conn::Conn;
use redis::RedisResult;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Mutex};

/// Most slots in one call (bounds how long one script keeps Redis busy: about 3 µs per job).
pub(crate) const MAX_BATCH: usize = 128;

/// Calls in flight at once per process (each lane sends one call at a time).
pub(crate) const LANES: usize = 2;

/// A request waiting to be sent, and where its slot waits for the reply.
type Waiting = (StepRequest, oneshot::Sender<RedisResult<StepReply>>);

/// The process's step sender; cheap to clone, one per slot.
#[derive(Clone)]
pub(crate) struct Batcher {
    tx: mpsc::UnboundedSender<Waiting>,
}

impl Batcher {
    /// Starts `lanes` lanes sending steps over `con`, polling queues as `fetch` says. They stop
    /// once every [`Batcher`] clone is dropped and the waiting steps are sent.
    pub(crate) fn start(
        con: Conn,
        lanes: usize,
        fetch: Arc<Fetch>,
        limits: Arc<crate::limits::cache::LimitsCache>,
        classes: Option<Arc<super::class_gate::ClassGates>>,
    ) -> Batcher {
        let (tx, rx) = mpsc::unbounded_channel();
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..lanes.max(1) {
            tokio::spawn(lane(
                con.clone(),
                rx.clone(),
                fetch.clone(),
                limits.clone(),
                classes.clone(),
            ));
        }
        Batcher { tx }
    }

    /// Sends one slot's request and waits for its reply, or the error of the call (sent once;
    /// the slot decides whether and when to send it again, which the function makes safe).
    pub(crate) async fn send(&self, req: StepRequest) -> RedisResult<StepReply> {
        let (reply, rx) = oneshot::channel();
        if self.tx.send((req, reply)).is_err() {
            return Err(gone());
        }
        rx.await.unwrap_or_else(|_| Err(gone()))
    }
}

/// The error of a step whose lane is gone (only while the runtime shuts down).
fn gone() -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Client, "step sender stopped"))
}

/// One lane: gathers waiting requests, sends them as one call, answers each.
async fn lane(
    con: Conn,
    rx: Arc<Mutex<mpsc::UnboundedReceiver<Waiting>>>,
    fetch: Arc<Fetch>,
    limits: Arc<crate::limits::cache::LimitsCache>,
    classes: Option<Arc<super::class_gate::ClassGates>>,
) {
    // Requests taken from the channel that belong to another queue list than the call being
    // made: they go in the lane's next calls, in order.
    let mut carry: std::collections::VecDeque<Waiting> = std::collections::VecDeque::new();
    loop {
        let mut batch: Vec<StepRequest> = Vec::new();
        let mut waiting = Vec::new();
        {
            // A lane holding carried requests never waits for the channel: the other lane may
            // hold it while it waits for a request, and the slots of the carried requests (all
            // that is left at the end of a drain) wait for this lane.
            let mut rx = match carry.is_empty() {
                true => Some(rx.lock().await),
                false => rx.try_lock().ok(),
            };
            let (first, tx) = match (carry.pop_front(), rx.as_mut()) {
                (Some(r), _) => r,
                (None, Some(rx)) => match rx.recv().await {
                    Some(r) => r,
                    None => return,
                },
                (None, None) => continue,
            };
            batch.push(first);
            waiting.push(tx);
            // One call polls one queue list (a spread namespace's queue, or a wildcard list
            // that just changed): requests of another wait, in order, for the next calls.
            let mut others = std::collections::VecDeque::new();
            for (r, tx) in carry.drain(..) {
                if batch.len() < MAX_BATCH && Arc::ptr_eq(&r.queues, &batch[0].queues) {
                    batch.push(r);
                    waiting.push(tx);
                } else {
                    others.push_back((r, tx));
                }
            }
            while let Some(rx) = rx.as_mut() {
                if batch.len() >= MAX_BATCH || others.len() >= MAX_BATCH {
                    break;
                }
                let Ok((r, tx)) = rx.try_recv() else { break };
                if Arc::ptr_eq(&r.queues, &batch[0].queues) {
                    batch.push(r);
                    waiting.push(tx);
                } else {
                    others.push_back((r, tx));
                }
            }
            carry = others;
        }
        // A request a slot made just before USR2 paused the process does not reserve: once
        // the pause is in force, no call leaves here that could take a job.
        // On a spread namespace `<ns>:pause-all-workers` is the fetch's to read (the step reads
        // nothing shared there): a paused process's reserves are answered "paused" here.
        let remote = fetch.spread_paused();
        let asked: Vec<bool> = batch.iter().map(|r| r.reserve).collect();
        if fetch.locally_paused() || remote {
            for r in &mut batch {
                r.reserve = false;
            }
        }
        let answer = |reply: StepReply, asked: bool| match (remote && asked, reply.reply) {
            (true, Reply::Empty) => StepReply {
                reply: Reply::Paused,
                ..reply
            },
            (_, r) => StepReply { reply: r, ..reply },
        };
        let reserving = batch.iter().any(|r| r.reserve);
        let full = batch.iter().any(|r| r.full);
        let completing = batch.iter().any(|r| r.completion.is_some());
        let mut pick = fetch.pick(&batch[0].queues, reserving, full, completing);
        let mut con = con.clone();
        // A spread namespace's limit on the queue: units first (step/gate.rs); a slot refused
        // one reserves nothing and is told so.
        let gate = batch[0].stepper.gate().cloned();
        let (limited, granted) = match &gate {
            Some(g) => {
                g.admit(&mut con, &mut batch, !pick.queues.queues.is_empty())
                    .await
            }
            None => (Vec::new(), Vec::new()),
        };
        let answer = |reply: StepReply, asked: bool, limited: bool| match limited {
            true => StepReply {
                reply: Reply::Limited,
                ..reply
            },
            false => answer(reply, asked),
        };
        if limited.contains(&true) {
            let reserving = batch.iter().any(|r| r.reserve);
            pick = fetch.pick(&batch[0].queues, reserving, full, completing);
        }
        let limited_at = |i: usize| limited.get(i).copied().unwrap_or(false);
        if pick.nothing_to_do(&batch) || (gate.is_some() && nothing_left(&batch)) {
            if let Some(g) = &gate {
                // Units granted for reserves no call makes (the queues' pick changed) go back.
                g.unsent(&granted).await;
            }
            for (i, (tx, asked)) in waiting.into_iter().zip(asked).enumerate() {
                let _ = tx.send(Ok(answer(StepReply::empty(false), asked, limited_at(i))));
            }
            continue;
        }
        let version = limits.version();
        let json = limits.json();
        match call_step(&mut con, &pick.queues, &batch, &json).await {
            Ok(out) => {
                if let Some(g) = &gate {
                    g.settle(&mut con, &batch, &out.replies).await;
                }
                // A spread namespace's class limits: units for the jobs reserved, per call.
                if let Some(c) = &classes {
                    c.after_call(&mut con, &batch, &out.replies).await;
                }
                // A queue a full limit closed, found so with limits replaced since (raised or
                // cleared while the call was on its way), may be open: it is not taken as
                // closed.
                fetch.found_empty(&pick, &out.found, limits.version() != version);
                for p in &out.tracking_problems {
                    crate::jobs::report_problem(p);
                }
                if let Some(due) = out.release_due {
                    limits.note_due(due);
                }
                for (i, ((tx, reply), asked)) in
                    waiting.into_iter().zip(out.replies).zip(asked).enumerate()
                {
                    // A slot that stopped waiting (its task was cancelled) simply misses its
                    // reply; its record stays in Redis for the pruner, as after a crash.
                    let _ = tx.send(Ok(answer(reply, asked, limited_at(i))));
                }
            }
            Err(e) => {
                for tx in waiting {
                    let _ = tx.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Whether a batch has neither a reserve nor a completion left (every slot of it refused by a
/// spread limit): no call.
fn nothing_left(batch: &[StepRequest]) -> bool {
    batch.iter().all(|r| !r.reserve && r.completion.is_none())
}

impl super::fetch::Pick {
    /// Whether the batch can be answered "nothing" without a call: no completion to write and
    /// no queue that may hold a job.
    fn nothing_to_do(&self, batch: &[StepRequest]) -> bool {
        self.queues.queues.is_empty() && batch.iter().all(|r| r.completion.is_none())
    }
}
