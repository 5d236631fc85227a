//! The peers table (`ONLY=peers`): resq's `compat_worker` against real Sidekiq (Debian's
//! `ruby-sidekiq`) and real BullMQ (npm, pinned in `compat-tests/bench/node/package.json`), no-op
//! jobs at 1, 8 and 64 slots (`PEER_SLOTS`, a comma list, e.g. `1,2,4,8`), plain and tracked,
//! on one Redis, median of `ROUNDS` rounds. With `BASELINE_BIN` (another build's
//! `compat_worker`, labelled `BASELINE_LABEL`), its plain row (`peer-resq-before-cN`) runs just
//! before resq's at each slot count: a change's effect, measured in one run.
//!
//! A round of one subject: `FLUSHALL`; the jobs enqueued with the system's own client (resq:
//! `RPUSH` of Ruby's JSON, or `resq enqueue --track --file` for tracked; Sidekiq:
//! `Sidekiq::Client.push_bulk`; BullMQ: `Queue.addBulk`); the counters read (`INFO cpu`,
//! `commandstats`, `memory`); the worker started; the counters read again when its last job is
//! done; the worker stopped. So what is measured is the drain, with the worker's start-up in it
//! (a handful of commands) and the enqueue out of it. Sidekiq and BullMQ say on stdout when
//! their first and last job completed (counted in the process: the driver sends Redis nothing
//! meanwhile); resq's last job is seen in `stat:processed`, polled every 2 ms, whose `GET`s are
//! taken out of the command counts.

use crate::measure;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// One system under test.
#[derive(Debug, Clone, Copy, PartialEq)]
enum System {
    /// resq's `compat_worker`; `true`: every job enqueued tracked.
    Resq(bool),
    /// Another build's `compat_worker` (`BASELINE_BIN`), plain jobs.
    ResqBefore,
    /// Sidekiq, concurrency N in one process.
    Sidekiq,
    /// BullMQ, one `Worker` with concurrency N.
    Bullmq,
}

impl System {
    fn tag(self, slots: usize) -> String {
        match self {
            System::Resq(false) => format!("peer-resq-c{slots}"),
            System::Resq(true) => format!("peer-resq-tracked-c{slots}"),
            System::ResqBefore => format!("peer-resq-before-c{slots}"),
            System::Sidekiq => format!("peer-sidekiq-c{slots}"),
            System::Bullmq => format!("peer-bullmq-c{slots}"),
        }
    }

    fn name(self) -> String {
        match self {
            System::Resq(false) => "resq compat_worker, plain".into(),
            System::Resq(true) => "resq compat_worker, every job tracked".into(),
            System::ResqBefore => format!(
                "resq compat_worker, plain, {}",
                std::env::var("BASELINE_LABEL").unwrap_or_else(|_| "baseline build".into())
            ),
            System::Sidekiq => "Sidekiq 6.4 (no tracking)".into(),
            System::Bullmq => "BullMQ (a hash per job: plain is tracked)".into(),
        }
    }
}

/// What one round measured.
#[derive(Debug, Clone, Default)]
struct Round {
    rate: f64,
    redis_us: f64,
    cmds: f64,
    mem: f64,
    /// Per command: (calls per job, µs inside it per job).
    by_cmd: BTreeMap<String, (f64, f64)>,
}

/// The server's counters at one instant.
struct Snap {
    cpu: f64,
    cmds: BTreeMap<String, (u64, u64)>,
}

fn snap(con: &mut redis::Connection) -> Result<Snap> {
    let cpu = measure::redis_cpu(con)?;
    let info: String = redis::cmd("INFO").arg("commandstats").query(con)?;
    let mut cmds = BTreeMap::new();
    for l in info.lines() {
        let Some(rest) = l.strip_prefix("cmdstat_") else {
            continue;
        };
        let Some((name, fields)) = rest.split_once(':') else {
            continue;
        };
        if name == "info" {
            continue;
        }
        let field = |k: &str| {
            fields
                .split(',')
                .find_map(|f| f.strip_prefix(k))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        cmds.insert(name.to_string(), (field("calls="), field("usec=")));
    }
    Ok(Snap { cpu, cmds })
}

/// `used_memory` less the clients' buffers and the cached scripts and functions (a fixed cost,
/// not a job's), bytes.
fn memory(con: &mut redis::Connection) -> Result<f64> {
    let info: String = redis::cmd("INFO").arg("memory").query(con)?;
    let get = |k: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok(get("used_memory:") - get("mem_clients_normal:") - get("used_memory_scripts:"))
}

/// A started worker: its stdout lines, each with the instant it arrived.
struct Worker {
    child: Child,
    lines: mpsc::Receiver<(Instant, String)>,
    /// SIGTERM stops it (resq, Sidekiq); else closing stdin does (BullMQ).
    term: bool,
}

impl Worker {
    fn start(mut cmd: Command, log: &Path, term: bool) -> Result<Worker> {
        let logf = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(logf))
            .spawn()
            .with_context(|| format!("starting {cmd:?}"))?;
        let out = child.stdout.take().context("stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(|l| l.ok()) {
                let _ = tx.send((Instant::now(), l));
            }
        });
        Ok(Worker {
            child,
            lines: rx,
            term,
        })
    }

    /// Waits for a line equal to `want`; the instant it arrived.
    fn wait_line(&mut self, want: &str, deadline: Instant) -> Result<Instant> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((t, l)) if l == want => return Ok(t),
                Ok(_) => {}
                Err(_) => bail!("no {want:?} from the worker in time"),
            }
        }
    }

    fn stop(mut self) -> Result<()> {
        if self.term {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(self.child.id().to_string())
                .status();
        }
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }
}

/// Runs `cmd` to completion, its output into `log`.
fn run_to_end(mut cmd: Command, log: &Path) -> Result<()> {
    let logf = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let status = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::from(logf))
        .status()
        .with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed (see {})", log.display());
    }
    Ok(())
}

/// Settings shared by every round.
pub struct Ctx<'a> {
    pub root: &'a Path,
    pub port: u16,
    pub logs: &'a Path,
    pub jobs: usize,
}

fn one_round(
    ctx: &Ctx,
    con: &mut redis::Connection,
    sys: System,
    slots: usize,
    log: &Path,
) -> Result<Round> {
    let (ns, queue) = ("bench", "bench");
    let url = format!("redis://127.0.0.1:{}", ctx.port);
    let bench = ctx.root.join("compat-tests/bench");
    let jobs = ctx.jobs;
    let _: () = redis::cmd("FLUSHALL").query(con)?;
    let mem0 = memory(con)?;
    // Enqueue, with the system's own client.
    match sys {
        System::Resq(false) | System::ResqBefore => measure::fill(con, ns, queue, jobs)?,
        System::Resq(true) => {
            let file = ctx.logs.join("peers-tracked.ndjson");
            let mut f = std::io::BufWriter::new(std::fs::File::create(&file)?);
            for _ in 0..jobs {
                writeln!(f, "{}", measure::NOOP)?;
            }
            f.flush()?;
            drop(f);
            let mut cmd = Command::new(crate::subject::resq_release(ctx.root).join("resq"));
            cmd.env("REDIS_URL", &url)
                .env("RESQUE_NAMESPACE", ns)
                .args(["enqueue", "--track", "--queue", queue, "--file"])
                .arg(&file);
            run_to_end(cmd, log)?;
        }
        System::Sidekiq => {
            let mut cmd = Command::new("ruby");
            cmd.env("REDIS_URL", &url)
                .arg(bench.join("ruby/sidekiq_bench.rb"))
                .args(["push", &jobs.to_string(), queue]);
            run_to_end(cmd, log)?;
        }
        System::Bullmq => {
            let mut cmd = Command::new("node");
            cmd.arg(bench.join("node/bullmq.js"))
                .args(["127.0.0.1", &ctx.port.to_string(), queue, "push"])
                .arg(jobs.to_string());
            run_to_end(cmd, log)?;
        }
    }
    let s0 = snap(con)?;
    let deadline = Instant::now() + Duration::from_secs(900);
    let mut polls = 0u64;
    let (worker, first, last) = match sys {
        System::Resq(_) | System::ResqBefore => {
            let bin = match (sys, std::env::var_os("BASELINE_BIN")) {
                (System::ResqBefore, Some(b)) => std::path::PathBuf::from(b),
                (System::ResqBefore, None) => bail!("peer-resq-before needs BASELINE_BIN"),
                _ => crate::subject::resq_release(ctx.root).join("examples/compat_worker"),
            };
            let mut cmd = Command::new(bin);
            cmd.env("REDIS_URL", &url)
                .env("RESQUE_NAMESPACE", ns)
                .env("QUEUES", queue)
                .env("CONCURRENCY", slots.to_string());
            let w = Worker::start(cmd, log, true)?;
            let mut first = None;
            let last = loop {
                let v: Option<u64> = redis::cmd("GET")
                    .arg(format!("{ns}:stat:processed"))
                    .query(con)?;
                polls += 1;
                let (now, p) = (Instant::now(), v.unwrap_or(0));
                if p > 0 && first.is_none() {
                    first = Some((now, p));
                }
                if p >= jobs as u64 {
                    break (now, p);
                }
                if now > deadline {
                    bail!("{}: {p} of {jobs} jobs in 900 s", sys.tag(slots));
                }
                std::thread::sleep(Duration::from_millis(2));
            };
            let (t0, p0) = first.unwrap_or(last);
            (w, (t0, p0), last)
        }
        System::Sidekiq => {
            let mut cmd = Command::new("sidekiq");
            cmd.current_dir(bench.join("ruby"))
                .env("REDIS_URL", &url)
                .env("BENCH_JOBS", jobs.to_string())
                .args(["-r", "./sidekiq_bench.rb", "-q", queue, "-t", "1", "-c"])
                .arg(slots.to_string());
            let mut w = Worker::start(cmd, log, true)?;
            let t0 = w.wait_line("BENCH first", deadline)?;
            let t1 = w.wait_line("BENCH done", deadline)?;
            (w, (t0, 1), (t1, jobs as u64))
        }
        System::Bullmq => {
            let mut cmd = Command::new("node");
            cmd.arg(bench.join("node/bullmq.js"))
                .args(["127.0.0.1", &ctx.port.to_string(), queue, "work"])
                .args([jobs.to_string(), slots.to_string()]);
            let mut w = Worker::start(cmd, log, false)?;
            let t0 = w.wait_line("BENCH first", deadline)?;
            let t1 = w.wait_line("BENCH done", deadline)?;
            (w, (t0, 1), (t1, jobs as u64))
        }
    };
    let s1 = snap(con)?;
    let mem1 = memory(con)?;
    worker.stop()?;
    let n = jobs as f64;
    let secs = last.0.duration_since(first.0).as_secs_f64();
    let rate = if secs > 0.0 {
        (last.1 - first.1) as f64 / secs
    } else {
        f64::NAN
    };
    let mut by_cmd = BTreeMap::new();
    let mut total = 0u64;
    for (name, &(c1, u1)) in &s1.cmds {
        let (c0, u0) = s0.cmds.get(name).copied().unwrap_or((0, 0));
        let mut calls = c1.saturating_sub(c0);
        if name == "get" {
            calls = calls.saturating_sub(polls);
        }
        if calls > 0 {
            total += calls;
            by_cmd.insert(
                name.clone(),
                (calls as f64 / n, u1.saturating_sub(u0) as f64 / n),
            );
        }
    }
    Ok(Round {
        rate,
        redis_us: (s1.cpu - s0.cpu) * 1e6 / n,
        cmds: total as f64 / n,
        mem: (mem1 - mem0) / n,
        by_cmd,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A measured row: medians, and the per-command split of the median-CPU round.
struct Row {
    sys: System,
    slots: usize,
    med: Round,
}

/// Runs the subjects `wanted` selects (`peers`, or a tag such as `peer-sidekiq-c1`); the
/// markdown section, or `None` when none was selected.
pub fn run(
    ctx: &Ctx,
    con: &mut redis::Connection,
    wanted: &dyn Fn(&str) -> bool,
    rounds: usize,
) -> Result<Option<String>> {
    let mut rows = Vec::new();
    let slot_counts: Vec<usize> = std::env::var("PEER_SLOTS")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 8, 64]);
    let before = std::env::var_os("BASELINE_BIN").is_some();
    for slots in slot_counts {
        for sys in [
            System::ResqBefore,
            System::Resq(false),
            System::Resq(true),
            System::Sidekiq,
            System::Bullmq,
        ] {
            let tag = sys.tag(slots);
            if (!wanted(&tag) && !wanted("peers")) || (sys == System::ResqBefore && !before) {
                continue;
            }
            let log = ctx.logs.join(format!("{tag}.log"));
            let _ = std::fs::remove_file(&log);
            let mut got = Vec::new();
            for r in 0..rounds {
                let x = one_round(ctx, con, sys, slots, &log)?;
                eprintln!(
                    "== {tag} round {}: {:.0} jobs/s, Redis {:.1} µs/job, {:.2} cmds/job, {:.0} B/job",
                    r + 1,
                    x.rate,
                    x.redis_us,
                    x.cmds,
                    x.mem
                );
                got.push(x);
            }
            let mid = median(got.iter().map(|x| x.redis_us).collect());
            let split = got
                .iter()
                .find(|x| x.redis_us == mid)
                .map(|x| x.by_cmd.clone())
                .unwrap_or_default();
            rows.push(Row {
                sys,
                slots,
                med: Round {
                    rate: median(got.iter().map(|x| x.rate).collect()),
                    redis_us: mid,
                    cmds: median(got.iter().map(|x| x.cmds).collect()),
                    mem: median(got.iter().map(|x| x.mem).collect()),
                    by_cmd: split,
                },
            });
        }
    }
    if rows.is_empty() {
        return Ok(None);
    }
    Ok(Some(report(&rows, ctx.jobs, rounds)))
}

fn report(rows: &[Row], jobs: usize, rounds: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Peers: {jobs} no-op jobs enqueued with each system's own client before its worker starts (resq: `RPUSH` of Ruby's JSON, tracked: `resq enqueue --track --file`; Sidekiq 6.4: `Sidekiq::Client.push_bulk`; BullMQ: `Queue.addBulk`, its defaults, completed jobs kept); measured from the worker's start to its last job (the enqueue out, the start-up in). jobs/s from the first job done to the last. Redis CPU: `INFO cpu` user + sys over the drain ÷ jobs. Commands: `INFO commandstats` calls ÷ jobs, the commands a Lua script or function runs included (the driver's own polls out). Memory left: `used_memory` less clients' buffers and cached scripts after the drain minus before the enqueue, ÷ jobs (what a worker registers is in it too, a few KB). Slots: resq `CONCURRENCY`, Sidekiq `-c`, BullMQ `concurrency` of one Worker. Median of {rounds} rounds, each figure on its own; ÷ Sidekiq: Redis CPU per job over Sidekiq's at the same slots.");
    let _ = writeln!(s);
    let _ = writeln!(s, "| system | slots | jobs/s | Redis CPU µs/job | ÷ Sidekiq | commands/job | memory left B/job |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
    let mut slots_seen: Vec<usize> = rows.iter().map(|r| r.slots).collect();
    slots_seen.dedup();
    for slots in slots_seen {
        let sk = rows
            .iter()
            .find(|r| r.slots == slots && r.sys == System::Sidekiq)
            .map(|r| r.med.redis_us);
        for r in rows.iter().filter(|r| r.slots == slots) {
            let ratio = match (r.sys, sk) {
                (System::Sidekiq, _) => "1".to_string(),
                (_, Some(k)) => format!("{:.2}", r.med.redis_us / k),
                _ => "–".into(),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {:.0} | {:.1} | {} | {:.2} | {:.0} |",
                r.sys.name(),
                slots,
                r.med.rate,
                r.med.redis_us,
                ratio,
                r.med.cmds,
                r.med.mem
            );
            if r.sys == System::Sidekiq {
                let _ = writeln!(
                    s,
                    "| Sidekiq 6.4, tracked | {slots} | n/a | n/a | n/a | n/a | n/a |"
                );
            }
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "Where the commands go (the median round's `INFO commandstats`: calls per job, and µs per job Redis spent inside the command, which leaves out reading, parsing and replying; a script's time includes that of the commands it runs, listed too):");
    let _ = writeln!(s);
    let _ = writeln!(s, "| system | slots | calls per job (µs inside per job) |");
    let _ = writeln!(s, "|---|---:|---|");
    for r in rows {
        let mut v: Vec<_> = r.med.by_cmd.iter().collect();
        v.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0));
        let parts: Vec<String> = v
            .iter()
            .filter(|(_, (c, _))| *c >= 0.005)
            .map(|(name, (c, u))| format!("`{name}` {c:.2} ({u:.1})"))
            .collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} |",
            r.sys.name(),
            r.slots,
            parts.join(", ")
        );
    }
    s
}
