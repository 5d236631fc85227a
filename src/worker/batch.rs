//! Step batching: the steps of all slots that are ready at the same moment go to Redis as one
//! step call.
//!
//! A slot hands its step (previous job's completion + "reserve the next") to the process's
//! [`Batcher`] and waits for its reply. Each of a few lanes takes the first waiting step, adds
//! every other step already waiting (up to [`MAX_BATCH`]), sends them as one `FCALL` and hands
//! each slot its own reply. Nothing waits for a batch to fill: a lone step is sent at once, and
//! steps that arrive while a call is in flight form the next one. Under load this turns 64
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
use super::step::{step_batch, Completion, QueueKeys, Reply, StepItem, Stepper};
use crate::conn::Conn;
use redis::RedisResult;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Mutex};

/// Most slots in one call (bounds how long one script keeps Redis busy: about 3 µs per job).
pub(crate) const MAX_BATCH: usize = 128;

/// Calls in flight at once per process (each lane sends one call at a time).
pub(crate) const LANES: usize = 2;

/// One slot's step, waiting to be sent.
struct Request {
    stepper: Arc<Stepper>,
    completion: Option<Completion>,
    reserve: bool,
    limited: bool,
    /// Poll every queue, whatever the wake-up state says (the periodic fallback).
    full: bool,
    queues: Arc<QueueKeys>,
    reply: oneshot::Sender<RedisResult<Answer>>,
}

/// What a slot's step came back with.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    /// The reply.
    pub reply: Reply,
    /// Whether the completion was applied by this call.
    pub applied: bool,
    /// Whether the call reserved under limits (a job it gave holds shares until it ends).
    pub limited: bool,
}

/// The process's step sender; cheap to clone, one per slot.
#[derive(Clone)]
pub(crate) struct Batcher {
    tx: mpsc::UnboundedSender<Request>,
}

/// One slot's step, as handed to [`Batcher::step`].
pub(crate) struct StepRequest<'a> {
    /// The slot's stepper.
    pub stepper: &'a Arc<Stepper>,
    /// How its previous job ended (an extended completion must have been applied already).
    pub completion: Option<&'a Completion>,
    /// Whether to reserve a next job.
    pub reserve: bool,
    /// Whether the job it completes was reserved under limits.
    pub limited: bool,
    /// Poll every queue of `queues`, not only those not known to be empty.
    pub full: bool,
    /// The slot's queues.
    pub queues: Arc<QueueKeys>,
}

impl Batcher {
    /// Starts `lanes` lanes sending steps over `con`, polling queues as `fetch` says. They stop
    /// once every [`Batcher`] clone is dropped and the waiting steps are sent.
    pub(crate) fn start(
        con: Conn,
        lanes: usize,
        fetch: Arc<Fetch>,
        limits: Arc<crate::limits::cache::LimitsCache>,
    ) -> Batcher {
        let (tx, rx) = mpsc::unbounded_channel();
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..lanes.max(1) {
            tokio::spawn(lane(con.clone(), rx.clone(), fetch.clone(), limits.clone()));
        }
        Batcher { tx }
    }

    /// Sends one slot's step and waits for its answer, or the error of the call (sent once; the slot decides whether and
    /// when to send it again, which the script makes safe).
    pub(crate) async fn step(&self, req: StepRequest<'_>) -> RedisResult<Answer> {
        let (reply, rx) = oneshot::channel();
        let req = Request {
            stepper: req.stepper.clone(),
            completion: req.completion.cloned(),
            reserve: req.reserve,
            limited: req.limited,
            full: req.full,
            queues: req.queues,
            reply,
        };
        if self.tx.send(req).is_err() {
            return Err(gone());
        }
        rx.await.unwrap_or_else(|_| Err(gone()))
    }
}

/// The error of a step whose lane is gone (only while the runtime shuts down).
fn gone() -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Client, "step sender stopped"))
}

/// One lane: gathers waiting steps, sends them as one call, answers each.
async fn lane(
    con: Conn,
    rx: Arc<Mutex<mpsc::UnboundedReceiver<Request>>>,
    fetch: Arc<Fetch>,
    limits: Arc<crate::limits::cache::LimitsCache>,
) {
    let mut carry: Option<Request> = None;
    loop {
        let mut batch = Vec::new();
        {
            let mut rx = rx.lock().await;
            let first = match carry.take() {
                Some(r) => r,
                None => match rx.recv().await {
                    Some(r) => r,
                    None => return,
                },
            };
            batch.push(first);
            while batch.len() < MAX_BATCH {
                let Ok(r) = rx.try_recv() else { break };
                // One call polls one queue list; a step made with another list (a wildcard
                // list just changed) starts the next call.
                if Arc::ptr_eq(&r.queues, &batch[0].queues) {
                    batch.push(r);
                } else {
                    carry = Some(r);
                    break;
                }
            }
        }
        // A step a slot asked for just before USR2 paused the process does not reserve: once
        // the pause is in force, no call leaves here that could take a job.
        if fetch.locally_paused() {
            for r in &mut batch {
                r.reserve = false;
            }
        }
        let reserving = batch.iter().any(|r| r.reserve);
        let full = batch.iter().any(|r| r.full);
        let completing = batch.iter().any(|r| r.completion.is_some());
        let pick = fetch.pick(&batch[0].queues, reserving, full, completing);
        if pick.nothing_to_do(&batch) {
            for req in batch {
                let _ = req.reply.send(Ok(Answer {
                    reply: Reply::Empty,
                    applied: false,
                    limited: false,
                }));
            }
            continue;
        }
        let version = limits.version();
        let json = limits.json();
        let result = {
            let items: Vec<StepItem<'_>> = batch
                .iter()
                .map(|r| StepItem {
                    stepper: &r.stepper,
                    completion: r.completion.as_ref(),
                    reserve: r.reserve,
                    limited: r.limited,
                })
                .collect();
            let mut con = con.clone();
            step_batch(&mut con, &pick.queues, &items, &json).await
        };
        let limited = !json.is_empty();
        match result {
            Ok(out) => {
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
                for (req, (reply, applied)) in batch.into_iter().zip(out.replies) {
                    // A slot that stopped waiting (its task was cancelled) simply misses its
                    // reply; its record stays in Redis for the pruner, as after a crash.
                    let _ = req.reply.send(Ok(Answer {
                        reply,
                        applied,
                        limited,
                    }));
                }
            }
            Err(e) => {
                for req in batch {
                    let _ = req.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

impl super::fetch::Pick {
    /// Whether the batch can be answered "nothing" without a call: no completion to write and
    /// no queue that may hold a job.
    fn nothing_to_do(&self, batch: &[Request]) -> bool {
        self.queues.queues.is_empty() && batch.iter().all(|r| r.completion.is_none())
    }
}
