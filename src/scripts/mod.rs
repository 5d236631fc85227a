//! Every Lua script resq runs, in one place.
//!
//! Each script is a `.lua` file of this folder whose header names its KEYS and ARGV. Each is
//! loaded with the checks of `guard.lua` prepended, and every one follows the rule those checks
//! serve: **nothing can fail after the first write** (Redis keeps the writes a script made
//! before an error, so a script that raised half-way would leave half a transition). A script
//! checks the type of every key it will write and every counter it will increment first, and
//! answers an error reply, before writing anything, when one is unusable; or, where one call
//! carries several independent transitions (the step script), gives the unusable one an
//! `error` verdict of its own and writes nothing of it.
//!
//! `redis::Script` sends `EVALSHA` and loads the script when the server does not know it yet.

mod checked;
mod compose;

pub(crate) use checked::Checked;

use redis::Script;
use std::sync::LazyLock;

/// The checks every script may use before its first write.
const GUARD: &str = include_str!("guard.lua");

/// Tracked jobs' records, edited by the scripts that move the jobs (docs/jobs.md).
const TRACK: &str = include_str!("track.lua");

/// Limits decided inside the reserve (docs/limits.md).
const LIMITS: &str = include_str!("limits.lua");

/// The step's quick way with concurrency limits on whole queues (docs/limits.md).
const QUICK: &str = include_str!("limits_quick.lua");

/// A script's source as Redis runs it: the guard, the tracking, the limits and the quick limits
/// functions (libraries, each made on first use, `compose.rs`) and its body.
fn composed(body: &str) -> String {
    compose::compose(
        GUARD,
        &[("TRACK", TRACK), ("LIMITS", LIMITS), ("QUICK", QUICK)],
        body,
    )
}

/// A script with the guard and the libraries prepended (see [`composed`]).
fn guarded(body: &str) -> Script {
    Script::new(&composed(body))
}

macro_rules! scripts {
    ($($(#[$doc:meta])* $name:ident = $file:literal;)*) => {
        $(
            $(#[$doc])*
            pub(crate) static $name: LazyLock<Script> =
                LazyLock::new(|| guarded(include_str!($file)));
        )*

        /// Every script's name and source (without the guard), for tests that run each one
        /// against keys of every wrong type.
        #[allow(dead_code)]
        pub(crate) const ALL: &[(&str, &str)] = &[$((stringify!($name), include_str!($file))),*];
    };
}

scripts! {
    /// Finish / fail each slot's job and reserve its next one (worker/step.rs).
    STEP = "step.lua";
    /// A claimed payload becomes its slot's record, or a failure entry (worker/claim.rs).
    PROMOTE = "promote.lua";
    /// A claimed payload goes back to the head of its queue (worker/claim.rs, pruning).
    UNCLAIM = "unclaim.lua";
    /// Endings with a retry or a unique lock (worker/complete.rs).
    COMPLETE = "complete.lua";
    /// An interrupted job back to the head of its queue (worker/requeue.rs).
    REQUEUE = "requeue.lua";
    /// Unregister a dead worker and record its job (worker/prune.rs).
    PRUNE = "prune.lua";
    /// Move due resque-scheduler items to their queues (scheduler/mover.rs).
    MOVE_DELAYED = "move_delayed.lua";
    /// Fire a recurring schedule once (scheduler/recurring.rs).
    FIRE_SCHEDULE = "fire_schedule.lua";
    /// The scheduler's master lock (scheduler/lock.rs).
    SCHEDULER_POLL = "scheduler_poll.lua";
    /// Enqueue under a unique lock (client/unique.rs).
    UNIQUE_ENQUEUE = "unique_enqueue.lua";
    /// Jesque delayed and recurring enqueue and removal (client/jesque.rs).
    JESQUE_ENQUEUE = "jesque_enqueue.lua";
    /// Retry one failure entry, Ruby's way (admin/failures.rs).
    FAILED_RETRY = "failed_retry.lua";
    /// Remove failure entries, Ruby's way (admin/failures.rs).
    FAILED_REMOVE = "failed_remove.lua";
    /// Take one resque-scheduler item out of its bucket, and enqueue it (admin/delayed_ops.rs).
    DELAYED_TAKE = "delayed_take.lua";
    /// Several writes as one step, every key's type checked first ([`Checked`]).
    CHECKED_WRITE = "checked_write.lua";
    /// A running tracked job's progress, unless it is asked to stop (jobs/running.rs).
    TRACK_PROGRESS = "track_progress.lua";
    /// Enqueue a tracked job with its record, tags and job key (jobs/enqueue.rs).
    TRACK_ENQUEUE = "track_enqueue.lua";
    /// Cancel a tracked job, or ask a running one to stop (jobs/control.rs).
    TRACK_CANCEL = "track_cancel.lua";
    /// A transition computed by the worker, on its own (claims, requeues; jobs/mod.rs).
    TRACK_APPLY = "track_apply.lua";
    /// Forget finished records: expired ones, or by state and age (jobs/control.rs).
    TRACK_PURGE = "track_purge.lua";
    /// Held jobs back to their queues by time, capacity or a limit gone (limits/cache.rs).
    RELEASE = "release.lua";
    /// A claimed job's limits, at promote (worker/claim.rs).
    LIMIT_CLAIM = "limit_claim.lua";
    /// Limit shares no job holds any more, returned (worker/prune.rs).
    LIMIT_ORPHANS = "limit_orphans.lua";
}

/// Loads the scripts a worker runs on every job (`SCRIPT LOAD`), before its first step: the
/// first reserve is then one `EVALSHA`, not `EVALSHA` → `NOSCRIPT` → `SCRIPT LOAD` → `EVALSHA`
/// (a few milliseconds during which a signal could arrive between the decision to reserve and
/// the reserve). Best effort: a script not loaded is loaded on first use.
pub(crate) async fn preload<C: redis::aio::ConnectionLike + Send>(con: &mut C) {
    for s in [
        &*STEP,
        &*COMPLETE,
        &*PROMOTE,
        &*TRACK_PROGRESS,
        &*TRACK_APPLY,
    ] {
        let _ = s.load_async(con).await;
    }
}

#[cfg(test)]
mod globals_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod track_tests;
