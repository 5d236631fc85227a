//! The workers under test, each started as its own process against the private server:
//! resq's compat worker, real Jesque `WorkerImpl`s, real node-resque `Worker`/`MultiWorker`.

use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// One subject.
#[derive(Debug, Clone)]
pub enum Kind {
    /// `compat_worker` with `CONCURRENCY` slots.
    Resq(usize),
    /// Another build of `compat_worker` (`BASELINE_BIN`, labelled `BASELINE_LABEL`) with
    /// `CONCURRENCY` slots: an earlier commit measured in the same run.
    ResqBaseline(usize),
    /// N Jesque `WorkerImpl` threads in one JVM.
    Jesque(usize),
    /// node-resque `Worker` (false) or `MultiWorker` (true).
    Node(bool),
}

impl Kind {
    /// Its row name.
    pub fn name(&self) -> String {
        match self {
            Kind::Resq(n) => format!("resq compat_worker, CONCURRENCY={n}"),
            Kind::ResqBaseline(n) => format!(
                "resq compat_worker {}, CONCURRENCY={n}",
                std::env::var("BASELINE_LABEL").unwrap_or_else(|_| "(baseline build)".into())
            ),
            Kind::Jesque(n) => format!("Jesque 2.2.0 WorkerImpl ×{n}"),
            Kind::Node(false) => "node-resque 9 Worker".into(),
            Kind::Node(true) => "node-resque 9 MultiWorker".into(),
        }
    }

    /// Short tag for logs and ratios.
    pub fn tag(&self) -> String {
        match self {
            Kind::Resq(n) => format!("resq-c{n}"),
            Kind::ResqBaseline(n) => format!("resq-before-c{n}"),
            Kind::Jesque(n) => format!("jesque-x{n}"),
            Kind::Node(false) => "node-worker".into(),
            Kind::Node(true) => "node-multi".into(),
        }
    }
}

/// A started subject.
pub struct Running {
    /// The worker process (its pid is the one measured).
    child: Child,
    /// Closing it stops Java and node subjects.
    stdin: Option<ChildStdin>,
    /// Whether it stops on SIGTERM (resq) rather than on stdin EOF.
    term: bool,
}

/// Starts `kind` against `port`, namespace `ns`, queue `queue`; returns once it is ready.
pub fn start(
    kind: &Kind,
    root: &Path,
    port: u16,
    ns: &str,
    queue: &str,
    log: &Path,
) -> Result<Running> {
    let bench = root.join("compat-tests/bench");
    let logf = std::fs::File::create(log)?;
    let mut cmd;
    let term;
    match kind {
        Kind::Resq(n) | Kind::ResqBaseline(n) => {
            cmd = match (kind, std::env::var_os("BASELINE_BIN")) {
                (Kind::ResqBaseline(_), Some(bin)) => Command::new(bin),
                (Kind::ResqBaseline(_), None) => bail!("resq-before-c{n} needs BASELINE_BIN"),
                _ => Command::new(resq_release(root).join("examples/compat_worker")),
            };
            cmd.env("REDIS_URL", format!("redis://127.0.0.1:{port}"))
                .env("RESQUE_NAMESPACE", ns)
                .env("QUEUES", queue)
                .env("CONCURRENCY", n.to_string());
            term = true;
        }
        Kind::Jesque(n) => {
            let java = bench.join("java/target");
            let cp = format!(
                "{}:{}/*",
                java.join("classes").display(),
                java.join("lib").display()
            );
            cmd = Command::new("java");
            cmd.arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
                .args(["-cp", &cp, "resqbench.JesqueWorkers", "127.0.0.1"])
                .args([
                    port.to_string(),
                    ns.to_string(),
                    queue.to_string(),
                    n.to_string(),
                ]);
            term = false;
        }
        Kind::Node(multi) => {
            cmd = Command::new("node");
            cmd.arg(bench.join("node/workers.js"))
                .args(["127.0.0.1", &port.to_string(), ns, queue])
                .arg(if *multi { "multi" } else { "worker" });
            term = false;
        }
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(logf))
        .spawn()
        .with_context(|| format!("starting {}", kind.name()))?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().context("stdout")?;
    let want = match kind {
        Kind::Resq(n) | Kind::ResqBaseline(n) => *n,
        _ => 1,
    };
    // resq prints `worker <id>` per slot; the peers print `ready`.
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = 0;
    while seen < want {
        match lines.next() {
            Some(Ok(l)) if l.starts_with("worker ") || l == "ready" => seen += 1,
            Some(Ok(_)) => {}
            _ => bail!(
                "{} exited before it was ready (see {})",
                kind.name(),
                log.display()
            ),
        }
    }
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Ok(Running { child, stdin, term })
}

/// Waits until `<ns>:workers` has at least `n` members.
pub fn wait_registered(con: &mut redis::Connection, ns: &str, n: usize) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let have: usize = redis::cmd("SCARD")
            .arg(format!("{ns}:workers"))
            .query(con)?;
        if have >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("only {have} of {n} workers registered after 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Running {
    /// The worker process's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops it and waits (at most 30 s, then kills it).
    pub fn stop(mut self) -> Result<()> {
        if self.term {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(self.pid().to_string())
                .status();
        }
        drop(self.stdin.take());
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

/// Peak resident set (VmHWM) of `pid`, in MiB.
pub fn peak_rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// The repository root (three levels above this crate).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// resq's release build directory: `$CARGO_TARGET_DIR/release` when that is set (as the run
/// script's `cargo build` used it), else `target/release` under the repository root.
pub fn resq_release(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("release")
}
