//! What the spread cluster tests share: queues placed on every master, Resque's push done on the
//! keys' owners, reads on the owners, a worker's clean exit.

use crate::support;

use redis::Commands;
use support::topology::{self, Cluster, Node};
use support::WorkerProc;

/// Fails the test unless the cluster's tools are installed.
pub fn require_tools() {
    topology::require("redis-server", "redis-server");
    topology::require("redis-cli", "redis-tools");
}

/// One queue name per master: `(queue, the master owning <ns>:queue:<queue>)`.
pub fn queue_per_master<'a>(cluster: &'a Cluster, ns: &str) -> Vec<(String, &'a Node)> {
    let mut out: Vec<(String, &Node)> = Vec::new();
    for i in 0..1000 {
        let q = format!("q{i}");
        let owner = cluster.owner(&format!("{ns}:queue:{q}")).expect("owner");
        if out.iter().all(|(_, n)| n.port != owner.port) {
            out.push((q, owner));
        }
        if out.len() == 3 {
            return out;
        }
    }
    panic!("no queue on every master");
}

/// Pushes `payloads` as Resque does (SADD `<ns>:queues`, RPUSH the queue), each on its owner.
pub fn push(cluster: &Cluster, ns: &str, queue: &str, payloads: &[String]) {
    let queues = format!("{ns}:queues");
    let _: i64 = cluster
        .owner(&queues)
        .expect("owner")
        .con()
        .sadd(&queues, queue)
        .expect("SADD");
    let key = format!("{ns}:queue:{queue}");
    let _: i64 = cluster
        .owner(&key)
        .expect("owner")
        .con()
        .rpush(&key, payloads)
        .expect("RPUSH");
}

/// A list read on its owner now.
pub fn list(cluster: &Cluster, key: &str) -> Vec<String> {
    cluster
        .owner(key)
        .expect("owner")
        .con()
        .lrange(key, 0, -1)
        .expect("LRANGE")
}

/// How many jobs the compat worker's `Echo` ran (0 while the list's owner does not answer).
pub fn echoed(cluster: &Cluster, ns: &str) -> usize {
    let key = format!("{ns}:compat:echo");
    cluster
        .owner(&key)
        .and_then(Node::try_con)
        .and_then(|mut c| c.llen(&key).ok())
        .unwrap_or(0)
}

/// QUITs `w`, which must exit successfully, leaving no id in `<ns>:workers`.
pub fn quit_cleanly(cluster: &Cluster, ns: &str, w: &mut WorkerProc) {
    // The slots are in the outbox index while registered, and out of it once unregistered.
    let index = format!("{ns}:resq:outboxes");
    let indexed = |cluster: &Cluster| -> Vec<String> {
        cluster
            .owner(&index)
            .expect("owner")
            .con()
            .smembers(&index)
            .expect("SMEMBERS")
    };
    let before = indexed(cluster);
    for id in &w.ids {
        assert!(before.contains(id), "{id} not in {index}: {before:?}");
    }
    w.signal("QUIT");
    let status = w.wait_exit(30);
    assert!(
        status.success(),
        "worker exited with {status}:\n{}",
        w.stderr()
    );
    let workers = format!("{ns}:workers");
    let left: Vec<String> = cluster
        .owner(&workers)
        .expect("owner")
        .con()
        .smembers(&workers)
        .expect("SMEMBERS");
    assert!(left.is_empty(), "ids left registered: {left:?}");
    let left = indexed(cluster);
    assert!(left.is_empty(), "ids left in {index}: {left:?}");
}

/// `CROSSSLOT` errors the cluster's nodes have answered since they started.
pub fn crossslot_errors(cluster: &Cluster) -> u64 {
    cluster
        .nodes
        .iter()
        .map(|n| {
            let info: String = redis::cmd("INFO")
                .arg("errorstats")
                .query(&mut n.con())
                .expect("INFO errorstats");
            info.lines()
                .find_map(|l| l.strip_prefix("errorstat_CROSSSLOT:count="))
                .map_or(0, |c| c.trim().parse().expect("count"))
        })
        .sum()
}

/// `GET path` on the dashboard at `port`: the status code and the body.
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let code = out.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, out))
}

/// `resq web` for `url`/`ns` on a free port, once it answers: what keeps it running (it stops
/// when that is dropped, or when this process dies) and its port.
pub fn dashboard(url: &str, ns: &str) -> (impl Sized, u16) {
    let port = support::free_port();
    let bind = format!("127.0.0.1:{port}");
    let args: Vec<String> = ["--url", url, "--namespace", ns, "web", "--bind", &bind]
        .iter()
        .map(|a| a.to_string())
        .collect();
    let web = support::spawn_guard(&support::resq_bin().display().to_string(), &args, None);
    support::wait_until(30, "the dashboard to answer", || {
        http_get(port, "/overview")
    });
    (web, port)
}

/// `resq --url url --namespace ns args…` (none of the environment's Redis settings), with
/// `stdin` on its standard input.
pub fn resq_run(url: &str, ns: &str, args: &[&str], stdin: Option<&str>) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new(support::resq_bin())
        .args(["--url", url, "--namespace", ns])
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("RESQUE_NAMESPACE")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("resq");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.unwrap_or("").as_bytes())
        .expect("write stdin");
    drop(input);
    child.wait_with_output().expect("resq")
}

/// [`resq_run`] without input, which must succeed: its standard output.
pub fn resq(url: &str, ns: &str, args: &[&str]) -> String {
    let out = resq_run(url, ns, args, None);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "resq {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}
