//! The limits audit (issue 15): 8 worker processes × 16 slots share a class limited to 5 —
//! the number running at once, sampled by the handler itself (`Gauge` in the compat worker),
//! never exceeds 5; two processes are killed with SIGKILL mid-run and pruning gives their
//! shares back: the limit is neither exceeded nor leaked, and no job is missing. Then a rate
//! limit of 50 per second holds within ±10 % over 20 s. The first audit runs again with the
//! limit on the whole queue instead of the class (the step's quick way).

use crate::support;

use redis::Commands;
use resq::limits::Limit;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use support::{wait_until, WorkerProc};

fn admin(ns: &str) -> (tokio::runtime::Runtime, resq::admin::Admin) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let a = rt
        .block_on(resq::admin::Admin::connect(&support::url(), ns))
        .unwrap();
    (rt, a)
}

fn push(con: &mut redis::Connection, ns: &str, n: usize, ms: u64) {
    let mut pipe = redis::pipe();
    pipe.sadd(format!("{ns}:queues"), "default").ignore();
    for i in 0..n {
        pipe.rpush(
            format!("{ns}:queue:default"),
            format!(r#"{{"class":"Gauge","args":[{ms},"j{i}"]}}"#),
        )
        .ignore();
    }
    let _: () = pipe.query(con).unwrap();
}

#[test]
fn a_limit_of_five_holds_across_eight_processes_and_outlives_kill_9() {
    audit(Limit::concurrency("audit", 5).class("Gauge"));
}

/// The same audit with the limit on the whole queue: the step counts it the quick way
/// (limits_quick.lua), and pruning returns the dead slots' shares the general way.
#[test]
fn a_queue_limit_of_five_holds_the_same_way() {
    audit(Limit::concurrency("audit", 5).queue("default"));
}

/// 8 processes × 16 slots under `limit` (named `audit`, 5 units, over the Gauge jobs of queue
/// `default`), two of them killed with SIGKILL mid-run.
fn audit(limit: Limit) {
    support::topology::require("redis-server", "redis-server");
    let ns = support::namespace("audit");
    let (rt, admin) = admin(&ns);
    rt.block_on(admin.set_limit(&limit)).unwrap();
    let mut con = redis::Client::open(support::url())
        .unwrap()
        .get_connection()
        .unwrap();
    const JOBS: usize = 400;
    push(&mut con, &ns, JOBS, 20);
    let env = [("RESQ_AT_LEAST_ONCE", "1")];
    let mut procs: Vec<WorkerProc> = (0..8)
        .map(|_| WorkerProc::start(&support::url(), &ns, 16, &env))
        .collect();
    let echo = format!("{ns}:compat:echo");
    let done_key = format!("{echo}:done");
    wait_until(60, "150 jobs done", || {
        (con.llen::<_, usize>(&done_key).ok()? >= 150).then_some(())
    });
    // Two processes die mid-run, their jobs and shares with them.
    let dead: Vec<u32> = procs
        .drain(..2)
        .map(|mut p| {
            let pid = p.pid();
            p.kill9();
            pid
        })
        .collect();
    // Their leases stop counting: they are not running anything any more.
    let running = format!("{echo}:running");
    let leases: Vec<String> = con.zrange(&running, 0, -1).unwrap();
    for l in leases {
        if dead.iter().any(|pid| l.contains(&format!(":{pid}:"))) {
            let _: () = con.zrem(&running, &l).unwrap();
        }
    }
    // Pruning (as any resq process runs it every minute; here at once) gives their shares back
    // and puts their jobs back (at-least-once).
    let _: () = con
        .del(format!("{ns}:pruning_dead_workers_in_progress"))
        .unwrap();
    let out = rt
        .block_on(admin.prune(Duration::from_secs(300), true))
        .unwrap();
    assert!(
        out.pruned.len() >= 32,
        "both processes' slots pruned: {out:?}"
    );
    wait_until(120, "every job done", || {
        let done: Vec<String> = con.lrange(&done_key, 0, -1).ok()?;
        let labels: BTreeSet<String> = done.into_iter().collect();
        (labels.len() == JOBS).then_some(())
    });
    let max: i64 = con.get(format!("{echo}:max")).unwrap();
    eprintln!(
        "audit: at most {max} ran at once (limit 5), {JOBS} jobs done, 2 of 8 processes killed"
    );
    assert!(max <= 5, "{max} ran at once under a limit of 5");
    assert!(max >= 4, "the limit was used ({max})");
    for mut p in procs {
        p.signal("QUIT");
        assert_eq!(p.wait_exit(20).code(), Some(0));
    }
    // The sum stays written at 0 (a missing one is derived from the slots' shares).
    let holders: Option<usize> = con
        .hget(format!("{ns}:resq:limit:audit:holders"), "__units")
        .unwrap();
    let holders = holders.unwrap_or(0);
    let held: usize = con.zcard(format!("{ns}:resq:limit:audit:held")).unwrap();
    assert_eq!(
        (holders, held),
        (0, 0),
        "no share leaked, nothing left held"
    );
}

#[test]
fn a_rate_of_fifty_per_second_holds_within_ten_percent() {
    support::topology::require("redis-server", "redis-server");
    let ns = support::namespace("audit-rate");
    let (rt, admin) = admin(&ns);
    rt.block_on(admin.set_limit(&Limit::rate("fifty", 50, Duration::from_secs(1)).class("Gauge")))
        .unwrap();
    let mut con = redis::Client::open(support::url())
        .unwrap()
        .get_connection()
        .unwrap();
    push(&mut con, &ns, 1400, 0);
    let procs: Vec<WorkerProc> = (0..4)
        .map(|_| WorkerProc::start(&support::url(), &ns, 8, &[]))
        .collect();
    let starts_key = format!("{ns}:compat:echo:starts");
    let t0 = Instant::now();
    wait_until(40, "22 s of starts", || {
        (t0.elapsed() >= Duration::from_secs(22)).then_some(())
    });
    let starts: Vec<i64> = con.lrange(&starts_key, 0, -1).unwrap();
    let first = *starts.iter().min().unwrap();
    // Whole seconds from the first window boundary after the first start, for 20 s.
    let from = (first / 1000 + 1) * 1000;
    let in_window = starts
        .iter()
        .filter(|t| (from..from + 20_000).contains(*t))
        .count();
    eprintln!("audit: {in_window} starts in 20 s under 50 per second");
    assert!(
        (900..=1100).contains(&in_window),
        "{in_window} starts in 20 s under 50 per second"
    );
    for mut p in procs {
        p.signal("QUIT");
        assert_eq!(p.wait_exit(20).code(), Some(0));
    }
}
