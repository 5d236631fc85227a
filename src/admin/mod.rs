//! The read side and the repairs: what an operator asks of a Resque namespace.
//!
//! Every peer's records are read alike (Ruby, Jesque, node-resque, goworker, resq), every time
//! text through [`crate::wire::time::parse_any`], and one unreadable record never fails a
//! listing: it is shown with what could be read and a note saying what could not.
//!
//! * `stats` — `info`: counters and totals.
//! * `queues` — queue sizes and the age of the oldest job where it is knowable.
//! * `workers` — registered workers, their jobs, start times and heartbeats.
//! * `failures` — the failure list: list, show, retry, remove, clear (Ruby's semantics).
//! * `delayed` — resque-scheduler's delayed items and Jesque's delayed zset queues.
//! * `pause` — `<ns>:pause-all-workers`.
//! * `prune` — what a dead-worker pruning round did; the round ([`Admin::prune`]) is
//!   defined by the worker, with its rules.
//! * `scheduler` — whether a scheduler holds resque-scheduler's master lock.
//! * `presence` — whether the namespace holds any Resque data at all.
//! * `splits` — split queues: declaring, changing or turning off a split, and listing them.
//!
//! What the dashboard (`resq web`) adds on top, each bounded so a page never reads a whole list:
//! * `list_ids` — stable ids of list elements (SHA1 of their bytes) and finding them again;
//! * `failure_scan` — failures by id, filtered pages within a scan budget, bulk by filter,
//!   counts by class, exception and queue;
//! * `queue_jobs` — a page of one queue, delete one job by its bytes, clear or remove a queue;
//! * `delayed_ops` — resque-scheduler's delayed items page by page (running one now, deleting
//!   it and the stored schedules are the scheduler's: `crate::scheduler::admin`);
//! * `statuses` — resque-status's statuses and its kill switch;
//! * [`history`] — per-minute and per-hour samples of the stat totals, for graphs;
//! * `server_info` — Redis `INFO`.

pub(crate) mod delayed;
pub(crate) mod delayed_ops;
pub(crate) mod failure_scan;
pub(crate) mod failures;
pub mod history;
pub(crate) mod list_ids;
pub(crate) mod names;
pub(crate) mod pause;
pub(crate) mod presence;
pub(crate) mod prune;
pub(crate) mod queue_jobs;
pub(crate) mod queues;
pub(crate) mod scheduler;
pub(crate) mod server_info;
pub(crate) mod splits;
pub(crate) mod stats;
pub(crate) mod workers;

use crate::conn::{Conn, Endpoint, RedisOptions};
use crate::error::Result;
use crate::keys::Keys;
use chrono::{DateTime, Utc};

pub use crate::wire::failure::FailureEntry;
pub use delayed::{DelayedItem, DelayedSource};
pub use delayed_ops::{DelayedAction, DelayedBucket, DelayedEntry, DelayedPage, Taken};
pub use failure_scan::{ById, FailureCounts, FailureFilter, ScanPage};
pub use failures::{FailureRow, Outcome, Selector};
pub use list_ids::element_id;
pub use prune::{PruneOutcome, PrunedWorker};
pub use queue_jobs::{Deleted, QueuePage, QueuedJob};
pub use queues::{QueueInfo, QueueKind};
pub use scheduler::SchedulerStatus;
pub use splits::{ShardSize, SplitInfo};
pub use stats::Info;
pub use workers::{CurrentJob, WorkerInfo, WorkerState};

/// A connection to one namespace, for reading and repairing it: what resque-web and the `resq`
/// CLI show and do, as a library.
///
/// ```no_run
/// # async fn demo() -> resq::Result<()> {
/// use resq::admin::{Admin, Selector};
///
/// let admin = Admin::connect("redis://127.0.0.1:6379", "resque").await?;
/// let info = admin.info().await?;
/// println!("{} pending, {} failed", info.pending, info.failed);
/// for q in admin.queues().await? {
///     println!("{}: {}", q.name, q.size);
/// }
/// // Requeue every failure, as resque-web's "Retry all" does.
/// admin.retry_failures(&Selector::All).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Admin {
    /// The shared connection.
    con: Conn,
    /// Key names.
    keys: Keys,
}

impl Admin {
    /// Connects to `url` for `namespace` (connection settings only from the URL).
    pub async fn connect(url: &str, namespace: &str) -> Result<Self> {
        Self::connect_with(url, namespace, &RedisOptions::default()).await
    }

    /// [`Admin::connect`] with connection settings beyond the URL (TLS files, Cluster, `WAIT`).
    pub async fn connect_with(url: &str, namespace: &str, options: &RedisOptions) -> Result<Self> {
        let (con, keys) = Endpoint::connect_namespace(url, namespace, options).await?;
        Ok(Admin::new(con, keys))
    }

    /// Wraps an existing connection.
    pub(crate) fn new(con: Conn, keys: Keys) -> Self {
        Admin { con, keys }
    }

    /// The namespace it reads (Resque's `Resque.redis.namespace`).
    pub fn namespace(&self) -> &str {
        self.keys.namespace()
    }

    /// The key names in use.
    pub(crate) fn keys(&self) -> &Keys {
        &self.keys
    }

    /// A clone of the connection.
    pub fn con(&self) -> Conn {
        self.con.clone()
    }

    /// Redis server time: every age is measured against it, as heartbeats are written with it.
    pub async fn now(&self) -> Result<DateTime<Utc>> {
        let mut con = self.con.clone();
        Ok(crate::conn::redis_time(&mut con).await?)
    }
}

/// Seconds from `then` to `now` (negative when `then` is in the future).
pub(crate) fn secs_between(then: DateTime<Utc>, now: DateTime<Utc>) -> f64 {
    (now - then).num_milliseconds() as f64 / 1000.0
}

/// Bytes from Redis as text, invalid UTF-8 replaced (display only; never written back).
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
