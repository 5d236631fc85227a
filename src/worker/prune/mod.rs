//! Pruning dead workers: Ruby Resque's `prune_dead_workers`, done by resq, never more eagerly
//! than a Ruby worker would do it.
//!
//! Each round (at start, before registering, and every [`PERIOD`]):
//!
//! 1. takes Ruby's lock, `SET <ns>:pruning_dead_workers_in_progress <id> EX 60 NX`; when
//!    someone (Ruby or resq) holds it, the round is skipped, as Ruby skips it;
//! 2. **expired heartbeats** (Ruby's loop 1): every field of `<ns>:workers:heartbeat` whose
//!    value is more than `prune_after` (Ruby's `prune_interval`, 300 s) older than Redis `TIME`
//!    by Ruby's arithmetic (`(now - Time.parse(hb)).to_i > 300`) is unregistered; its running
//!    job becomes a `Resque::PruneDeadWorkerDirtyExit` failure with Ruby's exact text;
//! 3. **dead local resq processes** (resq's narrow form of Ruby's loop 2): a registered id
//!    whose host field is this process's own `<host>~resq` (with any `{tag}`: a spread
//!    namespace's slot ids carry their queue's) and whose pid is not alive on this machine is
//!    unregistered; its job becomes a `Resque::DirtyExit` "Job still being
//!    processed" failure, as Ruby's loop 2 writes. Ruby's loop 2 never matches a `~resq` id
//!    (its host field never equals a `gethostname`), and resq applies it to nothing else: no
//!    Ruby, Jesque, node-resque or goworker id is ever removed by a pid check.
//!
//! With `at_least_once`, the job goes back to the head of its queue (exact bytes, `LPUSH`)
//! instead of becoming a failure. Either way the unregistration and the job's fate are one
//! atomic script (`prune.lua`) that applies only while the heartbeat and the record are still
//! what the round judged by — except on a spread cluster namespace, where the id's keys are in
//! several slots: there the job's shared writes come first and the record's slot is one atomic
//! step of its own ([`spread`]); the round then moves the outboxes of slots someone else
//! unregistered (`spread::sweep_outboxes`), and its other steps (claims, limits, tracked
//! jobs, workflows: features refused on such a namespace) are not made there.
//!
//! What resq refuses to prune, where Ruby's pruner would raise and abort (wire notes §3.3
//! step 7): ids that do not split into three fields with a non-empty queue list, heartbeats
//! `Time.parse` rejects or reads differently (bare digits), and records that are not JSON or
//! whose `payload` is not an object. They are logged and left alone. Heartbeats without an
//! explicit zone are read as the latest instant any zone could mean, so no pruner's `TZ` can
//! find them fresher than resq does. resq never prunes its own process's ids.

use super::requeue::HeldJob;
use crate::identity;
use crate::keys::Keys;
use crate::wire::{time, Failure};
use chrono::{DateTime, FixedOffset, Utc};
use redis::aio::ConnectionLike;
use redis::RedisResult;
use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

mod judge;
mod spread;

pub(crate) use judge::expired;
#[cfg(test)]
use judge::heartbeat_instant;
use judge::{judge_record, process_alive, slot_pid, Judged};

/// How often a running process tries to prune (the lock's TTL: at most one round a minute
/// happens in a namespace anyway).
pub(crate) const PERIOD: Duration = Duration::from_secs(60);
/// Ruby's `prune_interval`: a heartbeat older than this gets its worker pruned.
pub(crate) const DEFAULT_PRUNE_AFTER_SECS: u64 = 300;
/// How many `flow_settle` calls one round makes at most (each settles up to 10,000 ends).
const SETTLE_CALLS: usize = 10;
/// Between the look that finds a queued tracked job's payload nowhere and the look that ends
/// it (made by the same round): a Ruby worker pops a job one command before it writes its
/// worker record, so one look in that instant would end a job that is running.
pub(crate) const TAKEN_GRACE: Duration = Duration::from_secs(3);
/// How many `job_taken` calls one round makes at most (each looks at 1,000 records).
const TAKEN_CALLS: usize = 10;
/// TTL of Ruby's prune lock (Ruby uses its heartbeat interval, 60 s by default).
pub(crate) const LOCK_TTL_SECS: u64 = 60;
/// Exception of a job whose worker's heartbeat expired (Ruby's loop 1).
pub(crate) const EXPIRED_EXCEPTION: &str = "Resque::PruneDeadWorkerDirtyExit";
/// Exception of a job whose worker process is gone (Ruby's loop 2, Ruby's unregister on exit).
pub(crate) const DIRTY_EXIT_EXCEPTION: &str = "Resque::DirtyExit";

/// Why an id was pruned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// Its heartbeat expired (Ruby's loop 1).
    Expired,
    /// It is a resq id of this host whose process is gone.
    DeadLocal,
}

/// What happened to a pruned id's running job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// It was idle.
    Idle,
    /// Its job became a failure entry.
    Failed,
    /// Its job went back to the head of its queue.
    Requeued,
}

/// One pruned id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pruned {
    /// The worker id.
    pub id: String,
    /// Why.
    pub reason: Reason,
    /// What happened to its job.
    pub fate: Fate,
}

/// What one round did.
#[derive(Debug, Default, Clone)]
pub(crate) struct Report {
    /// Whether this process held the lock (false: someone else pruned within the minute).
    pub locked: bool,
    /// Ids removed.
    pub pruned: Vec<Pruned>,
    /// Ids a rule selected but resq left alone, with the reason.
    pub skipped: Vec<(String, String)>,
}

impl Report {
    /// Takes the outcome of one id's step: an error that needs a repair (a key of the wrong
    /// type) is reported and the round goes on with the other ids; an outage ends the round.
    fn settle(&mut self, id: &str, r: RedisResult<()>) -> RedisResult<()> {
        match r {
            Ok(()) => Ok(()),
            Err(e)
                if crate::conn::errors::classify(&e) == crate::conn::errors::Class::Permanent =>
            {
                let why = crate::conn::errors::describe_here(&e);
                tracing::error!(worker = %id, "cannot prune: {why}");
                self.skip(id, &why);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// A pruner for one process.
#[derive(Debug, Clone)]
pub(crate) struct Pruner {
    /// Key names.
    keys: Keys,
    /// The lock's value (this process's first slot id, as Ruby writes its own id).
    lock_owner: String,
    /// This process's host field (`<host>~resq`).
    host_field: String,
    /// This process's pid.
    pid: u32,
    /// Ruby's `prune_interval`.
    prune_after: Duration,
    /// Requeue instead of failing.
    at_least_once: bool,
    /// Whether a round makes the second look at the queued jobs its first look missed
    /// (waiting [`TAKEN_GRACE`]); else the next round makes it.
    second_look: bool,
}

impl Pruner {
    /// A pruner for the process whose slot ids are `ids` (at least one).
    pub(crate) fn new(
        keys: Keys,
        ids: &[String],
        pid: u32,
        prune_after: Duration,
        at_least_once: bool,
    ) -> Self {
        let lock_owner = ids.first().cloned().unwrap_or_default();
        let host_field = identity::parse(&lock_owner)
            .map(|p| identity::base_host(&p.host).to_string())
            .unwrap_or_default();
        Pruner {
            keys,
            lock_owner,
            host_field,
            pid,
            prune_after,
            at_least_once,
            second_look: true,
        }
    }

    /// The same pruner, whose rounds leave the second look at missed queued jobs to the next
    /// round instead of waiting [`TAKEN_GRACE`] (a process starting up does not wait).
    pub(crate) fn without_second_look(mut self) -> Self {
        self.second_look = false;
        self
    }

    /// One round (see the module docs). Errors are Redis errors; a round cut short by one is
    /// simply tried again next period (every step is safe to repeat).
    pub(crate) async fn run_once<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
    ) -> RedisResult<Report> {
        let mut report = Report::default();
        let got: Option<String> = redis::cmd("SET")
            .arg(self.keys.pruning_lock())
            .arg(&self.lock_owner)
            .arg("EX")
            .arg(LOCK_TTL_SECS)
            .arg("NX")
            .query_async(con)
            .await?;
        if got.is_none() {
            return Ok(report);
        }
        report.locked = true;
        let now = super::lifecycle::redis_time(con).await?;
        let beats: BTreeMap<String, String> = redis::cmd("HGETALL")
            .arg(self.keys.heartbeats())
            .query_async(con)
            .await?;
        let mut handled = BTreeSet::new();
        for (id, hb) in &beats {
            if !expired(hb, now, self.prune_after) {
                continue;
            }
            handled.insert(id.clone());
            if identity::parse(id).is_none() {
                report.skip(
                    id,
                    "id does not split into host:pid:queues (Ruby's pruner fails on it)",
                );
                continue;
            }
            if self.is_own(id) {
                report.skip(id, "id of this process");
                continue;
            }
            let r = self
                .prune_one(con, id, Some(hb), Reason::Expired, &mut report)
                .await;
            report.settle(id, r)?;
        }
        let members: BTreeSet<String> = redis::cmd("SMEMBERS")
            .arg(self.keys.workers())
            .query_async(con)
            .await?;
        for id in members.difference(&handled) {
            if self.is_dead_local(id) {
                let hb = beats.get(id).map(String::as_str);
                let r = self
                    .prune_one(con, id, hb, Reason::DeadLocal, &mut report)
                    .await;
                report.settle(id, r)?;
            }
        }
        if self.keys.is_spread() {
            let swept = spread::sweep_outboxes(con, &self.keys).await;
            if let Some(n @ 1..) = unless_permanent(swept, "move unregistered slots' outboxes")? {
                tracing::warn!(
                    ids = n,
                    "moved the failure entries of slots someone else unregistered to the failed list"
                );
            }
            let swept = spread::sweep_shares(con, &self.keys).await;
            if let Some(n @ 1..) =
                unless_permanent(swept, "give back unregistered holders' limit units")?
            {
                tracing::warn!(
                    holders = n,
                    "gave back the limit units of processes no longer registered"
                );
            }
            // Claims and workflows are refused on a spread namespace; tracked runs someone else
            // ended, and queued tracked jobs someone else took, are ended per slot.
            self.end_lost_runs(con).await?;
            let cutoff = chrono::Utc::now().timestamp_millis();
            let missed = self.end_taken_jobs_spread(con, cutoff).await?;
            if missed > 0 && self.second_look {
                tokio::time::sleep(TAKEN_GRACE).await;
                self.end_taken_jobs_spread(con, cutoff).await?;
            }
            return Ok(report);
        }
        self.return_orphan_claims(con, &mut report).await?;
        let limits_json = crate::limits::store::load_json(con, &self.keys).await;
        self.converge_limits(con, &limits_json).await?;
        self.end_lost_runs(con).await?;
        let cutoff = chrono::Utc::now().timestamp_millis();
        let missed = self.end_taken_jobs(con, &limits_json, cutoff).await?;
        if missed > 0 && self.second_look {
            tokio::time::sleep(TAKEN_GRACE).await;
            self.end_taken_jobs(con, &limits_json, cutoff).await?;
        }
        self.settle_workflows(con).await?;
        Ok(report)
    }

    /// Finishes the workflow bookkeeping earlier calls left (`flow_settle.lua`): ends past a
    /// cascade's bound, waiting jobs their queue refused, children a cancel did not reach. A
    /// few calls per round, each settling at most 10,000 ends.
    async fn settle_workflows<C: ConnectionLike + Send>(&self, con: &mut C) -> RedisResult<()> {
        // (Each call settles at most 10,000 ends; a round makes a few, each short.)
        for _ in 0..SETTLE_CALLS {
            let r = crate::scripts::FlowSettle {
                unsettled: self.keys.unsettled(),
                prefix: self.keys.prefix(),
                now_ms: chrono::Utc::now().timestamp_millis(),
                most: 1000,
                ttl_s: crate::jobs::DEFAULT_TTL.as_secs(),
                budget: crate::settings::flow_budget(),
            }
            .call()
            .invoke_async(con)
            .await;
            let Some((settled, problems)) =
                unless_permanent::<(u64, String)>(r, "settle workflow bookkeeping")?
            else {
                return Ok(());
            };
            report_settled(0, &problems, "");
            if settled == 0 {
                return Ok(());
            }
            tracing::info!(
                settled,
                "settled workflow bookkeeping left by earlier calls"
            );
        }
        Ok(())
    }

    /// Ends the tracked runs someone else ended (`job_lost.lua`): a record saying working whose
    /// worker is neither registered nor holding the job in its record (Ruby's pruner removed
    /// it, an operator deleted its record) ends `failed`, freeing its job key and moving its
    /// batch and waiting jobs on. Every running job is looked at, about 1,000 per call (a set
    /// scanned with a cursor).
    ///
    /// On a spread namespace, one slot's running set at a time (`<ns>:resq:runs{<tag>}`, of
    /// the slots of the queues in `<ns>:queues`, those that exist), each run judged in its
    /// slot (`job_lost.lua`'s spread mode).
    async fn end_lost_runs<C: ConnectionLike + Send>(&self, con: &mut C) -> RedisResult<()> {
        if !self.keys.is_spread() {
            return self.end_lost_runs_in(con, self.keys.runs()).await;
        }
        let parts = match crate::jobs::index_keys(con, &self.keys, self.keys.runs()).await {
            Ok(p) => p,
            Err(crate::Error::Redis(e)) => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, "prune: could not list the slots' running sets");
                return Ok(());
            }
        };
        if parts.is_empty() {
            return Ok(());
        }
        // (Only the slots that run tracked jobs: one `EXISTS` each, a pipeline per slot.)
        let mut pipe = redis::pipe();
        for runs in &parts {
            pipe.exists(runs);
        }
        let there: Vec<bool> = pipe.query_async(con).await?;
        for (runs, there) in parts.into_iter().zip(there) {
            if there {
                self.end_lost_runs_in(con, runs).await?;
            }
        }
        Ok(())
    }

    /// [`Pruner::end_lost_runs`] over running set `runs`.
    async fn end_lost_runs_in<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        runs: String,
    ) -> RedisResult<()> {
        let spread = self.keys.is_spread();
        let mut from = 0u64;
        loop {
            let r = crate::scripts::JobLost {
                // (Spread: every key the set's, the call in its slot; job_lost.lua.)
                workers: if spread {
                    runs.clone()
                } else {
                    self.keys.workers()
                },
                running: if spread {
                    runs.clone()
                } else {
                    self.keys.running()
                },
                runs: runs.clone(),
                prefix: self.keys.prefix(),
                now_ms: chrono::Utc::now().timestamp_millis(),
                ttl_s: crate::jobs::DEFAULT_TTL.as_secs(),
                from,
                most: 1000,
                spread: if spread { "spread" } else { "" },
            }
            .call()
            .invoke_async(con)
            .await;
            let Some((_, ended, next, problems)) =
                unless_permanent::<(u64, u64, u64, String)>(r, "end runs whose worker is gone")?
            else {
                return Ok(());
            };
            report_settled(
                ended,
                &problems,
                "ended tracked jobs whose worker is gone (failed: unregistered by a pruner, or its record removed)",
            );
            if next == 0 {
                return Ok(());
            }
            from = next;
        }
    }

    /// Ends the queued tracked jobs someone else took (`job_taken.lua`): a record saying queued
    /// whose payload is in none of the places a job can be (its queue, a held set, a claim, a
    /// foreign worker's record) was taken by a Ruby, Jesque or node-resque worker, or removed;
    /// it ends `failed` (its outcome unknown, or the failure entry's text), freeing its job key
    /// and moving its batch and waiting jobs on — at the second look that misses it, at least
    /// [`TAKEN_GRACE`] after the first. Looks at every record entered before `cutoff` (the
    /// round's start) once, at most 1,000 a call and [`TAKEN_CALLS`] calls; returns how many
    /// jobs this first look missed.
    async fn end_taken_jobs<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        limits: &str,
        cutoff: i64,
    ) -> RedisResult<u64> {
        let mut missed_all = 0;
        for _ in 0..TAKEN_CALLS {
            let r = crate::scripts::JobTaken {
                unended: self.keys.unended(),
                workers: self.keys.workers(),
                failed: self.keys.failed(),
                claims: self.keys.claims(),
                missed: self.keys.missed(),
                prefix: self.keys.prefix(),
                now_ms: chrono::Utc::now().timestamp_millis(),
                ttl_s: crate::jobs::DEFAULT_TTL.as_secs(),
                cutoff_ms: cutoff,
                most: 1000,
                scan: 20_000,
                limits,
                grace_ms: TAKEN_GRACE.as_millis() as u64,
                spread: "",
                here: String::new(),
                foreign: String::new(),
            }
            .call()
            .invoke_async(con)
            .await;
            let Some((looked, ended, _, problems, missed)) =
                unless_permanent::<(u64, u64, u64, String, u64)>(
                    r,
                    "end queued jobs a worker resq does not see took",
                )?
            else {
                return Ok(missed_all);
            };
            missed_all += missed;
            report_settled(
                ended,
                &problems,
                "ended tracked jobs taken from their queue by a worker resq does not see (failed: outcome unknown)",
            );
            if looked < 1000 {
                return Ok(missed_all);
            }
        }
        Ok(missed_all)
    }

    /// [`Pruner::end_taken_jobs`] on a spread namespace: one call per slot whose unended index
    /// exists (`<ns>:resq:unended{<tag>}`, of the slots of the queues in `<ns>:queues`), each
    /// given the queues of its slot and the ids of the jobs the workers resq does not see run
    /// (their worker records read right before, each in its slot): `job_taken.lua`'s spread
    /// mode reads nothing outside the slot. Returns how many jobs the look missed.
    async fn end_taken_jobs_spread<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        cutoff: i64,
    ) -> RedisResult<u64> {
        let queues: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.keys.queues())
            .query_async(con)
            .await
            .unwrap_or_default();
        let mut by_tag: BTreeMap<&'static str, Vec<&str>> = BTreeMap::new();
        for q in &queues {
            by_tag.entry(self.keys.queue_tag(q)).or_default().push(q);
        }
        let unended: Vec<(&'static str, String)> = by_tag
            .keys()
            .map(|t| (*t, Keys::in_slot(self.keys.unended(), Some(t))))
            .collect();
        if unended.is_empty() {
            return Ok(0);
        }
        let mut pipe = redis::pipe();
        for (_, k) in &unended {
            pipe.exists(k);
        }
        let there: Vec<bool> = pipe.query_async(con).await?;
        let mut missed_all = 0;
        for ((tag, key), there) in unended.into_iter().zip(there) {
            if !there {
                continue;
            }
            let foreign = self.foreign_runs(con).await?;
            let r = crate::scripts::JobTaken {
                // (Every key of the call in the slot: job_taken.lua's spread mode.)
                workers: key.clone(),
                failed: key.clone(),
                claims: key.clone(),
                missed: Keys::in_slot(self.keys.missed(), Some(tag)),
                unended: key,
                prefix: self.keys.prefix(),
                now_ms: chrono::Utc::now().timestamp_millis(),
                ttl_s: crate::jobs::DEFAULT_TTL.as_secs(),
                cutoff_ms: cutoff,
                most: 1000,
                scan: 20_000,
                limits: "",
                grace_ms: TAKEN_GRACE.as_millis() as u64,
                spread: "spread",
                here: by_tag.get(tag).map(|v| v.join("\n")).unwrap_or_default(),
                foreign: foreign.join(" "),
            }
            .call()
            .invoke_async(con)
            .await;
            let Some((_, ended, _, problems, missed)) =
                unless_permanent::<(u64, u64, u64, String, u64)>(
                    r,
                    "end queued jobs a worker resq does not see took",
                )?
            else {
                continue;
            };
            missed_all += missed;
            report_settled(
                ended,
                &problems,
                "ended tracked jobs taken from their queue by a worker resq does not see (failed: outcome unknown)",
            );
        }
        Ok(missed_all)
    }

    /// The tracked ids in the records of the registered workers that are not resq's own (a
    /// Ruby or node-resque worker keeps the job it runs there), each read in its slot.
    async fn foreign_runs<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
    ) -> RedisResult<Vec<String>> {
        let workers: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.keys.workers())
            .query_async(con)
            .await?;
        let foreign: Vec<&String> = workers
            .iter()
            .filter(|w| !w.contains("~resq:") && !w.contains("~resq{"))
            .collect();
        if foreign.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for w in &foreign {
            pipe.get(self.keys.worker(w));
        }
        let records: Vec<Option<Vec<u8>>> = pipe.query_async(con).await?;
        let mut ids = Vec::new();
        for r in records.into_iter().flatten() {
            let text = String::from_utf8_lossy(&r);
            let mut rest: &str = &text;
            while let Some(at) = rest.find("\"resq_id\"") {
                rest = &rest[at + "\"resq_id\"".len()..];
                let v = rest.trim_start().trim_start_matches(':').trim_start();
                if let Some(id) = v
                    .strip_prefix('"')
                    .and_then(|v| v.split('"').next())
                    .and_then(crate::jobs::JobId::parse)
                {
                    ids.push(id.to_string());
                }
            }
        }
        Ok(ids)
    }

    /// Lets the limits converge from where jobs are, as every process's limits timer does
    /// (`limits_sweep.lua`, the one owner of "how many units are in use", then
    /// `limits_release.lua`): a share whose slot runs no job any more (Ruby's pruner
    /// unregistered it, a key of the limit was unusable at its end) is dropped, and the held
    /// jobs that then fit go back to their queues. Nothing while no limit is in force.
    async fn converge_limits<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        limits_json: &str,
    ) -> RedisResult<()> {
        if limits_json.is_empty() {
            return Ok(());
        }
        let now = Utc::now().timestamp_millis();
        let r = crate::scripts::LimitsSweep {
            sharing: self.keys.sharing(),
            prefix: self.keys.prefix(),
            limits: limits_json,
            now_ms: now,
            budget: 1000,
            moved: &[],
        }
        .call()
        .invoke_async(con)
        .await;
        if let Some((corrected, _, _, problems)) =
            unless_permanent::<(u64, u64, u64, String)>(r, "derive the limits' units")?
        {
            if corrected > 0 {
                tracing::info!(
                    corrected,
                    "limit shares and sums derived again from the jobs that run"
                );
            }
            for line in crate::scripts::texts::problem_lines(&problems) {
                tracing::warn!("cannot derive a limit yet: {line}");
            }
        }
        let r = crate::scripts::LimitsRelease {
            held_due: self.keys.held_due(),
            prefix: self.keys.prefix(),
            limits: limits_json,
            now_ms: now,
            budget: 1000,
            gone: &[],
        }
        .call()
        .invoke_async(con)
        .await;
        unless_permanent::<(u64, String)>(r, "release the held jobs that fit")?;
        Ok(())
    }

    /// Puts back the claimed payloads (see [`super::claim`]) of worker ids no longer
    /// registered: pruned just now, unregistered by Ruby's pruner, or left by a process that
    /// could not unregister. A claimed job never started, so it goes back to the head of its
    /// queue whatever the at-least-once setting.
    async fn return_orphan_claims<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        report: &mut Report,
    ) -> RedisResult<()> {
        let listed: RedisResult<Vec<String>> = redis::cmd("SMEMBERS")
            .arg(self.keys.claims())
            .query_async(con)
            .await;
        let claims = match listed {
            Ok(c) => c,
            Err(e) => {
                report.settle(&self.keys.claims(), Err(e))?;
                return Ok(());
            }
        };
        if claims.is_empty() {
            return Ok(());
        }
        let registered: Vec<bool> = redis::cmd("SMISMEMBER")
            .arg(self.keys.workers())
            .arg(&claims)
            .query_async(con)
            .await?;
        for (id, here) in claims.iter().zip(registered) {
            if here || self.is_own(id) {
                continue;
            }
            let r = async {
                let Some(queue) = super::claim::claimed_queue(con, &self.keys, id).await? else {
                    // An empty entry: drop it from the set (the script does when nothing is
                    // claimed).
                    super::claim::unclaim(con, &self.keys, id, "", "").await?;
                    return Ok(false);
                };
                super::claim::unclaim(con, &self.keys, id, "", &queue).await
            }
            .await;
            match r {
                Ok(true) => {
                    tracing::info!(worker = %id, "put a dead worker's claimed job back at the head of its queue");
                }
                Ok(false) => {}
                Err(e) => report.settle(id, Err(e))?,
            }
        }
        Ok(())
    }

    /// Whether `id` is one of this process's own slots.
    fn is_own(&self, id: &str) -> bool {
        identity::parse(id).is_some_and(|p| {
            identity::base_host(&p.host) == self.host_field && slot_pid(&p.pid) == Some(self.pid)
        })
    }

    /// Whether `id` is a resq slot of this host whose process is not running.
    fn is_dead_local(&self, id: &str) -> bool {
        let Some(p) = identity::parse(id) else {
            return false;
        };
        if self.host_field.is_empty() || identity::base_host(&p.host) != self.host_field {
            return false;
        }
        match slot_pid(&p.pid) {
            Some(pid) if pid != self.pid => !process_alive(pid),
            _ => false,
        }
    }

    async fn prune_one<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        id: &str,
        heartbeat: Option<&str>,
        reason: Reason,
        report: &mut Report,
    ) -> RedisResult<()> {
        let record: Option<Vec<u8>> = redis::cmd("GET")
            .arg(self.keys.worker(id))
            .query_async(con)
            .await?;
        let job = match record.as_deref() {
            None => Judged::Idle,
            Some(bytes) => judge_record(bytes),
        };
        let mut track = String::new();
        let (mode, entry, payload, queue) = match &job {
            Judged::Idle => ("", String::new(), String::new(), String::new()),
            Judged::Refused(why) => {
                report.skip(id, why);
                return Ok(());
            }
            Judged::Job { held, class } => {
                let ending = if self.at_least_once {
                    crate::jobs::Ending::Requeued
                } else {
                    crate::jobs::Ending::Failed(format!("worker {id} died while running it"))
                };
                // (Spread: only a record in the worker record's slot, ended in that slot's
                // step: prune/spread.rs.)
                if !self.keys.is_spread() || spread::tracked_here(&self.keys, id, &held.payload) {
                    track = crate::jobs::ending_in_payload(
                        &held.payload,
                        ending,
                        crate::jobs::DEFAULT_TTL,
                    )
                    .unwrap_or_default();
                }
                if self.at_least_once {
                    (
                        "requeue",
                        String::new(),
                        held.payload.clone(),
                        held.queue.clone(),
                    )
                } else {
                    let (exception, error) = match reason {
                        Reason::Expired => (
                            EXPIRED_EXCEPTION,
                            format!("Worker {id} did not gracefully exit while processing {class}"),
                        ),
                        Reason::DeadLocal => (
                            DIRTY_EXIT_EXCEPTION,
                            "Job still being processed".to_string(),
                        ),
                    };
                    let entry = Failure {
                        failed_at: time::failed_at(Utc::now()),
                        payload: Some(&held.payload),
                        exception: exception.to_string(),
                        error,
                        backtrace: Vec::new(),
                        worker: id,
                        queue: &held.queue,
                    }
                    .encode();
                    ("fail", entry, String::new(), held.queue.clone())
                }
            }
        };
        let applied: i64 = if self.keys.is_spread() {
            let judged = spread::Judged {
                id,
                heartbeat: heartbeat.unwrap_or(""),
                record: record.as_deref().unwrap_or(b""),
                mode,
                entry,
                payload: &payload,
                queue: &queue,
                track,
            };
            spread::prune(con, &self.keys, &judged).await?
        } else {
            self.prune_whole(
                con,
                id,
                heartbeat,
                record.as_deref(),
                mode,
                entry,
                &payload,
                &queue,
                track,
            )
            .await?
        };
        if applied != 1 {
            report.skip(
                id,
                "changed while being judged (alive again, or pruned by another)",
            );
            return Ok(());
        }
        let fate = match mode {
            "requeue" => Fate::Requeued,
            "fail" => Fate::Failed,
            _ => Fate::Idle,
        };
        tracing::info!(worker = %id, reason = ?reason, job = ?fate, "pruned dead worker");
        report.pruned.push(Pruned {
            id: id.to_string(),
            reason,
            fate,
        });
        Ok(())
    }

    /// The prune of one id as one atomic step over all its keys (`prune.lua`): every layout
    /// but a spread one. The dead slot's limit shares go back (and the held jobs that then fit).
    #[allow(clippy::too_many_arguments)]
    async fn prune_whole<C: ConnectionLike + Send>(
        &self,
        con: &mut C,
        id: &str,
        heartbeat: Option<&str>,
        record: Option<&[u8]>,
        mode: &'static str,
        entry: String,
        payload: &str,
        queue: &str,
        track: String,
    ) -> RedisResult<i64> {
        let limits_json = crate::limits::store::load_json(con, &self.keys).await;
        crate::scripts::Prune {
            workers: self.keys.workers(),
            worker: self.keys.worker(id),
            started: self.keys.worker_started(id),
            heartbeats: self.keys.heartbeats(),
            processed_by: self.keys.stat_processed_by(id),
            failed_by: self.keys.stat_failed_by(id),
            failed: self.keys.failed(),
            queue: self.keys.queue(queue),
            queues: self.keys.queues(),
            token: self.keys.claim_token(id),
            id,
            heartbeat: heartbeat.unwrap_or(""),
            record: record.unwrap_or(b""),
            mode,
            entry,
            payload: payload.to_string(),
            queue_name: queue,
            prefix: self.keys.prefix(),
            ending: track,
            now_ms: Utc::now().timestamp_millis(),
            limits: &limits_json,
        }
        .call()
        .invoke_async(con)
        .await
    }
}

impl Report {
    fn skip(&mut self, id: &str, why: &str) {
        tracing::warn!(worker = %id, why, "not pruning this worker");
        self.skipped.push((id.to_string(), why.to_string()));
    }
}

/// A round's step reply: its value; `None` when Redis refused it for good (a key of another
/// type: logged, the round goes on); the error when it may pass (the round is tried again).
fn unless_permanent<T>(r: RedisResult<T>, what: &str) -> RedisResult<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if crate::conn::errors::classify(&e) == crate::conn::errors::Class::Permanent => {
            let why = crate::conn::errors::describe_here(&e);
            tracing::error!("cannot {what}: {why}");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Logs what one settling call of the prune round ended (`ended`, said as `what`) and the
/// problems it met (one line each, naming its key).
fn report_settled(ended: u64, problems: &str, what: &str) {
    if ended > 0 {
        tracing::warn!(ended, "{what}");
    }
    if !problems.is_empty() {
        crate::jobs::report_problem(problems);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(s, 0).single().unwrap()
    }

    const FIVE_MIN: Duration = Duration::from_secs(300);

    #[test]
    fn ruby_threshold_is_strict_and_truncating() {
        let hb = "2026-11-21T19:15:33+00:00";
        let t = time::parse_any(hb).unwrap().timestamp();
        assert!(!expired(hb, at(t + 300), FIVE_MIN));
        assert!(expired(hb, at(t + 301), FIVE_MIN));
        // Millis: 300.9 s truncates to 300, not expired; 301.1 s is.
        let hb = "2026-11-21T19:15:33.100Z";
        assert!(!expired(hb, at(t + 301), FIVE_MIN));
        assert!(expired(hb, at(t + 302), FIVE_MIN));
        // A heartbeat in the future is never expired.
        assert!(!expired(
            "2026-11-21T19:15:33+00:00",
            at(t - 1000),
            FIVE_MIN
        ));
    }

    #[test]
    fn zones_are_read_as_ruby_reads_them() {
        // Checked against Ruby 3.1 `Time.parse` (TZ=America/New_York).
        let utc = at(1_795_288_533); // 2026-11-21T19:15:33Z
        for s in [
            "2026-11-21T19:15:33+00:00",
            "2026-11-21T14:15:33-05:00",
            "2026-11-21T19:15:33.000Z",
            "2026-11-21 19:15:33 +0000",
            "2026/11/21 19:15:33 UTC",
            "2026-11-21T19:15:33.000+0000",
        ] {
            assert_eq!(heartbeat_instant(s), Some(utc), "{s}");
        }
        // No zone (or one resq does not read): the latest instant any zone could mean.
        for s in [
            "2026-11-21 19:15:33",
            "2026/11/21 19:15:33 EST",
            "Sat Nov 21 2026 19:15:33 GMT+0000 (Coordinated Universal Time)",
        ] {
            assert_eq!(
                heartbeat_instant(s),
                Some(utc + chrono::Duration::hours(12)),
                "{s}"
            );
        }
        // Ruby raises on epoch seconds and reads 8 digits as a date: never judged.
        for s in ["1795288154", "20261121", "", "garbage"] {
            assert_eq!(heartbeat_instant(s), None, "{s}");
        }
    }

    #[test]
    fn records_ruby_would_choke_on_are_refused() {
        assert!(matches!(judge_record(b"{}"), Judged::Idle));
        assert!(matches!(judge_record(b"nope"), Judged::Refused(_)));
        assert!(matches!(
            judge_record(br#"{"run_at":"x","queue":null,"payload":null,"paused":true}"#),
            Judged::Refused(_)
        ));
        match judge_record(br#"{"queue":"q","run_at":"x","payload":{"class":"A","args":[]}}"#) {
            Judged::Job { held, class } => {
                assert_eq!(class, "A");
                assert_eq!(held.queue, "q");
            }
            _ => panic!("not a job"),
        }
        match judge_record(br#"{"queue":"q","run_at":"x","payload":{"args":[]}}"#) {
            Judged::Job { class, .. } => assert_eq!(class, "<Unknown Job>"),
            _ => panic!("not a job"),
        }
    }

    #[test]
    fn slot_pids() {
        assert_eq!(slot_pid("123-4"), Some(123));
        assert_eq!(slot_pid("123"), None);
        assert_eq!(slot_pid("123-"), None);
        assert_eq!(slot_pid("-1"), None);
        assert_eq!(slot_pid("12a-1"), None);
    }
}
