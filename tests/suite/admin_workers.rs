//! `Admin::workers` reads every peer's worker records — Ruby (UTC and EST), Jesque (busy,
//! idle, paused), node-resque, goworker and resq — and never fails the listing on a bad one.

use crate::admin_common;
use crate::support;

use redis::AsyncCommands;
use resq::admin::{Admin, WorkerInfo, WorkerState};

async fn listing(ns: &str) -> Vec<WorkerInfo> {
    let admin = Admin::connect(&support::url(), ns).await.expect("connect");
    admin.workers().await.expect("workers listing")
}

fn find<'a>(ws: &'a [WorkerInfo], id: &str) -> &'a WorkerInfo {
    ws.iter().find(|w| w.id == id).unwrap_or_else(|| {
        panic!(
            "{id} not listed: {:?}",
            ws.iter().map(|w| &w.id).collect::<Vec<_>>()
        )
    })
}

#[tokio::test]
async fn ruby_workers_from_fixtures() {
    let ns = support::namespace("wruby");
    let mut con = support::con().await;
    admin_common::load_fixture(
        &mut con,
        "resque/02_worker_nonfork_running.json",
        "keys",
        &ns,
    )
    .await;
    let ns2 = support::namespace("wruby-est");
    admin_common::load_fixture(
        &mut con,
        "resque/20_custom_ns_02_worker_running.json",
        "keys",
        &ns2,
    )
    .await;
    for ns in [ns, ns2] {
        let ws = listing(&ns).await;
        assert_eq!(ws.len(), 1, "{ws:?}");
        let w = &ws[0];
        assert_eq!(w.runtime, "ruby");
        assert_eq!(w.state, WorkerState::Busy);
        let job = w.job.as_ref().expect("job");
        assert_eq!(job.class.as_deref(), Some("SleepJob"));
        assert_eq!(job.queue.as_deref(), Some("default"));
        assert!(job.running_for_s.is_some_and(|s| s > 0.0), "{job:?}");
        assert!(w.started_at.is_some(), "{w:?}");
        assert!(w.heartbeat_age_s.is_some(), "{w:?}");
        assert!(w.notes.is_empty(), "{:?}", w.notes);
    }
}

#[tokio::test]
async fn est_times_are_read_with_their_offset() {
    let ns = support::namespace("west");
    let mut con = support::con().await;
    admin_common::load_fixture(
        &mut con,
        "resque/20_custom_ns_02_worker_running.json",
        "keys",
        &ns,
    )
    .await;
    let w = &listing(&ns).await[0];
    // started `2026-11-21 14:27:04 -0500` is 19:27:04 UTC, as is run_at `…19:27:04Z`.
    assert_eq!(
        w.started_at.map(|t| t.to_rfc3339()),
        Some("2026-11-21T19:27:04+00:00".to_string())
    );
    let run = w
        .job
        .as_ref()
        .and_then(|j| j.running_for_s)
        .expect("running");
    let hb = w.heartbeat_age_s.expect("heartbeat");
    assert!((run - hb).abs() < 1.0, "run {run} hb {hb}");
}

#[tokio::test]
async fn jesque_workers_busy_idle_and_paused() {
    let mut con = support::con().await;
    let busy = support::namespace("wj-busy");
    admin_common::load_fixture(&mut con, "jesque/11_worker_running.json", "keys", &busy).await;
    let ws = listing(&busy).await;
    assert_eq!(ws.len(), 2);
    for w in &ws {
        assert_eq!(w.runtime, "jesque");
        assert_eq!(w.state, WorkerState::Busy);
        assert_eq!(w.queues, vec!["default", "scheduled", "recurring"]);
        assert_eq!(
            w.job.as_ref().and_then(|j| j.class.as_deref()),
            Some("SleepJob")
        );
        assert!(w.started_at.is_some());
        assert!(w.heartbeat.is_none(), "Jesque writes no heartbeat");
        assert!(w.notes.is_empty(), "{:?}", w.notes);
    }
    let idle = support::namespace("wj-idle");
    admin_common::load_fixture(&mut con, "jesque/10_worker_idle.json", "keys", &idle).await;
    assert!(listing(&idle)
        .await
        .iter()
        .all(|w| w.state == WorkerState::Idle));
    let paused = support::namespace("wj-paused");
    admin_common::load_fixture(&mut con, "jesque/17_worker_paused.json", "keys", &paused).await;
    let ws = listing(&paused).await;
    assert!(!ws.is_empty());
    assert!(ws.iter().all(|w| w.state == WorkerState::Paused), "{ws:?}");
}

/// node-resque and goworker records, written as their source writes them (wire notes §4.3,
/// §4.4; no golden capture of these peers exists in the fixtures).
#[tokio::test]
async fn node_resque_and_goworker_records() {
    let ns = support::namespace("wnode");
    let mut con = support::con().await;
    let k = support::Keys::new(ns.clone());
    let node = "box:77:a,b";
    let go = "box:9-0:high,high,low";
    let () = con.sadd(k.workers(), &[node, go]).await.unwrap();
    let () = con
        .set(
            k.worker(node),
            r#"{"run_at":"Sat Nov 21 2026 19:15:33 GMT+0000 (Coordinated Universal Time)","queue":"a","payload":{"class":"Add","queue":"a","args":[1,2]},"worker":"box:77"}"#,
        )
        .await
        .unwrap();
    let () = con.set(k.worker_started(node), "1795288473").await.unwrap();
    let () = con
        .set(
            k.worker_ping("box:77"),
            r#"{"time":1795288590,"name":"box:77","queues":"a,b"}"#,
        )
        .await
        .unwrap();
    let () = con.set(k.stat_processed_by("box:77"), "12").await.unwrap();
    let () = con
        .set(
            k.worker(go),
            r#"{"queue":"high","run_at":"2026-11-21T19:15:33.123456789-05:00","payload":{"class":"Mail","args":["x"]}}"#,
        )
        .await
        .unwrap();
    let () = con
        .set(
            k.worker_started(go),
            "2026-11-21 19:15:33.123456789 -0500 EST m=+12.3",
        )
        .await
        .unwrap();
    let () = con.set(k.stat_processed_by(go), "0").await.unwrap();
    let ws = listing(&ns).await;
    let n = find(&ws, node);
    assert_eq!(n.runtime, "node-resque");
    assert_eq!((n.host.as_str(), n.pid.as_str()), ("box", "77"));
    assert_eq!(n.job.as_ref().and_then(|j| j.class.as_deref()), Some("Add"));
    assert!(n.job.as_ref().and_then(|j| j.running_for_s).is_some());
    assert!(
        n.started_at.is_some() && n.heartbeat_age_s.is_some(),
        "{n:?}"
    );
    assert_eq!(
        n.processed, 12,
        "node-resque's stat key has no queue suffix"
    );
    assert!(n.notes.is_empty(), "{:?}", n.notes);
    let g = find(&ws, go);
    assert_eq!(g.runtime, "goworker");
    assert_eq!(g.queues, vec!["high", "high", "low"]);
    assert!(g.started_at.is_some(), "{g:?}");
    assert!(
        g.job.as_ref().and_then(|j| j.running_for_s).is_some(),
        "{g:?}"
    );
    assert!(g.notes.is_empty(), "{:?}", g.notes);
}

/// Records no peer should write still list, with notes saying what is wrong.
#[tokio::test]
async fn one_bad_record_never_fails_the_listing() {
    let ns = support::namespace("wbad");
    let mut con = support::con().await;
    let k = support::Keys::new(ns.clone());
    let ids = ["h:1", "h:2:q", "h:3:q", "h:4:q"];
    let () = con.sadd(k.workers(), &ids).await.unwrap();
    let () = con.set(k.worker("h:2:q"), "{not json").await.unwrap();
    let () = con
        .set(
            k.worker("h:3:q"),
            r#"{"queue":"q","run_at":"whenever","payload":null}"#,
        )
        .await
        .unwrap();
    let () = con
        .set(k.worker_started("h:4:q"), "long ago")
        .await
        .unwrap();
    let () = con
        .hset(k.heartbeats(), "h:4:q", "1795288533x")
        .await
        .unwrap();
    let () = con.set(k.stat_failed_by("h:4:q"), "many").await.unwrap();
    let ws = listing(&ns).await;
    assert_eq!(ws.len(), 4);
    for id in ids {
        assert!(!find(&ws, id).notes.is_empty(), "{id} should carry a note");
    }
}

/// A live resq worker lists as busy with its job while running one.
#[tokio::test]
async fn a_live_resq_slot() {
    let ns = support::namespace("wresq");
    let mut child = std::process::Command::new(support::example_bin("compat_worker"))
        .env("REDIS_URL", support::url())
        .env("RESQUE_NAMESPACE", &ns)
        .env("QUEUES", "slow")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("compat_worker");
    let client = resq::Client::connect(&support::url(), &ns).await.unwrap();
    client
        .enqueue_to("slow", "Sleep", &[serde_json::json!(3000)])
        .await
        .unwrap();
    let admin = Admin::connect(&support::url(), &ns).await.unwrap();
    let w = support::eventually(10, "the slot to be busy", || async {
        let ws = admin.workers().await.ok()?;
        ws.into_iter().find(|w| w.state == WorkerState::Busy)
    })
    .await;
    assert_eq!(w.runtime, "resq");
    assert_eq!(
        w.job.as_ref().and_then(|j| j.class.as_deref()),
        Some("Sleep")
    );
    assert!(
        w.heartbeat_age_s.is_some() && w.started_at.is_some(),
        "{w:?}"
    );
    assert!(w.notes.is_empty(), "{:?}", w.notes);
    let _ = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let _ = child.wait();
}
