//! The dashboard's cost per request (issue 40): the Jobs tabs read only the limits' held sets
//! that hold jobs — the index `<ns>:resq:held:sets`, kept by the call that holds or releases a
//! job — so 200,000 empty partitions of a keyed limit cost a Jobs request nothing (Redis
//! commands counted with `INFO commandstats`, not timed); and a request whose Redis traffic
//! is stuck does not hold up another (each request has a connection of its own: a proxy in
//! front of Redis holds the slow request's connection, and an `/overview` sent meanwhile
//! answers before it is let go).
//!
//! The tests take turns (`TURN`): the command counts are the server's.

mod support;
mod web_common;

use redis::AsyncCommands;
use resq::admin::Admin;
use resq::jobs::Track;
use resq::limits::Limit;
use resq::web::{self, WebConfig};
use resq::{Client, JobContext, Registry};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use support::Keys;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Mutex, Notify};
use web_common::get;

static TURN: Mutex<()> = Mutex::const_new(());

/// Calls of each command the server has answered so far.
async fn calls() -> HashMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut support::con().await)
        .await
        .unwrap();
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let n = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_string(), n))
        })
        .collect()
}

/// Commands answered between `before` and `after`, by name (the `INFO` that read `after`
/// left out).
fn spent(before: &HashMap<String, u64>, after: &HashMap<String, u64>) -> HashMap<String, u64> {
    let mut d: HashMap<String, u64> = after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect();
    if let Some(n) = d.get_mut("info") {
        *n -= 1;
    }
    d.retain(|_, v| *v > 0);
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_tabs_read_only_held_sets_that_hold_jobs() {
    let _turn = TURN.lock().await;
    let ns = support::namespace("webheldix");
    let k = Keys::new(ns.as_str());
    let mut con = support::con().await;
    // A keyed limit of 1 per account, and 200,000 partitions of it that hold nothing (the
    // past of a busy fleet: names in its set of partitions, no job anywhere).
    let limit = Limit::concurrency("per-account", 1)
        .class("Sync")
        .key("acct-{args.0}");
    let admin = Admin::connect(&support::url(), &ns).await.unwrap();
    admin.set_limit(&limit).await.unwrap();
    for chunk in 0..20 {
        let names: Vec<String> = (0..10_000)
            .map(|i| format!("acct-old{}", chunk * 10_000 + i))
            .collect();
        let _: () = con.sadd(k.limit_parts("per-account"), names).await.unwrap();
    }
    // A worker holds the second job of one account while the first runs.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let g = gate.clone();
    let registry = Registry::new()
        .limit(limit)
        .handler("Sync", move |_ctx: JobContext| {
            let g = g.clone();
            async move {
                g.acquire().await.expect("gate").forget();
                Ok(())
            }
        });
    let c = Client::connect(&support::url(), &ns).await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..2 {
        ids.push(
            c.enqueue_class_tracked("sync", "Sync", &[json!("A")], Track::new())
                .await
                .unwrap(),
        );
    }
    let w = support::start(
        support::builder(&ns, "sync")
            .registry(registry)
            .concurrency(2),
    )
    .await;
    let held = k.limit_held("per-account", Some("acct-A"));
    support::eventually(30, "the second job held", || {
        let held = held.clone();
        async move {
            let n: u64 = support::con().await.zcard(&held).await.unwrap();
            (n == 1).then_some(())
        }
    })
    .await;
    // The held set is in the index, in the call that held the job.
    let index: Vec<String> = con.zrange(k.held_sets(), 0, -1).await.unwrap();
    assert_eq!(index, std::slice::from_ref(&held));

    let app = web_common::router(&ns, |c| c).await;
    for page in ["/jobs", "/jobs?state=queued"] {
        // The worker's own calls (its limits timer walks partitions too) would count: a
        // request is measured again until no function call of the worker ran meanwhile (or
        // until it read held sets by the thousand, as it did when it read every partition).
        let (r, d) = support::eventually(60, "a request measured alone", || {
            let app = app.clone();
            async move {
                let before = calls().await;
                let r = get(&app, page).await;
                let d = spent(&before, &calls().await);
                let many = d.get("zrange").is_some_and(|n| *n > 1000);
                (!d.contains_key("fcall") || many).then_some((r, d))
            }
        })
        .await;
        assert_eq!(r.status, axum::http::StatusCode::OK, "{page}: {}", r.body);
        // The held job is listed, as queued.
        assert!(r.body.contains(ids[1].as_str()), "{page}: {}", r.body);
        // (About 30: the counts, the queues, the one held set, the records.)
        let total: u64 = d.values().sum();
        assert!(
            total < 100,
            "{page} sent {total} commands for 200,000 empty partitions: {d:?}"
        );
        // Held sets are read with ZRANGE and counted with ZCARD: only the one that holds.
        let held_reads = d.get("zrange").unwrap_or(&0) + d.get("zcard").unwrap_or(&0);
        assert!(held_reads <= 12, "{page} read empty held sets: {d:?}");
    }

    // Released (the first job ends): the set empties and leaves the index in that call.
    gate.add_permits(1);
    support::eventually(30, "the held job released", || {
        let held = held.clone();
        async move {
            let n: u64 = support::con().await.zcard(&held).await.unwrap();
            (n == 0).then_some(())
        }
    })
    .await;
    let index: Vec<String> = con.zrange(k.held_sets(), 0, -1).await.unwrap();
    assert!(index.is_empty(), "{index:?}");
    gate.add_permits(1);
    support::stop(w).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limits_sweep_mends_the_index_of_held_sets() {
    let _turn = TURN.lock().await;
    let ns = support::namespace("webheldmend");
    let k = Keys::new(ns.as_str());
    let mut con = support::con().await;
    let limit = Limit::concurrency("per-account", 1)
        .class("Sync")
        .key("acct-{args.0}");
    let admin = Admin::connect(&support::url(), &ns).await.unwrap();
    admin.set_limit(&limit).await.unwrap();
    // Drift both ways: a held job whose set the index lacks (written before the index
    // existed; its queue is unusable, so it stays held), and entries for sets that hold
    // nothing (or are not sets).
    let lost = k.limit_held("per-account", Some("acct-L"));
    let member = format!(
        "1\tblocked\t1\tper-account\t{}",
        r#"{"class":"Sync","args":["L"]}"#
    );
    let _: () = redis::pipe()
        .hset(k.queue("blocked"), "not", "a list")
        .sadd(k.limit_parts("per-account"), "acct-L")
        .zadd(&lost, member, 99e13)
        .zadd(
            k.held_sets(),
            k.limit_held("per-account", Some("acct-gone")),
            0,
        )
        .zadd(k.held_sets(), k.queue("sync"), 0)
        .rpush(k.queue("sync"), "{}")
        .query_async(&mut con)
        .await
        .unwrap();
    let registry = Registry::new()
        .limit(limit)
        .handler("Sync", |_ctx: JobContext| async { Ok(()) });
    let w = support::start(support::builder(&ns, "none").registry(registry)).await;
    support::eventually(60, "the index mended by the sweep", || {
        let (key, lost) = (k.held_sets(), lost.clone());
        async move {
            let index: Vec<String> = support::con().await.zrange(key, 0, -1).await.unwrap();
            (index == [lost]).then_some(())
        }
    })
    .await;
    support::stop(w).await;
}

/// A TCP proxy in front of the test server that, once armed, holds the connection whose
/// traffic names `marker` (nothing more is sent on it) until told to let it go.
struct Proxy {
    port: u16,
    /// Told when a connection is held.
    held: Arc<Notify>,
    /// Lets the held connection go.
    release: Arc<Notify>,
}

async fn proxy(marker: &'static [u8]) -> Proxy {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let upstream = support::url()
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_string();
    let (held, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let (h, r) = (held.clone(), release.clone());
    tokio::spawn(async move {
        loop {
            let Ok((client, _)) = listener.accept().await else {
                return;
            };
            let server = tokio::net::TcpStream::connect(&upstream).await.unwrap();
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let (h, r) = (h.clone(), r.clone());
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    let n = match cr.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    if buf[..n].windows(marker.len()).any(|w| w == marker) {
                        h.notify_one();
                        r.notified().await;
                    }
                    if sw.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut sr, &mut cw).await;
            });
        }
    });
    Proxy {
        port,
        held,
        release,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_request_does_not_hold_up_the_overview() {
    let _turn = TURN.lock().await;
    let ns = support::namespace("webstuck");
    let p = proxy(b"stuckqueue").await;
    let admin = Admin::connect(&format!("redis://127.0.0.1:{}", p.port), &ns)
        .await
        .unwrap();
    let app = web::router(WebConfig::new(admin));
    // A first request, so the connections the router starts with are open.
    assert_eq!(get(&app, "/overview").await.status, 200);
    let slow = {
        let app = app.clone();
        tokio::spawn(async move { get(&app, "/queue?name=stuckqueue").await })
    };
    // Its Redis traffic is stuck in the proxy now.
    p.held.notified().await;
    let overview = tokio::time::timeout(Duration::from_secs(60), get(&app, "/overview"))
        .await
        .expect("the overview waited behind the stuck request");
    assert_eq!(overview.status, 200, "{}", overview.body);
    assert!(!slow.is_finished(), "the stuck request ended first");
    p.release.notify_one();
    let slow = tokio::time::timeout(Duration::from_secs(60), slow)
        .await
        .expect("the stuck request ends once let go")
        .unwrap();
    assert_eq!(slow.status, 200, "{}", slow.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_tabs_read_queue_names_a_batch_at_a_time() {
    let _turn = TURN.lock().await;
    let ns = support::namespace("webqnames");
    let k = Keys::new(ns.as_str());
    let mut con = support::con().await;
    // 200,000 names of empty queues (Resque never removes a queue's name), and one tracked
    // job in a queue among them.
    for chunk in 0..20 {
        let names: Vec<String> = (0..10_000)
            .map(|i| format!("gone{:06}", chunk * 10_000 + i))
            .collect();
        let _: () = con.sadd(k.queues(), names).await.unwrap();
    }
    let c = Client::connect(&support::url(), &ns).await.unwrap();
    let id = c
        .enqueue_class_tracked("live", "Job", &[json!(1)], Track::new())
        .await
        .unwrap();
    let app = web_common::router(&ns, |c| c).await;
    let mut path = "/jobs".to_string();
    let mut pages = 0;
    loop {
        let before = calls().await;
        let r = get(&app, &path).await;
        let d = spent(&before, &calls().await);
        assert_eq!(r.status, axum::http::StatusCode::OK, "{path}: {}", r.body);
        // A budget of 1,000 entries (names read count) and 250 names counted.
        let total: u64 = d.values().sum();
        assert!(total < 2_000, "{path} sent {total} commands: {d:?}");
        assert!(!d.contains_key("smembers") || d["smembers"] <= 2, "{d:?}");
        pages += 1;
        // 200,000 names are more than one page's budget wherever SSCAN's order (a per-server
        // hash seed) puts the live queue: the first page always stops early.
        assert!(
            pages > 1 || r.body.contains("stopped after"),
            "200,000 names read in one request: {}",
            r.body
        );
        if r.body.contains(id.as_str()) {
            break;
        }
        // Stopped early, with where to go on.
        assert!(r.body.contains("stopped after"), "{path}: {}", r.body);
        let at = r.body.find("jobs?from=").expect("a next link") + "jobs?from=".len();
        let from = &r.body[at..at + r.body[at..].find('"').expect("link end")];
        path = format!("/jobs?from={}", from.replace("&amp;", "&"));
        assert!(pages < 1_000, "the job was never listed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_of_held_sets_of_another_type_stops_nothing() {
    let _turn = TURN.lock().await;
    let ns = support::namespace("webheldbad");
    let k = Keys::new(ns.as_str());
    let mut con = support::con().await;
    let _: () = con.set(k.held_sets(), "not a zset").await.unwrap();
    let limit = Limit::concurrency("per-account", 1)
        .class("Sync")
        .key("acct-{args.0}");
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (g, ran) = (
        gate.clone(),
        Arc::new(std::sync::atomic::AtomicUsize::new(0)),
    );
    let r = ran.clone();
    let registry = Registry::new()
        .limit(limit)
        .handler("Sync", move |_ctx: JobContext| {
            let (g, r) = (g.clone(), r.clone());
            async move {
                g.acquire().await.expect("gate").forget();
                r.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(())
            }
        });
    let c = Client::connect(&support::url(), &ns).await.unwrap();
    for _ in 0..2 {
        c.enqueue_class_tracked("sync", "Sync", &[json!("A")], Track::new())
            .await
            .unwrap();
    }
    let w = support::start(
        support::builder(&ns, "sync")
            .registry(registry)
            .concurrency(2),
    )
    .await;
    // The second job is held all the same (the index is a reader's aid: its write cannot fail
    // the call that holds).
    let held = k.limit_held("per-account", Some("acct-A"));
    support::eventually(30, "the second job held", || {
        let held = held.clone();
        async move {
            let n: u64 = support::con().await.zcard(&held).await.unwrap();
            (n == 1).then_some(())
        }
    })
    .await;
    let app = web_common::router(&ns, |c| c).await;
    for page in ["/jobs", "/jobs?state=queued", "/limits", "/overview"] {
        let r = get(&app, page).await;
        assert_eq!(r.status, axum::http::StatusCode::OK, "{page}: {}", r.body);
    }
    // Released when the first ends, and run.
    gate.add_permits(2);
    support::eventually(30, "both jobs run", || {
        let ran = ran.clone();
        async move { (ran.load(std::sync::atomic::Ordering::SeqCst) == 2).then_some(()) }
    })
    .await;
    let kept: String = con.get(k.held_sets()).await.unwrap();
    assert_eq!(kept, "not a zset");
    support::stop(w).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_tabs_count_a_budget_of_workers() {
    let _turn = TURN.lock().await;
    let ns = support::namespace("webworkers");
    let k = Keys::new(ns.as_str());
    let mut con = support::con().await;
    // 5,000 worker ids (dead hosts never pruned), no record behind them.
    let ids: Vec<String> = (0..5_000).map(|i| format!("gone{i}:1:q")).collect();
    let _: () = con.sadd(k.workers(), ids).await.unwrap();
    let app = web_common::router(&ns, |c| c).await;
    let before = calls().await;
    let r = get(&app, "/jobs?state=queued").await;
    let d = spent(&before, &calls().await);
    assert_eq!(r.status, axum::http::StatusCode::OK, "{}", r.body);
    let strlen = d.get("strlen").copied().unwrap_or(0);
    assert!(strlen <= 300, "{strlen} workers counted: {d:?}");
    assert!(r.body.contains("data-partial=\"counts\""), "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workers_page_reads_a_page_of_workers() {
    let _turn = TURN.lock().await;
    let ns = support::namespace("webworkerspage");
    let k = Keys::new(ns.as_str());
    let mut con = support::con().await;
    // 5,000 worker ids (dead hosts never pruned), no record behind them.
    let ids: Vec<String> = (0..5_000).map(|i| format!("gone{i}:1:q")).collect();
    let _: () = con.sadd(k.workers(), &ids).await.unwrap();
    let app = web_common::router(&ns, |c| c).await;
    let mut path = "/workers".to_string();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..100 {
        let before = calls().await;
        let r = get(&app, &path).await;
        let d = spent(&before, &calls().await);
        assert_eq!(r.status, axum::http::StatusCode::OK, "{}", r.body);
        let total: u64 = d.values().sum();
        assert!(total <= 6_000, "{total} commands for {path}: {d:?}");
        for id in &ids {
            if r.body.contains(&format!("title=\"{id}\"")) {
                seen.insert(id.clone());
            }
        }
        match r.body.split("workers?from=").nth(1) {
            Some(rest) => {
                assert!(r.body.contains("data-partial=\"workers\""), "{}", r.body);
                let cursor: String = rest.chars().take_while(char::is_ascii_digit).collect();
                path = format!("/workers?from={cursor}");
            }
            None => break,
        }
    }
    // The "next" links reach every worker.
    assert_eq!(seen.len(), ids.len());
}
