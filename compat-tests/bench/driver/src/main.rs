//! `resq-bench`: one private redis-server; the ceiling client and every subject run against it
//! in turn; prints a markdown report (also written to the file named by `BENCH_OUT`).
//!
//! Settings (environment): `JOBS` (50000), `LATENCY_JOBS` (100), `LATENCY_BUDGET` seconds per
//! subject (60; slow pollers get fewer samples, the table says how many), `IDLE_SECS` (20),
//! `ONLY` (comma list of tags to run, e.g. `ceiling,resq-c8,jesque-x4`), `BENCH_LOGS` (dir for
//! the subjects' stderr), `PAYLOAD_BYTES` (the drain's Noop jobs carry a string argument of
//! that many bytes; none by default), `BASELINE_BIN` (another build's `compat_worker`, run as
//! `resq-before-c1/c8/c64` just before each resq subject; its "resq best ÷ this" column is the
//! speed-up since that build) and `BASELINE_LABEL` (its row label, e.g. `@1a59a29`).
//! For scripts/drain-cost: `BENCH_REDIS_URL` (a running server instead of a private one, left
//! running), `FLOW_BEFORE_DRAIN` / `FLOW_AFTER_DRAIN` (shell commands run right after a ceiling
//! drain's fill and right after its last job), `NOOP_ARG_MOD` (the flow bench's jobs,
//! `{"class":"Noop","args":[i % m]}`) and `BENCH_JSON` (a file to which each ceiling row is
//! appended as one JSON line, with Redis CPU µs/job between the hooks).
//! The peers table (`peers.rs`; tag `peers`, or one of its rows, `peer-resq-c1`,
//! `peer-resq-tracked-c8`, `peer-sidekiq-c64`, `peer-bullmq-c1`, …): resq against Sidekiq and
//! BullMQ at 1, 8 and 64 slots (`PEER_SLOTS`: others, e.g. `1,2,4,8`; with `BASELINE_BIN`, that
//! build's plain row too), `ROUNDS` (3) rounds of `JOBS` jobs each; needs `sidekiq`
//! (Debian's `ruby-sidekiq`), node with `compat-tests/bench/node`'s packages installed, and
//! `target/release/resq` (for the tracked rows).

mod ceiling;
mod measure;
mod peers;
mod server;
mod subject;

use anyhow::Result;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;
use subject::Kind;

/// One row of the report.
#[derive(Debug, Clone)]
struct Row {
    /// Tag (`resq-c8`).
    tag: String,
    /// Row name.
    name: String,
    /// Drain throughput, jobs/s.
    rate: f64,
    /// Pick-up latencies, sorted ms (empty for the ceiling).
    pickup: Vec<f64>,
    /// Idle Redis commands/s.
    idle: Option<f64>,
    /// Peak RSS MiB.
    rss: Option<f64>,
    /// Redis CPU µs per job while draining.
    redis_us: Option<f64>,
    /// The subject's own CPU µs per job while draining.
    own_us: Option<f64>,
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn main() -> Result<()> {
    let jobs = env_num("JOBS", 50_000) as usize;
    let latency_jobs = env_num("LATENCY_JOBS", 100) as usize;
    let budget = Duration::from_secs(env_num("LATENCY_BUDGET", 60));
    let idle_secs = env_num("IDLE_SECS", 20);
    let only: Option<Vec<String>> = std::env::var("ONLY")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    let wanted = |tag: &str| only.as_ref().is_none_or(|o| o.iter().any(|t| t == tag));
    let logs = PathBuf::from(
        std::env::var("BENCH_LOGS").unwrap_or_else(|_| "/tmp/resq-bench-logs".into()),
    );
    std::fs::create_dir_all(&logs)?;
    let root = subject::repo_root();
    let load_before = load();
    let server = server::Server::start()?;
    let url = server.url();
    let mut con = server.con()?;
    let (ns, queue) = ("bench", "bench");
    let mut rows: Vec<Row> = Vec::new();

    // (threads, ids per thread, batched): one id per connection, ids pipelined over a
    // connection, or ids batched into one call per round trip.
    let shapes = [
        (1usize, 1usize, false),
        (8, 1, false),
        (64, 1, false),
        (1, 64, false),
        (2, 32, false),
        (1, 64, true),
        (2, 32, true),
    ];
    for (c, depth, batched) in shapes {
        let tag = match (depth, batched) {
            (1, _) => format!("ceiling-c{c}"),
            (_, false) => format!("ceiling-p{c}x{depth}"),
            (_, true) => format!("ceiling-b{c}x{depth}"),
        };
        if !wanted(&tag) && !wanted("ceiling") {
            continue;
        }
        let _: () = redis::cmd("FLUSHALL").query(&mut con)?;
        eprintln!("== {tag}");
        let (r0, o0) = (
            measure::redis_cpu(&mut con)?,
            measure::process_cpu(std::process::id()),
        );
        let rate = match (depth, batched) {
            (1, _) => ceiling::run(&url, ns, queue, jobs, c)?,
            (_, false) => ceiling::run_pipelined(&url, ns, queue, jobs, c, depth)?,
            (_, true) => ceiling::run_batched(&url, ns, queue, jobs, c, depth)?,
        };
        let (r1, o1) = (
            measure::redis_cpu(&mut con)?,
            measure::process_cpu(std::process::id()),
        );
        let per = |a: f64, b: f64| (b - a) * 1e6 / jobs as f64;
        eprintln!("   {rate:.0} jobs/s");
        if let Ok(path) = std::env::var("BENCH_JSON") {
            use std::io::Write as _;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)?;
            writeln!(
                f,
                "{{\"tag\":\"{tag}\",\"jobs\":{jobs},\"jobs_per_s\":{rate},\"redis_cpu_us_per_job\":{}}}",
                ceiling::window_redis_us().unwrap_or(f64::NAN)
            )?;
        }
        rows.push(Row {
            tag,
            name: {
                let conns = format!("{c} connection{}", if c == 1 { "" } else { "s" });
                match (depth, batched) {
                    (1, _) => format!("ceiling: Lua finish+reserve, {conns}"),
                    (_, false) => format!(
                        "ceiling: Lua finish+reserve, {c}×{depth} ids pipelined on {conns}"
                    ),
                    (_, true) => format!(
                        "ceiling: Lua finish+reserve, {c}×{depth} ids batched in one call per round trip on {conns}"
                    ),
                }
            },
            rate,
            pickup: Vec::new(),
            idle: None,
            rss: None,
            redis_us: Some(per(r0, r1)),
            own_us: o0.zip(o1).map(|(a, b)| per(a, b)),
        });
    }

    // With BASELINE_BIN, an earlier build runs next to each resq subject (before it).
    let baseline = std::env::var_os("BASELINE_BIN").is_some();
    let mut kinds = Vec::new();
    for n in [1, 8, 64] {
        if baseline {
            kinds.push(Kind::ResqBaseline(n));
        }
        kinds.push(Kind::Resq(n));
    }
    kinds.extend([
        Kind::Jesque(1),
        Kind::Jesque(4),
        Kind::Node(false),
        Kind::Node(true),
    ]);
    for kind in kinds {
        let tag = kind.tag();
        if !wanted(&tag) {
            continue;
        }
        eprintln!("== {tag}");
        let _: () = redis::cmd("FLUSHALL").query(&mut con)?;
        let log = logs.join(format!("{tag}.log"));
        let running = subject::start(&kind, &root, server.port, ns, queue, &log)?;
        let expect = match kind {
            Kind::Resq(n) | Kind::ResqBaseline(n) | Kind::Jesque(n) => n,
            Kind::Node(_) => 1,
        };
        subject::wait_registered(&mut con, ns, expect)?;
        let (r0, o0) = (
            measure::redis_cpu(&mut con)?,
            measure::process_cpu(running.pid()),
        );
        let rate = measure::drain(&mut con, ns, queue, jobs)?;
        let (r1, o1) = (
            measure::redis_cpu(&mut con)?,
            measure::process_cpu(running.pid()),
        );
        let per = |a: f64, b: f64| (b - a) * 1e6 / jobs as f64;
        let (redis_us, own_us) = (Some(per(r0, r1)), o0.zip(o1).map(|(a, b)| per(a, b)));
        eprintln!("   drain {rate:.0} jobs/s");
        std::thread::sleep(Duration::from_secs(3));
        let idle = measure::idle_rate(&mut con, idle_secs)?;
        eprintln!("   idle {idle:.2} commands/s");
        let pickup = measure::pickup(&mut con, ns, queue, latency_jobs, budget)?;
        eprintln!(
            "   pick-up p50 {:.2} ms p99 {:.2} ms (n={})",
            measure::quantile(&pickup, 0.5).unwrap_or(f64::NAN),
            measure::quantile(&pickup, 0.99).unwrap_or(f64::NAN),
            pickup.len()
        );
        let rss = subject::peak_rss_mib(running.pid());
        running.stop()?;
        rows.push(Row {
            tag,
            name: kind.name(),
            rate,
            pickup,
            idle: Some(idle),
            rss,
            redis_us,
            own_us,
        });
    }
    let peers = peers::run(
        &peers::Ctx {
            root: &root,
            port: server.port,
            logs: &logs,
            jobs,
        },
        &mut con,
        &wanted,
        env_num("ROUNDS", 3).max(1) as usize,
    )?;
    let load_after = load();
    let redis_version: String = redis::cmd("INFO")
        .arg("server")
        .query::<String>(&mut con)?
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:").map(str::to_string))
        .unwrap_or_default();
    let _ = server.pid();
    let mut report = report(
        &rows,
        jobs,
        idle_secs,
        &redis_version,
        &load_before,
        &load_after,
    );
    if let Some(p) = peers {
        // run writes what follows this line into docs/performance.md's peers block.
        let _ = write!(
            report,
            "\n<!-- peers -->\n{}\n\n{p}",
            machine(&redis_version, &load_before, &load_after)
        );
    }
    println!("{report}");
    if let Ok(path) = std::env::var("BENCH_OUT") {
        std::fs::write(path, &report)?;
    }
    Ok(())
}

fn fmt_opt(v: Option<f64>, prec: usize) -> String {
    v.filter(|x| x.is_finite())
        .map(|x| format!("{x:.prec$}"))
        .unwrap_or_else(|| "–".into())
}

/// The machine, the server and the load average before and after the run, one line.
fn machine(redis: &str, before: &str, after: &str) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string())
            })
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    format!("Machine: {cores} cores ({cpu}), redis-server {redis} on the same cores; load average before {before}, after {after}.")
}

fn report(
    rows: &[Row],
    jobs: usize,
    idle_secs: u64,
    redis: &str,
    before: &str,
    after: &str,
) -> String {
    let ceiling = rows
        .iter()
        .filter(|r| r.tag.starts_with("ceiling"))
        .map(|r| r.rate)
        .fold(f64::NAN, f64::max);
    let unpipelined = rows
        .iter()
        .filter(|r| r.tag.starts_with("ceiling-c"))
        .map(|r| r.rate)
        .fold(f64::NAN, f64::max);
    let per_job_call = rows
        .iter()
        .filter(|r| r.tag.starts_with("ceiling-c") || r.tag.starts_with("ceiling-p"))
        .map(|r| r.rate)
        .fold(f64::NAN, f64::max);
    let resq_best = rows
        .iter()
        .filter(|r| r.tag.starts_with("resq-c"))
        .map(|r| r.rate)
        .fold(f64::NAN, f64::max);
    let mut s = String::new();
    let payload = match std::env::var("PAYLOAD_BYTES")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        Some(n) if n > 0 => format!(" (each with a {n}-byte string argument)"),
        _ => String::new(),
    };
    let _ = writeln!(s, "{}", machine(redis, before, after));
    let _ = writeln!(s);
    if rows.is_empty() {
        return s;
    }
    let _ = writeln!(s, "Drain: {jobs} `Noop` jobs{payload} pushed into a running, registered subject; jobs/s from the first job counted in `stat:processed` to the last. Pick-up: one `Echo` job at a time into an idle subject after a 30–70 ms gap, enqueue (RPUSH) → the job's own RPUSH seen by BLPOP; n = samples within the time budget. Idle: `INFO commandstats` calls/s over {idle_secs} s with nothing enqueued (one process). RSS: `VmHWM` of the worker process at the end. CPU µs/job: the subject's own CPU time (user + system, /proc) and Redis's (`INFO cpu`) over the drain, divided by the jobs (for the ceiling, own = the driver process running its client threads). Ceiling: worker ids calling one Lua script that finishes the previous job and reserves the next (the Redis work of one resq step without its payload checks), one id per connection, many ids' calls pipelined per connection, or many ids' transitions batched into one call per round trip (`ceiling_batch.lua`, as resq batches its slots' steps); the best row is the ceiling.");
    let _ = writeln!(s);
    let _ = writeln!(s, "| subject | drain jobs/s | ÷ ceiling | ÷ unpipelined ceiling | resq best ÷ this | CPU µs/job (own / Redis) | pick-up p50 ms | p99 ms | n | idle cmds/s | peak RSS MiB |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let p50 = measure::quantile(&r.pickup, 0.5);
        let p99 = measure::quantile(&r.pickup, 0.99);
        let _ = writeln!(
            s,
            "| {} | {:.0} | {} | {} | {} | {} / {} | {} | {} | {} | {} | {} |",
            r.name,
            r.rate,
            fmt_opt(Some(r.rate / ceiling), 2),
            fmt_opt(Some(r.rate / unpipelined), 2),
            if r.tag.starts_with("resq-c") {
                "–".to_string()
            } else {
                fmt_opt(Some(resq_best / r.rate), 2)
            },
            fmt_opt(r.own_us, 1),
            fmt_opt(r.redis_us, 1),
            fmt_opt(p50, 2),
            fmt_opt(p99, 2),
            if r.pickup.is_empty() {
                "–".to_string()
            } else {
                r.pickup.len().to_string()
            },
            fmt_opt(r.idle, 2),
            fmt_opt(r.rss, 1),
        );
    }
    let _ = writeln!(s);
    let get = |tag: &str| rows.iter().find(|r| r.tag == tag);
    let mut checks: Vec<(String, String, bool)> = Vec::new();
    if ceiling.is_finite() && resq_best.is_finite() {
        let v = resq_best / ceiling;
        checks.push((
            "resq best ÷ ceiling (best client shape, batched included) ≥ 0.8".into(),
            format!("{v:.2}"),
            v >= 0.8,
        ));
    }
    if per_job_call.is_finite() && resq_best.is_finite() {
        let v = resq_best / per_job_call;
        checks.push((
            "resq best ÷ best one-call-per-job ceiling (pipelined or not) ≥ 0.8".into(),
            format!("{v:.2}"),
            v >= 0.8,
        ));
    }
    if unpipelined.is_finite() && resq_best.is_finite() {
        let v = resq_best / unpipelined;
        checks.push((
            "resq best ÷ unpipelined ceiling (one call per round trip per connection) ≥ 0.8".into(),
            format!("{v:.2}"),
            v >= 0.8,
        ));
    }
    if let Some(j) = get("jesque-x4") {
        let v = resq_best / j.rate;
        checks.push((
            "resq best ÷ Jesque ×4 ≥ 2.5".into(),
            format!("{v:.2}"),
            v >= 2.5,
        ));
    }
    for r in rows.iter().filter(|r| r.tag.starts_with("resq-c")) {
        if let (Some(p50), Some(p99)) = (
            measure::quantile(&r.pickup, 0.5),
            measure::quantile(&r.pickup, 0.99),
        ) {
            checks.push((
                format!("{}: pick-up p50 ≤ 2 ms", r.tag),
                format!("{p50:.2} ms"),
                p50 <= 2.0,
            ));
            checks.push((
                format!("{}: pick-up p99 ≤ 10 ms", r.tag),
                format!("{p99:.2} ms"),
                p99 <= 10.0,
            ));
        }
        if let Some(i) = r.idle {
            checks.push((
                format!("{}: idle ≤ 10 commands/s", r.tag),
                format!("{i:.2}"),
                i <= 10.0,
            ));
        }
    }
    if let Some(r) = get("resq-c64").and_then(|r| r.rss) {
        checks.push((
            "resq-c64: peak RSS ≤ 30 MB".into(),
            format!("{r:.1} MiB"),
            r * 1.048_576 <= 30.0,
        ));
    }
    let _ = writeln!(s, "| target | measured | met |");
    let _ = writeln!(s, "|---|---:|:---:|");
    for (what, v, ok) in checks {
        let _ = writeln!(
            s,
            "| {what} | {v} | {} |",
            if ok { "yes" } else { "**no**" }
        );
    }
    s
}
