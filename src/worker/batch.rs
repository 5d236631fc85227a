//! Step batching: the steps of all slots that are ready at the same moment go to Redis as one
//! step-script call.
//!
//! A slot hands its step (previous job's completion + "reserve the next") to the process's
//! [`Batcher`] and waits for its reply. Each of a few lanes takes the first waiting step, adds
//! every other step already waiting (up to [`MAX_BATCH`]), sends them as one `EVALSHA` and hands
//! each slot its own reply. Nothing waits for a batch to fill: a lone step is sent at once, and
//! steps that arrive while a call is in flight form the next one. Under load this turns 64
//! slots' round trips into a couple of calls, cutting Redis's per-call work and the process's
//! reads, writes and wake-ups; each slot's transition stays exactly what it was (its own
//! conditions, its own reply), and the whole call is atomic.
//!
//! A call that fails (Redis away) is resent as a whole until it succeeds, which the script
//! makes safe per slot (see `step.lua`).

use super::step::{step_batch, Completion, QueueKeys, Reply, StepItem, Stepper};
use crate::conn::Conn;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Mutex};

/// Most slots in one call (bounds how long one script keeps Redis busy: about 3 µs per job).
pub const MAX_BATCH: usize = 128;

/// Calls in flight at once per process (each lane sends one call at a time).
pub const LANES: usize = 2;

/// One slot's step, waiting to be sent.
struct Request {
    stepper: Arc<Stepper>,
    completion: Option<Completion>,
    reserve: bool,
    queues: Arc<QueueKeys>,
    reply: oneshot::Sender<Reply>,
}

/// The process's step sender; cheap to clone, one per slot.
#[derive(Clone)]
pub struct Batcher {
    tx: mpsc::UnboundedSender<Request>,
}

impl Batcher {
    /// Starts `lanes` lanes sending steps over `con`. They stop once every [`Batcher`] clone
    /// is dropped and the waiting steps are sent.
    pub fn start(con: Conn, lanes: usize) -> Batcher {
        let (tx, rx) = mpsc::unbounded_channel();
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..lanes.max(1) {
            tokio::spawn(lane(con.clone(), rx.clone()));
        }
        Batcher { tx }
    }

    /// Sends one slot's step (an extended completion must have been applied already) and
    /// waits for its reply; retried until Redis answers.
    pub async fn step(
        &self,
        stepper: &Arc<Stepper>,
        completion: Option<Completion>,
        reserve: bool,
        queues: Arc<QueueKeys>,
    ) -> Reply {
        let (reply, rx) = oneshot::channel();
        let req = Request {
            stepper: stepper.clone(),
            completion,
            reserve,
            queues,
            reply,
        };
        // Lanes end only once every sender is gone, so this send fails only while the runtime
        // itself is shutting down; the slot then sees no job.
        let _ = self.tx.send(req);
        rx.await.unwrap_or(Reply::Empty)
    }
}

/// One lane: gathers waiting steps, sends them as one call, answers each.
async fn lane(con: Conn, rx: Arc<Mutex<mpsc::UnboundedReceiver<Request>>>) {
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
        let replies = crate::conn::retry("step", || {
            let mut con = con.clone();
            let batch = &batch;
            async move {
                let items: Vec<StepItem<'_>> = batch
                    .iter()
                    .map(|r| StepItem {
                        stepper: &r.stepper,
                        completion: r.completion.as_ref(),
                        reserve: r.reserve,
                    })
                    .collect();
                step_batch(&mut con, &batch[0].queues, &items).await
            }
        })
        .await;
        for (req, (reply, _)) in batch.into_iter().zip(replies) {
            // A slot that stopped waiting (its task was cancelled) simply misses its reply;
            // its record stays in Redis for the pruner, as after a crash.
            let _ = req.reply.send(reply);
        }
    }
}
