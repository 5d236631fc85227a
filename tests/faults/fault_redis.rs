//! Fault suite 6b: stop and restart `redis-server` (AOF on, `appendfsync always`, in a temp
//! dir) twice while the compat worker runs a mix of jobs. The worker must ride out both
//! outages by itself (no restart, no exit), record every finish exactly once when Redis is
//! back, log each outage once, and lose no job (see `support::audit`).

use crate::support;

use rand::Rng;
use std::time::Duration;
use support::audit;
use support::{wait_until, RedisServer, WorkerProc};

fn try_con(url: &str) -> Option<redis::Connection> {
    redis::Client::open(url).ok()?.get_connection().ok()
}

fn processed(url: &str, ns: &str) -> Option<i64> {
    let mut c = try_con(url)?;
    let v: Option<i64> = redis::cmd("GET")
        .arg(format!("{ns}:stat:processed"))
        .query(&mut c)
        .ok()?;
    Some(v.unwrap_or(0))
}

#[test]
fn redis_restarts_twice_mid_run_lose_no_job() {
    let server = RedisServer::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let url = server.url();
    let ns = support::namespace("redis-restart");
    let mut rng = rand::rng();
    let jobs = audit::mix(1500, || rng.random_range(5..=25));
    let mut con = try_con(&url).expect("connect");
    audit::enqueue(&mut con, &ns, &jobs);
    drop(con);

    let mut w = WorkerProc::start(&url, &ns, 4, &[("HEARTBEAT_INTERVAL", "1")]);
    let total = jobs.len() as i64;
    let mut outages = Vec::new();
    for k in 1..=2 {
        let at = total * k / 3;
        wait_until(120, "progress before the outage", || {
            processed(&url, &ns).filter(|p| *p >= at)
        });
        server.stop();
        let before = processed(&url, &ns);
        assert!(before.is_none(), "redis still answers after SHUTDOWN");
        // The outage under test lasts 2.5 s: longer than the heartbeat interval (1 s), so
        // every slot, the heartbeat and the watchers meet it (a duration, not a wait for an
        // event: the worker announces only the first failure of an outage).
        std::thread::sleep(Duration::from_millis(2500));
        assert!(
            w.running(),
            "worker exited during outage {k}:\n{}",
            w.stderr()
        );
        server.restart();
        outages.push(at);
        wait_until(30, "the worker to log that Redis is back", || {
            (w.stderr().matches("redis reachable again").count() >= k as usize).then_some(())
        });
    }
    let ids = w.ids.clone();
    wait_until(120, "the queue to drain and the slots to go idle", || {
        let mut c = try_con(&url)?;
        let left: usize = redis::cmd("LLEN")
            .arg(format!("{ns}:queue:default"))
            .query(&mut c)
            .ok()?;
        let busy: usize = ids
            .iter()
            .map(|id| {
                redis::cmd("EXISTS")
                    .arg(format!("{ns}:worker:{id}"))
                    .query::<usize>(&mut c)
                    .unwrap_or(1)
            })
            .sum();
        (left == 0 && busy == 0).then_some(())
    });
    // The heartbeat thread survived both outages: every slot's heartbeat is fresh again.
    wait_until(10, "fresh heartbeats after the outages", || {
        let mut c = try_con(&url)?;
        let (now, _): (i64, i64) = redis::cmd("TIME").query(&mut c).ok()?;
        let fresh = ids.iter().all(|id| {
            redis::cmd("HGET")
                .arg(format!("{ns}:workers:heartbeat"))
                .arg(id)
                .query::<Option<String>>(&mut c)
                .ok()
                .flatten()
                .and_then(|hb| chrono::DateTime::parse_from_rfc3339(&hb).ok())
                .is_some_and(|t| now - t.timestamp() <= 3)
        });
        fresh.then_some(())
    });
    w.signal("QUIT");
    let status = w.wait_exit(20);
    assert!(status.success(), "worker exited with {status}");
    let log = w.stderr();
    let mut con = try_con(&url).expect("connect");
    let a = audit::audit(&mut con, &ns, &jobs, false, 0);
    let down = log.matches("redis unreachable").count();
    let up = log.matches("redis reachable again").count();
    support::audit::report(&format!(
        "{} outages_at_processed={outages:?} logged_unreachable={down} logged_reachable_again={up}",
        a.line("redis-restart")
    ));
    assert!(
        a.problems.is_empty(),
        "{}\n{:#?}",
        a.line("redis-restart"),
        a.problems
    );
    assert_eq!(a.missing, 0);
    assert_eq!(a.duplicates, 0);
    assert_eq!(
        a.failed_by_prune, 0,
        "nothing was killed, nothing should be pruned"
    );
    assert_eq!(down, 2, "each outage is logged once:\n{log}");
    assert_eq!(up, 2, "each recovery is logged once:\n{log}");
    assert!(!log.contains("panicked"), "the worker panicked:\n{log}");
    audit::assert_no_ghosts(&mut con, &ns);
}

#[test]
fn a_redis_that_may_evict_keys_is_named_at_start() {
    // ElastiCache's default parameter group, for one: a memory limit and volatile-lru.
    let evicting =
        RedisServer::start(&["--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru"]);
    let ns = support::namespace("evicting");
    let mut w = WorkerProc::start(&evicting.url(), &ns, 1, &[]);
    let log = w.stderr();
    assert!(
        log.contains("maxmemory-policy volatile-lru") && log.contains("noeviction"),
        "no warning about eviction:\n{log}"
    );
    w.signal("QUIT");
    assert!(w.wait_exit(30).success());

    // The same limit with noeviction (a full Redis refuses writes instead): nothing to say.
    let refusing =
        RedisServer::start(&["--maxmemory", "100mb", "--maxmemory-policy", "noeviction"]);
    let mut w = WorkerProc::start(&refusing.url(), &ns, 1, &[]);
    let log = w.stderr();
    assert!(!log.contains("maxmemory-policy"), "{log}");
    w.signal("QUIT");
    assert!(w.wait_exit(30).success());
}
