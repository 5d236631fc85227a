//! `coverage` (docs/migration.md): a namespace filled with the exact bytes real Resque,
//! resque-scheduler, Jesque and Rails wrote (the golden fixtures), reported by a binary built
//! on `resq::cli` with its own handlers (`examples/own_cli`): per queue, every class seen, how
//! many jobs, where, and which have no handler; plugin keys resq does not reproduce; and a
//! report that reads within its budget on a namespace too big to read whole.

use crate::admin_common;
use crate::support;

use redis::AsyncCommands;
use serde_json::Value;
use std::process::{Command, Stdio};

/// This file's own server: a report searches the keyspace for plugin keys (a bounded `SCAN`),
/// so it reads every key only on a server the suite's other tests do not fill.
fn server() -> &'static support::RedisServer {
    static SERVER: std::sync::OnceLock<support::RedisServer> = std::sync::OnceLock::new();
    SERVER.get_or_init(|| support::RedisServer::start(&[]))
}

/// `own_cli --json coverage <args>` on namespace `ns`: its report.
fn coverage(ns: &str, args: &[&str]) -> Value {
    let out = run(ns, &["--json", "coverage"], args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// `own_cli <pre> <args>` on namespace `ns`, which must succeed: its standard output.
fn run(ns: &str, pre: &[&str], args: &[&str]) -> String {
    let out = Command::new(support::example_bin("own_cli"))
        .args(["--url", &server().url(), "--namespace", ns])
        .args(pre)
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("RESQUE_NAMESPACE")
        .stdin(Stdio::null())
        .output()
        .expect("run own_cli");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The report's entry for `queue`.
fn queue<'a>(report: &'a Value, queue: &str) -> &'a Value {
    report["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .find(|q| q["queue"] == queue)
        .unwrap_or_else(|| panic!("no queue {queue} in {report:#}"))
}

/// `(class, jobs, seen_in, handled)` of each class the report saw on `queue`.
fn classes(report: &Value, q: &str) -> Vec<(String, u64, String, bool)> {
    queue(report, q)["classes"]
        .as_array()
        .expect("classes")
        .iter()
        .map(|c| {
            let seen: Vec<&str> = c["seen_in"]
                .as_array()
                .expect("seen_in")
                .iter()
                .map(|s| s.as_str().expect("source"))
                .collect();
            (
                c["class"].as_str().expect("class").to_string(),
                c["jobs"].as_u64().expect("jobs"),
                seen.join(","),
                c["handled"].as_bool().expect("handled"),
            )
        })
        .collect()
}

#[tokio::test]
async fn every_class_of_real_producers_is_reported_with_its_handler() {
    let ns = support::namespace("coverage");
    let mut con = server().con().await;
    for f in [
        "resque/01_enqueue.json",
        "resque/07_failures.json",
        "resque/14_scheduler_delayed.json",
        "jesque/05_delayed_enqueue.json",
        "jesque/06_recurring_enqueue.json",
    ] {
        admin_common::load_fixture(&mut con, f, "keys", &ns).await;
    }
    // Rails' exact bytes for a job nobody here handles, and the same wrapper naming a class
    // this binary has a handler for.
    let rails = support::fixture("activejob/rails-7.1.json");
    let echo = rails["cases"][0]["payload"].as_str().expect("payload");
    let invoice = echo.replace(
        r#""job_class":"EchoJob""#,
        r#""job_class":"SendInvoiceJob""#,
    );
    assert_ne!(echo, invoice);
    let _: () = con
        .rpush(format!("{ns}:queue:mailers"), &[echo, invoice.as_str()])
        .await
        .unwrap();
    let _: () = con.sadd(format!("{ns}:queues"), "mailers").await.unwrap();
    // A stored recurring schedule for a class this binary handles, and a plugin's key.
    let _: () = con
        .hset(
            format!("{ns}:persistent_schedules"),
            "nightly",
            r#"{"class":"Archive","queue":"default","cron":"0 3 * * *","args":["/srv"]}"#,
        )
        .await
        .unwrap();
    let _: () = con
        .set(format!("{ns}:lonely_job:default"), "1")
        .await
        .unwrap();

    let r = coverage(&ns, &[]);
    // Resque's queues: every job read, each class once with its count.
    let default = classes(&r, "default");
    assert!(
        default.contains(&("SimpleJob".into(), 10, "queued,delayed".into(), false)),
        "{default:?}"
    );
    assert!(
        default.contains(&("Archive".into(), 1, "recurring".into(), true)),
        "{default:?}"
    );
    assert_eq!(queue(&r, "default")["size"], 7);
    assert_eq!(queue(&r, "default")["read"], 7);
    assert_eq!(queue(&r, "default")["ready"], false);
    // Failures count under the queue they failed on.
    let failing = classes(&r, "failing");
    assert!(
        failing
            .iter()
            .any(|(c, _, s, h)| c == "NoSuchJobClass" && s == "failed" && !h),
        "{failing:?}"
    );
    // A queue only Jesque's recurringEnqueue wrote is not in `<ns>:queues`: found by its
    // `:frequency` hash, and read.
    assert_eq!(queue(&r, "recurring")["kind"], "zset");
    assert!(
        classes(&r, "recurring").contains(&("SimpleJob".into(), 2, "queued".into(), false)),
        "{:?}",
        classes(&r, "recurring")
    );
    // Jesque's delayed zset is a queue: its members are read.
    let jesque = classes(&r, "delayed");
    assert_eq!(queue(&r, "delayed")["kind"], "zset");
    assert!(
        jesque.contains(&("SimpleJob".into(), 3, "queued".into(), false)),
        "{jesque:?}"
    );
    assert!(
        jesque.contains(&("NamedJob".into(), 1, "queued".into(), false)),
        "{jesque:?}"
    );
    // ActiveJob wrappers count under their job_class, found the way the worker finds it.
    let mailers = queue(&r, "mailers");
    let aj: Vec<(String, bool, bool)> = mailers["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["class"].as_str().unwrap().to_string(),
                c["activejob"].as_bool().unwrap(),
                c["handled"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        aj,
        vec![
            ("EchoJob".to_string(), true, false),
            ("SendInvoiceJob".to_string(), true, true)
        ]
    );
    // The plugin key, and how much was read: everything here.
    assert_eq!(r["plugins"][0]["plugin"], "resque-lonely_job");
    assert_eq!(r["plugins"][0]["keys"], 1);
    assert_eq!(r["read"]["queue_names_complete"], true);
    assert_eq!(r["read"]["scan_complete"], true);
    assert_eq!(r["read"]["failures_total"], r["read"]["failures"]);

    // The text names what is missing per queue.
    let text = run(&ns, &["coverage"], &["--queue", "mailers"]);
    assert!(
        text.contains("queue mailers (list, 2 jobs, 2 read) — NOT ready: no handler for EchoJob"),
        "{text}"
    );
    assert!(text.contains("SendInvoiceJob (ActiveJob)"), "{text}");
    assert!(!text.contains("queue default"), "{text}");
}

#[tokio::test]
async fn a_namespace_too_big_to_read_is_sampled_and_says_so() {
    let ns = support::namespace("coverage-big");
    let mut con = server().con().await;
    let names: Vec<String> = (0..3_000).map(|i| format!("q{i:05}")).collect();
    let _: () = con.sadd(format!("{ns}:queues"), &names).await.unwrap();
    let jobs: Vec<String> = (0..5_000)
        .map(|i| format!(r#"{{"class":"Archive","args":["{i}"]}}"#))
        .collect();
    let _: () = con
        .rpush(format!("{ns}:queue:q00000"), &jobs)
        .await
        .unwrap();
    let r = coverage(
        &ns,
        &[
            "--sample",
            "100",
            "--max-queues",
            "1000",
            "--scan-keys",
            "0",
        ],
    );
    assert_eq!(r["read"]["queue_names"], 1000);
    assert_eq!(r["read"]["queue_names_complete"], false);
    assert_eq!(r["read"]["scan_complete"], false);
    // Which 1,000 names are read is Redis's order; the big queue, asked for by name, is read
    // up to the sample.
    let r = coverage(&ns, &["--sample", "100", "--queue", "q00000"]);
    let q = queue(&r, "q00000");
    assert_eq!(
        (q["size"].as_u64(), q["read"].as_u64()),
        (Some(5000), Some(100))
    );
    assert_eq!(q["ready"], true);
    assert_eq!(
        classes(&r, "q00000"),
        vec![("Archive".into(), 100, "queued".into(), true)]
    );
    let text = run(
        &ns,
        &["coverage"],
        &["--sample", "100", "--max-queues", "1000"],
    );
    assert!(
        text.contains("1000 queue names (stopped at the budget)"),
        "{text}"
    );
}
