//! Listing tracked jobs ([`Admin::jobs`], [`Admin::jobs_from`]): each filter reads the sources
//! that hold its jobs, in one order, a page at a time, with a position to go on from
//! (docs/jobs.md, "Listing"):
//!
//! | filter | sources, in order |
//! |---|---|
//! | a tag | the tag's index, newest first (the other filters apply to the records) |
//! | `completed`, `failed`, `killed` | the state's index, newest first (resq's own), then resque-status records of that status (`<ns>:_statuses`, newest first) |
//! | `cancelled`, `waiting` | the state's index, newest first |
//! | `queued` | the queues (by name, each newest first), then the limits' held sets |
//! | `scheduled` | the delayed set (soonest first) |
//! | `retrying` | the delayed set, then the queues (a retry due at once) |
//! | `working` | the workers' records (by worker id) |
//! | no state, no tag | resq's own jobs: working, queued (queues, held sets), the delayed set, waiting, completed, failed, killed, cancelled; then every resque-status record (`<ns>:_statuses`, newest first, as resque-status's tab lists them) |
//!
//! Where jobs are read from where they are, a job is listed in the state of that place
//! (queued, scheduled, retrying, working) unless its record says it finished. A record that
//! cannot be read never fails a page: it is left out and named in [`JobPage::unreadable`].

use super::places::{Cand, Place};
use super::position::{Cur, JobPosition, Seg};
use super::read::{read_many, Found, Want};
use super::walk::Walk;
use super::{JobStatus, State};
use crate::admin::Admin;
use crate::error::{Error, Result};
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
    /// The jobs, in the listing's order (module docs of [`crate::jobs`], docs/jobs.md).
    pub jobs: Vec<JobStatus>,
    /// How many entries the one index this listing reads holds, when it reads one index and
    /// no other filter narrows it (a tag alone; a final state or waiting, when no
    /// resque-status record is listed); `None` otherwise. Entries whose record expired and was
    /// not swept yet count too.
    pub total: Option<u64>,
    /// Whether the page stopped at the budget of entries looked at per call (20,000) before it
    /// was full; go on from [`JobPage::next`].
    pub truncated: bool,
    /// Where the listing goes on ([`Admin::jobs_from`]); `None` at its end.
    pub next: Option<JobPosition>,
    /// Records met on the way that could not be read (a key of another type, a text that is
    /// no JSON object, a state that is none): their key and what is wrong. They are left out.
    pub unreadable: Vec<String>,
}

/// Entries looked at per call at most (a filter that matches rarely stops here; go on from
/// `next`).
const SCAN_BUDGET: usize = 20_000;

/// Entries read per round trip when other filters narrow what is read.
const CHUNK: usize = 200;

impl JobFilter {
    /// Whether record `s` passes the filter (its tag, when read from the tag's own index, is
    /// the index's: a resque-status record keeps no tags).
    fn matches(&self, s: &JobStatus, seg: Seg) -> bool {
        self.state.is_none_or(|st| s.state == st)
            && self
                .queue
                .as_ref()
                .is_none_or(|q| s.queue.as_ref() == Some(q))
            && self
                .class
                .as_ref()
                .is_none_or(|c| s.class.as_ref() == Some(c))
            && (seg == Seg::Tag || self.tag.as_ref().is_none_or(|t| s.tags.contains(t)))
    }

    /// The sources of this filter, in order.
    pub(crate) fn plan(&self) -> Vec<Seg> {
        if self.tag.is_some() {
            return vec![Seg::Tag];
        }
        // A resque-status record names no queue: a queue filter never selects one by index.
        let statuses = |s: Option<State>| {
            if self.queue.is_some() {
                None
            } else {
                Some(Seg::Statuses(s))
            }
        };
        match self.state {
            Some(State::Queued) => vec![Seg::Queues, Seg::Held],
            Some(State::Scheduled) => vec![Seg::Delayed],
            Some(State::Retrying) => vec![Seg::Delayed, Seg::Queues],
            Some(State::Working) => vec![Seg::Workers],
            Some(s @ (State::Waiting | State::Cancelled)) => vec![Seg::State(s)],
            Some(s) => [Some(Seg::State(s)), statuses(Some(s))]
                .into_iter()
                .flatten()
                .collect(),
            None => [
                Seg::Workers,
                Seg::Queues,
                Seg::Held,
                Seg::Delayed,
                Seg::State(State::Waiting),
                Seg::State(State::Completed),
                Seg::State(State::Failed),
                Seg::State(State::Killed),
                Seg::State(State::Cancelled),
            ]
            .into_iter()
            .map(Some)
            .chain([statuses(None)])
            .flatten()
            .collect(),
        }
    }

    /// Whether records are read only to be dropped by a filter the source does not apply.
    fn narrows(&self) -> bool {
        self.class.is_some()
            || (self.tag.is_some() && (self.state.is_some() || self.queue.is_some()))
    }
}

/// The state of a job found at `place` whose record says `s`; `None` when it is not listed
/// there (it finished; an index entry its record no longer agrees with).
fn listed_state(place: Place, seg: Seg, s: &JobStatus) -> Option<State> {
    let readable = s.state_readable();
    if place != Place::Index && readable && s.state.is_final() {
        return None;
    }
    let retrying = readable && s.state == State::Retrying;
    match (place, seg) {
        (Place::Worker, _) => Some(State::Working),
        (Place::Held, _) => Some(State::Queued),
        (Place::Queue, _) => Some(if retrying {
            State::Retrying
        } else {
            State::Queued
        }),
        (Place::Delayed, _) => Some(if retrying {
            State::Retrying
        } else {
            State::Scheduled
        }),
        (Place::Index, Seg::State(st)) => (readable && s.state == st).then_some(st),
        (Place::Index, Seg::Statuses(Some(st))) => {
            (readable && s.statused && s.state == st).then_some(st)
        }
        (Place::Index, Seg::Statuses(None)) => (readable && s.statused).then_some(s.state),
        (Place::Index, _) => readable.then_some(s.state),
    }
}

/// The record key of a job read as `s`.
fn record_key(admin: &Admin, s: &JobStatus) -> String {
    if s.statused {
        admin.keys().resque_status(s.id.as_str())
    } else {
        admin.keys().job_record(s.id.as_str())
    }
}

impl Admin {
    /// The record of job `id`; `None` when there is none (never tracked, or expired), an
    /// error naming the key when it holds something that is not a record.
    pub async fn job(&self, id: &super::JobId) -> Result<Option<JobStatus>> {
        JobStatus::read(&mut self.con(), self.keys(), id).await
    }

    /// Jobs matching `filter`, from the start of the listing, skipping the first `offset`
    /// matches; at most `limit`. A call looks at 20,000 entries at most: a page that stops
    /// there says so (`truncated`), and every page says where to go on (`next`, for
    /// [`Admin::jobs_from`]).
    pub async fn jobs(&self, filter: &JobFilter, offset: usize, limit: usize) -> Result<JobPage> {
        self.jobs_within(filter, None, offset, limit, SCAN_BUDGET)
            .await
    }

    /// [`Admin::jobs`] (`from`: `None`) or [`Admin::jobs_from`] looking at about `budget`
    /// entries at most (names of queues and held sets read count as entries).
    pub(crate) async fn jobs_within(
        &self,
        filter: &JobFilter,
        from: Option<&JobPosition>,
        offset: usize,
        limit: usize,
        budget: usize,
    ) -> Result<JobPage> {
        let plan = filter.plan();
        let Some(first) = plan.first() else {
            return Ok(empty());
        };
        let from = match from {
            None => JobPosition::start(*first),
            Some(position) if plan.contains(&position.seg) => position.clone(),
            Some(position) => {
                return Err(Error::Rejected(format!(
                    "position {position} is not one of this listing's (it came from a listing \
                     with other filters)"
                )))
            }
        };
        self.scan(filter, &plan, from, offset, limit, budget.max(1))
            .await
    }

    /// Jobs matching `filter` from `position` (a page's `next`, of the same filter), at most
    /// `limit`: goes on through a listing of any length, 20,000 entries looked at per call at
    /// most.
    pub async fn jobs_from(
        &self,
        filter: &JobFilter,
        position: &JobPosition,
        limit: usize,
    ) -> Result<JobPage> {
        self.jobs_within(filter, Some(position), 0, limit, SCAN_BUDGET)
            .await
    }

    async fn scan(
        &self,
        filter: &JobFilter,
        plan: &[Seg],
        from: JobPosition,
        offset: usize,
        limit: usize,
        budget: usize,
    ) -> Result<JobPage> {
        let mut con = self.con();
        let keys = self.keys();
        let mut page = empty();
        page.total = self.total(filter, plan).await?;
        if limit == 0 {
            page.next = Some(from);
            return Ok(page);
        }
        // Every resque-status record is read from `_statuses`: none where jobs are.
        let everything = plan.contains(&Seg::Statuses(None));
        let mut skip = offset;
        let mut looked = 0usize;
        let start = plan.iter().position(|s| *s == from.seg).unwrap_or(0);
        let mut cur = from.cur;
        for &seg in plan.iter().skip(start) {
            let mut walk = Walk::open(
                &mut con,
                keys,
                seg,
                &cur,
                filter.tag.as_deref(),
                filter.queue.as_deref(),
            )
            .await?;
            cur = Cur::Start;
            loop {
                let left = limit.saturating_sub(page.jobs.len()) + skip;
                let want = if filter.narrows() || seg_walks(seg) {
                    CHUNK
                } else {
                    left + 1
                };
                let Some(entries) = walk.next(&mut con, keys, want).await? else {
                    break;
                };
                let cands: Vec<(usize, Cand)> = entries
                    .iter()
                    .enumerate()
                    .filter_map(|(i, e)| Some((i, e.cand.clone()?)))
                    .filter(|(_, c)| pre_match(filter, c))
                    .filter(|(_, c)| {
                        !(everything && c.place != Place::Index && c.want == Want::Statused)
                    })
                    .collect();
                let wanted: Vec<(super::JobId, Want)> =
                    cands.iter().map(|(_, c)| (c.id.clone(), c.want)).collect();
                let found = read_many(&mut con, keys, &wanted).await?;
                let mut kept: Vec<Option<JobStatus>> = entries.iter().map(|_| None).collect();
                for ((i, c), f) in cands.into_iter().zip(found) {
                    match f {
                        Found::Absent => {}
                        Found::Unreadable(why) => page.unreadable.push(why),
                        Found::Record(s) => {
                            let mut s = *s;
                            let Some(st) = listed_state(c.place, seg, &s) else {
                                if c.place == Place::Index && !s.state_readable() {
                                    page.unreadable.push(unreadable_state(self, &s));
                                }
                                continue;
                            };
                            located(&mut s, &c, st);
                            if filter.matches(&s, seg) {
                                kept[i] = Some(s);
                            }
                        }
                    }
                }
                for (e, s) in entries.iter().zip(kept) {
                    looked += 1;
                    let Some(s) = s else { continue };
                    if skip > 0 {
                        skip -= 1;
                        continue;
                    }
                    page.jobs.push(s);
                    if page.jobs.len() >= limit {
                        page.next = Some(JobPosition {
                            seg,
                            cur: e.after.clone(),
                        });
                        return Ok(page);
                    }
                }
                // Empty queues and held sets count too: 200,000 of them cost what 200,000
                // jobs do.
                looked += walk.take_reads().saturating_sub(entries.len());
                if looked >= budget {
                    page.truncated = true;
                    page.next = Some(match (entries.last(), walk.resume()) {
                        (_, Some(cur)) if entries.is_empty() => JobPosition { seg, cur },
                        (Some(e), _) => JobPosition {
                            seg,
                            cur: e.after.clone(),
                        },
                        (None, _) => JobPosition::start(seg),
                    });
                    return Ok(page);
                }
            }
        }
        Ok(page)
    }

    /// [`JobPage::total`] of `filter`.
    async fn total(&self, filter: &JobFilter, plan: &[Seg]) -> Result<Option<u64>> {
        if filter.queue.is_some() || filter.class.is_some() {
            return Ok(None);
        }
        let index = match (plan, &filter.tag, filter.state) {
            ([Seg::Tag], Some(t), None) => self.keys().job_tag(t),
            ([Seg::State(s)], None, Some(_))
            | ([Seg::State(s), Seg::Statuses(_)], None, Some(_)) => {
                self.keys().job_state(s.as_str())
            }
            _ => return Ok(None),
        };
        let statuses = plan.iter().any(|s| matches!(s, Seg::Statuses(_)));
        let mut con = self.con();
        // (Spread: the index's parts, one per slot, added up.)
        let parts = super::walk::index_keys(&mut con, self.keys(), index).await?;
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for k in &parts {
            pipe.zcard(k);
        }
        pipe.zcard(self.keys().resque_statuses());
        let counts: Vec<Option<u64>> = pipe
            .query_async::<Vec<redis::RedisResult<u64>>>(&mut con)
            .await
            .map(|v| v.into_iter().map(|r| r.ok()).collect())?;
        let (ix, listed) = counts.split_at(parts.len().min(counts.len()));
        let n = ix.iter().try_fold(0u64, |t, c| c.map(|c| t + c));
        let listed = listed.first().copied().flatten();
        Ok(n.filter(|_| !statuses || listed == Some(0)))
    }
}

/// Whether a source is one where jobs are (most of its entries are other jobs).
fn seg_walks(seg: Seg) -> bool {
    matches!(seg, Seg::Workers | Seg::Queues | Seg::Held | Seg::Delayed)
}

/// What the entry itself says already rules out (its queue, its payload's class).
fn pre_match(filter: &JobFilter, c: &Cand) -> bool {
    c.place == Place::Index
        || (filter
            .queue
            .as_ref()
            .is_none_or(|q| c.queue.as_deref().is_none_or(|cq| cq == q))
            && filter
                .class
                .as_ref()
                .is_none_or(|k| c.class.as_deref().is_none_or(|cc| cc == k)))
}

/// A record found at a place: the state of the place, and where it is.
fn located(s: &mut JobStatus, c: &Cand, st: State) {
    if c.place == Place::Index {
        return;
    }
    if s.state != st {
        s.state = st;
        if !s.statused {
            s.status = st.resque_status().to_string();
        }
    }
    if let Some(q) = &c.queue {
        s.queue = Some(q.clone());
    }
    if s.class.is_none() {
        s.class.clone_from(&c.class);
    }
}

/// A record in an index whose state cannot be read.
fn unreadable_state(admin: &Admin, s: &JobStatus) -> String {
    let bad: Vec<String> = s.unreadable.iter().map(|b| b.to_string()).collect();
    format!("{}: {}", record_key(admin, s), bad.join(", "))
}

fn empty() -> JobPage {
    JobPage {
        jobs: Vec::new(),
        total: None,
        truncated: false,
        next: None,
        unreadable: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_filter_reads_its_sources() {
        let f = |state: Option<State>, tag: Option<&str>, queue: Option<&str>| JobFilter {
            state,
            tag: tag.map(String::from),
            queue: queue.map(String::from),
            class: None,
        };
        assert_eq!(f(Some(State::Failed), Some("t"), None).plan(), [Seg::Tag]);
        assert_eq!(
            f(Some(State::Failed), None, None).plan(),
            [
                Seg::State(State::Failed),
                Seg::Statuses(Some(State::Failed))
            ]
        );
        assert_eq!(
            f(Some(State::Failed), None, Some("q")).plan(),
            [Seg::State(State::Failed)]
        );
        assert_eq!(
            f(Some(State::Cancelled), None, None).plan(),
            [Seg::State(State::Cancelled)]
        );
        assert_eq!(
            f(Some(State::Retrying), None, None).plan(),
            [Seg::Delayed, Seg::Queues]
        );
        let all = f(None, None, None).plan();
        assert_eq!(all.len(), 10);
        assert_eq!(all.last(), Some(&Seg::Statuses(None)));
    }
}
