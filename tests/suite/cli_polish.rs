//! The `resq` binary as a newcomer meets it (issue 13, item 6), run for real against the test
//! binary's own `redis-server`: `work` without handlers refuses, `enqueue` says what it wrote,
//! `top` without a terminal points to `--once`, bad values name their variable, `info` and
//! `schedule list` say whether a scheduler runs, an empty namespace gets a hint, and the help
//! texts agree with the README.

use crate::support;

use redis::AsyncCommands;
use serde_json::Value;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// `resq --url <test server> --namespace ns args…` with `env` set and the worker variables of
/// the caller's environment removed.
fn resq_env(ns: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(support::resq_bin());
    cmd.args(["--url", &support::url(), "--namespace", ns])
        .args(args)
        .stdin(Stdio::null());
    for var in [
        "REDIS_URL",
        "RESQUE_NAMESPACE",
        "QUEUES",
        "QUEUE",
        "CONCURRENCY",
        "INTERVAL",
        "METRICS_ADDR",
        "RESQ_AT_LEAST_ONCE",
        "RUST_LOG",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run resq")
}

fn resq(ns: &str, args: &[&str]) -> Output {
    resq_env(ns, args, &[])
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(ns: &str, args: &[&str]) -> String {
    let out = resq(ns, args);
    assert!(out.status.success(), "resq {args:?}: {}", stderr(&out));
    stdout(&out)
}

/// Runs `cmd` and waits at most `secs` for it to exit; kills it and panics otherwise.
fn exits_within(mut cmd: Command, secs: u64) -> (std::process::ExitStatus, String) {
    let log = std::env::temp_dir().join(format!(
        "resq-cli-polish-{}-{}.log",
        std::process::id(),
        support::free_port()
    ));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("start resq");
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "resq did not exit within {secs}s: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let err = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    (status, err)
}

#[tokio::test]
async fn work_without_handlers_refuses_and_leaves_the_queue_alone() {
    let ns = support::namespace("nohandlers");
    let k = support::Keys::new(ns.clone());
    ok(&ns, &["enqueue", "--queue", "w", "Anything"]);
    let mut cmd = Command::new(support::resq_bin());
    cmd.args(["--url", &support::url(), "--namespace", &ns])
        .args(["work", "--queues", "w", "--interval", "0.2"]);
    let (status, err) = exits_within(cmd, 20);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains("registers no job handlers") && err.contains("--allow-no-handlers"),
        "{err}"
    );
    let mut con = support::con().await;
    let queued: Vec<String> = con.lrange(k.queue("w"), 0, -1).await.unwrap();
    assert_eq!(queued, [r#"{"class":"Anything","args":[]}"#], "job taken");
    let failed: usize = con.llen(k.failed()).await.unwrap();
    assert_eq!(failed, 0);
    let workers: usize = con.scard(k.workers()).await.unwrap();
    assert_eq!(workers, 0, "a refused worker must not register");
}

#[test]
fn work_names_the_variable_of_a_bad_value() {
    let ns = support::namespace("badvalue");
    let out = resq_env(&ns, &["work"], &[("CONCURRENCY", "lots")]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim(),
        r#"error: CONCURRENCY: "lots" is not a whole number"#
    );
    // The flag's value is the variable's value: same message.
    let out = resq(&ns, &["work", "--concurrency", "lots"]);
    assert_eq!(
        stderr(&out).trim(),
        r#"error: CONCURRENCY: "lots" is not a whole number"#
    );
    let out = resq(&ns, &["work", "--interval", "-1"]);
    assert!(
        stderr(&out).starts_with("error: INTERVAL: \"-1\" is not a non-negative number"),
        "{}",
        stderr(&out)
    );
    let out = resq_env(&ns, &["work"], &[("QUEUES", " , ")]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).starts_with("error: QUEUES: "),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn enqueue_confirms_what_it_wrote() {
    let ns = support::namespace("enqconfirm");
    let out = ok(
        &ns,
        &["enqueue", "--queue", "q", "Jobs::X", "\"a/b\"", "-7"],
    );
    assert_eq!(
        out.trim(),
        format!(
            r#"enqueued Jobs::X on queue q ({ns}:queue:q): {{"class":"Jobs::X","args":["a/b",-7]}}"#
        )
    );
    let v: Value =
        serde_json::from_str(&ok(&ns, &["--json", "enqueue", "--queue", "q", "Y", "1.5"]))
            .expect("JSON");
    assert_eq!(v["queue"], "q");
    assert_eq!(v["class"], "Y");
    assert_eq!(v["args"], serde_json::json!([1.5]));
    assert_eq!(v["form"], "resque");
    assert_eq!(v["key"], format!("{ns}:queue:q"));
    assert_eq!(v["due_at"], Value::Null);
    // The payload it reports is the payload in Redis.
    let mut con = support::con().await;
    let last: String = con
        .lindex(support::Keys::new(ns.clone()).queue("q"), -1)
        .await
        .unwrap();
    assert_eq!(v["payload"], last);

    let v: Value = serde_json::from_str(&ok(
        &ns,
        &[
            "--json",
            "enqueue",
            "--queue",
            "j",
            "--vars",
            "{\"x\":1}",
            "J",
        ],
    ))
    .expect("JSON");
    assert_eq!(v["form"], "jesque");
    assert_eq!(v["args"], Value::Null);
    assert_eq!(v["vars"], serde_json::json!({"x": 1}));
    assert_eq!(v["payload"], r#"{"class":"J","args":null,"vars":{"x":1}}"#);

    let v: Value = serde_json::from_str(&ok(
        &ns,
        &[
            "--json", "enqueue", "--queue", "later", "--in", "600", "D", "2",
        ],
    ))
    .expect("JSON");
    let key = v["key"].as_str().expect("key");
    assert!(key.starts_with(&format!("{ns}:delayed:")), "{v}");
    assert!(
        v["due_at"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{v}"
    );
    let items: Vec<String> = con.lrange(key, 0, -1).await.unwrap();
    assert_eq!(items, [v["payload"].as_str().expect("payload")]);
    let human = ok(
        &ns,
        &["enqueue", "--queue", "later", "--in", "600", "D", "3"],
    );
    assert!(
        human.starts_with("scheduled D on queue later for "),
        "{human}"
    );
}

#[test]
fn top_without_a_terminal_points_to_once() {
    let ns = support::namespace("toptty");
    // `output()` pipes stdout: not a terminal.
    let out = resq(&ns, &["top"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("not a terminal") && err.contains("resq top --once"),
        "{err}"
    );
}

#[tokio::test]
async fn info_and_schedule_list_say_whether_a_scheduler_runs() {
    let ns = support::namespace("schedstatus");
    ok(&ns, &["enqueue", "Seed"]);
    let v: Value = serde_json::from_str(&ok(&ns, &["--json", "info"])).expect("JSON");
    assert_eq!(v["scheduler"]["running"], false, "{v}");
    assert_eq!(
        v["scheduler"]["lock_key"],
        format!("{ns}:{ns}:resque_scheduler_master_lock")
    );
    assert!(ok(&ns, &["info"]).contains("none running"));
    assert!(ok(&ns, &["schedule", "list"]).contains("scheduler: none running"));

    // A real scheduler takes the master lock.
    let s = support::scheduler(&ns, "sched-host:4242").await;
    s.tick().await.expect("tick");
    let v: Value = serde_json::from_str(&ok(&ns, &["--json", "info"])).expect("JSON");
    assert_eq!(v["scheduler"]["running"], true, "{v}");
    assert_eq!(v["scheduler"]["master"], "sched-host:4242");
    let ttl = v["scheduler"]["expires_in_s"].as_i64().expect("ttl");
    assert!((1..=180).contains(&ttl), "{v}");
    let human = ok(&ns, &["info"]);
    assert!(human.contains("running (master sched-host:4242"), "{human}");
    let list = ok(&ns, &["schedule", "list"]);
    assert!(
        list.contains("scheduler: running (master sched-host:4242"),
        "{list}"
    );
}

#[test]
fn an_empty_namespace_gets_a_hint() {
    let ns = support::namespace("nothing-here");
    for args in [&["info"][..], &["queues"], &["--json", "workers"]] {
        let out = resq(&ns, args);
        assert!(out.status.success(), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("no Resque data under namespace \"{ns}\""))
                && err.contains("RESQUE_NAMESPACE"),
            "{args:?}: {err}"
        );
    }
    // JSON on stdout stays clean.
    let out = resq(&ns, &["--json", "info"]);
    serde_json::from_slice::<Value>(&out.stdout).expect("JSON stdout");
    // A namespace with data: no hint.
    ok(&ns, &["enqueue", "X"]);
    let out = resq(&ns, &["info"]);
    assert!(!stderr(&out).contains("hint"), "{}", stderr(&out));
}

/// `[env: NAME…]` names in a help text.
fn help_env_names(help: &str) -> Vec<String> {
    help.split("[env: ")
        .skip(1)
        .map(|s| {
            s.chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect()
        })
        .collect()
}

#[test]
fn help_texts_agree_with_the_readme() {
    let ns = support::namespace("help");
    let work = ok(&ns, &["work", "--help"]);
    assert!(work.contains("idle blocking timeout"), "{work}");
    assert!(!work.to_lowercase().contains("poll interval"), "{work}");
    // Global flags are grouped and optional.
    assert!(work.contains("Global options:"), "{work}");
    let usage = work
        .lines()
        .find(|l| l.starts_with("Usage:"))
        .expect("usage");
    assert_eq!(usage, "Usage: resq work [OPTIONS]");
    // An unset variable shows no (empty) value; a set one shows its value; the URL never.
    assert!(
        work.contains("[env: QUEUES]") && !work.contains("QUEUES="),
        "{work}"
    );
    let set = resq_env(
        &ns,
        &["work", "--help"],
        &[
            ("QUEUES", "critical,default"),
            ("REDIS_URL", "redis://:Hunter2-secret@127.0.0.1:1"),
        ],
    );
    let set = stdout(&set);
    assert!(set.contains("[env: QUEUES=critical,default]"), "{set}");
    assert!(!set.contains("Hunter2-secret"), "{set}");

    // Every variable a command's help names is in the README's configuration table.
    let known = support::readme_variables();
    assert!(known.contains("INTERVAL") && known.contains("REDIS_URL"));
    for cmd in [
        &["work", "--help"][..],
        &["prune", "--help"],
        &["scheduler", "--help"],
        &["--help"],
    ] {
        for name in help_env_names(&ok(&ns, cmd)) {
            assert!(
                known.contains(&name),
                "`resq {cmd:?}` names {name}, which the README's table lacks"
            );
        }
    }
}

#[tokio::test]
async fn negative_numbers_and_boolean_variables_as_documented() {
    let ns = support::namespace("negbool");
    // `schedule add` takes `-7` as a value, as `enqueue` does.
    ok(
        &ns,
        &[
            "schedule", "add", "n", "--queue", "q", "--every", "1h", "-7",
        ],
    );
    let stored: String = support::con()
        .await
        .hget(support::Keys::new(ns.clone()).persistent_schedules(), "n")
        .await
        .unwrap();
    assert!(stored.contains(r#""args":[-7]"#), "{stored}");
    // RESQ_AT_LEAST_ONCE=1 (as docs/operations.md writes it) is read by `resq prune` too.
    for v in ["1", "yes", "true", "0"] {
        let out = resq_env(&ns, &["--json", "prune"], &[("RESQ_AT_LEAST_ONCE", v)]);
        assert!(
            out.status.success(),
            "RESQ_AT_LEAST_ONCE={v}: {}",
            stderr(&out)
        );
    }
}
