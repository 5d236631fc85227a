//! Golden tests: what resq writes equals what real Resque 3.0.0 wrote (fixtures/resque/),
//! after masking each fixture's `volatile` fields (host, pid, times).
//!
//! Deliberate differences, asserted as such: `run_at` is written in the millisecond shape
//! Jesque can parse (`2026-11-21T19:15:33.678+0000`) instead of Ruby's `…Z`; worker ids carry
//! resq's slot convention (`host~resq:pid-k:queues`); and resq's failure `exception`/`backtrace`
//! name Rust-side causes.

use crate::support;

use redis::AsyncCommands;
use resq::{Client, JobContext, JobError, Phase, Registry, Running};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use support::Keys;

/// A key's type and value, with the namespace and worker ids masked.
type Dump = BTreeMap<String, (String, String)>;

/// Digits → `9`: two time strings of the same format have the same shape.
fn shape(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_digit() { '9' } else { c })
        .collect()
}

fn mask(s: &str, ns: &str, ids: &[String]) -> String {
    let mut s = s.to_string();
    for id in ids {
        s = s.replace(id, "<id>");
    }
    s.replacen(&format!("{ns}:"), "<ns>:", 1)
}

/// Every key of namespace `ns` in Redis, masked.
async fn dump(ns: &str, ids: &[String]) -> Dump {
    let mut con = support::con().await;
    let keys: Vec<String> = con.keys(format!("{ns}:*")).await.unwrap();
    let mut out = Dump::new();
    for k in keys {
        let t: String = redis::cmd("TYPE")
            .arg(&k)
            .query_async(&mut con)
            .await
            .unwrap();
        let v = match t.as_str() {
            "string" => con.get::<_, String>(&k).await.unwrap(),
            "list" => con
                .lrange::<_, Vec<String>>(&k, 0, -1)
                .await
                .unwrap()
                .join("\n"),
            "set" => {
                let mut m: Vec<String> = con.smembers(&k).await.unwrap();
                m.sort();
                m.join("\n")
            }
            "hash" => {
                let m: BTreeMap<String, String> = con.hgetall(&k).await.unwrap();
                m.into_iter()
                    .map(|(f, v)| format!("{f}={v}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            }
            other => other.to_string(),
        };
        out.insert(mask(&k, ns, ids), (t, mask(&v, ns, ids)));
    }
    out
}

/// The fixture's keys, masked the same way.
fn fixture_dump(name: &str) -> Dump {
    let f = support::fixture(name);
    let ns = f["namespace"].as_str().unwrap().to_string();
    let id = f["volatile_values"]["WORKER_ID"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let ids = if id.is_empty() { vec![] } else { vec![id] };
    let mut out = Dump::new();
    for (k, v) in f["keys"].as_object().unwrap() {
        let t = v["type"].as_str().unwrap().to_string();
        let val = match &v["value"] {
            Value::String(s) => s.clone(),
            Value::Array(a) => a
                .iter()
                .map(|x| {
                    x.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| x.to_string())
                })
                .collect::<Vec<_>>()
                .join("\n"),
            Value::Object(m) => m
                .iter()
                .map(|(f, v)| format!("{f}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join("\n"),
            other => other.to_string(),
        };
        out.insert(mask(k, &ns, &ids), (t, mask(&val, &ns, &ids)));
    }
    out
}

async fn start(ns: &str, queues: &str, registry: Registry) -> Running {
    support::start(support::builder(ns, queues).registry(registry)).await
}

fn demo_registry() -> Registry {
    Registry::new()
        .handler("SleepJob", |ctx: JobContext| async move {
            let secs: u64 = ctx.arg(0)?;
            tokio::time::sleep(Duration::from_secs(secs)).await;
            Ok(())
        })
        .handler("SimpleJob", |_ctx: JobContext| async { Ok(()) })
        .handler("FailJob", |ctx: JobContext| async move {
            Err(JobError::msg(ctx.arg::<String>(0)?))
        })
}

#[tokio::test]
async fn enqueue_writes_rubys_bytes() {
    let f = support::fixture("resque/01_enqueue.json");
    let ns = support::namespace("golden-enqueue");
    let client = Client::connect(&support::url(), &ns).await.unwrap();
    let keys = Keys::new(&ns);
    let mut con = support::con().await;
    let mut compared = 0;
    for q in ["default", "high", "critical", "queue.with-dots_and:colon"] {
        let want: Vec<String> = f["keys"][format!("resque:queue:{q}")]["value"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        for raw in &want {
            let v: Value = serde_json::from_str(raw).unwrap();
            let args = v["args"].as_array().cloned().unwrap_or_default();
            client
                .enqueue_to(q, v["class"].as_str().unwrap(), &args)
                .await
                .unwrap();
            compared += 1;
        }
        let got: Vec<String> = con.lrange(keys.queue(q), 0, -1).await.unwrap();
        assert_eq!(got, want, "queue {q}");
    }
    // Resque.push keeps extra fields and key order: push_raw stores bytes as given.
    let pushed: Vec<String> = f["keys"]["resque:queue:pushed"]["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    for raw in &pushed {
        client.push_raw("pushed", raw).await.unwrap();
    }
    let got: Vec<String> = con.lrange(keys.queue("pushed"), 0, -1).await.unwrap();
    assert_eq!(got, pushed);
    let mut queues: Vec<String> = con.smembers(keys.queues()).await.unwrap();
    queues.sort();
    let want_queues: Vec<String> = f["keys"]["resque:queues"]["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(queues, want_queues);
    assert_eq!(compared, 9);
}

#[tokio::test]
async fn busy_worker_matches_ruby_except_run_at_and_prune_lock() {
    let ns = support::namespace("golden-busy");
    let con = support::con().await;
    let keys = Keys::new(&ns);
    let running = start(&ns, "default", demo_registry()).await;
    let ids = running.ids().to_vec();
    let client = Client::connect(&support::url(), &ns).await.unwrap();
    client
        .enqueue_to("default", "SleepJob", &[2.into()])
        .await
        .unwrap();
    client
        .enqueue_to("default", "SimpleJob", &["after-sleep".into()])
        .await
        .unwrap();
    let wkey = keys.worker(&ids[0]);
    support::eventually(5, "the SleepJob to start", || {
        let (mut con, k) = (con.clone(), wkey.clone());
        async move { con.exists::<_, bool>(&k).await.unwrap().then_some(()) }
    })
    .await;
    let got = dump(&ns, &ids).await;
    let want = fixture_dump("resque/02_worker_nonfork_running.json");

    // Same keys, Ruby's prune lock included (resq prunes at start under Ruby's lock, as Ruby).
    let want_keys: Vec<&String> = want.keys().collect();
    let got_keys: Vec<&String> = got.keys().collect();
    assert_eq!(got_keys, want_keys);

    for (k, (t, v)) in &want {
        let Some((gt, gv)) = got.get(k) else { continue };
        assert_eq!(gt, t, "type of {k}");
        if k == "<ns>:worker:<id>" {
            let g: Value = serde_json::from_str(gv).unwrap();
            let w: Value = serde_json::from_str(v).unwrap();
            let gk: Vec<&String> = g.as_object().unwrap().keys().collect();
            let wk: Vec<&String> = w.as_object().unwrap().keys().collect();
            assert_eq!(gk, wk, "record key order");
            assert_eq!(g["queue"], w["queue"]);
            assert_eq!(g["payload"], w["payload"]);
            assert!(
                gv.contains(r#""payload":{"class":"SleepJob","args":[2]}"#),
                "payload bytes: {gv}"
            );
            assert_eq!(
                shape(g["run_at"].as_str().unwrap()),
                "9999-99-99T99:99:99.999+9999"
            );
            assert_eq!(shape(w["run_at"].as_str().unwrap()), "9999-99-99T99:99:99Z");
        } else {
            assert_eq!(shape(gv), shape(v), "value of {k}");
        }
    }
    running.stop(Phase::Quit);
    running.wait().await.unwrap();
}

#[tokio::test]
async fn finished_and_unregistered_worker_leaves_what_ruby_leaves() {
    let ns = support::namespace("golden-finished");
    let con = support::con().await;
    let keys = Keys::new(&ns);
    let running = start(&ns, "default", demo_registry()).await;
    let ids = running.ids().to_vec();
    let client = Client::connect(&support::url(), &ns).await.unwrap();
    client
        .enqueue_to("default", "SimpleJob", &[1.into()])
        .await
        .unwrap();
    client
        .enqueue_to("default", "SimpleJob", &[2.into()])
        .await
        .unwrap();
    support::eventually(5, "two jobs processed", || {
        let (mut con, k) = (con.clone(), keys.stat_processed());
        async move { (con.get::<_, Option<u64>>(&k).await.unwrap() == Some(2)).then_some(()) }
    })
    .await;
    running.stop(Phase::Quit);
    running.wait().await.unwrap();
    let got = dump(&ns, &ids).await;
    let want = fixture_dump("resque/03_worker_nonfork_finished.json");
    assert_eq!(got, want);
    // A worker that exits after a job (fixture 06) leaves the same keys.
    let exited = fixture_dump("resque/06_worker_fork_exited.json");
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        exited.keys().collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn failure_entries_have_rubys_fields_order_and_formats() {
    let f = support::fixture("resque/07_failures.json");
    let ruby: Vec<Value> = f["keys"]["resque:failed"]["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| serde_json::from_str(v.as_str().unwrap()).unwrap())
        .collect();
    let ns = support::namespace("golden-failed");
    let mut con = support::con().await;
    let keys = Keys::new(&ns);
    let running = start(&ns, "failing", demo_registry()).await;
    let client = Client::connect(&support::url(), &ns).await.unwrap();
    client
        .enqueue_to(
            "failing",
            "FailJob",
            &["boom: something bad happened".into()],
        )
        .await
        .unwrap();
    client
        .enqueue_to("failing", "NoSuchJob", &[])
        .await
        .unwrap();
    client.push_raw("failing", "{not json").await.unwrap();
    let entries: Vec<String> = support::eventually(5, "three failures", || {
        let (mut con, k) = (con.clone(), keys.failed());
        async move {
            let v: Vec<String> = con.lrange(&k, 0, -1).await.unwrap();
            (v.len() == 3).then_some(v)
        }
    })
    .await;
    let ruby_keys: Vec<&String> = ruby[0].as_object().unwrap().keys().collect();
    for raw in &entries {
        let e: Value = serde_json::from_str(raw).unwrap();
        let k: Vec<&String> = e.as_object().unwrap().keys().collect();
        assert_eq!(k, ruby_keys, "field set and order of {raw}");
        assert_eq!(
            shape(e["failed_at"].as_str().unwrap()),
            shape(ruby[0]["failed_at"].as_str().unwrap())
        );
        assert!(e["backtrace"]
            .as_array()
            .unwrap()
            .iter()
            .all(Value::is_string));
        assert_eq!(e["worker"].as_str().unwrap(), running.ids()[0]);
        assert_eq!(e["queue"], "failing");
    }
    let first: Value = serde_json::from_str(&entries[0]).unwrap();
    // A RuntimeError is recorded exactly as Ruby records one, but for the backtrace.
    for field in ["payload", "exception", "error", "queue"] {
        assert_eq!(first[field], ruby[0][field], "{field}");
    }
    let unknown: Value = serde_json::from_str(&entries[1]).unwrap();
    assert_eq!(unknown["exception"], "Resq::UnknownJobClass");
    assert_eq!(
        unknown["payload"],
        serde_json::json!({"class":"NoSuchJob","args":[]})
    );
    let bad: Value = serde_json::from_str(&entries[2]).unwrap();
    assert_eq!(bad["payload"], Value::Null);
    assert!(bad["error"].as_str().unwrap().ends_with("{not json"));
    // Ruby counts failed jobs as processed too.
    let processed: u64 = con.get(keys.stat_processed()).await.unwrap();
    let failed: u64 = con.get(keys.stat_failed()).await.unwrap();
    assert_eq!((processed, failed), (3, 3));
    running.stop(Phase::Quit);
    running.wait().await.unwrap();
}

/// The key layout (`src/keys.rs`): the names Resque and its plugins read.
mod key_layout {
    use super::support::Keys;

    #[test]
    fn namespace_with_colons_is_used_verbatim() {
        let k = Keys::new("myapp:jobs");
        assert_eq!(k.queue("default"), "myapp:jobs:queue:default");
        assert_eq!(k.workers(), "myapp:jobs:workers");
    }

    #[test]
    fn scheduler_lock_has_namespace_twice() {
        assert_eq!(
            Keys::new("resque").scheduler_master_lock(),
            "resque:resque:resque_scheduler_master_lock"
        );
    }

    #[test]
    fn empty_namespace_has_no_prefix() {
        assert_eq!(Keys::new("").queue("q"), "queue:q");
    }

    #[test]
    fn scheduler_and_retry_keys() {
        let k = Keys::new("resque");
        assert_eq!(
            k.scheduler_master_lock_prefixed("eu"),
            "resque:resque:eu:resque_scheduler_master_lock"
        );
        assert_eq!(
            k.scheduler_master_lock_prefixed(""),
            k.scheduler_master_lock()
        );
        let logical = Keys::resque_retry_logical("Jobs::Send Mail", Some("ab12"));
        assert_eq!(logical, "resque-retry:Jobs::SendMail:ab12");
        assert_eq!(
            k.retry_attempts(&logical),
            "resque:resque-retry:Jobs::SendMail:ab12"
        );
        assert_eq!(
            k.retry_failure(&logical),
            "resque:failure-resque-retry:Jobs::SendMail:ab12"
        );
        assert_eq!(k.unique("r:7"), "resque:resq:unique:r:7");
    }
}
