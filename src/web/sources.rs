//! The seams where pages backed by other issues plug in: tracked jobs (issue 14), flow-control
//! limits (issue 15) and per-queue pause (issue 15). Each is a small trait the dashboard asks;
//! [`super::WebConfig`] holds the implementations.
//!
//! The Jobs page reads [`TrackedJobs`] by default: resq's tracked jobs and resque-status's
//! statuses through [`Admin::jobs`] / [`Admin::jobs_from`], [`Admin::job`],
//! [`Admin::job_counts`] and [`Admin::cancel_job_settling`] (docs/jobs.md). The Limits page reads [`FleetLimits`]
//! ([`Admin::limit_reports`]) and the queue pages pause and resume through [`PausedQueues`]
//! (`<ns>:resq:paused_queues`) by default; without a source, the Limits page says there is
//! none and the Queues page shows only the global pause switch.

use crate::admin::Admin;
use crate::error::Result;
use crate::jobs::{Cancelled, JobFilter, JobId, JobPosition, JobStatus, Settling, State};
use futures::future::BoxFuture;
use std::collections::HashSet;

/// One tracked job, as the Jobs page shows it.
#[derive(Debug, Clone)]
pub struct JobRow {
    /// Its record.
    pub job: JobStatus,
    /// Whether it was asked to stop and has not ended yet (resq's own: its record's `kill`;
    /// a resque-status job: its id in `<ns>:_kill`, where a cancel — from here, `resq job
    /// cancel`, [`crate::Client::cancel`] or resque-status's own tab — puts it).
    pub stop_requested: bool,
}

impl JobRow {
    /// Whether a Cancel applies: it has not finished and was not already asked to stop.
    pub fn cancellable(&self) -> bool {
        !self.job.state.is_final() && !self.stop_requested
    }
}

/// A page of tracked jobs.
#[derive(Debug, Clone, Default)]
pub struct JobsPage {
    /// How many jobs the listing holds, when the source knows it without reading them (see
    /// [`crate::jobs::JobPage::total`]).
    pub total: Option<u64>,
    /// Whether the page stopped at the source's budget of entries before it was full.
    pub truncated: bool,
    /// Where the listing goes on (the source's position, handed back to
    /// [`JobsSource::page`]); `None` at its end.
    pub next: Option<String>,
    /// This page's jobs, in the listing's order.
    pub rows: Vec<JobRow>,
    /// Records that could not be read on the way (key and what is wrong), left out.
    pub unreadable: Vec<String>,
}

/// How many jobs each state holds (the Jobs page's tabs): the states counted, in lifecycle
/// order; a state not in the list shows no count.
#[derive(Debug, Clone, Default)]
pub struct JobCounts {
    /// Each counted state's count.
    pub states: Vec<(State, u64)>,
    /// Whether a count stopped at the source's budget of keys read (`queued`: of the queue
    /// names and held sets read; `scheduled`: of the delayed timestamps read).
    pub partial: bool,
}

/// Where the Jobs page reads tracked jobs from.
pub trait JobsSource: Send + Sync {
    /// The source's name, shown on the page.
    fn name(&self) -> &str;
    /// The counts for the state tabs.
    fn counts<'a>(&'a self, admin: &'a Admin) -> BoxFuture<'a, Result<JobCounts>>;
    /// Jobs matching `filter`: from position `from` (a page's [`JobsPage::next`]; `None`: the
    /// start, skipping `offset` matches), at most `limit`. A position that is not one of this
    /// listing's is [`crate::Error::Rejected`].
    fn page<'a>(
        &'a self,
        admin: &'a Admin,
        filter: &'a JobFilter,
        from: Option<&'a str>,
        offset: usize,
        limit: usize,
    ) -> BoxFuture<'a, Result<JobsPage>>;
    /// One job (`None`: no such job).
    fn job<'a>(&'a self, admin: &'a Admin, id: &'a JobId) -> BoxFuture<'a, Result<Option<JobRow>>>;
    /// Cancels job `id` (one not started never runs; a running one is asked to stop); `None`
    /// when there is no such job.
    fn cancel<'a>(
        &'a self,
        admin: &'a Admin,
        id: &'a JobId,
    ) -> BoxFuture<'a, Result<Option<Cancelled>>>;
    /// [`JobsSource::cancel`], with what the cancel left to the prune rounds (a tree larger
    /// than one call settles); by default nothing is said to be left.
    fn cancel_settling<'a>(
        &'a self,
        admin: &'a Admin,
        id: &'a JobId,
    ) -> BoxFuture<'a, Result<Option<(Cancelled, Settling)>>> {
        Box::pin(async move {
            Ok(self
                .cancel(admin, id)
                .await?
                .map(|c| (c, Settling::default())))
        })
    }
}

/// resq's tracked jobs and resque-status's statuses: listed with [`Admin::jobs`] /
/// [`Admin::jobs_from`], read with [`Admin::job`], counted with [`Admin::job_counts`],
/// cancelled with [`Admin::cancel_job`].
#[derive(Debug, Clone, Copy, Default)]
pub struct TrackedJobs;

/// A row of `job`.
fn row(job: JobStatus) -> JobRow {
    JobRow {
        stop_requested: job.stop_requested && !job.state.is_final(),
        job,
    }
}

impl JobsSource for TrackedJobs {
    fn name(&self) -> &str {
        "resq tracked jobs and resque-status statuses"
    }

    fn counts<'a>(&'a self, admin: &'a Admin) -> BoxFuture<'a, Result<JobCounts>> {
        Box::pin(async move {
            let (states, complete) = admin
                .job_counts_within(Some(super::JOBS_BUDGET / 4))
                .await?;
            Ok(JobCounts {
                states,
                partial: !complete,
            })
        })
    }

    fn page<'a>(
        &'a self,
        admin: &'a Admin,
        filter: &'a JobFilter,
        from: Option<&'a str>,
        offset: usize,
        limit: usize,
    ) -> BoxFuture<'a, Result<JobsPage>> {
        Box::pin(async move {
            let from: Option<JobPosition> = from.map(str::parse).transpose()?;
            let offset = if from.is_some() { 0 } else { offset };
            let p = admin
                .jobs_within(filter, from.as_ref(), offset, limit, super::JOBS_BUDGET)
                .await?;
            Ok(JobsPage {
                total: p.total,
                truncated: p.truncated,
                next: p.next.map(|n| n.to_string()),
                rows: p.jobs.into_iter().map(row).collect(),
                unreadable: p.unreadable,
            })
        })
    }

    fn job<'a>(&'a self, admin: &'a Admin, id: &'a JobId) -> BoxFuture<'a, Result<Option<JobRow>>> {
        Box::pin(async move { Ok(admin.job(id).await?.map(row)) })
    }

    fn cancel<'a>(
        &'a self,
        admin: &'a Admin,
        id: &'a JobId,
    ) -> BoxFuture<'a, Result<Option<Cancelled>>> {
        Box::pin(async move { Ok(self.cancel_settling(admin, id).await?.map(|(c, _)| c)) })
    }

    fn cancel_settling<'a>(
        &'a self,
        admin: &'a Admin,
        id: &'a JobId,
    ) -> BoxFuture<'a, Result<Option<(Cancelled, Settling)>>> {
        Box::pin(async move {
            if admin.job(id).await?.is_none() {
                return Ok(None);
            }
            admin.cancel_job_settling(id).await.map(Some)
        })
    }
}

/// One flow-control limit, as the Limits page shows it.
#[derive(Debug, Clone)]
pub struct LimitRow {
    /// Its name.
    pub name: String,
    /// The kind of limit (`concurrency`, `rate`, `window`).
    pub kind: String,
    /// What it applies to (`queue=… class=… key=…`).
    pub scope: String,
    /// Its setting, as text (`5`, `50 per 1s sliding`, `22:00-24:00 Europe/Paris`).
    pub limit: String,
    /// Its capacity (none for a time window).
    pub capacity: Option<u64>,
    /// Units in use (concurrency) or starts in the current window (rate).
    pub in_use: u64,
    /// Jobs it holds out of their queues.
    pub held: u64,
    /// Age of the oldest held job, in seconds.
    pub oldest_held_secs: Option<f64>,
    /// Whether it admits a job now (a window: whether it is open; a limit: whether it has
    /// room).
    pub open: bool,
    /// Whether an operator's override (`resq limits set`) is in force.
    pub overridden: bool,
    /// Partitions (values of its key) with something running or held.
    pub partitions: usize,
    /// Whether the source stopped reading partitions at its budget (`in_use`, `held` and
    /// `partitions` are then of those read).
    pub partial: bool,
    /// Workers of other runtimes polling a queue it covers: they do not honour it.
    pub foreign_workers: Vec<String>,
}

impl From<&crate::limits::LimitReport> for LimitRow {
    fn from(r: &crate::limits::LimitReport) -> Self {
        LimitRow {
            name: r.limit.name.clone(),
            kind: r.kind_name().to_string(),
            scope: r.scope(),
            limit: r.setting(),
            capacity: r.limit.capacity().map(u64::from),
            in_use: r.in_use(),
            held: r.held(),
            oldest_held_secs: r.oldest_held_secs(),
            open: r.is_open(),
            overridden: r.overridden,
            partitions: if r.limit.key.is_some() {
                r.partitions.len()
            } else {
                0
            },
            foreign_workers: r.foreign_workers.clone(),
            partial: !r.partitions_complete,
        }
    }
}

/// Where the Limits page reads limits from (issue 15).
pub trait LimitsSource: Send + Sync {
    /// Every limit.
    fn limits<'a>(&'a self, admin: &'a Admin) -> BoxFuture<'a, Result<Vec<LimitRow>>>;
}

/// The limits in force in the namespace (declared by workers, overridden with `resq limits
/// set`), with their use ([`Admin::limit_reports`], reading 1,000 partitions at most).
#[derive(Debug, Clone, Copy, Default)]
pub struct FleetLimits;

impl LimitsSource for FleetLimits {
    fn limits<'a>(&'a self, admin: &'a Admin) -> BoxFuture<'a, Result<Vec<LimitRow>>> {
        Box::pin(async move {
            Ok(admin
                .limit_reports_within(super::LIMIT_PARTS)
                .await?
                .iter()
                .map(LimitRow::from)
                .collect())
        })
    }
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

/// resq's per-queue pause, `<ns>:resq:paused_queues`: [`Admin::paused_queues`] and
/// [`Admin::pause_queue`]. resq processes stop taking a paused queue's jobs at their next
/// reserve; Ruby, Jesque and node-resque workers do not look.
#[derive(Debug, Clone, Copy, Default)]
pub struct PausedQueues;

impl QueuePauses for PausedQueues {
    fn paused<'a>(
        &'a self,
        admin: &'a Admin,
        queues: &'a [String],
    ) -> BoxFuture<'a, Result<HashSet<String>>> {
        Box::pin(async move {
            let wanted: HashSet<&String> = queues.iter().collect();
            Ok(admin
                .paused_queues()
                .await?
                .into_iter()
                .filter(|q| wanted.contains(q))
                .collect())
        })
    }

    fn set<'a>(
        &'a self,
        admin: &'a Admin,
        queue: &'a str,
        paused: bool,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(admin.pause_queue(queue, paused))
    }
}
