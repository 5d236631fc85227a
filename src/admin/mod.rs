//! The read side and the repairs: what an operator asks of a Resque namespace.
//!
//! Every peer's records are read alike (Ruby, Jesque, node-resque, goworker, resq), every time
//! text through [`crate::wire::time::parse_any`], and one unreadable record never fails a
//! listing: it is shown with what could be read and a note saying what could not.
//!
//! * [`stats`] — `info`: counters and totals.
//! * [`queues`] — queue sizes and the age of the oldest job where it is knowable.
//! * [`workers`] — registered workers, their jobs, start times and heartbeats.
//! * [`failures`] — the failure list: list, show, retry, remove, clear (Ruby's semantics).
//! * [`delayed`] — resque-scheduler's delayed items and Jesque's delayed zset queues.
//! * [`pause`] — `<ns>:pause-all-workers`.
//! * [`prune`] — dead-worker pruning, delegated to the worker's pruning module.
//! * [`scheduler`] — whether a scheduler holds resque-scheduler's master lock.
//! * [`presence`] — whether the namespace holds any Resque data at all.
//!
//! What the dashboard (`resq web`) adds on top, each bounded so a page never reads a whole list:
//! * [`list_ids`] — stable ids of list elements (SHA1 of their bytes) and finding them again;
//! * [`failure_scan`] — failures by id, filtered pages within a scan budget, bulk by filter,
//!   counts by class, exception and queue;
//! * [`queue_jobs`] — a page of one queue, delete one job by its bytes, clear or remove a queue;
//! * [`delayed_ops`] — resque-scheduler's delayed items page by page, run now, delete; enqueue a
//!   stored schedule now;
//! * [`statuses`] — resque-status's statuses and its kill switch;
//! * [`history`] — per-minute and per-hour samples of the stat totals, for graphs;
//! * [`server_info`] — Redis `INFO`.

pub mod delayed;
pub mod delayed_ops;
pub mod failure_scan;
pub mod failures;
pub mod history;
pub mod list_ids;
pub mod pause;
pub mod presence;
pub mod prune;
pub mod queue_jobs;
pub mod queues;
pub mod scheduler;
pub mod server_info;
pub mod stats;
pub mod statuses;
pub mod workers;

use crate::conn::{Conn, Endpoint};
use crate::error::Result;
use crate::keys::Keys;
use chrono::{DateTime, Utc};

pub use delayed::DelayedItem;
pub use failures::{FailureRow, Selector};
pub use queues::{QueueInfo, QueueKind};
pub use scheduler::SchedulerStatus;
pub use stats::Info;
pub use workers::{WorkerInfo, WorkerState};

/// A connection to one namespace, for reading and repairing it.
#[derive(Clone)]
pub struct Admin {
    /// The shared connection.
    con: Conn,
    /// Key names.
    keys: Keys,
}

impl Admin {
    /// Connects to `url` for `namespace`.
    pub async fn connect(url: &str, namespace: &str) -> Result<Self> {
        let endpoint = Endpoint::open(url)?;
        endpoint.check_namespace(namespace)?;
        let con = endpoint.connect().await?;
        Ok(Admin::new(con, Keys::new(namespace)))
    }

    /// Wraps an existing connection.
    pub fn new(con: Conn, keys: Keys) -> Self {
        Admin { con, keys }
    }

    /// The key names in use.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// A clone of the connection.
    pub fn con(&self) -> Conn {
        self.con.clone()
    }

    /// Redis server time: every age is measured against it, as heartbeats are written with it.
    pub async fn now(&self) -> Result<DateTime<Utc>> {
        let mut con = self.con.clone();
        Ok(crate::worker::lifecycle::redis_time(&mut con).await?)
    }
}

/// Seconds from `then` to `now` (negative when `then` is in the future).
pub fn secs_between(then: DateTime<Utc>, now: DateTime<Utc>) -> f64 {
    (now - then).num_milliseconds() as f64 / 1000.0
}

/// Bytes from Redis as text, invalid UTF-8 replaced (display only; never written back).
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
