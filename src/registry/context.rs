//! What a handler receives: the job's args, its whole payload, where it came from.

use super::extras::Extras;
use super::Entry;
use super::JobError;
use crate::wire::activejob::ActiveJob;
use crate::wire::Payload;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The job being performed: what a handler and every middleware get.
#[derive(Clone)]
pub struct JobContext {
    /// The decoded payload (raw bytes kept).
    payload: Arc<Payload>,
    /// Queue it was reserved from.
    queue: Arc<str>,
    /// Id of the slot running it.
    worker: Arc<str>,
    /// The ActiveJob job, when the payload is Rails' wrapper dispatched by its `job_class`.
    activejob: Option<Arc<ActiveJob>>,
    /// The handler resolved for the job (its options), once resolved.
    entry: Option<Arc<Entry>>,
    /// What the chain's layers decided for the completion.
    extras: Arc<Mutex<Extras>>,
    /// Values middleware hand on to later layers and the handler, one per type.
    extensions: Arc<Mutex<Extensions>>,
    /// The tracked job being run, when it is tracked.
    tracked: Option<Arc<crate::jobs::TrackedRun>>,
}

/// Typed values attached to a job's context.
type Extensions = HashMap<TypeId, Arc<dyn Any + Send + Sync>>;

impl std::fmt::Debug for JobContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobContext")
            .field("class", &self.class())
            .field("queue", &self.queue)
            .field("worker", &self.worker)
            .field("args", &self.args())
            .finish()
    }
}

impl JobContext {
    /// A context for `payload` reserved from `queue` by `worker`.
    pub(crate) fn new(payload: Arc<Payload>, queue: Arc<str>, worker: Arc<str>) -> Self {
        JobContext {
            payload,
            queue,
            worker,
            activejob: None,
            entry: None,
            extras: Arc::default(),
            extensions: Arc::default(),
            tracked: None,
        }
    }

    /// The same context for an ActiveJob-wrapped payload dispatched by its `job_class`.
    pub(crate) fn with_activejob(mut self, job: Arc<ActiveJob>) -> Self {
        self.activejob = Some(job);
        self
    }

    /// The same context with its resolved handler.
    pub(crate) fn with_entry(mut self, entry: Arc<Entry>) -> Self {
        self.entry = Some(entry);
        self
    }

    /// The same context for a tracked job.
    pub(crate) fn with_tracked(mut self, run: Arc<crate::jobs::TrackedRun>) -> Self {
        self.tracked = Some(run);
        self
    }

    /// The tracked job being run, when it is tracked.
    pub(crate) fn tracked(&self) -> Option<&Arc<crate::jobs::TrackedRun>> {
        self.tracked.as_ref()
    }

    /// The resolved handler's own tracking TTL.
    pub(crate) fn handler_track_ttl(&self) -> Option<std::time::Duration> {
        self.entry.as_ref().and_then(|e| e.track_ttl)
    }

    /// The resolved handler's own time limit.
    pub(crate) fn handler_timeout(&self) -> Option<std::time::Duration> {
        self.entry.as_ref().and_then(|e| e.timeout)
    }

    /// Whether the resolved handler runs on the blocking pool.
    pub(crate) fn handler_is_blocking(&self) -> bool {
        self.entry.as_ref().is_some_and(|e| e.blocking)
    }

    /// The resolved handler's retry policy.
    pub(crate) fn retry_policy(&self) -> Option<Arc<super::retry::RetryPolicy>> {
        self.entry.as_ref().and_then(|e| e.retry.clone())
    }

    /// Reads or changes what the layers decided for the completion.
    pub(crate) fn extras<T>(&self, f: impl FnOnce(&mut Extras) -> T) -> T {
        f(&mut self.extras.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Takes what the layers decided (once the chain has run).
    pub(crate) fn take_extras(&self) -> Extras {
        self.extras(std::mem::take)
    }

    /// The ActiveJob job (metadata, decoded and serialized arguments) when the payload is
    /// Rails' `JobWrapper` dispatched by its `job_class`; `None` otherwise.
    pub fn activejob(&self) -> Option<&ActiveJob> {
        self.activejob.as_deref()
    }

    /// The class name the job was dispatched by: the payload's class, or for an ActiveJob job
    /// its `job_class` (`payload().class()` is then the wrapper).
    pub fn class(&self) -> &str {
        match &self.activejob {
            Some(job) => job.job_class(),
            None => self.payload.class(),
        }
    }

    /// Positional arguments: the payload's, or for an ActiveJob job its arguments decoded
    /// into plain JSON (see `crate::wire::activejob::decode`). For a resque-status job
    /// ([`crate::Registry::statused`]) the id in `args[0]` is left out: `[options]`.
    pub fn args(&self) -> &[Value] {
        match &self.activejob {
            Some(job) => job.arguments(),
            None if self.tracked.as_ref().is_some_and(|t| t.id_in_args()) => {
                self.payload.args().get(1..).unwrap_or(&[])
            }
            None => self.payload.args(),
        }
    }

    /// The tracked job's id ([`crate::jobs`]), when the job is tracked.
    pub fn job_id(&self) -> Option<&crate::jobs::JobId> {
        self.tracked.as_ref().map(|t| &t.id)
    }

    /// The batch of the job: the one it is a member of (so its handler can add jobs to it:
    /// [`crate::jobs::Track::in_batch`]), or for a batch's callback the batch that fired it
    /// (its payload's `resq_batch`).
    pub fn batch(&self) -> Option<crate::wire::job_id::BatchId> {
        if let Some(b) = self.tracked.as_ref().and_then(|t| t.batch.clone()) {
            return Some(b);
        }
        self.payload
            .object()
            .get("resq_batch")
            .and_then(Value::as_str)
            .and_then(crate::wire::job_id::BatchId::parse)
    }

    /// The records of the jobs this one waited for ([`crate::jobs::Track::after`]), in the
    /// order given: their states and results (fan-in). Empty for a job that waited for none,
    /// or is not tracked.
    pub async fn dependencies(&self) -> Result<Vec<crate::jobs::JobStatus>, JobError> {
        match &self.tracked {
            Some(t) => t.dependencies().await,
            None => Ok(Vec::new()),
        }
    }

    /// A resque-status job's options (its `args[1]` hash), when it is one.
    pub fn options(&self) -> Option<&Map<String, Value>> {
        if !self.tracked.as_ref().is_some_and(|t| t.id_in_args()) {
            return None;
        }
        self.payload.args().get(1).and_then(Value::as_object)
    }

    /// Reports progress on a tracked job (resque-status's `at(num, total, message)`): its
    /// record gets `num`, `total` and `message`. Once the job is asked to stop (cancelled while
    /// running, resque-status's `Hash.kill`), this returns an error instead: return it (`?`)
    /// and the job ends killed, as resque-status's jobs do. Does nothing for a job that is not
    /// tracked.
    pub async fn progress(&self, num: u64, total: u64, message: &str) -> Result<(), JobError> {
        self.progress_with(
            Some(num as f64),
            Some(total as f64),
            Some(message),
            &Map::new(),
        )
        .await
    }

    /// [`JobContext::progress`] with any of `num`, `total`, `message`, and custom fields merged
    /// into the record (resque-status's `at`/`tick` with a hash).
    pub async fn progress_with(
        &self,
        num: Option<f64>,
        total: Option<f64>,
        message: Option<&str>,
        fields: &Map<String, Value>,
    ) -> Result<(), JobError> {
        match &self.tracked {
            Some(t) => t.progress(num, total, message, fields).await,
            None => Ok(()),
        }
    }

    /// Resolves once the (tracked) job is asked to stop; never for a job that is not tracked.
    /// `select!` on it around long waits; then return [`JobContext::killed`].
    pub async fn cancelled(&self) {
        match &self.tracked {
            Some(t) => t.cancelled().await,
            None => std::future::pending().await,
        }
    }

    /// Whether the job has been asked to stop (as far as this process knows).
    pub fn is_cancelled(&self) -> bool {
        self.tracked.as_ref().is_some_and(|t| t.is_cancelled())
    }

    /// The error a job returns to end as killed after [`JobContext::cancelled`] resolved.
    pub fn killed(&self) -> JobError {
        crate::jobs::killed()
    }

    /// Keeps `result` as the tracked job's result (in its record's `result` field). A result
    /// larger than `RESQ_RESULT_MAX` (64 KiB of JSON by default) is an error
    /// (`Resq::ResultTooLarge`), and so is one that cannot be written as JSON
    /// (`Resq::ResultNotJson`: a map whose keys are not strings, a `Serialize` that fails); the
    /// result kept before stays. Does nothing for a job that is not tracked.
    pub fn set_result(&self, result: &impl serde::Serialize) -> Result<(), JobError> {
        let Some(t) = &self.tracked else {
            return Ok(());
        };
        let json =
            crate::wire::encode::try_to_json(result, crate::wire::number::FloatFormat::RubyJsonGem)
                .map_err(|e| {
                    JobError::new(
                        "Resq::ResultNotJson",
                        format!("the result cannot be written as JSON: {e}"),
                    )
                })?;
        t.set_result(json)
    }

    /// Jesque's named arguments (`vars`), when present.
    pub fn vars(&self) -> Option<&Map<String, Value>> {
        self.payload.vars()
    }

    /// The whole payload object, extra fields included.
    pub fn payload(&self) -> &Payload {
        &self.payload
    }

    /// The queue the job came from.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The worker (slot) id running it.
    pub fn worker_id(&self) -> &str {
        &self.worker
    }

    /// Attaches `value` to this job for the layers inside this one and the handler (a
    /// database transaction, a request id, a tenant), replacing an earlier value of the same
    /// type. Every clone of the context shares them; they live as long as the job.
    ///
    /// ```
    /// # use resq::middleware::{from_fn, Next};
    /// # use resq::{JobContext, Registry};
    /// struct Tenant(String);
    ///
    /// let registry = Registry::new()
    ///     .layer(from_fn(|ctx: JobContext, next: Next<'_>| {
    ///         ctx.insert(Tenant(ctx.queue().to_string()));
    ///         next.run(ctx)
    ///     }))
    ///     .handler("Report", |ctx: JobContext| async move {
    ///         let tenant = ctx.get::<Tenant>().map(|t| t.0.clone());
    ///         println!("report for {tenant:?}");
    ///         Ok(())
    ///     });
    /// # let _ = registry;
    /// ```
    pub fn insert<T: Send + Sync + 'static>(&self, value: T) {
        self.extensions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// The value of type `T` a middleware attached with [`JobContext::insert`].
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        let found = self
            .extensions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&TypeId::of::<T>())
            .cloned()?;
        found.downcast::<T>().ok()
    }

    /// Takes the value of type `T` off the job (a middleware taking back what it attached,
    /// e.g. a transaction to commit). `None` when absent or still shared elsewhere.
    pub fn take<T: Send + Sync + 'static>(&self) -> Option<T> {
        let found = self
            .extensions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&TypeId::of::<T>())?;
        Arc::try_unwrap(found.downcast::<T>().ok()?).ok()
    }

    /// Decodes the positional args into `T` (a tuple, a `Vec`, or a struct that reads a
    /// sequence); a mismatch is a `Resq::InvalidArgs` failure.
    pub fn decode_args<T: DeserializeOwned>(&self) -> Result<T, JobError> {
        let args = Value::Array(self.args().to_vec());
        serde_json::from_value(args)
            .map_err(|e| JobError::new("Resq::InvalidArgs", format!("{}: {e}", self.class())))
    }

    /// Decodes the first positional arg into `T`.
    pub fn arg<T: DeserializeOwned>(&self, index: usize) -> Result<T, JobError> {
        let v = self.args().get(index).cloned().unwrap_or(Value::Null);
        serde_json::from_value(v).map_err(|e| {
            JobError::new(
                "Resq::InvalidArgs",
                format!("{} argument {index}: {e}", self.class()),
            )
        })
    }
}
