//! One slot: a Resque worker of its own, looping
//!
//! 1. step: finish (or fail) the previous job and reserve the next — one script, one round trip;
//! 2. if a job came back, perform it and keep its completion for the next step; if a payload
//!    was claimed (too large or unusual to check inside Redis), read, check and promote it
//!    first ([`super::claim`]);
//! 3. if nothing came back, park until a wake-up says a job may be waiting (at most
//!    `INTERVAL`: the periodic fallback reserve);
//! 4. if `pause-all-workers` is set (or USR2), wait until resumed;
//! 5. on shutdown, send the last completion without reserving, and stop.
//!
//! When a step fails, the completion is kept and the step sent again later, which the script
//! makes safe. How much later depends on why ([`crate::conn::errors`]): an outage or `OOM` is
//! retried with back-off and logged once for the process; a refusal of this slot's own
//! transition (a key it needs is of the wrong type) is reported with what to repair every
//! [`crate::conn::errors::REPORT_EVERY`] while it lasts, and the other slots go on. Nothing
//! waits on Redis without also waiting on shutdown: once the process aborts (TERM/INT after
//! `RESQUE_TERM_TIMEOUT`, or a second one), or `RESQUE_TERM_TIMEOUT` after QUIT, a slot that
//! still cannot write its completion gives up and says which record it leaves for pruning
//! (the job is still in Redis: pruning records it, or requeues it under at-least-once).
//!
//! A job is aborted when the process reaches [`Phase::Abort`] or on USR1; it is then recorded
//! as a `Resque::TermException` failure, or, with `at_least_once`, put back at the head of its
//! queue.

use super::batch::Batcher;
use super::claim::{self, Promoted};
use super::fetch::Fetch;
use super::perform::{perform, Reserved};
use super::requeue::{self, HeldJob};
use super::shutdown::{self, Phase};
use super::step::{Claim, Completion, Reply, StepReply, StepRequest, Stepper};
use crate::conn::errors::{self, Class, Reporter};
use crate::conn::{Backoff, Conn};
use crate::keys::Keys;
use crate::registry::Registry;
use redis::RedisError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Mutex};
use tokio::time::Instant;

mod claims;
mod turns;

pub(crate) use turns::Turns;

/// How long, after the process aborts, a slot keeps trying to write its last completion.
pub(crate) const ABORT_GRACE: Duration = Duration::from_secs(2);

/// How long reading or promoting a claimed payload may take on the slot's own connection.
const CLAIM_PATIENCE: Duration = Duration::from_secs(120);

/// Longest back-off between attempts while a slot's transition is refused.
const REFUSED_BACKOFF: Duration = Duration::from_secs(30);

/// Longest back-off between attempts during an outage.
const OUTAGE_BACKOFF: Duration = Duration::from_secs(5);

/// What other tasks may see of a slot.
#[derive(Debug)]
pub(crate) struct SlotState {
    /// The slot's worker id.
    pub id: Arc<str>,
    /// The record of the job it runs, while it runs one reserved by the step script (a
    /// claimed job's record is too large to keep a copy of). Locked across each step so the
    /// heartbeat's self-heal never rewrites a record the step just removed.
    pub record: Mutex<Option<Vec<u8>>>,
}

/// A slot's task.
pub(crate) struct Slot {
    /// Shared state.
    pub state: Arc<SlotState>,
    /// The step script bound to this slot's keys.
    pub stepper: Arc<Stepper>,
    /// The queue list it polls when not the process's (a spread namespace's one queue).
    pub queues: Option<Arc<crate::worker::step::QueueKeys>>,
    /// Sends steps, batched with other slots'.
    pub steps: Batcher,
    /// The shared connection.
    pub con: Conn,
    /// Where Redis is (for the slot's own connection to read a claimed payload).
    pub endpoint: crate::conn::Endpoint,
    /// Wake-ups and the resolved queue list.
    pub fetch: Arc<Fetch>,
    /// Handlers.
    pub registry: Arc<Registry>,
    /// The middleware chain around them.
    pub chain: Arc<crate::middleware::Chain>,
    /// Tracked jobs' settings and kill watch.
    pub tracker: Arc<crate::jobs::Tracker>,
    /// The limits in force.
    pub limits: Arc<crate::limits::cache::LimitsCache>,
    /// On a spread namespace with class limits, their gates (a unit before a handler runs).
    pub class_gates: Option<Arc<crate::worker::class_gate::ClassGates>>,
    /// Shutdown phase.
    pub shutdown: watch::Receiver<Phase>,
    /// Bumped by USR1: abort the running job, keep working.
    pub abort_jobs: watch::Receiver<u64>,
    /// Requeue aborted jobs instead of failing them.
    pub at_least_once: bool,
    /// Key names (for requeueing).
    pub keys: Keys,
    /// `RESQUE_TERM_TIMEOUT`: how long after QUIT a completion Redis refuses is retried.
    pub term_timeout: Duration,
    /// The process's bound on jobs at once, when it has more slots than that.
    pub turns: Turns,
}

/// The queue key of the wake-up lane of a slot polling `queues` (see [`Slot::lane`]).
fn lane_of(queues: &Option<Arc<crate::worker::step::QueueKeys>>) -> Option<&str> {
    let q = queues.as_ref()?;
    q.queues.first().map(|(_, key, _)| key.as_str())
}

/// How a slot ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stopped {
    /// Its last job is recorded; its id can be unregistered.
    Clean(Arc<str>),
    /// It gave up recording its last job: the id stays registered, its record for pruning.
    LeftRecord(Arc<str>),
}

/// Why a Redis step of this slot did not go through.
#[derive(Debug, Clone)]
enum Problem {
    /// The call failed (the connection, the server, or an error reply).
    Call(RedisError),
    /// The step script refused this slot's transition: the text says which key is unusable.
    Refused(String),
}

impl Problem {
    fn class(&self) -> Class {
        match self {
            Problem::Call(e) => errors::classify(e),
            Problem::Refused(_) => Class::Permanent,
        }
    }

    fn describe(&self) -> String {
        match self {
            Problem::Call(e) => errors::describe_here(e),
            Problem::Refused(text) => {
                let code = text.split(' ').next().unwrap_or("ERR").to_string();
                errors::describe(
                    &redis::make_extension_error(
                        code.clone(),
                        Some(text[code.len()..].trim_start().to_string()),
                    ),
                    "",
                )
            }
        }
    }
}

/// A slot's run of failed attempts at one step: back-off, reporting, and when to give up.
struct Trouble {
    /// Back-off between attempts during an outage.
    backoff: Backoff,
    /// Back-off between attempts while a transition is refused.
    slow: Backoff,
    /// Bounded-rate reports of a refusal.
    reporter: Reporter,
    /// The process-wide outage log.
    streak: crate::conn::outage::Streak,
    /// When to give up after QUIT (set at the first failure once QUIT was seen).
    quit_deadline: Option<Instant>,
    /// When to give up after the process aborted.
    abort_deadline: Option<Instant>,
}

impl Trouble {
    fn new() -> Self {
        Trouble {
            backoff: Backoff::new(OUTAGE_BACKOFF),
            slow: Backoff::new(REFUSED_BACKOFF),
            reporter: Reporter::default(),
            streak: Default::default(),
            quit_deadline: None,
            abort_deadline: None,
        }
    }
}

impl Slot {
    /// Runs until shutdown; returns once the slot's last job is recorded, or with
    /// [`Stopped::LeftRecord`] when it gave up on recording it (the record stays for pruning).
    pub(crate) async fn run(mut self) -> Stopped {
        let mut pending: Option<Completion> = None;
        // Whether the job of `pending` was taken under limits (its shares come back with it).
        let mut limited = false;
        let mut trouble = Trouble::new();
        let mut full = false;
        loop {
            let phase = *self.shutdown.borrow();
            let mut take = phase == Phase::Running && !self.fetch.locally_paused();
            if take && !self.turns.try_hold() {
                // The process runs as many jobs as it may: the last job's end goes alone, then
                // the slot waits its turn.
                take = false;
                if pending.is_none() {
                    tokio::select! {
                        _ = self.turns.hold() => {}
                        _ = shutdown::reached(&mut self.shutdown, Phase::Quit) => {}
                    }
                    continue;
                }
            }
            if !take && pending.is_none() {
                if phase != Phase::Running {
                    return Stopped::Clean(self.state.id.clone());
                }
                self.wait_unpaused().await;
                continue;
            }
            let reply = match self
                .turn(&mut pending, limited, take, full, &mut trouble)
                .await
            {
                Ok(a) => {
                    limited = a.limited;
                    a.reply
                }
                Err(problem) => {
                    full = true;
                    if !self
                        .back_off(&mut trouble, &problem, pending.as_ref())
                        .await
                    {
                        self.leave_for_pruning(pending.as_ref(), &problem);
                        return match pending {
                            Some(_) => Stopped::LeftRecord(self.state.id.clone()),
                            None => Stopped::Clean(self.state.id.clone()),
                        };
                    }
                    continue;
                }
            };
            full = false;
            self.recovered(&mut trouble);
            if !take {
                continue;
            }
            if !matches!(reply, Reply::Job(..) | Reply::Claim(_)) {
                self.turns.release();
            }
            match reply {
                Reply::Job(record, started) => {
                    pending = self
                        .run_job(Reserved::Record(record, started), limited)
                        .await;
                    self.turns.job_done();
                }
                Reply::Claim(c) => {
                    (pending, limited) = self.claimed(c, &mut trouble).await;
                    self.turns.job_done();
                }
                Reply::Empty if self.fetch.locally_paused() => {}
                Reply::Empty => {
                    let (fetch, queues) = (self.fetch.clone(), self.queues.clone());
                    tokio::select! {
                        _ = fetch.park(lane_of(&queues)) => {}
                        _ = shutdown::reached(&mut self.shutdown, Phase::Quit) => {}
                    }
                    full = self.fetch.take_full();
                }
                Reply::Paused => {
                    self.fetch.set_remote_paused();
                    self.wait_unpaused().await;
                }
                Reply::Refused(_) => {}
                Reply::Limited => {
                    let gate = self.stepper.gate().cloned();
                    tokio::select! {
                        _ = async { if let Some(g) = &gate { g.wait().await } } => {}
                        _ = shutdown::reached(&mut self.shutdown, Phase::Quit) => {}
                    }
                }
            }
        }
    }

    /// The queue key of the fetch's wake-up lane this slot parks in (its one queue's on a
    /// spread namespace; elsewhere none: the process's lane).
    fn lane(&self) -> Option<&str> {
        lane_of(&self.queues)
    }

    /// Performs a job and returns its completion (none when at-least-once put it back);
    /// `limited`: whether it was taken under limits.
    async fn run_job(&mut self, job: Reserved, limited: bool) -> Option<Completion> {
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
            &self.chain,
            &self.registry,
            Some(&self.tracker),
            job,
            &self.state.id,
            abort,
            self.class_gates.as_deref(),
        )
        .await;
        self.after_abort(c, fired.load(Ordering::SeqCst), limited)
            .await
    }

    /// With `at_least_once`, an aborted job goes back to the head of its queue (and leaves no
    /// completion to send); otherwise the completion stands.
    async fn after_abort(&self, c: Completion, aborted: bool, limited: bool) -> Option<Completion> {
        if !aborted || !self.at_least_once {
            return Some(c);
        }
        let Some(record) = c.job().record().map(<[u8]>::to_vec) else {
            // A claimed job's record is only in Redis: pruning requeues it.
            return Some(c);
        };
        let Some(job) = HeldJob::from_record(&record) else {
            return Some(c);
        };
        let mut held = self.state.record.lock().await;
        let mut con = self.con.clone();
        let moved = tokio::time::timeout(
            ABORT_GRACE,
            requeue::requeue(
                &mut con,
                &self.keys,
                &self.state.id,
                &record,
                &job,
                &self.limits.json(),
                limited,
            ),
        )
        .await;
        if !matches!(moved, Ok(Ok(_))) {
            tracing::warn!(worker = %self.state.id, key = %self.keys.worker(&self.state.id), "could not requeue the aborted job; its record is left for pruning, which requeues it");
            return None;
        }
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

    /// One turn: an extended completion first (its own function), then the step call. The
    /// completion is taken out of `pending` once applied.
    async fn turn(
        &self,
        pending: &mut Option<Completion>,
        limited: bool,
        reserve: bool,
        full: bool,
        trouble: &mut Trouble,
    ) -> Result<StepReply, Problem> {
        let queues = match &self.queues {
            Some(q) => q.clone(),
            None => self.fetch.queues(),
        };
        let mut record = self.state.record.lock().await;
        let mut rx = self.shutdown.clone();
        let quit_deadline = trouble.quit_deadline;
        // Nothing waits on Redis without also waiting on shutdown.
        let give_up = async {
            let after_abort = async {
                shutdown::reached(&mut rx, Phase::Abort).await;
                tokio::time::sleep(ABORT_GRACE).await;
            };
            match quit_deadline {
                Some(d) => tokio::select! {
                    _ = after_abort => {}
                    _ = tokio::time::sleep_until(d) => {}
                },
                None => after_abort.await,
            }
        };
        let attempt = async {
            if let Some(Completion::Extended(ext)) = pending.as_ref() {
                let mut con = self.con.clone();
                if self.stepper.keys().is_spread() {
                    // (Spread: decided now, written by the step and its outbox's mover.)
                    let c =
                        crate::worker::complete::spread_completion(&mut con, &self.stepper, ext)
                            .await
                            .map_err(Problem::Call)?;
                    *pending = Some(c);
                } else {
                    self.stepper
                        .apply_extended(&mut con, ext, limited)
                        .await
                        .map_err(Problem::Call)?;
                    *pending = None;
                }
            }
            if pending.is_none() && !reserve {
                return Ok(StepReply::empty(false));
            }
            let answer = self
                .steps
                .send(StepRequest {
                    stepper: self.stepper.clone(),
                    completion: pending.clone(),
                    reserve,
                    limited,
                    full,
                    queues,
                })
                .await
                .map_err(Problem::Call)?;
            match answer.reply {
                // The completion may have gone through while the reserve was refused.
                Reply::Refused(text) => {
                    if answer.applied {
                        *pending = None;
                    }
                    Err(Problem::Refused(text))
                }
                _ => {
                    *pending = None;
                    Ok(answer)
                }
            }
        };
        let result = tokio::select! {
            r = attempt => r,
            _ = give_up => {
                trouble.abort_deadline.get_or_insert_with(Instant::now);
                Err(Problem::Call(RedisError::from((
                    redis::ErrorKind::Io,
                    "no answer before the shutdown deadline",
                ))))
            }
        };
        if let Ok(answer) = &result {
            *record = match &answer.reply {
                Reply::Job(r, _) => Some(r.clone()),
                _ => None,
            };
        }
        drop(record);
        // (A reserve a spread limit refused was not attempted: nothing was polled.)
        if reserve && result.as_ref().is_ok_and(|a| a.reply != Reply::Limited) {
            self.fetch.attempted(self.lane());
        }
        result
    }

    /// Waits before the next attempt after `problem`, reporting it as its class says. Returns
    /// false when the slot must give up instead (shutdown deadlines).
    async fn back_off(
        &mut self,
        trouble: &mut Trouble,
        problem: &Problem,
        pending: Option<&Completion>,
    ) -> bool {
        let phase = *self.shutdown.borrow();
        if phase >= Phase::Quit && trouble.quit_deadline.is_none() {
            trouble.quit_deadline = Some(Instant::now() + self.term_timeout);
        }
        let delay = match problem.class() {
            Class::Transient | Class::RefusedWrite => {
                trouble
                    .streak
                    .failed("step", &ProblemText(problem.describe()));
                trouble.backoff.next_delay()
            }
            Class::Permanent => {
                trouble.reporter.due();
                let text = problem.describe();
                if let Some((times, slots)) = errors::shared_due(&text, &self.state.id) {
                    let key = self.keys.worker(&self.state.id);
                    let holding = match pending {
                        Some(c) if c.succeeded() => format!("a finished job stays in {key}"),
                        Some(_) => format!("a failed job stays in {key}"),
                        None => "no job was taken".to_string(),
                    };
                    tracing::error!(
                        worker = %self.state.id,
                        times,
                        slots,
                        "{text}; {holding} until it is repaired; retrying every {}s at most",
                        REFUSED_BACKOFF.as_secs()
                    );
                }
                trouble.slow.next_delay().max(Duration::from_millis(500))
            }
        };
        crate::metrics::redis_error();
        let wake = Instant::now() + delay;
        let give_up = |t: &Trouble| match (t.quit_deadline, t.abort_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut abort_rx = self.shutdown.clone();
        let mut quit_rx = self.shutdown.clone();
        loop {
            let deadline = give_up(trouble);
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(deadline.map_or(wake, |d| d.min(wake))) => {
                    if Instant::now() >= wake {
                        return true;
                    }
                }
                _ = shutdown::reached(&mut abort_rx, Phase::Abort), if trouble.abort_deadline.is_none() => {
                    trouble.abort_deadline = Some(Instant::now() + ABORT_GRACE);
                }
                _ = shutdown::reached(&mut quit_rx, Phase::Quit), if trouble.quit_deadline.is_none() => {
                    trouble.quit_deadline = Some(Instant::now() + self.term_timeout);
                }
            }
        }
    }

    /// A step went through after failures: the end of an outage, or of a refusal, is said.
    fn recovered(&self, trouble: &mut Trouble) {
        if !trouble.backoff.failing() && !trouble.slow.failing() {
            return;
        }
        if trouble.backoff.failing() {
            crate::metrics::redis_reconnect();
            trouble.streak.succeeded("step");
        }
        if trouble.reporter.active() {
            tracing::info!(worker = %self.state.id, "the refused step went through (repaired)");
        }
        *trouble = Trouble::new();
    }

    /// Says what the slot leaves in Redis when it gives up at shutdown.
    fn leave_for_pruning(&self, pending: Option<&Completion>, problem: &Problem) {
        let key = self.keys.worker(&self.state.id);
        match pending {
            Some(c) => tracing::warn!(
                worker = %self.state.id,
                record = %key,
                finished = if c.succeeded() { "success" } else { "failure" },
                "stopping without recording the last job ({}): its record is left for pruning, \
                 which records it as a dirty exit (or requeues it under at-least-once)",
                problem.describe()
            ),
            None => {
                tracing::warn!(worker = %self.state.id, "stopping while Redis is not answering ({})", problem.describe())
            }
        }
    }
}

/// A problem's description as an error value for the outage log.
struct ProblemText(String);

impl std::fmt::Display for ProblemText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
