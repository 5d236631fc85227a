//! The dashboard at scale (issue 16 §4): fills a private `redis-server` with 100,000 failure
//! entries, one queue of 10,000 jobs and 500 more queues (plus 100 workers, 6,000 delayed
//! items, 1,000 resque-status statuses and a month of history samples), serves `resq web` on it
//! from a child process (this binary run again as `resq web`), and reports each page's p50 /
//! p99 over sequential requests (with the Redis commands each request costs, and a plain PING
//! round trip to compare with) and the server's resident memory before, between and after two
//! passes over every page.
//!
//! Issue 40's cases are in the same namespace: a batch of 10,000 queued members behind 89,000
//! jobs of their queue, a keyed limit of 1,000,000 partitions with nothing in use, and
//! 200,000 empty names in `<ns>:queues`; and the time of an `/overview` sent while the slowest
//! page runs.
//!
//! Then it times the background count of the whole failure list and three bulk actions over
//! it. `cargo bench --bench web` (about a minute after the build); `WEB_BENCH_N` requests per
//! page per pass (default 40). Numbers go to docs/performance.md by hand; nothing is asserted
//! but every page answering 200.

/// The key layout (the crate's one place that names keys): this program reads Redis directly.
#[allow(dead_code)]
#[path = "../src/keys.rs"]
mod keys;

use keys::Keys;
use resq::admin::element_id;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const FAILURES: usize = 100_000;
const BIG_QUEUE: usize = 10_000;
const QUEUES: usize = 500;
const NS: &str = "resque";
/// Issue 40: a batch's queued members, the jobs ahead of them, limit partitions, empty names.
const BATCH_MEMBERS: usize = 10_000;
const AHEAD: usize = 89_000;
const PARTITIONS: usize = 1_000_000;
const EMPTY_NAMES: usize = 200_000;
/// The batch's id.
const BATCH: &str = "b4c0ffee0000000000000000000000aa";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A failure entry in Ruby's shape, about 900 bytes (a ten-line backtrace).
fn failure(i: usize) -> String {
    const CLASSES: &[&str] = &[
        "Archive",
        "ActionMailer::MailDeliveryJob",
        "NightlyReport",
        "Billing::Charge",
        "Search::Reindex",
        "Webhooks::Deliver",
        "Thumbnail",
        "Import::Row",
        "Export::Csv",
        "Cleanup",
    ];
    const EXCEPTIONS: &[(&str, &str)] = &[
        (
            "Net::ReadTimeout",
            "Net::ReadTimeout with #<TCPSocket:(closed)>",
        ),
        ("Errno::ECONNRESET", "Connection reset by peer"),
        (
            "ActiveRecord::Deadlocked",
            "Mysql2::Error: Deadlock found when trying to get lock",
        ),
        ("Stripe::CardError", "Your card was declined."),
        ("RuntimeError", "unexpected state"),
        (
            "Resque::DirtyExit",
            "Child process received unhandled signal SIGKILL",
        ),
        ("NoMethodError", "undefined method `id' for nil:NilClass"),
    ];
    let class = if i % 10_000 == 4_321 {
        "RareJob"
    } else {
        CLASSES[i % CLASSES.len()]
    };
    let (exc, err) = EXCEPTIONS[i % EXCEPTIONS.len()];
    let err = if i % 25_000 == 17 {
        format!("{err} (needle {i})")
    } else {
        err.to_string()
    };
    let backtrace: Vec<String> = (0..10)
        .map(|l| format!("/app/vendor/bundle/ruby/3.1.0/gems/app-1.0/lib/app/jobs/step_{l}.rb:{}:in `perform'", 10 + l))
        .collect();
    serde_json::json!({
        "failed_at": "2026/11/21 19:26:58 UTC",
        "payload": {"class": class, "args": [i, "main", {"user_id": i * 7, "attempt": 1}]},
        "exception": exc,
        "error": err,
        "backtrace": backtrace,
        "worker": format!("app-{}:{}:default", i % 8, 20_000 + i % 97),
        "queue": format!("q{:03}", i % QUEUES),
    })
    .to_string()
}

fn fill(url: &str) {
    let mut con = redis::Client::open(url)
        .expect("url")
        .get_connection()
        .expect("connect");
    let k = Keys::new(NS);
    let now = chrono::Utc::now();
    let t0 = Instant::now();
    for chunk in (0..FAILURES).collect::<Vec<_>>().chunks(5_000) {
        let mut p = redis::pipe();
        for i in chunk {
            p.rpush(k.failed(), failure(*i)).ignore();
        }
        let () = p.query(&mut con).expect("failures");
    }
    let mut p = redis::pipe();
    p.sadd(k.queues(), "big").ignore();
    for i in 0..BIG_QUEUE {
        let job = serde_json::json!({"class": "Archive", "args": [i, "main"],
            "enqueued_at": now.timestamp() - (BIG_QUEUE - i) as i64});
        p.rpush(k.queue("big"), job.to_string()).ignore();
    }
    for q in 0..QUEUES {
        let name = format!("q{q:03}");
        p.sadd(k.queues(), &name).ignore();
        for j in 0..2 {
            p.rpush(k.queue(&name), format!(r#"{{"class":"Job","args":[{j}]}}"#))
                .ignore();
        }
    }
    for w in 0..100 {
        let id = format!(
            "web-{}~resq:{}-{}:big,default",
            w / 16,
            4000 + w / 16,
            w % 16
        );
        p.sadd(k.workers(), &id).ignore();
        p.hset(k.heartbeats(), &id, resq::time::heartbeat(now))
            .ignore();
        p.set(k.worker_started(&id), resq::time::started(now))
            .ignore();
        if w % 3 == 0 {
            let rec = serde_json::json!({"queue": "big", "run_at": resq::time::run_at(now),
                "payload": {"class": "Archive", "args": [w]}});
            p.set(k.worker(&id), rec.to_string()).ignore();
        }
    }
    for t in 0..2_000_i64 {
        let ts = now.timestamp() + 60 * t;
        for j in 0..3 {
            let item = format!(r#"{{"class":"Remind","args":[{t},{j}],"queue":"default"}}"#);
            p.rpush(k.delayed_bucket(ts), &item).ignore();
            p.sadd(k.timestamps(&item), Keys::delayed_bucket_member(ts))
                .ignore();
        }
        p.zadd(k.delayed_schedule(), ts, ts).ignore();
    }
    for s in 0..1_000 {
        let uuid = format!("{:032x}", 0x5eed_u128 * 1_000_003 + s as u128);
        let status = serde_json::json!({"time": now.timestamp() - s, "status": "working",
            "uuid": uuid, "options": {}, "name": "ImportJob({})", "num": s % 10, "total": 10,
            "message": "importing"});
        p.zadd(k.resque_statuses(), &uuid, now.timestamp() - s)
            .ignore();
        p.set(k.resque_status(&uuid), status.to_string()).ignore();
    }
    for s in 0..20 {
        p.hset(
            k.persistent_schedules(),
            format!("schedule-{s}"),
            format!(
                r#"{{"class":"Tick","queue":"default","args":[{s}],"every":"{}m"}}"#,
                s + 1
            ),
        )
        .ignore();
    }
    let minute = now.timestamp() / 60;
    for (n, m) in ((minute - 1_440)..=minute).enumerate() {
        p.set(
            k.history_minute(m),
            format!("{} {} {}", m * 60_000, n * 900, n * 3),
        )
        .ignore();
    }
    let hour = now.timestamp() / 3_600;
    for (n, h) in ((hour - 2_160)..=hour).enumerate() {
        p.set(
            k.history_hour(h),
            format!("{} {} {}", h * 3_600_000, n * 54_000, n * 180),
        )
        .ignore();
    }
    p.set(k.stat_processed(), 1_440 * 900).ignore();
    p.set(k.stat_failed(), FAILURES).ignore();
    let () = p.query(&mut con).expect("fill");
    fill_issue_40(&mut con, &k);
    let used: String = redis::cmd("INFO")
        .arg("memory")
        .query(&mut con)
        .expect("info");
    let used = used
        .lines()
        .find_map(|l| l.strip_prefix("used_memory_human:"))
        .unwrap_or("?")
        .trim()
        .to_string();
    println!(
        "filled in {:.1}s: {FAILURES} failures, {BIG_QUEUE} jobs in `big`, {} queues, a batch of \
         {BATCH_MEMBERS} behind {AHEAD} jobs, {PARTITIONS} limit partitions, {EMPTY_NAMES} empty \
         queue names, Redis {used}",
        t0.elapsed().as_secs_f64(),
        QUEUES + 2
    );
}

/// Issue 40's cases: a 10,000-member batch queued behind 89,000 jobs, a keyed limit of
/// 1,000,000 empty partitions, 200,000 empty queue names.
fn fill_issue_40(con: &mut redis::Connection, k: &Keys) {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let q = "batchq";
    let mut p = redis::pipe();
    p.sadd(k.queues(), q).ignore();
    for i in 0..AHEAD {
        p.rpush(k.queue(q), format!(r#"{{"class":"Ahead","args":[{i}]}}"#))
            .ignore();
        if i % 10_000 == 9_999 {
            let () = p.query(con).expect("ahead");
            p = redis::pipe();
        }
    }
    p.hset_multiple(
        k.batch(BATCH),
        &[
            ("total", BATCH_MEMBERS.to_string()),
            ("pending", BATCH_MEMBERS.to_string()),
            ("unsucceeded", BATCH_MEMBERS.to_string()),
            ("failed", "0".to_string()),
            ("created_at", now_ms.to_string()),
            (
                "description",
                "10,000 members behind 89,000 jobs".to_string(),
            ),
        ],
    )
    .ignore();
    p.zadd(k.batches(), BATCH, now_ms).ignore();
    for i in 0..BATCH_MEMBERS {
        let id = format!("{:032x}", (0xba7c_u128 << 64) | i as u128);
        p.sadd(k.batch_jobs(BATCH), &id).ignore();
        p.hset_multiple(
            k.job_record(&id),
            &[
                ("state", "queued"),
                ("queue", q),
                ("class", "Member"),
                ("batch", BATCH),
            ],
        )
        .ignore();
        p.rpush(
            k.queue(q),
            format!(r#"{{"class":"Member","args":[{i}],"resq_id":"{id}"}}"#),
        )
        .ignore();
    }
    let () = p.query(con).expect("batch");
    let limit = serde_json::json!({"name": "per_account", "kind": "concurrency", "limit": 5,
        "key": "acct-{args.0}"})
    .to_string();
    let () = redis::cmd("HSET")
        .arg(k.limits_declared())
        .arg("per_account")
        .arg(limit)
        .query(con)
        .expect("limit");
    for (key, n, prefix) in [
        (k.limit_parts("per_account"), PARTITIONS, "acct-"),
        (k.queues(), EMPTY_NAMES, "empty-"),
    ] {
        let mut p = redis::pipe();
        for chunk in (0..n).collect::<Vec<_>>().chunks(1_000) {
            let names: Vec<String> = chunk.iter().map(|i| format!("{prefix}{i:07}")).collect();
            p.sadd(&key, names).ignore();
        }
        let () = p.query(con).expect("names");
    }
}

/// One `GET`, the connection closed after it: (status, body bytes, seconds).
fn get(addr: &str, path: &str) -> (u16, usize, f64) {
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).expect("read");
    let secs = t.elapsed().as_secs_f64();
    let head = String::from_utf8_lossy(&buf[..buf.len().min(64)]).to_string();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, buf.len(), secs)
}

/// A page's HTML.
fn page_text(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut body = String::new();
    let _ = s.read_to_string(&mut body);
    body
}

/// A form `POST`; returns where it redirected to.
fn post(addr: &str, path: &str, form: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
        form.len()
    )
    .expect("send");
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    reply
        .lines()
        .find_map(|l| l.strip_prefix("location: "))
        .unwrap_or_else(|| reply.lines().next().unwrap_or(""))
        .to_string()
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The median of unsorted `ms`.
fn pct_of(ms: &[f64]) -> f64 {
    let mut v = ms.to_vec();
    v.sort_by(f64::total_cmp);
    pct(&v, 0.5)
}

/// The commands the server has processed so far (`INFO stats`; the `INFO` itself counts one).
fn commands_processed(url: &str) -> u64 {
    let info: String = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .and_then(|mut c| redis::cmd("INFO").arg("stats").query(&mut c))
        .expect("INFO stats");
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    // Run again as the server: `resq web`, exactly.
    if let Ok(spec) = std::env::var("RESQ_WEB_BENCH_SERVE") {
        let (url, bind) = spec.split_once(' ').expect("url bind");
        let code = resq::cli::run_from(
            [
                "resq",
                "--url",
                url,
                "--namespace",
                NS,
                "web",
                "--bind",
                bind,
            ],
            resq::Registry::new(),
        );
        std::process::exit(if code == std::process::ExitCode::SUCCESS {
            0
        } else {
            1
        });
    }
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list`
    }
    let n: usize = std::env::var("WEB_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("resq-web-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let mut redis: Child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server (apt-get install -y redis-server)");
    let url = format!("redis://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while redis::Client::open(url.as_str())
        .and_then(|c| c.get_connection())
        .is_err()
    {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    fill(&url);
    let web_port = free_port();
    let addr = format!("127.0.0.1:{web_port}");
    let mut server = Command::new(std::env::current_exe().expect("exe"))
        .env("RESQ_WEB_BENCH_SERVE", format!("{url} {addr}"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("server");
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(&addr).is_err() {
        assert!(Instant::now() < deadline, "resq web did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = server.id();
    let start_rss = rss_kib(pid, "VmRSS:");
    let detail = format!(
        "/failure?id={}&at=50000",
        element_id(failure(50_000).as_bytes())
    );
    let pages: Vec<(&str, String)> = vec![
        ("overview (24 h graph)", "/".into()),
        ("overview (90 d graph)", "/overview?range=90d".into()),
        ("queues (501)", "/queues".into()),
        ("queue `big`, first page", "/queue?name=big".into()),
        (
            "queue `big`, last page",
            "/queue?name=big&offset=9975".into(),
        ),
        ("workers (100)", "/workers".into()),
        ("failed, newest page", "/failed".into()),
        ("failed, oldest page", "/failed?before=25".into()),
        (
            "failed, common exception filter",
            "/failed?exception=Net%3A%3AReadTimeout".into(),
        ),
        (
            "failed, rare class (scan budget)",
            "/failed?class=RareJob".into(),
        ),
        (
            "failed, substring search (scan budget)",
            "/failed?q=needle".into(),
        ),
        ("failed, grouped by class", "/failed?group=class".into()),
        ("one failure (by id)", detail),
        ("delayed (2,000 timestamps)", "/delayed".into()),
        ("recurring", "/recurring".into()),
        ("jobs (1,000 statuses)", "/jobs".into()),
        ("jobs, queued tab", "/jobs?state=queued".into()),
        ("limits (1,000,000 partitions)", "/limits".into()),
        (
            "batch of 10,000 behind 89,000 jobs",
            format!("/batch?id={BATCH}"),
        ),
        ("batches", "/batches".into()),
        ("stats", "/stats".into()),
        ("api/live", "/api/live".into()),
    ];
    // The first visit of a grouped view starts the background count of the whole list: how
    // long until it is there.
    let t = Instant::now();
    let deadline = t + Duration::from_secs(60);
    let count_secs = loop {
        if page_text(&addr, "/failed?group=class").contains("Counts over all")
            || Instant::now() > deadline
        {
            break t.elapsed().as_secs_f64();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Warm up.
    for (_, path) in &pages {
        get(&addr, path);
    }
    let warm_rss = rss_kib(pid, "VmRSS:");
    let mut results: Vec<(String, Vec<f64>, usize)> = pages
        .iter()
        .map(|(name, _)| (name.to_string(), Vec::new(), 0))
        .collect();
    // Redis commands per request of each page (the server's count over the requests).
    let mut commands = vec![0u64; pages.len()];
    let mut pass_rss = Vec::new();
    for _pass in 0..2 {
        for (i, (name, path)) in pages.iter().enumerate() {
            let before = commands_processed(&url);
            for _ in 0..n {
                let (status, bytes, secs) = get(&addr, path);
                assert_eq!(status, 200, "{name}: {path} answered {status}");
                results[i].1.push(secs * 1000.0);
                results[i].2 = bytes;
            }
            commands[i] += commands_processed(&url).saturating_sub(before + 1);
        }
        pass_rss.push(rss_kib(pid, "VmRSS:"));
    }
    // A plain PING round trip, the unit the pages' times compare with.
    let ping_ms = {
        let mut c = redis::Client::open(url.as_str())
            .and_then(|c| c.get_connection())
            .expect("redis");
        let mut ms: Vec<f64> = (0..2 * n)
            .map(|_| {
                let t = Instant::now();
                let _: String = redis::cmd("PING").query(&mut c).expect("ping");
                t.elapsed().as_secs_f64() * 1000.0
            })
            .collect();
        ms.sort_by(f64::total_cmp);
        pct(&ms, 0.5)
    };
    // Bulk actions over the whole list (they change it, so they run last).
    let token = {
        let page = page_text(&addr, "/failed");
        let marker = "name=\"_csrf\" value=\"";
        let i = page.find(marker).expect("token") + marker.len();
        page[i..i + 64].to_string()
    };
    let mut bulk = Vec::new();
    for (what, form) in [
        (
            "retry all matching a rare class (10 of 100,000)",
            "action=retry&class=RareJob",
        ),
        (
            "remove all matching an exception (14,286 of 100,000)",
            "action=remove&exception=RuntimeError",
        ),
        (
            "retry all matching a class (8,572 of the 85,714 left)",
            "action=retry&class=Thumbnail",
        ),
    ] {
        let body = format!("_csrf={token}&{form}");
        let t = Instant::now();
        let reply = post(&addr, "/failed/bulk", &body);
        bulk.push((what, t.elapsed().as_secs_f64(), reply));
    }
    // An overview sent while the slowest page runs: how long each took.
    let slow = results
        .iter()
        .zip(&pages)
        .max_by(|a, b| pct_of(&a.0 .1).total_cmp(&pct_of(&b.0 .1)))
        .map(|(_, (name, path))| (name.to_string(), path.clone()))
        .expect("pages");
    let during = {
        let (a, path) = (addr.clone(), slow.1.clone());
        let t = std::thread::spawn(move || get(&a, &path).2);
        std::thread::sleep(Duration::from_millis(2));
        let (_, _, overview) = get(&addr, "/overview");
        (t.join().expect("slow page"), overview)
    };
    let peak = rss_kib(pid, "VmHWM:");
    println!();
    println!("| page | p50 ms | p99 ms | max ms | KiB | Redis commands per request |");
    println!("|---|---:|---:|---:|---:|---:|");
    for ((name, mut ms, bytes), cmds) in results.into_iter().zip(&commands) {
        ms.sort_by(f64::total_cmp);
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {} | {} |",
            pct(&ms, 0.5),
            pct(&ms, 0.99),
            ms.last().copied().unwrap_or(0.0),
            bytes / 1024,
            cmds / (2 * n as u64)
        );
    }
    println!();
    println!("a PING round trip: p50 {ping_ms:.3} ms");
    println!();
    println!(
        "server RSS: {:.1} MiB after start, {:.1} MiB after warm-up, {:.1} MiB after pass 1, {:.1} MiB after pass 2 (peak {:.1} MiB); {} requests per page",
        start_rss as f64 / 1024.0,
        warm_rss as f64 / 1024.0,
        pass_rss[0] as f64 / 1024.0,
        pass_rss[1] as f64 / 1024.0,
        peak as f64 / 1024.0,
        2 * n
    );
    println!(
        "slowest page ({}) took {:.1} ms while an /overview sent 2 ms into it took {:.1} ms",
        slow.0,
        during.0 * 1000.0,
        during.1 * 1000.0
    );
    println!(
        "background count of all {FAILURES} entries by class/exception/queue: {count_secs:.2} s"
    );
    for (what, secs, reply) in bulk {
        println!("bulk: {what}: {secs:.2} s → {reply}");
    }
    let _ = server.kill();
    let _ = server.wait();
    let _ = redis.kill();
    let _ = redis.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
