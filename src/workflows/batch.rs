//! Creating a batch: its members' records and payloads staged a chunk at a time (the library's
//! `batch_stage`, each chunk one short call), then made visible all at once (`batch_commit`).

use super::BatchId;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::jobs::JobId;
use crate::wire::encode;
use serde_json::{Map, Value};

/// Members staged per call (each call holds Redis for a few milliseconds at most).
const CHUNK: usize = 1000;

/// A callback: a job enqueued when the batch reaches a point (its payload carries the batch's
/// id as `resq_batch`, which [`crate::JobContext::batch`] reads).
#[derive(Debug, Clone, PartialEq)]
pub struct Callback {
    /// Its class.
    pub class: String,
    /// Its args.
    pub args: Vec<Value>,
}

/// A batch to create: its members and its callbacks.
///
/// * `on_complete` fires once every member has been **attempted**: a run of it ended, with any
///   outcome (a member that will be retried counts; a run interrupted and put back under
///   at-least-once does not, the run after it does), or it ended without running;
/// * `on_success` fires once every member has **completed** (retries included) — it may never
///   fire;
/// * `on_death` fires once, at the first member that **failed for good** (retries exhausted,
///   killed or cancelled).
///
/// ```no_run
/// # async fn demo(client: resq::Client) -> resq::Result<()> {
/// use resq::workflows::Batch;
/// use serde_json::json;
///
/// let batch = Batch::new()
///     .description("thumbnails of album 7")
///     .on_success("ContactSheet", vec![json!(7)])
///     .job("images", "Resize", vec![json!("a.png")])
///     .job("images", "Resize", vec![json!("b.png")]);
/// let (bid, members) = client.create_batch(batch).await?;
/// # let _ = (bid, members);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    /// What it is for (shown by `resq batch show`).
    pub(crate) description: String,
    /// The callbacks' queue (`None`: the first member's queue, or `default`).
    pub(crate) queue: Option<String>,
    /// The batch it is a member of.
    pub(crate) parent: Option<BatchId>,
    /// `on_complete`, `on_success`, `on_death`.
    pub(crate) callbacks: [Option<Callback>; 3],
    /// Its members: queue, class, args.
    pub(crate) jobs: Vec<(String, String, Vec<Value>)>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Describes it.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = text.into();
        self
    }

    /// The queue its callbacks are enqueued on.
    pub fn callback_queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Makes it a member of batch `parent` (which must not have ended): the parent counts it as
    /// one member, attempted when it completes its own `on_complete`, succeeded with its
    /// `on_success`, dead with its `on_death`.
    pub fn parent(mut self, parent: BatchId) -> Self {
        self.parent = Some(parent);
        self
    }

    /// Enqueues `class` with `args` once every member has been attempted.
    pub fn on_complete(mut self, class: impl Into<String>, args: Vec<Value>) -> Self {
        self.callbacks[0] = Some(callback(class, args));
        self
    }

    /// Enqueues `class` with `args` once every member has completed.
    pub fn on_success(mut self, class: impl Into<String>, args: Vec<Value>) -> Self {
        self.callbacks[1] = Some(callback(class, args));
        self
    }

    /// Enqueues `class` with `args` at the first member that failed for good.
    pub fn on_death(mut self, class: impl Into<String>, args: Vec<Value>) -> Self {
        self.callbacks[2] = Some(callback(class, args));
        self
    }

    /// Adds a member: `class` with `args` on `queue`.
    pub fn job(
        mut self,
        queue: impl Into<String>,
        class: impl Into<String>,
        args: Vec<Value>,
    ) -> Self {
        self.jobs.push((queue.into(), class.into(), args));
        self
    }
}

fn callback(class: impl Into<String>, args: Vec<Value>) -> Callback {
    Callback {
        class: class.into(),
        args,
    }
}

/// A header field: no tab or newline (the library splits on tabs).
fn field(what: &str, s: &str) -> Result<()> {
    if s.contains(['\t', '\n']) {
        return Err(Error::Rejected(format!("{what} {s:?}: no tab or newline")));
    }
    Ok(())
}

impl Client {
    /// Creates `batch`: its members are enqueued all at once (none is visible before the last
    /// is written, and all are after one call), each a tracked job. Returns the batch's id and
    /// its members' ids, in order.
    pub async fn create_batch(&self, batch: Batch) -> Result<(BatchId, Vec<JobId>)> {
        crate::error::not_spread(self.keys(), "batches")?;
        let bid = BatchId::new();
        let keys = self.keys().clone();
        let format = self.float_format();
        let queue = batch
            .queue
            .clone()
            .or_else(|| batch.jobs.first().map(|j| j.0.clone()))
            .unwrap_or_else(|| self.default_queue().to_string());
        field("the callbacks' queue", &queue)?;
        field("the description", &batch.description.replace('\n', " "))?;
        for (q, class, _) in &batch.jobs {
            crate::client::validate(q, class)?;
        }
        for c in batch.callbacks.iter().flatten() {
            crate::client::validate(&queue, &c.class)?;
        }
        let callbacks: [String; 3] = batch.callbacks.each_ref().map(|c| match c {
            None => String::new(),
            Some(c) => {
                let mut extra = Map::new();
                extra.insert("resq_batch".into(), Value::String(bid.to_string()));
                encode::resque_payload_with(&c.class, &c.args, &extra, format)
            }
        });
        let ids: Vec<JobId> = batch.jobs.iter().map(|_| JobId::new()).collect();
        let mut con = self.connection();
        let now = chrono::Utc::now().timestamp_millis();
        // (The batch is kept, once complete, as long as its members' records.)
        let header = crate::scripts::texts::batch_header(
            &queue,
            batch.parent.as_ref().map_or("", BatchId::as_str),
            crate::jobs::DEFAULT_TTL.as_secs(),
            &batch.description.replace('\n', " "),
        );
        let batch_queues: std::collections::BTreeSet<&str> =
            batch.jobs.iter().map(|(q, _, _)| q.as_str()).collect();
        let mut first = true;
        let mut chunks: Vec<&[(String, String, Vec<Value>)]> = batch.jobs.chunks(CHUNK).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        let mut at = 0;
        for chunk in chunks {
            let mut members = Vec::with_capacity(chunk.len());
            let mut members_keys = Vec::with_capacity(3 * chunk.len() + batch_queues.len());
            for ((q, class, args), id) in chunk.iter().zip(&ids[at..]) {
                let mut extra = Map::new();
                extra.insert("resq_id".into(), Value::String(id.to_string()));
                let payload = encode::resque_payload_with(class, args, &extra, format);
                members.push((id.as_str(), q.as_str(), class.as_str(), payload));
                members_keys.push(keys.job_record(id.as_str()));
                members_keys.push(keys.batch_staged(bid.as_str(), q));
                members_keys.push(keys.queue(q));
            }
            members_keys.extend(
                batch_queues
                    .iter()
                    .map(|q| keys.batch_staged(bid.as_str(), q)),
            );
            at += chunk.len();
            // (The parent's keys only with the first chunk, which counts the batch in it: else
            // the batch's own key, left alone.)
            let parent = batch.parent.as_ref().filter(|_| first);
            let _: u64 = crate::scripts::BatchStage {
                batch: keys.batch(bid.as_str()),
                jobs: keys.batch_jobs(bid.as_str()),
                queues_staged: keys.batch_queues(bid.as_str()),
                batches: keys.batches(),
                queues: keys.queues(),
                parent: keys.batch(parent.map_or(bid.as_str(), BatchId::as_str)),
                parent_jobs: keys.batch_jobs(parent.map_or(bid.as_str(), BatchId::as_str)),
                unended: keys.unended(),
                members_keys,
                prefix: keys.prefix(),
                bid: bid.as_str(),
                now_ms: now,
                header: if first { header.as_str() } else { "" },
                on_complete: &callbacks[0],
                on_success: &callbacks[1],
                on_death: &callbacks[2],
                n: chunk.len(),
                members,
            }
            .call()
            .invoke_async(&mut con)
            .await?;
            first = false;
        }
        let _: String = crate::scripts::BatchCommit {
            batch: keys.batch(bid.as_str()),
            jobs: keys.batch_jobs(bid.as_str()),
            queues_staged: keys.batch_queues(bid.as_str()),
            queues: keys.queues(),
            prefix: keys.prefix(),
            bid: bid.as_str(),
            now_ms: chrono::Utc::now().timestamp_millis(),
        }
        .call()
        .invoke_async(&mut con)
        .await?;
        Ok((bid, ids))
    }
}
