//! Jesque's delayed and recurring jobs (wire notes §9.2, items 43–46): the queue key itself is a
//! ZSET of job JSON scored by due time in epoch **milliseconds**; a recurring job also has its
//! period in `<ns>:queue:<q>:frequency`. Jesque workers (and resq workers told the queue is one,
//! see `worker::jesque`) pop due members; a recurring member's score moves on by its period.
//!
//! Jesque's rules are kept: the time must be in the future, a period at least one second, the
//! queue key a zset or absent (and the frequency key a hash or absent), checked atomically with
//! the write. A delayed enqueue adds the queue to `<ns>:queues` (so Ruby `QUEUES=*` workers
//! would poll it and crash on WRONGTYPE — exclude it with `!<queue>` in their lists); a
//! recurring enqueue does not.

use super::{validate, Client, FloatFormat, NewJob};
use crate::error::{Error, Result};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use std::time::Duration;

/// A job in Jesque's form: `{"class":…,"args":…,"vars":…}` with Java's number text.
#[derive(Debug, Clone, PartialEq)]
pub struct JesqueJob {
    /// Class name.
    pub class: String,
    /// Positional args (`None` → `"args":null`).
    pub args: Option<Vec<Value>>,
    /// Named args (`None` → `"vars":null`).
    pub vars: Option<Map<String, Value>>,
}

impl JesqueJob {
    /// A job with positional args.
    pub fn new(class: impl Into<String>, args: Vec<Value>) -> Self {
        JesqueJob {
            class: class.into(),
            args: Some(args),
            vars: None,
        }
    }

    /// A job with named args only (`"args":null`).
    pub fn with_vars(class: impl Into<String>, vars: Map<String, Value>) -> Self {
        JesqueJob {
            class: class.into(),
            args: None,
            vars: Some(vars),
        }
    }

    /// The exact JSON Jesque's `ObjectMapper` writes for this job (the zset member).
    pub fn encode(&self) -> String {
        NewJob::jesque(self.class.clone(), self.args.clone(), self.vars.clone())
            .encode(FloatFormat::Java)
    }

    fn check(&self, queue: &str) -> Result<()> {
        validate(queue, &self.class)?;
        if self.args.is_none() && self.vars.is_none() {
            return Err(Error::Rejected(
                "a Jesque job needs args or vars (Job.isValid)".into(),
            ));
        }
        Ok(())
    }
}

/// Epoch milliseconds of `at`, refused unless after now (Jesque's `validateArguments`).
fn future_ms(at: DateTime<Utc>) -> Result<i64> {
    let ms = at.timestamp_millis();
    if ms <= Utc::now().timestamp_millis() {
        return Err(Error::Rejected(format!(
            "future must be after current time: {}",
            at.to_rfc3339()
        )));
    }
    Ok(ms)
}

impl Client {
    /// Jesque's `delayedEnqueue`: `ZADD <ns>:queue:<q> <ms> <json>` + `SADD <ns>:queues q`.
    /// The same job twice is one member (the second call moves its due time).
    pub async fn jesque_delayed_enqueue(
        &self,
        queue: &str,
        job: &JesqueJob,
        at: DateTime<Utc>,
    ) -> Result<()> {
        job.check(queue)?;
        let ms = future_ms(at)?;
        self.jesque_call("delayed", queue, &job.encode(), ms, 0)
            .await
            .map(drop)
    }

    /// [`Client::jesque_delayed_enqueue`] due `delay` from now.
    pub async fn jesque_delayed_enqueue_in(
        &self,
        queue: &str,
        job: &JesqueJob,
        delay: Duration,
    ) -> Result<()> {
        let at = crate::wire::time::after_now(delay)?;
        self.jesque_delayed_enqueue(queue, job, at).await
    }

    /// Jesque's `removeDelayedEnqueue`: `ZREM` of the byte-exact JSON; whether it was there.
    pub async fn jesque_remove_delayed(&self, queue: &str, job: &JesqueJob) -> Result<bool> {
        job.check(queue)?;
        Ok(self
            .jesque_call("remove_delayed", queue, &job.encode(), 0, 0)
            .await?
            > 0)
    }

    /// Jesque's `recurringEnqueue`: the member due at `first`, then every `every` (at least
    /// 1 s), its period written to `<ns>:queue:<q>:frequency` in the same atomic step. The
    /// queue is not added to `<ns>:queues`.
    pub async fn jesque_recurring_enqueue(
        &self,
        queue: &str,
        job: &JesqueJob,
        first: DateTime<Utc>,
        every: Duration,
    ) -> Result<()> {
        job.check(queue)?;
        let ms = future_ms(first)?;
        if every < Duration::from_secs(1) {
            return Err(Error::Rejected(
                "frequency must be at least one second".into(),
            ));
        }
        let period = i64::try_from(every.as_millis()).unwrap_or(i64::MAX);
        self.jesque_call("recurring", queue, &job.encode(), ms, period)
            .await
            .map(drop)
    }

    /// Jesque's `removeRecurringEnqueue`: `HDEL` of the period and `ZREM` of the member;
    /// whether the member was there.
    pub async fn jesque_remove_recurring(&self, queue: &str, job: &JesqueJob) -> Result<bool> {
        job.check(queue)?;
        Ok(self
            .jesque_call("remove_recurring", queue, &job.encode(), 0, 0)
            .await?
            > 0)
    }

    async fn jesque_call(
        &self,
        mode: &str,
        queue: &str,
        json: &str,
        ms: i64,
        period_ms: i64,
    ) -> Result<i64> {
        crate::error::not_spread(&self.keys, "Jesque delayed and recurring queues")?;
        let r = crate::scripts::JesqueEnqueue {
            queue: self.keys.queue(queue),
            frequency: self.keys.queue_frequency(queue),
            queues: self.keys.queues(),
            mode,
            json,
            due_ms: ms,
            queue_name: queue,
            period_ms,
        }
        .call()
        .invoke_async(&mut self.con())
        .await;
        match r {
            Ok(n) => Ok(n),
            Err(e) if e.code() == Some("WRONGTYPE") => Err(Error::Rejected(format!(
                "{queue} cannot be used as a Jesque delayed queue ({})",
                e.detail().unwrap_or("wrong key type")
            ))),
            Err(e) => Err(e.into()),
        }
    }
}
