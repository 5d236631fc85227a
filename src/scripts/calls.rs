//! One typed builder per Lua function: a struct whose fields are the function's KEYS and ARGV,
//! in its header's order, and whose `call()` makes the `FCALL`.
//!
//! A call site fills the fields by name (`FireSchedule { lock, schedule_next, … }.call()`), so
//! an argument cannot land at the wrong index; each field carries the words its file's header
//! gives that index, and a test (`calls_tests.rs`) reads every header and checks that each
//! builder names the same KEYS and ARGV, in the same order, and that every function of the
//! library has a builder (or is on the short list of those still built by position).
//!
//! A trailing part repeated per item (`ARGV[5..]`, "then per item") is one field, `keys_tail`
//! or `argv_tail`, of a type that writes each item's values in order (a `Vec` of strings or of
//! tuples); an optional trailing argument is an `Option`, which writes nothing when `None`.

use redis::{RedisWrite, ToRedisArgs};

use super::Call;

/// What a builder says about its function, for the header test.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct Spec {
    /// The function's short name.
    pub(crate) function: &'static str,
    /// Its file in `src/scripts/`.
    pub(crate) file: &'static str,
    /// Per KEYS index from 1: the field's name and the header's words for it.
    pub(crate) keys: &'static [(&'static str, &'static str)],
    /// The header's words for each value of a repeated trailing part of KEYS (empty: none).
    pub(crate) keys_tail: &'static [&'static str],
    /// Per ARGV index from 1: the field's name and the header's words for it.
    pub(crate) argv: &'static [(&'static str, &'static str)],
    /// The header's words for each value of a repeated trailing part of ARGV (empty: none).
    pub(crate) argv_tail: &'static [&'static str],
}

macro_rules! builders {
    ($specs:ident; $(
        $(#[$doc:meta])*
        $name:ident $(<$lt:lifetime>)? = $func:ident in $file:literal {
            keys { $($k:ident : $kt:ty => $kh:literal),* $(,)? }
            $(keys_tail $kr:ident : $krt:ty => [$($krh:literal),* $(,)?];)?
            argv { $($a:ident : $at:ty => $ah:literal),* $(,)? }
            $(argv_tail $ar:ident : $art:ty => [$($arh:literal),* $(,)?];)?
        }
    )*) => {
        $(
            $(#[$doc])*
            #[doc = concat!("\n\nThe call of `", $file, "`.")]
            pub(crate) struct $name $(<$lt>)? {
                $( #[doc = concat!("KEYS: ", $kh)] pub(crate) $k: $kt, )*
                $( #[doc = concat!("KEYS, per item: ", $($krh, "; ",)*)] pub(crate) $kr: $krt, )?
                $( #[doc = concat!("ARGV: ", $ah)] pub(crate) $a: $at, )*
                $( #[doc = concat!("ARGV, per item: ", $($arh, "; ",)*)] pub(crate) $ar: $art, )?
            }

            impl $(<$lt>)? $name $(<$lt>)? {
                /// The `FCALL`, its keys and arguments in the header's order.
                pub(crate) fn call(&self) -> Call {
                    let mut c = super::$func.prepare_invoke();
                    $( c.key(&self.$k); )*
                    $( c.key(&self.$kr); )?
                    $( c.arg(&self.$a); )*
                    $( c.arg(&self.$ar); )?
                    c
                }
            }
        )*

        /// These builders, for the header test.
        #[cfg_attr(not(test), allow(dead_code))]
        pub(crate) const $specs: &[Spec] = &[$(
            Spec {
                function: super::$func.0,
                file: $file,
                keys: &[$((stringify!($k), $kh)),*],
                keys_tail: &[$($($krh),*)?],
                argv: &[$((stringify!($a), $ah)),*],
                argv_tail: &[$($($arh),*)?],
            },
        )*];
    };
}

/// The writes of a `checked_write` call, as its ARGV lays them out: per write, the command,
/// its key's index in KEYS, the number of arguments, the arguments.
pub(crate) struct Writes<'a>(pub(crate) &'a [(&'static str, usize, Vec<Vec<u8>>)]);

impl ToRedisArgs for Writes<'_> {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        for (cmd, k, args) in self.0 {
            cmd.write_redis_args(out);
            k.write_redis_args(out);
            args.len().write_redis_args(out);
            for a in args {
                out.write_arg(a);
            }
        }
    }
}

/// The repeated tail of a `step` call: the polled queues' indexes, then each slot's part.
pub(crate) struct StepTail<'a> {
    /// The polled queues' indexes (from 1) in the queue list, in priority order.
    pub(crate) polled: &'a [usize],
    /// The slots of the call, in order.
    pub(crate) slots: Vec<StepSlot<'a>>,
}

/// One slot's part of a `step` call: its index, its op, then the record or token, the failure
/// entry (failures only), the tracked ending (only with one) and what the end deletes besides
/// the job (only with it: the op then has a fifth character, `x`).
pub(crate) struct StepSlot<'a> {
    /// Its index (from 1) in the config's slots.
    pub(crate) index: usize,
    /// The op: the completion's code, `1`/`0` reserve, `t`/`-` tracked ending, `l`/`-` limited.
    pub(crate) op: [u8; 4],
    /// The completed job's record or claim token (empty: none).
    pub(crate) reference: &'a [u8],
    /// The failure entry (a failure only).
    pub(crate) entry: Option<&'a str>,
    /// The tracked ending (record.lua's or status.lua's spec).
    pub(crate) track: Option<&'a str>,
    /// What the end deletes besides the job: the retry counter, the retry failure key, the
    /// unique lock, the unique id (`""` none).
    pub(crate) ends: Option<[String; 4]>,
}

impl ToRedisArgs for StepTail<'_> {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        for i in self.polled {
            i.write_redis_args(out);
        }
        for s in &self.slots {
            s.index.write_redis_args(out);
            match &s.ends {
                None => out.write_arg(&s.op),
                Some(_) => {
                    let [c, r, t, l] = s.op;
                    out.write_arg(&[c, r, t, l, b'x']);
                }
            }
            out.write_arg(s.reference);
            if let Some(e) = s.entry {
                e.write_redis_args(out);
            }
            if let Some(t) = s.track {
                t.write_redis_args(out);
            }
            for v in s.ends.iter().flatten() {
                v.write_redis_args(out);
            }
        }
    }
}

builders! {
    SPECS;

    /// Each of a batch of slots' completion applied and next job reserved (the worker's step).
    Step<'a> = STEP in "step.lua" {
        keys {
            processed: String => "<ns>:stat:processed",
        }
        argv {
            config: &'a str => "the config's digest",
            queue_list: &'a str => "the queue list's digest",
            config_text: &'a str => "the config's text",
            queues_text: &'a str => "the queue list's text",
            now_ms: i64 => "now (epoch ms)",
            run_at: String => "run_at for new records",
            failed_at: String => "failed_at for entries",
            token: String => "a prefix unique to this call",
            limits: &'a str => "the limits in force",
            n: usize => "n, the number of queues polled",
        }
        argv_tail tail: StepTail<'a> => ["their indexes in the queue list",
            "its index in the config's slots",
            "an op of four characters", "the record or token", "the failure entry",
            "the tracked ending", "the retry counter", "the retry failure key",
            "the unique lock", "the unique id"];
    }

    /// The scheduler's master lock taken, kept or given up, and the earliest due bucket.
    SchedulerPoll<'a> = SCHEDULER_POLL in "scheduler_poll.lua" {
        keys {
            lock: &'a str => "<ns>:<ns>:resque_scheduler_master_lock",
            schedule: &'a str => "<ns>:delayed_queue_schedule",
        }
        argv {
            value: &'a str => "lock value '<host>:<pid>'",
            timeout_s: u64 => "lock timeout (s)",
            now_s: i64 => "now (epoch s)",
            release: &'a str => "'release' to give the lock up",
        }
    }

    /// resque-scheduler's master lock alone, on its one key (a spread namespace).
    SchedulerLock<'a> = SCHEDULER_LOCK in "scheduler_lock.lua" {
        keys {
            lock: &'a str => "<ns>:<ns>:resque_scheduler_master_lock",
        }
        argv {
            value: &'a str => "lock value '<host>:<pid>'",
            timeout_s: u64 => "lock timeout (s)",
            release: &'a str => "'release' to give the lock up",
        }
    }

    /// A recurring schedule's fire token moved if still the one read (a spread namespace).
    ScheduleToken<'a> = SCHEDULE_TOKEN in "schedule_token.lua" {
        keys {
            schedule_next: String => "<ns>:resq:schedule_next",
        }
        argv {
            name: &'a str => "schedule name",
            token: &'a str => "token read",
            new_token: &'a str => "new token",
        }
    }

    /// Items taken out of one resque-scheduler bucket, on its one key (a spread namespace).
    DelayedRemove<'a> = DELAYED_REMOVE in "delayed_remove.lua" {
        keys {
            bucket: &'a str => "<ns>:delayed:<ts>",
        }
        argv {
            n: usize => "n",
        }
        argv_tail items: Vec<&'a [u8]> => ["the item (exact bytes)"];
    }

    /// One recurring schedule fired, or its token moved.
    FireSchedule<'a> = FIRE_SCHEDULE in "fire_schedule.lua" {
        keys {
            lock: &'a str => "the master lock",
            schedule_next: String => "<ns>:resq:schedule_next",
            last_enqueued_at: String => "<ns>:delayed:last_enqueued_at",
            queues: String => "<ns>:queues",
            queue: String => "<ns>:queue:<q>",
        }
        argv {
            lock_value: &'a str => "lock value",
            name: &'a str => "schedule name",
            token: &'a str => "token read",
            new_token: &'a str => "new token",
            mode: &'a str => "mode: 'fire'",
            last_enqueued_at_text: String => "last_enqueued_at text",
            queue_name: &'a str => "queue name",
            payload: &'a str => "job payload",
        }
    }

    /// Due resque-scheduler items of one bucket moved to their queues.
    MoveDelayed<'a> = MOVE_DELAYED in "move_delayed.lua" {
        keys {
            lock: &'a str => "the master lock",
            schedule: String => "<ns>:delayed_queue_schedule",
            bucket: &'a str => "<ns>:delayed:<ts>",
            queues: String => "<ns>:queues",
            failed: String => "<ns>:failed",
        }
        keys_tail items_keys: Vec<(String, String)> => ["<ns>:timestamps:<item>", "<ns>:queue:<q>"];
        argv {
            lock_value: &'a str => "lock value",
            ts: i64 => "ts (the zset member)",
            member: &'a str => "'delayed:<ts>'",
            n: usize => "n",
            prefix: &'a str => "the namespace prefix '<ns>:'",
            now_ms: i64 => "now in epoch ms",
        }
        argv_tail items: Vec<(&'a str, String, String, String)> =>
            ["the item (exact bytes)", "queue name", "the job payload", "'r:<id>'"];
    }

    /// One item taken out of a resque-scheduler bucket, and enqueued when asked.
    DelayedTake<'a> = DELAYED_TAKE in "delayed_take.lua" {
        keys {
            bucket: &'a str => "<ns>:delayed:<ts>",
            schedule: String => "<ns>:delayed_queue_schedule",
            timestamps: String => "<ns>:timestamps:<item>",
            queues: String => "<ns>:queues",
            queue: String => "<ns>:queue:<q>",
        }
        argv {
            item: &'a [u8] => "the item's bytes",
            ts: i64 => "<ts>",
            member: String => "\"delayed:<ts>\"",
            queue_name: &'a str => "queue name, or \"\"",
            payload: &'a str => "the job to push",
        }
    }

    /// An enqueue (now, at the head, or delayed) under a unique lock.
    UniqueEnqueue<'a> = UNIQUE_ENQUEUE in "unique_enqueue.lua" {
        keys {
            lock: String => "<ns>:resq:unique:<key>",
            queues: String => "<ns>:queues",
            queue: String => "<ns>:queue:<q>",
            bucket: String => "<ns>:delayed:<ts>",
            timestamps: String => "<ns>:timestamps:<item>",
            schedule: String => "<ns>:delayed_queue_schedule",
        }
        argv {
            id: &'a str => "unique id",
            ttl_ms: u64 => "TTL in ms",
            mode: &'a str => "'rpush' | 'lpush' | 'delayed'",
            queue_name: &'a str => "queue name",
            payload: &'a str => "payload",
            ts: i64 => "due epoch seconds",
            member: String => "'delayed:<ts>'",
        }
    }

    /// Jesque's delayed and recurring enqueue and removal.
    JesqueEnqueue<'a> = JESQUE_ENQUEUE in "jesque_enqueue.lua" {
        keys {
            queue: String => "<ns>:queue:<q>",
            frequency: String => "<ns>:queue:<q>:frequency",
            queues: String => "<ns>:queues",
        }
        argv {
            mode: &'a str => "mode: 'delayed'",
            json: &'a str => "the job JSON",
            due_ms: i64 => "due time, epoch ms",
            queue_name: &'a str => "the queue name",
            period_ms: i64 => "frequency in ms",
        }
    }

    /// One failure entry retried, Ruby's way.
    FailedRetry<'a> = FAILED_RETRY in "failed_retry.lua" {
        keys {
            failed: String => "the failure list",
            queues: String => "<ns>:queues",
            queue: String => "<ns>:queue:<q>",
        }
        argv {
            index: usize => "index seen",
            seen: &'a [u8] => "entry bytes seen",
            entry: String => "entry with retried_at",
            queue_name: &'a str => "queue name",
            job: String => "the job to push",
            prefix: &'a str => "the namespace prefix '<ns>:'",
            tracked: &'a str => "the id of a job resq tracks",
            now_ms: i64 => "now in epoch ms",
        }
    }

    /// A failure entry marked retried after its job was pushed (a spread namespace's retry).
    FailedMark<'a> = FAILED_MARK in "failed_mark.lua" {
        keys {
            failed: String => "the failure list",
        }
        argv {
            index: usize => "index seen",
            seen: &'a [u8] => "entry bytes seen",
            entry: &'a str => "entry with retried_at",
        }
    }

    /// Failure entries removed, Ruby's way.
    FailedRemove<'a> = FAILED_REMOVE in "failed_remove.lua" {
        keys {
            failed: String => "the failure list",
        }
        argv {
            sentinel: &'a str => "the sentinel",
        }
        argv_tail seen: Vec<(usize, &'a [u8])> => ["index seen", "entry bytes seen"];
    }

    /// Several writes as one step, every key's type checked first.
    CheckedWrite<'a> = CHECKED_WRITE in "checked_write.lua" {
        keys {}
        keys_tail keys: &'a [String] => ["the keys written"];
        argv {
            n: usize => "the number of writes",
        }
        argv_tail writes: Writes<'a> => ["the command", "the index of its key in KEYS",
            "the number of arguments after the key", "those arguments"];
    }

    /// A tracked job enqueued with its record, now or delayed.
    JobEnqueue<'a> = JOB_ENQUEUE in "job_enqueue.lua" {
        keys {
            queues: String => "<ns>:queues",
            queue: String => "<ns>:queue:<q>",
            schedule: String => "<ns>:delayed_queue_schedule",
            bucket: String => "<ns>:delayed:<ts>",
            timestamps: String => "<ns>:timestamps:<item>",
        }
        argv {
            prefix: &'a str => "the namespace prefix '<ns>:'",
            id: &'a str => "the id",
            kind: &'a str => "kind 'r' | 's'",
            when: &'a str => "'now', 'delayed' or 'spread'",
            payload: String => "the payload ('now', 'spread') or the scheduler item ('delayed')",
            due_s: i64 => "the due time, epoch s",
            member: String => "'delayed:<ts>'",
            now_ms: i64 => "now in epoch ms",
            queue_name: &'a str => "the queue name",
            class: &'a str => "the class",
            job_key: &'a str => "the job key",
            status: String => "the status text",
            workflow: String => "the workflow",
        }
        argv_tail tags: &'a [String] => ["tags"];
    }

    /// A tracked job cancelled, or a running one asked to stop.
    JobCancel<'a> = JOB_CANCEL in "job_cancel.lua" {
        keys {
            kill: String => "<ns>:_kill",
        }
        argv {
            prefix: &'a str => "the namespace prefix '<ns>:'",
            id: &'a str => "the id",
            now_ms: i64 => "now in epoch ms",
            ttl_s: u64 => "seconds the cancelled record is kept",
            message: String => "resque-status's message for it",
            budget: String => "(optional) the",
        }
    }

    /// A running tracked job's progress.
    JobProgress<'a> = JOB_PROGRESS in "job_progress.lua" {
        keys {
            kill: String => "<ns>:_kill",
            record: String => "the record's key",
        }
        argv {
            id: &'a str => "the job id",
            kind: &'a str => "kind 'r' | 's'",
        }
        argv_tail fields: &'a [(String, String)] => ["field name", "JSON text"];
    }

    /// A claimed tracked job starts.
    JobStart<'a> = JOB_START in "job_start.lua" {
        keys {
            record: String => "the record's key",
        }
        argv {
            prefix: &'a str => "the namespace prefix '<ns>:'",
            kind: &'a str => "kind 'r' | 's'",
            id: &'a str => "the id",
            worker: &'a str => "the worker (slot) id",
            now_ms: i64 => "now in epoch ms",
            class: &'a str => "the class",
        }
    }

    /// Finished tracked jobs forgotten, a batch at a time.
    JobPurge<'a> = JOB_PURGE in "job_purge.lua" {
        keys {
            statuses: String => "<ns>:_statuses",
        }
        argv {
            prefix: &'a str => "the namespace prefix '<ns>:'",
            mode: &'a str => "mode 'state' | 'status' | 'expired'",
            word: String => "the final state S",
            cutoff_ms: i64 => "the cutoff, epoch ms",
            batch: u64 => "batch size",
            skip: u64 => "entries to pass over first",
            now_ms: i64 => "now in epoch ms",
        }
    }

    /// One chunk of a batch being created.
    BatchStage<'a> = BATCH_STAGE in "batch_stage.lua" {
        keys {
            batch: String => "<ns>:resq:batch:<bid>",
            jobs: String => "<ns>:resq:batch:<bid>:jobs",
            queues_staged: String => "<ns>:resq:batch:<bid>:queues",
            batches: String => "<ns>:resq:batches",
            queues: String => "<ns>:queues",
            parent: String => "<ns>:resq:batch:<parent>",
            parent_jobs: String => "<ns>:resq:batch:<parent>:jobs",
            unended: String => "<ns>:resq:unended",
        }
        keys_tail members_keys: Vec<String> => ["per member: its record <ns>:resq:job:<id>,",
            "<ns>:resq:batch:<bid>:staged:<q>, <ns>:queue:<q>", "then per queue of the whole batch"];
        argv {
            prefix: &'a str => "the namespace prefix '<ns>:'",
            bid: &'a str => "the batch id",
            now_ms: i64 => "now in epoch ms",
            header: &'a str => "'' for a later chunk",
            on_complete: &'a str => "the on_complete",
            on_success: &'a str => "the on_complete",
            on_death: &'a str => "the on_complete",
            n: usize => "n",
        }
        argv_tail members: Vec<(&'a str, &'a str, &'a str, String)> =>
            ["per member: id, queue, class, payload"];
    }

    /// A staged batch made visible.
    BatchCommit<'a> = BATCH_COMMIT in "batch_commit.lua" {
        keys {
            batch: String => "<ns>:resq:batch:<bid>",
            jobs: String => "<ns>:resq:batch:<bid>:jobs",
            queues_staged: String => "<ns>:resq:batch:<bid>:queues",
            queues: String => "<ns>:queues",
        }
        argv {
            prefix: &'a str => "the namespace prefix '<ns>:'",
            bid: &'a str => "the batch id",
            now_ms: i64 => "now in epoch ms",
        }
    }

    /// A batch whose creation stopped removed, a part per call.
    BatchDiscard<'a> = BATCH_DISCARD in "batch_discard.lua" {
        keys {
            batch: String => "<ns>:resq:batch:<bid>",
            jobs: String => "<ns>:resq:batch:<bid>:jobs",
            queues_staged: String => "<ns>:resq:batch:<bid>:queues",
            batches: String => "<ns>:resq:batches",
        }
        argv {
            prefix: &'a str => "the namespace prefix '<ns>:'",
            bid: &'a str => "the batch id",
            now_ms: i64 => "now in epoch ms",
            chunk: usize => "members removed per call at most",
        }
    }

    /// Held jobs back to their queues.
    LimitsRelease<'a> = LIMITS_RELEASE in "limits_release.lua" {
        keys {
            held_due: String => "<ns>:resq:held:due",
        }
        argv {
            prefix: &'a str => "the namespace prefix '<ns>:'",
            limits: &'a str => "the limits in force",
            now_ms: i64 => "now in epoch ms",
            budget: u32 => "most jobs to release in this call",
        }
        argv_tail gone: &'a [String] => ["names of limits no longer in force"];
    }

    /// Limits converging from where jobs are.
    LimitsSweep<'a> = LIMITS_SWEEP in "limits_sweep.lua" {
        keys {
            sharing: String => "<ns>:resq:sharing",
        }
        argv {
            prefix: &'a str => "the namespace prefix '<ns>:'",
            limits: &'a str => "the limits in force",
            now_ms: i64 => "now in epoch ms",
            budget: u32 => "most held jobs to put back in this call",
        }
        argv_tail moved: &'a [String] => ["limits whose definition this process has just seen change"];
    }

    /// An operator's change of a limit.
    LimitsSet<'a> = LIMITS_SET in "limits_set.lua" {
        keys {
            set: String => "<ns>:resq:limits:set",
            declared: String => "<ns>:resq:limits",
            rejudge: String => "<ns>:resq:limits:rejudge",
        }
        argv {
            prefix: &'a str => "the namespace prefix '<ns>:'",
            name: &'a str => "the limit's name",
            text: String => "its new override (JSON)",
            declaration: &'a str => "'1': remove its declaration too",
            rejudge_held: &'a str => "'1': re-judge its held jobs",
            budget: u32 => "most held jobs to put back in this call",
            now_ms: i64 => "now in epoch ms",
        }
    }

    /// A split queue's declaration changed (`resq split`).
    SplitSet<'a> = SPLIT_SET in "split_set.lua" {
        keys {
            splits: String => "<ns>:resq:splits",
        }
        argv {
            queue: &'a str => "the queue",
            set: &'a str => "'1': set its shards to ARGV[3]; '0': only drop what ARGV[4] names",
            shards: String => "its new shards (a JSON array of names; '[]' turns the split off)",
            empty: String => "draining shards the caller found empty (a JSON array of names)",
            changed: i64 => "the declaration's changed (epoch ms) when the caller found them empty",
            now_ms: i64 => "now (epoch ms)",
            grace_ms: i64 => "the grace period (ms)",
        }
    }

    /// A claimed payload becomes a failure entry.
    Promote<'a> = PROMOTE in "promote.lua" {
        keys {
            claim: String => "<ns>:resq:claim:<id>",
            claims: String => "<ns>:resq:claims",
            failed: String => "failure list",
            processed: String => "<ns>:stat:processed",
            processed_by: String => "<ns>:stat:processed:<id>",
            failed_count: String => "<ns>:stat:failed",
            failed_by: String => "<ns>:stat:failed:<id>",
        }
        argv {
            token: &'a str => "the claim's token",
            entry: &'a str => "the failure entry",
            count_failed: &'a str => "'1' when failures also count",
            worker: &'a str => "the worker id",
        }
    }

    /// A claimed payload back to the head of its queue.
    Unclaim<'a> = UNCLAIM in "unclaim.lua" {
        keys {
            claim: String => "<ns>:resq:claim:<id>",
            claims: String => "<ns>:resq:claims",
            queues: String => "<ns>:queues",
            queue: String => "<ns>:queue:<q>",
        }
        argv {
            token: &'a str => "the claim's token",
            worker: &'a str => "the worker id",
            queue_name: &'a str => "the queue name",
        }
    }

    /// A holder's share of a concurrency limit on a spread namespace: set to what it holds,
    /// plus what fits of what it wants.
    LimitShare<'a> = LIMIT_SHARE in "limit_share.lua" {
        keys {
            shares: String => "<ns>:resq:limit:<name>:shares",
        }
        argv {
            holder: &'a str => "the holder",
            have: usize => "units it holds now",
            want: usize => "units it wants more",
            capacity: u32 => "the limit's capacity",
        }
    }

    /// A claimed job's limits, decided at promote.
    LimitClaim<'a> = LIMIT_CLAIM in "limit_claim.lua" {
        keys {
            claim: String => "<ns>:resq:claim:<id>",
            claims: String => "<ns>:resq:claims",
        }
        argv {
            prefix: &'a str => "the namespace prefix '<ns>:'",
            limits: &'a str => "the limits in force",
            view: String => "a small view of the payload",
            queue_name: &'a str => "the queue",
            worker: &'a str => "the worker (slot) id",
            now_ms: i64 => "now in epoch ms",
            token: &'a str => "the claim's token",
            sequence: String => "a sequence unique to this call",
        }
    }

    /// A slot's job finished, failed or retried with more than a step's completion carries
    /// (a retry through the delayed set, resque-retry's counter, a unique job's lock). Keys a
    /// call does not use are the slot's record key.
    Complete<'a> = COMPLETE in "complete.lua" {
        keys {
            worker: String => "<ns>:worker:<id>",
            processed: String => "<ns>:stat:processed",
            processed_by: String => "<ns>:stat:processed:<id>",
            failed_count: String => "<ns>:stat:failed",
            failed_by: String => "<ns>:stat:failed:<id>",
            failed: String => "<ns>:failed",
            retry_counter: String => "resque-retry counter",
            retry_failure: String => "<ns>:failure-<retry key>",
            unique: String => "<ns>:resq:unique:<key>",
            queues: String => "<ns>:queues",
            retry_queue: String => "<ns>:queue:<retry q>",
            bucket: String => "<ns>:delayed:<ts>",
            timestamps: String => "<ns>:timestamps:<item>",
            schedule: String => "<ns>:delayed_queue_schedule",
            token: String => "<ns>:resq:token:<id>",
        }
        argv {
            ident: &'a [u8] => "the record (exact bytes), or the token of a claimed job",
            outcome: &'static str => "outcome: 'failure' | 'retry'",
            entry: String => "failure entry",
            count_failed: &'static str => "'1' when failures also count as processed",
            counter_seen: String => "the counter value the caller read",
            counter_new: String => "the counter's new value ('retry')",
            clear_counter: &'static str => "'1' to delete the counter and KEYS[8]",
            unique_id: String => "the unique id to release",
            retry_mode: &'static str => "'now' (push ARGV[11] on KEYS[11]) or 'delayed'",
            retry_queue_name: String => "retry queue name",
            retry_payload: String => "retry payload or delayed item",
            due_s: i64 => "due epoch s",
            member: String => "'delayed:<ts>'",
            failure_ttl_s: u64 => "KEYS[8] TTL in s",
            counter_ttl_s: u64 => "counter TTL in s",
            delay_ms: u64 => "retry delay in ms",
            mode: &'static str => "'r' when ARGV[1] is the record, 't' when it is the claimed job's token",
            prefix: &'a str => "the namespace prefix '<ns>:'",
            ending: String => "a tracked job's ending",
            now_ms: i64 => "now in epoch ms",
            limits: &'a str => "the limits in force",
            limited: &'static str => "'1' when the job was reserved under limits",
            sweep_ms: u64 => "how long finished jobs stay listed",
        }
    }

    /// A dead worker id unregistered, Ruby's way, with the job it was running recorded.
    Prune<'a> = PRUNE in "prune.lua" {
        keys {
            workers: String => "<ns>:workers",
            worker: String => "<ns>:worker:<id>",
            started: String => "<ns>:worker:<id>:started",
            heartbeats: String => "<ns>:workers:heartbeat",
            processed_by: String => "<ns>:stat:processed:<id>",
            failed_by: String => "<ns>:stat:failed:<id>",
            failed: String => "failure list (<ns>:failed)",
            queue: String => "<ns>:queue:<q> of the job",
            queues: String => "<ns>:queues",
            token: String => "<ns>:resq:token:<id>",
        }
        argv {
            id: &'a str => "the worker id",
            heartbeat: &'a str => "the heartbeat value judged",
            record: &'a [u8] => "the worker record judged",
            mode: &'static str => "\"fail\" (push ARGV[5]) or \"requeue\"",
            entry: String => "the failure entry JSON",
            payload: String => "the job's payload bytes",
            queue_name: &'a str => "the queue name",
            prefix: &'a str => "the namespace prefix '<ns>:'",
            ending: String => "the job's tracked ending",
            now_ms: i64 => "now, epoch ms",
            limits: &'a str => "the limits in force",
        }
    }

    /// A dead worker's job put back and its keys of its record's slot removed, while the
    /// record is the one judged (a spread namespace's prune).
    PruneSlot<'a> = PRUNE_SLOT in "prune_slot.lua" {
        keys {
            worker: String => "<ns>:worker:<id>",
            queue: String => "<ns>:queue:<q> to put the job back on",
        }
        keys_tail others: Vec<String> => ["the id's other keys in this slot"];
        argv {
            record: &'a [u8] => "the worker record judged",
            mode: &'static str => "\"requeue\"",
            payload: &'a str => "the job's payload bytes",
            track: String => "the job's tracked ending",
            prefix: &'a str => "the namespace prefix",
            now_ms: i64 => "now, epoch ms",
        }
    }

    /// Workflow bookkeeping that earlier calls left, finished (a prune round's).
    FlowSettle<'a> = FLOW_SETTLE in "flow_settle.lua" {
        keys {
            unsettled: String => "<ns>:resq:unsettled",
        }
        argv {
            prefix: &'a str => "the namespace prefix '<ns>:'",
            now_ms: i64 => "now in epoch ms",
            most: u64 => "most jobs to settle",
            ttl_s: u64 => "seconds a job cancelled here is kept",
            budget: String => "(optional) the",
        }
    }

    /// Runs someone else ended, ended (a prune round's page of running jobs).
    JobLost<'a> = JOB_LOST in "job_lost.lua" {
        keys {
            runs: String => "<ns>:resq:runs",
            workers: String => "<ns>:workers",
            running: String => "<ns>:resq:running",
        }
        argv {
            prefix: &'a str => "the namespace prefix '<ns>:'",
            now_ms: i64 => "now in epoch ms",
            ttl_s: u64 => "seconds a finished",
            from: u64 => "the cursor to go on from",
            most: u64 => "about how many entries to look at",
            spread: &'static str => "'spread' on a spread namespace",
        }
    }

    /// Queued jobs someone else took, ended (a prune round's look at unended jobs).
    JobTaken<'a> = JOB_TAKEN in "job_taken.lua" {
        keys {
            unended: String => "<ns>:resq:unended",
            workers: String => "<ns>:workers",
            failed: String => "<ns>:failed",
            claims: String => "<ns>:resq:claims",
            missed: String => "<ns>:resq:missed",
        }
        argv {
            prefix: &'a str => "the namespace prefix '<ns>:'",
            now_ms: i64 => "now in epoch ms",
            ttl_s: u64 => "seconds a finished",
            cutoff_ms: i64 => "cutoff: entries scored at or before it (ms)",
            most: u64 => "most entries looked at",
            scan: u64 => "most place entries read",
            limits: &'a str => "the limits in force",
            grace_ms: u64 => "grace (ms) between",
            spread: &'static str => "'spread' on a spread namespace",
            here: String => "(spread) the queues of this slot",
            foreign: String => "(spread) the ids of the jobs",
        }
    }

    /// An interrupted job back to the head of its queue.
    Requeue<'a> = REQUEUE in "requeue.lua" {
        keys {
            worker: String => "<ns>:worker:<id>",
            queue: String => "<ns>:queue:<q>",
            queues: String => "<ns>:queues",
        }
        argv {
            record: &'a [u8] => "the record (exact bytes)",
            payload: &'a str => "the job's payload bytes",
            queue_name: &'a str => "the queue name",
            prefix: &'a str => "the namespace prefix '<ns>:'",
            ending: String => "the job's tracked ending back to queued",
            now_ms: i64 => "now, epoch ms",
            limits: &'a str => "the limits in force",
            limited: &'a str => "'1' when the job was",
        }
    }
}

#[cfg(test)]
builders! {
    TEST_SPECS;

    /// The library's verdict on one payload (the payload corpus test).
    PayloadJudge<'a> = PAYLOAD_JUDGE in "payload_judge.lua" {
        keys {}
        argv {
            payload: &'a [u8] => "the payload's bytes",
            small: usize => "bytes checked here at most",
            chars: usize => "non-ASCII characters checked here at most",
            max: usize => "the largest payload",
        }
    }
}
