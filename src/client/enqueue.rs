//! Enqueueing now: Resque's command sequence (`SADD <ns>:queues` + `RPUSH <ns>:queue:<q>`, one
//! MULTI), Jesque's priority form (`LPUSH`, head of the queue) and batches in one round trip.

use super::{encode, validate, Client, FloatFormat};
use crate::error::Result;
use crate::middleware::enqueue::{EnqueueNext, Outgoing};
use crate::registry::Job;
use crate::scripts::Checked;
use futures::future::BoxFuture;

/// Most payloads one `RPUSH` carries on a spread namespace (as `Checked` splits its pushes).
const PUSH_CHUNK: usize = 1000;
use serde_json::{Map, Value};

/// One job to enqueue, in Resque's or Jesque's form.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    /// Class name.
    pub class: String,
    /// Positional args (`None` writes Jesque's `"args":null`; Resque form writes `[]`).
    pub args: Option<Vec<Value>>,
    /// Jesque's named args.
    pub vars: Option<Map<String, Value>>,
    /// Whether to write Jesque's `{"class","args","vars"}` instead of Ruby's form.
    pub jesque: bool,
    /// For a split queue, the key that picks its shard (`crc32(key) % N`; round robin when
    /// `None`); see [`NewJob::shard_key`].
    pub shard_key: Option<String>,
}

impl NewJob {
    /// A Resque-form job: `{"class":…,"args":[…]}`.
    pub fn new(class: impl Into<String>, args: Vec<Value>) -> Self {
        NewJob {
            class: class.into(),
            args: Some(args),
            vars: None,
            jesque: false,
            shard_key: None,
        }
    }

    /// A Jesque-form job: `{"class":…,"args":…,"vars":…}`.
    pub fn jesque(
        class: impl Into<String>,
        args: Option<Vec<Value>>,
        vars: Option<Map<String, Value>>,
    ) -> Self {
        NewJob {
            class: class.into(),
            args,
            vars,
            jesque: true,
            shard_key: None,
        }
    }

    /// Sets the shard key: on a split queue (docs/cluster.md, "Split queues") the job goes to
    /// shard `crc32(key) % N`, so jobs of one key always share a shard while N is unchanged;
    /// without one, to the shards in turn. On a queue that is not split it changes nothing.
    pub fn shard_key(mut self, key: impl Into<String>) -> Self {
        self.shard_key = Some(key.into());
        self
    }

    /// The payload bytes; `format` applies to the Resque form (Jesque's is Java's).
    pub fn encode(&self, format: FloatFormat) -> String {
        if self.jesque {
            encode::jesque_payload(&self.class, self.args.as_deref(), self.vars.as_ref())
        } else {
            encode::resque_payload(&self.class, self.args.as_deref().unwrap_or(&[]), format)
        }
    }

    fn check(&self, queue: &str) -> Result<()> {
        validate(queue, &self.class)?;
        if self.jesque && self.args.is_none() && self.vars.is_none() {
            return Err(crate::Error::Rejected(
                "a Jesque job needs args or vars (Job.isValid)".into(),
            ));
        }
        Ok(())
    }
}

impl Client {
    /// Enqueues a typed job onto its queue ([`Job::QUEUE`], else the client's default queue):
    /// `client.enqueue::<Archive>((42, "main".into()))`. Its args must serialize to a JSON
    /// array (a tuple, a `Vec`). Returns whether it was written (a middleware may drop it).
    pub async fn enqueue<J: Job>(&self, args: J::Args) -> Result<bool>
    where
        J::Args: serde::Serialize,
    {
        let args = match serde_json::to_value(&args)? {
            Value::Array(a) => a,
            other => {
                return Err(crate::Error::Rejected(format!(
                    "{}: args must serialize to a JSON array (a tuple or a Vec), not {other}",
                    J::CLASS
                )))
            }
        };
        let queue = J::QUEUE.unwrap_or(&self.default_queue).to_string();
        self.dispatch(Outgoing {
            queue,
            class: J::CLASS.to_string(),
            args,
            extra: Map::new(),
            at: None,
            track: None,
            shard_key: None,
        })
        .await
    }

    /// Enqueues `class` with `args` onto the default queue (see
    /// [`Client::with_default_queue`]), as `Resque.enqueue` does with the class's queue.
    pub async fn enqueue_class(&self, class: &str, args: &[Value]) -> Result<bool> {
        let q = self.default_queue.clone();
        self.enqueue_to(&q, class, args).await
    }

    /// Enqueues `class` with positional `args` onto `queue`, as `Resque.enqueue_to` does:
    /// `{"class":…,"args":[…]}` byte-identical to Ruby's, so `Resque::Job.destroy(queue,
    /// class, *args)` and `Resque.dequeue` remove it. Returns whether it was written (a
    /// middleware may drop it).
    pub async fn enqueue_to(&self, queue: &str, class: &str, args: &[Value]) -> Result<bool> {
        self.dispatch(Outgoing {
            queue: queue.to_string(),
            class: class.to_string(),
            args: args.to_vec(),
            extra: Map::new(),
            at: None,
            track: None,
            shard_key: None,
        })
        .await
    }

    /// Runs the enqueue middleware around the write of `job` (now, or in the delayed set when
    /// it is due later).
    pub(crate) async fn dispatch(&self, job: Outgoing) -> Result<bool> {
        self.dispatch_seen(job, |_| {}).await
    }

    /// [`Client::dispatch`], showing `seen` the job as it is written (after every layer).
    pub(crate) async fn dispatch_seen(
        &self,
        job: Outgoing,
        seen: impl Fn(&Outgoing) + Send + Sync,
    ) -> Result<bool> {
        self.dispatch_tracked(job, seen, &std::sync::Mutex::new(None))
            .await
    }

    /// [`Client::dispatch_seen`]; a tracked job's id (or, with a job key, the live job's id)
    /// goes to `tracked`.
    pub(crate) async fn dispatch_tracked(
        &self,
        job: Outgoing,
        seen: impl Fn(&Outgoing) + Send + Sync,
        tracked: &std::sync::Mutex<Option<crate::jobs::JobId>>,
    ) -> Result<bool> {
        let seen = &seen;
        let terminal = |mut job: Outgoing| -> BoxFuture<'_, Result<bool>> {
            Box::pin(async move {
                validate(&job.queue, &job.class)?;
                // A split queue's job goes to one of its shards now; a delayed one keeps the
                // queue's own name (served by its workers too) and lands there when due.
                let due_later = job
                    .at
                    .map(super::delayed::epoch_secs)
                    .is_some_and(|ts| ts > super::delayed::epoch_secs(chrono::Utc::now()));
                if !due_later {
                    job.queue = self.route(&job.queue, job.shard_key.as_deref()).await?;
                }
                // (Spread: a tracked job's id names its queue's slot.)
                self.tag_for_slot(&mut job);
                // The producer span (`<queue> send`) and its context in the payload, when
                // tracing is on (crate::otel).
                #[cfg(feature = "otel")]
                let span = crate::otel::get().map(|o| {
                    let facts = crate::otel::JobFacts {
                        queue: &job.queue,
                        class: &job.class,
                        id: None,
                        attempt: None,
                    };
                    o.start_send(&facts, &mut job.extra)
                });
                seen(&job);
                let written = self.write_dispatched(job, tracked).await;
                #[cfg(feature = "otel")]
                crate::otel::end_send(span, &written);
                written
            })
        };
        EnqueueNext::new(&self.layers, &terminal).run(job).await
    }

    /// The write at the end of [`Client::dispatch_tracked`]'s chain.
    async fn write_dispatched(
        &self,
        job: Outgoing,
        tracked: &std::sync::Mutex<Option<crate::jobs::JobId>>,
    ) -> Result<bool> {
        if job.track.is_some() {
            let id = self.write_tracked(job).await?;
            *tracked.lock().unwrap_or_else(|p| p.into_inner()) = Some(id);
            return Ok(true);
        }
        match job.at.map(super::delayed::epoch_secs) {
            Some(ts) if ts > super::delayed::epoch_secs(chrono::Utc::now()) => {
                let item = encode::scheduler_item(
                    &job.queue,
                    &job.class,
                    &job.args,
                    &job.extra,
                    self.float_format,
                );
                self.delayed_push_raw(ts, &item).await?;
            }
            _ => {
                let json = encode::resque_payload_with(
                    &job.class,
                    &job.args,
                    &job.extra,
                    self.float_format,
                );
                self.push_raw(&job.queue, &json).await?;
            }
        }
        Ok(true)
    }

    /// Enqueues at the head of `queue` (Jesque's `priorityEnqueue`: `LPUSH`), so it runs next.
    pub async fn enqueue_front(&self, queue: &str, class: &str, args: &[Value]) -> Result<()> {
        validate(queue, class)?;
        let json = encode::resque_payload(class, args, self.float_format);
        self.push_raw_front(queue, &json).await
    }

    /// Enqueues a Jesque-form job (`vars` = named args); at least one of `args`/`vars` must be
    /// given, as Jesque's `Job.isValid` requires.
    pub async fn enqueue_jesque(
        &self,
        queue: &str,
        class: &str,
        args: Option<&[Value]>,
        vars: Option<&Map<String, Value>>,
    ) -> Result<()> {
        let job = NewJob::jesque(class, args.map(<[Value]>::to_vec), vars.cloned());
        job.check(queue)?;
        self.push_raw(queue, &job.encode(FloatFormat::Java)).await
    }

    /// Jesque's `priorityEnqueue`: a Jesque-form job at the head of `queue`.
    pub async fn priority_enqueue_jesque(
        &self,
        queue: &str,
        class: &str,
        args: Option<&[Value]>,
        vars: Option<&Map<String, Value>>,
    ) -> Result<()> {
        let job = NewJob::jesque(class, args.map(<[Value]>::to_vec), vars.cloned());
        job.check(queue)?;
        self.push_raw_front(queue, &job.encode(FloatFormat::Java))
            .await
    }

    /// Enqueues one job onto `queue` (its shard, for a split queue: [`NewJob::shard_key`]).
    pub async fn enqueue_job(&self, queue: &str, job: &NewJob) -> Result<()> {
        self.enqueue_batch(&[(queue, job.clone())]).await
    }

    /// Enqueues many jobs in one round trip (one checked step: `SADD` per queue, one `RPUSH`
    /// per queue with its jobs in order). On a spread namespace each queue's jobs are one
    /// enqueue of their own ([`Client::push_raw`]'s two commands), queue after queue.
    pub async fn enqueue_batch(&self, jobs: &[(&str, NewJob)]) -> Result<()> {
        for (q, j) in jobs {
            j.check(q)?;
        }
        let mut by_queue: Vec<(String, Vec<String>)> = Vec::new();
        for (q, j) in jobs {
            let json = j.encode(self.float_format);
            let q = self.route(q, j.shard_key.as_deref()).await?;
            match by_queue.iter_mut().find(|(name, _)| *name == q) {
                Some((_, list)) => list.push(json),
                None => by_queue.push((q, vec![json])),
            }
        }
        if by_queue.is_empty() {
            return Ok(());
        }
        if self.keys.is_spread() {
            // One enqueue per queue, each in Ruby's order: not one step for the whole batch.
            for (q, list) in &by_queue {
                let list: Vec<&str> = list.iter().map(String::as_str).collect();
                self.push_spread(q, &list, false).await?;
            }
            return Ok(());
        }
        let mut w = Checked::new();
        for (q, list) in &by_queue {
            w.sadd(&self.keys.queues(), q);
            w.rpush(&self.keys.queue(q), list);
        }
        w.run(&mut self.con()).await?;
        Ok(())
    }

    /// Pushes an already-encoded payload at the tail, as `Resque.push` does.
    pub async fn push_raw(&self, queue: &str, json: &str) -> Result<()> {
        self.push(queue, json, false).await
    }

    /// Pushes an already-encoded payload at the head (`LPUSH`).
    pub async fn push_raw_front(&self, queue: &str, json: &str) -> Result<()> {
        self.push(queue, json, true).await
    }

    /// `SADD <ns>:queues` + `RPUSH` (or `LPUSH` when `front`) as one checked step; on a
    /// spread namespace, where the two keys are in different slots, the two commands one after
    /// the other, in Ruby's order ([`Client::push_spread`]). A split queue's job goes to its
    /// shards in turn.
    async fn push(&self, queue: &str, json: &str, front: bool) -> Result<()> {
        let queue = self.route(queue, None).await?;
        if self.keys.is_spread() {
            return self.push_spread(&queue, &[json], front).await;
        }
        self.push_step(&queue, json, front)
            .run(&mut self.con())
            .await?;
        Ok(())
    }

    /// Resque's enqueue on a spread namespace: `SADD <ns>:queues <queue>`, then `RPUSH` (or
    /// `LPUSH` when `front`) of `jobs` onto `<ns>:queue:<queue>`, each a single-slot command,
    /// in the order Ruby sends them; a crash between leaves a listed queue without the jobs,
    /// never a job in an unlisted queue. A queue key of another type refuses the push
    /// (`WRONGTYPE`), nothing pushed.
    pub(crate) async fn push_spread(&self, queue: &str, jobs: &[&str], front: bool) -> Result<()> {
        let mut con = self.con();
        let _: i64 = redis::cmd("SADD")
            .arg(self.keys.queues())
            .arg(queue)
            .query_async(&mut con)
            .await?;
        for chunk in jobs.chunks(PUSH_CHUNK) {
            let _: i64 = redis::cmd(if front { "LPUSH" } else { "RPUSH" })
                .arg(self.keys.queue(queue))
                .arg(chunk)
                .query_async(&mut con)
                .await?;
        }
        Ok(())
    }

    /// The checked step [`Client::push_raw`] (or, when `front`, [`Client::push_raw_front`])
    /// sends.
    pub(crate) fn push_step(&self, queue: &str, json: &str, front: bool) -> Checked {
        let mut w = Checked::new();
        w.sadd(&self.keys.queues(), queue);
        if front {
            w.lpush(&self.keys.queue(queue), json);
        } else {
            w.rpush(&self.keys.queue(queue), json);
        }
        w
    }
}
