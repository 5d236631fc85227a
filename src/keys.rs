//! Every Redis key resq reads or writes, built from the namespace.
//!
//! Nothing else in the crate formats a key: a key name that appears anywhere else is a bug.
//! Names follow Ruby Resque (`<ns>:` + logical key, the namespace used verbatim even when it
//! contains colons), resque-scheduler (whose master lock embeds the namespace twice) and
//! Jesque (zset queues, `:frequency` hashes).

#[path = "keys/slots.rs"]
#[allow(dead_code)] // (tests/support includes this file without the callers)
mod slots;

#[allow(unused_imports)]
pub(crate) use slots::{hash_slot, slot_tag, SLOTS};

/// Builds key names for one namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Keys {
    /// The namespace followed by `:`, or empty for an empty namespace (Jesque's rule).
    prefix: String,
    /// The namespace as given.
    namespace: String,
    /// Whether the keys are spread over a Redis Cluster's slots (a cluster namespace without a
    /// hash tag): each queue's keys in the queue's slot, the shared keys each in its own.
    spread: bool,
}

impl Keys {
    /// Keys for `namespace` (`resque` by default in every peer).
    pub(crate) fn new(namespace: impl Into<String>) -> Self {
        let namespace = namespace.into();
        let prefix = if namespace.is_empty() {
            String::new()
        } else {
            format!("{namespace}:")
        };
        Keys {
            prefix,
            namespace,
            spread: false,
        }
    }

    /// The same keys, spread over a Redis Cluster's slots (see `docs/cluster.md`): nothing that
    /// writes or reads several keys at once may then mix keys of different slots.
    pub(crate) fn spread(mut self) -> Self {
        self.spread = true;
        self
    }

    /// Whether the keys are spread over a cluster's slots ([`Keys::spread`]).
    pub(crate) fn is_spread(&self) -> bool {
        self.spread
    }

    /// The hash tag that puts keys in the slot of queue `name`'s list (`<ns>:queue:<name>`):
    /// what a slot serving that queue carries in its worker id on a spread namespace.
    pub(crate) fn queue_tag(&self, name: &str) -> &'static str {
        slot_tag(hash_slot(self.queue(name).as_bytes()))
    }

    /// The namespace as given.
    pub(crate) fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The prefix every key starts with (`<ns>:`).
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    fn key(&self, logical: &str) -> String {
        format!("{}{logical}", self.prefix)
    }

    /// `<ns>:queues` — SET of queue names.
    pub(crate) fn queues(&self) -> String {
        self.key("queues")
    }

    /// `<ns>:queue:<name>` — LIST of payloads (or a Jesque ZSET of delayed ones).
    pub(crate) fn queue(&self, name: &str) -> String {
        format!("{}queue:{name}", self.prefix)
    }

    /// `<ns>:queue:<name>:frequency` — Jesque's recurring-job periods.
    pub(crate) fn queue_frequency(&self, name: &str) -> String {
        format!("{}queue:{name}:frequency", self.prefix)
    }

    /// `<ns>:workers` — SET of registered worker ids.
    pub(crate) fn workers(&self) -> String {
        self.key("workers")
    }

    /// `<ns>:worker:<id>` — the job a worker is running (absent when idle).
    pub(crate) fn worker(&self, id: &str) -> String {
        format!("{}worker:{id}", self.prefix)
    }

    /// `<ns>:worker:<id>:started` — when the worker registered.
    pub(crate) fn worker_started(&self, id: &str) -> String {
        format!("{}worker:{id}:started", self.prefix)
    }

    /// `<ns>:worker:ping:<name>` — node-resque's liveness ping (`name` = id without queues).
    pub(crate) fn worker_ping(&self, name: &str) -> String {
        format!("{}worker:ping:{name}", self.prefix)
    }

    /// `<ns>:workers:heartbeat` — HASH worker id → last heartbeat.
    pub(crate) fn heartbeats(&self) -> String {
        self.key("workers:heartbeat")
    }

    /// `<ns>:stat:processed` — global processed counter.
    pub(crate) fn stat_processed(&self) -> String {
        self.key("stat:processed")
    }

    /// `<ns>:stat:failed` — global failed counter.
    pub(crate) fn stat_failed(&self) -> String {
        self.key("stat:failed")
    }

    /// `<ns>:stat:processed:<id>` — one worker's processed counter.
    pub(crate) fn stat_processed_by(&self, id: &str) -> String {
        format!("{}stat:processed:{id}", self.prefix)
    }

    /// `<ns>:stat:failed:<id>` — one worker's failed counter.
    pub(crate) fn stat_failed_by(&self, id: &str) -> String {
        format!("{}stat:failed:{id}", self.prefix)
    }

    /// `<ns>:stat:<name>` — any stat counter (`processed`, `failed`, or per worker).
    #[allow(dead_code)] // read by the tests and the compat examples only
    pub(crate) fn stat(&self, name: &str) -> String {
        format!("{}stat:{name}", self.prefix)
    }

    /// `<ns>:failed` — LIST of failure entries (Resque's default backend).
    pub(crate) fn failed(&self) -> String {
        self.key("failed")
    }

    /// `<ns>:<queue>_failed` — a `redis_multi_queue` failure list.
    #[allow(dead_code)] // read by the tests and the compat examples only
    pub(crate) fn failed_for_queue(&self, queue: &str) -> String {
        format!("{}{queue}_failed", self.prefix)
    }

    /// `<ns>:failed_queues` — SET of `redis_multi_queue` failure list names.
    #[allow(dead_code)] // read by the tests and the compat examples only
    pub(crate) fn failed_queues(&self) -> String {
        self.key("failed_queues")
    }

    /// `<ns>:pause-all-workers` — `true` pauses every worker.
    pub(crate) fn pause_all_workers(&self) -> String {
        self.key("pause-all-workers")
    }

    /// `<ns>:pruning_dead_workers_in_progress` — Ruby's prune lock.
    pub(crate) fn pruning_lock(&self) -> String {
        self.key("pruning_dead_workers_in_progress")
    }

    /// `<ns>:delayed_queue_schedule` — resque-scheduler's ZSET of due timestamps.
    pub(crate) fn delayed_schedule(&self) -> String {
        self.key("delayed_queue_schedule")
    }

    /// `<ns>:delayed:<ts>` — resque-scheduler's bucket of items due at `ts` (seconds).
    pub(crate) fn delayed_bucket(&self, ts: i64) -> String {
        format!("{}delayed:{ts}", self.prefix)
    }

    /// `delayed:<ts>` unprefixed, the member stored in `timestamps:<item>` sets.
    pub(crate) fn delayed_bucket_member(ts: i64) -> String {
        format!("delayed:{ts}")
    }

    /// `<ns>:timestamps:<item>` — resque-scheduler's reverse index of an item.
    pub(crate) fn timestamps(&self, item: &str) -> String {
        format!("{}timestamps:{item}", self.prefix)
    }

    /// `<ns>:delayed:last_enqueued_at` — last firing of each recurring schedule.
    pub(crate) fn last_enqueued_at(&self) -> String {
        self.key("delayed:last_enqueued_at")
    }

    /// `<ns>:persistent_schedules` — resque-scheduler's dynamic schedules.
    pub(crate) fn persistent_schedules(&self) -> String {
        self.key("persistent_schedules")
    }

    /// `<ns>:schedules_changed` — names of schedules changed since the last load.
    pub(crate) fn schedules_changed(&self) -> String {
        self.key("schedules_changed")
    }

    /// `<ns>:<ns>:resque_scheduler_master_lock` — the namespace twice, as resque-scheduler
    /// builds it through redis-namespace.
    pub(crate) fn scheduler_master_lock(&self) -> String {
        format!(
            "{}{}:resque_scheduler_master_lock",
            self.prefix, self.namespace
        )
    }

    /// The master lock with resque-scheduler's `RESQUE_SCHEDULER_MASTER_LOCK_PREFIX`:
    /// `<ns>:<ns>:<prefix>:resque_scheduler_master_lock` (no prefix part when it is empty).
    pub(crate) fn scheduler_master_lock_prefixed(&self, prefix: &str) -> String {
        if prefix.is_empty() {
            return self.scheduler_master_lock();
        }
        format!(
            "{}{}:{prefix}:resque_scheduler_master_lock",
            self.prefix, self.namespace
        )
    }

    /// `<ns>:resq:schedule_next` — HASH schedule name → `<next due epoch s> <spec digest>`:
    /// resq's per-schedule fire token for recurring schedules.
    pub(crate) fn schedule_next(&self) -> String {
        self.key("resq:schedule_next")
    }

    /// `<ns>:resq:unique:<key>` — the lock of a unique job (value: the job's unique id).
    pub(crate) fn unique(&self, key: &str) -> String {
        format!("{}resq:unique:{key}", self.prefix)
    }

    /// `resque-retry:<class>[:<digest>]`, whitespace removed — resque-retry's logical retry
    /// key (`redis_retry_key`), unprefixed.
    pub(crate) fn resque_retry_logical(class: &str, digest: Option<&str>) -> String {
        let mut k = format!("resque-retry:{class}");
        if let Some(d) = digest {
            k.push(':');
            k.push_str(d);
        }
        k.retain(|c| !c.is_whitespace());
        k
    }

    /// `<ns>:resque-retry:<class>:<digest>` — resque-retry's attempt counter.
    pub(crate) fn retry_attempts(&self, logical: &str) -> String {
        format!("{}{logical}", self.prefix)
    }

    /// `<ns>:failure-resque-retry:<class>:<digest>` — resque-retry's details of the last failed
    /// attempt (what its web tab shows while a retry waits).
    pub(crate) fn retry_failure(&self, logical: &str) -> String {
        format!("{}failure-{logical}", self.prefix)
    }

    /// `<ns>:inflight:<worker>:<queue>` — Jesque's in-flight list.
    #[allow(dead_code)] // read by the tests and the compat examples only
    pub(crate) fn jesque_inflight(&self, worker: &str, queue: &str) -> String {
        format!("{}inflight:{worker}:{queue}", self.prefix)
    }

    /// `<ns>:resq:claims` — SET of worker ids holding a claimed payload (pruning finds the
    /// claims of workers that are gone through it).
    pub(crate) fn claims(&self) -> String {
        self.key("resq:claims")
    }

    /// `<ns>:resq:claim:<id>` — a payload the step script claimed for slot `id` to check
    /// (`<token> <queue as JSON>\n<payload bytes>`), until it is promoted or put back.
    pub(crate) fn claim(&self, id: &str) -> String {
        format!("{}resq:claim:{id}", self.prefix)
    }

    /// `<ns>:resq:token:<id>` — the token of the claimed job whose record slot `id` holds.
    pub(crate) fn claim_token(&self, id: &str) -> String {
        format!("{}resq:token:{id}", self.prefix)
    }

    /// `<ns>:resq:outbox:<id>` — LIST of failure entries slot `id`'s steps wrote on a spread
    /// namespace (in the slot's hash slot), on their way to `<ns>:failed`.
    pub(crate) fn outbox(&self, id: &str) -> String {
        format!("{}resq:outbox:{id}", self.prefix)
    }

    /// `<ns>:resq:outboxes` — SET of the spread slot ids whose outbox ([`Keys::outbox`]) may
    /// hold entries: added when a slot registers, removed once it is unregistered or pruned
    /// with its outbox moved. The prune round moves the outbox of a member whose heartbeat
    /// field is gone (an id someone else unregistered: Ruby's pruning, resque-web).
    pub(crate) fn outboxes(&self) -> String {
        format!("{}resq:outboxes", self.prefix)
    }

    /// `<ns>:compat:echo` — where the compat worker's `Echo` handler writes.
    #[allow(dead_code)] // read by the tests and the compat examples only
    pub(crate) fn compat_echo(&self) -> String {
        self.key("compat:echo")
    }

    /// `<ns>:resq:history:m:<epoch minute>` — resq's throughput sample for that minute:
    /// `"<unix ms> <stat:processed> <stat:failed>"`, written once (`SET NX`), kept about 2 days.
    /// On a spread namespace `<ns>:resq:history:{<tag>}:m:<epoch minute>`, every sample in one
    /// slot ([`Keys::history_tag`]) so a graph's samples are still read in one `MGET`.
    pub(crate) fn history_minute(&self, epoch_minute: i64) -> String {
        format!(
            "{}resq:history:{}m:{epoch_minute}",
            self.prefix,
            self.history_tag()
        )
    }

    /// `<ns>:resq:history:h:<epoch hour>` — the same sample, once per hour, kept about 90 days
    /// (`<ns>:resq:history:{<tag>}:h:<epoch hour>` on a spread namespace).
    pub(crate) fn history_hour(&self, epoch_hour: i64) -> String {
        format!(
            "{}resq:history:{}h:{epoch_hour}",
            self.prefix,
            self.history_tag()
        )
    }

    /// Nothing, or on a spread namespace `{<tag>}:` with the tag of the slot of
    /// `<ns>:resq:history` ([`slot_tag`]): what keeps the history samples in one slot.
    fn history_tag(&self) -> String {
        if !self.spread {
            return String::new();
        }
        let slot = hash_slot(self.key("resq:history").as_bytes());
        format!("{{{}}}:", slot_tag(slot))
    }

    /// `<ns>:_statuses` — resque-status's ZSET of status uuids, scored by creation (epoch s).
    pub(crate) fn resque_statuses(&self) -> String {
        self.key("_statuses")
    }

    /// `<ns>:status:<uuid>` — resque-status's JSON status of one job.
    pub(crate) fn resque_status(&self, uuid: &str) -> String {
        format!("{}status:{uuid}", self.prefix)
    }

    /// `<ns>:_kill` — resque-status's SET of uuids asked to stop.
    pub(crate) fn resque_status_kill(&self) -> String {
        self.key("_kill")
    }

    /// `<ns>:resq:job:<id>` — resq's own record of a tracked job: a HASH the library writes
    /// field by field (record.lua).
    pub(crate) fn job_record(&self, id: &str) -> String {
        format!("{}resq:job:{id}", self.prefix)
    }

    /// `<ns>:resq:jobs:<state>` — resq's own tracked jobs of a final state (completed, failed,
    /// killed, cancelled) by when they finished (epoch ms); the library builds this name from
    /// the prefix (record.lua).
    pub(crate) fn job_state(&self, state: &str) -> String {
        format!("{}resq:jobs:{state}", self.prefix)
    }

    /// `<index>{<tag>}` — one hash slot's part of a tracked jobs' index on a spread namespace
    /// (docs/cluster.md): a tracked job's id there is `<32 hex>{<tag>}`, its queue's slot tag
    /// ([`Keys::queue_tag`]), and the indexes its record moves in are that slot's:
    /// [`Keys::runs`], [`Keys::unended`], [`Keys::missed`], [`Keys::job_state`] (every state,
    /// `waiting` included), [`Keys::job_tag`] and [`Keys::job_tags`], each followed by the tag
    /// (the scripts build the same names: record.lua's `Rec.slot`). `tag` `None`: the index
    /// itself (one server, a hash-tagged namespace, an id of 32 hex).
    pub(crate) fn in_slot(index: String, tag: Option<&str>) -> String {
        match tag {
            Some(t) => format!("{index}{{{t}}}"),
            None => index,
        }
    }

    /// `<ns>:resq:batch:<bid>` — a batch: HASH of its counts, times and callbacks
    /// (workflow.lua).
    pub(crate) fn batch(&self, bid: &str) -> String {
        format!("{}resq:batch:{bid}", self.prefix)
    }

    /// `<ns>:resq:batch:<bid>:jobs` — a batch's member job ids (`@<bid>` for a child batch).
    pub(crate) fn batch_jobs(&self, bid: &str) -> String {
        format!("{}resq:batch:{bid}:jobs", self.prefix)
    }

    /// `<ns>:resq:batch:<bid>:queues` — the queues of a batch being created that hold staged
    /// payloads (`<bid>:staged:<queue>`, lists no worker polls until the commit).
    pub(crate) fn batch_queues(&self, bid: &str) -> String {
        format!("{}resq:batch:{bid}:queues", self.prefix)
    }

    /// `<ns>:resq:batch:<bid>:staged:<queue>` — a batch being created: its members' payloads for
    /// `queue`, in the order staged (moved to the queue by the commit).
    pub(crate) fn batch_staged(&self, bid: &str, queue: &str) -> String {
        format!("{}resq:batch:{bid}:staged:{queue}", self.prefix)
    }

    /// `<ns>:resq:batches` — batch ids by creation (epoch ms).
    pub(crate) fn batches(&self) -> String {
        format!("{}resq:batches", self.prefix)
    }

    /// `<ns>:resq:waiters:<id>` — the jobs waiting for job `id` to end.
    pub(crate) fn job_waiters(&self, id: &str) -> String {
        format!("{}resq:waiters:{id}", self.prefix)
    }

    /// `<ns>:resq:unsettled` — jobs whose workflow bookkeeping one call could not finish (ends
    /// past a cascade's bound, waiting jobs their queue refused), by when (epoch ms); the prune
    /// round settles them (`flow_settle.lua`).
    pub(crate) fn unsettled(&self) -> String {
        format!("{}resq:unsettled", self.prefix)
    }

    /// `<ns>:resq:runs` — the set of ids of the tracked jobs whose record says working: the
    /// prune round ends those whose worker is gone (`job_lost.lua`).
    pub(crate) fn runs(&self) -> String {
        format!("{}resq:runs", self.prefix)
    }

    /// `<ns>:resq:running` — the same ids as [`Keys::runs`] in a zset by start time (epoch ms),
    /// as builds up to `e305657` kept them; the prune round moves what is left in it to the set.
    pub(crate) fn running(&self) -> String {
        format!("{}resq:running", self.prefix)
    }

    /// `<ns>:resq:unended` — ids of the tracked jobs that have not ended, by when they were
    /// entered or last looked at (epoch ms): each prune round looks at those entered before it
    /// began and ends the queued ones whose payload is nowhere a job can be — taken by a worker resq does not see (`job_taken.lua`).
    pub(crate) fn unended(&self) -> String {
        format!("{}resq:unended", self.prefix)
    }

    /// `<ns>:resq:missed` — ids of queued tracked jobs a prune round's look found nowhere, by
    /// when (epoch ms): a later look that still finds one nowhere ends it (`job_taken.lua`).
    pub(crate) fn missed(&self) -> String {
        format!("{}resq:missed", self.prefix)
    }

    /// `<ns>:resq:children:<id>` — job `id`'s children.
    pub(crate) fn job_children(&self, id: &str) -> String {
        format!("{}resq:children:{id}", self.prefix)
    }

    /// `<ns>:resq:tag:<tag>` — tracked job ids carrying a tag, by creation (epoch ms).
    pub(crate) fn job_tag(&self, tag: &str) -> String {
        format!("{}resq:tag:{tag}", self.prefix)
    }

    /// `<ns>:resq:tags` — the tags jobs were enqueued with (SET): where `jobs purge` looks for
    /// tag entries whose record expired.
    #[allow(dead_code)] // read by the tests and the compat examples only
    pub(crate) fn job_tags(&self) -> String {
        format!("{}resq:tags", self.prefix)
    }

    /// `<ns>:resq:limits` — limits declared by workers: HASH name → JSON definition.
    pub(crate) fn limits_declared(&self) -> String {
        format!("{}resq:limits", self.prefix)
    }

    /// `<ns>:resq:limits:set` — operators' overrides (`resq limits set`): HASH name → JSON.
    pub(crate) fn limits_set(&self) -> String {
        format!("{}resq:limits:set", self.prefix)
    }

    /// `<ns>:resq:limits:rejudge` — HASH limit name → where the walk putting back its held
    /// jobs is, while a change of what it holds is being applied (limits_rejudge.lua).
    pub(crate) fn limits_rejudge(&self) -> String {
        format!("{}resq:limits:rejudge", self.prefix)
    }

    /// `<ns>:resq:limits:sweep` — HASH limit name → where the walk forgetting its idle
    /// partitions is (limits_derive.lua).
    #[allow(dead_code)] // read by the tests and the compat examples only
    pub(crate) fn limits_sweep(&self) -> String {
        format!("{}resq:limits:sweep", self.prefix)
    }

    /// `<ns>:resq:splits` — HASH queue → its split's declaration (JSON
    /// `{"shards":[…],"draining":[…],"changed":<epoch ms>}`, crate::splits).
    pub(crate) fn splits(&self) -> String {
        format!("{}resq:splits", self.prefix)
    }

    /// `<ns>:resq:paused_queues` — queues no resq process takes jobs from (`resq pause
    /// --queue`).
    pub(crate) fn paused_queues(&self) -> String {
        format!("{}resq:paused_queues", self.prefix)
    }

    /// `<ns>:resq:limit:<name>[:<partition>]` — the base of one limit's keys (`:holders`, a
    /// HASH slot id → units; `:held`, the ZSET of held jobs; `:rate…`, starts). The scripts
    /// build these names from the prefix (limits.lua).
    pub(crate) fn limit_base(&self, name: &str, partition: Option<&str>) -> String {
        match partition {
            Some(p) => format!("{}resq:limit:{name}:{p}", self.prefix),
            None => format!("{}resq:limit:{name}", self.prefix),
        }
    }

    /// `<limit base>:holders` — HASH `__units` → the units the slots hold in the limit: the
    /// total of the slots' shares in [`Keys::sharing`], derived from them when absent.
    pub(crate) fn limit_holders(&self, name: &str, partition: Option<&str>) -> String {
        format!("{}:holders", self.limit_base(name, partition))
    }

    /// `<limit base>:held` — ZSET of the jobs a limit holds.
    pub(crate) fn limit_held(&self, name: &str, partition: Option<&str>) -> String {
        format!("{}:held", self.limit_base(name, partition))
    }

    /// `<limit base>:rate` — a sliding-window rate limit's ZSET of starts (ms).
    pub(crate) fn limit_rate(&self, name: &str, partition: Option<&str>) -> String {
        format!("{}:rate", self.limit_base(name, partition))
    }

    /// `<limit base>:rate:<n>` — a fixed-window rate limit's count of starts in window `n`
    /// (the epoch milliseconds divided by the interval).
    pub(crate) fn limit_rate_window(&self, name: &str, partition: Option<&str>, n: i64) -> String {
        format!("{}:rate:{n}", self.limit_base(name, partition))
    }

    /// `<ns>:resq:limit:<name>:shares` — on a spread namespace, HASH holder (a worker group's
    /// first slot id) → the units of concurrency limit `name` its jobs hold
    /// (`limit_share.lua`, crate::limits::spread); in the limit's own slot.
    pub(crate) fn limit_shares(&self, name: &str) -> String {
        format!("{}resq:limit:{name}:shares", self.prefix)
    }

    /// `<ns>:resq:limit:<name>:parts` — the partitions of a keyed limit in use.
    pub(crate) fn limit_parts(&self, name: &str) -> String {
        format!("{}resq:limit:{name}:parts", self.prefix)
    }

    /// `<ns>:resq:sharing` — HASH worker (slot) id → the limit shares it holds, one
    /// `<units> <length>:<holders key>` after another (limits.lua). A completion looks for its
    /// slot's shares only while the hash exists.
    pub(crate) fn sharing(&self) -> String {
        format!("{}resq:sharing", self.prefix)
    }

    /// `<ns>:resq:wake` — written when every resq process should look at its queues again (a
    /// limit closing a whole queue opened); watched through invalidation tracking.
    pub(crate) fn wake(&self) -> String {
        format!("{}resq:wake", self.prefix)
    }

    /// `<ns>:resq:held:due` — held sets by when their next job may be released (ms).
    pub(crate) fn held_due(&self) -> String {
        format!("{}resq:held:due", self.prefix)
    }

    /// `<ns>:resq:held:sets` — ZSET (every score 0, so ordered by name) of the limits' held
    /// sets that hold jobs: a set enters when a job is held in it and leaves when it is
    /// emptied, in the same call (limits_held.lua); the limits sweep mends it. Listings and
    /// counts read only these sets, never every partition.
    pub(crate) fn held_sets(&self) -> String {
        format!("{}resq:held:sets", self.prefix)
    }

    /// `<ns>:resq:jobkey:<key>` — the id of the live tracked job enqueued under a job key.
    #[allow(dead_code)] // read by the tests and the compat examples only
    pub(crate) fn job_key(&self, key: &str) -> String {
        format!("{}resq:jobkey:{key}", self.prefix)
    }
}

/// Keys of Ruby plugins that resq recognises but whose behaviour it does not reproduce, each as
/// `(plugin, the prefix of its keys after the namespace, what to use in resq instead)`; the
/// migration report (`resq coverage`) names the ones a namespace holds (each prefix as the
/// plugin's own `lib/` code builds its keys).
#[cfg_attr(not(any(feature = "cli", feature = "web")), allow(dead_code))]
pub(crate) const FOREIGN_PLUGIN_KEYS: &[(&str, &str, &str)] = &[
    (
        "resque-concurrent-restriction",
        "concurrent.",
        "a concurrency limit (docs/limits.md)",
    ),
    (
        "resque-restriction",
        "restriction:",
        "a concurrency or rate limit (docs/limits.md)",
    ),
    (
        "resque-lonely_job",
        "lonely_job:",
        "a concurrency limit of 1 on the queue (docs/limits.md)",
    ),
    (
        "resque-queue-lock",
        "queuelock:",
        "unique jobs or job keys (docs/jobs.md)",
    ),
    (
        "resque-loner",
        "loners:",
        "unique jobs or job keys (docs/jobs.md)",
    ),
    (
        "resque-throttler",
        "throttler:",
        "a rate limit on the queue (docs/limits.md)",
    ),
    (
        "resque-pause",
        "pause:queue:",
        "`resq pause --queue` (resq workers read <ns>:resq:paused_queues)",
    ),
    (
        "resque-batched-job",
        "batch:",
        "a batch with callbacks (docs/workflows.md)",
    ),
];
