//! `resq enqueue --track` and `resq enqueue --file` (issue 28): the real `resq` binary against
//! the test binary's own `redis-server`. A tracked job's id is found by `resq job show`; a
//! file's lines become jobs in order with the bytes `resq enqueue CLASS ARGS` writes; one bad
//! line and nothing is enqueued; standard input; `--json`; lines Redis refuses; pipelining.

use crate::support;

use redis::AsyncCommands;
use serde_json::Value;
use std::io::Write;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};
use support::cli::{cmd, json_of, ok, resq, stderr, stdout};
use support::Keys;

/// `resq <args>` for `ns` with `input` on its standard input.
async fn with_stdin(ns: &str, args: &[&str], input: &str) -> Output {
    let mut c = cmd(ns, args);
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let input = input.to_string();
    tokio::task::spawn_blocking(move || {
        let mut child = c.spawn().expect("run resq");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
        child.wait_with_output().expect("wait")
    })
    .await
    .expect("join")
}

/// A file holding `text`, removed when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(text: &str) -> TempFile {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let p = std::env::temp_dir().join(format!(
            "resq-test-enqueue-{}-{n}.ndjson",
            std::process::id()
        ));
        std::fs::write(&p, text).expect("write file");
        TempFile(p)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Every element of `<ns>:queue:<q>`.
async fn queue(ns: &str, q: &str) -> Vec<String> {
    support::con()
        .await
        .lrange(Keys::new(ns).queue(q), 0, -1)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_tracked_enqueue_prints_an_id_job_show_finds() {
    let ns = support::namespace("enq-track");
    let out = stdout(
        &ok(
            &ns,
            &["enqueue", "--track", "--tag", "nightly", "Report", "7"],
        )
        .await,
    );
    let id = out.trim();
    assert!(
        id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit()),
        "{out:?}"
    );
    let shown = stdout(&ok(&ns, &["job", "show", id]).await);
    assert!(
        shown.contains(id) && shown.contains("queued") && shown.contains("nightly"),
        "{shown}"
    );
    let record = json_of(&ns, &["job", "show", id]).await;
    assert_eq!(record["class"], "Report");
    // `--json`: the id and what the untracked form prints, the payload being the bytes in the
    // queue.
    let v = json_of(
        &ns,
        &[
            "enqueue", "--track", "--queue", "mail", "--key", "k-1", "Report", "8",
        ],
    )
    .await;
    let id = v["id"].as_str().expect("id").to_string();
    assert_eq!(v["existing"], false);
    assert_eq!(v["job_key"], "k-1");
    assert_eq!(v["queue"], "mail");
    assert_eq!(queue(&ns, "mail").await, [v["payload"].as_str().unwrap()]);
    assert!(v["payload"].as_str().unwrap().contains(&id));
    let record = json_of(&ns, &["job", "show", &id]).await;
    assert_eq!(record["queue"], "mail");
    // The same job key while that job is live: its id, nothing enqueued.
    let again = json_of(
        &ns,
        &[
            "enqueue", "--track", "--queue", "mail", "--key", "k-1", "Report", "9",
        ],
    )
    .await;
    assert_eq!(
        (again["id"].as_str(), again["existing"].as_bool()),
        (Some(id.as_str()), Some(true))
    );
    assert_eq!(again["payload"], Value::Null);
    assert_eq!(queue(&ns, "mail").await.len(), 1);
}

#[tokio::test]
async fn tag_and_key_need_track_and_say_so() {
    let ns = support::namespace("enq-flags");
    for (flag, args) in [
        ("--tag", &["enqueue", "--tag", "t", "A"][..]),
        ("--key", &["enqueue", "--key", "k", "A"]),
        ("--jesque", &["enqueue", "--track", "--jesque", "A"]),
    ] {
        let out = resq(&ns, args).await;
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.starts_with(&format!("error: {flag}:")),
            "{args:?}: {err}"
        );
    }
    assert!(queue(&ns, "default").await.is_empty());
}

#[tokio::test]
async fn a_file_enqueues_each_line_in_order_with_the_bytes_of_a_single_enqueue() {
    let (ns, single) = (
        support::namespace("enq-file"),
        support::namespace("enq-single"),
    );
    let lines = [
        (
            r#"{"class":"Archive","args":[1,"main",2.50,{"k":[1,-0.5e1]}]}"#,
            "default",
        ),
        (r#"{"queue":"mail","class":"Mailer","args":[]}"#, "mail"),
        (
            r#"{"class":"Archive","args":[null,true,"é\"\\"]}"#,
            "default",
        ),
    ];
    let text = format!("{}\n\n{}\n   \n{}\n", lines[0].0, lines[1].0, lines[2].0);
    let file = TempFile::new(&text);
    let out = ok(&ns, &["enqueue", "--file", file.path()]).await;
    assert!(
        stdout(&out).contains("enqueued 3 jobs") && stdout(&out).contains("default 2, mail 1"),
        "{}",
        stdout(&out)
    );
    // What `resq enqueue [--queue Q] CLASS ARGS…` writes for the same jobs.
    for (line, q) in lines {
        let v: Value = serde_json::from_str(line).unwrap();
        let args: Vec<String> = v["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(Value::to_string)
            .collect();
        let mut a = vec!["enqueue", "--queue", q, v["class"].as_str().unwrap()];
        a.extend(args.iter().map(String::as_str));
        ok(&single, &a).await;
    }
    for q in ["default", "mail"] {
        let (got, want) = (queue(&ns, q).await, queue(&single, q).await);
        assert_eq!(got, want, "queue {q}");
    }
    assert_eq!(
        queue(&ns, "default").await[0],
        r#"{"class":"Archive","args":[1,"main",2.5,{"k":[1,-5.0]}]}"#
    );
    let queues: Vec<String> = support::con()
        .await
        .smembers(Keys::new(ns.as_str()).queues())
        .await
        .unwrap();
    assert_eq!(queues.len(), 2);
}

#[tokio::test]
async fn a_bad_line_enqueues_nothing_and_is_named() {
    let ns = support::namespace("enq-bad");
    let text = "{\"class\":\"A\",\"args\":[1]}\n{\"class\":\"B\",\"args\":\"x\"}\n\n{\"class\":\"C\",\"args\":[]}\nnot json\n";
    let out = with_stdin(&ns, &["enqueue", "--file", "-"], text).await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("line 2: \"args\" is not an array") && err.contains("line 5: not JSON"),
        "{err}"
    );
    assert!(
        !err.contains("line 1:") && !err.contains("line 4:"),
        "{err}"
    );
    assert!(err.contains("nothing was enqueued"), "{err}");
    assert!(stdout(&out).is_empty());
    assert!(queue(&ns, "default").await.is_empty());
    let queues: Vec<String> = support::con()
        .await
        .smembers(Keys::new(ns.as_str()).queues())
        .await
        .unwrap();
    assert!(queues.is_empty());
}

#[tokio::test]
async fn standard_input_tracked_and_json() {
    let ns = support::namespace("enq-stdin");
    let text =
        "{\"class\":\"A\",\"args\":[1]}\n{\"class\":\"B\",\"args\":[2],\"queue\":\"mail\"}\n";
    // Plain, from standard input.
    let out = with_stdin(&ns, &["enqueue", "--file", "-"], text).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("from standard input"),
        "{}",
        stdout(&out)
    );
    assert_eq!(queue(&ns, "default").await, [r#"{"class":"A","args":[1]}"#]);
    // `--json`: one object per job with its line; untracked, no id.
    let out = with_stdin(
        &ns,
        &["--json", "enqueue", "--file", "-", "--queue", "q2"],
        text,
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        v,
        serde_json::json!([
            {"line": 1, "queue": "q2", "class": "A"},
            {"line": 2, "queue": "mail", "class": "B"},
        ])
    );
    // Tracked: one id per line, each a job `resq job show` finds, tagged.
    let out = with_stdin(
        &ns,
        &["enqueue", "--track", "--tag", "batch", "--file", "-"],
        text,
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let ids: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    for (id, class) in ids.iter().zip(["A", "B"]) {
        let record = json_of(&ns, &["job", "show", id]).await;
        assert_eq!(record["class"], class);
        assert_eq!(record["tags"], serde_json::json!(["batch"]));
    }
    // Tracked with `--json`: the ids by line.
    let out = with_stdin(&ns, &["--json", "enqueue", "--track", "--file", "-"], text).await;
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let jobs = v.as_array().expect("an array");
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[1]["line"], 2);
    let id = jobs[1]["id"].as_str().expect("id");
    assert!(queue(&ns, "mail").await.last().unwrap().contains(id));
}

#[tokio::test]
async fn a_line_redis_refuses_is_named_and_the_others_are_enqueued() {
    let ns = support::namespace("enq-refused");
    let _: () = support::con()
        .await
        .set(Keys::new(ns.as_str()).queue("broken"), "x")
        .await
        .unwrap();
    let text = "{\"class\":\"A\",\"args\":[1]}\n{\"class\":\"B\",\"args\":[2],\"queue\":\"broken\"}\n{\"class\":\"C\",\"args\":[3]}\n";
    let out = with_stdin(&ns, &["--json", "enqueue", "--track", "--file", "-"], text).await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    let key = Keys::new(ns.as_str()).queue("broken");
    assert!(
        err.contains(&format!("line 2: not enqueued: WRONGTYPE at {key}")),
        "{err}"
    );
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(v[1]["error"].as_str().unwrap().contains(&key), "{v}");
    assert!(v[0]["id"].is_string() && v[2]["id"].is_string(), "{v}");
    assert_eq!(queue(&ns, "default").await.len(), 2);
}

/// A proxy to the test server that holds each reply 20 ms: a command line that waits for a
/// reply per job takes 20 ms per job through it. Its address.
async fn slow_proxy() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let upstream = format!("127.0.0.1:{}", support::redis().port);
    tokio::spawn(async move {
        loop {
            let Ok((client, _)) = listener.accept().await else {
                return;
            };
            let upstream = upstream.clone();
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                    return;
                };
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut cr, &mut sw).await;
                });
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = sr.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    if cw.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_lines_go_in_a_few_round_trips() {
    let ns = support::namespace("enq-many");
    let proxy = slow_proxy().await;
    let text: String = (0..3000)
        .map(|i| format!("{{\"class\":\"A\",\"args\":[{i}]}}\n"))
        .collect();
    for track in [false, true] {
        // Through the proxy: one round trip per job would take a minute.
        let mut c = std::process::Command::new(support::resq_bin());
        c.args(["--url", &format!("redis://{proxy}"), "--namespace", &ns])
            .args(["enqueue", "--file", "-"])
            .env_remove("REDIS_URL")
            .env_remove("RESQUE_NAMESPACE");
        if track {
            c.arg("--track");
        }
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let text = text.clone();
        let started = Instant::now();
        let out = tokio::task::spawn_blocking(move || {
            let mut child = c.spawn().expect("run resq");
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
            child.wait_with_output().expect("wait")
        })
        .await
        .unwrap();
        let took = started.elapsed();
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(took < Duration::from_secs(10), "3000 lines took {took:?}");
    }
    let q = queue(&ns, "default").await;
    assert_eq!(q.len(), 6000);
    assert_eq!(q[2999], r#"{"class":"A","args":[2999]}"#);
    assert!(q[3000].starts_with(r#"{"class":"A","args":[0],"resq_id":""#));
}
