//! Resque's job hooks, as one middleware: `before_perform`, `after_perform`, `on_failure`
//! around jobs, and `before_enqueue`, `after_enqueue` around enqueues — for all classes or, with
//! [`Hooks::for_class`], one. (`around_perform` is a [`super::Middleware`] itself.)
//!
//! ```
//! use resq::middleware::Hooks;
//! use resq::{JobError, Registry};
//!
//! let hooks = Hooks::for_class("Archive")
//!     .before_perform(|ctx| {
//!         // Resque's DontPerform: skip the job (it counts as done).
//!         if ctx.args().is_empty() {
//!             return Err(JobError::dont_perform());
//!         }
//!         Ok(())
//!     })
//!     .on_failure(|ctx, err| eprintln!("{} failed: {err}", ctx.class()));
//! let registry = Registry::new().hooks(hooks);
//! # let _ = registry;
//! ```

use super::enqueue::{EnqueueMiddleware, EnqueueNext, Outgoing};
use super::{Middleware, Next};
use crate::registry::{JobContext, JobError, JobResult, Registry};
use futures::future::BoxFuture;
use std::sync::Arc;

type Before = Arc<dyn Fn(&JobContext) -> Result<(), JobError> + Send + Sync>;
type After = Arc<dyn Fn(&JobContext) + Send + Sync>;
type OnFailure = Arc<dyn Fn(&JobContext, &JobError) + Send + Sync>;
type BeforeEnqueue = Arc<dyn Fn(&mut Outgoing) -> bool + Send + Sync>;
type AfterEnqueue = Arc<dyn Fn(&Outgoing) + Send + Sync>;

/// Resque-style hooks (see the [module docs](self)). Cheap to clone, so one set can go on a
/// [`crate::Registry`] (perform hooks) and a [`crate::Client`] (enqueue hooks).
#[derive(Clone, Default)]
pub struct Hooks {
    /// Only jobs of this class (the class a job is dispatched by), when set.
    class: Option<String>,
    /// `before_perform` hooks, in order.
    before: Vec<Before>,
    /// `after_perform` hooks, in order.
    after: Vec<After>,
    /// `on_failure` hooks, in order.
    failure: Vec<OnFailure>,
    /// `before_enqueue` hooks, in order.
    before_enqueue: Vec<BeforeEnqueue>,
    /// `after_enqueue` hooks, in order.
    after_enqueue: Vec<AfterEnqueue>,
}

impl Hooks {
    /// Hooks for every class.
    pub fn new() -> Self {
        Self::default()
    }

    /// Hooks for the jobs of `class` only.
    pub fn for_class(class: impl Into<String>) -> Self {
        Hooks {
            class: Some(class.into()),
            ..Self::default()
        }
    }

    /// Runs before the job; an error fails it without running it, except
    /// [`JobError::dont_perform`], which skips it (it counts as done), as Resque's
    /// `DontPerform` does.
    pub fn before_perform(
        mut self,
        f: impl Fn(&JobContext) -> Result<(), JobError> + Send + Sync + 'static,
    ) -> Self {
        self.before.push(Arc::new(f));
        self
    }

    /// Runs after the job succeeded.
    pub fn after_perform(mut self, f: impl Fn(&JobContext) + Send + Sync + 'static) -> Self {
        self.after.push(Arc::new(f));
        self
    }

    /// Runs after the job failed, with its error.
    pub fn on_failure(
        mut self,
        f: impl Fn(&JobContext, &JobError) + Send + Sync + 'static,
    ) -> Self {
        self.failure.push(Arc::new(f));
        self
    }

    /// Runs before an enqueue; it may change the job; returning `false` drops the enqueue, as
    /// a Resque `before_enqueue` hook returning `false` does.
    pub fn before_enqueue(
        mut self,
        f: impl Fn(&mut Outgoing) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.before_enqueue.push(Arc::new(f));
        self
    }

    /// Runs after a job was enqueued.
    pub fn after_enqueue(mut self, f: impl Fn(&Outgoing) + Send + Sync + 'static) -> Self {
        self.after_enqueue.push(Arc::new(f));
        self
    }

    fn applies(&self, class: &str) -> bool {
        self.class.as_deref().is_none_or(|c| c == class)
    }
}

// Defined with the hooks: the registry sits below the middleware and does not name them.
impl Registry {
    /// Adds Resque-style hooks (a thin [`Hooks`] layer).
    pub fn hooks(self, hooks: Hooks) -> Self {
        self.layer(hooks)
    }
}

impl Middleware for Hooks {
    fn call<'a>(&'a self, ctx: JobContext, next: Next<'a>) -> BoxFuture<'a, JobResult> {
        if !self.applies(ctx.class()) {
            return next.run(ctx);
        }
        Box::pin(async move {
            for f in &self.before {
                match f(&ctx) {
                    Ok(()) => {}
                    Err(e) if e.is_dont_perform() => return Ok(()),
                    Err(e) => return Err(e),
                }
            }
            let result = next.run(ctx.clone()).await;
            match &result {
                Ok(()) => self.after.iter().for_each(|f| f(&ctx)),
                Err(e) => self.failure.iter().for_each(|f| f(&ctx, e)),
            }
            result
        })
    }
}

impl EnqueueMiddleware for Hooks {
    fn call<'a>(
        &'a self,
        mut job: Outgoing,
        next: EnqueueNext<'a>,
    ) -> BoxFuture<'a, crate::Result<bool>> {
        Box::pin(async move {
            if self.applies(&job.class) {
                for f in &self.before_enqueue {
                    if !f(&mut job) {
                        return Ok(false);
                    }
                }
            }
            let seen = job.clone();
            let written = next.run(job).await?;
            if written && self.applies(&seen.class) {
                self.after_enqueue.iter().for_each(|f| f(&seen));
            }
            Ok(written)
        })
    }
}
