//! Every Lua function resq runs, in one Redis Functions library.
//!
//! The `.lua` files of this folder, listed in order in `LIBRARY`, are put together when the
//! crate builds (`build.rs`) into one library, loaded once per server with `FUNCTION LOAD` and
//! called with `FCALL`. Each file is one concern with a header naming its KEYS and ARGV: the
//! modules (`guard`, `config`, `payload`, `record`, `status`, `limits`, `claim`, `jesque`, the
//! step's `finish` and `reserve`, and its features' hooks `track` and `limits_step`) and one
//! file per function. A plain job's path is `step.lua` → `finish.lua` (the previous job's end)
//! → `reserve.lua` (the next job's start); each feature is entered from them at a named hook
//! (`plain_path_tests.rs` checks it).
//!
//! Every function follows one rule: **nothing can fail after the first write** (Redis keeps the
//! writes a function made before an error, so one that raised half-way would leave half a
//! transition). A function checks what could make a write fail first and answers an error
//! reply, before writing anything, when a key is unusable; or, where one call carries several
//! independent transitions (the step), gives the unusable one an `error` verdict of its own and
//! writes nothing of it.
//!
//! The library and its functions are named after a hash of its source (`resq_<hash>`,
//! `resq_<hash>_<name>`), so processes of two resq versions on one Redis each call their own. A
//! server that does not have it (a restart without persistence, a new node) answers `Function
//! not found`; the call then loads the library and is sent again.

mod calls;
mod checked;
pub(crate) mod texts;

pub(crate) use calls::*;
pub(crate) use checked::Checked;

use redis::aio::ConnectionLike;
use redis::{FromRedisValue, RedisResult, ToRedisArgs};

include!(concat!(env!("OUT_DIR"), "/resq_version.rs"));

/// The library's source, as `FUNCTION LOAD` takes it.
pub(crate) const LIBRARY: &str = include_str!(concat!(env!("OUT_DIR"), "/resq.lua"));

/// One function of the library, by its short name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Function(&'static str);

impl Function {
    /// The function's name on the server: `resq_<VERSION>_<name>`.
    pub(crate) fn name(&self) -> String {
        format!("resq_{VERSION}_{}", self.0)
    }

    /// A call of it, to which keys and arguments are added.
    pub(crate) fn prepare_invoke(&self) -> Call {
        Call {
            name: self.name(),
            keys: Vec::new(),
            args: Vec::new(),
        }
    }

    /// A call of it with `key` as its first key.
    pub(crate) fn key<T: ToRedisArgs>(&self, key: T) -> Call {
        let mut c = self.prepare_invoke();
        c.key(key);
        c
    }
}

/// One `FCALL`: the function, its keys and its arguments.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    name: String,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

impl Call {
    /// Adds a key.
    pub(crate) fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        key.write_redis_args(&mut self.keys);
        self
    }

    /// Adds an argument.
    pub(crate) fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    /// The `FCALL` command.
    fn cmd(&self) -> redis::Cmd {
        let mut c = redis::cmd("FCALL");
        c.arg(&self.name)
            .arg(self.keys.len())
            .arg(&self.keys)
            .arg(&self.args);
        c
    }

    /// Sends the call; a server without the library gets it loaded, and the call again.
    pub(crate) async fn invoke_async<T: FromRedisValue, C: ConnectionLike + Send>(
        &self,
        con: &mut C,
    ) -> RedisResult<T> {
        match self.cmd().query_async(con).await {
            Err(e) if not_loaded(&e) => {
                load_at(con, self.keys.first().map(Vec::as_slice)).await?;
                self.cmd().query_async(con).await
            }
            r => r,
        }
    }

    /// Adds the call to `pipe` (load the library first: [`ensure_loaded`]).
    pub(crate) fn add_to(&self, pipe: &mut redis::Pipeline) {
        pipe.add_command(self.cmd());
    }
}

/// Whether `e` says the server does not have the function (its library is not loaded).
pub(crate) fn not_loaded(e: &redis::RedisError) -> bool {
    e.to_string().contains("Function not found")
}

/// Loads the library (`FUNCTION LOAD`); one already loaded is fine.
pub(crate) async fn load<C: ConnectionLike + Send>(con: &mut C) -> RedisResult<()> {
    let r: RedisResult<String> = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(LIBRARY)
        .query_async(con)
        .await;
    match r {
        Ok(_) => Ok(()),
        Err(e) if e.to_string().contains("already exists") => Ok(()),
        Err(e) => Err(e),
    }
}

/// Loads the library on the server that holds `key` (any server without one). On a Redis
/// Cluster a keyless `FUNCTION LOAD` goes to the node the connection used last, which another
/// task sharing the connection may have moved elsewhere since the call that found the library
/// missing: sent in one pipeline with a command on `key`, it goes to `key`'s node.
pub(crate) async fn load_at<C: ConnectionLike + Send>(
    con: &mut C,
    key: Option<&[u8]>,
) -> RedisResult<()> {
    let Some(key) = key else {
        return load(con).await;
    };
    let mut p = redis::pipe();
    p.cmd("FUNCTION")
        .arg("LOAD")
        .arg(LIBRARY)
        .ignore()
        .cmd("EXISTS")
        .arg(key)
        .ignore();
    match p.query_async::<()>(con).await {
        Err(e) if !e.to_string().contains("already exists") => Err(e),
        _ => Ok(()),
    }
}

/// The first key of an `FCALL` command (its fourth argument), if it has one (for the CLI's
/// pipelined enqueues).
#[cfg(feature = "cli")]
pub(crate) fn call_key(cmd: &redis::Cmd) -> Option<Vec<u8>> {
    let mut args = cmd.args_iter().filter_map(|a| match a {
        redis::Arg::Simple(b) => Some(b),
        _ => None,
    });
    let _fcall = args.next()?;
    let _name = args.next()?;
    let n: usize = std::str::from_utf8(args.next()?).ok()?.parse().ok()?;
    (n > 0).then(|| args.next().map(<[u8]>::to_vec)).flatten()
}

/// Makes sure the server that holds `key` has the library, with one cheap call (before a
/// pipeline of `FCALL`s on that key's slot, which must not be sent again as a whole).
pub(crate) async fn ensure_loaded<C: ConnectionLike + Send>(
    con: &mut C,
    key: &str,
) -> RedisResult<()> {
    let _: String = VERSION_FN.key(key).invoke_async(con).await?;
    Ok(())
}

macro_rules! functions {
    ($($(#[$doc:meta])* $name:ident = $fname:literal;)*) => {
        $(
            $(#[$doc])*
            pub(crate) const $name: Function = Function($fname);
        )*
    };
}

functions! {
    /// The library's version (a cheap call that proves it is loaded).
    VERSION_FN = "version";
    /// Finish / fail each slot's job and reserve its next one (worker/step/call.rs).
    STEP = "step";
    /// A claimed payload becomes a failure entry (worker/claim.rs).
    PROMOTE = "promote";
    /// A claimed payload goes back to the head of its queue (worker/claim.rs, pruning).
    UNCLAIM = "unclaim";
    /// Endings with a retry or a unique lock (worker/complete.rs).
    COMPLETE = "complete";
    /// An interrupted job back to the head of its queue (worker/requeue.rs).
    REQUEUE = "requeue";
    /// Unregister a dead worker and record its job (worker/prune.rs).
    PRUNE = "prune";
    /// A dead worker's record-slot part of pruning on a spread namespace (worker/prune).
    PRUNE_SLOT = "prune_slot";
    /// Move due resque-scheduler items to their queues (scheduler/mover.rs).
    MOVE_DELAYED = "move_delayed";
    /// Fire a recurring schedule once (scheduler/recurring.rs).
    FIRE_SCHEDULE = "fire_schedule";
    /// The scheduler's master lock (scheduler/lock.rs).
    SCHEDULER_POLL = "scheduler_poll";
    /// The scheduler's master lock alone, on a spread namespace (scheduler/spread.rs).
    SCHEDULER_LOCK = "scheduler_lock";
    /// A recurring schedule's fire token moved, on a spread namespace (scheduler/spread.rs).
    SCHEDULE_TOKEN = "schedule_token";
    /// Items taken out of one delayed bucket, on a spread namespace (scheduler/spread.rs).
    DELAYED_REMOVE = "delayed_remove";
    /// Enqueue under a unique lock (client/unique.rs).
    UNIQUE_ENQUEUE = "unique_enqueue";
    /// Jesque delayed and recurring enqueue and removal (client/jesque.rs).
    JESQUE_ENQUEUE = "jesque_enqueue";
    /// Retry one failure entry, Ruby's way (admin/failures.rs).
    FAILED_RETRY = "failed_retry";
    /// Remove failure entries, Ruby's way (admin/failures.rs).
    FAILED_REMOVE = "failed_remove";
    /// Mark a failure entry retried, its job pushed already (admin/failures.rs, spread).
    FAILED_MARK = "failed_mark";
    /// Take one resque-scheduler item out of its bucket, and enqueue it (admin/delayed_ops.rs).
    DELAYED_TAKE = "delayed_take";
    /// Several writes as one step, every key's type checked first ([`Checked`]).
    CHECKED_WRITE = "checked_write";
    /// Enqueue a tracked job with its record, tags and job key (jobs/enqueue.rs).
    JOB_ENQUEUE = "job_enqueue";
    /// Cancel a tracked job, or ask a running one to stop (jobs/control.rs).
    JOB_CANCEL = "job_cancel";
    /// A running tracked job's progress, unless it is asked to stop (jobs/running.rs).
    JOB_PROGRESS = "job_progress";
    /// A claimed tracked job starts (worker/claim.rs).
    JOB_START = "job_start";
    /// Forget finished tracked jobs (jobs/control.rs).
    JOB_PURGE = "job_purge";
    /// One chunk of a batch being created (workflows/batch.rs).
    BATCH_STAGE = "batch_stage";
    /// A batch created with batch_stage made visible (workflows/batch.rs).
    BATCH_COMMIT = "batch_commit";
    /// A batch whose creation stopped removed, a part per call (workflows/batch.rs).
    BATCH_DISCARD = "batch_discard";
    /// Held jobs back to their queues by time, capacity or a limit gone (limits/cache.rs).
    LIMITS_RELEASE = "limits_release";
    /// A claimed job's limits, at promote (worker/claim.rs).
    LIMIT_CLAIM = "limit_claim";
    /// A holder's share of a concurrency limit on a spread namespace (limits/spread.rs).
    LIMIT_SHARE = "limit_share";
    /// Limits converging from where jobs are: units derived, held jobs re-judged after a
    /// change, idle partitions forgotten (limits/cache.rs).
    LIMITS_SWEEP = "limits_sweep";
    /// An operator's change of a limit, written and acted on in one step (limits/store.rs).
    LIMITS_SET = "limits_set";
    /// A split queue's declaration changed (splits; `resq split`).
    SPLIT_SET = "split_set";
    /// Workflow bookkeeping an earlier call left, finished (worker/prune.rs).
    FLOW_SETTLE = "flow_settle";
    /// Runs someone else ended (a worker pruned by Ruby, its record deleted), ended (worker/prune).
    JOB_LOST = "job_lost";
    /// Queued jobs someone else took (a Ruby, Jesque or node-resque worker), ended (worker/prune).
    JOB_TAKEN = "job_taken";
    /// The library's verdict on one payload, writing nothing (the payload corpus test).
    #[cfg(test)]
    PAYLOAD_JUDGE = "payload_judge";
}

/// Loads the library before a worker's first step (best effort: a call of a server without it
/// loads it then), so the first reserve is one `FCALL`.
pub(crate) async fn preload<C: ConnectionLike + Send>(con: &mut C) {
    let _ = load(con).await;
}

#[cfg(test)]
mod calls_tests;
#[cfg(test)]
mod globals_tests;
#[cfg(test)]
mod payload_corpus_tests;
#[cfg(test)]
mod plain_path_tests;
#[cfg(test)]
mod state_owner_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod texts_tests;
