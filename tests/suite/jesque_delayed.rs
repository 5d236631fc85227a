//! Jesque's delayed and recurring zset queues: the client's bytes against fixtures 05–07, and
//! resq workers running such queues with Jesque's pop rules (fixture 16) when — and only when —
//! told a queue is one.

use crate::keydump;
use crate::support;

use support::stop;

use chrono::{DateTime, Utc};
use redis::AsyncCommands;
use resq::client::JesqueJob;
use resq::{Client, JobContext, Registry, Running, Worker};
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::Keys;

async fn client(ns: &str) -> Client {
    Client::connect(&support::url(), ns).await.unwrap()
}

fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn job(class: &str, arg: &str) -> JesqueJob {
    JesqueJob::new(class, vec![json!(arg)])
}

#[tokio::test]
async fn delayed_recurring_and_removal_match_fixtures_05_to_07() {
    let ns = support::namespace("jq");
    let c = client(&ns).await;
    let mut con = support::con().await;
    // 05
    c.jesque_delayed_enqueue(
        "delayed",
        &job("SimpleJob", "due-2030"),
        t("2030-01-01T00:00:00Z"),
    )
    .await
    .unwrap();
    c.jesque_delayed_enqueue(
        "delayed",
        &job("SimpleJob", "due-2031"),
        t("2031-01-01T00:00:00Z"),
    )
    .await
    .unwrap();
    let past = c
        .jesque_delayed_enqueue(
            "delayed",
            &job("SimpleJob", "already-due"),
            t("2020-01-01T00:00:00Z"),
        )
        .await;
    assert!(
        matches!(past, Err(resq::Error::Rejected(m)) if m.contains("future must be after current time"))
    );
    c.jesque_delayed_enqueue(
        "delayed",
        &job("SimpleJob", "dup"),
        t("2030-01-01T00:00:00Z"),
    )
    .await
    .unwrap();
    c.jesque_delayed_enqueue(
        "delayed",
        &job("SimpleJob", "dup"),
        t("2032-01-01T00:00:00Z"),
    )
    .await
    .unwrap();
    let mut vars = Map::new();
    vars.insert("when".into(), json!("later"));
    c.jesque_delayed_enqueue(
        "delayed",
        &JesqueJob::with_vars("NamedJob", vars),
        t("2030-01-01T00:00:00Z"),
    )
    .await
    .unwrap();
    let want = keydump::expected(
        &support::fixture("jesque/05_delayed_enqueue.json"),
        "keys",
        &[],
    );
    keydump::assert_same(&keydump::dump(&mut con, &ns).await, &want);
    // 06
    c.jesque_recurring_enqueue(
        "recurring",
        &job("SimpleJob", "every-minute"),
        t("2030-01-01T00:00:00Z"),
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    c.jesque_recurring_enqueue(
        "recurring",
        &job("SimpleJob", "hourly"),
        t("2030-01-01T01:00:00Z"),
        Duration::from_secs(3600),
    )
    .await
    .unwrap();
    let short = c
        .jesque_recurring_enqueue(
            "recurring",
            &job("S", "x"),
            t("2030-01-01T00:00:00Z"),
            Duration::from_millis(500),
        )
        .await;
    assert!(matches!(short, Err(resq::Error::Rejected(_))));
    let want = keydump::expected(
        &support::fixture("jesque/06_recurring_enqueue.json"),
        "keys",
        &[],
    );
    keydump::assert_same(&keydump::dump(&mut con, &ns).await, &want);
    // 07
    assert!(c
        .jesque_remove_delayed("delayed", &job("SimpleJob", "due-2031"))
        .await
        .unwrap());
    assert!(!c
        .jesque_remove_delayed("delayed", &job("SimpleJob", "never-enqueued"))
        .await
        .unwrap());
    assert!(c
        .jesque_remove_recurring("recurring", &job("SimpleJob", "hourly"))
        .await
        .unwrap());
    c.enqueue_jesque("plain", "SimpleJob", Some(&[json!("x")]), None)
        .await
        .unwrap();
    let on_list = c
        .jesque_delayed_enqueue("plain", &job("SimpleJob", "x"), t("2030-01-01T00:00:00Z"))
        .await;
    assert!(matches!(on_list, Err(resq::Error::Rejected(m)) if m.contains("plain cannot be used")));
    let on_zset = c
        .enqueue_jesque("delayed", "SimpleJob", Some(&[json!("y")]), None)
        .await;
    assert!(
        on_zset.is_err(),
        "a plain enqueue onto a zset queue fails, as in Jesque"
    );
    let want = keydump::expected(
        &support::fixture("jesque/07_remove_delayed_enqueue.json"),
        "keys",
        &[],
    );
    keydump::assert_same(&keydump::dump(&mut con, &ns).await, &want);
}

type Runs = Arc<Mutex<Vec<(String, Instant)>>>;

fn recording() -> (Registry, Runs) {
    let runs: Runs = Arc::default();
    let mut r = Registry::new();
    for class in ["SleepJob", "Echo"] {
        let runs = runs.clone();
        r = r.handler(class, move |ctx: JobContext| {
            let runs = runs.clone();
            async move {
                runs.lock()
                    .unwrap()
                    .push((ctx.payload().raw().get().to_string(), Instant::now()));
                Ok(())
            }
        });
    }
    (r, runs)
}

async fn start(ns: &str, queues: &str, jesque: &[&str], registry: Registry) -> Running {
    Worker::builder()
        .redis_url(support::url())
        .namespace(ns)
        .queues(queues)
        .unwrap()
        .interval(Duration::from_millis(500))
        .jesque_delayed_queues(jesque.iter().copied())
        .registry(registry)
        .build()
        .unwrap()
        .start()
        .await
        .unwrap()
}

#[tokio::test]
async fn workers_pop_due_members_with_jesque_rules_fixture_16() {
    let ns = support::namespace("jqw");
    let c = client(&ns).await;
    let (registry, runs) = recording();
    let w = start(
        &ns,
        "default,scheduled,recurring",
        &["scheduled", "recurring"],
        registry,
    )
    .await;
    let soon = Utc::now() + chrono::Duration::milliseconds(400);
    let due = Instant::now() + Duration::from_millis(400);
    c.jesque_delayed_enqueue(
        "scheduled",
        &JesqueJob::new("SleepJob", vec![json!(1)]),
        soon,
    )
    .await
    .unwrap();
    c.jesque_delayed_enqueue(
        "scheduled",
        &JesqueJob::new("SleepJob", vec![json!(2)]),
        t("2030-01-01T00:00:00Z"),
    )
    .await
    .unwrap();
    c.jesque_recurring_enqueue(
        "recurring",
        &JesqueJob::new("SleepJob", vec![json!(3)]),
        soon,
        Duration::from_secs(3600),
    )
    .await
    .unwrap();
    support::eventually(5, "both due jobs to run", || async {
        (runs.lock().unwrap().len() >= 2).then_some(())
    })
    .await;
    let ran: Vec<(String, Instant)> = runs.lock().unwrap().clone();
    let mut payloads: Vec<&str> = ran.iter().map(|(p, _)| p.as_str()).collect();
    payloads.sort_unstable();
    assert_eq!(
        payloads,
        [
            r#"{"class":"SleepJob","args":[1],"vars":null}"#,
            r#"{"class":"SleepJob","args":[3],"vars":null}"#
        ]
    );
    for (p, at) in &ran {
        let late = at.saturating_duration_since(due);
        assert!(late < Duration::from_millis(1500), "{p} ran {late:?} late");
    }
    stop(w).await;
    let mut con = support::con().await;
    let fx = support::fixture("jesque/16_worker_delayed_consumed.json");
    let mine = (soon.timestamp_millis() + 3_600_000).to_string();
    let want = keydump::expected(&fx, "keys", &[("1795292873808".to_string(), mine)]);
    let got = keydump::dump(&mut con, &ns).await;
    for k in [
        "resque:queue:scheduled",
        "resque:queue:recurring",
        "resque:queue:recurring:frequency",
    ] {
        assert_eq!(got[k], want[k], "{k}");
    }
    // No worker record, no Jesque in-flight list, no failure.
    let keys = Keys::new(&ns);
    let failed: u64 = con.llen(keys.failed()).await.unwrap();
    assert_eq!(failed, 0);
    let stats: Option<String> = con.get(keys.stat_processed()).await.unwrap();
    assert_eq!(stats.as_deref(), Some("2"));
}

#[tokio::test]
async fn zset_queues_are_skipped_unless_named_even_under_a_wildcard() {
    let ns = support::namespace("optin");
    let c = client(&ns).await;
    c.jesque_delayed_enqueue_in(
        "zq",
        &JesqueJob::new("Echo", vec![json!("z")]),
        Duration::from_millis(50),
    )
    .await
    .unwrap();
    // Jesque refuses a due time that is not in the future: the clock passes it.
    tokio::time::sleep(Duration::from_millis(60)).await;
    c.enqueue_to("l", "Echo", &[json!("l1")]).await.unwrap();
    let (registry, runs) = recording();
    let w = start(&ns, "*", &[], registry).await;
    support::eventually(5, "the list job", || async {
        (!runs.lock().unwrap().is_empty()).then_some(())
    })
    .await;
    c.enqueue_to("l", "Echo", &[json!("l2")]).await.unwrap();
    support::eventually(5, "the second list job", || async {
        (runs.lock().unwrap().len() >= 2).then_some(())
    })
    .await;
    stop(w).await;
    assert_eq!(runs.lock().unwrap().len(), 2, "the zset member was not run");
    assert_eq!(c.size("zq").await.unwrap(), 1, "and is still there");
    let failed: u64 = support::con()
        .await
        .llen(Keys::new(&ns).failed())
        .await
        .unwrap();
    assert_eq!(failed, 0);
}

#[tokio::test]
async fn priority_order_spans_list_and_zset_queues() {
    let ns = support::namespace("prio");
    let c = client(&ns).await;
    for i in 0..3 {
        c.enqueue_to("low", "Echo", &[json!(format!("low{i}"))])
            .await
            .unwrap();
    }
    for i in 0..3 {
        let j = JesqueJob::new("Echo", vec![json!(format!("z{i}"))]);
        c.jesque_delayed_enqueue_in("zq", &j, Duration::from_millis(10))
            .await
            .unwrap();
    }
    // Jesque refuses a due time that is not in the future: the clock passes it.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (registry, runs) = recording();
    let w = start(&ns, "zq,low", &["zq"], registry).await;
    support::eventually(5, "six jobs", || async {
        (runs.lock().unwrap().len() >= 6).then_some(())
    })
    .await;
    stop(w).await;
    let order: Vec<String> = runs
        .lock()
        .unwrap()
        .iter()
        .map(|(p, _)| {
            serde_json::from_str::<Value>(p).unwrap()["args"][0]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(order[..3].iter().all(|a| a.starts_with('z')), "{order:?}");
    assert!(order[3..].iter().all(|a| a.starts_with("low")), "{order:?}");
}

#[tokio::test]
async fn a_recurring_job_behind_catches_up_one_period_per_pop() {
    let ns = support::namespace("catchup");
    let keys = Keys::new(&ns);
    let mut con = support::con().await;
    // Written as Jesque's recurringEnqueue would have, 2.5 periods ago (period 1 s).
    let member = r#"{"class":"Echo","args":["r"],"vars":null}"#;
    let start_ms = Utc::now().timestamp_millis() - 2500;
    let _: () = redis::pipe()
        .zadd(keys.queue("rq"), member, start_ms)
        .hset(keys.queue_frequency("rq"), member, "1000")
        .query_async(&mut con)
        .await
        .unwrap();
    let (registry, runs) = recording();
    let w = start(&ns, "rq", &["rq"], registry).await;
    support::eventually(5, "three catch-up runs", || async {
        (runs.lock().unwrap().len() >= 3).then_some(())
    })
    .await;
    stop(w).await;
    let score: f64 = con.zscore(keys.queue("rq"), member).await.unwrap();
    let n = runs.lock().unwrap().len() as i64;
    assert_eq!(score as i64, start_ms + n * 1000, "score += period per pop");
    assert!(runs.lock().unwrap().iter().all(|(p, _)| p == member));
}
