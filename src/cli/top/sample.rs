//! What `resq top` shows: one reading of the namespace, and rates from consecutive readings.

use crate::admin::{Admin, Info, QueueInfo, WorkerInfo};
use crate::error::Result;
use crate::jobs::State;
use crate::limits::LimitReport;
use chrono::{DateTime, Utc};
use std::collections::VecDeque;
use std::time::Instant;

/// Readings kept for the throughput sparkline.
pub(crate) const HISTORY: usize = 120;

/// One reading.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    /// When it was taken (local monotonic clock, for rates).
    pub taken: Instant,
    /// Redis time.
    pub now: DateTime<Utc>,
    /// Counters.
    pub info: Info,
    /// Queues.
    pub queues: Vec<QueueInfo>,
    /// Workers.
    pub workers: Vec<WorkerInfo>,
    /// Jobs in each state ([`Admin::job_counts`]).
    pub jobs: Vec<(State, u64)>,
    /// Flow-control limits in force, with their use.
    pub limits: Vec<LimitReport>,
}

impl Sample {
    /// Reads the namespace.
    pub(crate) async fn take(admin: &Admin) -> Result<Sample> {
        let taken = Instant::now();
        let (now, info, queues, workers, jobs, limits) = tokio::try_join!(
            admin.now(),
            admin.info(),
            admin.queues(),
            admin.workers(),
            admin.job_counts(),
            admin.limit_reports()
        )?;
        Ok(Sample {
            taken,
            now,
            info,
            queues,
            workers,
            jobs,
            limits,
        })
    }
}

/// What the view draws: the latest reading plus rates.
#[derive(Debug, Clone)]
pub(crate) struct TopState {
    /// Redis URL shown in the title (password removed).
    pub url: String,
    /// The latest reading.
    pub last: Sample,
    /// Jobs processed per second between the last two readings.
    pub processed_rate: Option<f64>,
    /// Jobs failed per second between the last two readings.
    pub failed_rate: Option<f64>,
    /// Recent processed rates, oldest first.
    pub history: VecDeque<u64>,
}

impl TopState {
    /// State from a first reading.
    pub(crate) fn new(url: &str, first: Sample) -> Self {
        TopState {
            url: redact(url),
            last: first,
            processed_rate: None,
            failed_rate: None,
            history: VecDeque::new(),
        }
    }

    /// Folds in a new reading.
    pub(crate) fn update(&mut self, next: Sample) {
        let dt = next.taken.duration_since(self.last.taken).as_secs_f64();
        if dt > 0.0 {
            let rate = |a: u64, b: u64| b.saturating_sub(a) as f64 / dt;
            let p = rate(self.last.info.processed, next.info.processed);
            self.processed_rate = Some(p);
            self.failed_rate = Some(rate(self.last.info.failed, next.info.failed));
            if self.history.len() == HISTORY {
                self.history.pop_front();
            }
            self.history.push_back(p.round() as u64);
        }
        self.last = next;
    }
}

/// The URL without its password.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://…@{}", &url[..s], &url[at + 1..]),
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            super::redact("redis://:secret@host:1/0"),
            "redis://…@host:1/0"
        );
        assert_eq!(super::redact("redis://host:1"), "redis://host:1");
    }
}
