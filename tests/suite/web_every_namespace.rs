//! The dashboard on any namespace (issue 40), over plain HTTP through the router in-process:
//! every page of an empty namespace and past the last page answers (no `5xx`); names that
//! are not UTF-8 and records that are no records are shown, named with their key, while the
//! rest of the page renders; and only the dashboard's own origin drives it (`Host`, then
//! `Origin`/`Referer` for a change, on top of the CSRF token).

use crate::support;
use crate::web_common;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use redis::AsyncCommands;
use support::Keys;
use web_common::{csrf, get, router, seed_bad_names, send};

/// Every page and tab, with the views past their last page.
pub const ROUTES: &[&str] = &[
    "/",
    "/overview",
    "/overview?range=1h",
    "/queues",
    "/workers",
    "/failed",
    "/failed?offset=1000",
    "/failed?group=class",
    "/delayed",
    "/delayed?offset=1000",
    "/recurring",
    "/jobs",
    "/jobs?state=queued",
    "/jobs?state=working",
    "/jobs?state=waiting",
    "/jobs?state=scheduled",
    "/jobs?state=retrying",
    "/jobs?state=completed",
    "/jobs?state=failed",
    "/jobs?state=killed",
    "/jobs?state=cancelled",
    "/jobs?offset=1000",
    "/batches",
    "/batches?offset=1000",
    "/waiting",
    "/waiting?offset=1000",
    "/limits",
    "/stats",
];

/// A batch id, a job id and a resque-status id of nothing.
const NO_BATCH: &str = "0123456789abcdef0123456789abcdef";

#[tokio::test]
async fn every_page_of_an_empty_namespace_and_past_the_end_answers() {
    let ns = support::namespace("webempty");
    let app = router(&ns, |c| c).await;
    for page in ROUTES {
        let r = get(&app, page).await;
        assert_eq!(r.status, StatusCode::OK, "{page}: {}", r.body);
    }
    let r = get(&app, "/batches").await;
    assert!(r.body.contains("No batches."), "{}", r.body);
    let r = get(&app, "/batches?offset=1000").await;
    assert!(r.body.contains("No more batches."), "{}", r.body);
    let r = get(&app, &format!("/batch?id={NO_BATCH}")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let r = get(&app, &format!("/job?id={NO_BATCH}")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
}

#[tokio::test]
async fn a_bad_name_or_record_is_shown_with_its_key_and_the_page_goes_on() {
    let ns = support::namespace("webbadnames");
    let mut con = support::con().await;
    let records = seed_bad_names(&mut con, &ns).await;
    let k = Keys::new(&ns);
    let app = router(&ns, |c| c).await;
    for page in ROUTES {
        let r = get(&app, page).await;
        assert_eq!(r.status, StatusCode::OK, "{page}: {}", r.body);
    }
    // Each name, escaped, on the pages that list it, with the key that holds it; the rest of
    // the page is there.
    let queue = format!(
        "<code>q-bad\\xff\\xfe</code> in <code>{}</code>",
        k.queues()
    );
    let worker = format!("<code>{}</code>", k.workers());
    let part = format!(
        "<code>part-bad\\xff\\xfe</code> in <code>{}</code>",
        k.limit_parts("lim")
    );
    let held_set = format!(
        "<code>{}bad\\xff\\xfe:held</code> in <code>{}</code>",
        k.limit_base("lim", Some("part-")),
        k.held_sets()
    );
    for (page, wanted, rest) in [
        ("/overview", queue.as_str(), "good"),
        ("/queues", queue.as_str(), "good"),
        ("/delayed", queue.as_str(), "Delayed"),
        ("/jobs", queue.as_str(), "Jobs"),
        ("/stats", queue.as_str(), "redis_version"),
        ("/overview", worker.as_str(), "good"),
        ("/limits", part.as_str(), "lim"),
        ("/jobs?state=queued", held_set.as_str(), "Jobs"),
    ] {
        let r = get(&app, page).await;
        assert!(
            r.body.contains("data-bad-names") && r.body.contains(wanted),
            "{page} should name {wanted}: {}",
            r.body
        );
        assert!(r.body.contains(rest), "{page}: {}", r.body);
    }
    for (page, key) in [
        ("/recurring", k.persistent_schedules()),
        ("/batches", k.batches()),
        ("/waiting", k.job_state("waiting")),
    ] {
        let r = get(&app, page).await;
        assert!(
            r.body.contains("bad\\xff\\xfe</code> in <code>") && r.body.contains(&key),
            "{page} should name {key}: {}",
            r.body
        );
    }
    for (id, key) in [
        (&records[0], k.resque_status(&records[0])),
        (&records[1], k.resque_status(&records[1])),
        (&records[2], k.job_record(&records[2])),
    ] {
        let r = get(&app, &format!("/job?id={id}")).await;
        assert_eq!(r.status, StatusCode::OK, "{id}: {}", r.body);
        assert!(
            r.body.contains("data-unreadable") && r.body.contains(&key),
            "{id}: {}",
            r.body
        );
    }
}

/// A request as a browser sends it: `Host`, and `Origin` when given.
fn request(method: Method, path: &str, host: &str, origin: Option<(&str, &str)>) -> Request<Body> {
    let mut b = Request::builder()
        .method(method.clone())
        .uri(path)
        .header(header::HOST, host);
    if let Some((name, value)) = origin {
        b = b.header(name, value);
    }
    if method == Method::POST {
        b = b.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    }
    b.body(Body::empty()).expect("request")
}

#[tokio::test]
async fn only_the_dashboards_own_origin_drives_it() {
    let ns = support::namespace("weborigin");
    let mut con = support::con().await;
    let k = Keys::new(&ns);
    let app = router(&ns, |c| c.host("ops.example.com")).await;
    let token = csrf(&get(&app, "/overview").await.body);
    let post = |host: &str, origin: Option<(&'static str, String)>| {
        let mut b = Request::builder()
            .method(Method::POST)
            .uri("/pause")
            .header(header::HOST, host)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        if let Some((n, v)) = origin {
            b = b.header(n, v);
        }
        b.body(Body::from(format!("_csrf={token}")))
            .expect("request")
    };
    // A foreign Host reads nothing (no page, no token): DNS rebinding.
    for host in ["evil.test:5678", "127.0.0.1.evil.test", "evil.test"] {
        for path in ["/overview", "/failed", "/api/live", "/assets/app.js"] {
            let r = send(&app, request(Method::GET, path, host, None)).await;
            assert_eq!(r.status, StatusCode::MISDIRECTED_REQUEST, "{host}{path}");
            assert!(!r.body.contains(&token), "{host}{path}");
        }
    }
    // Loopback names, and a name added (any port, or the one given).
    for host in [
        "127.0.0.1:5678",
        "localhost:80",
        "[::1]:5678",
        "ops.example.com",
    ] {
        let r = send(&app, request(Method::GET, "/overview", host, None)).await;
        assert_eq!(r.status, StatusCode::OK, "{host}");
    }
    // A change with the token but from another origin, or from none, is refused and changes
    // nothing.
    let host = "127.0.0.1:5678";
    for (h, origin) in [
        (
            "evil.test:5678",
            Some((header::ORIGIN.as_str(), "http://evil.test:5678".to_string())),
        ),
        (host, Some(("origin", "http://evil.test:5678".to_string()))),
        (host, Some(("origin", "null".to_string()))),
        (host, Some(("origin", "http://127.0.0.1:5679".to_string()))),
        (host, Some(("referer", "http://evil.test/x".to_string()))),
        (host, None),
    ] {
        let r = send(&app, post(h, origin.clone())).await;
        assert!(
            r.status == StatusCode::FORBIDDEN || r.status == StatusCode::MISDIRECTED_REQUEST,
            "{h} {origin:?}: {} {}",
            r.status,
            r.body
        );
        let paused: Option<String> = con.get(k.pause_all_workers()).await.expect("get");
        assert_eq!(paused, None, "{h} {origin:?} paused the fleet");
    }
    // The dashboard's own page (Origin, or Referer without Origin) changes it.
    let r = send(
        &app,
        post(host, Some(("referer", format!("http://{host}/overview")))),
    )
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    let paused: Option<String> = con.get(k.pause_all_workers()).await.expect("get");
    assert!(paused.is_some());
    let _: () = con.del(k.pause_all_workers()).await.expect("del");
    let r = send(
        &app,
        post(
            "ops.example.com",
            Some(("origin", "https://ops.example.com".to_string())),
        ),
    )
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
}

#[tokio::test]
async fn pages_read_a_fixed_budget_of_keys_and_say_when_they_stopped_early() {
    let ns = support::namespace("webbudget");
    let mut con = support::con().await;
    let k = Keys::new(&ns);
    // 30,000 empty queue names (Resque never removes one), then a queue with a job whose name
    // sorts last; a keyed limit of 25,000 partitions with nothing in use.
    let limit = serde_json::json!({"name": "per_account", "kind": "concurrency", "limit": 5,
        "key": "acct-{args.0}"})
    .to_string();
    let mut p = redis::pipe();
    for chunk in (0..30_000).collect::<Vec<_>>().chunks(1_000) {
        let names: Vec<String> = chunk.iter().map(|i| format!("empty-{i:05}")).collect();
        p.sadd(k.queues(), names).ignore();
    }
    for chunk in (0..25_000).collect::<Vec<_>>().chunks(1_000) {
        let names: Vec<String> = chunk.iter().map(|i| format!("acct-{i:05}")).collect();
        p.sadd(k.limit_parts("per_account"), names).ignore();
    }
    p.hset(k.limits_declared(), "per_account", limit).ignore();
    p.sadd(k.queues(), "zz-last").ignore();
    // A tracked job (the Jobs page lists tracked jobs): its record and its payload's id.
    let id = "44444444444444444444444444444444";
    p.hset_multiple(
        k.job_record(id),
        &[
            ("state", "queued"),
            ("queue", "zz-last"),
            ("class", "LastOfAll"),
        ],
    )
    .ignore();
    p.rpush(
        k.queue("zz-last"),
        format!(r#"{{"class":"LastOfAll","args":[],"resq_id":"{id}"}}"#),
    )
    .ignore();
    let () = p.query_async(&mut con).await.expect("seed");
    let app = router(&ns, |c| c).await;
    for (page, mark) in [
        ("/overview", "data-partial=\"queues\""),
        ("/queues", "data-partial=\"queues\""),
        ("/delayed", "data-partial=\"queues\""),
        ("/stats", "data-partial=\"queues\""),
        ("/jobs", "data-partial=\"counts\""),
        ("/limits", "data-partial=\"partitions\""),
    ] {
        let r = get(&app, page).await;
        assert_eq!(r.status, StatusCode::OK, "{page}: {}", r.body);
        assert!(
            r.body.contains(mark),
            "{page} should say it stopped early: {}",
            r.body
        );
    }
    // Any queue is reached by filtering (matched by Redis).
    let r = get(&app, "/queues?q=zz-last").await;
    assert!(r.body.contains("queue?name=zz-last"), "{}", r.body);
    // The queued listing stops at its budget (empty queues count) and links on; following
    // the links reaches the job behind the empty queues.
    let mut url = "/jobs?state=queued".to_string();
    let mut found = false;
    // (A page looks at 1,000 entries: about 30 pages.)
    for page in 0..100 {
        let r = get(&app, &url).await;
        assert_eq!(r.status, StatusCode::OK, "{url}: {}", r.body);
        // 30,000 empty queues are more than one page's budget, wherever SSCAN's order (a
        // per-server hash seed) puts the one with the job: the first page always stops early.
        if page == 0 {
            assert!(
                r.body.contains("stopped after looking at its budget"),
                "the first page read every empty queue: {}",
                r.body
            );
        }
        if r.body.contains("LastOfAll") {
            found = true;
            break;
        }
        assert!(
            r.body.contains("stopped after looking at its budget"),
            "{url}: {}",
            r.body
        );
        let marker = "href=\"./jobs?";
        let next = r
            .body
            .match_indices(marker)
            .map(|(i, _)| &r.body[i + marker.len()..])
            .find_map(|rest| {
                let q = &rest[..rest.find('"')?];
                q.contains("from=").then(|| q.replace("&amp;", "&"))
            })
            .unwrap_or_else(|| panic!("no next link: {}", r.body));
        url = format!("/jobs?{next}");
    }
    assert!(found, "the job behind 30,000 empty queues was not reached");
}
