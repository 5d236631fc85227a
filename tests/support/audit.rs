//! The job audit of the fault suite: every enqueued job accounted for exactly once across the
//! compat worker's echo list, the failure list and the queue, plus `stat:processed`.
//!
//! Jobs carry a unique tag (`j<N>`) in their args: `Echo ["j7"]`, `Fail ["j7"]`,
//! `Sleep [ms, "j7"]`. What each job can legitimately leave behind:
//!
//! * in the queue (never run to completion) — exactly one copy, no echo, no failure;
//! * a failure entry — from its handler (`Fail`; or `Echo` whose RPUSH hit a Redis outage), or
//!   from pruning when its worker was killed mid-job (`Resque::DirtyExit`,
//!   `Resque::PruneDeadWorkerDirtyExit`); exactly one;
//! * an echo (`Echo` only): at most one; it may sit beside a prune failure (the process died
//!   after the handler's RPUSH, before the finish step) or a handler failure (the RPUSH ran but
//!   its reply was lost);
//! * `Sleep` leaves no trace of its own when it succeeds, so it is accounted for in bulk: every
//!   job that is neither still queued nor pruned finished exactly once, and each finish (success
//!   or failure) counts once in `stat:processed` (Ruby's semantics). So
//!   `stat:processed == enqueued − queued − prune failures`; fewer means a job was lost, more
//!   means one was counted twice.
//!
//! Under at-least-once there are no prune failures (interrupted jobs are requeued); a job may
//! then run more than once, so extra echoes are counted as duplicates and must not exceed the
//! number of requeues; every job must finish, so `stat:processed == enqueued − queued`.

use redis::Commands;
use serde_json::Value;
use std::collections::HashMap;

/// Kinds of job in the mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `Echo ["j<N>"]`.
    Echo,
    /// `Sleep [ms, "j<N>"]`.
    Sleep,
    /// `Fail ["j<N>"]`.
    Fail,
}

/// One enqueued job.
#[derive(Clone, Debug)]
pub struct Job {
    /// `j<N>`.
    pub tag: String,
    /// Its kind.
    pub kind: Kind,
    /// Its payload bytes.
    pub payload: String,
}

/// `n` jobs: 60 % Echo, 20 % Sleep (`sleep_ms` picks each duration), 20 % Fail, interleaved.
pub fn mix(n: usize, mut sleep_ms: impl FnMut() -> u64) -> Vec<Job> {
    (0..n)
        .map(|i| {
            let tag = format!("j{i}");
            let (kind, payload) = match i % 10 {
                0..=5 => (
                    Kind::Echo,
                    format!(r#"{{"class":"Echo","args":["{tag}"]}}"#),
                ),
                6 | 7 => (
                    Kind::Sleep,
                    format!(r#"{{"class":"Sleep","args":[{},"{tag}"]}}"#, sleep_ms()),
                ),
                _ => (
                    Kind::Fail,
                    format!(r#"{{"class":"Fail","args":["{tag}"]}}"#),
                ),
            };
            Job { tag, kind, payload }
        })
        .collect()
}

/// Enqueues `jobs` on `<ns>:queue:default` as Ruby's `Resque.push` does.
pub fn enqueue(con: &mut redis::Connection, ns: &str, jobs: &[Job]) {
    for chunk in jobs.chunks(500) {
        let mut p = redis::pipe();
        p.sadd(format!("{ns}:queues"), "default").ignore();
        for j in chunk {
            p.rpush(format!("{ns}:queue:default"), &j.payload).ignore();
        }
        let _: () = p.query(con).expect("enqueue");
    }
}

/// The audit's numbers.
#[derive(Debug, Default)]
pub struct Audit {
    /// Jobs enqueued.
    pub enqueued: usize,
    /// `stat:processed` at the end.
    pub processed: i64,
    /// Failure entries written by handlers.
    pub failed_by_handler: usize,
    /// Failure entries written by pruning (killed slots).
    pub failed_by_prune: usize,
    /// Jobs put back on their queue (at-least-once), as the workers logged them.
    pub requeued: usize,
    /// Jobs still in the queue.
    pub queued: usize,
    /// Jobs found nowhere.
    pub missing: usize,
    /// Jobs accounted for more than once (extra echoes, two entries, …).
    pub duplicates: usize,
    /// Echo jobs that echoed and were then pruned (side effect done, finish lost to the kill).
    pub echoed_then_pruned: usize,
    /// What went wrong, one line per job (capped).
    pub problems: Vec<String>,
}

impl Audit {
    /// The one-line summary the tests print.
    pub fn line(&self, name: &str) -> String {
        format!(
            "AUDIT {name}: enqueued={} processed={} failed={} (handler={} prune={}) requeued={} queued={} missing={} duplicates={} echoed_then_pruned={}",
            self.enqueued,
            self.processed,
            self.failed_by_handler + self.failed_by_prune,
            self.failed_by_handler,
            self.failed_by_prune,
            self.requeued,
            self.queued,
            self.missing,
            self.duplicates,
            self.echoed_then_pruned,
        )
    }

    fn problem(&mut self, p: String) {
        if self.problems.len() < 20 {
            self.problems.push(p);
        }
    }
}

fn tag_of(args: &Value) -> Option<String> {
    args.as_array()?
        .iter()
        .filter_map(Value::as_str)
        .find(|s| s.starts_with('j'))
        .map(str::to_string)
}

/// Reads Redis and accounts for every job; `requeued` is what the workers logged.
pub fn audit(
    con: &mut redis::Connection,
    ns: &str,
    jobs: &[Job],
    at_least_once: bool,
    requeued: usize,
) -> Audit {
    let echoes: Vec<String> = con
        .lrange(format!("{ns}:compat:echo"), 0, -1)
        .expect("echo");
    let failed: Vec<String> = con.lrange(format!("{ns}:failed"), 0, -1).expect("failed");
    let queued: Vec<String> = con
        .lrange(format!("{ns}:queue:default"), 0, -1)
        .expect("queue");
    let processed: Option<i64> = con.get(format!("{ns}:stat:processed")).expect("processed");
    let mut a = Audit {
        enqueued: jobs.len(),
        processed: processed.unwrap_or(0),
        requeued,
        queued: queued.len(),
        ..Audit::default()
    };
    let mut echo: HashMap<String, usize> = HashMap::new();
    for e in &echoes {
        let v: Value = serde_json::from_str(e).expect("echo JSON");
        *echo.entry(tag_of(&v).expect("echo tag")).or_default() += 1;
    }
    let mut fail_handler: HashMap<String, usize> = HashMap::new();
    let mut fail_prune: HashMap<String, usize> = HashMap::new();
    for f in &failed {
        let v: Value = serde_json::from_str(f).expect("failure JSON");
        let tag = tag_of(&v["payload"]["args"]).expect("failure has a tagged payload");
        let exc = v["exception"].as_str().unwrap_or_default();
        if exc == "Resque::DirtyExit" || exc == "Resque::PruneDeadWorkerDirtyExit" {
            a.failed_by_prune += 1;
            *fail_prune.entry(tag).or_default() += 1;
        } else {
            a.failed_by_handler += 1;
            *fail_handler.entry(tag).or_default() += 1;
        }
    }
    let mut queue: HashMap<String, usize> = HashMap::new();
    for q in &queued {
        let v: Value = serde_json::from_str(q).expect("queued JSON");
        *queue
            .entry(tag_of(&v["args"]).expect("queued tag"))
            .or_default() += 1;
    }
    let mut extra_echoes = 0;
    for j in jobs {
        let e = echo.get(&j.tag).copied().unwrap_or(0);
        let fh = fail_handler.get(&j.tag).copied().unwrap_or(0);
        let fp = fail_prune.get(&j.tag).copied().unwrap_or(0);
        let q = queue.get(&j.tag).copied().unwrap_or(0);
        let f = fh + fp;
        let state = format!(
            "{} {:?}: echo={e} handler_fail={fh} prune_fail={fp} queued={q}",
            j.tag, j.kind
        );
        if f + q > 1 || (q == 1 && e > 0 && !at_least_once) {
            a.duplicates += 1;
            a.problem(format!("duplicate: {state}"));
            continue;
        }
        if at_least_once && fp > 0 {
            a.problem(format!("prune failure under at-least-once: {state}"));
            a.duplicates += 1;
            continue;
        }
        match j.kind {
            Kind::Echo => {
                if e > 1 {
                    if at_least_once {
                        extra_echoes += e - 1;
                    } else {
                        a.duplicates += 1;
                        a.problem(format!("echoed twice: {state}"));
                    }
                }
                if e == 0 && f == 0 && q == 0 {
                    a.missing += 1;
                    a.problem(format!("missing: {state}"));
                }
                if e > 0 && fp > 0 {
                    a.echoed_then_pruned += 1;
                }
            }
            Kind::Fail => {
                if e > 0 {
                    a.duplicates += 1;
                    a.problem(format!("a Fail job echoed: {state}"));
                }
                if f == 0 && q == 0 {
                    a.missing += 1;
                    a.problem(format!("missing: {state}"));
                }
            }
            Kind::Sleep => {}
        }
    }
    // Every job neither queued nor pruned finished exactly once, and each finish counts once.
    let expected = (jobs.len() - a.queued - a.failed_by_prune) as i64;
    if a.processed < expected {
        a.missing += (expected - a.processed) as usize;
        a.problem(format!(
            "stat:processed={} but {expected} jobs finished: jobs lost",
            a.processed
        ));
    } else if a.processed > expected {
        a.duplicates += (a.processed - expected) as usize;
        a.problem(format!(
            "stat:processed={} but only {expected} jobs could finish: counted twice",
            a.processed
        ));
    }
    if at_least_once {
        a.duplicates += extra_echoes;
    }
    a
}

/// Asserts that no trace of any worker is left in `ns` (ids, records, heartbeats, per-worker
/// stats): no ghost workers.
pub fn assert_no_ghosts(con: &mut redis::Connection, ns: &str) {
    let members: Vec<String> = con.smembers(format!("{ns}:workers")).expect("workers");
    assert!(members.is_empty(), "ghost workers left: {members:?}");
    let beats: HashMap<String, String> = con
        .hgetall(format!("{ns}:workers:heartbeat"))
        .expect("heartbeats");
    assert!(beats.is_empty(), "ghost heartbeats left: {beats:?}");
    let records: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{ns}:worker:*"))
        .query(con)
        .expect("keys");
    assert!(records.is_empty(), "ghost worker keys left: {records:?}");
}

/// Prints `line` to the real stdout, past the test harness's capture, so the audit numbers
/// show in every `cargo test` run (CI logs included), not only with `--nocapture`.
pub fn report(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
