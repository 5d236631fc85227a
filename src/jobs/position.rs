//! Where a listing of tracked jobs goes on ([`JobPosition`]): the source it reached (a worker
//! set, the queues, the limits' held sets, the delayed set, an index) and the place in it,
//! written as text a caller hands back (`resq jobs --from`, the dashboard's `from=`).
//!
//! | text | goes on |
//! |---|---|
//! | `workers`, `workers:<id>` | at the first worker (by id), or the one after `<id>` |
//! | `queues`, `queues:<n>:<queue>`, `queues:<n>/<c>:<queue>` | in queue `<queue>` after its `<n>` newest jobs (`<c>`: the `SSCAN` cursor of `<ns>:queues` whose batch of names holds it) |
//! | `held`, `held:<score>:<seq>:<key>` | in held set `<key>` (by name) after its entry of that score and sequence (`<seq>` in hex), wherever it is now |
//! | `delayed`, `delayed:<ts>:<n>` | in the delayed set at time `<ts>`, after its `<n>` first items |
//! | `<index>`, `<index>:<score>:<member>` | in an index (newest first), after that entry |
//!
//! `<index>` is a state (`completed`, `failed`, `killed`, `cancelled`, `waiting`), `tag`, or
//! `status-<state>` / `statuses` (resque-status records in `<ns>:_statuses`). An index is
//! resumed at its entry, wherever it is now, so entries added meanwhile do not shift a page; an
//! entry gone meanwhile is resumed after its score.

use super::State;
use crate::error::{Error, Result};

/// One source of a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seg {
    /// The records of the workers in `<ns>:workers`: working jobs.
    Workers,
    /// The queues of `<ns>:queues`: queued jobs (and retries due now).
    Queues,
    /// The held sets of the limits: queued jobs a limit holds.
    Held,
    /// resque-scheduler's delayed set: scheduled jobs and retries.
    Delayed,
    /// `<ns>:resq:jobs:<state>` (a final state, or waiting).
    State(State),
    /// `<ns>:resq:tag:<tag>` (the filter's tag).
    Tag,
    /// `<ns>:_statuses`: resque-status records of this status (`None`: every one).
    Statuses(Option<State>),
}

/// A place in a source: its start, or right after an entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cur {
    /// The source's first entry.
    Start,
    /// After worker `0`.
    Worker(String),
    /// In queue `queue`, after its `off` newest jobs; `scan`: the `SSCAN` cursor of
    /// `<ns>:queues` that gave the batch of names holding `queue` (0: the first batch).
    Queue {
        queue: String,
        off: usize,
        scan: u64,
    },
    /// In held set `key`, after its entry of `score` whose member starts `<seq>\t` (a held
    /// set's members are `seq\tqueue\tunits\tname\tpayload`, ordered by score then bytes): a
    /// job released meanwhile does not shift the place.
    Held {
        key: String,
        score: f64,
        seq: Vec<u8>,
    },
    /// In the delayed bucket of `ts`, after its `idx` first items (later buckets follow).
    Delayed { ts: i64, idx: usize },
    /// In an index, after the entry `member` of `score`.
    Score { score: f64, member: String },
}

/// Where a listing of tracked jobs goes on: [`crate::jobs::JobPage::next`], handed back to
/// [`crate::admin::Admin::jobs_from`]. Its text (`Display`, `FromStr`, JSON) names the source and
/// the place in it (docs/jobs.md, "Listing").
#[derive(Debug, Clone, PartialEq)]
pub struct JobPosition {
    pub(crate) seg: Seg,
    pub(crate) cur: Cur,
}

impl JobPosition {
    pub(crate) fn start(seg: Seg) -> Self {
        JobPosition {
            seg,
            cur: Cur::Start,
        }
    }

    fn seg_name(&self) -> String {
        match self.seg {
            Seg::Workers => "workers".into(),
            Seg::Queues => "queues".into(),
            Seg::Held => "held".into(),
            Seg::Delayed => "delayed".into(),
            Seg::State(s) => s.as_str().into(),
            Seg::Tag => "tag".into(),
            Seg::Statuses(Some(s)) => format!("status-{s}"),
            Seg::Statuses(None) => "statuses".into(),
        }
    }
}

impl std::fmt::Display for JobPosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let seg = self.seg_name();
        match &self.cur {
            Cur::Start => write!(f, "{seg}"),
            Cur::Worker(w) => write!(f, "{seg}:{w}"),
            Cur::Queue {
                queue,
                off,
                scan: 0,
            } => write!(f, "{seg}:{off}:{queue}"),
            Cur::Queue { queue, off, scan } => write!(f, "{seg}:{off}/{scan}:{queue}"),
            Cur::Held { key, score, seq } => {
                let hex: String = seq.iter().map(|b| format!("{b:02x}")).collect();
                write!(f, "{seg}:{score}:{hex}:{key}")
            }
            Cur::Delayed { ts, idx } => write!(f, "{seg}:{ts}:{idx}"),
            Cur::Score { score, member } => write!(f, "{seg}:{score}:{member}"),
        }
    }
}

impl std::str::FromStr for JobPosition {
    type Err = Error;
    fn from_str(s: &str) -> Result<JobPosition> {
        let bad = || {
            Error::Rejected(format!(
                "{s:?} is not a position of a job listing (one a page gave as `next`)"
            ))
        };
        let (name, rest) = match s.split_once(':') {
            Some((n, r)) => (n, Some(r)),
            None => (s, None),
        };
        let seg = match name {
            "workers" => Seg::Workers,
            "queues" => Seg::Queues,
            "held" => Seg::Held,
            "delayed" => Seg::Delayed,
            "tag" => Seg::Tag,
            "statuses" => Seg::Statuses(None),
            other => match other.strip_prefix("status-") {
                Some(st) => Seg::Statuses(Some(State::parse(st).ok_or_else(bad)?)),
                None => Seg::State(State::parse(other).ok_or_else(bad)?),
            },
        };
        if let Seg::State(st) = seg {
            if !st.is_final() && st != State::Waiting {
                return Err(bad());
            }
        }
        let Some(rest) = rest else {
            return Ok(JobPosition::start(seg));
        };
        let cur = match seg {
            Seg::Workers => Cur::Worker(rest.to_string()),
            Seg::Queues => {
                let (at, queue) = rest.split_once(':').ok_or_else(bad)?;
                let (off, scan) = at.split_once('/').unwrap_or((at, "0"));
                Cur::Queue {
                    queue: queue.to_string(),
                    off: off.parse().map_err(|_| bad())?,
                    scan: scan.parse().map_err(|_| bad())?,
                }
            }
            Seg::Held => {
                let (score, rest) = rest.split_once(':').ok_or_else(bad)?;
                let (seq, key) = rest.split_once(':').ok_or_else(bad)?;
                let score: f64 = score.parse().map_err(|_| bad())?;
                if !score.is_finite() || seq.is_empty() || seq.len() % 2 != 0 || key.is_empty() {
                    return Err(bad());
                }
                let seq = (0..seq.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(seq.get(i..i + 2)?, 16).ok())
                    .collect::<Option<Vec<u8>>>()
                    .ok_or_else(bad)?;
                Cur::Held {
                    key: key.to_string(),
                    score,
                    seq,
                }
            }
            Seg::Delayed => {
                let (ts, idx) = rest.split_once(':').ok_or_else(bad)?;
                Cur::Delayed {
                    ts: ts.parse().map_err(|_| bad())?,
                    idx: idx.parse().map_err(|_| bad())?,
                }
            }
            Seg::State(_) | Seg::Tag | Seg::Statuses(_) => {
                let (score, member) = rest.split_once(':').ok_or_else(bad)?;
                let score: f64 = score.parse().map_err(|_| bad())?;
                if !score.is_finite() {
                    return Err(bad());
                }
                Cur::Score {
                    score,
                    member: member.to_string(),
                }
            }
        };
        Ok(JobPosition { seg, cur })
    }
}

impl serde::Serialize for JobPosition {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_read_back_as_written() {
        for text in [
            "workers",
            "workers:host~resq:12-0:a,b",
            "queues:0:mail:eu",
            "queues:3/1796:mail:eu",
            "held:990001795495079000:61622e303030303031:resque:resq:limit:pay:held",
            "held:1.5:33:x",
            "delayed:1795495079:2",
            "completed",
            "completed:1795495079000:ba69034b39c05d28a5403ac10e276e79",
            "waiting:1.5:x",
            "tag:-3:odd:member",
            "status-failed:1795495079:ba69034b39c05d28a5403ac10e276e79",
            "statuses",
            "statuses:5:ba69034b39c05d28a5403ac10e276e79",
        ] {
            let p: JobPosition = text.parse().unwrap();
            assert_eq!(p.to_string(), text);
        }
        for bad in [
            "",
            "queued",
            "working:x",
            "queues:x:q",
            "queues:1/x:q",
            "delayed:1",
            "completed:nan:x",
            "status-lost",
            "completed:12",
            "held:3:resque:resq:limit:pay:held",
            "held:3:ab:",
            "held:3:abc:k",
        ] {
            assert!(bad.parse::<JobPosition>().is_err(), "{bad}");
        }
    }
}
