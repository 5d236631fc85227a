//! Hostile-Redis measurements (issue 12), one worker build or two compared case by case.
//!
//! Runs the `compat_worker` example as its own process against private `redis-server`s on free
//! loopback ports (one server per case, under the test guard of `src/testing/server.rs`) and
//! prints markdown tables:
//!
//! * `queues` — `QUEUES=*` over 300 and 1,000 registered queues (`q0000`, `q0001`, … so the
//!   wildcard's sorted order is known), `CONCURRENCY` 1 and 8, `INTERVAL=5`: idle Redis
//!   commands/s, pick-up latency (enqueue → the `Echo` job's own `RPUSH` seen by `BLPOP`) of a
//!   job on the queue at position 1, 40, 300 and 1,000, and the drain rate of `DRAIN_JOBS` `Noop`
//!   jobs all on the first queue, then all on the last.
//! * `payload` — one `Noop` job whose argument is 20 MB and 100 MB of `é` (2 bytes each), Redis
//!   started with `slowlog-log-slower-than 0`: the longest script call and the longest command the
//!   worker sent (from `SLOWLOG`), the longest a probe client `PING`ing every 10 ms waited and
//!   how many `BUSY` replies it got, the worker's peak RSS (`VmHWM`) and RSS after the job; and,
//!   for comparison, a plain `LPOP` of the same payload by `redis-cli` (a Ruby worker's `LPOP`).
//! * `term` — time from `TERM` to exit with `RESQUE_TERM_TIMEOUT=1` (a) while `<ns>:failed` is a
//!   string (WRONGTYPE for every failure entry) and two `Fail` jobs ran among 38 `Echo` jobs,
//!   `CONCURRENCY=4`, with an audit of every job by its marker argument (each must be in exactly
//!   one of: its queue, a worker record, a claim, the failure list, ran); (b) after Redis was
//!   stopped (`SHUTDOWN NOSAVE`) while two `Sleep 1500` jobs ran. A process still running after
//!   `TERM_CAP` seconds is killed (`SIGKILL`) and reported as not exiting.
//!
//! ```sh
//! cargo build --release --example compat_worker
//! cargo bench --bench hostile                       # this checkout's release compat_worker
//! WORKER_BIN=/path/to/compat_worker cargo bench --bench hostile
//! BASELINE_BIN=/path/to/old/compat_worker cargo bench --bench hostile   # before/after columns
//! ONLY=queues,term cargo bench --bench hostile
//! ```
//!
//! Settings (environment): `WORKER_BIN` (default `target/release/examples/compat_worker`),
//! `BASELINE_BIN` (a second build, run before `WORKER_BIN` in every case, labelled "before"),
//! `ONLY` (`queues`, `payload`, `term`), `PICKUP_SAMPLES` (40 per queue position),
//! `PICKUP_BUDGET` (15 s per queue position: a slow build gets fewer samples, the table says
//! how many), `IDLE_SECS` (20), `DRAIN_JOBS` (5000), `PAYLOAD_MB` (`20,100`), `PAYLOAD_WAIT`
//! (120 s for a payload job), `TERM_CAP` (60 s), `HOSTILE_LOGS` (the workers' stderr, default
//! `target/hostile-logs`). Nothing here asserts: it measures. Run it on a quiet machine.

#[path = "../src/testing/server.rs"]
mod server;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// The namespace every case uses (each case has a server of its own).
const NS: &str = "hostile";

/// Settings read from the environment.
struct Settings {
    /// `(label, binary)` in the order each case runs them.
    builds: Vec<(String, PathBuf)>,
    /// Pick-up samples per queue position.
    samples: usize,
    /// Pick-up sampling time per queue position.
    budget: Duration,
    /// Idle window.
    idle: Duration,
    /// Jobs per drain.
    drain_jobs: usize,
    /// Payload sizes, MB (10^6 bytes).
    payload_mb: Vec<u64>,
    /// Longest wait for a payload job.
    payload_wait: Duration,
    /// Longest wait for an exit after `TERM`.
    term_cap: Duration,
    /// Directory for the workers' stderr.
    logs: PathBuf,
}

/// A number from the environment, or `default`.
fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

impl Settings {
    /// Reads the settings.
    fn from_env() -> Settings {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let worker = std::env::var_os("WORKER_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target/release/examples/compat_worker"));
        let mut builds = Vec::new();
        if let Some(b) = std::env::var_os("BASELINE_BIN") {
            builds.push(("before".to_string(), PathBuf::from(b)));
            builds.push(("after".to_string(), worker));
        } else {
            builds.push(("this build".to_string(), worker));
        }
        for (_, b) in &builds {
            assert!(
                b.is_file(),
                "no worker binary at {} (cargo build --release --example compat_worker, or set WORKER_BIN)",
                b.display()
            );
        }
        Settings {
            builds,
            samples: env_num("PICKUP_SAMPLES", 40) as usize,
            budget: Duration::from_secs(env_num("PICKUP_BUDGET", 15)),
            idle: Duration::from_secs(env_num("IDLE_SECS", 20)),
            drain_jobs: env_num("DRAIN_JOBS", 5000) as usize,
            payload_mb: std::env::var("PAYLOAD_MB")
                .unwrap_or_else(|_| "20,100".into())
                .split(',')
                .filter_map(|s| s.trim().parse().ok())
                .collect(),
            payload_wait: Duration::from_secs(env_num("PAYLOAD_WAIT", 120)),
            term_cap: Duration::from_secs(env_num("TERM_CAP", 60)),
            logs: std::env::var_os("HOSTILE_LOGS")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("target/hostile-logs")),
        }
    }
}

/// The load average, as `uptime` prints it.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// A private redis-server (stopped by its guard when dropped) and its port.
struct Redis {
    /// The guard shell; dropping it stops the server.
    _guard: Child,
    /// Its port.
    port: u16,
    /// `redis://127.0.0.1:<port>`.
    url: String,
}

impl Redis {
    /// Starts a server with `extra` arguments.
    fn start(extra: &[&str]) -> Redis {
        let (guard, url) = server::start_redis(extra);
        let port = url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port in the server URL");
        Redis {
            _guard: guard,
            port,
            url,
        }
    }

    /// A new connection named `name` (so its commands can be told apart in `SLOWLOG`).
    fn con(&self, name: &str) -> redis::Connection {
        let mut c = redis::Client::open(self.url.as_str())
            .expect("url")
            .get_connection()
            .expect("connect to the bench's redis-server");
        let _: () = redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg(name)
            .query(&mut c)
            .expect("CLIENT SETNAME");
        c
    }
}

/// A worker process this bench started (killed when dropped if still running).
struct Worker {
    /// The process.
    child: Child,
}

impl Worker {
    /// Starts `bin` against `url` with `QUEUES=queues`, `CONCURRENCY=slots`, `INTERVAL=5` and
    /// `env` on top (stderr to `log`); returns once it printed its `worker <id>` lines.
    fn start(
        bin: &Path,
        url: &str,
        queues: &str,
        slots: usize,
        env: &[(&str, &str)],
        log: PathBuf,
    ) -> Worker {
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir).expect("log dir");
        }
        let err = std::fs::File::create(&log).expect("log file");
        let mut cmd = Command::new(bin);
        for var in [
            "RESQ_SCHEDULER",
            "METRICS_ADDR",
            "JESQUE_DELAYED_QUEUES",
            "RESQ_MAX_PAYLOAD",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("REDIS_URL", url)
            .env("RESQUE_NAMESPACE", NS)
            .env("QUEUES", queues)
            .env("CONCURRENCY", slots.to_string())
            .env("INTERVAL", "5")
            .env("RUST_LOG", "info");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
        let out = child.stdout.take().expect("worker stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if line.starts_with("worker ") {
                    let _ = tx.send(());
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        for _ in 0..slots {
            let left = deadline.saturating_duration_since(Instant::now());
            if rx.recv_timeout(left).is_err() {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{} did not start; stderr:\n{}",
                    bin.display(),
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
        }
        Worker { child }
    }

    /// Its pid.
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `SIGTERM`.
    fn term(&self) {
        let pid = libc::pid_t::try_from(self.pid()).expect("pid");
        // SAFETY: kill(2) on the pid of a child this bench started and has not reaped.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }

    /// Waits up to `cap` for it to exit: the time it took, or `None` (then it is killed).
    fn wait_exit(&mut self, cap: Duration) -> Option<Duration> {
        let t = Instant::now();
        while t.elapsed() < cap {
            if let Ok(Some(_)) = self.child.try_wait() {
                return Some(t.elapsed());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }

    /// `TERM`, then `SIGKILL` after 30 s.
    fn stop(mut self) {
        self.term();
        let _ = self.wait_exit(Duration::from_secs(30));
    }

    /// `VmHWM` and `VmRSS`, MiB.
    fn memory(&self) -> (f64, f64) {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<f64>().ok())
                .map_or(f64::NAN, |kb| kb / 1024.0)
        };
        (field("VmHWM:"), field("VmRSS:"))
    }

    /// Whether it still runs.
    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Waits until `<ns>:workers` has `n` members.
fn wait_registered(con: &mut redis::Connection, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let have: usize = redis::cmd("SCARD")
            .arg(format!("{NS}:workers"))
            .query(con)
            .expect("SCARD workers");
        if have >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "only {have} of {n} workers registered"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// An integer key (0 when missing or unreadable, e.g. while Redis answers BUSY).
fn get_u64(con: &mut redis::Connection, key: &str) -> u64 {
    redis::cmd("GET")
        .arg(key)
        .query::<Option<u64>>(con)
        .ok()
        .flatten()
        .unwrap_or(0)
}

/// Sum of `calls` over `INFO commandstats`, leaving out INFO itself.
fn commands(con: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(con)
        .expect("INFO commandstats");
    info.lines()
        .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info:"))
        .filter_map(|l| l.split("calls=").nth(1))
        .filter_map(|s| s.split(',').next())
        .filter_map(|s| s.parse::<u64>().ok())
        .sum()
}

/// The `q`-quantile of sorted values (nearest rank).
fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// A number with `prec` decimals, or `–`.
fn fmt(v: Option<f64>, prec: usize) -> String {
    v.filter(|x| x.is_finite())
        .map(|x| format!("{x:.prec$}"))
        .unwrap_or_else(|| "–".into())
}

/// A file-name-safe form of a build label.
fn slug(label: &str) -> String {
    label.replace(' ', "-")
}

// ---------------------------------------------------------------------------------------------
// queues

/// Queue positions (1-based) sampled for a `*` list of `n` queues.
fn positions(n: usize) -> Vec<usize> {
    [1, 40, 300, 1000].into_iter().filter(|&p| p <= n).collect()
}

/// The name of the queue at 1-based position `p`.
fn queue_at(p: usize) -> String {
    format!("q{:04}", p - 1)
}

/// Pick-up latencies at one queue position.
struct Pickups {
    /// 1-based position in the `*` list.
    position: usize,
    /// Sorted ms.
    ms: Vec<f64>,
    /// Whether sampling stopped at a job not picked up within 60 s.
    timed_out: bool,
}

/// What one build did with one queue count and slot count.
struct QueuesRun {
    /// Idle commands/s.
    idle: f64,
    /// Pick-ups per position.
    pickup: Vec<Pickups>,
    /// Drain jobs/s on the first queue.
    drain_first: f64,
    /// Drain jobs/s on the last queue.
    drain_last: f64,
}

/// Enqueues one `Echo` job with `marker` on `queue` and waits for its echo (at most `wait`);
/// the pick-up time in ms.
fn pickup_once(
    con: &mut redis::Connection,
    queue: &str,
    marker: &str,
    wait: Duration,
) -> Option<f64> {
    let echo = format!("{NS}:compat:echo");
    let job = format!(r#"{{"class":"Echo","args":["{marker}"]}}"#);
    let t = Instant::now();
    let _: () = redis::cmd("RPUSH")
        .arg(format!("{NS}:queue:{queue}"))
        .arg(job)
        .query(con)
        .expect("RPUSH");
    loop {
        let left = wait.saturating_sub(t.elapsed()).as_secs_f64();
        if left <= 0.0 {
            return None;
        }
        let got: Option<(String, String)> = redis::cmd("BLPOP")
            .arg(&echo)
            .arg(left.max(0.01))
            .query(con)
            .expect("BLPOP");
        match got {
            Some((_, args)) if args.contains(marker) => {
                return Some(t.elapsed().as_secs_f64() * 1000.0)
            }
            // An earlier job that timed out came through late.
            Some(_) => continue,
            None => return None,
        }
    }
}

/// Pushes `n` `Noop` jobs onto `queue` and measures jobs/s from the first job counted in
/// `stat:processed` to the last (so the pick-up of the first is not counted).
fn drain(con: &mut redis::Connection, queue: &str, n: usize) -> f64 {
    let processed = format!("{NS}:stat:processed");
    let base = get_u64(con, &processed);
    let key = format!("{NS}:queue:{queue}");
    let mut p = redis::pipe();
    let mut left = n;
    while left > 0 {
        let k = left.min(1000);
        p.cmd("RPUSH")
            .arg(&key)
            .arg(vec![r#"{"class":"Noop","args":[]}"#; k])
            .ignore();
        left -= k;
    }
    let () = p.query(con).expect("fill");
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut first: Option<(Instant, u64)> = None;
    loop {
        let done = get_u64(con, &processed).saturating_sub(base);
        let now = Instant::now();
        if done > 0 && first.is_none() {
            first = Some((now, done));
        }
        if done >= n as u64 || now > deadline {
            let (t0, d0) = first.unwrap_or((now, done));
            let secs = now.duration_since(t0).as_secs_f64();
            return if secs > 0.0 {
                (done - d0) as f64 / secs
            } else {
                f64::NAN
            };
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// One build, `n` queues, `slots` slots.
fn queues_run(s: &Settings, label: &str, bin: &Path, n: usize, slots: usize) -> QueuesRun {
    let redis = Redis::start(&[]);
    let mut con = redis.con("hostile-bench");
    let names: Vec<String> = (1..=n).map(queue_at).collect();
    let _: () = redis::cmd("SADD")
        .arg(format!("{NS}:queues"))
        .arg(&names)
        .query(&mut con)
        .expect("SADD queues");
    let log = s
        .logs
        .join(format!("queues-{n}-c{slots}-{}.log", slug(label)));
    let worker = Worker::start(bin, &redis.url, "*", slots, &[], log);
    wait_registered(&mut con, slots);
    // Warm-up: a job on the last queue proves the whole list is being watched.
    let warm = pickup_once(&mut con, &queue_at(n), "warm-up", Duration::from_secs(60));
    eprintln!("   warm-up pick-up {} ms", fmt(warm, 1));
    std::thread::sleep(Duration::from_secs(3));
    let a = commands(&mut con);
    let t = Instant::now();
    std::thread::sleep(s.idle);
    let idle = commands(&mut con).saturating_sub(a) as f64 / t.elapsed().as_secs_f64();
    eprintln!("   idle {idle:.2} commands/s");
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut pickup = Vec::new();
    for position in positions(n) {
        let queue = queue_at(position);
        let start = Instant::now();
        let mut ms = Vec::new();
        let mut timed_out = false;
        while ms.len() < s.samples && start.elapsed() < s.budget {
            // An idle gap of 30–70 ms, varied so it never locks onto a poll period.
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            std::thread::sleep(Duration::from_millis(30 + (seed >> 33) % 41));
            let marker = format!("p{position}-{}", ms.len());
            match pickup_once(&mut con, &queue, &marker, Duration::from_secs(60)) {
                Some(v) => ms.push(v),
                None => {
                    timed_out = true;
                    break;
                }
            }
        }
        ms.sort_by(|a, b| a.total_cmp(b));
        eprintln!(
            "   position {position}: p50 {} p99 {} ms (n={}{})",
            fmt(quantile(&ms, 0.5), 1),
            fmt(quantile(&ms, 0.99), 1),
            ms.len(),
            if timed_out {
                ", a job waited > 60 s"
            } else {
                ""
            }
        );
        pickup.push(Pickups {
            position,
            ms,
            timed_out,
        });
    }
    let drain_first = drain(&mut con, &queue_at(1), s.drain_jobs);
    let drain_last = drain(&mut con, &queue_at(n), s.drain_jobs);
    eprintln!("   drain first {drain_first:.0} jobs/s, last {drain_last:.0} jobs/s");
    worker.stop();
    QueuesRun {
        idle,
        pickup,
        drain_first,
        drain_last,
    }
}

/// The `queues` section.
fn queues_section(s: &Settings, out: &mut String) {
    let configs = [(300usize, 1usize), (300, 8), (1000, 1), (1000, 8)];
    let mut runs: BTreeMap<(usize, usize, String), QueuesRun> = BTreeMap::new();
    for (n, slots) in configs {
        for (label, bin) in &s.builds {
            eprintln!(
                "== queues: {n} queues, CONCURRENCY={slots}, {label} (load {})",
                load()
            );
            let r = queues_run(s, label, bin, n, slots);
            runs.insert((n, slots, label.clone()), r);
        }
    }
    let labels: Vec<&String> = s.builds.iter().map(|(l, _)| l).collect();
    let _ = writeln!(out, "### Queue count: `QUEUES=*`, `INTERVAL=5`\n");
    let _ = writeln!(
        out,
        "Pick-up ms (enqueue → the handler's `RPUSH` seen by `BLPOP`), p50 / p99 by nearest rank, n samples (at most {} or {} s per row):\n",
        s.samples,
        s.budget.as_secs()
    );
    let mut head = "| queues | slots | position |".to_string();
    let mut rule = "|---:|---:|---:|".to_string();
    for l in &labels {
        let _ = write!(head, " {l} p50 | {l} p99 | n |");
        rule.push_str("---:|---:|---:|");
    }
    let _ = writeln!(out, "{head}\n{rule}");
    for (n, slots) in configs {
        for p in positions(n) {
            let mut row = format!("| {n} | {slots} | {p} |");
            for l in &labels {
                let cell = runs
                    .get(&(n, slots, (*l).clone()))
                    .and_then(|r| r.pickup.iter().find(|c| c.position == p));
                match cell {
                    Some(c) => {
                        let _ = write!(
                            row,
                            " {} | {} | {}{} |",
                            fmt(quantile(&c.ms, 0.5), 1),
                            fmt(quantile(&c.ms, 0.99), 1),
                            c.ms.len(),
                            if c.timed_out { " (+1 > 60 s)" } else { "" }
                        );
                    }
                    None => row.push_str(" – | – | – |"),
                }
            }
            let _ = writeln!(out, "{row}");
        }
    }
    let _ = writeln!(
        out,
        "\nDrain of {} `Noop` jobs all on the first queue, then all on the last (jobs/s, first job counted → last), and idle Redis commands/s over {} s:\n",
        s.drain_jobs,
        s.idle.as_secs()
    );
    let mut head = "| queues | slots |".to_string();
    let mut rule = "|---:|---:|".to_string();
    for l in &labels {
        let _ = write!(
            head,
            " {l}: first queue | last queue | last ÷ first | idle cmds/s |"
        );
        rule.push_str("---:|---:|---:|---:|");
    }
    let _ = writeln!(out, "{head}\n{rule}");
    for (n, slots) in configs {
        let mut row = format!("| {n} | {slots} |");
        for l in &labels {
            match runs.get(&(n, slots, (*l).clone())) {
                Some(r) => {
                    let _ = write!(
                        row,
                        " {:.0} | {:.0} | {:.2} | {:.2} |",
                        r.drain_first,
                        r.drain_last,
                        r.drain_last / r.drain_first,
                        r.idle
                    );
                }
                None => row.push_str(" – | – | – | – |"),
            }
        }
        let _ = writeln!(out, "{row}");
    }
    let _ = writeln!(out);
}

// ---------------------------------------------------------------------------------------------
// payload

/// What the probe client saw.
#[derive(Debug, Default, Clone, Copy)]
struct Probed {
    /// Longest wait for a reply, ms.
    longest_ms: f64,
    /// `BUSY` replies.
    busy: u64,
    /// First → last `BUSY` reply received, s.
    busy_span_s: f64,
    /// Other errors.
    other: u64,
}

/// A probe client: `PING` every 10 ms on its own connection.
struct Probe {
    /// Set to stop it.
    stop: Arc<AtomicBool>,
    /// Its thread.
    thread: std::thread::JoinHandle<Probed>,
}

impl Probe {
    /// Starts probing `redis`.
    fn start(redis: &Redis) -> Probe {
        let stop = Arc::new(AtomicBool::new(false));
        let mut con = redis.con("hostile-probe");
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut p = Probed::default();
            let (mut first_busy, mut last_busy) = (None::<Instant>, None::<Instant>);
            while !s.load(Ordering::Relaxed) {
                let t = Instant::now();
                let r: redis::RedisResult<String> = redis::cmd("PING").query(&mut con);
                p.longest_ms = p.longest_ms.max(t.elapsed().as_secs_f64() * 1000.0);
                if let Err(e) = r {
                    if e.to_string().contains("BUSY") {
                        p.busy += 1;
                        let now = Instant::now();
                        first_busy.get_or_insert(now);
                        last_busy = Some(now);
                    } else {
                        p.other += 1;
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            p.busy_span_s = first_busy
                .zip(last_busy)
                .map_or(0.0, |(a, b)| b.duration_since(a).as_secs_f64());
            p
        });
        Probe { stop, thread }
    }

    /// Stops it and returns what it saw.
    fn finish(self) -> Probed {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("probe thread")
    }
}

/// One `SLOWLOG` entry.
struct Slow {
    /// Server time, µs.
    us: i64,
    /// Command name, upper case.
    name: String,
    /// The client's name.
    client: String,
}

/// Every `SLOWLOG` entry (retried while Redis answers `BUSY`, up to 180 s).
fn slowlog(con: &mut redis::Connection) -> Vec<Slow> {
    let deadline = Instant::now() + Duration::from_secs(180);
    let log: Vec<redis::Value> = loop {
        match redis::cmd("SLOWLOG").arg("GET").arg(1_000_000).query(con) {
            Ok(v) => break v,
            Err(e) if Instant::now() < deadline => {
                eprintln!("   SLOWLOG GET: {e}; retrying");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => panic!("SLOWLOG GET: {e}"),
        }
    };
    let text = |v: Option<&redis::Value>| match v {
        Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(redis::Value::SimpleString(s)) => s.clone(),
        _ => String::new(),
    };
    log.iter()
        .filter_map(|e| {
            let redis::Value::Array(f) = e else {
                return None;
            };
            let (Some(redis::Value::Int(us)), Some(redis::Value::Array(args))) =
                (f.get(2), f.get(3))
            else {
                return None;
            };
            Some(Slow {
                us: *us,
                name: text(args.first()).to_ascii_uppercase(),
                client: text(f.get(5)),
            })
        })
        .collect()
}

/// The longest entry matching `f`: (ms, name).
fn longest(entries: &[Slow], f: impl Fn(&Slow) -> bool) -> (f64, String) {
    entries
        .iter()
        .filter(|e| f(e))
        .max_by_key(|e| e.us)
        .map_or((0.0, "–".into()), |e| {
            (e.us as f64 / 1000.0, e.name.clone())
        })
}

/// What one build did with one payload.
struct PayloadRun {
    /// Payload bytes.
    bytes: usize,
    /// The plain `LPOP` by redis-cli, ms (server time, from `SLOWLOG`).
    lpop_ms: f64,
    /// Longest `EVAL`/`EVALSHA`/`FCALL`, ms.
    script_ms: f64,
    /// Longest command the worker sent: ms, name.
    worker_cmd: (f64, String),
    /// Longest command of any client (the bench's `RPUSH` of the payload included): ms, name.
    any_cmd: (f64, String),
    /// What the probe saw.
    probe: Probed,
    /// Enqueue → counted as processed or failed, s (`None`: not within the wait).
    done_s: Option<f64>,
    /// How the job ended (`processed`, `failed`, `not done`, `worker died`).
    outcome: String,
    /// RSS before the job, peak (`VmHWM`) and RSS 2 s after it, MiB.
    rss: (f64, f64, f64),
}

/// One build, one payload of `mb` MB of `é`.
fn payload_run(s: &Settings, label: &str, bin: &Path, mb: u64) -> PayloadRun {
    let redis = Redis::start(&[
        "--slowlog-log-slower-than",
        "0",
        "--slowlog-max-len",
        "1000000",
    ]);
    let mut con = redis.con("hostile-bench");
    let head = r#"{"class":"Noop","args":[""#;
    let tail = r#""]}"#;
    let chars = (mb as usize * 1_000_000 - head.len() - tail.len()) / 2;
    let payload = format!("{head}{}{tail}", "é".repeat(chars));
    let bytes = payload.len();

    // A Ruby worker's LPOP of the same payload.
    let side = format!("{NS}:queue:lpop-comparison");
    let _: () = redis::cmd("RPUSH")
        .arg(&side)
        .arg(&payload)
        .query(&mut con)
        .expect("RPUSH");
    let _: () = redis::cmd("SLOWLOG")
        .arg("RESET")
        .query(&mut con)
        .expect("SLOWLOG RESET");
    let ok = Command::new("redis-cli")
        .args(["-p", &redis.port.to_string(), "LPOP", &side])
        .stdout(Stdio::null())
        .status()
        .map(|st| st.success())
        .unwrap_or(false);
    assert!(ok, "redis-cli LPOP failed (apt-get install -y redis-tools)");
    let lpop_ms = longest(&slowlog(&mut con), |e| e.name == "LPOP").0;
    let _: () = redis::cmd("SLOWLOG")
        .arg("RESET")
        .query(&mut con)
        .expect("SLOWLOG RESET");

    let log = s.logs.join(format!("payload-{mb}mb-{}.log", slug(label)));
    let mut worker = Worker::start(bin, &redis.url, "big", 1, &[], log);
    wait_registered(&mut con, 1);
    std::thread::sleep(Duration::from_millis(500));
    let (_, rss_idle) = worker.memory();
    let probe = Probe::start(&redis);
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    let _: () = redis::cmd("RPUSH")
        .arg(format!("{NS}:queue:big"))
        .arg(&payload)
        .query(&mut con)
        .expect("RPUSH payload");
    drop(payload);
    let mut done_s = None;
    let mut outcome = "not done".to_string();
    while t.elapsed() < s.payload_wait {
        if !worker.running() {
            outcome = "worker died".into();
            break;
        }
        let processed = get_u64(&mut con, &format!("{NS}:stat:processed"));
        let failed = get_u64(&mut con, &format!("{NS}:stat:failed"));
        if processed + failed > 0 {
            done_s = Some(t.elapsed().as_secs_f64());
            outcome = if failed > 0 { "failed" } else { "processed" }.into();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_secs(2));
    let (peak, after) = worker.memory();
    let probe = probe.finish();
    let entries = slowlog(&mut con);
    let script_ms = longest(&entries, |e| {
        e.name.starts_with("EVAL") || e.name.starts_with("FCALL")
    })
    .0;
    let worker_cmd = longest(&entries, |e| !e.client.starts_with("hostile-"));
    let any_cmd = longest(&entries, |_| true);
    worker.stop();
    PayloadRun {
        bytes,
        lpop_ms,
        script_ms,
        worker_cmd,
        any_cmd,
        probe,
        done_s,
        outcome,
        rss: (rss_idle, peak, after),
    }
}

/// The `payload` section.
fn payload_section(s: &Settings, out: &mut String) {
    let mut rows = Vec::new();
    for &mb in &s.payload_mb {
        for (label, bin) in &s.builds {
            eprintln!("== payload: {mb} MB of é, {label} (load {})", load());
            let r = payload_run(s, label, bin, mb);
            eprintln!(
                "   LPOP {:.1} ms, script {:.1} ms, worker's longest {} {:.1} ms, probe {:.0} ms / {} BUSY, {} after {} s, RSS {:.0} / {:.0} / {:.0} MiB",
                r.lpop_ms,
                r.script_ms,
                r.worker_cmd.1,
                r.worker_cmd.0,
                r.probe.longest_ms,
                r.probe.busy,
                r.outcome,
                fmt(r.done_s, 2),
                r.rss.0,
                r.rss.1,
                r.rss.2
            );
            rows.push((mb, label.clone(), r));
        }
    }
    let _ = writeln!(
        out,
        "### Large non-ASCII payload (one `Noop` job, `CONCURRENCY=1`)\n"
    );
    let _ = writeln!(out, "Server times from `SLOWLOG` (`slowlog-log-slower-than 0`); the probe `PING`s every 10 ms on its own connection; RSS of the worker process.\n");
    let _ = writeln!(out, "| payload | build | plain `LPOP` ms | longest script ms | worker's longest command ms | longest command, any client ms | probe's longest wait ms | probe's BUSY replies (span s) | enqueue → done s | outcome | RSS idle / peak / after MiB | peak ÷ payload |");
    let _ = writeln!(
        out,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"
    );
    for (mb, label, r) in rows {
        let _ = writeln!(
            out,
            "| {mb} MB ({} bytes) | {label} | {:.1} | {:.1} | {:.1} ({}) | {:.1} ({}) | {:.0} | {} ({:.1}) | {} | {} | {:.0} / {:.0} / {:.0} | {:.1} |",
            r.bytes,
            r.lpop_ms,
            r.script_ms,
            r.worker_cmd.0,
            r.worker_cmd.1,
            r.any_cmd.0,
            r.any_cmd.1,
            r.probe.longest_ms,
            r.probe.busy,
            r.probe.busy_span_s,
            r.done_s.map_or_else(
                || format!("> {}", s.payload_wait.as_secs()),
                |d| format!("{d:.2}")
            ),
            r.outcome,
            r.rss.0,
            r.rss.1,
            r.rss.2,
            r.rss.1 * 1_048_576.0 / r.bytes as f64,
        );
    }
    let _ = writeln!(out);
}

// ---------------------------------------------------------------------------------------------
// term

/// Where the audit found each job.
#[derive(Default)]
struct Audit {
    /// Jobs found nowhere.
    missing: usize,
    /// Jobs found in more than one place (or twice in one).
    duplicated: usize,
    /// Jobs per place (`queue`, `worker record`, `claim`, `failed`, `ran`, or another key;
    /// `a + b` for a job found in both).
    places: BTreeMap<String, usize>,
}

/// Every value of every key of the namespace, by key.
fn dump(con: &mut redis::Connection) -> Vec<(String, Vec<String>)> {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{NS}:*"))
        .query(con)
        .expect("KEYS");
    let mut out = Vec::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE").arg(&key).query(con).expect("TYPE");
        let values: Vec<String> = match kind.as_str() {
            "string" => vec![redis::cmd("GET").arg(&key).query(con).unwrap_or_default()],
            "list" => redis::cmd("LRANGE")
                .arg(&key)
                .arg(0)
                .arg(-1)
                .query(con)
                .unwrap_or_default(),
            "set" => redis::cmd("SMEMBERS")
                .arg(&key)
                .query(con)
                .unwrap_or_default(),
            "zset" => redis::cmd("ZRANGE")
                .arg(&key)
                .arg(0)
                .arg(-1)
                .query(con)
                .unwrap_or_default(),
            "hash" => redis::cmd("HVALS").arg(&key).query(con).unwrap_or_default(),
            _ => Vec::new(),
        };
        out.push((key, values));
    }
    out
}

/// Finds every marker in the namespace's keys.
fn audit(con: &mut redis::Connection, markers: &[String]) -> Audit {
    let data = dump(con);
    let place = |key: &str| -> String {
        let k = key.strip_prefix(&format!("{NS}:")).unwrap_or(key);
        if k.starts_with("queue:") {
            "queue".into()
        } else if k == "failed" {
            "failed".into()
        } else if k == "compat:echo" {
            "ran".into()
        } else if k.starts_with("worker:") {
            "worker record".into()
        } else if k.starts_with("resq:claim:") {
            "claim".into()
        } else {
            k.to_string()
        }
    };
    let mut a = Audit::default();
    for m in markers {
        let needle = format!("\"{m}\"");
        let mut found = Vec::new();
        for (key, values) in &data {
            for v in values {
                found.extend(std::iter::repeat_n(place(key), v.matches(&needle).count()));
            }
        }
        match found.len() {
            0 => a.missing += 1,
            1 => {}
            _ => a.duplicated += 1,
        }
        found.sort();
        found.dedup();
        let where_ = if found.is_empty() {
            "nowhere".to_string()
        } else {
            found.join(" + ")
        };
        *a.places.entry(where_).or_default() += 1;
    }
    a
}

/// What one build did on `TERM`.
struct TermRun {
    /// TERM → exit with `<ns>:failed` a string (`None`: killed at the cap).
    wrongtype: Option<Duration>,
    /// Jobs left in the queue when TERM was sent (WRONGTYPE case).
    queued_at_term: usize,
    /// Where the jobs were after it (WRONGTYPE case).
    audit: Audit,
    /// TERM → exit with Redis stopped.
    down: Option<Duration>,
}

/// One build: (a) WRONGTYPE failure list, TERM → exit, audit; (b) Redis stopped, TERM → exit.
fn term_run(s: &Settings, label: &str, bin: &Path) -> TermRun {
    let env = [("RESQUE_TERM_TIMEOUT", "1")];
    let queue = format!("{NS}:queue:term");
    // (a)
    let redis = Redis::start(&[]);
    let mut con = redis.con("hostile-bench");
    let _: () = redis::cmd("SET")
        .arg(format!("{NS}:failed"))
        .arg("not a list")
        .query(&mut con)
        .expect("SET failed");
    let log = s.logs.join(format!("term-wrongtype-{}.log", slug(label)));
    let mut worker = Worker::start(bin, &redis.url, "term", 4, &env, log);
    wait_registered(&mut con, 4);
    let markers: Vec<String> = (0..40).map(|i| format!("job-{i:02}")).collect();
    let jobs: Vec<String> = markers
        .iter()
        .enumerate()
        .map(|(i, m)| {
            if i == 4 || i == 5 {
                format!(r#"{{"class":"Fail","args":["boom","{m}"]}}"#)
            } else {
                format!(r#"{{"class":"Echo","args":["{m}"]}}"#)
            }
        })
        .collect();
    let _: () = redis::cmd("RPUSH")
        .arg(&queue)
        .arg(&jobs)
        .query(&mut con)
        .expect("RPUSH jobs");
    // Until the queue stops moving (2 s without a change, at most 10 s).
    let (mut last, mut since, t) = (usize::MAX, Instant::now(), Instant::now());
    while since.elapsed() < Duration::from_secs(2) && t.elapsed() < Duration::from_secs(10) {
        let len: usize = redis::cmd("LLEN")
            .arg(&queue)
            .query(&mut con)
            .expect("LLEN");
        if len != last {
            (last, since) = (len, Instant::now());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("   {last} jobs left in the queue; TERM");
    worker.term();
    let wrongtype = worker.wait_exit(s.term_cap);
    let audit = audit(&mut con, &markers);
    drop(worker);
    drop(con);
    drop(redis);

    // (b)
    let redis = Redis::start(&[]);
    let mut con = redis.con("hostile-bench");
    let log = s.logs.join(format!("term-down-{}.log", slug(label)));
    let mut worker = Worker::start(bin, &redis.url, "term", 4, &env, log);
    wait_registered(&mut con, 4);
    let _: () = redis::cmd("RPUSH")
        .arg(&queue)
        .arg(vec![r#"{"class":"Sleep","args":[1500]}"#; 2])
        .query(&mut con)
        .expect("RPUSH sleeps");
    let t = Instant::now();
    loop {
        let len: usize = redis::cmd("LLEN")
            .arg(&queue)
            .query(&mut con)
            .expect("LLEN");
        if len == 0 || t.elapsed() > Duration::from_secs(5) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(100));
    let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").arg("NOSAVE").query(&mut con);
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", redis.port)).is_ok() {
        assert!(t.elapsed() < Duration::from_secs(10), "redis did not stop");
        std::thread::sleep(Duration::from_millis(5));
    }
    worker.term();
    let down = worker.wait_exit(s.term_cap);
    TermRun {
        wrongtype,
        queued_at_term: last,
        audit,
        down,
    }
}

/// The `term` section.
fn term_section(s: &Settings, out: &mut String) {
    let mut rows = Vec::new();
    for (label, bin) in &s.builds {
        eprintln!("== term: {label} (load {})", load());
        let r = term_run(s, label, bin);
        eprintln!(
            "   WRONGTYPE: {:?}, missing {}, duplicated {}; Redis down: {:?}",
            r.wrongtype, r.audit.missing, r.audit.duplicated, r.down
        );
        rows.push((label.clone(), r));
    }
    let cap = s.term_cap.as_secs();
    let show = |d: Option<Duration>| {
        d.map_or_else(
            || format!("no exit within {cap} s (SIGKILL)"),
            |d| format!("{:.2} s", d.as_secs_f64()),
        )
    };
    let _ = writeln!(
        out,
        "### Shutdown bound (`RESQUE_TERM_TIMEOUT=1`, `CONCURRENCY=4`)\n"
    );
    let _ = writeln!(out, "| build | TERM → exit, `<ns>:failed` a string (2 `Fail` among 38 `Echo`) | queued at TERM | jobs missing | jobs duplicated | where the 40 jobs were after exit | TERM → exit, Redis stopped while 2 `Sleep 1500` ran |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---|---:|");
    for (label, r) in rows {
        let places: Vec<String> = r
            .audit
            .places
            .iter()
            .map(|(p, n)| format!("{n} {p}"))
            .collect();
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {} | {} | {} | {} |",
            show(r.wrongtype),
            r.queued_at_term,
            r.audit.missing,
            r.audit.duplicated,
            places.join(", "),
            show(r.down)
        );
    }
    let _ = writeln!(out);
}

fn main() {
    let s = Settings::from_env();
    let only: Option<Vec<String>> = std::env::var("ONLY")
        .ok()
        .map(|v| v.split(',').map(|x| x.trim().to_string()).collect());
    let wanted = |tag: &str| only.as_ref().is_none_or(|o| o.iter().any(|t| t == tag));
    let started = Instant::now();
    let load_before = load();
    let mut out = String::new();
    for (label, bin) in &s.builds {
        let _ = writeln!(out, "- {label}: `{}`", bin.display());
    }
    let _ = writeln!(out);
    if wanted("queues") {
        queues_section(&s, &mut out);
    }
    if wanted("payload") {
        payload_section(&s, &mut out);
    }
    if wanted("term") {
        term_section(&s, &mut out);
    }
    let version = Command::new("redis-server")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{version}; {} cores; load average before {load_before}, after {}; {:.0} s.",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load(),
        started.elapsed().as_secs_f64()
    );
    println!("{out}");
}
