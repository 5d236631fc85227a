//! One step call: the arguments of a batch of slots' steps, the call, and its reply read back
//! (the library's `step`).

use super::*;

/// Numbers the claims of this process's calls.
static CALLS: AtomicU64 = AtomicU64::new(0);

/// Runs the step once for `items` (slots of one process, polling `queues`), each one's
/// completion applied and next job reserved in order; replies in the same order. An empty
/// `items` sends nothing. `limits`: the limits' JSON in force (`""` none).
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
        });
    };
    let shared = first.stepper;
    let keys = &shared.keys;
    // Slots of one process share their config; steppers made apart (tests) get one for the
    // call.
    let alone;
    let config = if items
        .iter()
        .all(|i| Arc::ptr_eq(&i.stepper.config, &shared.config))
    {
        &shared.config
    } else {
        let ids: Vec<String> = items.iter().map(|i| i.stepper.id.clone()).collect();
        alone = StepConfig::new(keys, &ids, &shared.settings);
        &alone
    };
    let own_index = |k: usize, s: &Stepper| {
        if Arc::ptr_eq(config, &s.config) {
            s.index
        } else {
            k + 1
        }
    };
    let now = chrono::Utc::now();
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let mut inv = crate::scripts::STEP.key(keys.stat_processed());
    inv.arg(&*config.settings)
        .arg(&*config.slots)
        .arg(&*queues.text)
        .arg(now.timestamp_millis())
        .arg(crate::wire::time::run_at(now))
        .arg(crate::wire::time::failed_at(now))
        // Zero-padded: the limits' held jobs of one millisecond are ordered by it as text.
        .arg(format!("{:x}.{call:016x}", std::process::id()))
        .arg(limits)
        .arg(queues.index.len());
    for i in &queues.index {
        inv.arg(*i);
    }
    for (k, item) in items.iter().enumerate() {
        let (code, reference, entry, track) = match item.completion {
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
        let op = [
            code,
            if item.reserve { b'1' } else { b'0' },
            if track.is_some() { b't' } else { b'-' },
            if item.limited && code != b'-' {
                b'l'
            } else {
                b'-'
            },
        ];
        inv.arg(own_index(k, item.stepper))
            .arg(&op[..])
            .arg(reference);
        if let Some(e) = entry {
            inv.arg(e);
        }
        if let Some(t) = track {
            inv.arg(t);
        }
    }
    let v: Vec<Value> = inv.invoke_async(con).await?;
    if v.len() != 4 * items.len() + 3 {
        return Err(bad_reply());
    }
    let replies = v[..4 * items.len()]
        .chunks_exact(4)
        .map(parse_reply)
        .collect::<RedisResult<Vec<_>>>()?;
    let tail = &v[4 * items.len()..];
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
    Ok(StepOutcome {
        replies,
        found,
        tracking_problems,
        release_due,
    })
}

pub(super) fn bad_reply() -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, "step reply"))
}

/// A slot's reply (tag, applied, data, tracked start): what it got, and whether its completion
/// was applied.
fn parse_reply(v: &[Value]) -> RedisResult<(Reply, bool)> {
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
    Ok((reply, applied))
}
