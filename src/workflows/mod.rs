//! Workflows on tracked jobs (docs/workflows.md): **batches** — a group of jobs enqueued all at
//! once, with callbacks that are jobs themselves (`on_complete`, `on_success`, `on_death`) —
//! jobs that **wait for others** ([`crate::jobs::Track::after`]), and **children**
//! ([`crate::jobs::Track::parent`]).
//!
//! Every count and every release is written by the library (`workflow.lua`) in the same call
//! as the end of the job it follows from, so a callback fires exactly once and a waiting job is
//! released exactly once, whatever dies or restarts around them. Members are plain Resque
//! payloads with a `resq_id`: a Ruby, Java or Node worker can run them, but only resq workers
//! count them ([`crate::admin::Admin::batch_report`] says when a batch waits for one a foreign
//! worker ran).
//!
//! * `batch` — [`Batch`] (what to create) and [`crate::Client::create_batch`];
//! * `status` — [`BatchStatus`], read and listed; a batch's report;
//! * `members` — a batch's members page by page ([`BatchMember`]), the jobs waiting for others
//!   ([`WaitingJob`]), a batch's phase;
//! * `job_flow` — one job's workflow as it stands ([`JobWorkflow`]: its dependencies and their
//!   states, its policy, batch, parent);
//! * `held` — whether members missing from their queue are really gone (not held by a limit,
//!   not just taken by a resq worker).

mod batch;
mod held;
mod job_flow;
mod members;
mod status;

pub use crate::wire::job_id::BatchId;
pub use batch::{Batch, Callback};
pub use job_flow::{Dependency, JobWorkflow};
pub use members::{BatchMember, WaitingJob};
pub use status::{BatchReport, BatchStatus};
