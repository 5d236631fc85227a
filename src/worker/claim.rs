//! Claimed payloads: the ones the step script does not check inside Redis.
//!
//! Checking a payload (UTF-8, JSON, an object with a class) is linear in its size, and Redis
//! runs one script at a time: a worker that checked a 20 MB payload inside Redis would hold
//! every client of that Redis for seconds. So the step script checks a payload itself only up
//! to [`super::step::CHECKED_IN_REDIS`] bytes and [`super::step::CHARS_CHECKED_IN_REDIS`]
//! non-ASCII characters; any other payload it *claims*: moves it, in the same atomic step that
//! pops it, to the slot's claim key `<ns>:resq:claim:<id>` (`<token> <queue as JSON>\n` then the
//! payload bytes), out of every queue and every worker record, where no Ruby, Java or Node
//! process looks. The slot then
//!
//! 1. [`read`]s the payload in chunks of [`CHUNK`] bytes (`GETRANGE`), so neither Redis nor the
//!    shared connection ever handles it in one piece, and the worker's peak memory stays near
//!    the payload's size;
//! 2. checks it ([`check`], the same rules as the script), and
//! 3. [`promote`]s it: a good payload becomes the slot's worker record (built inside Redis from
//!    the claim, so the bytes never travel back) plus a token key that later completions name
//!    the job by; a bad one becomes a `Resq::MalformedPayload` failure entry. Either way in one
//!    atomic step, so a malformed payload never becomes a record that breaks Ruby's prune or
//!    resque-web.
//!
//! A slot that stops before promoting [`unclaim`]s: the payload goes back to the head of its
//! queue, byte for byte. A claim left by a process that died is put back by pruning. Claimed
//! jobs are rare (large or unusual payloads) and cost one more round trip than others.

use super::step::{Claim, Stepper};
use crate::keys::Keys;
use crate::wire::payload::{Payload, PayloadError};
use redis::aio::ConnectionLike;
use redis::RedisResult;

/// Bytes read per `GETRANGE`.
pub const CHUNK: usize = 1024 * 1024;

/// Most bytes of a malformed claimed payload quoted in its failure entry.
pub const QUOTED: usize = 64 * 1024;

/// Reads the payload of `claim` (slot `stepper`'s claim key); `None` when the claim is no
/// longer there (a pruner put it back).
pub async fn read<C: ConnectionLike + Send>(
    con: &mut C,
    stepper: &Stepper,
    claim: &Claim,
) -> RedisResult<Option<Vec<u8>>> {
    let key = stepper.keys().claim(stepper.id());
    let header = format!("{} ", claim.token);
    let mut out = Vec::with_capacity(claim.size);
    let end = claim.header_len + claim.size;
    let mut at = 0;
    while at < end {
        let to = (at + CHUNK).min(end);
        let chunk: Vec<u8> = redis::cmd("GETRANGE")
            .arg(&key)
            .arg(at)
            .arg(to - 1)
            .query_async(con)
            .await?;
        if at == 0 {
            // The claim is immutable while its token stands; a different start means it is gone.
            if !chunk.starts_with(header.as_bytes()) || chunk.len() < claim.header_len {
                return Ok(None);
            }
            out.extend_from_slice(&chunk[claim.header_len..]);
        } else {
            out.extend_from_slice(&chunk);
        }
        if chunk.len() < to - at {
            return Ok(None);
        }
        at = to;
    }
    Ok(Some(out))
}

/// Checks a claimed payload with the step script's rules; the bytes come back with the reason
/// when it cannot run. A good payload is decoded without copying its text.
pub fn check(bytes: Vec<u8>) -> Result<Payload, (PayloadError, Vec<u8>)> {
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => return Err((PayloadError::Utf8, e.into_bytes())),
    };
    // The shape first, borrowing the text, so a refusal still has the bytes to quote.
    if let Err(why) = probe(&text) {
        return Err((why, text.into_bytes()));
    }
    Payload::from_string(text).map_err(|why| (why, Vec::new()))
}

/// What the decoder would refuse, found without decoding the payload's values.
fn probe(text: &str) -> Result<(), PayloadError> {
    use serde_json::value::RawValue;
    #[derive(serde::Deserialize)]
    struct Shape<'a> {
        #[serde(borrow)]
        class: Option<&'a RawValue>,
        #[serde(borrow)]
        args: Option<&'a RawValue>,
    }
    let value: &RawValue =
        serde_json::from_str(text).map_err(|e| PayloadError::Json(e.to_string()))?;
    if !value.get().starts_with('{') {
        return Err(PayloadError::NotObject);
    }
    let shape: Shape<'_> =
        serde_json::from_str(value.get()).map_err(|e| PayloadError::Json(e.to_string()))?;
    match shape.class.map(RawValue::get) {
        Some(c) if c.starts_with('"') && c != "\"\"" => {}
        _ => return Err(PayloadError::NoClass),
    }
    match shape.args.map(RawValue::get) {
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

/// The failure entry of a claimed payload that is not a job: Resque's shape with `payload`
/// null, as the step script writes it, quoting at most [`QUOTED`] bytes of it.
pub fn failure_entry(why: &PayloadError, bytes: &[u8], queue: &str, worker: &str) -> String {
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
pub enum Promoted {
    /// The record was written (now, or by an earlier call whose reply was lost).
    Run,
    /// The failure entry was pushed.
    Failed,
    /// The claim is gone (a pruner put the payload back in its queue): do not run it.
    Gone,
}

/// Promotes slot `stepper`'s claim `claim`: to its worker record (`failure` = `None`) or to
/// the failure entry given.
pub async fn promote<C: ConnectionLike + Send>(
    con: &mut C,
    stepper: &Stepper,
    claim: &Claim,
    failure: Option<&str>,
) -> RedisResult<Promoted> {
    let keys = stepper.keys();
    let id = stepper.id();
    let status: String = crate::scripts::PROMOTE
        .key(keys.worker(id))
        .key(keys.claim(id))
        .key(keys.claim_token(id))
        .key(keys.claims())
        .key(keys.failed())
        .key(keys.stat_processed())
        .key(keys.stat_processed_by(id))
        .key(keys.stat_failed())
        .key(keys.stat_failed_by(id))
        .arg(&claim.token)
        .arg(if failure.is_some() { "fail" } else { "run" })
        .arg(crate::wire::time::run_at(chrono::Utc::now()))
        .arg(failure.unwrap_or(""))
        .arg(if stepper.count_failed() { "1" } else { "0" })
        .arg(id)
        .invoke_async(con)
        .await?;
    Ok(match status.as_str() {
        "promoted" => Promoted::Run,
        "failed" => Promoted::Failed,
        _ => Promoted::Gone,
    })
}

/// Puts worker `id`'s claim back at the head of `queue` (`token` = `""`: whatever claim is
/// there). Returns whether a payload went back now.
pub async fn unclaim<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    id: &str,
    token: &str,
    queue: &str,
) -> RedisResult<bool> {
    let n: i64 = crate::scripts::UNCLAIM
        .key(keys.claim(id))
        .key(keys.claims())
        .key(keys.queues())
        .key(keys.queue(queue))
        .arg(token)
        .arg(id)
        .arg(queue)
        .invoke_async(con)
        .await?;
    Ok(n == 1)
}

/// The queue named in worker `id`'s claim header, when it holds a claim (for pruning, which
/// finds claims by worker id).
pub async fn claimed_queue<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    id: &str,
) -> RedisResult<Option<String>> {
    let head: Vec<u8> = redis::cmd("GETRANGE")
        .arg(keys.claim(id))
        .arg(0)
        .arg(1023)
        .query_async(con)
        .await?;
    let text = String::from_utf8_lossy(&head);
    Ok(text
        .split_once('\n')
        .and_then(|(header, _)| header.split_once(' '))
        .and_then(|(_, q)| serde_json::from_str(q).ok()))
}
