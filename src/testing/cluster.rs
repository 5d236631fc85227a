//! A Redis Cluster of three masters on free loopback ports, for the crate's unit tests of the
//! spread layout (one per test binary, started on first use; every node under the guard of
//! [`super::server::spawn_guard`], so none outlives the tests). The integration tests have
//! their own, with replicas and failovers (`tests/support/topology.rs`).

use super::server::{free_port, spawn_guard};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Held by each unit test that sends commands to the cluster, so one test's command counts
/// (`INFO commandstats`) are its own.
pub(crate) static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The running cluster.
pub(crate) struct Cluster {
    /// The nodes' guards (each kills its node when the test binary exits).
    _guards: Mutex<Vec<Child>>,
    /// The nodes' ports.
    pub(crate) ports: Vec<u16>,
}

impl Cluster {
    /// `redis+cluster://` over every node.
    pub(crate) fn url(&self) -> String {
        let hosts: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// A plain connection to the node on `port`.
    pub(crate) fn node(&self, port: u16) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{port}"))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
            .expect("cluster node")
    }

    /// Loads the library on every node (each test's calls then find it).
    pub(crate) async fn load_library(&self) {
        for &p in &self.ports {
            let node = redis::Client::open(format!("redis://127.0.0.1:{p}")).expect("node url");
            let mut con = node.get_multiplexed_async_connection().await.expect("node");
            crate::scripts::load(&mut con)
                .await
                .expect("library loaded");
        }
    }

    /// The port of the node holding `key` (the one that answers `EXISTS` without `MOVED`).
    pub(crate) fn owner(&self, key: &str) -> u16 {
        for &p in &self.ports {
            let r: redis::RedisResult<i64> = redis::cmd("EXISTS").arg(key).query(&mut self.node(p));
            if r.is_ok() {
                return p;
            }
        }
        panic!("no node owns {key}");
    }
}

/// Polls `check` every 20 ms until it is true, or panics after 30 s naming `what`.
fn wait(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// This test binary's cluster (started on first use).
pub(crate) fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(start)
}

fn start() -> Cluster {
    let dir = std::env::temp_dir().join(format!("resq-unit-cluster-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("cluster dir");
    let mut guards = Vec::new();
    let mut ports = Vec::new();
    for _ in 0..3 {
        let port = free_port();
        let args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--dir",
            &dir.display().to_string(),
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            &format!("nodes-{port}.conf"),
            "--cluster-node-timeout",
            "1000",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        guards.push(spawn_guard("redis-server", &args, None).0);
        ports.push(port);
    }
    let c = Cluster {
        _guards: Mutex::new(guards),
        ports,
    };
    for &p in &c.ports {
        wait("a cluster node to answer", || {
            redis::Client::open(format!("redis://127.0.0.1:{p}"))
                .and_then(|cl| cl.get_connection_with_timeout(Duration::from_secs(1)))
                .and_then(|mut con| redis::cmd("PING").query::<String>(&mut con))
                .is_ok()
        });
    }
    let mut create = Command::new("redis-cli");
    create.arg("--cluster").arg("create");
    for p in &c.ports {
        create.arg(format!("127.0.0.1:{p}"));
    }
    let out = create
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .stdin(Stdio::null())
        .output()
        .expect("redis-cli is not installed: apt-get install -y redis-tools");
    assert!(
        out.status.success(),
        "cluster create failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    for &p in &c.ports {
        wait("cluster_state:ok", || {
            redis::cmd("CLUSTER")
                .arg("INFO")
                .query::<String>(&mut c.node(p))
                .is_ok_and(|i| i.contains("cluster_state:ok"))
        });
    }
    c
}
