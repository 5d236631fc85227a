//! Test support: a private `redis-server` per test binary, namespaces per test, and helpers to
//! wait for Redis state with a deadline.
//!
//! The server runs on a free loopback port under a small shell guard that kills it when the
//! test binary exits (its stdin closes), so no server outlives its tests.

#![allow(dead_code)]

pub mod audit;
pub mod cli;
pub mod failover;
pub mod scratch;
pub mod topology;

/// The key layout the crate uses (its one place that names keys), for tests to look at Redis.
#[path = "../../src/keys.rs"]
pub mod keys;
#[allow(unused_imports)]
pub(crate) use keys::Keys;

#[path = "../../src/testing/server.rs"]
mod server;
pub use server::{free_port, spawn_guard};

use redis::aio::MultiplexedConnection;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// A `redis-server` this test binary started.
pub struct RedisServer {
    /// The guard shell (owns the server).
    _guard: Child,
    /// Its port.
    pub port: u16,
    /// Its working directory.
    pub dir: PathBuf,
    /// The server's arguments (a restart reuses them: same port, same dir).
    args: Vec<String>,
    /// Guards of servers started again by [`RedisServer::restart`].
    restarts: std::sync::Mutex<Vec<Child>>,
    /// The pid of the server running now (the last one started).
    pid: std::sync::Mutex<u32>,
}

impl RedisServer {
    /// Starts a server on a free port with `extra` arguments; panics with the install command
    /// when `redis-server` is missing.
    pub fn start(extra: &[&str]) -> RedisServer {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("resq-test-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut args = vec![
            "--port".to_string(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--dir".into(),
            dir.display().to_string(),
            "--save".into(),
            "".into(),
            "--appendonly".into(),
            "no".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        if Command::new("redis-server")
            .arg("--version")
            .output()
            .is_err()
        {
            panic!("redis-server is not installed: apt-get install -y redis-server");
        }
        let (guard, pid) = spawn_guard("redis-server", &args, None);
        let server = RedisServer {
            _guard: guard,
            port,
            dir,
            args,
            restarts: std::sync::Mutex::new(Vec::new()),
            pid: std::sync::Mutex::new(pid),
        };
        server.wait_ready();
        server
    }

    /// Stops the server as an operator would (`SHUTDOWN`: the AOF is flushed) and waits until
    /// its port refuses connections.
    pub fn stop(&self) {
        let client = redis::Client::open(self.url()).expect("url");
        if let Ok(mut c) = client.get_connection() {
            let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").query(&mut c);
        }
        self.wait_down();
    }

    /// Crashes the server: `kill -9` of the redis-server this test started (nothing is flushed
    /// beyond what its `appendfsync` already wrote), then waits until its port refuses
    /// connections. [`RedisServer::restart`] starts it again on the same data.
    pub fn kill9(&self) {
        let pid = *self.pid.lock().expect("pid");
        let ok = Command::new("kill")
            .arg("-9")
            .arg(pid.to_string())
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -9 {pid} (redis-server) failed");
        self.wait_down();
    }

    fn wait_down(&self) {
        for _ in 0..1000 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("redis-server on port {} did not stop", self.port);
    }

    /// Starts the server again on the same port and directory (so it reloads its AOF) and
    /// waits until it answers.
    pub fn restart(&self) {
        let (guard, pid) = spawn_guard("redis-server", &self.args, None);
        self.restarts.lock().expect("restarts").push(guard);
        *self.pid.lock().expect("pid") = pid;
        self.wait_ready();
    }

    /// A plain async connection to this server.
    pub async fn con(&self) -> MultiplexedConnection {
        redis::Client::open(self.url())
            .expect("url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect")
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn wait_ready(&self) {
        let client = redis::Client::open(self.url()).expect("url");
        for _ in 0..400 {
            if let Ok(mut c) = client.get_connection() {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("redis-server on port {} did not start", self.port);
    }
}

/// The shared server of this test binary.
pub fn redis() -> &'static RedisServer {
    static SERVER: OnceLock<RedisServer> = OnceLock::new();
    SERVER.get_or_init(|| RedisServer::start(&[]))
}

/// The shared server's URL.
pub fn url() -> String {
    redis().url()
}

/// A namespace no other test uses.
pub fn namespace(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "t{}-{prefix}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// A plain async connection to the shared server.
pub async fn con() -> MultiplexedConnection {
    redis::Client::open(url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

/// Polls `check` every 5 ms until it returns `Some`, or panics after `secs` seconds with
/// `what`. Redis has no event for "this key now holds N items", so tests poll it, bounded.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    // A bound under 30 s is raised to 30 s: a loaded CI machine is slow, and a bound only
    // matters when the test fails.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs.max(30));
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {secs}s waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Path of an example binary built by `cargo test` (e.g. `compat_worker`).
pub fn example_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    // target/<profile>/deps/<test> → target/<profile>/examples/<name>
    let profile_dir = exe.parent().and_then(|d| d.parent()).expect("profile dir");
    let p = profile_dir.join("examples").join(name);
    assert!(
        p.exists(),
        "{} not built; run cargo test (it builds examples)",
        p.display()
    );
    p
}

/// Path of the `resq` binary.
pub fn resq_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_resq"))
}

/// The variables the README's configuration table names (every backquoted name in its first
/// column: `REDIS_TLS_CA` / `REDIS_TLS_CERT` / … count one by one).
pub fn readme_variables() -> std::collections::BTreeSet<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path).expect("README.md");
    let table = readme
        .split("\n## Configuration\n")
        .nth(1)
        .expect("a `## Configuration` section in README.md");
    table
        .lines()
        .skip_while(|l| !l.starts_with("| variable"))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('|').nth(1))
        .flat_map(|cell| {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Reads a fixture under `fixtures/`.
pub fn fixture(path: &str) -> serde_json::Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(path);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).expect("fixture JSON")
}

/// A compat worker process (`examples/compat_worker`) started by a test: its slot ids, its
/// stderr log (in a temp file), signals by name. Dropping it SIGKILLs it if it still runs.
pub struct WorkerProc {
    /// The process.
    child: Child,
    /// Its slot ids, from its `worker <id>` lines.
    pub ids: Vec<String>,
    /// Where its stderr goes.
    pub log: PathBuf,
    /// Its stdout, kept open: a worker printing more ids than were read (a spread namespace's
    /// slots of every queue) must not write into a closed pipe.
    _stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl WorkerProc {
    /// Starts the compat worker against `url`/`ns` with `CONCURRENCY=concurrency`, `env` on top
    /// (`QUEUES`, `INTERVAL`, …), and waits for its `worker <id>` lines.
    pub fn start(url: &str, ns: &str, concurrency: usize, env: &[(&str, &str)]) -> WorkerProc {
        static N: AtomicUsize = AtomicUsize::new(0);
        let log = std::env::temp_dir().join(format!(
            "resq-test-worker-{}-{}-{}.log",
            std::process::id(),
            ns,
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let err = std::fs::File::create(&log).expect("log file");
        let mut cmd = Command::new(example_bin("compat_worker"));
        cmd.env("REDIS_URL", url)
            .env("RESQUE_NAMESPACE", ns)
            .env("CONCURRENCY", concurrency.to_string())
            .env("QUEUES", "default")
            .env("INTERVAL", "0.5")
            .env("RUST_LOG", "info")
            .env_remove("RESQ_LOG_FORMAT");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(err))
            .spawn()
            .expect("start compat_worker");
        let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut ids = Vec::new();
        while ids.len() < concurrency {
            let mut line = String::new();
            if out.read_line(&mut line).unwrap_or(0) == 0 {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "compat_worker exited before printing its ids; stderr:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            if let Some(id) = line.trim_end().strip_prefix("worker ") {
                ids.push(id.to_string());
            }
        }
        WorkerProc {
            child,
            ids,
            log,
            _stdout: out,
        }
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (`QUIT`, `TERM`, `USR1`, …) with `kill`.
    pub fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -{signal} {} failed", self.pid());
    }

    /// SIGKILLs it and reaps it.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits up to `secs` for it to exit; panics (with its log) if it does not.
    pub fn wait_exit(&mut self, secs: u64) -> std::process::ExitStatus {
        // As in `eventually`: at least 30 s.
        let deadline = std::time::Instant::now() + Duration::from_secs(secs.max(30));
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            if std::time::Instant::now() > deadline {
                panic!(
                    "compat_worker did not exit within {secs}s; stderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Its stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for WorkerProc {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Blocking twin of [`eventually`] for tests that drive processes: polls `check` every 5 ms
/// until it returns `Some`, or panics after `secs` seconds with `what`.
pub fn wait_until<T>(secs: u64, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    // As in `eventually`: at least 30 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(secs.max(30));
    loop {
        if let Some(v) = check() {
            return v;
        }
        if std::time::Instant::now() > deadline {
            panic!("timed out after {secs}s waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A worker builder on the shared server for namespace `ns` and `queues`.
pub fn builder(ns: &str, queues: &str) -> resq::WorkerBuilder {
    resq::Worker::builder()
        .redis_url(url())
        .namespace(ns)
        .queues(queues)
        .expect("queue list")
}

/// Builds and starts `b`.
pub async fn start(b: resq::WorkerBuilder) -> resq::Running {
    b.build().expect("config").start().await.expect("start")
}

/// Stops a worker the QUIT way (running jobs finish) and waits until it has unregistered.
pub async fn stop(r: resq::Running) {
    r.stop(resq::Phase::Quit);
    r.wait().await.expect("unregister");
}

/// A resque-scheduler-compatible scheduler on the shared server for `ns`, holding the master
/// lock under `value` (tests run several and tell them apart by it).
pub async fn scheduler(ns: &str, value: &str) -> resq::scheduler::Scheduler {
    let cfg = resq::scheduler::SchedulerConfig {
        redis_url: url(),
        namespace: ns.to_string(),
        ..resq::scheduler::SchedulerConfig::default()
    };
    let con = resq::conn::Endpoint::open(&url())
        .expect("url")
        .connect()
        .await
        .expect("connect");
    resq::scheduler::Scheduler::with_lock_value(con, cfg, value.to_string())
}
