//! One slot: a Resque worker of its own, looping
//!
//! 1. step: finish (or fail) the previous job and reserve the next — one script, one round trip;
//! 2. if a job came back, perform it and keep its completion for the next step;
//! 3. if nothing came back, park until a watcher sees a job;
//! 4. if `pause-all-workers` is set (or USR2), wait until resumed;
//! 5. on shutdown, send the last completion without reserving, and stop.
//!
//! A job is aborted when the process reaches [`Phase::Abort`] (TERM/INT after the term
//! timeout) or on USR1; it is then recorded as a `Resque::TermException` failure, or, with
//! `at_least_once`, put back at the head of its queue.

use super::batch::Batcher;
use super::fetch::Fetch;
use super::perform::perform;
use super::requeue::{self, HeldJob};
use super::shutdown::{self, Phase};
use super::step::{Completion, Reply, Stepper};
use crate::conn::Conn;
use crate::keys::Keys;
use crate::registry::Registry;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Mutex};

/// What other tasks may see of a slot.
#[derive(Debug)]
pub struct SlotState {
    /// The slot's worker id.
    pub id: Arc<str>,
    /// The record of the job it runs, while it runs one. Locked across each step so the
    /// heartbeat's self-heal never rewrites a record the step just removed.
    pub record: Mutex<Option<Vec<u8>>>,
}

/// A slot's task.
pub struct Slot {
    /// Shared state.
    pub state: Arc<SlotState>,
    /// The step script bound to this slot's keys.
    pub stepper: Arc<Stepper>,
    /// Sends steps, batched with other slots'.
    pub steps: Batcher,
    /// The shared connection.
    pub con: Conn,
    /// Wake-ups and the resolved queue list.
    pub fetch: Arc<Fetch>,
    /// Handlers.
    pub registry: Arc<Registry>,
    /// Shutdown phase.
    pub shutdown: watch::Receiver<Phase>,
    /// Default job time limit.
    pub job_timeout: Option<Duration>,
    /// Bumped by USR1: abort the running job, keep working.
    pub abort_jobs: watch::Receiver<u64>,
    /// Requeue aborted jobs instead of failing them.
    pub at_least_once: bool,
    /// Key names (for requeueing).
    pub keys: Keys,
}

impl Slot {
    /// Runs until shutdown; returns once the slot's last job is recorded.
    pub async fn run(mut self) {
        let mut pending: Option<Completion> = None;
        loop {
            let phase = *self.shutdown.borrow();
            let take = phase == Phase::Running && !self.fetch.locally_paused();
            if !take && pending.is_none() {
                if phase != Phase::Running {
                    return;
                }
                self.wait_unpaused().await;
                continue;
            }
            let reply = self.step(pending.take(), take).await;
            if !take {
                continue;
            }
            match reply {
                Reply::Job(record) => {
                    let mut rx = self.shutdown.clone();
                    let mut usr1 = self.abort_jobs.clone();
                    usr1.borrow_and_update();
                    let fired = AtomicBool::new(false);
                    let abort = async {
                        let signal = tokio::select! {
                            _ = shutdown::reached(&mut rx, Phase::Abort) => "SIGTERM",
                            Ok(()) = usr1.changed() => "SIGUSR1",
                        };
                        fired.store(true, Ordering::SeqCst);
                        signal
                    };
                    let c = perform(
                        &self.registry,
                        record,
                        &self.state.id,
                        self.job_timeout,
                        abort,
                    )
                    .await;
                    pending = self.after_abort(c, fired.load(Ordering::SeqCst)).await;
                }
                Reply::Empty => {
                    tokio::select! {
                        _ = self.fetch.park() => {}
                        _ = shutdown::reached(&mut self.shutdown, Phase::Quit) => {}
                    }
                }
                Reply::Paused => {
                    self.fetch.set_remote_paused();
                    self.wait_unpaused().await;
                }
            }
        }
    }

    /// With `at_least_once`, an aborted job goes back to the head of its queue (and leaves no
    /// completion to send); otherwise the completion stands.
    async fn after_abort(&self, c: Completion, aborted: bool) -> Option<Completion> {
        if !aborted || !self.at_least_once {
            return Some(c);
        }
        let record = c.record().to_vec();
        let Some(job) = HeldJob::from_record(&record) else {
            return Some(c);
        };
        let mut held = self.state.record.lock().await;
        crate::conn::retry("requeue", || {
            let mut con = self.con.clone();
            let (keys, id, record, job) = (&self.keys, &self.state.id, record.as_slice(), &job);
            async move { requeue::requeue(&mut con, keys, id, record, job).await }
        })
        .await;
        *held = None;
        drop(held);
        tracing::info!(worker = %self.state.id, queue = %job.queue, "aborted job requeued at the head of its queue (at-least-once)");
        None
    }

    async fn wait_unpaused(&mut self) {
        tokio::select! {
            _ = self.fetch.unpaused() => {}
            _ = shutdown::reached(&mut self.shutdown, Phase::Quit) => {}
        }
    }

    /// One step, retried until Redis answers (resending is safe by the script's design).
    async fn step(&self, completion: Option<Completion>, reserve: bool) -> Reply {
        let queues = self.fetch.queues();
        let mut record = self.state.record.lock().await;
        let completion = match completion {
            Some(Completion::Extended(ext)) => {
                crate::conn::retry("step", || {
                    let mut con = self.con.clone();
                    let (stepper, ext) = (&self.stepper, &ext);
                    async move { stepper.apply_extended(&mut con, ext).await }
                })
                .await;
                None
            }
            c => c,
        };
        let reply = if completion.is_none() && !reserve {
            Reply::Empty
        } else {
            self.steps
                .step(&self.stepper, completion, reserve, queues)
                .await
        };
        *record = match &reply {
            Reply::Job(r) => Some(r.clone()),
            _ => None,
        };
        drop(record);
        if reserve {
            self.fetch.attempted();
        }
        reply
    }
}
