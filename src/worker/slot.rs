//! One slot: a Resque worker of its own, looping
//!
//! 1. step: finish (or fail) the previous job and reserve the next — one script, one round trip;
//! 2. if a job came back, perform it and keep its completion for the next step;
//! 3. if nothing came back, park until a watcher sees a job;
//! 4. if `pause-all-workers` is set (or USR2), wait until resumed;
//! 5. on shutdown, send the last completion without reserving, and stop.

use super::fetch::Fetch;
use super::perform::perform;
use super::shutdown::{self, Phase};
use super::step::{Completion, Reply, Stepper};
use crate::conn::Conn;
use crate::registry::Registry;
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
    pub stepper: Stepper,
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
                    let abort = async move { shutdown::reached(&mut rx, Phase::Abort).await };
                    let c = perform(
                        &self.registry,
                        record,
                        &self.state.id,
                        self.job_timeout,
                        abort,
                    )
                    .await;
                    pending = Some(c);
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
        let (reply, _) = crate::conn::retry("step", || {
            let mut con = self.con.clone();
            let (stepper, c, q) = (&self.stepper, completion.as_ref(), &queues);
            async move { stepper.step(&mut con, c, reserve, q).await }
        })
        .await;
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
