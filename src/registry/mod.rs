//! Class name → handler.
//!
//! Three kinds of handler, all stored behind one type-erased [`Handler`]:
//! * async functions over a [`JobContext`] (positional JSON args, the whole payload);
//! * typed jobs ([`Job`]): `const CLASS` and serde-decoded args;
//! * blocking functions, run on tokio's blocking pool so they never stall the async threads.
//!
//! A handler's error or panic becomes a failure entry (see [`JobError`] and [`mod@panic`]).
//!
//! This is the job-handler API every layer above builds on: [`Job`], [`JobContext`],
//! [`JobError`], the [`Registry`] and what a layer around a job is (`layer`: the `Middleware`
//! trait, re-exported by [`crate::middleware`]); `activejob` routes a Rails wrapper payload to
//! the handler of its `job_class`.

mod activejob;
mod context;
pub(crate) mod extras;
pub(crate) mod layer;
pub(crate) mod panic;
pub(crate) mod retry;
pub(crate) mod unique;

pub use crate::job_error::JobError;
pub use context::JobContext;
use layer::Middleware;
pub use retry::{Delays, RetryPolicy};

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// What a handler returns.
pub type JobResult = Result<(), JobError>;

/// A type-erased handler.
pub(crate) type Handler = Arc<dyn Fn(JobContext) -> BoxFuture<'static, JobResult> + Send + Sync>;

/// A registered handler with its options.
#[derive(Clone)]
pub(crate) struct Entry {
    /// The handler itself.
    pub handler: Handler,
    /// Per-handler time limit (overrides the worker default).
    pub timeout: Option<Duration>,
    /// Whether it runs on the blocking pool (and so cannot be cancelled).
    pub blocking: bool,
    /// Retry with back-off on failure (see [`retry`]); none by default.
    pub retry: Option<Arc<retry::RetryPolicy>>,
    /// How long a tracked job's finished record is kept (the worker's default otherwise).
    pub track_ttl: Option<Duration>,
}

/// A typed job: its class name and serde-decoded arguments.
///
/// `Args` is decoded from the positional args array (a tuple or a `Vec` for several, a one-
/// element tuple for one).
pub trait Job: Send + Sync + 'static {
    /// The class name producers use (`"Archive"`, `"Jobs::Resize"`).
    const CLASS: &'static str;
    /// The queue [`crate::Client::enqueue`] puts it on (`None`: the client's default queue),
    /// like a Ruby job class's `@queue`.
    const QUEUE: Option<&'static str> = None;
    /// The decoded arguments.
    type Args: DeserializeOwned + Send + 'static;
    /// Runs the job.
    fn perform(&self, args: Self::Args, ctx: JobContext) -> impl Future<Output = JobResult> + Send;
}

/// A class's options ([`Registry::timeout`], [`Registry::retry`], [`Registry::track_ttl`]),
/// kept apart from its handler so that they hold whether they are set before or after it.
#[derive(Clone, Default)]
struct ClassOptions {
    timeout: Option<Duration>,
    retry: Option<Arc<retry::RetryPolicy>>,
    track_ttl: Option<Duration>,
}

impl ClassOptions {
    /// Writes these options into `e`.
    fn apply(&self, e: &mut Entry) {
        e.timeout = self.timeout;
        e.retry = self.retry.clone();
        e.track_ttl = self.track_ttl;
    }
}

/// The table of handlers a worker dispatches to, and the middleware around them.
///
/// ```
/// use resq::{JobContext, JobError, Registry, RetryPolicy};
/// use std::time::Duration;
///
/// let registry = Registry::new()
///     // An async fn over the job's JSON args.
///     .handler("Notify", |ctx: JobContext| async move {
///         let who: String = ctx.arg(0)?;
///         if who.is_empty() {
///             return Err(JobError::msg("nobody to notify")); // → <ns>:failed
///         }
///         Ok(())
///     })
///     // Blocking code runs on tokio's blocking pool.
///     .blocking("Resize", |ctx| {
///         let _path: String = ctx.arg(0)?;
///         Ok(())
///     })
///     // Per-class options: a time limit, retries with back-off (resque-retry's keys).
///     .timeout("Resize", Duration::from_secs(30))
///     .retry("Notify", RetryPolicy::geometric(Duration::from_secs(5), 2.0, 5));
/// assert_eq!(registry.classes(), ["Notify", "Resize"]);
/// ```
#[derive(Clone, Default)]
pub struct Registry {
    /// Handlers by class name.
    entries: HashMap<String, Arc<Entry>>,
    /// Options by class name, whether its handler is registered yet or not.
    options: HashMap<String, ClassOptions>,
    /// Middleware added with [`Registry::layer`], outermost first.
    layers: Vec<Arc<dyn Middleware>>,
    /// Classes whose jobs follow resque-status's convention (`args[0]` is the job id).
    statused: std::collections::HashSet<String>,
    /// Limits declared with [`Registry::limit`].
    limits: Vec<crate::limits::Limit>,
}

/// A job no handler takes: why, and its context back.
pub(crate) type Refused = Box<(JobError, JobContext)>;

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers an async handler for `class`.
    pub fn handler<F, Fut>(mut self, class: &str, f: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = JobResult> + Send + 'static,
    {
        let handler: Handler = Arc::new(move |ctx| Box::pin(f(ctx)));
        self.insert(class, handler, false);
        self
    }

    /// Registers a blocking handler for `class`; it runs on the blocking pool.
    pub fn blocking<F>(mut self, class: &str, f: F) -> Self
    where
        F: Fn(JobContext) -> JobResult + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        let handler: Handler = Arc::new(move |ctx| {
            let f = f.clone();
            Box::pin(async move {
                match tokio::task::spawn_blocking(move || panic::catch(|| f(ctx))).await {
                    Ok(result) => result,
                    Err(e) => Err(JobError::new("Resq::Panic", e.to_string())),
                }
            })
        });
        self.insert(class, handler, true);
        self
    }

    /// Registers a typed job under `J::CLASS`.
    pub fn job<J: Job>(mut self, job: J) -> Self {
        let job = Arc::new(job);
        let handler: Handler = Arc::new(move |ctx: JobContext| {
            let job = job.clone();
            Box::pin(async move {
                let args: J::Args = ctx.decode_args()?;
                job.perform(args, ctx).await
            })
        });
        self.insert(J::CLASS, handler, false);
        self
    }

    /// Declares `class` a resque-status job (`include Resque::Plugins::Status` in Ruby): its
    /// `args[0]` is the job's id and `args[1]` its options hash, and its record
    /// `<ns>:status:<id>` is kept as resque-status keeps it (docs/jobs.md). The handler sees
    /// the options: [`JobContext::args`] is `[options]`, [`JobContext::options`] the hash, and
    /// [`JobContext::job_id`] the id.
    pub fn statused(mut self, class: &str) -> Self {
        self.statused.insert(class.to_string());
        self
    }

    /// How long the finished records of `class`'s tracked jobs are kept (default 24 h, or
    /// `RESQ_JOB_TTL`; zero keeps them until purged).
    pub fn track_ttl(mut self, class: &str, ttl: Duration) -> Self {
        let value = Some(ttl);
        self.set_option(class, |o| o.track_ttl = value);
        self
    }

    /// Declares a limit (see [`crate::limits`]): written to Redis when the worker starts, in
    /// force for every resq process of the namespace. A limit of the same name declared
    /// again replaces it; `resq limits set` overrides it fleet-wide.
    pub fn limit(mut self, limit: crate::limits::Limit) -> Self {
        self.limits.retain(|l| l.name != limit.name);
        self.limits.push(limit);
        self
    }

    /// The declared limits.
    pub(crate) fn declared_limits(&self) -> &[crate::limits::Limit] {
        &self.limits
    }

    /// How long finished tracked jobs stay listed: the longest TTL any class keeps its records
    /// (`default` for those without their own), or zero when one keeps them until purged.
    pub(crate) fn longest_track_ttl(&self, default: Duration) -> Duration {
        let mut longest = default;
        for e in self.entries.values() {
            let ttl = e.track_ttl.unwrap_or(default);
            if ttl.is_zero() {
                return Duration::ZERO;
            }
            longest = longest.max(ttl);
        }
        if default.is_zero() {
            Duration::ZERO
        } else {
            longest
        }
    }

    /// The statused classes (see [`Registry::statused`]), sorted.
    pub(crate) fn statused_classes(&self) -> Vec<String> {
        let mut v: Vec<String> = self.statused.iter().cloned().collect();
        v.sort_unstable();
        v
    }

    /// The statused classes.
    pub(crate) fn statused_set(&self) -> &std::collections::HashSet<String> {
        &self.statused
    }

    /// Sets a time limit for the handler registered under `class`.
    pub fn timeout(mut self, class: &str, limit: Duration) -> Self {
        let value = Some(limit);
        self.set_option(class, |o| o.timeout = value);
        self
    }

    /// Retries failures of the handler registered under `class` with `policy` (see
    /// `retry`). Like every per-class option, it may be set before or after the handler.
    pub fn retry(mut self, class: &str, policy: retry::RetryPolicy) -> Self {
        let value = Some(Arc::new(policy));
        self.set_option(class, |o| o.retry = value);
        self
    }

    /// Adds a middleware around every job (after those added before it: the first added is
    /// the outermost of yours). See [`crate::middleware`] for where yours run among resq's own.
    pub fn layer(mut self, middleware: impl Middleware) -> Self {
        self.layers.push(Arc::new(middleware));
        self
    }

    /// The middleware added with [`Registry::layer`], outermost first.
    pub(crate) fn layers(&self) -> &[Arc<dyn Middleware>] {
        &self.layers
    }

    /// The handler registered under `class`, if any.
    pub(crate) fn get(&self, class: &str) -> Option<&Arc<Entry>> {
        self.entries.get(class)
    }

    /// Whether a handler is registered under `class`.
    pub fn handles(&self, class: &str) -> bool {
        self.entries.contains_key(class)
    }

    /// The entry a payload runs with: the one under its class, else, for a Rails ActiveJob
    /// wrapper, the one under its `job_class` — the rule [`Registry::resolve`] applies, without
    /// decoding the job (the migration report asks it of payloads it only reads).
    #[cfg_attr(not(any(feature = "cli", feature = "web")), allow(dead_code))]
    pub(crate) fn entry_for(&self, payload: &crate::wire::Payload) -> Option<&Arc<Entry>> {
        self.entries.get(payload.class()).or_else(|| {
            crate::wire::activejob::job_class_of(payload).and_then(|c| self.entries.get(c))
        })
    }

    /// Finds the handler a job runs with, once: the one registered under its class, else, for
    /// a Rails ActiveJob wrapper, the one under its `job_class` (the context then carries the
    /// decoded ActiveJob job). The context comes back carrying the handler's options.
    ///
    /// Errors: `Resq::UnknownJobClass` when no handler matches, `Resq::MalformedPayload` for
    /// a wrapper whose job cannot be read.
    pub(crate) fn resolve(&self, ctx: JobContext) -> Result<(Arc<Entry>, JobContext), Refused> {
        let class = ctx.payload().class().to_string();
        if let Some(entry) = self.entries.get(&class) {
            return Ok((entry.clone(), ctx.with_entry(entry.clone())));
        }
        if crate::wire::activejob::is_wrapper(&class) {
            return match activejob::route(self, ctx.clone()) {
                Ok((entry, ctx)) => Ok((entry.clone(), ctx.with_entry(entry))),
                Err(e) => Err(Box::new((e, ctx))),
            };
        }
        Err(Box::new((
            JobError::new(
                "Resq::UnknownJobClass",
                format!("no handler registered for class {class}"),
            ),
            ctx,
        )))
    }

    /// Registered class names, sorted.
    pub fn classes(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.entries.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }

    fn insert(&mut self, class: &str, handler: Handler, blocking: bool) {
        let mut entry = Entry {
            handler,
            timeout: None,
            blocking,
            retry: None,
            track_ttl: None,
        };
        if let Some(o) = self.options.get(class) {
            o.apply(&mut entry);
        }
        self.entries.insert(class.to_string(), Arc::new(entry));
    }

    /// Changes an option of `class`, and its handler's if it has one already.
    fn set_option(&mut self, class: &str, set: impl FnOnce(&mut ClassOptions)) {
        let o = self.options.entry(class.to_string()).or_default();
        set(o);
        if let Some(e) = self.entries.get_mut(class) {
            o.apply(Arc::make_mut(e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A class's options hold whether they are set before its handler, after it, or before a
    /// handler registered again.
    #[test]
    fn options_hold_in_any_order() {
        let ok = |_ctx: JobContext| async { Ok(()) };
        let policy = || retry::RetryPolicy::fixed(Duration::from_secs(1), 3);
        let ten = Duration::from_secs(10);
        let before = Registry::new()
            .retry("A", policy())
            .timeout("A", ten)
            .track_ttl("A", ten)
            .handler("A", ok);
        let after = Registry::new()
            .handler("A", ok)
            .retry("A", policy())
            .timeout("A", ten)
            .track_ttl("A", ten);
        let again = after.clone().handler("A", ok);
        for r in [before, after, again] {
            let e = &r.entries["A"];
            assert!(e.retry.is_some());
            assert_eq!((e.timeout, e.track_ttl), (Some(ten), Some(ten)));
        }
        let other = Registry::new().retry("B", policy()).handler("A", ok);
        assert!(other.entries["A"].retry.is_none());
        assert_eq!(other.classes(), ["A"]);
    }
}
