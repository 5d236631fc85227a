//! Fault suite 6c: the malformed-payload corpus in `fixtures/malformed/` (truncated JSON,
//! invalid UTF-8, 10 MB args, nesting 10,000 deep, wrong types, missing or unregistered class,
//! JSON that only Lua's cjson accepts, …). Each payload, pushed verbatim, must yield exactly one
//! failure entry (with the exception `EXPECTED.tsv` names, in a shape resque-web and Jesque can
//! list), count once in `stat:failed`, leave the slot idle, and the worker must stay up and
//! keep running good jobs.

use crate::support;

use redis::Commands;
use serde_json::Value;
use std::path::PathBuf;
use support::{wait_until, WorkerProc};

fn corpus() -> Vec<(String, Vec<u8>, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/malformed");
    let tsv = std::fs::read_to_string(dir.join("EXPECTED.tsv")).expect("EXPECTED.tsv");
    tsv.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (file, exc) = l.split_once('\t').expect("file<TAB>exception");
            let bytes = std::fs::read(dir.join(file)).expect("fixture");
            (file.to_string(), bytes, exc.to_string())
        })
        .collect()
}

#[test]
fn every_malformed_payload_yields_exactly_one_failure_and_the_worker_stays_up() {
    let cases = corpus();
    assert!(
        cases.len() >= 30,
        "the corpus has only {} payloads",
        cases.len()
    );
    let url = support::url();
    let ns = support::namespace("malformed");
    let mut con = redis::Client::open(url.as_str())
        .expect("url")
        .get_connection()
        .expect("connect");
    let mut w = WorkerProc::start(&url, &ns, 1, &[("QUEUES", "malformed")]);
    let id = w.ids[0].clone();
    let queue = format!("{ns}:queue:malformed");
    let failed_key = format!("{ns}:failed");
    let _: () = con.sadd(format!("{ns}:queues"), "malformed").expect("sadd");
    let mut seen = Vec::new();
    for (i, (file, bytes, expected)) in cases.iter().enumerate() {
        let _: () = con.rpush(&queue, bytes.as_slice()).expect("push");
        wait_until(30, &format!("one failure entry for {file}"), || {
            let n: usize = con.llen(&failed_key).ok()?;
            let left: usize = con.llen(&queue).ok()?;
            let busy: bool = con.exists(format!("{ns}:worker:{id}")).ok()?;
            (n > i && left == 0 && !busy).then_some(())
        });
        let n: usize = con.llen(&failed_key).expect("llen");
        assert_eq!(n, i + 1, "{file} produced {} failure entries", n - i);
        let stat: i64 = con.get(format!("{ns}:stat:failed")).expect("stat");
        assert_eq!(stat as usize, i + 1, "{file}: stat:failed");
        let raw: String = con.lindex(&failed_key, -1).expect("entry");
        let entry: Value = serde_json::from_str(&raw)
            .unwrap_or_else(|e| panic!("{file}: failure entry is not JSON ({e})"));
        let keys: Vec<&str> = entry
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "failed_at",
                "payload",
                "exception",
                "error",
                "backtrace",
                "worker",
                "queue"
            ],
            "{file}"
        );
        assert_eq!(entry["exception"], expected.as_str(), "{file}: {raw:.300}");
        assert_eq!(entry["worker"], id.as_str(), "{file}");
        assert_eq!(entry["queue"], "malformed", "{file}");
        assert!(entry["backtrace"].is_array(), "{file}");
        // payload is either the job object (with a non-empty class: Jesque lists it) or null.
        let p = &entry["payload"];
        assert!(
            p.is_null() || p["class"].as_str().is_some_and(|c| !c.is_empty()),
            "{file}: payload {p:.200}"
        );
        assert!(
            entry["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{file}"
        );
        serde_json::from_str::<resq::admin::FailureEntry>(&raw)
            .unwrap_or_else(|e| panic!("{file}: resq's own reader rejects the entry: {e}"));
        assert!(w.running(), "the worker died on {file}:\n{}", w.stderr());
        seen.push(format!("{file} -> {expected}"));
    }
    // Still working: a good job runs.
    let _: () = con
        .rpush(&queue, r#"{"class":"Echo","args":["after"]}"#)
        .expect("push");
    wait_until(10, "the good job after the corpus", || {
        let echoed: Vec<String> = con.lrange(format!("{ns}:compat:echo"), 0, -1).ok()?;
        echoed.contains(&r#"["after"]"#.to_string()).then_some(())
    });
    let failures: usize = con.llen(&failed_key).expect("llen");
    assert_eq!(failures, cases.len(), "the good job must not fail");
    w.signal("QUIT");
    assert!(w.wait_exit(10).success());
    support::audit::report(&format!(
        "MALFORMED: {} payloads -> {} failure entries, worker up throughout",
        cases.len(),
        failures
    ));
}
