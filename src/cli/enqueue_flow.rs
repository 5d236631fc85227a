//! `resq enqueue --track`'s workflow flags — `--after ID`…, `--if-dep-failed run|fail|cancel`,
//! `--parent ID`, `--batch BID` ([`crate::jobs::Track`], docs/workflows.md): checked (each
//! needs `--track`, the policy needs `--after`, a waiting job is not delayed), applied to the
//! job's tracking, and said back by `--json`.

use crate::error::{Error, Result};
use crate::jobs::{IfDepFailed, JobId, Track};
use crate::workflows::BatchId;
use clap::{Args, ValueEnum};
use serde::Serialize;

/// What a dependency that did not complete means, as `--if-dep-failed` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DepPolicy {
    Run,
    Fail,
    Cancel,
}

/// `resq enqueue --track`'s workflow flags.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct FlowArgs {
    /// Wait until job ID has ended before being queued (repeatable; needs --track): the job is
    /// `waiting` until every one has completed, failed, been killed or cancelled.
    #[arg(long = "after", value_name = "ID")]
    pub after: Vec<JobId>,
    /// When a job of --after ended otherwise than completed: run all the same (default), end
    /// failed, or end cancelled, without running.
    #[arg(long, value_enum, value_name = "POLICY")]
    pub if_dep_failed: Option<DepPolicy>,
    /// Make it a child of job ID (needs --track): cancelling ID cancels it.
    #[arg(long = "parent", value_name = "ID")]
    pub parent: Option<JobId>,
    /// Add it to batch BID, which must not have ended (needs --track).
    #[arg(long = "batch", value_name = "BID")]
    pub batch: Option<BatchId>,
}

/// What `resq enqueue --track --json` adds for the workflow flags.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct FlowOut {
    /// The jobs it waits for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<JobId>,
    /// Its parent job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<JobId>,
    /// Its batch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchId>,
    /// With `--after`: its state once enqueued (`waiting`, or `queued` when every dependency
    /// had ended already, or `failed`/`cancelled` when one had not completed and it said so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

impl FlowArgs {
    /// Refuses the flags without `--track` (naming the flag), `--if-dep-failed` without
    /// `--after`, and `--after` with a delay.
    pub(crate) fn check(&self, track: bool, delayed: bool) -> Result<()> {
        let given = [
            ("--after", !self.after.is_empty()),
            ("--if-dep-failed", self.if_dep_failed.is_some()),
            ("--parent", self.parent.is_some()),
            ("--batch", self.batch.is_some()),
        ];
        for (flag, on) in given {
            if on && !track {
                return Err(Error::Config {
                    var: flag,
                    message: "needs --track (workflows are kept in a tracked job's record)".into(),
                });
            }
        }
        if self.if_dep_failed.is_some() && self.after.is_empty() {
            return Err(Error::Config {
                var: "--if-dep-failed",
                message: "needs --after (it says what a dependency that did not complete means)"
                    .into(),
            });
        }
        if delayed && !self.after.is_empty() {
            return Err(Error::Config {
                var: "--after",
                message: "a job that waits for others cannot also be delayed (--in, --at)".into(),
            });
        }
        Ok(())
    }

    /// `track` with these flags.
    pub(crate) fn apply(&self, mut track: Track) -> Track {
        for id in &self.after {
            track = track.after(id.clone());
        }
        if let Some(p) = self.if_dep_failed {
            track = track.if_dep_failed(match p {
                DepPolicy::Run => IfDepFailed::Run,
                DepPolicy::Fail => IfDepFailed::Fail,
                DepPolicy::Cancel => IfDepFailed::Cancel,
            });
        }
        if let Some(p) = &self.parent {
            track = track.parent(p.clone());
        }
        if let Some(b) = &self.batch {
            track = track.in_batch(b);
        }
        track
    }

    /// What `--json` says of them for job `id` (its state read back when it has `--after`).
    pub(crate) async fn out(&self, client: &crate::Client, id: &JobId) -> Result<FlowOut> {
        let state = match self.after.is_empty() {
            true => None,
            false => client.status(id).await?.map(|s| s.state.to_string()),
        };
        Ok(FlowOut {
            after: self.after.clone(),
            parent: self.parent.clone(),
            batch: self.batch.clone(),
            state,
        })
    }
}

/// An enqueue's error as the flag at fault: a parent the enqueue refused (the library's rule,
/// [`Error::Parent`]) is `--parent`'s.
pub(crate) fn as_flag(e: Error, namespace: &str) -> Error {
    match e {
        Error::Parent(why) => Error::Config {
            var: "--parent",
            message: format!("{why} in namespace {namespace:?}: nothing was enqueued"),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_flags_need_track_and_after() {
        let id = JobId::new();
        let f = FlowArgs {
            parent: Some(id.clone()),
            ..FlowArgs::default()
        };
        let e = f.check(false, false).unwrap_err().to_string();
        assert!(e.starts_with("--parent: needs --track"), "{e}");
        assert!(f.check(true, false).is_ok());
        let f = FlowArgs {
            if_dep_failed: Some(DepPolicy::Fail),
            ..FlowArgs::default()
        };
        let e = f.check(true, false).unwrap_err().to_string();
        assert!(e.starts_with("--if-dep-failed: needs --after"), "{e}");
        let f = FlowArgs {
            after: vec![id],
            ..FlowArgs::default()
        };
        let e = f.check(true, true).unwrap_err().to_string();
        assert!(e.starts_with("--after: "), "{e}");
    }
}
