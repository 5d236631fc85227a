//! The seams where pages backed by other issues plug in: tracked jobs (issue 14), flow-control
//! limits (issue 15) and per-queue pause (issue 15). Each is a small trait the dashboard asks;
//! [`super::WebConfig`] holds the implementations.
//!
//! The Jobs page works today with [`ResqueStatusJobs`], which reads resque-status's own keys
//! (and kills through its `_kill` set). Limits and per-queue pause have no implementation yet:
//! without one, the Limits page says so and the Queues page shows only the global pause switch.

use crate::admin::statuses::StatusRow;
use crate::admin::Admin;
use crate::error::Result;
use futures::future::BoxFuture;
use std::collections::HashSet;

/// One tracked job, as the Jobs page shows it.
#[derive(Debug, Clone)]
pub struct JobRow {
    /// Its id (resque-status: the uuid).
    pub id: String,
    /// What it is (resque-status: `Class({options})`).
    pub name: Option<String>,
    /// Its state (`queued`, `working`, `completed`, `failed`, `killed`, …).
    pub state: Option<String>,
    /// When it was created (epoch s).
    pub time: Option<i64>,
    /// Percent complete.
    pub progress: Option<f64>,
    /// Its last message.
    pub message: Option<String>,
    /// Whether the Kill button applies.
    pub killable: bool,
    /// Whether a kill was already asked for.
    pub kill_requested: bool,
    /// Everything else, as `(field, JSON text)`: result, options, history…
    pub details: Vec<(String, String)>,
}

/// A page of tracked jobs.
#[derive(Debug, Clone, Default)]
pub struct JobsPage {
    /// How many there are in all.
    pub total: usize,
    /// This page's jobs, newest first.
    pub rows: Vec<JobRow>,
}

/// Where the Jobs page reads tracked jobs from.
pub trait JobsSource: Send + Sync {
    /// The source's name, shown on the page.
    fn name(&self) -> &str;
    /// Jobs `offset .. offset + limit`, newest first.
    fn page<'a>(
        &'a self,
        admin: &'a Admin,
        offset: usize,
        limit: usize,
    ) -> BoxFuture<'a, Result<JobsPage>>;
    /// One job.
    fn job<'a>(&'a self, admin: &'a Admin, id: &'a str) -> BoxFuture<'a, Result<Option<JobRow>>>;
    /// Asks job `id` to stop; whether it was newly asked.
    fn kill<'a>(&'a self, admin: &'a Admin, id: &'a str) -> BoxFuture<'a, Result<bool>>;
}

/// resque-status's statuses (`<ns>:_statuses`, `<ns>:status:<uuid>`, `<ns>:_kill`), read and
/// killed as resque-status's own web tab does (see `crate::admin::statuses`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ResqueStatusJobs;

impl JobsSource for ResqueStatusJobs {
    fn name(&self) -> &str {
        "resque-status"
    }

    fn page<'a>(
        &'a self,
        admin: &'a Admin,
        offset: usize,
        limit: usize,
    ) -> BoxFuture<'a, Result<JobsPage>> {
        Box::pin(async move {
            let p = admin.statuses(offset, limit).await?;
            Ok(JobsPage {
                total: p.total,
                rows: p.rows.into_iter().map(status_row).collect(),
            })
        })
    }

    fn job<'a>(&'a self, admin: &'a Admin, id: &'a str) -> BoxFuture<'a, Result<Option<JobRow>>> {
        Box::pin(async move { Ok(admin.status(id).await?.map(status_row)) })
    }

    fn kill<'a>(&'a self, admin: &'a Admin, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move { admin.kill_status(id).await })
    }
}

fn status_row(r: StatusRow) -> JobRow {
    JobRow {
        id: r.uuid,
        name: r.name,
        state: r.status,
        time: r.time,
        progress: r.pct_complete,
        message: r.message,
        killable: r.killable,
        kill_requested: r.kill_requested,
        details: r
            .extra
            .into_iter()
            .map(|(k, v)| (k, v.to_string()))
            .collect(),
    }
}

/// One flow-control limit, as the Limits page shows it.
#[derive(Debug, Clone)]
pub struct LimitRow {
    /// What it limits (a class, a queue, a key).
    pub name: String,
    /// The kind of limit (concurrency, rate, …).
    pub kind: String,
    /// Its setting, as text.
    pub limit: String,
    /// Current use, as text.
    pub in_use: String,
    /// Jobs waiting on it, when known.
    pub waiting: Option<u64>,
}

/// Where the Limits page reads limits from (issue 15).
pub trait LimitsSource: Send + Sync {
    /// Every limit.
    fn limits<'a>(&'a self, admin: &'a Admin) -> BoxFuture<'a, Result<Vec<LimitRow>>>;
}

/// Per-queue pause (issue 15): which queues are paused, and the switch.
pub trait QueuePauses: Send + Sync {
    /// Which of `queues` are paused.
    fn paused<'a>(
        &'a self,
        admin: &'a Admin,
        queues: &'a [String],
    ) -> BoxFuture<'a, Result<HashSet<String>>>;
    /// Pauses (`true`) or resumes queue `queue`.
    fn set<'a>(
        &'a self,
        admin: &'a Admin,
        queue: &'a str,
        paused: bool,
    ) -> BoxFuture<'a, Result<()>>;
}
