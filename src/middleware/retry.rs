//! The retry layer: a failure of a handler with a retry policy ([`crate::Registry::retry`]) is
//! retried with back-off, resque-retry's way (its attempt counter and failure keys, the job
//! filed in resque-scheduler's delayed set), and a success clears the attempt counter. This
//! module owns the decision: the layer prepares a plan when the handler fails, and [`decide`]
//! turns it and resque-retry's attempt counter — read in the same compare-and-set round as
//! the write, so two copies of one job failing at once count twice — into a retry (when, where)
//! or a final failure. The worker only writes what it decided, with the job's completion, in
//! one atomic step (`src/worker/complete.rs`, `complete.lua`) — on a spread cluster namespace
//! through the slot's outbox, the counter read without the compare-and-set
//! (`src/worker/step/outbox.rs`). The policy is that of the
//! handler resolved for the job — for a Rails ActiveJob wrapper, the handler of its
//! `job_class`.

use super::{Middleware, Next};
use crate::keys::Keys;
use crate::registry::extras::RetryPlan;
use crate::registry::retry::retry_identifier;
use crate::registry::{JobContext, JobResult};
use crate::wire::encode;
use crate::wire::number::FloatFormat;
use crate::wire::Payload;
use futures::future::BoxFuture;
use serde_json::{Map, Value};
use std::time::Duration;

/// The layer.
pub(crate) struct Retry;

impl Middleware for Retry {
    fn call<'a>(&'a self, ctx: JobContext, next: Next<'a>) -> BoxFuture<'a, JobResult> {
        let Some(policy) = ctx.retry_policy() else {
            return next.run(ctx);
        };
        Box::pin(async move {
            let result = next.run(ctx.clone()).await;
            let payload = ctx.payload();
            match &result {
                Ok(()) => ctx.extras(|x| x.clear_retry = Some(retry_key(payload))),
                Err(err) => {
                    let queue = policy
                        .queue
                        .clone()
                        .unwrap_or_else(|| ctx.queue().to_string());
                    let extra: Map<String, Value> = payload
                        .object()
                        .iter()
                        .filter(|(k, _)| k.as_str() != "class" && k.as_str() != "args")
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    let format = FloatFormat::RubyJsonGem;
                    let plan = RetryPlan {
                        retry_key: retry_key(payload),
                        item: encode::scheduler_item(
                            &queue,
                            payload.class(),
                            payload.args(),
                            &extra,
                            format,
                        ),
                        payload: encode::resque_payload_with(
                            payload.class(),
                            payload.args(),
                            &extra,
                            format,
                        ),
                        queue,
                        policy,
                        error: err.clone(),
                        raw: payload.raw().to_owned(),
                        from_queue: ctx.queue().to_string(),
                        worker: ctx.worker_id().into(),
                    };
                    ctx.extras(|x| x.retry = Some(Box::new(plan)));
                }
            }
            result
        })
    }
}

/// resque-retry's logical retry key of a payload.
fn retry_key(payload: &Payload) -> String {
    Keys::resque_retry_logical(payload.class(), retry_identifier(payload.args()).as_deref())
}

/// What [`decide`] made of a failure.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    /// Retried: resque-retry's `attempt` (from 0), run again after `delay`, at `at` (epoch s).
    Retry {
        /// The attempt counter's new value.
        attempt: u32,
        /// The back-off.
        delay: Duration,
        /// When it runs again (epoch s).
        at: i64,
    },
    /// Not retried (the policy's limit, or an exception it gives up on): the message of the
    /// final failure, which says how many runs it had.
    GiveUp {
        /// The error's message with `(gave up after <n> attempts)`.
        message: String,
    },
}

/// The retry decision for failed job `plan`, given resque-retry's attempt counter as read
/// (`None`: absent; text that is no whole number counts as absent) and the time `now_s`
/// (epoch s).
pub(crate) fn decide(plan: &RetryPlan, counter: Option<&str>, now_s: i64) -> Decision {
    let attempt = counter
        .and_then(|v| v.trim().parse::<i64>().ok())
        .map_or(0, |v| v.saturating_add(1).max(0));
    let attempt = u32::try_from(attempt).unwrap_or(u32::MAX);
    let err = &plan.error;
    if plan.policy.retries(attempt, &err.exception) {
        let delay = plan.policy.delay_for(attempt);
        let at = now_s.saturating_add(i64::try_from(delay.as_secs()).unwrap_or(i64::MAX));
        Decision::Retry { attempt, delay, at }
    } else {
        let runs = u64::from(attempt) + 1;
        Decision::GiveUp {
            message: format!(
                "{} (gave up after {runs} attempt{})",
                err.message,
                if runs == 1 { "" } else { "s" }
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job_error::JobError;
    use crate::registry::retry::RetryPolicy;
    use std::sync::Arc;

    fn plan(policy: RetryPolicy) -> RetryPlan {
        RetryPlan {
            policy: Arc::new(policy),
            retry_key: "resque-retry:K".into(),
            queue: "q".into(),
            item: String::new(),
            payload: String::new(),
            error: JobError::new("Boom", "it broke"),
            raw: serde_json::value::RawValue::from_string("{}".into()).expect("json"),
            from_queue: "q".into(),
            worker: Arc::from("w"),
        }
    }

    #[test]
    fn the_counter_decides_retry_or_give_up() {
        let p = plan(RetryPolicy::fixed(Duration::from_secs(5), 2));
        let retry = |attempt, at| Decision::Retry {
            attempt,
            delay: Duration::from_secs(5),
            at,
        };
        // Absent, or not a whole number: the first retry.
        assert_eq!(decide(&p, None, 100), retry(0, 105));
        assert_eq!(decide(&p, Some("x"), 100), retry(0, 105));
        assert_eq!(decide(&p, Some(" 0 "), 100), retry(1, 105));
        assert_eq!(
            decide(&p, Some("1"), 100),
            Decision::GiveUp {
                message: "it broke (gave up after 3 attempts)".into()
            }
        );
        let p = plan(RetryPolicy::fixed(Duration::from_secs(5), 2).give_up_on(["Boom"]));
        assert_eq!(
            decide(&p, None, 100),
            Decision::GiveUp {
                message: "it broke (gave up after 1 attempt)".into()
            }
        );
    }
}
