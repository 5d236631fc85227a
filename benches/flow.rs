//! What tracking and limits cost, in one run against one redis-server it starts: one process
//! with 64 slots draining Noop jobs with nothing on (the baseline), with every job tracked
//! (through resq, or as resque-status jobs), with a queue limit of 32, and with a per-key
//! concurrency limit over 100 keys (each a ratio to the baseline's drain of the same round, the
//! median over the rounds; a drain is timed from its first job's end to its last's); the Redis
//! memory of finished
//! tracked records before and after their TTL; the latency of `Client::wait` from a job's end
//! to the waiter; and Redis commands per second while 1,000 jobs are held behind a full limit,
//! next to an idle process's.
//!
//! `cargo bench --bench flow` (env: `JOBS`, default 40000; `ROUNDS`, default 3; `ONLY`, a comma
//! list of `drain`, `memory`, `wait`, `callback`, `held`; `FLOW_REDIS_URL`, a server of your own instead of
//! the one it starts, e.g. to profile it; `SETUPS`, a comma list of `Baseline`, `Slots32`,
//! `Tracked`, `Statused`, `QueueLimit32`, `KeyLimit100` (the default: all of these), and
//! `Slots1`, `StatusedRuby`, `BatchMember`, `OneDependency` (only when named); `FLOW_BEFORE_DRAIN` / `FLOW_AFTER_DRAIN`, shell
//! commands run right before and after a drain's measured part, which scripts/drain-cost uses;
//! `FLOW_ENQUEUE`, the shell command that enqueues the jobs of a setup whose jobs another
//! program makes (`StatusedRuby`: real resque-status's `create`; see `Setup::external`);
//! `FLOW_SLOTS`, every setup's slots instead of its own; `FLOW_JSON`, a file to which each
//! drain appends its figures as one JSON line, which scripts/drain-cost reads).

#[path = "../src/testing/server.rs"]
mod server;

use redis::AsyncCommands;
use resq::jobs::Track;
use resq::limits::Limit;
use resq::{Client, JobContext, Phase, Registry, Worker};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One drain's setup: how its jobs are enqueued, what the registry declares, how many slots.
///
/// **Extension point.** A new setup is a variant here, a name, an
/// arm in [`enqueue`] (or [`Setup::external`] plus `FLOW_ENQUEUE` when another program makes
/// the jobs), an arm in the registry `match` of [`drain`] and an entry in `ALL` (default runs)
/// or `BY_NAME` (run only when named in `SETUPS`). scripts/drain-cost passes any name it is
/// given through `SETUPS`, so it needs no change to price a new setup. A latency that is not a
/// drain (`wait`, `callback`) is a section of its own in `main`, chosen with `ONLY`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Setup {
    Baseline,
    /// Nothing on, one slot (the one-call-per-job shape the ceiling client's `ceiling.lua`
    /// measures at one connection).
    Slots1,
    Slots32,
    Tracked,
    Statused,
    /// Every job a resque-status job created by real resque-status (`FLOW_ENQUEUE`), so that
    /// resq and a real Ruby worker drain the same bytes.
    StatusedRuby,
    QueueLimit32,
    KeyLimit100,
    /// Every job a member of one batch (`Client::create_batch`, with an `on_complete`
    /// callback), created before the drain.
    BatchMember,
    /// Every job tracked, half of them waiting on one job of the other half
    /// (`Track::after`): released to the queue when that one ends.
    OneDependency,
}

/// The setups run when `SETUPS` is not set, in order (the ratios are to the first one run).
const ALL: [Setup; 6] = [
    Setup::Baseline,
    Setup::Slots32,
    Setup::Tracked,
    Setup::Statused,
    Setup::QueueLimit32,
    Setup::KeyLimit100,
];

/// Every setup `SETUPS` can name.
const BY_NAME: [Setup; 10] = [
    Setup::Baseline,
    Setup::Slots1,
    Setup::Slots32,
    Setup::Tracked,
    Setup::Statused,
    Setup::StatusedRuby,
    Setup::QueueLimit32,
    Setup::KeyLimit100,
    Setup::BatchMember,
    Setup::OneDependency,
];

impl Setup {
    fn name(self) -> &'static str {
        match self {
            Setup::Baseline => "nothing on (baseline)",
            Setup::Slots1 => "nothing on, 1 slot",
            Setup::Slots32 => "nothing on, 32 slots",
            Setup::Tracked => "every job tracked",
            Setup::Statused => "every job a resque-status job",
            Setup::StatusedRuby => "every job a resque-status job, created by Ruby",
            Setup::QueueLimit32 => "queue limit 32 (64 slots)",
            Setup::KeyLimit100 => "per-key limit 1 over 100 keys",
            Setup::BatchMember => "every job a member of one batch",
            Setup::OneDependency => "every job tracked, half waiting on one of the others",
        }
    }

    /// Its slots (`FLOW_SLOTS` overrides every setup's).
    fn slots(self) -> usize {
        if let Some(n) = std::env::var("FLOW_SLOTS")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            return n;
        }
        match self {
            Setup::Slots1 => 1,
            Setup::Slots32 => 32,
            _ => 64,
        }
    }

    /// Whether another program enqueues its jobs (`FLOW_ENQUEUE`).
    fn external(self) -> bool {
        matches!(self, Setup::StatusedRuby)
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn info_field(
    con: &mut redis::aio::MultiplexedConnection,
    section: &str,
    field: &str,
) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg(section)
        .query_async(con)
        .await
        .unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Redis's CPU seconds (user + sys) and the number of script calls (`EVAL`, `EVALSHA`, `FCALL`)
/// it has run so far.
async fn redis_cpu_calls(con: &mut redis::aio::MultiplexedConnection) -> (f64, f64) {
    let cpu = info_field(con, "cpu", "used_cpu_user").await
        + info_field(con, "cpu", "used_cpu_sys").await;
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(con)
        .await
        .unwrap_or_default();
    let calls = stats
        .lines()
        .filter(|l| {
            [
                "cmdstat_evalsha:",
                "cmdstat_eval:",
                "cmdstat_fcall:",
                "cmdstat_evalsha_ro:",
                "cmdstat_fcall_ro:",
            ]
            .iter()
            .any(|p| l.starts_with(p))
        })
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<f64>()
                .ok()
        })
        .sum();
    (cpu, calls)
}

/// Runs the shell command in env `name`, if set, with `SETUP` set to the setup's name: the
/// hooks around a drain's measured part (scripts/drain-cost zeroes and dumps callgrind's counts
/// with them, so the enqueue is not counted).
fn hook(name: &str, setup: Setup) {
    if let Ok(cmd) = std::env::var(name) {
        let status = std::process::Command::new("sh")
            .args(["-c", &cmd])
            .env("SETUP", format!("{setup:?}"))
            .status()
            .expect("sh");
        assert!(status.success(), "{name} failed: {cmd}");
    }
}

/// One drain's figures.
struct Drained {
    /// Jobs per second from the first job's end to the last's (the steady drain: the worker's
    /// start, which a short drain would otherwise count as a large part of its time, is not in
    /// it).
    rate: f64,
    /// Redis CPU µs per job, the start included.
    cpu: f64,
    /// Script calls per job.
    calls: f64,
    /// From the worker's start to the first job's end, ms.
    start_ms: f64,
}

/// Enqueues the setup's `jobs` Noop jobs on queue `default` of namespace `ns`.
async fn enqueue(
    url: &str,
    ns: &str,
    client: &Client,
    con: &mut redis::aio::MultiplexedConnection,
    setup: Setup,
    jobs: usize,
) {
    let queue = format!("{ns}:queue:default");
    if setup.external() {
        // FLOW_ENQUEUE: another program makes the jobs (e.g. real resque-status's `create`).
        let cmd = std::env::var("FLOW_ENQUEUE").unwrap_or_else(|_| {
            panic!("setup {setup:?} needs FLOW_ENQUEUE (scripts/drain-cost sets it)")
        });
        let status = std::process::Command::new("sh")
            .args(["-c", &cmd])
            .env("SETUP", format!("{setup:?}"))
            .env("FLOW_REDIS_URL", url)
            .env("FLOW_NS", ns)
            .env("FLOW_QUEUE", "default")
            .env("FLOW_JOBS", jobs.to_string())
            .status()
            .expect("sh");
        assert!(status.success(), "FLOW_ENQUEUE failed: {cmd}");
        let have: usize = con.llen(&queue).await.unwrap();
        assert_eq!(
            have, jobs,
            "FLOW_ENQUEUE left {have} jobs on {queue}, not {jobs}"
        );
    } else if setup == Setup::Tracked {
        for i in 0..jobs {
            client
                .enqueue_class_tracked("default", "Noop", &[json!(i % 100)], Track::new())
                .await
                .unwrap();
        }
    } else if setup == Setup::BatchMember {
        let mut batch = resq::workflows::Batch::new().on_complete("Callback", vec![]);
        for i in 0..jobs {
            batch = batch.job("default", "Noop", vec![json!(i % 100)]);
        }
        client.create_batch(batch).await.unwrap();
    } else if setup == Setup::OneDependency {
        let firsts = jobs / 2;
        let mut ids = Vec::with_capacity(firsts);
        for i in 0..firsts {
            ids.push(
                client
                    .enqueue_class_tracked("default", "Noop", &[json!(i % 100)], Track::new())
                    .await
                    .unwrap(),
            );
        }
        for (i, id) in ids.iter().cycle().take(jobs - firsts).enumerate() {
            client
                .enqueue_class_tracked(
                    "default",
                    "Noop",
                    &[json!(i % 100)],
                    Track::new().after(id.clone()),
                )
                .await
                .unwrap();
        }
    } else if setup == Setup::Statused {
        // As resque-status's `create` enqueues them (Ruby's, or Client::create_status):
        // args[0] the id, args[1] the options.
        for i in 0..jobs {
            let mut options = serde_json::Map::new();
            options.insert("n".into(), json!(i % 100));
            client
                .create_status_class("default", "Noop", options, Track::new())
                .await
                .unwrap();
        }
    } else {
        for chunk in (0..jobs).collect::<Vec<_>>().chunks(1000) {
            let mut pipe = redis::pipe();
            for i in chunk {
                pipe.rpush(
                    &queue,
                    format!(r#"{{"class":"Noop","args":[{}]}}"#, i % 100),
                )
                .ignore();
            }
            let _: () = pipe.query_async(con).await.unwrap();
        }
        let _: () = con.sadd(format!("{ns}:queues"), "default").await.unwrap();
    }
}

/// One drain.
async fn drain(url: &str, setup: Setup, round: usize, jobs: usize) -> Drained {
    let ns = format!("flow-{round}-{setup:?}");
    let client = Client::connect(url, &ns).await.unwrap();
    let mut con = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    enqueue(url, &ns, &client, &mut con, setup, jobs).await;
    let done = Arc::new(AtomicUsize::new(0));
    let first: Arc<std::sync::OnceLock<Instant>> = Arc::default();
    let d = done.clone();
    let f = first.clone();
    let mut registry = Registry::new()
        .handler("Noop", move |_ctx: JobContext| {
            let d = d.clone();
            let f = f.clone();
            async move {
                if d.fetch_add(1, Ordering::Relaxed) == 0 {
                    let _ = f.set(Instant::now());
                }
                Ok(())
            }
        })
        .handler("Callback", |_ctx: JobContext| async { Ok(()) });
    registry = match setup {
        Setup::QueueLimit32 => registry.limit(Limit::concurrency("q32", 32).queue("default")),
        Setup::KeyLimit100 => {
            registry.limit(Limit::concurrency("k100", 1).class("Noop").key("k{args.0}"))
        }
        Setup::Statused | Setup::StatusedRuby => registry.statused("Noop"),
        _ => registry,
    };
    hook("FLOW_BEFORE_DRAIN", setup);
    let (cpu0, calls0) = redis_cpu_calls(&mut con).await;
    let started = Instant::now();
    let running = Worker::builder()
        .redis_url(url)
        .namespace(&ns)
        .concurrency(setup.slots())
        .registry(registry)
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    while done.load(Ordering::Relaxed) < jobs {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let ended = Instant::now();
    let first = *first.get().expect("a job ended");
    let (cpu1, calls1) = redis_cpu_calls(&mut con).await;
    hook("FLOW_AFTER_DRAIN", setup);
    running.stop(Phase::Quit);
    running.wait().await.unwrap();
    let d = Drained {
        rate: (jobs - 1) as f64 / (ended - first).as_secs_f64(),
        cpu: (cpu1 - cpu0) * 1e6 / jobs as f64,
        calls: (calls1 - calls0) / jobs as f64,
        start_ms: (first - started).as_secs_f64() * 1000.0,
    };
    // FLOW_JSON: one line per drain, for scripts/drain-cost.
    if let Ok(path) = std::env::var("FLOW_JSON") {
        use std::io::Write as _;
        let line = json!({
            "setup": format!("{setup:?}"), "slots": setup.slots(), "jobs": jobs, "round": round,
            "jobs_per_s": d.rate, "redis_cpu_us_per_job": d.cpu,
            "script_calls_per_job": d.calls, "start_ms": d.start_ms,
        });
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        writeln!(f, "{line}").unwrap();
    }
    d
}

/// Memory of `n` finished tracked records, and after their TTL (1 s) has passed.
async fn memory(url: &str, n: usize) -> (f64, f64, f64) {
    let ns = "flow-memory";
    let client = Client::connect(url, ns).await.unwrap();
    let mut con = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("FLUSHDB").query_async(&mut con).await.unwrap();
    let before = info_field(&mut con, "memory", "used_memory").await;
    for i in 0..n {
        client
            .enqueue_class_tracked("default", "Noop", &[json!(i)], Track::new())
            .await
            .unwrap();
    }
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let registry = Registry::new()
        .handler("Noop", move |_ctx: JobContext| {
            let d = d.clone();
            async move {
                d.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
        })
        .track_ttl("Noop", Duration::from_secs(1));
    let running = Worker::builder()
        .redis_url(url)
        .namespace(ns)
        .concurrency(16)
        .registry(registry)
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    while done.load(Ordering::Relaxed) < n {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let finished = info_field(&mut con, "memory", "used_memory").await;
    // After the TTL, the next finished jobs sweep the indexes; purge sweeps the rest.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let admin = resq::admin::Admin::connect(url, ns).await.unwrap();
    admin
        .purge_jobs(None, Duration::from_secs(3600))
        .await
        .unwrap();
    let after = info_field(&mut con, "memory", "used_memory").await;
    running.stop(Phase::Quit);
    running.wait().await.unwrap();
    (
        before,
        (finished - before) / n as f64,
        (after - before) / n as f64,
    )
}

/// Latency from a tracked job's end (its handler returning) to `Client::wait` returning.
async fn wait_latency(url: &str, n: usize) -> (f64, f64) {
    let ns = "flow-wait";
    let client = Client::connect(url, ns).await.unwrap();
    let ended: Arc<Mutex<Option<Instant>>> = Arc::default();
    let e = ended.clone();
    let registry = Registry::new().handler("Mark", move |_ctx: JobContext| {
        let e = e.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            *e.lock().unwrap() = Some(Instant::now());
            Ok(())
        }
    });
    let running = Worker::builder()
        .redis_url(url)
        .namespace(ns)
        .registry(registry)
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    let mut lat = Vec::new();
    for _ in 0..n {
        let id = client
            .enqueue_class_tracked("default", "Mark", &[], Track::new())
            .await
            .unwrap();
        client.wait(&id, Duration::from_secs(10)).await.unwrap();
        let end = ended.lock().unwrap().take().unwrap();
        lat.push(end.elapsed().as_secs_f64() * 1000.0);
    }
    running.stop(Phase::Quit);
    running.wait().await.unwrap();
    lat.sort_by(|a, b| a.total_cmp(b));
    (
        lat[lat.len() / 2],
        lat[(lat.len() as f64 * 0.99) as usize - 1],
    )
}

/// Latency from a batch's last member's end (its handler returning) to its `on_complete`
/// callback's start, over `n` batches of 10 members run one after the other by a process of 16
/// slots; p50 and p99 in ms.
async fn callback_latency(url: &str, n: usize) -> (f64, f64) {
    let ns = "flow-callback";
    let client = Client::connect(url, ns).await.unwrap();
    let last_end: Arc<Mutex<Option<Instant>>> = Arc::default();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<f64>();
    let e = last_end.clone();
    let e2 = last_end.clone();
    let registry = Registry::new()
        .handler("Member", move |_ctx: JobContext| {
            let e = e.clone();
            async move {
                *e.lock().unwrap() = Some(Instant::now());
                Ok(())
            }
        })
        .handler("Callback", move |_ctx: JobContext| {
            let started = Instant::now();
            let end = e2.lock().unwrap().take();
            let tx = tx.clone();
            async move {
                if let Some(end) = end {
                    let _ = tx.send((started - end).as_secs_f64() * 1000.0);
                }
                Ok(())
            }
        });
    let running = Worker::builder()
        .redis_url(url)
        .namespace(ns)
        .concurrency(16)
        .registry(registry)
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    let mut lat = Vec::new();
    for _ in 0..n {
        let mut batch = resq::workflows::Batch::new().on_complete("Callback", vec![]);
        for i in 0..10 {
            batch = batch.job("default", "Member", vec![json!(i)]);
        }
        client.create_batch(batch).await.unwrap();
        lat.push(rx.recv().await.expect("the callback ran"));
    }
    running.stop(Phase::Quit);
    running.wait().await.unwrap();
    lat.sort_by(|a, b| a.total_cmp(b));
    (
        lat[lat.len() / 2],
        lat[(lat.len() as f64 * 0.99) as usize - 1],
    )
}

/// Commands per second Redis executes while 1,000 jobs wait behind a full limit of 1 (held by
/// a job that sleeps), with 16 slots; and for an idle process of 16 slots.
async fn held_commands(url: &str) -> (f64, f64) {
    let mut con = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let measure = |ns: &'static str, held: bool| {
        let url = url.to_string();
        async move {
            let client = Client::connect(&url, ns).await.unwrap();
            let mut registry = Registry::new().handler("Hold", |_ctx: JobContext| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(())
            });
            if held {
                registry = registry.limit(Limit::concurrency("one", 1).class("Hold"));
                for _ in 0..1001 {
                    client.enqueue_class("Hold", &[]).await.unwrap();
                }
            }
            let running = Worker::builder()
                .redis_url(&url)
                .namespace(ns)
                .concurrency(16)
                .registry(registry)
                .build()
                .unwrap()
                .start()
                .await
                .unwrap();
            running
        }
    };
    let mut rates = Vec::new();
    for (ns, held) in [("flow-idle", false), ("flow-held", true)] {
        let running = measure(ns, held).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let a = info_field(&mut con, "stats", "total_commands_processed").await;
        let t = Instant::now();
        tokio::time::sleep(Duration::from_secs(10)).await;
        let b = info_field(&mut con, "stats", "total_commands_processed").await;
        rates.push((b - a - 1.0).max(0.0) / t.elapsed().as_secs_f64());
        running.stop(Phase::Abort);
        let _ = running.wait().await;
    }
    (rates[0], rates[1])
}

fn main() {
    let jobs = env_usize("JOBS", 40_000);
    let rounds = env_usize("ROUNDS", 3);
    // FLOW_REDIS_URL: a server of your own (to profile it while the bench runs); otherwise a
    // private one, stopped by its guard when the bench ends.
    let own = std::env::var("FLOW_REDIS_URL").ok();
    let (_guard, url) = match own {
        Some(url) => (None, url),
        None => {
            let (guard, url) = server::start_redis(&[]);
            (Some(guard), url)
        }
    };
    let rt = resq::runtime::build().expect("runtime");
    rt.block_on(async {
        let only = std::env::var("ONLY").unwrap_or_default();
        let on = |s: &str| only.is_empty() || only.split(',').any(|o| o == s);
        if on("drain") {
        // SETUPS: a comma list of setups' names (default `ALL`), run in that order; the ratios
        // are to the first one run.
        let pick = std::env::var("SETUPS").unwrap_or_default();
        let setups: Vec<Setup> = if pick.is_empty() {
            ALL.to_vec()
        } else {
            pick.split(',')
                .map(|p| {
                    *BY_NAME
                        .iter()
                        .find(|s| format!("{s:?}") == p.trim())
                        .unwrap_or_else(|| panic!("SETUPS: no setup {p:?} (have {BY_NAME:?})"))
                })
                .collect()
        };
        // Each round runs every setup in turn, and a setup's ratio is taken to the first
        // setup's drain of the same round: this machine's speed drifts by up to 2× between
        // minutes, and a ratio of two drains seconds apart is what that drift moves least.
        let mut runs: Vec<Vec<Drained>> = (0..setups.len()).map(|_| Vec::new()).collect();
        for r in 0..rounds {
            for (i, s) in setups.iter().enumerate() {
                runs[i].push(drain(&url, *s, r, jobs).await);
            }
        }
        let med = |mut v: Vec<f64>| {
            v.sort_by(|a, b| a.total_cmp(b));
            v[v.len() / 2]
        };
        println!("Noop drain, one process (64 slots unless the setup says otherwise), {jobs} jobs × {rounds} rounds (median)\n");
        println!("| setup | jobs/s | vs the first setup, same round (each round) | Redis CPU µs/job | script calls/job | start, ms |");
        println!("|---|---|---|---|---|---|");
        for (i, s) in setups.iter().enumerate() {
            let ratios: Vec<f64> = (0..rounds)
                .map(|r| runs[i][r].rate / runs[0][r].rate)
                .collect();
            let each: Vec<String> = ratios.iter().map(|x| format!("{x:.2}")).collect();
            println!(
                "| {} | {:.0} | {:.2} ({}) | {:.1} | {:.3} | {:.0} |",
                s.name(),
                med(runs[i].iter().map(|d| d.rate).collect()),
                med(ratios.clone()),
                each.join(", "),
                med(runs[i].iter().map(|d| d.cpu).collect()),
                med(runs[i].iter().map(|d| d.calls).collect()),
                med(runs[i].iter().map(|d| d.start_ms).collect()),
            );
        }
        }
        if on("memory") {
            let (base, per, after) = memory(&url, 10_000).await;
            println!("\nTracked records: {per:.0} bytes of Redis memory per finished job (10,000 jobs); {after:.0} bytes per job after their TTL and a purge (used_memory before: {base:.0})");
        }
        if on("wait") {
            let (p50, p99) = wait_latency(&url, 200).await;
            println!("\nClient::wait, from the handler's end to the waiter (200 jobs): p50 {p50:.2} ms, p99 {p99:.2} ms");
        }
        if on("callback") {
            let (p50, p99) = callback_latency(&url, 200).await;
            println!("\nBatch callback, from the last member's end to the on_complete callback's start (200 batches of 10): p50 {p50:.2} ms, p99 {p99:.2} ms");
        }
        if on("held") {
            let (idle, held) = held_commands(&url).await;
            println!("\nRedis commands/s over 10 s: an idle process of 16 slots {idle:.2}; the same with 1,000 jobs held behind a full limit {held:.2}");
        }
    });
}
