//! Fault suite 6a: `kill -9` the compat worker at random moments while it works through a mix
//! of `Sleep`/`Echo`/`Fail` jobs, restart it each time, and audit that every job is accounted
//! for exactly once (see `support::audit`). Zero missing.
//!
//! How killed slots' jobs are found: each restarted process prunes at start (resq's prune,
//! `src/worker/prune.rs`). The killed process's ids are resq ids of this host whose pid is
//! gone, so the dead-local rule removes them at once and turns each in-progress job into a
//! `Resque::DirtyExit` failure (or, at-least-once, puts it back at the head of the queue).
//! Ruby's prune lock (`<ns>:pruning_dead_workers_in_progress`, 60 s) would make every restart
//! within a minute skip its prune, so the test deletes the lock before each restart — standing
//! in for the minute a real restart loop would wait. The final run drains the queue and QUITs;
//! then no id, record or heartbeat of any worker may be left.

use crate::support;

use rand::Rng;
use std::time::Duration;
use support::audit::{self, Job};
use support::{wait_until, WorkerProc};

/// Kill/restart cycles at most (fewer when the queue empties first).
const MAX_KILLS: usize = 20;

fn sync_con(url: &str) -> redis::Connection {
    redis::Client::open(url)
        .expect("url")
        .get_connection()
        .expect("connect")
}

fn count(log: &str, needle: &str) -> usize {
    log.matches(needle).count()
}

/// Runs the kill loop over `jobs` and returns the audit.
fn run(name: &str, jobs: &[Job], env: &[(&str, &str)], at_least_once: bool) -> audit::Audit {
    let url = support::url();
    let ns = support::namespace(name);
    let mut con = sync_con(&url);
    audit::enqueue(&mut con, &ns, jobs);
    let queue = format!("{ns}:queue:default");
    let lock = format!("{ns}:pruning_dead_workers_in_progress");
    let mut rng = rand::rng();
    let mut logs = Vec::new();
    let mut kills = 0;
    let mut killed_busy = 0;
    while kills < MAX_KILLS {
        let _: () = redis::cmd("DEL")
            .arg(&lock)
            .query(&mut con)
            .expect("del lock");
        let mut w = WorkerProc::start(&url, &ns, 4, env);
        std::thread::sleep(Duration::from_millis(rng.random_range(80..=350)));
        let busy: usize = w
            .ids
            .iter()
            .map(|id| {
                let n: i64 = redis::cmd("EXISTS")
                    .arg(format!("{ns}:worker:{id}"))
                    .query(&mut con)
                    .expect("exists");
                n as usize
            })
            .sum();
        w.kill9();
        kills += 1;
        killed_busy += busy;
        logs.push(w.stderr());
        let left: usize = redis::cmd("LLEN")
            .arg(&queue)
            .query(&mut con)
            .expect("llen");
        if left == 0 {
            break;
        }
    }
    // The final run: prunes the last killed process, drains the queue, then QUIT.
    let _: () = redis::cmd("DEL")
        .arg(&lock)
        .query(&mut con)
        .expect("del lock");
    let mut w = WorkerProc::start(&url, &ns, 4, env);
    let ids = w.ids.clone();
    wait_until(120, "the queue to drain and the slots to go idle", || {
        let left: usize = redis::cmd("LLEN").arg(&queue).query(&mut con).ok()?;
        let busy: usize = ids
            .iter()
            .map(|id| {
                redis::cmd("EXISTS")
                    .arg(format!("{ns}:worker:{id}"))
                    .query::<usize>(&mut con)
                    .unwrap_or(1)
            })
            .sum();
        (left == 0 && busy == 0).then_some(())
    });
    w.signal("QUIT");
    let status = w.wait_exit(20);
    assert!(status.success(), "final worker exited with {status}");
    logs.push(w.stderr());
    let all = logs.join("\n");
    let requeued = count(&all, "job=Requeued");
    let pruned = count(&all, "pruned dead worker");
    let a = audit::audit(&mut con, &ns, jobs, at_least_once, requeued);
    support::audit::report(&format!(
        "{} kills={kills} slots_busy_at_kill={killed_busy} pruned_ids={pruned}",
        a.line(name)
    ));
    assert!(a.problems.is_empty(), "{}\n{:#?}", a.line(name), a.problems);
    assert_eq!(a.missing, 0);
    audit::assert_no_ghosts(&mut con, &ns);
    assert!(
        kills >= 3,
        "the workers finished before they could be killed often enough"
    );
    assert!(!all.contains("panicked"), "a worker panicked:\n{all}");
    a
}

#[test]
fn kill_9_at_random_moments_loses_no_job() {
    let mut rng = rand::rng();
    let jobs = audit::mix(2000, || rng.random_range(20..=80));
    let a = run("kill9", &jobs, &[], false);
    assert_eq!(a.duplicates, 0);
    assert_eq!(a.requeued, 0);
    assert!(
        a.failed_by_prune > 0,
        "no kill hit a running job: the test proved nothing"
    );
}

#[test]
fn kill_9_at_least_once_requeues_and_bounds_duplicates() {
    let mut rng = rand::rng();
    let jobs = audit::mix(600, || rng.random_range(20..=80));
    let a = run("kill9-alo", &jobs, &[("RESQ_AT_LEAST_ONCE", "1")], true);
    assert_eq!(a.failed_by_prune, 0);
    assert!(
        a.requeued > 0,
        "no kill hit a running job: the test proved nothing"
    );
    assert!(
        a.duplicates <= a.requeued,
        "{} duplicates for {} requeues",
        a.duplicates,
        a.requeued
    );
    // Every job finished exactly once (stat:processed counts finishes, not runs).
    assert_eq!(a.processed as usize, jobs.len());
}
