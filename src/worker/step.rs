//! The step script: finish (or fail) a slot's job and reserve its next one in one call — for
//! one slot, or for every slot of the process that is ready at the same moment (see
//! [`super::batch`]).
//!
//! What the script answers per slot ([`Reply`]) is the whole of what the slot needs: a job (its
//! record), a claim (a payload too large or too unusual to check inside Redis, see
//! [`super::claim`]), nothing, "paused", or a refusal naming the unusable key (nothing of the
//! slot's transition was written; its job stays where it is).

use crate::keys::Keys;
use crate::wire::record;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use std::sync::atomic::{AtomicU64, Ordering};

/// Largest payload the step script checks itself (bytes); larger ones are claimed and checked
/// by the worker. Bounds how long one reserve can hold Redis (about 5 ns a byte).
pub(crate) const CHECKED_IN_REDIS: usize = 8 * 1024;

/// Most non-ASCII characters the step script checks in one payload; a payload with more is
/// claimed and checked by the worker.
pub(crate) const CHARS_CHECKED_IN_REDIS: usize = 32;

/// Default `RESQ_MAX_PAYLOAD`: Redis's own largest string (`proto-max-bulk-len`), 512 MiB.
pub(crate) const DEFAULT_MAX_PAYLOAD: u64 = 512 * 1024 * 1024;

/// The queues a slot polls, resolved to keys and JSON-encoded names.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct QueueKeys {
    /// `(queue name, <ns>:queue:<name>, name as a JSON string)` in priority order.
    pub queues: Vec<(String, String, String)>,
    /// Jesque zset queues among them (see [`super::jesque`]); empty for list-only workers.
    pub jesque: super::jesque::JesqueQueues,
}

impl QueueKeys {
    /// Resolves names to keys.
    pub(crate) fn new(keys: &Keys, names: &[String]) -> Self {
        QueueKeys {
            queues: names
                .iter()
                .map(|n| (n.clone(), keys.queue(n), record::encode_queue(n)))
                .collect(),
            jesque: Default::default(),
        }
    }

    /// Resolves names to keys, marking those named in `zsets` as Jesque zset queues.
    pub(crate) fn with_jesque(keys: &Keys, names: &[String], zsets: &[String]) -> Self {
        let mut q = Self::new(keys, names);
        q.jesque = super::jesque::JesqueQueues::new(keys, names, zsets);
        q
    }

    /// The queues at `picked` (indexes into `self.queues`, in order), as a list of their own.
    pub(crate) fn subset(&self, picked: &[usize]) -> Self {
        QueueKeys {
            queues: picked.iter().map(|&i| self.queues[i].clone()).collect(),
            jesque: self.jesque.subset(picked),
        }
    }
}

/// How a completion names the job it completes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JobRef {
    /// By the exact bytes of its worker record (what the step script wrote at reserve).
    Record(Vec<u8>),
    /// A claimed job, by the token its promote wrote (its record is too large to send back).
    Token(String),
}

impl JobRef {
    /// The script's completion code (`success` or not) and the argument it compares.
    fn code_and_arg(&self, success: bool) -> (&'static str, &[u8]) {
        match (self, success) {
            (JobRef::Record(r), true) => ("sr", r),
            (JobRef::Record(r), false) => ("fr", r),
            (JobRef::Token(t), true) => ("st", t.as_bytes()),
            (JobRef::Token(t), false) => ("ft", t.as_bytes()),
        }
    }

    /// The record bytes, when the job is named by them.
    pub(crate) fn record(&self) -> Option<&[u8]> {
        match self {
            JobRef::Record(r) => Some(r),
            JobRef::Token(_) => None,
        }
    }
}

/// How the slot's previous job ended.
#[derive(Debug, Clone)]
pub(crate) enum Completion {
    /// Succeeded.
    Success {
        /// The job.
        job: JobRef,
        /// A tracked job's end (a `track.lua` spec), written with the completion.
        track: Option<String>,
    },
    /// Failed; `entry` is the failure entry to push.
    Failure {
        /// The job.
        job: JobRef,
        /// The failure entry JSON.
        entry: String,
        /// A tracked job's end (a `track.lua` spec), written with the completion.
        track: Option<String>,
    },
    /// Ended with a retry or a unique lock to handle (see [`super::complete`]).
    Extended(Box<super::complete::Extended>),
}

impl Completion {
    /// The job it completes.
    pub(crate) fn job(&self) -> &JobRef {
        match self {
            Completion::Success { job, .. } | Completion::Failure { job, .. } => job,
            Completion::Extended(e) => &e.job,
        }
    }

    /// Whether the job ended well (for logs).
    pub(crate) fn succeeded(&self) -> bool {
        match self {
            Completion::Success { .. } => true,
            Completion::Failure { .. } => false,
            Completion::Extended(e) => {
                matches!(e.outcome, super::complete::Outcome::Success { .. })
            }
        }
    }
}

/// A payload the step script claimed for the worker to check (see [`super::claim`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claim {
    /// The claim's token.
    pub token: String,
    /// The queue it was popped from.
    pub queue: String,
    /// The payload's size in bytes (0 when the step script did not look).
    pub size: usize,
}

impl Claim {
    /// Reads the step script's `<token> <queue as JSON>\n<bytes>`.
    fn parse(data: &[u8]) -> Option<Claim> {
        let text = std::str::from_utf8(data).ok()?;
        let (header, size) = text.rsplit_once('\n')?;
        let (token, queue_json) = header.split_once(' ')?;
        Some(Claim {
            token: token.to_string(),
            queue: serde_json::from_str(queue_json).ok()?,
            size: size.parse().ok()?,
        })
    }
}

/// What the script answered for one slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// A job was reserved (or was already held): its record text.
    Job(Vec<u8>),
    /// A payload was claimed for the worker to check (or was already claimed).
    Claim(Claim),
    /// Nothing to do in any queue.
    Empty,
    /// `<ns>:pause-all-workers` is set.
    Paused,
    /// The slot's transition was refused, nothing of it written: a key it needs is unusable.
    Refused(String),
}

/// What the worker knows of its slot's entry in `<ns>:resq:sharing` (the limit shares it holds):
/// the text as its last step call left it (`""`: none), so that the next call can go the quick
/// way without reading it ([`super::quick`]). Not known (`None`: the call goes the general way,
/// which reads it) at first, after a call whose reply was not read or that carried no limits,
/// once any other script took or returned the slot's shares, and once any request of the
/// process failed as a restart or a failover makes requests fail ([`crate::conn::faults`]: a
/// promoted replica may not have the last calls' writes). See "What the worker knows" in
/// docs/limits.md.
#[derive(Debug, Default)]
pub(crate) struct KnownShares(std::sync::Mutex<(u64, Option<String>)>);

impl Clone for KnownShares {
    /// A copy knows nothing: an entry belongs to one slot.
    fn clone(&self) -> Self {
        KnownShares::default()
    }
}

impl KnownShares {
    fn slot(&self) -> std::sync::MutexGuard<'_, (u64, Option<String>)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The entry as known.
    pub(crate) fn known(&self) -> Option<String> {
        let s = self.slot();
        if s.0 != crate::conn::faults() {
            return None;
        }
        s.1.clone()
    }

    /// Sets the entry as a call sent when [`crate::conn::faults`] was `at` left it.
    fn set(&self, text: Option<String>, at: u64) {
        *self.slot() = (at, text);
    }

    /// Forgets the entry: the next step call reads it.
    pub(crate) fn forget(&self) {
        self.slot().1 = None;
    }
}

/// The fixed part of one slot's step invocation.
#[derive(Debug, Clone)]
pub(crate) struct Stepper {
    /// The slot's worker id.
    id: String,
    /// `<ns>:worker:<id>` and `<ns>:stat:processed:<id>` (the script names the slot's keys that
    /// only failures and claims use from the first).
    own: [String; 2],
    /// The worker id as a JSON string.
    worker_json: String,
    /// Ruby's processed-counts-failures semantics.
    count_failed: bool,
    /// `RESQ_MAX_PAYLOAD`: larger payloads become failure entries.
    max_payload: u64,
    /// Key names (shared keys, extended completions).
    keys: Keys,
    /// The statused classes, as the step script reads them (`\nA\nB\n`, or empty).
    statused: std::sync::Arc<str>,
    /// The limits in force (for completions outside the step script).
    limits: Option<std::sync::Arc<crate::limits::cache::LimitsCache>>,
    /// The slot's limit shares as its last step call left them.
    pub(crate) shares: KnownShares,
}

impl Stepper {
    /// A stepper for worker `id`.
    pub(crate) fn new(keys: &Keys, id: &str, count_failed: bool) -> Self {
        Stepper {
            id: id.to_string(),
            own: [keys.worker(id), keys.stat_processed_by(id)],
            worker_json: record::encode_queue(id),
            count_failed,
            max_payload: DEFAULT_MAX_PAYLOAD,
            keys: keys.clone(),
            statused: std::sync::Arc::from(""),
            limits: None,
            shares: KnownShares::default(),
        }
    }

    /// Sets the process's limits (their shares go back with extended completions).
    pub(crate) fn with_limits(
        mut self,
        limits: std::sync::Arc<crate::limits::cache::LimitsCache>,
    ) -> Self {
        self.limits = Some(limits);
        self
    }

    /// The scripts' JSON of the limits in force (`""` when none).
    pub(crate) fn limits_json(&self) -> std::sync::Arc<str> {
        self.limits
            .as_ref()
            .map_or_else(|| std::sync::Arc::from(""), |l| l.json())
    }

    /// Sets the classes whose jobs follow resque-status's convention (`args[0]` is the id).
    pub(crate) fn with_statused(mut self, classes: &[String]) -> Self {
        self.statused = if classes.is_empty() {
            std::sync::Arc::from("")
        } else {
            std::sync::Arc::from(format!("\n{}\n", classes.join("\n")))
        };
        self
    }

    /// Sets the largest payload accepted (`RESQ_MAX_PAYLOAD`, bytes).
    pub(crate) fn with_max_payload(mut self, bytes: u64) -> Self {
        self.max_payload = bytes;
        self
    }

    /// The slot's worker id.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// Key names.
    pub(crate) fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Whether failures count as processed.
    pub(crate) fn count_failed(&self) -> bool {
        self.count_failed
    }

    /// Applies an extended completion (retry, unique lock) with its own script; returns
    /// whether it was applied by this call.
    pub(crate) async fn apply_extended<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        ext: &super::complete::Extended,
    ) -> RedisResult<bool> {
        // complete.lua returns the slot's shares.
        self.shares.forget();
        super::complete::apply(con, self, ext).await
    }

    /// Applies `completion` (if any) and, when `reserve`, reserves the next job from `queues`:
    /// a batch of one (see [`step_batch`]). Returns the reply and whether the completion was
    /// applied by this call.
    #[cfg(test)]
    pub(crate) async fn step<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        completion: Option<&Completion>,
        reserve: bool,
        queues: &std::sync::Arc<QueueKeys>,
    ) -> RedisResult<(Reply, bool)> {
        let mut completion = completion;
        let mut extended_applied = false;
        if let Some(Completion::Extended(ext)) = completion {
            extended_applied = self.apply_extended(con, ext).await?;
            completion = None;
            if !reserve {
                return Ok((Reply::Empty, extended_applied));
            }
        }
        let item = StepItem {
            stepper: self,
            completion,
            reserve,
        };
        let mut out = step_batch(con, queues, std::slice::from_ref(&item), "").await?;
        match out.replies.pop() {
            Some((r, applied)) => Ok((r, applied || extended_applied)),
            None => Err(bad_reply()),
        }
    }
}

/// One slot's part of a step call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StepItem<'a> {
    /// The slot's stepper.
    pub stepper: &'a Stepper,
    /// How its previous job ended (an extended completion must be applied beforehand with
    /// [`Stepper::apply_extended`]; here it counts as none).
    pub completion: Option<&'a Completion>,
    /// Whether to reserve a next job.
    pub reserve: bool,
}

/// What a step call found in one of the queues it polled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Found {
    /// It may hold more jobs.
    #[default]
    Jobs,
    /// It was empty (or held no due job, or is a key of another type).
    Empty,
    /// It is paused (`resq pause --queue`): not popped, whatever it holds.
    Paused,
    /// A full limit on the whole queue kept it from being popped.
    Blocked,
}

/// What one step call answered.
#[derive(Debug, Clone)]
pub(crate) struct StepOutcome {
    /// Per slot, in order: the reply and whether its completion was applied by this call.
    pub replies: Vec<(Reply, bool)>,
    /// Per queue of the call, in order: what the call found in it.
    pub found: Vec<Found>,
    /// Tracked jobs whose record could not be written, limits that could not be applied
    /// (`<id or key> <why>`); the jobs moved.
    pub tracking_problems: Vec<String>,
    /// When a job held by a rate or window limit here may be released (epoch ms).
    pub release_due: Option<i64>,
    /// Whether the call counted its limits the quick way ([`super::quick`]).
    #[cfg_attr(not(test), allow(dead_code))]
    pub quick: bool,
    /// Whether the call was planned as one whose slots all hold one queue's shares, complete
    /// and go on (`'u'`; [`super::quick::Plan::uniform`]).
    #[cfg_attr(not(test), allow(dead_code))]
    pub uniform: bool,
}

/// Numbers the claims of this process's calls.
static CALLS: AtomicU64 = AtomicU64::new(0);

/// Runs the step script once for `items` (slots of one process, polling `queues`), each one's
/// completion applied and next job reserved in order; replies in the same order. An empty
/// `items` sends nothing.
pub(crate) async fn step_batch<C: ConnectionLike + Send>(
    con: &mut C,
    queues: &QueueKeys,
    items: &[StepItem<'_>],
    limits: &str,
) -> RedisResult<StepOutcome> {
    let Some(first) = items.first() else {
        return Ok(StepOutcome {
            replies: Vec::new(),
            found: Vec::new(),
            tracking_problems: Vec::new(),
            release_due: None,
            quick: false,
            uniform: false,
        });
    };
    let shared = first.stepper;
    let keys = &shared.keys;
    let now = chrono::Utc::now();
    let mut inv = crate::scripts::STEP.prepare_invoke();
    inv.key(keys.stat_processed())
        .key(keys.stat_failed())
        .key(keys.failed())
        .key(keys.pause_all_workers())
        .key(keys.claims());
    for (_, key, _) in &queues.queues {
        inv.key(key);
    }
    queues.jesque.append_keys(&mut inv);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    inv.arg(if shared.count_failed { "1" } else { "0" })
        .arg(crate::wire::time::run_at(now))
        .arg(crate::wire::time::failed_at(now))
        .arg(queues.queues.len());
    queues.jesque.append_args(&mut inv, now);
    inv.arg(CHECKED_IN_REDIS)
        .arg(shared.max_payload)
        .arg(CHARS_CHECKED_IN_REDIS)
        // Zero-padded: the limits' held jobs of one millisecond are ordered by it as text.
        .arg(format!("{:x}.{call:016x}", std::process::id()))
        .arg(keys.prefix())
        .arg(&*shared.statused)
        .arg(now.timestamp_millis())
        .arg(limits);
    // What the slots hold, as this process knows it (the quick way needs all of it).
    let known: Vec<Option<String>> = items.iter().map(|i| i.stepper.shares.known()).collect();
    let quick = if limits.is_empty() {
        None
    } else {
        super::quick::limits(keys, limits)
    };
    let plan = quick.as_ref().and_then(|q| {
        let ends = items.iter().map(|i| {
            let job = match i.completion {
                Some(Completion::Success { job, .. } | Completion::Failure { job, .. }) => {
                    Some(job)
                }
                _ => None,
            };
            super::quick::SlotEnds {
                completes: job.is_some(),
                steady: i.reserve && job.is_some_and(|j| j.record().is_some()),
            }
        });
        super::quick::plan(q.clone(), &queues.queues, known.iter().cloned().zip(ends))
    });
    // With limits the quick way could count, a call it cannot plan tells what the slots hold.
    inv.arg(match (&plan, &quick) {
        (Some(p), _) if p.uniform => "u",
        (Some(_), _) => "q",
        (None, Some(_)) => "k",
        (None, None) => "",
    });
    for (_, _, json) in &queues.queues {
        inv.arg(json.as_str());
    }
    for item in items {
        let s = item.stepper;
        for k in &s.own {
            inv.key(k);
        }
        let track = match item.completion {
            Some(Completion::Success { job, track }) => {
                let (c, a) = job.code_and_arg(true);
                inv.arg(c).arg(a).arg("");
                track.as_deref()
            }
            Some(Completion::Failure { job, entry, track }) => {
                let (c, a) = job.code_and_arg(false);
                inv.arg(c).arg(a).arg(entry.as_str());
                track.as_deref()
            }
            None | Some(Completion::Extended(_)) => {
                inv.arg("0").arg("").arg("");
                None
            }
        };
        inv.arg(if item.reserve { "1" } else { "0" })
            .arg(s.worker_json.as_str())
            .arg(track.unwrap_or(""));
    }
    if let Some(p) = &plan {
        #[cfg(test)]
        let tail = &tests::tampered(&p.tail);
        #[cfg(not(test))]
        let tail = &p.tail;
        for a in tail {
            inv.arg(a.as_str());
        }
    }
    // Until the reply is read, what the call did to the slots' entries is not known (nor when
    // this call is dropped on its way, or fails).
    items.iter().for_each(|i| i.stepper.shares.forget());
    let at = crate::conn::faults();
    let uniform = plan.as_ref().is_some_and(|p| p.uniform);
    let v: Vec<Value> = inv.invoke_async(con).await?;
    if v.len() != 3 * items.len() + 5 {
        return Err(bad_reply());
    }
    let (replies, took): (Vec<(Reply, bool)>, Vec<usize>) = v[..3 * items.len()]
        .chunks_exact(3)
        .map(parse_reply)
        .collect::<RedisResult<Vec<_>>>()?
        .into_iter()
        .map(|(r, a, t)| ((r, a), t))
        .unzip();
    learn(
        (items, at),
        &known,
        plan.as_ref(),
        &queues.queues,
        (&replies, &took),
        &v[3 * items.len() + 3..],
    );
    let found = match v.get(3 * items.len()) {
        Some(Value::BulkString(flags)) => flags
            .iter()
            .map(|&f| match f {
                b'0' => Found::Empty,
                b'p' => Found::Paused,
                b'b' => Found::Blocked,
                _ => Found::Jobs,
            })
            .collect(),
        _ => return Err(bad_reply()),
    };
    let release_due = match v.get(3 * items.len() + 2) {
        Some(Value::BulkString(d)) => std::str::from_utf8(d)
            .ok()
            .and_then(|d| d.parse::<f64>().ok())
            .map(|d| d as i64),
        _ => None,
    };
    let tracking_problems = match v.get(3 * items.len() + 1) {
        Some(Value::BulkString(p)) if !p.is_empty() => String::from_utf8_lossy(p)
            .lines()
            .map(String::from)
            .collect(),
        _ => Vec::new(),
    };
    let quick =
        matches!(v.get(3 * items.len() + 3), Some(Value::BulkString(w)) if w.as_slice() == b"q");
    Ok(StepOutcome {
        replies,
        found,
        tracking_problems,
        release_due,
        quick,
        uniform,
    })
}

/// What each slot holds after a call sent when [`crate::conn::faults`] was `at`, from its
/// reply's last two values (the way the call counted its limits, and what it says of the slots;
/// see step.lua) and the slots' replies.
fn learn(
    (items, at): (&[StepItem<'_>], u64),
    known: &[Option<String>],
    plan: Option<&super::quick::Plan>,
    queues: &[(String, String, String)],
    (replies, took): (&[(Reply, bool)], &[usize]),
    tail: &[Value],
) {
    let told = match tail.get(1) {
        Some(Value::Array(t)) => t.as_slice(),
        _ => &[],
    };
    let int = |v: &Value| match v {
        Value::Int(n) => usize::try_from(*n).ok(),
        _ => None,
    };
    match (tail.first(), plan) {
        (Some(Value::BulkString(w)), Some(plan)) if w.as_slice() == b"q" => {
            let after = super::quick::after_quick(plan, queues, known, replies, took);
            for (item, a) in items.iter().zip(after) {
                item.stepper.shares.set(a, at);
            }
        }
        (Some(Value::BulkString(w)), _) if w.as_slice() == b"g" => {
            // The general way answers every slot's entry (a slot it could not read stays
            // unknown).
            for pair in told.chunks_exact(2) {
                let (Some(s), Value::BulkString(text)) = (int(&pair[0]), &pair[1]) else {
                    continue;
                };
                if let Some(item) = s.checked_sub(1).and_then(|i| items.get(i)) {
                    item.stepper
                        .shares
                        .set(String::from_utf8(text.clone()).ok(), at);
                }
            }
        }
        // A call without limits may return shares (of limits cleared while jobs ran) and says
        // nothing of them: the slots' entries stay unknown.
        _ => {}
    }
    // A claimed job is admitted (limit_claim.lua) or given back by other scripts.
    for (item, (reply, _)) in items.iter().zip(replies) {
        if matches!(reply, Reply::Claim(_)) {
            item.stepper.shares.forget();
        }
    }
}

fn bad_reply() -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, "step reply"))
}

/// A slot's reply: what it got, whether its completion was applied, and the index (from 1) of
/// the queue whose job the quick way gave it (0: none).
fn parse_reply(v: &[Value]) -> RedisResult<(Reply, bool, usize)> {
    let (applied, took) = match v.get(1) {
        Some(Value::Int(n)) => (n & 1 == 1, usize::try_from(n >> 1).unwrap_or(0)),
        _ => (false, 0),
    };
    let data = match v.get(2) {
        Some(Value::BulkString(d)) => d.as_slice(),
        _ => return Err(bad_reply()),
    };
    let reply = match v.first() {
        Some(Value::BulkString(tag)) => match tag.as_slice() {
            b"job" => Reply::Job(data.to_vec()),
            b"claim" => Reply::Claim(Claim::parse(data).ok_or_else(bad_reply)?),
            b"paused" => Reply::Paused,
            b"error" => Reply::Refused(String::from_utf8_lossy(data).into_owned()),
            _ => Reply::Empty,
        },
        _ => return Err(bad_reply()),
    };
    Ok((reply, applied, took))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A change made to a plan's arguments.
    type Change = fn(&mut Vec<String>);

    thread_local! {
        /// A change this thread's tests make to every quick-way plan before it is sent.
        static TAMPER: RefCell<Option<Change>> = const { RefCell::new(None) };
    }

    /// Makes this thread's step calls send their plans changed by `f` (`None`: as made).
    pub(crate) fn tamper(f: Option<Change>) {
        TAMPER.with(|t| *t.borrow_mut() = f);
    }

    /// `tail` as this thread's tests want it sent.
    pub(super) fn tampered(tail: &[String]) -> Vec<String> {
        let mut tail = tail.to_vec();
        if let Some(f) = TAMPER.with(|t| *t.borrow()) {
            f(&mut tail);
        }
        tail
    }

    #[test]
    fn what_a_slot_holds_is_forgotten_after_a_fault() {
        let k = KnownShares::default();
        assert_eq!(k.known(), None);
        // (Read again should another test's request fail meanwhile: the count is the process's.)
        let now = loop {
            let now = crate::conn::faults();
            k.set(Some("1 3:h:x".into()), now);
            let seen = k.known();
            if crate::conn::faults() == now {
                assert_eq!(seen.as_deref(), Some("1 3:h:x"));
                break now;
            }
        };
        // Learned from a call sent before a request failed as a failover makes it fail.
        k.set(Some("1 3:h:x".into()), now.wrapping_sub(1));
        assert_eq!(k.known(), None);
        k.set(Some(String::new()), now);
        k.forget();
        assert_eq!(k.known(), None);
        assert_eq!(k.clone().known(), None);
    }

    #[test]
    fn reads_a_claim() {
        let c = Claim::parse(b"1f.2.3 \"q:a\"\n123").unwrap();
        assert_eq!(c.token, "1f.2.3");
        assert_eq!(c.queue, "q:a");
        assert_eq!(c.size, 123);
    }
}
