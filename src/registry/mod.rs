//! Class name → handler.
//!
//! Three kinds of handler, all stored behind one type-erased [`Handler`]:
//! * async functions over a [`JobContext`] (positional JSON args, the whole payload);
//! * typed jobs ([`Job`]): `const CLASS` and serde-decoded args;
//! * blocking functions, run on tokio's blocking pool so they never stall the async threads.
//!
//! A handler's error or panic becomes a failure entry (see [`JobError`] and [`panic`]).

mod context;
mod error;
pub mod panic;
pub mod retry;
pub mod unique;

pub use context::JobContext;
pub use error::JobError;

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// What a handler returns.
pub type JobResult = Result<(), JobError>;

/// A type-erased handler.
pub type Handler = Arc<dyn Fn(JobContext) -> BoxFuture<'static, JobResult> + Send + Sync>;

/// A registered handler with its options.
#[derive(Clone)]
pub struct Entry {
    /// The handler itself.
    pub handler: Handler,
    /// Per-handler time limit (overrides the worker default).
    pub timeout: Option<Duration>,
    /// Whether it runs on the blocking pool (and so cannot be cancelled).
    pub blocking: bool,
    /// Retry with back-off on failure (see [`retry`]); none by default.
    pub retry: Option<Arc<retry::RetryPolicy>>,
}

/// A typed job: its class name and serde-decoded arguments.
///
/// `Args` is decoded from the positional args array (a tuple or a `Vec` for several, a one-
/// element tuple for one).
pub trait Job: Send + Sync + 'static {
    /// The class name producers use (`"Archive"`, `"Jobs::Resize"`).
    const CLASS: &'static str;
    /// The decoded arguments.
    type Args: DeserializeOwned + Send + 'static;
    /// Runs the job.
    fn perform(&self, args: Self::Args, ctx: JobContext) -> impl Future<Output = JobResult> + Send;
}

/// The table of handlers a worker dispatches to.
#[derive(Clone, Default)]
pub struct Registry {
    /// Handlers by class name.
    entries: HashMap<String, Entry>,
}

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

    /// Sets a time limit for the handler registered under `class`.
    pub fn timeout(mut self, class: &str, limit: Duration) -> Self {
        if let Some(e) = self.entries.get_mut(class) {
            e.timeout = Some(limit);
        }
        self
    }

    /// Retries failures of the handler registered under `class` with `policy` (see
    /// [`retry`]).
    pub fn retry(mut self, class: &str, policy: retry::RetryPolicy) -> Self {
        if let Some(e) = self.entries.get_mut(class) {
            e.retry = Some(Arc::new(policy));
        }
        self
    }

    /// The handler for `class`, if any.
    pub fn get(&self, class: &str) -> Option<&Entry> {
        self.entries.get(class)
    }

    /// Registered class names, sorted.
    pub fn classes(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.entries.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }

    fn insert(&mut self, class: &str, handler: Handler, blocking: bool) {
        self.entries.insert(
            class.to_string(),
            Entry {
                handler,
                timeout: None,
                blocking,
                retry: None,
            },
        );
    }
}
