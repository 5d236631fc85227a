//! The step script: finish (or fail) a slot's job and reserve its next one in one call — for
//! one slot, or for every slot of the process that is ready at the same moment (see
//! [`super::batch`]).

use crate::keys::Keys;
use crate::wire::record;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Script, Value};
use std::sync::{Arc, LazyLock};

static STEP: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../scripts/step.lua")));

/// The queues a slot polls, resolved to keys and JSON-encoded names.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct QueueKeys {
    /// `(queue name, <ns>:queue:<name>, name as a JSON string)` in priority order.
    pub queues: Vec<(String, String, String)>,
    /// Jesque zset queues among them (see [`super::jesque`]); empty for list-only workers.
    pub jesque: super::jesque::JesqueQueues,
}

impl QueueKeys {
    /// Resolves names to keys.
    pub fn new(keys: &Keys, names: &[String]) -> Self {
        QueueKeys {
            queues: names
                .iter()
                .map(|n| (n.clone(), keys.queue(n), record::encode_queue(n)))
                .collect(),
            jesque: Default::default(),
        }
    }

    /// Resolves names to keys, marking those named in `zsets` as Jesque zset queues.
    pub fn with_jesque(keys: &Keys, names: &[String], zsets: &[String]) -> Self {
        let mut q = Self::new(keys, names);
        q.jesque = super::jesque::JesqueQueues::new(keys, names, zsets);
        q
    }
}

/// How the slot's previous job ended.
#[derive(Debug, Clone)]
pub enum Completion {
    /// Succeeded; `record` is the exact record text it ran under.
    Success {
        /// The record text.
        record: Vec<u8>,
    },
    /// Failed; `entry` is the failure entry to push.
    Failure {
        /// The record text.
        record: Vec<u8>,
        /// The failure entry JSON.
        entry: String,
    },
    /// Ended with a retry or a unique lock to handle (see [`super::complete`]).
    Extended(Box<super::complete::Extended>),
}

impl Completion {
    /// The exact record text the job ran under.
    pub fn record(&self) -> &[u8] {
        match self {
            Completion::Success { record } | Completion::Failure { record, .. } => record,
            Completion::Extended(e) => &e.record,
        }
    }
}

/// What the script answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A job was reserved (or was already held): its record text.
    Job(Vec<u8>),
    /// Nothing to do in any queue.
    Empty,
    /// `<ns>:pause-all-workers` is set.
    Paused,
}

/// The fixed part of one slot's step invocation.
#[derive(Debug, Clone)]
pub struct Stepper {
    /// KEYS[1..=7].
    fixed: [String; 7],
    /// The worker id as a JSON string.
    worker_json: String,
    /// Ruby's processed-counts-failures semantics.
    count_failed: bool,
    /// Key names (for extended completions).
    keys: Keys,
}

impl Stepper {
    /// A stepper for worker `id`.
    pub fn new(keys: &Keys, id: &str, count_failed: bool) -> Self {
        Stepper {
            fixed: [
                keys.worker(id),
                keys.stat_processed(),
                keys.stat_processed_by(id),
                keys.stat_failed(),
                keys.stat_failed_by(id),
                keys.failed(),
                keys.pause_all_workers(),
            ],
            worker_json: record::encode_queue(id),
            count_failed,
            keys: keys.clone(),
        }
    }

    /// Applies an extended completion (retry, unique lock) with its own script; returns
    /// whether it was applied by this call.
    pub async fn apply_extended<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        ext: &super::complete::Extended,
    ) -> RedisResult<bool> {
        super::complete::apply(con, &self.keys, &self.fixed, self.count_failed, ext).await
    }

    /// Applies `completion` (if any) and, when `reserve`, reserves the next job from `queues`:
    /// a batch of one (see [`step_batch`]). Returns the reply and whether the completion was
    /// applied by this call.
    pub async fn step<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        completion: Option<&Completion>,
        reserve: bool,
        queues: &Arc<QueueKeys>,
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
        let mut replies = step_batch(con, queues, std::slice::from_ref(&item)).await?;
        match replies.pop() {
            Some((r, applied)) => Ok((r, applied || extended_applied)),
            None => Err(bad_reply()),
        }
    }
}

/// One slot's part of a step call.
#[derive(Debug, Clone, Copy)]
pub struct StepItem<'a> {
    /// The slot's stepper.
    pub stepper: &'a Stepper,
    /// How its previous job ended (an extended completion must be applied beforehand with
    /// [`Stepper::apply_extended`]; here it counts as none).
    pub completion: Option<&'a Completion>,
    /// Whether to reserve a next job.
    pub reserve: bool,
}

/// Runs the step script once for `items` (slots of one process, polling `queues`), each one's
/// completion applied and next job reserved in order; replies in the same order. An empty
/// `items` sends nothing.
pub async fn step_batch<C: ConnectionLike + Send>(
    con: &mut C,
    queues: &QueueKeys,
    items: &[StepItem<'_>],
) -> RedisResult<Vec<(Reply, bool)>> {
    let Some(first) = items.first() else {
        return Ok(Vec::new());
    };
    let shared = first.stepper;
    let now = chrono::Utc::now();
    let mut inv = STEP.prepare_invoke();
    inv.key(&shared.fixed[1])
        .key(&shared.fixed[3])
        .key(&shared.fixed[5])
        .key(&shared.fixed[6]);
    for (_, key, _) in &queues.queues {
        inv.key(key);
    }
    queues.jesque.append_keys(&mut inv);
    inv.arg(if shared.count_failed { "1" } else { "0" })
        .arg(crate::wire::time::run_at(now))
        .arg(crate::wire::time::failed_at(now))
        .arg(queues.queues.len());
    queues.jesque.append_args(&mut inv, now);
    for (_, _, json) in &queues.queues {
        inv.arg(json.as_str());
    }
    for item in items {
        let s = item.stepper;
        inv.key(&s.fixed[0]).key(&s.fixed[2]).key(&s.fixed[4]);
        match item.completion {
            Some(Completion::Success { record }) => inv.arg("1").arg(record.as_slice()).arg(""),
            Some(Completion::Failure { record, entry }) => {
                inv.arg("2").arg(record.as_slice()).arg(entry.as_str())
            }
            None | Some(Completion::Extended(_)) => inv.arg("0").arg("").arg(""),
        };
        inv.arg(if item.reserve { "1" } else { "0" })
            .arg(s.worker_json.as_str());
    }
    let v: Vec<Value> = inv.invoke_async(con).await?;
    if v.len() != 3 * items.len() {
        return Err(bad_reply());
    }
    v.chunks_exact(3).map(parse_reply).collect()
}

fn bad_reply() -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, "step reply"))
}

fn parse_reply(v: &[Value]) -> RedisResult<(Reply, bool)> {
    let applied = matches!(v.get(1), Some(Value::Int(1)));
    let reply = match v.first() {
        Some(Value::BulkString(tag)) if tag == b"job" => match v.get(2) {
            Some(Value::BulkString(r)) => Reply::Job(r.clone()),
            _ => return Err(bad_reply()),
        },
        Some(Value::BulkString(tag)) if tag == b"paused" => Reply::Paused,
        Some(Value::BulkString(_)) => Reply::Empty,
        _ => return Err(bad_reply()),
    };
    Ok((reply, applied))
}
