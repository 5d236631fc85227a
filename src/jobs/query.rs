//! Reading tracked jobs: one by id, pages by state, queue, class or tag (newest first), and
//! the count of each state (one index per state, as Kickq keeps).

use super::{JobId, JobStatus, State};
use crate::admin::Admin;
use crate::error::Result;
use serde::Serialize;

/// Which jobs to list; every field narrows the list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Only jobs in this state.
    pub state: Option<State>,
    /// Only jobs of this queue.
    pub queue: Option<String>,
    /// Only jobs of this class.
    pub class: Option<String>,
    /// Only jobs with this tag.
    pub tag: Option<String>,
}

/// A page of jobs.
#[derive(Debug, Clone, Serialize)]
pub struct JobPage {
    /// The jobs, newest first.
    pub jobs: Vec<JobStatus>,
    /// How many jobs the listed index holds (the tag's, the state's, or `_statuses`); with a
    /// queue or class filter the matching ones are fewer.
    pub total: u64,
    /// Whether the scan stopped at its budget before the end of the index; continue from
    /// `next` with [`Admin::jobs_from`].
    pub truncated: bool,
    /// The index position after the last entry this page looked at (`None` at the end of the
    /// index): where [`Admin::jobs_from`] goes on.
    pub next: Option<usize>,
}

/// Index entries looked at per page at most (a filter that matches rarely stops here).
const SCAN_BUDGET: usize = 20_000;

/// Entries read per round trip.
const CHUNK: usize = 200;

impl JobFilter {
    fn matches(&self, s: &JobStatus) -> bool {
        self.state.is_none_or(|st| s.state == st)
            && self
                .queue
                .as_ref()
                .is_none_or(|q| s.queue.as_ref() == Some(q))
            && self
                .class
                .as_ref()
                .is_none_or(|c| s.class.as_ref() == Some(c))
            && self.tag.as_ref().is_none_or(|t| s.tags.contains(t))
    }
}

impl Admin {
    /// The record of job `id`; `None` when there is none (never tracked, or expired), an
    /// error when its key holds something that is not a record.
    pub async fn job(&self, id: &JobId) -> Result<Option<JobStatus>> {
        JobStatus::read(&mut self.con(), self.keys(), id).await
    }

    /// Jobs matching `filter`, newest first, skipping the first `offset` matches (looking at
    /// up to 20,000 index entries; see [`Admin::jobs_from`] to page through more).
    pub async fn jobs(&self, filter: &JobFilter, offset: usize, limit: usize) -> Result<JobPage> {
        self.scan_jobs(filter, 0, offset, limit).await
    }

    /// Jobs matching `filter`, newest first, from index position `position` (0, or a page's
    /// `next`): pages through any number of entries, 20,000 at most per call.
    pub async fn jobs_from(
        &self,
        filter: &JobFilter,
        position: usize,
        limit: usize,
    ) -> Result<JobPage> {
        self.scan_jobs(filter, position, 0, limit).await
    }

    async fn scan_jobs(
        &self,
        filter: &JobFilter,
        start: usize,
        offset: usize,
        limit: usize,
    ) -> Result<JobPage> {
        let keys = self.keys();
        let index = match (&filter.tag, filter.state) {
            (Some(t), _) => keys.job_tag(t),
            (None, Some(s)) => keys.job_state(s.as_str()),
            (None, None) => keys.resque_statuses(),
        };
        let mut con = self.con();
        let total: u64 = redis::cmd("ZCARD")
            .arg(&index)
            .query_async(&mut con)
            .await?;
        let mut jobs = Vec::new();
        let (mut skipped, mut at) = (0usize, start);
        let mut truncated = false;
        let mut end = false;
        while jobs.len() < limit {
            if at - start >= SCAN_BUDGET {
                truncated = true;
                break;
            }
            let ids: Vec<String> = redis::cmd("ZREVRANGE")
                .arg(&index)
                .arg(at)
                .arg(at + CHUNK - 1)
                .query_async(&mut con)
                .await?;
            if ids.is_empty() {
                end = true;
                break;
            }
            let read = ids.len();
            let ids: Vec<JobId> = ids.iter().filter_map(|i| JobId::parse(i)).collect();
            if ids.is_empty() {
                continue;
            }
            let texts: Vec<Option<String>> = redis::cmd("MGET")
                .arg(
                    ids.iter()
                        .map(|i| keys.resque_status(i.as_str()))
                        .collect::<Vec<_>>(),
                )
                .query_async(&mut con)
                .await?;
            // Entries are consumed one by one, so `next` points right after the last one kept.
            let mut used = 0;
            for (id, text) in ids.iter().zip(texts) {
                if jobs.len() >= limit {
                    break;
                }
                used += 1;
                let Some(s) = text.and_then(|t| JobStatus::parse(id, &t)) else {
                    continue;
                };
                if !filter.matches(&s) {
                    continue;
                }
                if skipped < offset {
                    skipped += 1;
                    continue;
                }
                jobs.push(s);
            }
            at += if jobs.len() >= limit { used } else { read };
        }
        Ok(JobPage {
            jobs,
            total,
            truncated,
            next: (!end && (at as u64) < total).then_some(at),
        })
    }

    /// How many tracked jobs each state holds.
    pub async fn job_counts(&self) -> Result<Vec<(State, u64)>> {
        let mut pipe = redis::pipe();
        for s in State::ALL {
            pipe.cmd("ZCARD").arg(self.keys().job_state(s.as_str()));
        }
        let mut con = self.con();
        let counts: Vec<u64> = pipe.query_async(&mut con).await?;
        Ok(State::ALL.into_iter().zip(counts).collect())
    }
}
