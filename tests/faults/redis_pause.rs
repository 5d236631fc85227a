//! A Redis that does not answer (`CLIENT PAUSE`) holds no CLI command and no dashboard page
//! longer than the bound on each Redis call (`--redis-timeout`, 5 s by default): each fails
//! with an error naming Redis and the bound (issue 29). Each test pauses a server of its own.

use crate::support;

use std::io::{BufRead, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::RedisServer;

/// The most a command or a page may take while Redis is paused for 20 s: the 5 s bound and a
/// generous margin for a loaded machine (a correctness bound, not a performance claim).
const WITHIN: Duration = Duration::from_secs(10);

/// Pauses every client of `server` for 20 s; returns when the pause is on.
async fn pause(server: &RedisServer) {
    let mut con = server.con().await;
    let () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(20_000)
        .query_async(&mut con)
        .await
        .expect("CLIENT PAUSE");
}

/// Waits until `server` answers again (a pause holds every command, `CLIENT UNPAUSE` too).
async fn answered(server: &RedisServer) {
    support::eventually(40, "the pause to end", || async {
        let client = redis::Client::open(server.url()).ok()?;
        let mut con = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("PING")
            .query_async::<String>(&mut con)
            .await
            .ok()
    })
    .await;
}

/// `resq --url <server> --namespace pause <args>`, nothing from the environment.
fn resq(server: &RedisServer, args: &[&str]) -> Command {
    let mut c = Command::new(support::resq_bin());
    c.args(["--url", &server.url(), "--namespace", "pause"])
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("RESQUE_NAMESPACE")
        .env_remove("RESQ_REDIS_TIMEOUT")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    c
}

#[tokio::test]
async fn a_cli_command_fails_within_the_bound_naming_redis_and_it() {
    let server = RedisServer::start(&[]);
    pause(&server).await;
    // Each command at once: one pause of 20 s covers them all.
    let runs: Vec<_> = [
        (&["info"][..], None, "no reply within 5s"),
        (&["--json", "limits", "list"], None, "no reply within 5s"),
        (&["enqueue", "A"], None, "no reply within 5s"),
        (&["queues"], Some("0.5"), "no reply within 500ms"),
    ]
    .into_iter()
    .map(|(args, bound, says)| {
        let mut cmd = resq(&server, args);
        if let Some(b) = bound {
            cmd.env("RESQ_REDIS_TIMEOUT", b);
        }
        let probe = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let out = cmd.output().expect("run resq");
            (out, started.elapsed())
        });
        (args, says, probe)
    })
    .collect();
    for (args, says, probe) in runs {
        let (out, took) = probe.await.expect("join");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded while paused");
        assert!(took < WITHIN, "{args:?} took {took:?}: {err}");
        assert!(
            err.contains(&format!("redis 127.0.0.1:{}: {says}", server.port))
                && err.contains("--redis-timeout"),
            "{args:?}: {err}"
        );
    }
    answered(&server).await;
    let mut cmd = resq(&server, &["info"]);
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("run resq"))
        .await
        .expect("join");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `resq web` on a free port of `server`'s namespace; its address.
fn web(server: &RedisServer) -> (Child, String) {
    let mut child = resq(server, &["web", "--bind", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn resq web");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("first line");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    (child, addr)
}

/// `GET path` from `addr`: the status line, the body, and how long it took.
async fn get(addr: &str, path: &str) -> (String, String, Duration) {
    let (addr, path) = (addr.to_string(), path.to_string());
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let mut s = std::net::TcpStream::connect(&addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(60)))
            .expect("read timeout");
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .expect("send");
        let mut reply = String::new();
        s.read_to_string(&mut reply).expect("read");
        let status = reply.lines().next().unwrap_or("").to_string();
        let body = reply.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
        (status, body, started.elapsed())
    })
    .await
    .expect("join")
}

#[tokio::test]
async fn a_dashboard_page_answers_503_within_the_bound() {
    let server = RedisServer::start(&[]);
    let (mut child, addr) = web(&server);
    let (status, _, _) = get(&addr, "/queues").await;
    assert!(status.contains(" 200 "), "{status}");
    pause(&server).await;
    let expected = format!("redis 127.0.0.1:{}: no reply within 5s", server.port);
    let pages: [&'static str; 5] = ["/queues", "/overview", "/failed", "/limits", "/api/live"];
    let probes: Vec<_> = pages
        .iter()
        .map(|page| {
            let addr = addr.clone();
            let page = *page;
            tokio::spawn(async move { get(&addr, page).await })
        })
        .collect();
    for (page, probe) in pages.iter().zip(probes) {
        let (status, body, took) = probe.await.expect("join");
        assert!(took < WITHIN, "{page} took {took:?}");
        assert!(status.contains(" 503 "), "{page}: {status}");
        if *page == "/api/live" {
            let v: serde_json::Value =
                serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
            assert!(
                v["error"].as_str().is_some_and(|e| e.contains(&expected)),
                "{v}"
            );
        } else {
            assert!(body.contains(&expected), "{page}: {body}");
        }
    }
    answered(&server).await;
    let (status, _, _) = get(&addr, "/queues").await;
    assert!(status.contains(" 200 "), "{status}");
    child.kill().expect("stop resq web");
    child.wait().expect("reap resq web");
}
