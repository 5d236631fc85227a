//! One step call: the arguments of a batch of slots' requests (the library's `step`, built by
//! its typed builder [`crate::scripts::Step`]), the call, and its reply read back.

use super::*;
use crate::scripts::{Step, StepSlot, StepTail};

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
    let v: Vec<Value> = Step {
        processed: keys.stat_processed(),
        settings: &config.settings,
        slots: &config.slots,
        queues: &queues.text,
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
    }
    .call()
    .invoke_async(con)
    .await?;
    if v.len() != 4 * requests.len() + 3 {
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
        Value::BulkString(p) if !p.is_empty() => String::from_utf8_lossy(p)
            .lines()
            .map(String::from)
            .collect(),
        _ => Vec::new(),
    };
    let release_due = match &tail[2] {
        Value::BulkString(d) => std::str::from_utf8(d)
            .ok()
            .and_then(|d| d.parse::<f64>().ok())
            .map(|d| d as i64),
        _ => None,
    };
    Ok(CallReply {
        replies,
        found,
        tracking_problems,
        release_due,
    })
}

/// Request `r`'s part of the call (slot `index` of the call's slots text): its op — the
/// completion's code, `1` to reserve, `t` with a tracked ending, `l` when the job it completes
/// holds limits' shares — and the values that follow it (step.lua's header).
fn slot_args(r: &StepRequest, index: usize) -> StepSlot<'_> {
    let (code, reference, entry, track) = match &r.completion {
        Some(Completion::Success { job, track }) => {
            let (c, a) = job.code_and_arg(true);
            (c, a, None, track.as_deref())
        }
        Some(Completion::Failure { job, entry, track }) => {
            let (c, a) = job.code_and_arg(false);
            (c, a, Some(entry.as_str()), track.as_deref())
        }
        None | Some(Completion::Extended(_)) => (b'-', &[][..], None, None),
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
    }
}

pub(super) fn bad_reply() -> redis::RedisError {
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
