//! Multi-node Redis deployments for the production-Redis tests (`tests/redis_*.rs`): nodes a
//! test can SIGKILL, a Sentinel set (master, replicas, three sentinels) and a Redis Cluster,
//! each on free loopback ports in a temp dir, every process under the same guard as
//! [`super::RedisServer`] (killed when the test binary exits).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Panics, naming `program` and the Debian package that has it, unless `program` can be run.
/// A test that needs a tool fails without it (it never passes without running): the README's
/// test command requires every such tool, and `.ci/run` installs them all.
pub fn require(program: &str, package: &str) {
    let found = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    assert!(
        found,
        "`{program}` is not installed and this test needs it: apt-get install -y {package} \
         (.ci/run installs everything the tests need)"
    );
}

/// A fresh temp dir for one deployment.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "resq-test-{name}-{}-{}",
        std::process::id(),
        super::free_port()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// One server process (redis-server or redis-sentinel) this test started.
pub struct Node {
    /// The guard shell.
    _guard: Child,
    /// The server's pid.
    pub pid: u32,
    /// Its port.
    pub port: u16,
    /// Its working directory.
    pub dir: PathBuf,
}

impl Node {
    /// Starts `program args…` under a guard (no readiness wait).
    pub fn spawn(program: &str, args: &[String], port: u16, dir: &Path) -> Node {
        let log = dir.join(format!("{program}-{port}.log"));
        let (guard, pid) = super::spawn_guard(program, args, Some(&log));
        Node {
            _guard: guard,
            pid,
            port,
            dir: dir.to_path_buf(),
        }
    }

    /// A `redis-server` on a free port with its own dir under `root`, `extra` arguments on top
    /// of the test defaults; waits until it answers.
    pub fn redis(root: &Path, extra: &[String]) -> Node {
        let port = super::free_port();
        let dir = root.join(format!("node-{port}"));
        std::fs::create_dir_all(&dir).expect("node dir");
        let mut args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--dir",
            &dir.display().to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().cloned());
        let node = Node::spawn("redis-server", &args, port, &dir);
        node.wait_ready();
        node
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A plain connection (panics if the node does not answer).
    pub fn con(&self) -> redis::Connection {
        self.try_con()
            .unwrap_or_else(|| panic!("node {} does not answer", self.port))
    }

    /// A plain connection, if the node answers.
    pub fn try_con(&self) -> Option<redis::Connection> {
        let c = redis::Client::open(self.url()).ok()?;
        c.get_connection_with_timeout(Duration::from_secs(2)).ok()
    }

    /// Waits until the node answers `PING`.
    pub fn wait_ready(&self) {
        super::wait_until(10, &format!("node {} to answer", self.port), || {
            let mut c = self.try_con()?;
            redis::cmd("PING").query::<String>(&mut c).ok()
        });
    }

    /// SIGKILLs the server (no shutdown, no last write) and waits until its port refuses.
    pub fn kill9(&self) {
        let ok = Command::new("kill")
            .arg("-9")
            .arg(self.pid.to_string())
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -9 {} failed", self.pid);
        super::wait_until(10, "the killed node's port to refuse", || {
            std::net::TcpStream::connect(("127.0.0.1", self.port))
                .is_err()
                .then_some(())
        });
    }

    /// `INFO replication` as key → value.
    pub fn replication(&self) -> Option<std::collections::HashMap<String, String>> {
        let mut c = self.try_con()?;
        let info: String = redis::cmd("INFO").arg("replication").query(&mut c).ok()?;
        Some(
            info.lines()
                .filter_map(|l| l.trim().split_once(':'))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }
}

/// One master, `replicas` replicas and three sentinels monitoring it as `name`.
pub struct SentinelSet {
    /// The master at start.
    pub master: Node,
    /// Its replicas.
    pub replicas: Vec<Node>,
    /// The sentinels.
    pub sentinels: Vec<Node>,
    /// The master's name.
    pub name: String,
}

impl SentinelSet {
    /// Starts the set and waits until every sentinel sees every replica and the two other
    /// sentinels (so a failover can be agreed on).
    pub fn start(root: &Path, replicas: usize) -> SentinelSet {
        let name = "resqmaster".to_string();
        let master = Node::redis(root, &[]);
        let replicas: Vec<Node> = (0..replicas)
            .map(|_| {
                Node::redis(
                    root,
                    &[
                        "--replicaof".into(),
                        "127.0.0.1".into(),
                        master.port.to_string(),
                    ],
                )
            })
            .collect();
        for r in &replicas {
            super::wait_until(20, "replica link up", || {
                let info = r.replication()?;
                (info.get("master_link_status").map(String::as_str) == Some("up")).then_some(())
            });
        }
        let sentinels: Vec<Node> = (0..3)
            .map(|_| {
                let port = super::free_port();
                let dir = root.join(format!("sentinel-{port}"));
                std::fs::create_dir_all(&dir).expect("sentinel dir");
                let conf = dir.join("sentinel.conf");
                std::fs::write(
                    &conf,
                    format!(
                        "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {dir}\n\
                         sentinel monitor {name} 127.0.0.1 {mport} 2\n\
                         sentinel down-after-milliseconds {name} 1000\n\
                         sentinel failover-timeout {name} 4000\n\
                         sentinel parallel-syncs {name} 1\n",
                        dir = dir.display(),
                        mport = master.port,
                    ),
                )
                .expect("sentinel.conf");
                Node::spawn("redis-sentinel", &[conf.display().to_string()], port, &dir)
            })
            .collect();
        for s in &sentinels {
            s.wait_ready();
        }
        for s in &sentinels {
            super::wait_until(90, "sentinels to see the replicas and each other", || {
                let mut c = s.try_con()?;
                let info: Vec<String> = redis::cmd("SENTINEL")
                    .arg("MASTER")
                    .arg(&name)
                    .query(&mut c)
                    .ok()?;
                let field = |k: &str| -> Option<usize> {
                    let i = info.iter().position(|x| x == k)?;
                    info.get(i + 1)?.parse().ok()
                };
                (field("num-slaves")? == replicas.len() && field("num-other-sentinels")? == 2)
                    .then_some(())
            });
        }
        SentinelSet {
            master,
            replicas,
            sentinels,
            name,
        }
    }

    /// `redis+sentinel://127.0.0.1:<s1>,…/<name>`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!("redis+sentinel://{}/{}", hosts.join(","), self.name)
    }

    /// The port every sentinel names as master, once they agree.
    pub fn master_port(&self) -> Option<u16> {
        let mut ports = Vec::new();
        for s in &self.sentinels {
            let mut c = s.try_con()?;
            let addr: Vec<String> = redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(&self.name)
                .query(&mut c)
                .ok()?;
            ports.push(addr.get(1)?.parse::<u16>().ok()?);
        }
        let first = *ports.first()?;
        ports.iter().all(|p| *p == first).then_some(first)
    }
}

/// A Redis Cluster: `masters` masters with `replicas` replicas each.
pub struct Cluster {
    /// Every node.
    pub nodes: Vec<Node>,
}

impl Cluster {
    /// Starts the nodes, creates the cluster with `redis-cli --cluster create` and waits until
    /// every node reports `cluster_state:ok` and every replica is attached.
    pub fn start(root: &Path, masters: usize, replicas: usize) -> Cluster {
        let nodes: Vec<Node> = (0..masters * (1 + replicas))
            .map(|_| {
                Node::redis(
                    root,
                    &[
                        "--cluster-enabled".into(),
                        "yes".into(),
                        "--cluster-config-file".into(),
                        "nodes.conf".into(),
                        "--cluster-node-timeout".into(),
                        "1000".into(),
                    ],
                )
            })
            .collect();
        let mut cmd = Command::new("redis-cli");
        cmd.arg("--cluster").arg("create");
        for n in &nodes {
            cmd.arg(format!("127.0.0.1:{}", n.port));
        }
        let out = cmd
            .arg("--cluster-replicas")
            .arg(replicas.to_string())
            .arg("--cluster-yes")
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            out.status.success(),
            "cluster create failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let c = Cluster { nodes };
        for n in &c.nodes {
            super::wait_until(30, "cluster_state:ok on every node", || {
                let mut con = n.try_con()?;
                let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut con).ok()?;
                info.contains("cluster_state:ok").then_some(())
            });
        }
        super::wait_until(30, "every replica attached", || {
            let up = c
                .nodes
                .iter()
                .filter(|n| {
                    n.replication().is_some_and(|i| {
                        i.get("role").map(String::as_str) == Some("slave")
                            && i.get("master_link_status").map(String::as_str) == Some("up")
                    })
                })
                .count();
            (up == masters * replicas).then_some(())
        });
        c
    }

    /// `redis+cluster://127.0.0.1:<p1>,…` over the first `seeds` nodes.
    pub fn url(&self, seeds: usize) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .take(seeds)
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// A master other than `node` (the first found).
    pub fn other_master(&self, node: &Node) -> &Node {
        self.nodes
            .iter()
            .find(|n| {
                n.port != node.port
                    && n.replication()
                        .is_some_and(|i| i.get("role").map(String::as_str) == Some("master"))
            })
            .expect("another master")
    }

    /// The node that is master of `key`'s slot now, by asking the live nodes.
    pub fn owner(&self, key: &str) -> Option<&Node> {
        for n in &self.nodes {
            let Some(mut c) = n.try_con() else { continue };
            let Ok(slot) = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(key)
                .query::<i64>(&mut c)
            else {
                continue;
            };
            let Ok(slots) = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query::<redis::Value>(&mut c)
            else {
                continue;
            };
            let redis::Value::Array(ranges) = slots else {
                continue;
            };
            for r in ranges {
                let redis::Value::Array(parts) = r else {
                    continue;
                };
                let (Some(lo), Some(hi), Some(master)) =
                    (parts.first(), parts.get(1), parts.get(2))
                else {
                    continue;
                };
                let (Ok(lo), Ok(hi)) = (
                    redis::from_redis_value_ref::<i64>(lo),
                    redis::from_redis_value_ref::<i64>(hi),
                ) else {
                    continue;
                };
                if slot < lo || slot > hi {
                    continue;
                }
                let redis::Value::Array(m) = master else {
                    continue;
                };
                let port = m
                    .get(1)
                    .and_then(|p| redis::from_redis_value_ref::<u16>(p).ok())?;
                return self.nodes.iter().find(|n| n.port == port);
            }
        }
        None
    }
}

/// A slot being moved from one master to another, as `redis-cli --cluster reshard` moves it.
pub struct Migration {
    slot: i64,
    from: (redis::Connection, String),
    to: (redis::Connection, String, u16),
}

impl Migration {
    /// Marks `key`'s slot `IMPORTING` on `to`, then `MIGRATING` on `from` (its master): from
    /// now on a command there on a key of the slot that `from` does not hold is redirected.
    pub fn begin(key: &str, from: &Node, to: &Node) -> Migration {
        let mut src = from.con();
        let mut dst = to.con();
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut src)
            .expect("KEYSLOT");
        let id = |c: &mut redis::Connection| -> String {
            redis::cmd("CLUSTER").arg("MYID").query(c).expect("MYID")
        };
        let (src_id, dst_id) = (id(&mut src), id(&mut dst));
        let mut m = Migration {
            slot,
            from: (src, src_id),
            to: (dst, dst_id, to.port),
        };
        let (src_id, dst_id) = (m.from.1.clone(), m.to.1.clone());
        m.setslot(true, "IMPORTING", &src_id);
        m.setslot(false, "MIGRATING", &dst_id);
        m
    }

    fn setslot(&mut self, on_target: bool, how: &str, node: &str) {
        let c = if on_target {
            &mut self.to.0
        } else {
            &mut self.from.0
        };
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SETSLOT").arg(self.slot).arg(how);
        if !node.is_empty() {
            cmd.arg(node);
        }
        let () = cmd.query(c).expect("SETSLOT");
    }

    /// Moves the slot's keys with `MIGRATE`, ten at a time, pausing `pace` between batches
    /// (the window in which the slot's keys are split between the two nodes); returns how
    /// many moved.
    pub fn move_keys(&mut self, pace: std::time::Duration) -> usize {
        let mut moved = 0;
        loop {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(self.slot)
                .arg(10)
                .query(&mut self.from.0)
                .expect("GETKEYSINSLOT");
            if keys.is_empty() {
                return moved;
            }
            let () = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(self.to.2)
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS")
                .arg(&keys)
                .query(&mut self.from.0)
                .expect("MIGRATE");
            moved += keys.len();
            std::thread::sleep(pace);
        }
    }

    /// Gives the slot to the new owner: told to it first, then to the old one, then to every
    /// other node of `cluster`.
    pub fn finish(mut self, cluster: &Cluster) {
        let id = self.to.1.clone();
        self.setslot(true, "NODE", &id);
        self.setslot(false, "NODE", &id);
        let ports = [self.to.2];
        for n in &cluster.nodes {
            if ports.contains(&n.port) {
                continue;
            }
            if let Some(mut c) = n.try_con() {
                let _: redis::RedisResult<()> = redis::cmd("CLUSTER")
                    .arg("SETSLOT")
                    .arg(self.slot)
                    .arg("NODE")
                    .arg(&id)
                    .query(&mut c);
            }
        }
    }

    /// Calls the move off (before any key moved): the slot is stable on both nodes again.
    pub fn cancel(mut self) {
        self.setslot(false, "STABLE", "");
        self.setslot(true, "STABLE", "");
    }
}
