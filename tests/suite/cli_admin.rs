//! The `resq` binary end to end: every admin command, human and `--json`, global flags before
//! or after the command, the enqueue contract, `top --once`, and `work`.

use crate::admin_common;
use crate::support;

use redis::AsyncCommands;
use serde_json::Value;
use std::process::{Command, Output, Stdio};

fn resq(ns: &str, args: &[&str]) -> Output {
    Command::new(support::resq_bin())
        .args(["--url", &support::url(), "--namespace", ns])
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("RESQUE_NAMESPACE")
        .output()
        .expect("run resq")
}

fn ok(ns: &str, args: &[&str]) -> String {
    let out = resq(ns, args);
    assert!(
        out.status.success(),
        "resq {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn json(ns: &str, args: &[&str]) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    serde_json::from_str(&ok(ns, &a)).expect("JSON output")
}

#[tokio::test]
async fn enqueue_keeps_the_contract() {
    let ns = support::namespace("cenq");
    ok(
        &ns,
        &[
            "enqueue",
            "--queue",
            "q",
            "Jobs::X",
            "\"a/b\"",
            "1",
            "{\"k\":null}",
        ],
    );
    ok(
        &ns,
        &[
            "enqueue",
            "--queue",
            "q",
            "--jesque",
            "--vars",
            "{\"x\":1}",
            "J",
        ],
    );
    ok(&ns, &["enqueue", "--queue", "q", "--jesque", "J2", "2"]);
    ok(&ns, &["enqueue", "Plain"]);
    let mut con = support::con().await;
    let k = support::Keys::new(ns.clone());
    let items: Vec<String> = con.lrange(k.queue("q"), 0, -1).await.unwrap();
    assert_eq!(
        items,
        vec![
            r#"{"class":"Jobs::X","args":["a/b",1,{"k":null}]}"#,
            r#"{"class":"J","args":null,"vars":{"x":1}}"#,
            r#"{"class":"J2","args":[2],"vars":null}"#,
        ]
    );
    let d: Vec<String> = con.lrange(k.queue("default"), 0, -1).await.unwrap();
    assert_eq!(d, vec![r#"{"class":"Plain","args":[]}"#]);
    let out = resq(&ns, &["enqueue", "X", "not-json"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not JSON"));
}

#[tokio::test]
async fn read_commands_human_and_json() {
    let ns = support::namespace("cread");
    let mut con = support::con().await;
    admin_common::load_fixture(
        &mut con,
        "resque/02_worker_nonfork_running.json",
        "keys",
        &ns,
    )
    .await;
    admin_common::load_fixture(&mut con, "resque/07_failures.json", "keys", &ns).await;
    admin_common::load_fixture(&mut con, "resque/14_scheduler_delayed.json", "keys", &ns).await;
    let info = json(&ns, &["info"]);
    assert_eq!(info["failed_entries"], 5);
    assert_eq!(info["workers"], 1);
    assert_eq!(info["working"], 1);
    assert!(ok(&ns, &["info"]).contains("failed entries"));
    let qs = json(&ns, &["queues"]);
    assert!(qs
        .as_array()
        .unwrap()
        .iter()
        .any(|q| q["name"] == "default"));
    let human = ok(&ns, &["queues"]);
    assert!(human.starts_with("QUEUE"), "{human}");
    let ws = json(&ns, &["workers"]);
    assert_eq!(ws[0]["state"], "busy");
    assert_eq!(ws[0]["job"]["class"], "SleepJob");
    let human = ok(&ns, &["workers"]);
    assert!(
        human.contains("SleepJob") && human.contains("busy"),
        "{human}"
    );
    let failed = ok(&ns, &["failed", "list"]);
    assert!(
        failed.contains("NoSuchJobClass") && failed.contains("5 in"),
        "{failed}"
    );
    let only = json(&ns, &["failed", "list", "--class", "HangJob"]);
    assert_eq!(only.as_array().unwrap().len(), 2);
    let one = json(&ns, &["failed", "show", "2"]);
    assert_eq!(one["payload"]["class"], "Jobs::CustomFail");
    let missing = resq(&ns, &["failed", "show", "99"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no failure entry at index 99"));
    let delayed = json(&ns, &["delayed", "list"]);
    assert_eq!(delayed.as_array().unwrap().len(), 6);
    assert!(ok(&ns, &["delayed", "list", "--limit", "1"]).contains("SimpleJob"));
    // Global flags after the command work too.
    let out = Command::new(support::resq_bin())
        .args([
            "info",
            "--json",
            "--url",
            &support::url(),
            "--namespace",
            &ns,
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["namespace"], Value::String(ns.clone()));
}

#[tokio::test]
async fn failure_repairs() {
    let ns = support::namespace("crepair");
    let mut con = support::con().await;
    admin_common::load_fixture(&mut con, "resque/07_failures.json", "keys", &ns).await;
    let k = support::Keys::new(ns.clone());
    assert!(ok(&ns, &["failed", "retry", "0"]).contains("retried 1"));
    let q: Vec<String> = con.lrange(k.queue("failing"), 0, -1).await.unwrap();
    assert_eq!(
        q,
        vec![r#"{"class":"FailJob","args":["boom: something bad happened"]}"#]
    );
    let out = json(&ns, &["failed", "retry", "--class", "HangJob"]);
    assert_eq!(out["done"], 2);
    let out = json(&ns, &["failed", "remove", "--retried"]);
    assert_eq!(out["done"], 3);
    assert!(ok(&ns, &["failed", "remove", "0"]).contains("removed 1"));
    let n: usize = con.llen(k.failed()).await.unwrap();
    assert_eq!(n, 1);
    assert!(ok(&ns, &["failed", "clear"]).contains("removed 1"));
    let usage = resq(&ns, &["failed", "retry"]);
    assert!(
        !usage.status.success(),
        "retry needs an index, --class or --all"
    );
    assert!(json(&ns, &["failed", "retry", "--all"])["done"] == 0);
}

#[tokio::test]
async fn pause_resume_and_prune() {
    let ns = support::namespace("cpause");
    let mut con = support::con().await;
    let k = support::Keys::new(ns.clone());
    ok(&ns, &["pause"]);
    let v: String = con.get(k.pause_all_workers()).await.unwrap();
    assert_eq!(v, "true");
    assert_eq!(json(&ns, &["info"])["paused"], true);
    ok(&ns, &["resume"]);
    let exists: bool = con.exists(k.pause_all_workers()).await.unwrap();
    assert!(!exists);
    // A Ruby worker on another host whose heartbeat is an hour old: pruned, its job failed.
    let id = "otherhost:4242:default";
    let () = con.sadd(k.workers(), id).await.unwrap();
    let () = con
        .hset(k.heartbeats(), id, "2020-01-01T00:00:00+00:00")
        .await
        .unwrap();
    let () = con
        .set(
            k.worker(id),
            r#"{"queue":"default","run_at":"2020-01-01T00:00:00Z","payload":{"class":"Lost","args":[]}}"#,
        )
        .await
        .unwrap();
    let out = json(&ns, &["prune"]);
    assert_eq!(out["locked"], true, "{out}");
    assert_eq!(out["pruned"][0]["id"], id, "{out}");
    let members: Vec<String> = con.smembers(k.workers()).await.unwrap();
    assert!(members.is_empty());
    let failed: Vec<String> = con.lrange(k.failed(), 0, -1).await.unwrap();
    assert_eq!(failed.len(), 1);
    assert!(failed[0].contains("PruneDeadWorkerDirtyExit"), "{failed:?}");
}

#[tokio::test]
async fn top_once_renders_a_frame() {
    let ns = support::namespace("ctop");
    let mut con = support::con().await;
    admin_common::load_fixture(
        &mut con,
        "resque/02_worker_nonfork_running.json",
        "keys",
        &ns,
    )
    .await;
    let k = support::Keys::new(ns.clone());
    let () = con
        .rpush(k.queue("mail"), r#"{"class":"M","args":[]}"#)
        .await
        .unwrap();
    let () = con.sadd(k.queues(), "mail").await.unwrap();
    // Tracked jobs: one queued, one cancelled.
    let client = resq::Client::connect(&support::url(), &ns).await.unwrap();
    let track = || resq::jobs::Track::new();
    client
        .enqueue_class_tracked("mail", "M", &[], track())
        .await
        .unwrap();
    let gone = client
        .enqueue_class_tracked("mail", "M", &[], track())
        .await
        .unwrap();
    client.cancel(&gone).await.unwrap();
    let frame = ok(
        &ns,
        &[
            "top",
            "--once",
            "--interval",
            "0.1",
            "--width",
            "100",
            "--height",
            "24",
        ],
    );
    let lines: Vec<&str> = frame.lines().collect();
    assert_eq!(lines.len(), 24, "{frame}");
    assert!(lines.iter().all(|l| l.chars().count() <= 100));
    assert!(frame.contains("resq top"), "{frame}");
    assert!(frame.contains("mail"), "{frame}");
    assert!(frame.contains("SleepJob"), "{frame}");
    assert!(frame.contains("workers (1 busy of 1)"), "{frame}");
    // The states holding jobs, in lifecycle order; empty ones are left out. Queued counts every
    // job in the queues (the fixture's, the plain one, the tracked one, the cancelled one not taken yet), working
    // the busy workers.
    let jobs = lines
        .iter()
        .find(|l| l.contains("jobs "))
        .expect("a jobs line");
    assert!(
        jobs.trim_matches(|c| c == '│' || c == ' ') == "jobs 4 queued · 1 working · 1 cancelled",
        "{frame}"
    );
    let empty = support::namespace("ctop-empty");
    let frame = ok(&empty, &["top", "--once", "--interval", "0.05"]);
    assert!(frame.contains("│jobs none"), "{frame}");
}

#[tokio::test]
async fn work_runs_a_worker_for_the_binarys_handlers() {
    let ns = support::namespace("cwork");
    let mut child = Command::new(support::resq_bin())
        .args([
            "--url",
            &support::url(),
            "--namespace",
            &ns,
            "work",
            "--queues",
            "w",
            "--allow-no-handlers",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let k = support::Keys::new(ns.clone());
    support::eventually(10, "the worker to register", || async {
        let n: usize = support::con().await.scard(k.workers()).await.ok()?;
        (n == 1).then_some(())
    })
    .await;
    ok(&ns, &["enqueue", "--queue", "w", "Anything"]);
    // The plain `resq` binary has no handlers: told to run anyway, the job fails as an
    // unknown class.
    let entry: String = support::eventually(10, "the failure entry", || async {
        support::con().await.lindex(k.failed(), 0).await.ok()?
    })
    .await;
    assert!(entry.contains("Resq::UnknownJobClass"), "{entry}");
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    assert!(child.wait().unwrap().success());
}
