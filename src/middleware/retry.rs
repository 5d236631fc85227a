//! The retry layer: a failure of a handler with a retry policy ([`crate::Registry::retry`]) is
//! retried with back-off, resque-retry's way (its attempt counter and failure keys, the job
//! filed in resque-scheduler's delayed set), and a success clears the attempt counter. The
//! layer only decides; the worker writes the decision with the job's completion, in one atomic
//! step (`complete.lua`). The policy is that of the handler resolved for the job — for a Rails
//! ActiveJob wrapper, the handler of its `job_class`.

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
