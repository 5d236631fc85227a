//! Enqueueing tracked jobs ([`Track`]): the record, its tags and job key, and the job itself,
//! in one call (the library's `job_enqueue`); and resque-status's `create`.

use super::record::new_status;
use super::JobId;
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
    /// Jobs it waits for (docs/workflows.md).
    pub(crate) after: Vec<JobId>,
    /// What a dependency that did not complete means for it.
    pub(crate) if_dep_failed: IfDepFailed,
    /// Its parent job: cancelling the parent cancels it.
    pub(crate) parent: Option<JobId>,
    /// The batch it joins (an open one).
    pub(crate) batch: Option<String>,
}

/// What a job that waits for others (`Track::after`) does when one of them ended otherwise
/// than completed (failed, killed or cancelled): it runs all the same (the default), it fails
/// without running, or it is cancelled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IfDepFailed {
    /// Run all the same.
    #[default]
    Run,
    /// End `failed` without running (`dependency <id> did not complete`).
    Fail,
    /// End `cancelled` without running.
    Cancel,
}

impl IfDepFailed {
    fn as_str(self) -> &'static str {
        match self {
            IfDepFailed::Run => "run",
            IfDepFailed::Fail => "fail",
            IfDepFailed::Cancel => "cancel",
        }
    }
}

impl std::str::FromStr for IfDepFailed {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "run" => Ok(IfDepFailed::Run),
            "fail" => Ok(IfDepFailed::Fail),
            "cancel" => Ok(IfDepFailed::Cancel),
            _ => Err(Error::Rejected(format!(
                "{s:?}: what a failed dependency means is run, fail or cancel"
            ))),
        }
    }
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

    /// Adds a tag (no whitespace; up to 200 bytes). Not for resque-status jobs: their record is
    /// resque-status's, which has no tags.
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Sets the job key: one live job per key. Not for resque-status jobs.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Due at `at` (filed in resque-scheduler's delayed set; `scheduled` until then).
    pub fn at(mut self, at: DateTime<Utc>) -> Self {
        self.at = Some(at);
        self
    }

    /// Waits until job `id` has ended (completed, failed, killed or cancelled) before it is
    /// queued: until then it is `waiting`, its payload kept in its record. Repeat for several;
    /// a job that waits cannot also be delayed.
    pub fn after(mut self, id: JobId) -> Self {
        self.after.push(id);
        self
    }

    /// What a dependency that did not complete means for it (default: it runs all the same).
    pub fn if_dep_failed(mut self, policy: IfDepFailed) -> Self {
        self.if_dep_failed = policy;
        self
    }

    /// Makes it a child of job `parent`: cancelling the parent cancels it (and its own
    /// children), or asks it to stop if it runs.
    pub fn parent(mut self, parent: JobId) -> Self {
        self.parent = Some(parent);
        self
    }

    /// Adds it to batch `batch`, which must not have ended (a member's handler adds jobs to
    /// its own batch this way: `ctx.batch()`).
    pub fn in_batch(mut self, batch: &crate::workflows::BatchId) -> Self {
        self.batch = Some(batch.to_string());
        self
    }

    /// The workflow argument of the library's `job_enqueue` ('' when none applies).
    pub(crate) fn workflow(&self) -> String {
        if self.after.is_empty() && self.parent.is_none() && self.batch.is_none() {
            return String::new();
        }
        let deps: Vec<&str> = self.after.iter().map(JobId::as_str).collect();
        format!(
            "{}\t{}\t{}\t{}\t{}",
            self.batch.as_deref().unwrap_or(""),
            self.parent.as_ref().map_or("", JobId::as_str),
            self.if_dep_failed.as_str(),
            super::DEFAULT_TTL.as_secs(),
            deps.join(" ")
        )
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
    /// key (the library's `job_enqueue`), as [`Client::write_tracked`] sends it; its reply is read by
    /// [`tracked_reply`]. `resq enqueue --file` sends many in a pipeline.
    pub(crate) fn tracked_invocation(&self, job: &Outgoing) -> Result<crate::scripts::Call> {
        let Some(track) = &job.track else {
            return Err(Error::Rejected("not a tracked job".into()));
        };
        track.check()?;
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
            .map(crate::client::delayed::epoch_secs)
            .filter(|ts| *ts > now.timestamp());
        let status = match &track.options {
            Some(o) => new_status(&id, o, now, self.float_format()),
            None => String::new(),
        };
        let mut inv = crate::scripts::JOB_ENQUEUE.prepare_invoke();
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
                    .arg(if statused { "s" } else { "r" })
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
                    .arg(if statused { "s" } else { "r" })
                    .arg("now")
                    .arg(payload)
                    .arg(0)
                    .arg("");
            }
        }
        inv.arg(now.timestamp_millis())
            .arg(&job.queue)
            .arg(&job.class)
            .arg(track.key.as_deref().unwrap_or(""))
            .arg(status)
            .arg(track.workflow());
        for t in &track.tags {
            inv.arg(t);
        }
        Ok(inv)
    }
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
