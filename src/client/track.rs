//! Enqueueing tracked jobs ([`crate::jobs::Track`]): the record, its tags and job key, and the
//! job itself, in one call (the library's `job_enqueue`); resque-status's `create`; and acting
//! on a tracked job from the client: its record, cancel.

use super::{encode, Client};
use crate::error::{Error, Result};
use crate::jobs::{Cancelled, JobId, JobStatus, Track};
use crate::keys::Keys;
use crate::middleware::Outgoing;
use crate::registry::Job;
use chrono::Utc;
use redis::Value as RedisValue;
use serde_json::{Map, Value};

impl Client {
    /// Enqueues a typed job with tracking; returns its id (or, with a job key whose job is
    /// still live, that job's id: nothing new is written). An enqueue middleware that drops
    /// the job makes this an error.
    pub async fn enqueue_tracked<J: Job>(&self, args: J::Args, track: Track) -> Result<JobId>
    where
        J::Args: serde::Serialize,
    {
        let args = match serde_json::to_value(&args)? {
            Value::Array(a) => a,
            other => {
                return Err(Error::Rejected(format!(
                    "{}: args must serialize to a JSON array (a tuple or a Vec), not {other}",
                    J::CLASS
                )))
            }
        };
        let queue = J::QUEUE.unwrap_or(self.default_queue()).to_string();
        self.enqueue_class_tracked(&queue, J::CLASS, &args, track)
            .await
    }

    /// Enqueues `class` with `args` onto `queue` with tracking (see
    /// [`Client::enqueue_tracked`]). The payload is Ruby's `{"class","args"}` plus
    /// `"resq_id"`, a field Resque, Jesque and node-resque ignore.
    pub async fn enqueue_class_tracked(
        &self,
        queue: &str,
        class: &str,
        args: &[Value],
        track: Track,
    ) -> Result<JobId> {
        self.enqueue_class_tracked_seen(queue, class, args, track, None, |_| {})
            .await
    }

    /// [`Client::enqueue_class_tracked`], showing `seen` the job as it is written (after every
    /// layer: the members they added, the shard of a split queue that `shard_key` picked), for
    /// `resq enqueue --track` to print.
    pub(crate) async fn enqueue_class_tracked_seen(
        &self,
        queue: &str,
        class: &str,
        args: &[Value],
        track: Track,
        shard_key: Option<&str>,
        seen: impl Fn(&Outgoing) + Send + Sync,
    ) -> Result<JobId> {
        self.check_spread(&track)?;
        track.check()?;
        let id = track.id.clone().unwrap_or_default();
        let mut extra = Map::new();
        extra.insert("resq_id".into(), Value::String(id.to_string()));
        let track = Track {
            id: Some(id),
            ..track
        };
        self.send_tracked(
            Outgoing {
                queue: queue.to_string(),
                class: class.to_string(),
                args: args.to_vec(),
                extra,
                at: track.at,
                track: Some(track),
                shard_key: shard_key.map(str::to_string),
            },
            seen,
        )
        .await
    }

    /// resque-status's `J.create(options)`: a job `{"class":J,"args":[id, options]}` on
    /// `J::QUEUE` (resque-status's default queue `statused` when it has none) with its record
    /// `{"time","status":"queued","uuid","options"}`, as the Ruby plugin writes them. Register
    /// the class with [`crate::Registry::statused`] on the workers.
    pub async fn create_status<J: Job>(&self, options: Map<String, Value>) -> Result<JobId> {
        let queue = J::QUEUE.unwrap_or("statused");
        self.create_status_class(queue, J::CLASS, options, Track::new())
            .await
    }

    /// [`Client::create_status`] by class name and queue, with `track`'s id, tags, key and due
    /// time.
    pub async fn create_status_class(
        &self,
        queue: &str,
        class: &str,
        options: Map<String, Value>,
        track: Track,
    ) -> Result<JobId> {
        crate::error::not_spread(self.keys(), "resque-status jobs")?;
        track.check()?;
        let id = track.id.clone().unwrap_or_default();
        let options = Value::Object(options);
        let track = Track {
            id: Some(id.clone()),
            options: Some(options.clone()),
            ..track
        };
        self.send_tracked(
            Outgoing {
                queue: queue.to_string(),
                class: class.to_string(),
                args: vec![Value::String(id.to_string()), options],
                extra: Map::new(),
                at: track.at,
                track: Some(track),
                shard_key: None,
            },
            |_| {},
        )
        .await
    }

    async fn send_tracked(
        &self,
        job: Outgoing,
        seen: impl Fn(&Outgoing) + Send + Sync,
    ) -> Result<JobId> {
        let tracked = std::sync::Mutex::new(None);
        self.dispatch_tracked(job, seen, &tracked).await?;
        tracked
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .ok_or_else(|| Error::Rejected("an enqueue middleware dropped the job".into()))
    }

    /// Refuses, on a spread namespace, what a tracked job cannot have there (docs/cluster.md):
    /// its parts would sit in other slots than its queue's (resque-status's records and kill
    /// set, a job key's lock, dependencies, parents and batches, resque-scheduler's delayed
    /// set). Nothing is written.
    pub(crate) fn check_spread(&self, track: &Track) -> Result<()> {
        if !self.keys().is_spread() {
            return Ok(());
        }
        let now = super::delayed::epoch_secs(Utc::now());
        let feature = if track.options.is_some() {
            "resque-status jobs"
        } else if track.key.is_some() {
            "tracked jobs with a job key"
        } else if !track.after.is_empty() || track.parent.is_some() || track.batch.is_some() {
            "dependencies, parents and batches"
        } else if track
            .at
            .is_some_and(|at| super::delayed::epoch_secs(at) > now)
        {
            "delayed jobs"
        } else {
            return Ok(());
        };
        crate::error::not_spread(self.keys(), feature)
    }

    /// On a spread namespace, gives tracked `job` (its queue now final: a split queue's shard
    /// picked) the id that carries its queue's slot tag (`<32 hex>{<tag>}`,
    /// [`JobId::slot_tag`]), in its track and its payload's `resq_id`, so its record and the
    /// indexes it moves in share the queue's slot. Elsewhere nothing changes.
    pub(crate) fn tag_for_slot(&self, job: &mut Outgoing) {
        let Some(track) = job.track.as_mut() else {
            return;
        };
        if !self.keys().is_spread() || track.options.is_some() {
            return;
        }
        let id = track
            .id
            .clone()
            .unwrap_or_default()
            .with_slot_tag(self.keys().queue_tag(&job.queue));
        job.extra
            .insert("resq_id".into(), Value::String(id.to_string()));
        track.id = Some(id);
    }

    /// The write at the end of the enqueue chain for a tracked job. On a spread namespace the
    /// queue's name goes into `<ns>:queues` first (its own slot), then the record and the
    /// push in one call in the queue's slot: a crash between lists the queue with no job, as
    /// Resque's own push may.
    pub(crate) async fn write_tracked(&self, job: Outgoing) -> Result<JobId> {
        let inv = self.tracked_invocation(&job)?;
        let mut con = self.connection();
        if self.keys().is_spread() {
            let _: i64 = redis::cmd("SADD")
                .arg(self.keys().queues())
                .arg(&job.queue)
                .query_async(&mut con)
                .await?;
        }
        let reply: Vec<RedisValue> = inv.invoke_async(&mut con).await.map_err(refusal)?;
        Ok(tracked_reply(&reply)?.0)
    }

    /// The script call that enqueues the tracked `job` with its record, indexes, tags and job
    /// key (the library's `job_enqueue`), as [`Client::write_tracked`] sends it; its reply is read by
    /// [`tracked_reply`]. `resq enqueue --file` sends many in a pipeline.
    pub(crate) fn tracked_invocation(&self, job: &Outgoing) -> Result<crate::scripts::Call> {
        let Some(track) = &job.track else {
            return Err(Error::Rejected("not a tracked job".into()));
        };
        self.check_spread(track)?;
        track.check()?;
        let spread = self.keys().is_spread();
        if spread
            && track.id.as_ref().and_then(JobId::slot_tag)
                != Some(self.keys().queue_tag(&job.queue))
        {
            return Err(Error::Rejected(format!(
                "tracked job for {:?}: on a spread namespace its id carries its queue's slot tag",
                job.queue
            )));
        }
        let statused = track.options.is_some();
        if statused && (!track.tags.is_empty() || track.key.is_some()) {
            return Err(Error::Rejected(
                "a resque-status job takes no tags and no job key: its record is resque-status's"
                    .into(),
            ));
        }
        let id = track.id.clone().unwrap_or_default();
        let keys = self.keys();
        let now = Utc::now();
        let due = job
            .at
            .map(super::delayed::epoch_secs)
            .filter(|ts| *ts > now.timestamp());
        let status = match &track.options {
            Some(o) => crate::jobs::new_status(&id, o, now, self.float_format()),
            None => String::new(),
        };
        // Keys 3..5 and arguments 6..7 are the delayed layout's; enqueued now, they are unused.
        let (when, payload, due_s, member, delayed_keys) = match due {
            Some(ts) => {
                let item = encode::scheduler_item(
                    &job.queue,
                    &job.class,
                    &job.args,
                    &job.extra,
                    self.float_format(),
                );
                let delayed_keys = (
                    keys.delayed_schedule(),
                    keys.delayed_bucket(ts),
                    keys.timestamps(&item),
                );
                (
                    "delayed",
                    item,
                    ts,
                    Keys::delayed_bucket_member(ts),
                    delayed_keys,
                )
            }
            None => {
                let payload = encode::resque_payload_with(
                    &job.class,
                    &job.args,
                    &job.extra,
                    self.float_format(),
                );
                // (Spread: a key of the call's slot, the record's.)
                let unused = if spread {
                    let rk = keys.job_record(id.as_str());
                    (rk.clone(), rk.clone(), rk)
                } else {
                    (keys.queues(), keys.queues(), keys.queues())
                };
                ("now", payload, 0, String::new(), unused)
            }
        };
        // (Spread: the record in KEYS[1], the call in the queue's slot; job_enqueue.lua.)
        let (first, when) = if spread {
            (keys.job_record(id.as_str()), "spread")
        } else {
            (keys.queues(), when)
        };
        Ok(crate::scripts::JobEnqueue {
            queues: first,
            queue: keys.queue(&job.queue),
            schedule: delayed_keys.0,
            bucket: delayed_keys.1,
            timestamps: delayed_keys.2,
            prefix: keys.prefix(),
            id: id.as_str(),
            kind: if statused { "s" } else { "r" },
            when,
            payload,
            due_s,
            member,
            now_ms: now.timestamp_millis(),
            queue_name: &job.queue,
            class: &job.class,
            job_key: track.key.as_deref().unwrap_or(""),
            status,
            workflow: track.workflow(),
            tags: &track.tags,
        }
        .call())
    }
}

impl Client {
    /// Cancels job `id`: one that has not started never runs; a running one is asked to stop.
    /// An unknown id is an error.
    pub async fn cancel(&self, id: &JobId) -> Result<Cancelled> {
        crate::jobs::cancel(&mut self.connection(), self.keys(), id).await
    }

    /// The record of job `id` (`None`: never tracked, or expired; an error when its key holds
    /// something that is not a record).
    pub async fn status(&self, id: &JobId) -> Result<Option<JobStatus>> {
        JobStatus::read(&mut self.connection(), self.keys(), id).await
    }
}

/// A `job_enqueue` error as the library's error: a refused parent (`NOPARENT`, the script's
/// rule for every enqueue) is [`Error::Parent`].
pub(crate) fn refusal(e: redis::RedisError) -> Error {
    if e.code() == Some("NOPARENT") {
        return Error::Parent(e.detail().unwrap_or("is refused").to_string());
    }
    Error::Redis(e)
}

/// The id a `job_enqueue` reply names, and whether it is that of a live job with the
/// same job key (nothing was written) rather than the new job's.
pub(crate) fn tracked_reply(reply: &[RedisValue]) -> Result<(JobId, bool)> {
    let existing = matches!(reply.first(), Some(RedisValue::BulkString(b)) if b == b"existing");
    match reply.get(1) {
        Some(RedisValue::BulkString(b)) => {
            let s = String::from_utf8_lossy(b);
            JobId::parse(&s)
                .map(|id| (id, existing))
                .ok_or_else(|| Error::Protocol(format!("enqueue answered id {s:?}")))
        }
        _ => Err(Error::Protocol(
            "enqueue of a tracked job: unexpected reply".into(),
        )),
    }
}
