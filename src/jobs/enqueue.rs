//! Enqueueing tracked jobs ([`Track`]): the record, its indexes, tags and job key, and the job
//! itself, in one script call (`track_enqueue.lua`); and resque-status's `create`.

use super::record::{new_record, new_resq};
use super::{JobId, State};
use crate::client::{encode, Client};
use crate::error::{Error, Result};
use crate::keys::Keys;
use crate::middleware::Outgoing;
use crate::registry::Job;
use chrono::{DateTime, Utc};
use redis::Value as RedisValue;
use serde_json::{Map, Value};

/// How to track a job being enqueued: its id, tags, a job key, when it is due.
///
/// ```no_run
/// # async fn demo(client: resq::Client) -> resq::Result<()> {
/// use resq::jobs::Track;
///
/// let id = client
///     .enqueue_class_tracked(
///         "default",
///         "Invoice",
///         &[serde_json::json!(42)],
///         Track::new().tag("billing").key("invoice-42"),
///     )
///     .await?;
/// let status = client.wait(&id, std::time::Duration::from_secs(30)).await?;
/// # let _ = status;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Track {
    /// The id to use (a fresh one by default).
    pub(crate) id: Option<JobId>,
    /// Tags to find the job by.
    pub(crate) tags: Vec<String>,
    /// hipq's job key: while a job enqueued with this key has not finished, enqueueing
    /// another with it returns the live job's id and writes nothing.
    pub(crate) key: Option<String>,
    /// When it is due (`None`: now).
    pub(crate) at: Option<DateTime<Utc>>,
    /// resque-status's options (a resque-status job's `args[1]`).
    pub(crate) options: Option<Value>,
}

impl Track {
    /// Tracking with a fresh id, no tags, no key, due now.
    pub fn new() -> Self {
        Self::default()
    }

    /// Uses `id` instead of a fresh one.
    pub fn id(mut self, id: JobId) -> Self {
        self.id = Some(id);
        self
    }

    /// Adds a tag (no whitespace; up to 200 bytes).
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Sets the job key: one live job per key.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Due at `at` (filed in resque-scheduler's delayed set; `scheduled` until then).
    pub fn at(mut self, at: DateTime<Utc>) -> Self {
        self.at = Some(at);
        self
    }

    /// Due after `delay`.
    pub fn delay(mut self, delay: std::time::Duration) -> Result<Self> {
        self.at = Some(crate::wire::time::after_now(delay)?);
        Ok(self)
    }

    /// Refuses tags and a job key the record cannot carry (an empty or too long one, a tag
    /// with whitespace).
    pub(crate) fn check(&self) -> Result<()> {
        for t in &self.tags {
            if t.is_empty() || t.len() > 200 || t.chars().any(char::is_whitespace) {
                return Err(Error::Rejected(format!(
                    "tag {t:?}: a tag is 1 to 200 bytes without whitespace"
                )));
            }
        }
        if let Some(k) = &self.key {
            if k.is_empty() || k.len() > 1000 {
                return Err(Error::Rejected("a job key is 1 to 1000 bytes".into()));
            }
        }
        Ok(())
    }
}

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
        track.check()?;
        let id = track.id.clone().unwrap_or_default();
        let mut extra = Map::new();
        extra.insert("resq_id".into(), Value::String(id.to_string()));
        let track = Track {
            id: Some(id),
            ..track
        };
        self.send_tracked(Outgoing {
            queue: queue.to_string(),
            class: class.to_string(),
            args: args.to_vec(),
            extra,
            at: track.at,
            track: Some(track),
        })
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
        track.check()?;
        let id = track.id.clone().unwrap_or_default();
        let options = Value::Object(options);
        let track = Track {
            id: Some(id.clone()),
            options: Some(options.clone()),
            ..track
        };
        self.send_tracked(Outgoing {
            queue: queue.to_string(),
            class: class.to_string(),
            args: vec![Value::String(id.to_string()), options],
            extra: Map::new(),
            at: track.at,
            track: Some(track),
        })
        .await
    }

    async fn send_tracked(&self, job: Outgoing) -> Result<JobId> {
        let tracked = std::sync::Mutex::new(None);
        self.dispatch_tracked(job, |_| {}, &tracked).await?;
        tracked
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .ok_or_else(|| Error::Rejected("an enqueue middleware dropped the job".into()))
    }

    /// The write at the end of the enqueue chain for a tracked job.
    pub(crate) async fn write_tracked(&self, job: Outgoing) -> Result<JobId> {
        let inv = self.tracked_invocation(&job)?;
        let mut con = self.connection();
        let reply: Vec<RedisValue> = inv.invoke_async(&mut con).await?;
        Ok(tracked_reply(&reply)?.0)
    }

    /// The script call that enqueues the tracked `job` with its record, indexes, tags and job
    /// key (`track_enqueue.lua`), as [`Client::write_tracked`] sends it; its reply is read by
    /// [`tracked_reply`]. `resq enqueue --file` sends many in a pipeline.
    pub(crate) fn tracked_invocation(
        &self,
        job: &Outgoing,
    ) -> Result<redis::ScriptInvocation<'static>> {
        let Some(track) = &job.track else {
            return Err(Error::Rejected("not a tracked job".into()));
        };
        track.check()?;
        let id = track.id.clone().unwrap_or_default();
        let keys = self.keys();
        let now = Utc::now();
        let due = job
            .at
            .map(crate::client::delayed::epoch_secs)
            .filter(|ts| *ts > now.timestamp());
        let state = if due.is_some() {
            State::Scheduled
        } else {
            State::Queued
        };
        let resq = new_resq(
            state,
            &job.queue,
            &job.class,
            &track.tags,
            track.key.as_deref(),
            now,
            job.at.filter(|_| due.is_some()),
        );
        let record = new_record(
            &id,
            state,
            track.options.as_ref(),
            &resq,
            now,
            self.float_format(),
        );
        let mut inv = crate::scripts::TRACK_ENQUEUE.prepare_invoke();
        inv.key(keys.queues()).key(keys.queue(&job.queue));
        match due {
            Some(ts) => {
                let item = encode::scheduler_item(
                    &job.queue,
                    &job.class,
                    &job.args,
                    &job.extra,
                    self.float_format(),
                );
                inv.key(keys.delayed_schedule())
                    .key(keys.delayed_bucket(ts))
                    .key(keys.timestamps(&item));
                inv.arg(keys.prefix())
                    .arg(id.as_str())
                    .arg(record)
                    .arg("delayed")
                    .arg(item)
                    .arg(ts)
                    .arg(Keys::delayed_bucket_member(ts));
            }
            None => {
                let payload = encode::resque_payload_with(
                    &job.class,
                    &job.args,
                    &job.extra,
                    self.float_format(),
                );
                let unused = keys.queues();
                inv.key(&unused).key(&unused).key(&unused);
                inv.arg(keys.prefix())
                    .arg(id.as_str())
                    .arg(record)
                    .arg("now")
                    .arg(payload)
                    .arg(0)
                    .arg("");
            }
        }
        inv.arg(now.timestamp_millis())
            .arg(track.key.as_deref().unwrap_or(""))
            .arg(&job.queue);
        for t in &track.tags {
            inv.arg(t);
        }
        Ok(inv)
    }
}

/// The id a `track_enqueue.lua` reply names, and whether it is that of a live job with the
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
