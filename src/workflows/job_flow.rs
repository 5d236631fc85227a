//! One tracked job's place in workflows, as `resq job show` shows it ([`JobWorkflow`]): the
//! jobs it waits for (each with its state, ended or not), how many have not ended, its policy,
//! its batch and its parent, and how many jobs wait for it or are its children. Bounded: one
//! round trip for the record's fields and the sets' sizes, one for the states of at most
//! 1,000 dependencies (its batch's hash and its parent's state with them).

use super::{BatchId, BatchStatus};
use crate::admin::Admin;
use crate::error::Result;
use crate::jobs::{JobId, State};
use chrono::{DateTime, Utc};
use redis::Value as RedisValue;
use serde::Serialize;

/// Dependencies whose states one call reads at most.
pub(crate) const DEPS_READ: usize = 1000;

/// One dependency of a waiting job, as it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dependency {
    /// Its id.
    pub id: String,
    /// Its record's state (`None`: no record — expired or purged, so it ended).
    pub state: Option<String>,
    /// Whether it has ended (a final state, or no record any more).
    pub ended: bool,
}

/// A job's workflow: what it waits for, its policy, its batch and parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobWorkflow {
    /// Its dependencies in the order given (the first 1,000), each with its state.
    pub deps: Vec<Dependency>,
    /// How many dependencies it has in all.
    pub deps_total: usize,
    /// How many of those read have not ended, from where they are (their records).
    pub deps_unended: usize,
    /// How many have not ended as its record counts them (`deps_left`; `None`: no count).
    pub deps_left: Option<i64>,
    /// What a dependency that did not complete means for it: `run`, `fail` or `cancel`.
    pub if_dep_failed: Option<String>,
    /// The first dependency that ended otherwise than completed.
    pub dep_failed: Option<String>,
    /// When its last dependency ended and it was queued.
    pub released_at: Option<DateTime<Utc>>,
    /// The batch it is a member of.
    pub batch: Option<String>,
    /// That batch's phase ([`BatchStatus::phase`]; `None`: the batch is gone).
    pub batch_phase: Option<String>,
    /// Its parent job.
    pub parent: Option<String>,
    /// Its parent's state (`None`: no record).
    pub parent_state: Option<String>,
    /// Jobs waiting for it (`<ns>:resq:waiters:<id>`).
    pub waiters: u64,
    /// Its children (`<ns>:resq:children:<id>`).
    pub children: u64,
    /// Keys that could not be read, each named with what it holds.
    pub unreadable: Vec<String>,
}

impl JobWorkflow {
    /// Whether it takes part in no workflow.
    pub fn is_empty(&self) -> bool {
        self.deps_total == 0
            && self.batch.is_none()
            && self.parent.is_none()
            && self.waiters == 0
            && self.children == 0
            && self.unreadable.is_empty()
    }

    /// A job whose record says `waiting` though every dependency has ended: nothing will
    /// release it (all of them read, none left).
    pub fn stranded(&self, state: State) -> bool {
        state == State::Waiting && self.deps.len() == self.deps_total && self.deps_unended == 0
    }
}

/// A reply as optional text (an error reply, or another type, reads as `None`).
fn text(v: Option<RedisValue>) -> Option<String> {
    v.and_then(|v| redis::from_redis_value::<Option<String>>(v).ok())
        .flatten()
        .filter(|s| !s.is_empty())
}

impl Admin {
    /// Job `id`'s workflow (`None`: it has no record of resq's own).
    pub async fn job_workflow(&self, id: &JobId) -> Result<Option<JobWorkflow>> {
        let keys = self.keys();
        let mut con = self.con();
        let rk = keys.job_record(id.as_str());
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        pipe.cmd("HMGET").arg(&rk).arg(&[
            "state",
            "deps",
            "deps_left",
            "if_dep_failed",
            "dep_failed",
            "released_at",
            "batch",
            "parent",
        ]);
        pipe.cmd("SCARD").arg(keys.job_waiters(id.as_str()));
        pipe.cmd("SCARD").arg(keys.job_children(id.as_str()));
        let mut r: Vec<RedisValue> = pipe.query_async(&mut con).await?;
        r.resize(3, RedisValue::Nil);
        let mut unreadable = Vec::new();
        // A record of another type: `job show` names it already.
        let Ok(f) = redis::from_redis_value::<Vec<Option<String>>>(r[0].clone()) else {
            return Ok(None);
        };
        if f.first().cloned().flatten().is_none() {
            return Ok(None);
        }
        let field = |i: usize| f.get(i).cloned().flatten().filter(|s| !s.is_empty());
        let count = |v: &RedisValue, key: String, unreadable: &mut Vec<String>| {
            match redis::from_redis_value::<u64>(v.clone()) {
                Ok(n) => n,
                Err(e) => {
                    unreadable.push(format!("{key}: {e}"));
                    0
                }
            }
        };
        let waiters = count(&r[1], keys.job_waiters(id.as_str()), &mut unreadable);
        let children = count(&r[2], keys.job_children(id.as_str()), &mut unreadable);
        let all: Vec<String> = field(1)
            .map(|d| d.split_whitespace().map(String::from).collect())
            .unwrap_or_default();
        let deps_left = field(2).map(|n| match n.trim().parse::<i64>() {
            Ok(n) => n,
            Err(_) => {
                unreadable.push(format!("{rk} field deps_left = {n:?}"));
                -1
            }
        });
        let batch = field(6);
        let parent = field(7);
        // The dependencies' states, the batch and the parent, in one round trip.
        let read: Vec<&String> = all.iter().take(DEPS_READ).collect();
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for d in &read {
            pipe.cmd("HGET").arg(keys.job_record(d)).arg("state");
        }
        if let Some(b) = &batch {
            pipe.cmd("HGETALL").arg(keys.batch(b));
        }
        if let Some(p) = &parent {
            pipe.cmd("HGET").arg(keys.job_record(p)).arg("state");
        }
        let mut replies = if read.is_empty() && batch.is_none() && parent.is_none() {
            Vec::new()
        } else {
            pipe.query_async::<Vec<RedisValue>>(&mut con).await?
        }
        .into_iter();
        let deps: Vec<Dependency> = read
            .iter()
            .map(|d| {
                let state = text(replies.next());
                let ended = state
                    .as_deref()
                    .is_none_or(|s| State::parse(s).is_some_and(|s| s.is_final()));
                Dependency {
                    id: (*d).clone(),
                    state,
                    ended,
                }
            })
            .collect();
        let batch_phase = batch.as_ref().and_then(|b| {
            let v = replies.next()?;
            let f: Vec<(String, Vec<u8>)> = match redis::from_redis_value(v) {
                Ok(f) => f,
                Err(e) => {
                    unreadable.push(format!("{}: {e}", keys.batch(b)));
                    return None;
                }
            };
            let id = BatchId::parse(b)?;
            (!f.is_empty()).then(|| BatchStatus::from_fields(id, &f).phase().to_string())
        });
        let parent_state = parent.as_ref().and_then(|_| text(replies.next()));
        Ok(Some(JobWorkflow {
            deps_unended: deps.iter().filter(|d| !d.ended).count(),
            deps,
            deps_total: all.len(),
            deps_left,
            if_dep_failed: field(3),
            dep_failed: field(4),
            released_at: field(5)
                .and_then(|v| v.trim().parse::<f64>().ok())
                .and_then(|v| DateTime::from_timestamp_millis(v as i64)),
            batch,
            batch_phase,
            parent,
            parent_state,
            waiters,
            children,
            unreadable,
        }))
    }
}
