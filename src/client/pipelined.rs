//! Many jobs enqueued in pipelines (`resq enqueue --file`): each job is the very script call its
//! own enqueue makes — Resque's checked `SADD` + `RPUSH` (`checked_write.lua`, as
//! [`Client::push_raw`]), or a tracked job's `track_enqueue.lua` (as
//! [`Client::enqueue_class_tracked`]) — so each job is atomic on its own, all of it or none of
//! it, and up to [`CHUNK`] of them go to Redis in one round trip instead of one each. The calls
//! are built by those enqueues' own code and recorded ([`Recorder`]), not encoded again here.
//! No enqueue middleware runs (the CLI's client has none).

use super::{encode, validate, Client};
use crate::error::{Error, Result};
use crate::jobs::{JobId, Track};
use crate::middleware::enqueue::Outgoing;
use redis::aio::ConnectionLike;
use redis::{Cmd, ErrorKind, Pipeline, RedisFuture, RedisResult, Value};
use serde_json::{Map, Value as Json};

/// How many times a chunk is sent while servers answer that the library is missing.
const LOAD_ATTEMPTS: usize = 8;

/// Jobs per pipeline: one round trip each.
pub(crate) const CHUNK: usize = 1000;

/// One job to enqueue now.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    /// Its queue.
    pub queue: String,
    /// Its class.
    pub class: String,
    /// Its positional args.
    pub args: Vec<Json>,
    /// Tracking (`None`: Ruby's `{"class","args"}`, byte for byte).
    pub track: Option<Track>,
}

/// What became of one job.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// Written; a tracked job's id, and whether it is that of a live job with the same job key
    /// (nothing written then).
    Enqueued(Option<(JobId, bool)>),
    /// Refused before or by Redis (a key of another type, a bad tag), nothing of it written:
    /// why, naming the key.
    Refused(String),
}

impl Client {
    /// Loads the library before [`Client::enqueue_chunk`]s (once for all of them).
    pub(crate) async fn prepare_pipelined(&self) -> Result<()> {
        if self.keys().is_spread() {
            // (No script is called there: see `enqueue_chunk_spread`.)
            return Ok(());
        }
        crate::scripts::ensure_loaded(&mut self.connection(), &self.keys().queues())
            .await
            .map_err(Error::from)
    }

    /// Enqueues `jobs` (at most [`CHUNK`], the library loaded: [`Client::prepare_pipelined`])
    /// in one round trip, each atomically on its own: the outcome of each, or the error that
    /// left them unknown.
    pub(crate) async fn enqueue_chunk(&self, jobs: &[Pending]) -> Result<Vec<Outcome>> {
        if self.keys().is_spread() {
            return self.enqueue_chunk_spread(jobs).await;
        }
        let mut calls: Vec<Result<Cmd>> = Vec::with_capacity(jobs.len());
        for j in jobs {
            calls.push(self.call(j).await);
        }
        self.send(jobs, &calls).await
    }

    /// [`Client::enqueue_chunk`] on a spread namespace, where `<ns>:queues` and each queue are
    /// in slots of their own: Resque's enqueue of every job as [`Client::push_raw`] makes it
    /// there, batched — one `SADD <ns>:queues` with the chunk's queue names, then one `RPUSH`
    /// per job, in order, a pipeline per slot. A tracked job is refused (nothing of it
    /// written): on a spread namespace tracked jobs are enqueued one call each
    /// ([`Client::enqueue_class_tracked`]), not from a file.
    async fn enqueue_chunk_spread(&self, jobs: &[Pending]) -> Result<Vec<Outcome>> {
        let mut out: Vec<Option<Outcome>> = Vec::with_capacity(jobs.len());
        let mut payloads: Vec<Option<String>> = Vec::with_capacity(jobs.len());
        for j in jobs {
            let checked = validate(&j.queue, &j.class).and_then(|()| match j.track {
                Some(_) => crate::error::not_spread(self.keys(), "tracked jobs from a file"),
                None => Ok(()),
            });
            match checked {
                Ok(()) => {
                    payloads.push(Some(encode::resque_payload(
                        &j.class,
                        &j.args,
                        self.float_format,
                    )));
                    out.push(None);
                }
                Err(e) => {
                    payloads.push(None);
                    out.push(Some(Outcome::Refused(e.to_string())));
                }
            }
        }
        let mut names: Vec<&str> = Vec::new();
        for (j, p) in jobs.iter().zip(&payloads) {
            if p.is_some() && !names.contains(&j.queue.as_str()) {
                names.push(&j.queue);
            }
        }
        if !names.is_empty() {
            let mut con = self.connection();
            let _: i64 = redis::cmd("SADD")
                .arg(self.keys().queues())
                .arg(&names)
                .query_async(&mut con)
                .await?;
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for (j, p) in jobs.iter().zip(&payloads) {
                if let Some(p) = p {
                    pipe.rpush(self.keys().queue(&j.queue), p);
                }
            }
            let mut con = self.connection();
            let replies: Vec<RedisResult<Value>> = pipe.query_async(&mut con).await?;
            let mut replies = replies.into_iter();
            for (slot, p) in out.iter_mut().zip(&payloads) {
                if p.is_some() {
                    *slot = Some(match replies.next() {
                        Some(Ok(_)) => Outcome::Enqueued(None),
                        Some(Err(e)) => Outcome::Refused(Error::Redis(e).to_string()),
                        None => Outcome::Refused("not sent".into()),
                    });
                }
            }
        }
        Ok(out
            .into_iter()
            .map(|o| o.unwrap_or_else(|| Outcome::Refused("not sent".into())))
            .collect())
    }

    /// The script call that enqueues `job`, built by its single enqueue's code (recorded:
    /// nothing is sent).
    async fn call(&self, job: &Pending) -> Result<Cmd> {
        validate(&job.queue, &job.class)?;
        // A split queue's jobs go to its shards in turn (crate::splits).
        let queue = self.route(&job.queue, None).await?;
        let mut rec = Recorder::default();
        let recorded = match &job.track {
            None => {
                let json = encode::resque_payload(&job.class, &job.args, self.float_format);
                let step = self.push_step(&queue, &json, false);
                step.run(&mut rec).await
            }
            Some(track) => {
                let id = track.id.clone().unwrap_or_default();
                let mut extra = Map::new();
                extra.insert("resq_id".into(), Json::String(id.to_string()));
                let job = Outgoing {
                    queue,
                    class: job.class.clone(),
                    args: job.args.clone(),
                    extra,
                    at: None,
                    track: Some(track.clone().id(id)),
                    shard_key: None,
                };
                let inv = self.tracked_invocation(&job)?;
                inv.invoke_async::<Value, _>(&mut rec).await.map(|_| ())
            }
        };
        recorded?;
        rec.0
            .pop()
            .ok_or_else(|| Error::Protocol("no script call was made for the job".into()))
    }

    /// Sends one chunk's calls in one pipeline (the library loaded before; the calls Redis
    /// answered `Function not found`, which did not run, are sent again once it is loaded
    /// again, up to [`LOAD_ATTEMPTS`] times: once per server that lacked it); the outcome of
    /// each job.
    async fn send(&self, jobs: &[Pending], calls: &[Result<Cmd>]) -> Result<Vec<Outcome>> {
        let mut con = self.connection();
        let mut replies: Vec<Option<RedisResult<Value>>> = vec![None; calls.len()];
        for attempt in 0..LOAD_ATTEMPTS {
            let todo: Vec<usize> = (0..calls.len())
                .filter(|&i| calls[i].is_ok())
                .filter(|&i| match &replies[i] {
                    None => true,
                    Some(Err(e)) => attempt > 0 && crate::scripts::not_loaded(e),
                    Some(Ok(_)) => false,
                })
                .collect();
            if todo.is_empty() {
                break;
            }
            if attempt > 0 {
                // On the server of the first call sent again (on a cluster the others may be on
                // other servers: each further attempt loads on one more).
                let key = todo
                    .first()
                    .and_then(|&i| calls[i].as_ref().ok())
                    .and_then(crate::scripts::call_key);
                crate::scripts::load_at(&mut con, key.as_deref()).await?;
            }
            let mut pipe = Pipeline::with_capacity(todo.len());
            pipe.ignore_errors();
            for &i in &todo {
                if let Ok(cmd) = &calls[i] {
                    pipe.add_command(cmd.clone());
                }
            }
            let answered: Vec<RedisResult<Value>> = pipe.query_async(&mut con).await?;
            if answered.len() != todo.len() {
                return Err(Error::Protocol(format!(
                    "a pipeline of {} enqueues answered {} replies",
                    todo.len(),
                    answered.len()
                )));
            }
            let mut again = false;
            for (&i, r) in todo.iter().zip(answered) {
                again |= matches!(&r, Err(e) if crate::scripts::not_loaded(e));
                replies[i] = Some(r);
            }
            if !again {
                break;
            }
        }
        Ok(jobs
            .iter()
            .zip(calls)
            .zip(replies)
            .map(|((job, call), reply)| match (call, reply) {
                (Err(e), _) => Outcome::Refused(e.to_string()),
                (Ok(_), Some(Ok(v))) => match &job.track {
                    None => Outcome::Enqueued(None),
                    Some(_) => {
                        let reply = match v {
                            Value::Array(a) => a,
                            other => vec![other],
                        };
                        match super::track::tracked_reply(&reply) {
                            Ok(r) => Outcome::Enqueued(Some(r)),
                            Err(e) => Outcome::Refused(e.to_string()),
                        }
                    }
                },
                (Ok(_), Some(Err(e))) => Outcome::Refused(match &job.track {
                    Some(_) => super::track::refusal(e).to_string(),
                    None => Error::Redis(e).to_string(),
                }),
                (Ok(_), None) => Outcome::Refused("not sent".into()),
            })
            .collect())
    }
}

/// A connection that sends nothing: it keeps each command it is given (and answers nil), so a
/// job's script call is built by its single enqueue's own code and then sent in a pipeline.
#[derive(Default)]
struct Recorder(Vec<Cmd>);

impl ConnectionLike for Recorder {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.0.push(cmd.clone());
        Box::pin(async { Ok(Value::Nil) })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        _pipeline: &'a Pipeline,
        _offset: usize,
        _count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async {
            Err(redis::RedisError::from((
                ErrorKind::Client,
                "a pipeline is not recorded",
            )))
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}
