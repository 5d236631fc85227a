//! How a job is tracked when it is enqueued ([`Track`]): its id, tags, job key, due time and
//! workflow (dependencies, parent, batch). The enqueue itself is the client's
//! (`client/track.rs`).

use super::JobId;
use crate::error::{Error, Result};
use chrono::{DateTime, Utc};
use serde_json::Value;

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
    /// children), or asks it to stop if it runs. The enqueue is refused with
    /// [`crate::Error::Parent`] (nothing written) when `parent` is no tracked job or has ended.
    pub fn parent(mut self, parent: JobId) -> Self {
        self.parent = Some(parent);
        self
    }

    /// Adds it to batch `batch`, which must not have ended (a member's handler adds jobs to
    /// its own batch this way: `ctx.batch()`).
    pub fn in_batch(mut self, batch: &crate::wire::job_id::BatchId) -> Self {
        self.batch = Some(batch.to_string());
        self
    }

    /// The workflow argument of the library's `job_enqueue` ('' when none applies).
    pub(crate) fn workflow(&self) -> String {
        if self.after.is_empty() && self.parent.is_none() && self.batch.is_none() {
            return String::new();
        }
        let deps: Vec<&str> = self.after.iter().map(JobId::as_str).collect();
        crate::scripts::texts::workflow_text(
            self.batch.as_deref().unwrap_or(""),
            self.parent.as_ref().map_or("", JobId::as_str),
            self.if_dep_failed.as_str(),
            super::DEFAULT_TTL.as_secs(),
            &deps,
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
