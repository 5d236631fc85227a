//! A new ActiveJob job, written the way Rails writes it: the `job.serialize` hash, the Resque
//! payload the Resque adapter pushes, and the resque-scheduler item it delays.

use super::arg::{serialize_all, Arg};
use super::rails::Rails;
use crate::wire::activejob::ActiveJobError;
use crate::wire::activejob::WRAPPER_CLASS;
use crate::wire::{payload, time};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};

/// A job to enqueue for Ruby (or resq) ActiveJob workers.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    /// The ActiveJob class (`"SendInvoiceJob"`).
    pub job_class: String,
    /// The queue (`queue_name`, prefix included if the app uses `queue_name_prefix`).
    pub queue: String,
    /// The arguments of `perform`.
    pub arguments: Vec<Arg>,
    /// `priority` (the Resque adapter ignores it; kept for the job's own use).
    pub priority: Option<i64>,
    /// `locale` (default `"en"`).
    pub locale: String,
    /// `timezone`: the `Time.zone` name the job runs in (default `"UTC"`).
    pub timezone: Option<String>,
    /// `job_id`; a fresh UUID v4 when `None`.
    pub job_id: Option<String>,
}

impl NewJob {
    /// A job of `job_class` on queue `default` with no arguments.
    pub fn new(job_class: impl Into<String>) -> Self {
        NewJob {
            job_class: job_class.into(),
            queue: "default".into(),
            arguments: Vec::new(),
            priority: None,
            locale: "en".into(),
            timezone: Some("UTC".into()),
            job_id: None,
        }
    }

    /// Sets the queue.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = queue.into();
        self
    }

    /// Appends an argument.
    pub fn arg(mut self, arg: impl Into<Arg>) -> Self {
        self.arguments.push(arg.into());
        self
    }

    /// Replaces the arguments.
    pub fn args(mut self, args: impl IntoIterator<Item = Arg>) -> Self {
        self.arguments = args.into_iter().collect();
        self
    }

    /// Sets the priority.
    pub fn priority(mut self, p: i64) -> Self {
        self.priority = Some(p);
        self
    }

    /// Sets the locale.
    pub fn locale(mut self, locale: impl Into<String>) -> Self {
        self.locale = locale.into();
        self
    }

    /// Sets the time zone name (`None` writes `null`, as Rails without `Time.zone`).
    pub fn timezone(mut self, tz: Option<String>) -> Self {
        self.timezone = tz;
        self
    }

    /// Sets the job id (for idempotent producers); otherwise one is generated.
    pub fn job_id(mut self, id: impl Into<String>) -> Self {
        self.job_id = Some(id.into());
        self
    }

    /// The `job.serialize` hash for Rails `rails`, enqueued at `now`, optionally scheduled at
    /// `scheduled_at` (written for Rails 7.1+ only, as Rails does).
    pub fn serialize(
        &self,
        rails: Rails,
        now: DateTime<Utc>,
        scheduled_at: Option<DateTime<Utc>>,
    ) -> Result<Serialized, ActiveJobError> {
        let job_id = self
            .job_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let modern = rails >= Rails::V7_1;
        let data = JobData {
            job_class: &self.job_class,
            job_id: &job_id,
            provider_job_id: None,
            queue_name: &self.queue,
            priority: self.priority,
            arguments: serialize_all(&self.arguments, rails)?,
            executions: 0,
            exception_executions: Map::new(),
            locale: &self.locale,
            timezone: self.timezone.as_deref(),
            enqueued_at: if modern {
                time::iso8601_nanos_utc(now)
            } else {
                time::iso8601_utc(now)
            },
            scheduled_at: modern.then(|| scheduled_at.map(time::iso8601_nanos_utc)),
        };
        let value = serde_json::to_value(&data).map_err(|e| ActiveJobError::Invalid {
            what: "job",
            value: e.to_string(),
        })?;
        Ok(Serialized {
            job_id,
            data: value,
        })
    }
}

/// `ActiveJob::Core#serialize`'s hash, keys in Rails' order.
#[derive(Serialize)]
struct JobData<'a> {
    job_class: &'a str,
    job_id: &'a str,
    provider_job_id: Option<&'a str>,
    queue_name: &'a str,
    priority: Option<i64>,
    arguments: Vec<Value>,
    executions: u64,
    exception_executions: Map<String, Value>,
    locale: &'a str,
    timezone: Option<&'a str>,
    enqueued_at: String,
    /// Present (possibly `null`) from Rails 7.1, absent before.
    #[serde(skip_serializing_if = "Option::is_none")]
    scheduled_at: Option<Option<String>>,
}

/// A serialized job.
#[derive(Debug, Clone, PartialEq)]
pub struct Serialized {
    /// Its `job_id`.
    pub job_id: String,
    /// The `job.serialize` hash.
    pub data: Value,
}

impl Serialized {
    /// The Resque payload the adapter pushes: `{"class":"…JobWrapper","args":[data]}`.
    pub fn payload(&self) -> String {
        payload::encode_resque(WRAPPER_CLASS, std::slice::from_ref(&self.data))
    }

    /// The resque-scheduler item `enqueue_at_with_queue` stores:
    /// `{"class":"…JobWrapper","args":[data],"queue":queue}`.
    pub fn delayed_item(&self, queue: &str) -> String {
        #[derive(Serialize)]
        struct Item<'a> {
            class: &'a str,
            args: [&'a Value; 1],
            queue: &'a str,
        }
        // Serializing borrowed strings and a `Value` cannot fail.
        serde_json::to_string(&Item {
            class: WRAPPER_CLASS,
            args: [&self.data],
            queue,
        })
        .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 21, 19, 15, 33).unwrap()
    }

    #[test]
    fn rails_61_shape() {
        let s = NewJob::new("SendInvoiceJob")
            .queue("mailers")
            .arg(json!(42))
            .job_id("00000000-0000-4000-8000-000000000000")
            .serialize(Rails::V6_1, now(), Some(now()))
            .unwrap();
        assert_eq!(
            s.payload(),
            r#"{"class":"ActiveJob::QueueAdapters::ResqueAdapter::JobWrapper","args":[{"job_class":"SendInvoiceJob","job_id":"00000000-0000-4000-8000-000000000000","provider_job_id":null,"queue_name":"mailers","priority":null,"arguments":[42],"executions":0,"exception_executions":{},"locale":"en","timezone":"UTC","enqueued_at":"2026-11-21T19:15:33Z"}]}"#
        );
        assert!(s
            .delayed_item("mailers")
            .ends_with(r#""enqueued_at":"2026-11-21T19:15:33Z"}],"queue":"mailers"}"#));
    }

    #[test]
    fn rails_71_adds_nanos_and_scheduled_at() {
        let s = NewJob::new("A")
            .serialize(Rails::V7_1, now(), None)
            .unwrap();
        assert_eq!(
            s.data["enqueued_at"],
            json!("2026-11-21T19:15:33.000000000Z")
        );
        assert_eq!(s.data["scheduled_at"], Value::Null);
        assert_eq!(s.data.as_object().map(|m| m.len()), Some(12));
        let s = NewJob::new("A")
            .serialize(Rails::V7_1, now(), Some(now()))
            .unwrap();
        assert_eq!(
            s.data["scheduled_at"],
            json!("2026-11-21T19:15:33.000000000Z")
        );
        // A generated job id is a UUID v4.
        assert_eq!(
            uuid::Uuid::parse_str(&s.job_id).map(|u| u.get_version_num()),
            Ok(4)
        );
    }
}
