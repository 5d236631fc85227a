//! A private `redis-server` on a free loopback port, for tests (the crate's unit tests and, by
//! `#[path]`, the integration tests' support module). The server runs under a small shell guard
//! that kills it when the test binary exits (the guard's stdin closes), so no server outlives
//! its tests and no test kills a process it did not start.

// Shared with the integration tests, where these are re-exported.
#![allow(unreachable_pub)]
#![allow(dead_code)]

use std::io::BufRead;
use std::process::{Child, Command, Stdio};

/// Starts `program args…` under a guard shell; returns the guard and the program's pid.
pub fn spawn_guard(program: &str, args: &[String], log: Option<&std::path::Path>) -> (Child, u32) {
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let out = log.map_or_else(|| "/dev/null".to_string(), |l| format!("'{}'", l.display()));
    let script = format!(
        "{program} {} >{out} 2>&1 & pid=$!; echo $pid; cat >/dev/null; kill $pid 2>/dev/null; wait $pid",
        quoted.join(" ")
    );
    let mut guard = Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {program} guard: {e}"));
    let mut line = String::new();
    std::io::BufReader::new(guard.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("pid");
    let pid = line.trim().parse().expect("pid number");
    (guard, pid)
}

/// A free loopback port.
pub fn free_port() -> u16 {
    // (At most 55535: a cluster node also binds its bus on port + 10000.)
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        if port <= 55535 {
            return port;
        }
    }
}

/// Starts a throwaway `redis-server` (no persistence) with `extra` arguments and waits until it
/// answers; returns its guard (keep it alive) and URL. Panics with the install command when
/// `redis-server` is missing.
pub fn start_redis(extra: &[&str]) -> (Child, String) {
    if Command::new("redis-server")
        .arg("--version")
        .output()
        .is_err()
    {
        panic!("redis-server is not installed: apt-get install -y redis-server");
    }
    let port = free_port();
    let mut args = vec![
        "--port".to_string(),
        port.to_string(),
        "--bind".into(),
        "127.0.0.1".into(),
        "--save".into(),
        "".into(),
        "--appendonly".into(),
        "no".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let (guard, _) = spawn_guard("redis-server", &args, None);
    let url = format!("redis://127.0.0.1:{port}");
    let client = redis::Client::open(url.as_str()).expect("url");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Ok(mut c) = client.get_connection() {
            if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                break;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "redis-server did not start on {port}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    (guard, url)
}
