//! Reading tracked jobs' records from Redis, one or a page at a time (pipelined): resq's own
//! hash (`<ns>:resq:job:<id>`) and resque-status's JSON text (`<ns>:status:<id>`).
//!
//! * A key that holds something that is not a record (another type; a text that is no JSON
//!   object) reads as [`Found::Unreadable`], naming the key; one record's garbage never fails
//!   the others read with it.
//! * A record of resq's own saying `working` whose worker is gone reads `failed` ("worker …
//!   is gone"): Ruby's pruner removes a dead worker (and fails its job in `<ns>:failed`)
//!   without touching the record. The worker is there while it is in `<ns>:workers` or its
//!   worker record still holds the job; the record is read again before it is judged, so a
//!   job that ended meanwhile reads as it ended.
//! * `stop_requested` of a resque-status job that has not finished: its id in `<ns>:_kill`.

use super::state::BadField;
use super::{JobId, JobStatus, State};
use crate::error::{Error, Result};
use crate::keys::Keys;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// Which record to look for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    /// resq's own (the hash).
    Own,
    /// resque-status's (the JSON text).
    Statused,
    /// resq's own, else resque-status's.
    Either,
}

/// What a read found for one id.
#[derive(Debug)]
pub(crate) enum Found {
    /// A record.
    Record(Box<JobStatus>),
    /// No record.
    Absent,
    /// A key holds something that is not a record: the key and what is wrong.
    Unreadable(String),
}

/// Reads job `id`'s record (resq's own first).
pub(crate) async fn find<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    id: &JobId,
) -> Result<Found> {
    let mut found = read_many(con, keys, &[(id.clone(), Want::Either)]).await?;
    Ok(found.pop().unwrap_or(Found::Absent))
}

/// Reads the records of `wanted`, in its order, in a few pipelined round trips.
pub(crate) async fn read_many<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    wanted: &[(JobId, Want)],
) -> Result<Vec<Found>> {
    let mut out: Vec<Option<Found>> = wanted.iter().map(|_| None).collect();
    // A wrong-typed key's index, and the key, to name its type in one more round trip.
    let mut wrong: Vec<(usize, String, &str)> = Vec::new();
    let own: Vec<usize> = (0..wanted.len())
        .filter(|&i| wanted[i].1 != Want::Statused)
        .collect();
    let replies = each(
        con,
        own.iter().map(|&i| {
            let mut c = redis::cmd("HGETALL");
            c.arg(keys.job_record(wanted[i].0.as_str()));
            c
        }),
    )
    .await?;
    for (&i, r) in own.iter().zip(replies) {
        let id = &wanted[i].0;
        match r {
            Ok(v) => {
                if let Some(f) = pairs(v).filter(|f| !f.is_empty()) {
                    out[i] = Some(Found::Record(Box::new(JobStatus::from_fields(id, &f))));
                }
            }
            Err(e) if e.code() == Some("WRONGTYPE") => {
                wrong.push((i, keys.job_record(id.as_str()), "a record (a hash)"));
                out[i] = Some(Found::Absent);
            }
            Err(e) => return Err(e.into()),
        }
    }
    let statused: Vec<usize> = (0..wanted.len())
        .filter(|&i| out[i].is_none() && wanted[i].1 != Want::Own)
        .collect();
    let replies = each(
        con,
        statused.iter().map(|&i| {
            let mut c = redis::cmd("GET");
            c.arg(keys.resque_status(wanted[i].0.as_str()));
            c
        }),
    )
    .await?;
    for (&i, r) in statused.iter().zip(replies) {
        let id = &wanted[i].0;
        let key = keys.resque_status(id.as_str());
        out[i] = Some(match r {
            Ok(Value::Nil) => Found::Absent,
            Ok(v) => match bytes(v) {
                Some(b) => status_record(id, &key, &b),
                None => Found::Unreadable(format!("{key} holds no text")),
            },
            Err(e) if e.code() == Some("WRONGTYPE") => {
                wrong.push((i, key, "a resque-status record (a string)"));
                Found::Absent
            }
            Err(e) => return Err(e.into()),
        });
    }
    if !wrong.is_empty() {
        let types = each(
            con,
            wrong.iter().map(|(_, k, _)| {
                let mut c = redis::cmd("TYPE");
                c.arg(k);
                c
            }),
        )
        .await?;
        for ((i, key, what), t) in wrong.into_iter().zip(types) {
            let t = t.ok().and_then(bytes).map_or_else(
                || "?".to_string(),
                |b| String::from_utf8_lossy(&b).into_owned(),
            );
            out[i] = Some(Found::Unreadable(format!("{key} holds a {t}, not {what}")));
        }
    }
    let mut out: Vec<Found> = out
        .into_iter()
        .map(|f| f.unwrap_or(Found::Absent))
        .collect();
    gone_workers(con, keys, &mut out).await?;
    stop_requests(con, keys, &mut out).await?;
    Ok(out)
}

/// A resque-status record read from `key`'s bytes.
fn status_record(id: &JobId, key: &str, b: &[u8]) -> Found {
    let text = String::from_utf8_lossy(b);
    match JobStatus::parse(id, &text) {
        Some(mut s) => {
            if std::str::from_utf8(b).is_err() {
                s.unreadable.push(BadField {
                    field: "(record)".into(),
                    holds: "bytes that are not UTF-8".into(),
                });
            }
            Found::Record(Box::new(s))
        }
        None => Found::Unreadable(format!(
            "{key} holds {:?}, not a resque-status record (a JSON object)",
            text.chars().take(60).collect::<String>()
        )),
    }
}

/// Records of resq's own saying `working` whose worker is gone (not in `<ns>:workers`, and its
/// worker record does not hold the job) read `failed`, once a second read shows them still
/// working on that worker.
async fn gone_workers<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    out: &mut [Found],
) -> Result<()> {
    let working = |f: &Found| match f {
        Found::Record(s) if !s.statused && s.state == State::Working => s.worker.clone(),
        _ => None,
    };
    let mut doubt: Vec<(usize, String)> = out
        .iter()
        .enumerate()
        .filter_map(|(i, f)| working(f).map(|w| (i, w)))
        .collect();
    if doubt.is_empty() {
        return Ok(());
    }
    let member = each(
        con,
        doubt.iter().map(|(_, w)| {
            let mut c = redis::cmd("SISMEMBER");
            c.arg(keys.workers()).arg(w);
            c
        }),
    )
    .await?;
    // An error (a key of the wrong type) says nothing: the worker is taken as there.
    doubt = doubt
        .into_iter()
        .zip(member)
        .filter(|(_, m)| matches!(m, Ok(Value::Int(0)) | Ok(Value::Boolean(false))))
        .map(|(d, _)| d)
        .collect();
    let records = each(
        con,
        doubt.iter().map(|(_, w)| {
            let mut c = redis::cmd("GET");
            c.arg(keys.worker(w));
            c
        }),
    )
    .await?;
    doubt = doubt
        .into_iter()
        .zip(records)
        .filter(|((i, _), r)| {
            let id = match &out[*i] {
                Found::Record(s) => s.id.as_str().to_string(),
                _ => return false,
            };
            match r {
                Ok(Value::Nil) => true,
                Ok(v) => bytes(v.clone()).is_some_and(|b| !contains(&b, id.as_bytes())),
                Err(_) => false,
            }
        })
        .map(|(d, _)| d)
        .collect();
    if doubt.is_empty() {
        return Ok(());
    }
    let ids: Vec<(JobId, Want)> = doubt
        .iter()
        .filter_map(|(i, _)| match &out[*i] {
            Found::Record(s) => Some((s.id.clone(), Want::Own)),
            _ => None,
        })
        .collect();
    let again = each(
        con,
        ids.iter().map(|(id, _)| {
            let mut c = redis::cmd("HGETALL");
            c.arg(keys.job_record(id.as_str()));
            c
        }),
    )
    .await?;
    for (((i, w), (id, _)), r) in doubt.into_iter().zip(&ids).zip(again) {
        let fresh = r
            .ok()
            .and_then(pairs)
            .filter(|f| !f.is_empty())
            .map(|f| JobStatus::from_fields(id, &f));
        out[i] = match fresh {
            None => Found::Absent,
            Some(mut s) => {
                if s.state == State::Working && s.worker.as_deref() == Some(w.as_str()) {
                    s.state = State::Failed;
                    s.status = State::Failed.resque_status().to_string();
                    s.error = Some(format!(
                        "worker {w} is gone: it is no longer registered and its job never \
                         ended (a pruner removed it)"
                    ));
                    s.stop_requested = false;
                }
                Found::Record(Box::new(s))
            }
        };
    }
    Ok(())
}

/// `stop_requested` of resque-status jobs that have not finished: their id in `<ns>:_kill`.
async fn stop_requests<C: ConnectionLike + Send>(
    con: &mut C,
    keys: &Keys,
    out: &mut [Found],
) -> Result<()> {
    let asked: Vec<usize> = (0..out.len())
        .filter(|&i| matches!(&out[i], Found::Record(s) if s.statused && !s.state.is_final()))
        .collect();
    if asked.is_empty() {
        return Ok(());
    }
    let mut c = redis::cmd("SMISMEMBER");
    c.arg(keys.resque_status_kill());
    for &i in &asked {
        if let Found::Record(s) = &out[i] {
            c.arg(s.id.as_str());
        }
    }
    let member: Vec<bool> = match c.query_async(con).await {
        Ok(m) => m,
        // A `_kill` of the wrong type says nobody asked.
        Err(e) if e.code() == Some("WRONGTYPE") => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    for (&i, m) in asked.iter().zip(member) {
        if let Found::Record(s) = &mut out[i] {
            s.stop_requested = m;
        }
    }
    Ok(())
}

/// Sends `cmds` in one pipeline; each reply, or its own error (a connection error fails the
/// whole).
pub(crate) async fn each<C: ConnectionLike + Send>(
    con: &mut C,
    cmds: impl Iterator<Item = redis::Cmd>,
) -> Result<Vec<RedisResult<Value>>> {
    let mut p = redis::pipe();
    p.ignore_errors();
    let mut n = 0;
    for c in cmds {
        p.add_command(c);
        n += 1;
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    Ok(p.query_async(con).await?)
}

/// A reply's bytes (a bulk or simple string, a number).
pub(crate) fn bytes(v: Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.into_bytes()),
        Value::VerbatimString { text, .. } => Some(text.into_bytes()),
        Value::Int(i) => Some(i.to_string().into_bytes()),
        Value::Okay => Some(b"OK".to_vec()),
        _ => None,
    }
}

/// A hash reply (RESP2 pairs or a RESP3 map) as field names (not UTF-8: replaced) and values;
/// `None` for any other reply.
pub(crate) fn pairs(v: Value) -> Option<Vec<(String, Vec<u8>)>> {
    let name = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    match v {
        Value::Nil => Some(Vec::new()),
        Value::Map(kv) => Some(
            kv.into_iter()
                .filter_map(|(k, v)| Some((name(bytes(k)?), bytes(v)?)))
                .collect(),
        ),
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len() / 2);
            let mut it = items.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                if let (Some(k), Some(v)) = (bytes(k), bytes(v)) {
                    out.push((name(k), v));
                }
            }
            Some(out)
        }
        _ => None,
    }
}

/// Whether `hay` contains `needle`.
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

impl JobStatus {
    /// Job `id`'s record, read from Redis: `None` when there is none (never tracked, or
    /// expired), an error naming the key when it holds something that is not a record.
    pub(crate) async fn read(
        con: &mut crate::conn::Conn,
        keys: &Keys,
        id: &JobId,
    ) -> Result<Option<JobStatus>> {
        match find(con, keys, id).await? {
            Found::Record(s) => Ok(Some(*s)),
            Found::Absent => Ok(None),
            Found::Unreadable(why) => Err(Error::Protocol(why)),
        }
    }
}
