//! One step call, whole: a slot's request ([`StepRequest`]: how its previous job ended, whether
//! to reserve), the arguments of a batch of requests (the library's `step`, built by its typed
//! builder [`crate::scripts::Step`]), the call, and each slot's reply read back
//! ([`StepReply`]: a job, a claim, nothing, paused, or a refusal).

use super::{ConnectionLike, QueueKeys, RedisResult, StepConfig, Stepper, Value};
pub(crate) use crate::jobs::Started;
use crate::scripts::{Step, StepSlot, StepTail};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One slot's part of a step call — the one request type of a step, from the slot through the
/// batcher ([`crate::worker::batch`]) into the call's arguments ([`call_step`]).
#[derive(Debug, Clone)]
pub(crate) struct StepRequest {
    /// The slot's stepper.
    pub stepper: Arc<Stepper>,
    /// How its previous job ended (an extended completion — a failure a retry policy covers —
    /// must be applied beforehand with [`Stepper::apply_extended`]; here it counts as none).
    pub completion: Option<Completion>,
    /// Whether to reserve a next job.
    pub reserve: bool,
    /// Whether the job it completes was reserved under limits (its shares come back).
    pub limited: bool,
    /// Poll every queue of `queues`, not only those the wake-up state does not know to be
    /// empty (the periodic fallback; read by the batcher).
    pub full: bool,
    /// The slot's queues (one call polls one list: the batcher groups by it).
    pub queues: Arc<QueueKeys>,
}

#[cfg(test)]
impl StepRequest {
    /// A request of `stepper`'s slot, not limited, not full.
    pub(crate) fn new(
        stepper: Arc<Stepper>,
        completion: Option<Completion>,
        reserve: bool,
        queues: &Arc<QueueKeys>,
    ) -> Self {
        StepRequest {
            stepper,
            completion,
            reserve,
            limited: false,
            full: false,
            queues: queues.clone(),
        }
    }
}

/// What the step call answered for one slot — the one reply type of a step, read from the
/// call's reply ([`call_step`]) and handed to the slot as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StepReply {
    /// What the slot got.
    pub reply: Reply,
    /// Whether its completion was applied by this call.
    pub applied: bool,
    /// Whether the call reserved under limits (a job it gave holds shares until it ends).
    pub limited: bool,
}

impl StepReply {
    /// Nothing reserved (`applied`: whether a completion was applied on the way).
    pub(crate) fn empty(applied: bool) -> Self {
        StepReply {
            reply: Reply::Empty,
            applied,
            limited: false,
        }
    }
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

/// What one step call answered: each slot's reply, and what concerns the whole call.
#[derive(Debug, Clone)]
pub(crate) struct CallReply {
    /// Per slot, in the order of the requests.
    pub replies: Vec<StepReply>,
    /// Per queue of the call, in order: what the call found in it.
    pub found: Vec<Found>,
    /// Tracked jobs whose record could not be written, limits that could not be applied
    /// (`<id or key> <why>`); the jobs moved.
    pub tracking_problems: Vec<String>,
    /// When a job held by a rate or window limit here may be released (epoch ms).
    pub release_due: Option<i64>,
}

/// How a completion names the job it completes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JobRef {
    /// By the exact bytes of its worker record (what the step wrote at reserve).
    Record(Vec<u8>),
    /// A claimed job, by the token its promote wrote (its record is too large to send back).
    Token(String),
}

impl JobRef {
    /// The step's completion code (`success` or not) and the argument it compares.
    fn code_and_arg(&self, success: bool) -> (u8, &[u8]) {
        match (self, success) {
            (JobRef::Record(r), true) => (b's', r),
            (JobRef::Record(r), false) => (b'f', r),
            (JobRef::Token(t), true) => (b'S', t.as_bytes()),
            (JobRef::Token(t), false) => (b'F', t.as_bytes()),
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

/// What a job's end deletes besides the job, in the same step (op `x`, `ends.lua`): what the
/// chain's layers decided (the retry layer on a success, the unique layer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ends {
    /// resque-retry's logical key whose attempt counter and failure details go.
    pub retry_key: Option<String>,
    /// The unique job's lock, released while it holds this job's id.
    pub unique: Option<crate::registry::unique::UniqueMark>,
}

impl Ends {
    /// The ends of `retry_key` and `unique`; `None` when there is nothing to delete (a plain
    /// job's end).
    pub(crate) fn of(
        retry_key: Option<String>,
        unique: Option<crate::registry::unique::UniqueMark>,
    ) -> Option<Box<Ends>> {
        (retry_key.is_some() || unique.is_some()).then(|| Box::new(Ends { retry_key, unique }))
    }

    /// The step's four values (step.lua's header): retry counter, retry failure key, unique
    /// lock, unique id (`""` none).
    fn args(&self, keys: &crate::keys::Keys) -> [String; 4] {
        let (counter, failure) = match &self.retry_key {
            Some(k) => (keys.retry_attempts(k), keys.retry_failure(k)),
            None => (String::new(), String::new()),
        };
        let (lock, id) = match &self.unique {
            Some(u) => (keys.unique(&u.key), u.id.clone()),
            None => (String::new(), String::new()),
        };
        [counter, failure, lock, id]
    }
}

/// How the slot's previous job ended.
#[derive(Debug, Clone)]
pub(crate) enum Completion {
    /// Succeeded.
    Success {
        /// The job.
        job: JobRef,
        /// A tracked job's ending (a record.lua or status.lua spec), written with it.
        track: Option<String>,
        /// What the end deletes besides the job (`None`: a plain job).
        ends: Option<Box<Ends>>,
    },
    /// Failed; `entry` is the failure entry to push.
    Failure {
        /// The job.
        job: JobRef,
        /// The failure entry JSON.
        entry: String,
        /// A tracked job's ending, written with it.
        track: Option<String>,
        /// What the end deletes besides the job (`None`: a plain job).
        ends: Option<Box<Ends>>,
    },
    /// A failure a retry policy covers: retried or given up (see [`crate::worker::complete`]).
    Extended(Box<crate::worker::complete::Extended>),
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
            Completion::Failure { .. } | Completion::Extended(_) => false,
        }
    }
}

/// A payload the step claimed for the worker to check (see [`crate::worker::claim`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claim {
    /// The claim's token.
    pub token: String,
    /// The queue it was popped from.
    pub queue: String,
    /// The payload's size in bytes (0 when the step did not look).
    pub size: usize,
}

impl Claim {
    /// Reads the step's `<token> <queue as JSON>\n<bytes>`.
    pub(super) fn parse(data: &[u8]) -> Option<Claim> {
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

/// What the step answered for one slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// A job was reserved (or was already held): its record text, and what a tracked job's
    /// record said.
    Job(Vec<u8>, Option<Started>),
    /// A payload was claimed for the worker to check (or was already claimed).
    Claim(Claim),
    /// Nothing to do in any queue.
    Empty,
    /// `<ns>:pause-all-workers` is set.
    Paused,
    /// On a spread namespace, the limit on the queue had no unit for it: nothing reserved
    /// (ask again when one comes back, [`super::gate`]).
    Limited,
    /// The slot's transition was refused, nothing of it written: a key it needs is unusable.
    Refused(String),
}

/// Numbers the claims of this process's calls.
static CALLS: AtomicU64 = AtomicU64::new(0);

/// Calls the step once for `requests` (slots of one process, polling `queues`), each one's
/// completion applied and next job reserved in order; replies in the same order. An empty
/// `requests` sends nothing. `limits`: the limits' JSON in force (`""` none).
pub(crate) async fn call_step<C: ConnectionLike + Send>(
    con: &mut C,
    queues: &QueueKeys,
    requests: &[StepRequest],
    limits: &str,
) -> RedisResult<CallReply> {
    let Some(first) = requests.first() else {
        return Ok(CallReply {
            replies: Vec::new(),
            found: Vec::new(),
            tracking_problems: Vec::new(),
            release_due: None,
        });
    };
    let shared = &first.stepper;
    let keys = &shared.keys;
    // Slots of one process share their config; steppers made apart (tests) get one for the
    // call.
    let alone;
    let config = if requests
        .iter()
        .all(|r| Arc::ptr_eq(&r.stepper.config, &shared.config))
    {
        &shared.config
    } else {
        let ids: Vec<String> = requests.iter().map(|r| r.stepper.id.clone()).collect();
        alone = StepConfig::new(keys, &ids, &shared.settings);
        &alone
    };
    let now = chrono::Utc::now();
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let slots = requests
        .iter()
        .enumerate()
        .map(|(k, r)| {
            slot_args(
                r,
                if Arc::ptr_eq(config, &r.stepper.config) {
                    r.stepper.index
                } else {
                    k + 1
                },
            )
        })
        .collect();
    let spread = keys.is_spread();
    let mut step = Step {
        // (Spread: a key of the call's slot, which the call is routed by.)
        processed: if spread {
            keys.worker(first.stepper.id())
        } else {
            keys.stat_processed()
        },
        config: &config.digest,
        queue_list: &queues.digest,
        config_text: "",
        queues_text: "",
        now_ms: now.timestamp_millis(),
        run_at: crate::wire::time::run_at(now),
        failed_at: crate::wire::time::failed_at(now),
        // Zero-padded: the limits' held jobs of one millisecond are ordered by it as text.
        token: format!("{:x}.{call:016x}", std::process::id()),
        limits,
        n: queues.index.len(),
        tail: StepTail {
            polled: &queues.index,
            slots,
        },
    };
    // The library answers a config or queue list it does not hold before it writes anything:
    // the same call again, with the texts.
    let v: Vec<Value> = match step.call().invoke_async(con).await {
        Err(e) if config_missed(&e) => {
            step.config_text = &config.text;
            step.queues_text = &queues.text;
            step.call().invoke_async(con).await?
        }
        r => r?,
    };
    if v.len() != 4 * requests.len() + 3 + usize::from(spread) {
        return Err(bad_reply());
    }
    let limited = !limits.is_empty();
    let replies = v[..4 * requests.len()]
        .chunks_exact(4)
        .map(|r| parse_reply(r, limited))
        .collect::<RedisResult<Vec<_>>>()?;
    let tail = &v[4 * requests.len()..];
    let found = match &tail[0] {
        Value::BulkString(flags) => flags
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
    let tracking_problems = match &tail[1] {
        Value::BulkString(p) if !p.is_empty() => {
            crate::scripts::texts::problem_lines(&String::from_utf8_lossy(p))
                .map(String::from)
                .collect()
        }
        _ => Vec::new(),
    };
    let release_due = match &tail[2] {
        Value::BulkString(d) => std::str::from_utf8(d)
            .ok()
            .and_then(|d| d.parse::<f64>().ok())
            .map(|d| d as i64),
        _ => None,
    };
    if spread {
        let failed = match &shared.settings.shared {
            Some(s) => s.add(&tail[3])?,
            None => 0,
        };
        super::spread::after_call(con, requests, failed).await;
    }
    Ok(CallReply {
        replies,
        found,
        tracking_problems,
        release_due,
    })
}

/// Request `r`'s part of the call (slot `index` of the config's slots): its op — the
/// completion's code, `1` to reserve, `t` with a tracked ending, `l` when the job it completes
/// holds limits' shares, and `x` when its end deletes more — and the values that follow it
/// (step.lua's header).
fn slot_args(r: &StepRequest, index: usize) -> StepSlot<'_> {
    let (code, reference, entry, track, ends) = match &r.completion {
        Some(Completion::Success { job, track, ends }) => {
            let (c, a) = job.code_and_arg(true);
            (c, a, None, track.as_deref(), ends)
        }
        Some(Completion::Failure {
            job,
            entry,
            track,
            ends,
        }) => {
            let (c, a) = job.code_and_arg(false);
            (c, a, Some(entry.as_str()), track.as_deref(), ends)
        }
        None | Some(Completion::Extended(_)) => (b'-', &[][..], None, None, &None),
    };
    StepSlot {
        index,
        op: [
            code,
            if r.reserve { b'1' } else { b'0' },
            if track.is_some() { b't' } else { b'-' },
            if r.limited && code != b'-' {
                b'l'
            } else {
                b'-'
            },
        ],
        reference,
        entry,
        track,
        // (Spread: the keys an end deletes are in other slots; the worker deletes them after
        // the call, spread.rs.)
        ends: ends
            .as_ref()
            .filter(|_| !r.stepper.keys().is_spread())
            .map(|e| e.args(r.stepper.keys())),
    }
}

/// Whether `e` is the step's answer that the library does not hold the call's config or queue
/// list (step.lua's `RESQ_NOCONFIG`; nothing was written).
pub(super) fn config_missed(e: &redis::RedisError) -> bool {
    e.code() == Some("RESQ_NOCONFIG")
}

pub(crate) fn bad_reply() -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, "step reply"))
}

/// A slot's reply (tag, applied, data, tracked start); `limited`: whether the call reserved
/// under limits.
fn parse_reply(v: &[Value], limited: bool) -> RedisResult<StepReply> {
    let applied = matches!(v.get(1), Some(Value::Int(1)));
    let data = match v.get(2) {
        Some(Value::BulkString(d)) => d.as_slice(),
        _ => return Err(bad_reply()),
    };
    let reply = match v.first() {
        Some(Value::BulkString(tag)) => match tag.as_slice() {
            b"job" => {
                let started = match v.get(3) {
                    Some(Value::BulkString(s)) => Started::parse(s),
                    _ => None,
                };
                Reply::Job(data.to_vec(), started)
            }
            b"claim" => Reply::Claim(Claim::parse(data).ok_or_else(bad_reply)?),
            b"paused" => Reply::Paused,
            b"error" => Reply::Refused(String::from_utf8_lossy(data).into_owned()),
            _ => Reply::Empty,
        },
        _ => return Err(bad_reply()),
    };
    Ok(StepReply {
        reply,
        applied,
        limited,
    })
}
