//! Claimed payloads: the ones the step script does not check inside Redis.
//!
//! Checking a payload (UTF-8, JSON, an object with a class) is linear in its size, and Redis
//! runs one script at a time: a worker that checked a 20 MB payload inside Redis would hold
//! every client of that Redis for seconds. So the step script checks a payload itself only up
//! to [`super::step::CHECKED_IN_REDIS`] bytes and [`super::step::CHARS_CHECKED_IN_REDIS`]
//! non-ASCII characters; any other payload it *claims*: moves it, in the same atomic step that
//! takes it from its queue, to the slot's claim key `<ns>:resq:claim:<id>` (a list: the payload,
//! the claim's token, the queue as JSON), out of every queue and every worker record, where no
//! Ruby, Java or Node process looks. A large payload at the head of a queue never even passes
//! through the script (it is moved inside Redis). The slot then, on a connection of its own:
//!
//! 1. [`read`]s the payload with a plain `LINDEX` (what a Ruby worker's `LPOP` costs Redis),
//!    one large claim at a time per process, so memory grows with one payload, not with the
//!    number of slots;
//! 2. checks it ([`check`], the same rules as the script, without decoding it), and
//! 3. [`promote`]s it: a good payload becomes the slot's worker record plus a token key that
//!    later completions name the job by (a `WATCH`/`MULTI` on the claim key, so the bytes go
//!    to Redis once, as a plain `SET`, never through a script); a bad one becomes a
//!    `Resq::MalformedPayload` failure entry (`promote.lua`). Either way in one atomic step, so
//!    a malformed payload never becomes a record that breaks Ruby's prune or resque-web.
//!
//! A slot that stops before promoting [`unclaim`]s: the payload goes back to the head of its
//! queue, byte for byte. A claim left by a process that died is put back by pruning. Claimed
//! jobs are rare (large or unusual payloads) and cost two more round trips than others.

use super::step::{Claim, Stepper};
use crate::keys::Keys;
use crate::wire::payload::PayloadError;
use redis::aio::ConnectionLike;
use redis::RedisResult;

/// Most bytes of a malformed claimed payload quoted in its failure entry.
pub(crate) const QUOTED: usize = 64 * 1024;

/// One claim read, checked and promoted at a time per process (the memory they take is a few
/// times their size).
pub(crate) static ONE_AT_A_TIME: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// Payloads at least this large give their memory back to the system once run.
pub(crate) const LARGE: usize = 1024 * 1024;

/// Reads the payload of `claim` (slot `stepper`'s claim key); `None` when the claim is no
/// longer this one (a pruner put it back).
pub(crate) async fn read<C: ConnectionLike + Send>(
    con: &mut C,
    stepper: &Stepper,
    claim: &Claim,
) -> RedisResult<Option<Vec<u8>>> {
    let key = stepper.keys().claim(stepper.id());
    let token: Option<String> = redis::cmd("LINDEX")
        .arg(&key)
        .arg(1)
        .query_async(con)
        .await?;
    if token.as_deref() != Some(claim.token.as_str()) {
        return Ok(None);
    }
    redis::cmd("LINDEX").arg(&key).arg(0).query_async(con).await
}

/// Checks a claimed payload with the step script's rules without decoding it (no copy of its
/// text, no tree of values: those come later, once it is promoted); the bytes come back with
/// the reason when it cannot run.
pub(crate) fn check(bytes: Vec<u8>) -> Result<String, (PayloadError, Vec<u8>)> {
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => return Err((PayloadError::Utf8, e.into_bytes())),
    };
    match probe(&text) {
        Ok(()) => Ok(text),
        Err(why) => Err((why, text.into_bytes())),
    }
}

/// What the decoder would refuse, found without decoding the payload's values: the rules of
/// [`Payload::from_raw`](crate::wire::Payload) (docs/architecture.md, "A valid payload"), read as a
/// map of its members' raw texts — a key given twice counts as its last, as the decoder reads
/// it.
fn probe(text: &str) -> Result<(), PayloadError> {
    use serde_json::value::RawValue;
    use std::collections::HashMap;
    // (The decoder's reading: every string unescaped, the nesting limit — which a raw value,
    // skipped over, is not held to.)
    serde_json::from_str::<Valid>(text).map_err(|e| PayloadError::Json(e.to_string()))?;
    let value: &RawValue =
        serde_json::from_str(text).map_err(|e| PayloadError::Json(e.to_string()))?;
    if !value.get().starts_with('{') {
        return Err(PayloadError::NotObject);
    }
    let members: HashMap<String, &RawValue> =
        serde_json::from_str(value.get()).map_err(|e| PayloadError::Json(e.to_string()))?;
    match members.get("class").map(|c| c.get()) {
        Some(c) if c.starts_with('"') && c != "\"\"" => {}
        _ => return Err(PayloadError::NoClass),
    }
    match members.get("args").map(|a| a.get()) {
        None | Some("null") => Ok(()),
        Some(a) if a.starts_with('[') => Ok(()),
        Some(a) => Err(PayloadError::ArgsNotArray(match a.as_bytes().first() {
            Some(b'{') => "an object",
            Some(b'"') => "a string",
            Some(b't' | b'f') => "a boolean",
            _ => "a number",
        })),
    }
}

/// Any JSON value, read through as the decoder reads it (each string unescaped, numbers
/// parsed, the nesting limit checked) and kept nowhere.
struct Valid;

impl<'de> serde::Deserialize<'de> for Valid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Valid)
    }
}

impl<'de> serde::de::Visitor<'de> for Valid {
    type Value = Valid;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Valid, E> {
        Ok(Valid)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Valid, E> {
        Ok(Valid)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Valid, E> {
        Ok(Valid)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Valid, E> {
        Ok(Valid)
    }

    fn visit_str<E>(self, _: &str) -> Result<Valid, E> {
        Ok(Valid)
    }

    fn visit_unit<E>(self) -> Result<Valid, E> {
        Ok(Valid)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Valid, A::Error> {
        while a.next_element::<Valid>()?.is_some() {}
        Ok(Valid)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Valid, A::Error> {
        while a.next_entry::<Valid, Valid>()?.is_some() {}
        Ok(Valid)
    }
}

/// The failure entry of a claimed payload that is not a job: Resque's shape with `payload`
/// null, as the step script writes it, quoting at most [`QUOTED`] bytes of it.
pub(crate) fn failure_entry(why: &PayloadError, bytes: &[u8], queue: &str, worker: &str) -> String {
    let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(QUOTED)]);
    let mut message = format!("{why}: {shown}");
    if bytes.len() > QUOTED {
        message.push_str(&format!("… ({} bytes in all)", bytes.len()));
    }
    let err = crate::registry::JobError::new("Resq::MalformedPayload", message);
    super::perform::failure_entry(None, queue, worker, &err)
}

/// What [`promote`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Promoted {
    /// The record was written (now, or by an earlier call whose reply was lost).
    Run,
    /// The failure entry was pushed.
    Failed,
    /// The claim is gone (a pruner put the payload back in its queue): do not run it.
    Gone,
}

/// Promotes slot `stepper`'s claim `claim` to its worker record for `payload` (the checked
/// payload), on `con`, a connection of the slot's own (`WATCH` is per connection).
pub(crate) async fn promote<C: ConnectionLike + Send>(
    con: &mut C,
    stepper: &Stepper,
    claim: &Claim,
    payload: &str,
) -> RedisResult<Promoted> {
    let keys = stepper.keys();
    let id = stepper.id();
    let (claim_key, record_key, token_key) =
        (keys.claim(id), keys.worker(id), keys.claim_token(id));
    let record = RecordArg {
        queue_json: crate::wire::record::encode_queue(&claim.queue),
        run_at: crate::wire::time::run_at(chrono::Utc::now()),
        payload,
    };
    // Another writer of these keys (a pruner putting the claim back) makes EXEC fail: look
    // again.
    for _ in 0..10 {
        let _: () = redis::cmd("WATCH")
            .arg(&claim_key)
            .arg(&record_key)
            .arg(&token_key)
            .arg(keys.claims())
            .query_async(con)
            .await?;
        let claims_key = keys.claims();
        let wants = [
            ("list", &claim_key),
            ("string", &record_key),
            ("string", &token_key),
            ("set", &claims_key),
        ];
        let types: Vec<String> = {
            let mut p = redis::pipe();
            for (_, k) in &wants {
                p.cmd("TYPE").arg(*k);
            }
            p.query_async(con).await?
        };
        for ((want, key), got) in wants.iter().zip(&types) {
            if got != "none" && got != want {
                let _: () = redis::cmd("UNWATCH").query_async(con).await?;
                return Err(redis::make_extension_error(
                    "WRONGTYPE".into(),
                    Some(format!("{key} is a {got}, not a {want}")),
                ));
            }
        }
        let token: Option<String> = redis::cmd("LINDEX")
            .arg(&claim_key)
            .arg(1)
            .query_async(con)
            .await?;
        if token.as_deref() != Some(claim.token.as_str()) {
            let held: Option<String> = redis::cmd("GET").arg(&token_key).query_async(con).await?;
            let _: () = redis::cmd("UNWATCH").query_async(con).await?;
            return Ok(if held.as_deref() == Some(claim.token.as_str()) {
                Promoted::Run
            } else {
                Promoted::Gone
            });
        }
        let done: Option<redis::Value> = redis::pipe()
            .atomic()
            .cmd("SET")
            .arg(&record_key)
            .arg(&record)
            .ignore()
            .set(&token_key, &claim.token)
            .ignore()
            .del(&claim_key)
            .ignore()
            .srem(keys.claims(), id)
            .ignore()
            .query_async(con)
            .await?;
        if done.is_some() {
            return Ok(Promoted::Run);
        }
    }
    Err(redis::RedisError::from((
        redis::ErrorKind::Client,
        "promote: the claim kept changing",
    )))
}

/// A worker record written straight into the command, piece by piece (the record's
/// [`crate::wire::record::head`], the payload, `}`), so a large payload is not copied once more
/// to build it.
struct RecordArg<'a> {
    /// The queue name as JSON.
    queue_json: String,
    /// The record's `run_at`.
    run_at: String,
    /// The payload's exact text.
    payload: &'a str,
}

impl redis::ToRedisArgs for RecordArg<'_> {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        use std::io::Write;
        let mut w = out.writer_for_next_arg();
        // Writing into the command's own buffer cannot fail.
        let _ = w.write_all(crate::wire::record::head(&self.queue_json, &self.run_at).as_bytes());
        let _ = w.write_all(self.payload.as_bytes());
        let _ = w.write_all(b"}");
    }
}

/// Turns slot `stepper`'s claim `claim` into the failure entry `entry` (a malformed payload).
pub(crate) async fn fail<C: ConnectionLike + Send>(
    con: &mut C,
    stepper: &Stepper,
    claim: &Claim,
    entry: &str,
) -> RedisResult<Promoted> {
    let keys = stepper.keys();
    let id = stepper.id();
    let status: String = crate::scripts::Promote {
        claim: keys.claim(id),
        claims: keys.claims(),
        failed: keys.failed(),
        processed: keys.stat_processed(),
        processed_by: keys.stat_processed_by(id),
        failed_count: keys.stat_failed(),
        failed_by: keys.stat_failed_by(id),
        token: &claim.token,
        entry,
        count_failed: if stepper.count_failed() { "1" } else { "0" },
        worker: id,
    }
    .call()
    .invoke_async(con)
    .await?;
    Ok(match status.as_str() {
        "failed" => Promoted::Failed,
        _ => Promoted::Gone,
    })
}

/// Puts worker `id`'s claim back at the head of `queue` (`token` = `""`: whatever claim is
/// there). Returns whether a payload went back now.
pub(crate) async fn unclaim<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    id: &str,
    token: &str,
    queue: &str,
) -> RedisResult<bool> {
    let n: i64 = crate::scripts::Unclaim {
        claim: keys.claim(id),
        claims: keys.claims(),
        queues: keys.queues(),
        queue: keys.queue(queue),
        token,
        worker: id,
        queue_name: queue,
    }
    .call()
    .invoke_async(con)
    .await?;
    Ok(n == 1)
}

/// The queue named in worker `id`'s claim, when it holds one (for pruning, which finds claims
/// by worker id).
pub(crate) async fn claimed_queue<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    id: &str,
) -> RedisResult<Option<String>> {
    let q: Option<String> = redis::cmd("LINDEX")
        .arg(keys.claim(id))
        .arg(2)
        .query_async(con)
        .await?;
    Ok(q.and_then(|q| serde_json::from_str(&q).ok()))
}

/// What the limits said about a claimed job.
#[derive(Debug)]
pub(crate) enum Limited {
    /// It may run (its shares are taken).
    Admitted,
    /// A limit holds it (its payload moved to a list of its own); it may be released at this
    /// time (ms) when a rate or window limit holds it.
    Held(Option<i64>),
    /// The claim is not this slot's any more.
    Gone,
    /// A limit's key template names what the job does not have.
    Bad(String),
}

/// The limits of a claimed job (`limits`: the scripts' JSON), decided before it is promoted:
/// see `limit_claim.lua`. Only the class and the small args go to the script.
pub(crate) async fn limit<C: ConnectionLike + Send>(
    con: &mut C,
    stepper: &Stepper,
    claim: &Claim,
    payload: &crate::wire::Payload,
    limits: &str,
) -> RedisResult<Limited> {
    let args: Vec<serde_json::Value> = payload
        .args()
        .iter()
        .map(|a| {
            if serde_json::to_string(a).map_or(usize::MAX, |t| t.len()) <= 1024 {
                a.clone()
            } else {
                serde_json::Value::Null
            }
        })
        .collect();
    let view = serde_json::json!({"class": payload.class(), "args": args}).to_string();
    let keys = stepper.keys();
    let now = chrono::Utc::now().timestamp_millis();
    let reply: Vec<String> = crate::scripts::LimitClaim {
        claim: keys.claim(stepper.id()),
        claims: keys.claims(),
        prefix: keys.prefix(),
        limits,
        view,
        queue_name: &claim.queue,
        worker: stepper.id(),
        now_ms: now,
        token: &claim.token,
        sequence: format!("{}.{now}", claim.token),
    }
    .call()
    .invoke_async(con)
    .await?;
    Ok(match reply.first().map(String::as_str) {
        Some("ok") => Limited::Admitted,
        Some("held") => Limited::Held(
            reply
                .get(1)
                .and_then(|d| d.parse::<f64>().ok())
                .map(|d| d as i64),
        ),
        Some("bad") => Limited::Bad(reply.get(1).cloned().unwrap_or_default()),
        _ => Limited::Gone,
    })
}
