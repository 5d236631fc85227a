//! Enqueueing ActiveJob jobs the way Rails' Resque adapter does, so Rails workers (or resq)
//! run them: now (`Resque.enqueue_to(queue, JobWrapper, job.serialize)`) or later
//! (`Resque.enqueue_at_with_queue(queue, timestamp, JobWrapper, job.serialize)`, resque-scheduler
//! 5.0's layout).

use super::job::NewJob;
use super::rails::Rails;
use crate::client::Client;
use crate::error::Result;
use crate::wire::activejob::ActiveJobError;
use chrono::{DateTime, Utc};

/// A producer of ActiveJob jobs, for Ruby workers running Rails `rails`.
#[derive(Clone)]
pub struct ActiveJobClient {
    /// The Resque client it pushes through.
    client: Client,
    /// The job format written.
    rails: Rails,
}

/// What was enqueued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enqueued {
    /// The job's `job_id`.
    pub job_id: String,
    /// The exact bytes written: the queue payload, or the delayed item.
    pub bytes: String,
    /// The resque-scheduler timestamp (whole seconds) when the job was delayed.
    pub delayed_until: Option<i64>,
}

impl ActiveJobClient {
    /// Writes jobs for Rails `rails` through `client`.
    pub fn new(client: Client, rails: Rails) -> Self {
        ActiveJobClient { client, rails }
    }

    /// The Rails version jobs are written for.
    pub fn rails(&self) -> Rails {
        self.rails
    }

    /// Pushes `bytes` onto `queue`; with tracing on ([`crate::otel`]), inside a producer span
    /// whose context the bytes carry as top-level members, as Ruby's Resque instrumentation
    /// writes them in the `Resque.push` Rails' adapter calls. Returns the bytes written.
    async fn push(&self, queue: &str, bytes: String) -> Result<String> {
        #[cfg(feature = "otel")]
        let (span, bytes) = crate::otel::send_encoded(queue, bytes);
        let pushed = self.client.push_raw(queue, &bytes).await;
        #[cfg(feature = "otel")]
        crate::otel::end_send(span, &pushed);
        pushed.map(|()| bytes)
    }

    /// `perform_later`: `SADD <ns>:queues q` + `RPUSH <ns>:queue:q <wrapper payload>`.
    pub async fn enqueue(&self, job: &NewJob) -> Result<Enqueued> {
        let s = job.serialize(self.rails, Utc::now(), None)?;
        let bytes = self.push(&job.queue, s.payload()).await?;
        Ok(Enqueued {
            job_id: s.job_id,
            bytes,
            delayed_until: None,
        })
    }

    /// `set(wait_until: at).perform_later`. As resque-scheduler: a time not after now (whole
    /// seconds) enqueues at once; otherwise the item
    /// `{"class":"…JobWrapper","args":[job],"queue":q}` goes to `<ns>:delayed:<ts>`, its
    /// reverse index `<ns>:timestamps:<item>` and `<ns>:delayed_queue_schedule` (one MULTI
    /// where resque-scheduler sends three commands: the same end state, never half written).
    pub async fn enqueue_at(&self, job: &NewJob, at: DateTime<Utc>) -> Result<Enqueued> {
        let now = Utc::now();
        let s = job.serialize(self.rails, now, Some(at))?;
        let ts = at.timestamp();
        if ts <= now.timestamp() {
            let bytes = self.push(&job.queue, s.payload()).await?;
            return Ok(Enqueued {
                job_id: s.job_id,
                bytes,
                delayed_until: None,
            });
        }
        let item = s.delayed_item(&job.queue);
        #[cfg(feature = "otel")]
        let (span, item) = crate::otel::send_encoded(&job.queue, item);
        let pushed = self.client.delayed_push_raw(ts, &item).await;
        #[cfg(feature = "otel")]
        crate::otel::end_send(span, &pushed);
        pushed?;
        Ok(Enqueued {
            job_id: s.job_id,
            bytes: item,
            delayed_until: Some(ts),
        })
    }

    /// `set(wait: d).perform_later`: [`ActiveJobClient::enqueue_at`] now + `d`.
    pub async fn enqueue_in(&self, job: &NewJob, d: std::time::Duration) -> Result<Enqueued> {
        let at = chrono::TimeDelta::from_std(d)
            .ok()
            .and_then(|d| Utc::now().checked_add_signed(d))
            .ok_or_else(|| ActiveJobError::Invalid {
                what: "delay",
                value: format!("{d:?}"),
            })?;
        self.enqueue_at(job, at).await
    }
}
