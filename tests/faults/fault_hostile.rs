//! Hostile Redis, one class of fault per test (issue 12), against the compat worker process:
//!
//! * a key of the wrong type refuses only the transitions that need it: the slots it holds keep
//!   their jobs in their records, the other slots go on, the error names the key and is
//!   repeated while it lasts, and TERM still ends the process, leaving those records for
//!   pruning (registered, not deleted);
//! * Redis down: TERM ends the process within the term timeout plus a small bound, and says
//!   which records it leaves;
//! * a connection closed by the server while idle (`timeout`): a handler's next command through
//!   resq's connection goes through;
//! * connections that cannot be made (`maxclients`): idle slots still pick jobs up within
//!   `INTERVAL`, and the lost connection is logged;
//! * 1,000 queues: a job on the last one is picked up without polling, and draining it costs
//!   a few `LPOP`s per job, not one per queue;
//! * a queue closed by a full limit on the whole queue: the waiting slots are not woken in a
//!   loop (Redis sees a handful of commands per second), and the queue's jobs still run one
//!   after another as the share comes back;
//! * queue keys that are no list (a string, a zset): an idle process sends next to nothing
//!   (no wake-up loop on a key that exists but holds no jobs), and jobs on its other queues are
//!   still picked up at once;
//! * queue names a producer made that resq cannot serve (not UTF-8, a tab or newline inside)
//!   in `<ns>:queues`: a `QUEUES=*` worker starts, serves the other queues, picks up a queue
//!   added later, and names each bad one once;
//! * a 20 MB non-ASCII payload never holds Redis in a script and never becomes a malformed
//!   record, and the worker's memory stays within a small multiple of the payload.
//!
//! Each prints an `AUDIT` line with what it measured.

use crate::support;

use std::time::{Duration, Instant};
use support::{wait_until, RedisServer, WorkerProc};

fn con(url: &str) -> redis::Connection {
    redis::Client::open(url)
        .expect("url")
        .get_connection()
        .expect("connect")
}

fn get_i64(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("GET")
        .arg(key)
        .query::<Option<i64>>(c)
        .expect("GET")
        .unwrap_or(0)
}

fn push(c: &mut redis::Connection, key: &str, payload: &str) {
    let _: () = redis::cmd("RPUSH")
        .arg(key)
        .arg(payload)
        .query(c)
        .expect("RPUSH");
}

/// The worker records of `ns` that hold a job of `class`.
fn records_with(c: &mut redis::Connection, ns: &str, class: &str) -> usize {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{ns}:worker:*"))
        .query(c)
        .expect("KEYS");
    keys.iter()
        .filter(|k| !k.ends_with(":started"))
        .filter(|k| {
            redis::cmd("GET")
                .arg(*k)
                .query::<Option<String>>(c)
                .ok()
                .flatten()
                .is_some_and(|v| v.contains(&format!("\"class\":\"{class}\"")))
        })
        .count()
}

#[test]
fn a_broken_key_holds_only_its_slots_and_term_still_ends_the_process() {
    let url = support::url();
    let ns = support::namespace("broken-key");
    let mut c = con(&url);
    let failed = format!("{ns}:failed");
    // The failure list is a string: no failure can be recorded until someone repairs it.
    let _: () = redis::cmd("SET")
        .arg(&failed)
        .arg("oops")
        .query(&mut c)
        .unwrap();
    let queue = format!("{ns}:queue:default");
    for _ in 0..2 {
        push(&mut c, &queue, r#"{"class":"Fail","args":["boom"]}"#);
    }
    for _ in 0..40 {
        push(&mut c, &queue, r#"{"class":"Noop","args":[]}"#);
    }
    let mut w = WorkerProc::start(&url, &ns, 4, &[("RESQUE_TERM_TIMEOUT", "1")]);
    // The two slots holding the failed jobs wait; the other two drain everything else.
    wait_until(30, "the 40 Noop jobs processed", || {
        (get_i64(&mut c, &format!("{ns}:stat:processed")) >= 40).then_some(())
    });
    let len: i64 = redis::cmd("LLEN").arg(&queue).query(&mut c).unwrap();
    assert_eq!(len, 0, "jobs left in the queue");
    assert_eq!(
        records_with(&mut c, &ns, "Fail"),
        2,
        "the failed jobs are not held"
    );
    let named = format!("WRONGTYPE at {failed}");
    // Reported again while it lasts (every 10 s), not once and then silence.
    wait_until(25, "the refusal reported twice", || {
        (w.stderr().matches(&named).count() >= 2).then_some(())
    });
    let reports = w.stderr().matches(&named).count();
    let t = Instant::now();
    w.signal("TERM");
    let status = w.wait_exit(15);
    let took = t.elapsed();
    let log = w.stderr();
    assert!(status.success(), "exit {status:?}:\n{log}");
    assert!(log.contains("left for pruning"), "{log}");
    // Nothing lost: the records stay, their ids registered for pruning to find.
    assert_eq!(records_with(&mut c, &ns, "Fail"), 2, "{log}");
    let registered: i64 = redis::cmd("SCARD")
        .arg(format!("{ns}:workers"))
        .query(&mut c)
        .unwrap();
    assert_eq!(registered, 2, "only the slots holding jobs stay registered");
    assert_eq!(get_i64(&mut c, &format!("{ns}:stat:processed")), 40);
    println!(
        "AUDIT broken-key: processed=40 held_in_records=2 reports={reports} term_to_exit_ms={}",
        took.as_millis()
    );
}

#[test]
fn with_redis_down_term_ends_the_process_and_says_what_it_leaves() {
    let server = RedisServer::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let url = server.url();
    let ns = support::namespace("down-term");
    let mut c = con(&url);
    let queue = format!("{ns}:queue:default");
    for _ in 0..2 {
        push(&mut c, &queue, r#"{"class":"Sleep","args":[1500]}"#);
    }
    let mut w = WorkerProc::start(&url, &ns, 2, &[("RESQUE_TERM_TIMEOUT", "1")]);
    wait_until(10, "both jobs running", || {
        (records_with(&mut c, &ns, "Sleep") == 2).then_some(())
    });
    drop(c);
    server.stop();
    let t = Instant::now();
    w.signal("TERM");
    let status = w.wait_exit(20);
    let took = t.elapsed();
    let log = w.stderr();
    assert!(status.success(), "exit {status:?}:\n{log}");
    assert!(log.contains("left for pruning"), "{log}");
    server.restart();
    let mut c = con(&url);
    // The jobs are still in their records, for pruning.
    assert_eq!(records_with(&mut c, &ns, "Sleep"), 2, "{log}");
    println!(
        "AUDIT redis-down-term: term_timeout_ms=1000 term_to_exit_ms={} records_left=2",
        took.as_millis()
    );
}

#[test]
fn a_handlers_command_survives_an_idle_close() {
    let server = RedisServer::start(&["--timeout", "1"]);
    let url = server.url();
    let ns = support::namespace("idle-close");
    let mut w = WorkerProc::start(&url, &ns, 1, &[("INTERVAL", "5")]);
    // Every connection of the worker (and of its Echo handler) stays idle for 2.5 s, past
    // the server's 1 s timeout, which closes it (the idle time is what is under test).
    std::thread::sleep(Duration::from_millis(2500));
    let mut c = con(&url);
    push(
        &mut c,
        &format!("{ns}:queue:default"),
        r#"{"class":"Echo","args":["hi"]}"#,
    );
    wait_until(15, "the job to finish", || {
        (get_i64(&mut c, &format!("{ns}:stat:processed")) >= 1).then_some(())
    });
    let echoed: i64 = redis::cmd("LLEN")
        .arg(format!("{ns}:compat:echo"))
        .query(&mut c)
        .unwrap();
    let failures: i64 = redis::cmd("LLEN")
        .arg(format!("{ns}:failed"))
        .query(&mut c)
        .unwrap();
    let log = w.stderr();
    assert_eq!(failures, 0, "the handler's command failed:\n{log}");
    assert_eq!(echoed, 1, "{log}");
    assert!(
        log.contains("closed while idle"),
        "the close was not logged:\n{log}"
    );
    w.signal("QUIT");
    w.wait_exit(10);
    println!("AUDIT idle-close: handler_command_ok=1 failures=0");
}

#[test]
fn idle_slots_reserve_on_their_own_when_no_connection_can_be_made() {
    let server = RedisServer::start(&[]);
    let url = server.url();
    let ns = support::namespace("maxclients");
    let mut w = WorkerProc::start(&url, &ns, 2, &[("INTERVAL", "1")]);
    let mut c = con(&url);
    // Wait for the wake-up connection, then let no connection in beyond those open now and
    // close the wake-up connections: they cannot come back.
    wait_until(10, "the tracking connection", || {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
        list.lines().any(|l| l.contains("flags=t")).then_some(())
    });
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
    let open = list.lines().count();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg(open.to_string())
        .query(&mut c)
        .unwrap();
    for l in list
        .lines()
        .filter(|l| l.contains("flags=t") || l.contains("cmd=blmove"))
    {
        if let Some(id) = l.split(' ').find_map(|f| f.strip_prefix("id=")) {
            let _: redis::RedisResult<()> = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(id)
                .query(&mut c);
        }
    }
    wait_until(10, "the lost wake-up connection logged", || {
        w.stderr().contains("maxclients").then_some(())
    });
    push(
        &mut c,
        &format!("{ns}:queue:default"),
        r#"{"class":"Noop","args":[]}"#,
    );
    wait_until(10, "the job picked up by the periodic reserve", || {
        (get_i64(&mut c, &format!("{ns}:stat:processed")) >= 1).then_some(())
    });
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg("10000")
        .query(&mut c)
        .unwrap();
    w.signal("QUIT");
    w.wait_exit(10);
    println!("AUDIT maxclients: picked_up=1 open_connections={open}");
}

/// `LPOP` calls so far (inside scripts too).
fn lpops(c: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_lpop:calls="))
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_thousand_queues_cost_what_one_does() {
    let server = RedisServer::start(&[]);
    let url = server.url();
    let ns = support::namespace("queues");
    let mut c = con(&url);
    let names: Vec<String> = (0..1000).map(|i| format!("q{i:04}")).collect();
    let _: () = redis::cmd("SADD")
        .arg(format!("{ns}:queues"))
        .arg(&names)
        .query(&mut c)
        .unwrap();
    // A long INTERVAL: a pick-up well before it is no poll.
    let mut w = WorkerProc::start(&url, &ns, 4, &[("QUEUES", "*"), ("INTERVAL", "30")]);
    let last = format!("{ns}:queue:{}", names[999]);
    let t = Instant::now();
    push(&mut c, &last, r#"{"class":"Noop","args":[]}"#);
    wait_until(10, "the job on the last queue picked up", || {
        (get_i64(&mut c, &format!("{ns}:stat:processed")) >= 1).then_some(())
    });
    let pickup = t.elapsed();
    let before = lpops(&mut c);
    for _ in 0..300 {
        push(&mut c, &last, r#"{"class":"Noop","args":[]}"#);
    }
    wait_until(30, "the 300 jobs drained", || {
        (get_i64(&mut c, &format!("{ns}:stat:processed")) >= 301).then_some(())
    });
    let per_job = (lpops(&mut c) - before) as f64 / 300.0;
    assert!(
        per_job < 10.0,
        "{per_job} LPOPs per job: reserves still walk the empty queues"
    );
    w.signal("QUIT");
    w.wait_exit(10);
    println!(
        "AUDIT queues-1000: last_queue_pickup_ms={} lpops_per_job={per_job:.2}",
        pickup.as_millis()
    );
}

/// Every command the server ran so far (`INFO commandstats`, INFO itself left out).
fn commands(c: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    info.lines()
        .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info:"))
        .filter_map(|l| l.split("calls=").nth(1))
        .filter_map(|v| v.split(',').next())
        .filter_map(|v| v.parse::<u64>().ok())
        .sum()
}

/// Whether the worker's two invalidation-tracking connections are up (`CLIENT LIST` flag
/// `t`): until then it is still starting, and its start-up reads are no idle traffic.
fn tracking_up(c: &mut redis::Connection) -> Option<()> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(c).ok()?;
    let tracking = list
        .lines()
        .filter(|l| {
            l.split(' ')
                .any(|f| f.strip_prefix("flags=").is_some_and(|v| v.contains('t')))
        })
        .count();
    (tracking >= 2).then_some(())
}

/// The server's commands per second over `window`.
fn commands_per_second(c: &mut redis::Connection, window: Duration) -> f64 {
    let before = commands(c);
    std::thread::sleep(window);
    (commands(c) - before) as f64 / window.as_secs_f64()
}

#[test]
fn queue_keys_that_are_no_list_cost_nothing_while_idle() {
    let server = RedisServer::start(&[]);
    let url = server.url();
    let ns = support::namespace("notalist");
    let mut c = con(&url);
    let _: () = redis::cmd("SET")
        .arg(format!("{ns}:queue:b"))
        .arg("not a queue")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("ZADD")
        .arg(format!("{ns}:queue:c"))
        .arg(1)
        .arg("not a list either")
        .query(&mut c)
        .unwrap();
    // A long INTERVAL: anything sent while idle is a wake-up, not the periodic reserve.
    let mut w = WorkerProc::start(&url, &ns, 2, &[("QUEUES", "b,c,a"), ("INTERVAL", "30")]);
    let queue_a = format!("{ns}:queue:a");
    push(&mut c, &queue_a, r#"{"class":"Noop","args":[]}"#);
    wait_until(10, "the first job picked up", || {
        (get_i64(&mut c, &format!("{ns}:stat:processed")) >= 1).then_some(())
    });
    wait_until(10, "the worker's tracking connections", || {
        tracking_up(&mut c)
    });
    // A measuring window (not a synchronisation): a loop of wake-ups would run thousands of
    // commands in it.
    let rate = commands_per_second(&mut c, Duration::from_secs(3));
    assert!(
        rate < 5.0,
        "{rate:.1} commands/s while idle: keys that are no list keep waking the slots"
    );
    let t = Instant::now();
    push(&mut c, &queue_a, r#"{"class":"Noop","args":[]}"#);
    wait_until(5, "the second job picked up", || {
        (get_i64(&mut c, &format!("{ns}:stat:processed")) >= 2).then_some(())
    });
    let pickup = t.elapsed();
    w.signal("QUIT");
    w.wait_exit(10);
    println!(
        "AUDIT not-a-list: idle_commands_per_s={rate:.2} pickup_ms={}",
        pickup.as_millis()
    );
}

#[test]
fn a_queue_closed_by_a_full_limit_is_not_polled_in_a_loop() {
    // A server of its own: the rate counts every command the server runs.
    let server = RedisServer::start(&[]);
    let url = server.url();
    let ns = support::namespace("closed");
    let mut c = con(&url);
    let out = std::process::Command::new(support::resq_bin())
        .args(["--url", &url, "--namespace", &ns])
        .args(["limits", "set", "one", "--concurrency", "1", "--queue", "q"])
        .env_remove("REDIS_URL")
        .env_remove("RESQUE_NAMESPACE")
        .output()
        .expect("run resq");
    assert!(out.status.success(), "{}", support::cli::stderr(&out));
    let mut w = WorkerProc::start(&url, &ns, 4, &[("QUEUES", "q"), ("INTERVAL", "30")]);
    let queue = format!("{ns}:queue:q");
    for _ in 0..3 {
        push(&mut c, &queue, r#"{"class":"Sleep","args":[1500]}"#);
    }
    wait_until(10, "the first job running", || {
        (redis::cmd("LLEN").arg(&queue).query::<i64>(&mut c).unwrap() == 2).then_some(())
    });
    // A measuring window (not a synchronisation) while one job runs and two wait behind the
    // limit.
    let rate = commands_per_second(&mut c, Duration::from_secs(1));
    assert!(
        rate < 500.0,
        "{rate:.0} commands/s while the queue is closed: the waiting slots poll it in a loop"
    );
    wait_until(15, "the three jobs run one after another", || {
        (get_i64(&mut c, &format!("{ns}:stat:processed")) >= 3).then_some(())
    });
    w.signal("QUIT");
    w.wait_exit(10);
    println!("AUDIT closed-queue: commands_per_s={rate:.1}");
}

/// `VmHWM` and `VmRSS` of a process, in bytes.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (field("VmHWM:"), field("VmRSS:"))
}

#[test]
fn a_20_mb_non_ascii_payload_never_holds_redis_nor_the_worker() {
    let server = RedisServer::start(&[
        "--slowlog-log-slower-than",
        "0",
        "--slowlog-max-len",
        "100000",
    ]);
    let url = server.url();
    let ns = support::namespace("big");
    let mut w = WorkerProc::start(&url, &ns, 2, &[]);
    let (_, rss_idle) = memory(w.pid());
    let mut c = con(&url);
    let body = "é".repeat(10 * 1024 * 1024);
    let good = format!(r#"{{"class":"Noop","args":["{body}"]}}"#);
    let bad = format!(r#"{{"class":"Noop","args":["{body}"]"#);
    let size = good.len();
    let _: () = redis::cmd("SLOWLOG").arg("RESET").query(&mut c).unwrap();
    let queue = format!("{ns}:queue:default");
    push(&mut c, &queue, &good);
    push(&mut c, &queue, &bad);
    wait_until(60, "both payloads handled", || {
        (get_i64(&mut c, &format!("{ns}:stat:processed")) >= 2).then_some(())
    });
    let failures: Vec<String> = redis::cmd("LRANGE")
        .arg(format!("{ns}:failed"))
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(failures.len(), 1, "{:?}", w.stderr());
    assert!(
        failures[0].contains("Resq::MalformedPayload"),
        "{}",
        &failures[0][..200]
    );
    assert!(
        failures[0].contains("bytes in all"),
        "the entry quotes the whole payload"
    );
    // The longest a script held Redis, and the longest plain command (a GETRANGE chunk).
    let log: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(100000)
        .query(&mut c)
        .unwrap();
    let mut longest_script = 0i64;
    let mut longest = 0i64;
    for entry in &log {
        let redis::Value::Array(f) = entry else {
            continue;
        };
        let (Some(redis::Value::Int(us)), Some(redis::Value::Array(args))) = (f.get(2), f.get(3))
        else {
            continue;
        };
        let name = match args.first() {
            Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).to_ascii_uppercase(),
            _ => String::new(),
        };
        if name.starts_with("EVAL") || name.starts_with("FCALL") {
            longest_script = longest_script.max(*us);
        }
        longest = longest.max(*us);
    }
    let (peak, _) = memory(w.pid());
    // Idle again: the memory of the large job is given back.
    let (_, rss_after) = memory(w.pid());
    assert!(
        peak < rss_idle + 6 * size as u64,
        "peak RSS {peak} for a {size}-byte payload (idle {rss_idle})"
    );
    assert!(
        rss_after < rss_idle + 2 * size as u64,
        "RSS {rss_after} after the job (idle {rss_idle}): memory not given back"
    );
    w.signal("QUIT");
    w.wait_exit(10);
    println!(
        "AUDIT big-payload: bytes={size} longest_script_us={longest_script} longest_command_us={longest} rss_idle_mib={} peak_mib={} rss_after_mib={}",
        rss_idle >> 20,
        peak >> 20,
        rss_after >> 20
    );
}

#[test]
fn bad_queue_names_never_stop_a_wildcard_worker() {
    let server = RedisServer::start(&[]);
    let url = server.url();
    let ns = support::namespace("badnames");
    let mut c = con(&url);
    let job = r#"{"class":"Echo","args":["a"]}"#;
    let _: () = redis::cmd("SADD")
        .arg(format!("{ns}:queues"))
        .arg(&b"bad\xff\xfe"[..])
        .arg("tab\there")
        .arg("line\nbreak")
        .arg("good")
        .query(&mut c)
        .expect("SADD");
    push(&mut c, &format!("{ns}:queue:good"), job);
    push(&mut c, &format!("{ns}:queue:tab\there"), job);
    let mut w = WorkerProc::start(&url, &ns, 2, &[("QUEUES", "*")]);
    wait_until(30, "the good queue's job done", || {
        (get_i64(&mut c, &format!("{ns}:stat:processed")) == 1).then_some(())
    });
    // A queue added later is served too (the list is read again with the bad names in it).
    let _: () = redis::cmd("SADD")
        .arg(format!("{ns}:queues"))
        .arg("later")
        .query(&mut c)
        .expect("SADD");
    push(&mut c, &format!("{ns}:queue:later"), job);
    wait_until(30, "the later queue's job done", || {
        (get_i64(&mut c, &format!("{ns}:stat:processed")) == 2).then_some(())
    });
    // The tab queue's job is left for a worker that can serve it.
    let left: i64 = redis::cmd("LLEN")
        .arg(format!("{ns}:queue:tab\there"))
        .query(&mut c)
        .expect("LLEN");
    assert_eq!(left, 1);
    w.signal("QUIT");
    assert!(w.wait_exit(30).success());
    let log = w.stderr();
    for (name, shown) in [
        ("not UTF-8", "bad\\xff\\xfe"),
        ("tab", "tab\\there"),
        ("newline", "line\\nbreak"),
    ] {
        assert_eq!(
            log.matches(shown).count(),
            1,
            "the {name} queue should be named once:\n{log}"
        );
    }
}
