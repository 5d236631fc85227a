//! The dashboard over plain HTTP (the router called in-process, no browser): every route's
//! status codes and security headers, escaping of hostile bytes from Redis, authentication,
//! CSRF, read-only mode, and that every action does to Redis what Ruby's resque-web or
//! resque-scheduler would (golden fixtures 08, 09, 14 → 15).

mod admin_common;
mod keydump;
mod support;
mod web_common;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use redis::AsyncCommands;
use resq::admin::element_id;
use resq::web::{Auth, WebConfig};
use support::Keys;
use web_common::{assert_escaped, csrf, forms, get, post, router, send};

/// Every page the dashboard serves.
const PAGES: &[&str] = &[
    "/",
    "/overview",
    "/overview?range=1h",
    "/overview?range=90d",
    "/queues",
    "/queues?q=def",
    "/queue?name=default",
    "/workers",
    "/workers?busy=1",
    "/failed",
    "/failed?q=boom",
    "/failed?class=Plain",
    "/failed?group=class",
    "/failed?group=exception",
    "/failed?group=queue",
    "/delayed",
    "/recurring",
    "/jobs",
    "/jobs?state=working",
    "/jobs?state=cancelled&queue=q&class=C&tag=t&offset=50",
    "/job?id=ba69034b39c05d28a5403ac10e276e79",
    "/limits",
    "/stats",
];

#[tokio::test]
async fn every_page_answers_with_security_headers_and_escapes_redis_bytes() {
    let ns = support::namespace("webpages");
    let mut con = support::con().await;
    web_common::seed_hostile(&mut con, &ns).await;
    let app = router(&ns, |c| c).await;
    let hostile_queue = format!("/queue?name={}", web_common::enc(web_common::QUOTE_BREAK));
    let first = get(&app, "/failed").await;
    let row = &forms(&first.body, "failed/retry")[0];
    let detail = format!("/failure?id={}&at={}", row["id"], row["at"]);
    for page in PAGES
        .iter()
        .copied()
        .chain([hostile_queue.as_str(), detail.as_str()])
    {
        let r = get(&app, page).await;
        assert_eq!(r.status, StatusCode::OK, "{page}: {}", r.body);
        let h = |name: header::HeaderName| {
            r.headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        };
        let csp = h(header::CONTENT_SECURITY_POLICY);
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
            "{page}: {csp}"
        );
        assert!(csp.contains("frame-ancestors 'none'"), "{page}: {csp}");
        assert_eq!(h(header::X_FRAME_OPTIONS), "DENY", "{page}");
        assert_eq!(h(header::X_CONTENT_TYPE_OPTIONS), "nosniff", "{page}");
        assert!(h(header::CONTENT_TYPE).starts_with("text/html"), "{page}");
        assert_escaped(&r.body, page);
        assert!(!r.body.contains("<script>"), "{page}: inline script");
        assert!(!r.body.contains(" style=\""), "{page}: inline style (CSP)");
    }
    // The hostile strings are shown, as text.
    let failed = get(&app, "/failed").await.body;
    assert!(failed.contains("&lt;script&gt;window.__pwned=1&lt;/script&gt;"));
    assert!(
        failed.contains("&lt;script&gt;window.__pwned=3&lt;/script&gt; &amp; &quot;quoted&quot;"),
        "{failed}"
    );
    // A limit on a hostile class, covering the hostile worker: shown as text, and named.
    let limits = get(&app, "/limits").await.body;
    assert!(
        limits.contains("class=&lt;script&gt;window.__pwned=1&lt;/script&gt;")
            && limits.contains("data-foreign-workers=\"hostile\"")
            && limits.contains("1 partitions in use"),
        "{limits}"
    );
    let live = get(&app, "/api/live").await;
    assert_eq!(live.status, StatusCode::OK);
    let v: serde_json::Value = serde_json::from_str(&live.body).unwrap();
    assert_eq!(v["processed"], 10);
    assert_eq!(v["failed_entries"], 2);
    for (asset, kind) in [
        ("app.css", "text/css"),
        ("app.js", "text/javascript"),
        ("favicon.svg", "image/svg+xml"),
    ] {
        let r = get(&app, &format!("/assets/{asset}")).await;
        assert_eq!(r.status, StatusCode::OK);
        assert!(r.headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with(kind));
    }
}

#[tokio::test]
async fn wrong_routes_methods_and_parameters_are_refused() {
    let ns = support::namespace("webcodes");
    let app = router(&ns, |c| c).await;
    for (path, want) in [
        ("/nope", StatusCode::NOT_FOUND),
        ("/assets/nope.js", StatusCode::NOT_FOUND),
        ("/queue", StatusCode::BAD_REQUEST),
        ("/queue?name=q&offset=x", StatusCode::BAD_REQUEST),
        ("/failure?id=zz", StatusCode::BAD_REQUEST),
        ("/failure?id=0123456789abcdef", StatusCode::NOT_FOUND),
        ("/failed?group=worker", StatusCode::BAD_REQUEST),
        ("/failed?before=-1", StatusCode::BAD_REQUEST),
        ("/job?id=none", StatusCode::BAD_REQUEST),
        ("/job", StatusCode::BAD_REQUEST),
        (
            "/job?id=0123456789abcdef0123456789abcdef",
            StatusCode::NOT_FOUND,
        ),
        ("/jobs?state=lost", StatusCode::BAD_REQUEST),
        ("/jobs?offset=x", StatusCode::BAD_REQUEST),
        ("/jobs/cancel", StatusCode::METHOD_NOT_ALLOWED),
        ("/failed/retry", StatusCode::METHOD_NOT_ALLOWED),
    ] {
        let r = get(&app, path).await;
        assert_eq!(r.status, want, "{path}: {}", r.body);
        assert!(r.headers.contains_key(header::CONTENT_SECURITY_POLICY));
    }
    let r = send(
        &app,
        Request::builder()
            .method(Method::DELETE)
            .uri("/failed")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn authentication_is_enforced_on_every_route() {
    let ns = support::namespace("webauth");
    let app = router(&ns, |c| {
        c.auth(
            Auth::none()
                .with_basic("ops", "s3cret")
                .with_bearer("tok-123"),
        )
    })
    .await;
    let with = |auth: Option<&str>, path: &str| {
        let mut b = Request::get(path);
        if let Some(a) = auth {
            b = b.header(header::AUTHORIZATION, a);
        }
        b.body(Body::empty()).unwrap()
    };
    for path in ["/", "/failed", "/api/live", "/assets/app.js", "/nope"] {
        let r = send(&app, with(None, path)).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{path}");
        assert!(r.headers[header::WWW_AUTHENTICATE]
            .to_str()
            .unwrap()
            .starts_with("Basic"));
        assert!(!r.body.contains("s3cret") && !r.body.contains("tok-123"));
        // base64("ops:wrong")
        let r = send(&app, with(Some("Basic b3BzOndyb25n"), path)).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{path}");
        let r = send(&app, with(Some("Bearer tok-124"), path)).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{path}");
    }
    // base64("ops:s3cret")
    let r = send(&app, with(Some("Basic b3BzOnMzY3JldA=="), "/failed")).await;
    assert_eq!(r.status, StatusCode::OK);
    let r = send(&app, with(Some("Bearer tok-123"), "/api/live")).await;
    assert_eq!(r.status, StatusCode::OK);
    // A POST without credentials is refused before anything else is looked at.
    let r = post(&app, "/failed/clear", &[("_csrf", "x")]).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn every_post_needs_the_csrf_token_and_changes_nothing_without_it() {
    let ns = support::namespace("webcsrf");
    let mut con = support::con().await;
    web_common::seed_hostile(&mut con, &ns).await;
    let k = Keys::new(ns.as_str());
    let before = keydump::dump(&mut con, &ns).await;
    let app = router(&ns, |c| c).await;
    let token = csrf(&get(&app, "/failed").await.body);
    for action in [
        "/pause",
        "/resume",
        "/queue/delete",
        "/queue/run",
        "/queue/clear",
        "/queue/remove",
        "/failed/retry",
        "/failed/remove",
        "/failed/bulk",
        "/failed/clear",
        "/delayed/run",
        "/delayed/delete",
        "/recurring/enqueue",
        "/recurring/delete",
        "/jobs/cancel",
    ] {
        let fields = [("name", "default"), ("action", "remove"), ("id", "x")];
        let r = post(&app, action, &fields).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{action} without token");
        let mut wrong = fields.to_vec();
        wrong.push(("_csrf", "0000"));
        let r = post(&app, action, &wrong).await;
        assert_eq!(
            r.status,
            StatusCode::FORBIDDEN,
            "{action} with a wrong token"
        );
        assert!(r.body.contains("CSRF"), "{action}: {}", r.body);
    }
    keydump::assert_same(&keydump::dump(&mut con, &ns).await, &before);
    // With the token, the same request goes through.
    let r = post(
        &app,
        "/queue/clear",
        &[("name", "default"), ("_csrf", &token)],
    )
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    let n: u64 = con.llen(k.queue("default")).await.unwrap();
    assert_eq!(n, 0);
}

#[tokio::test]
async fn read_only_mode_shows_no_action_and_refuses_every_post() {
    let ns = support::namespace("webro");
    let mut con = support::con().await;
    web_common::seed_hostile(&mut con, &ns).await;
    let rw = router(&ns, |c| c).await;
    let token = csrf(&get(&rw, "/failed").await.body);
    let ro = router(&ns, |c| c.read_only(true)).await;
    for page in PAGES {
        let r = get(&ro, page).await;
        assert_eq!(r.status, StatusCode::OK, "{page}");
        assert!(
            !r.body.contains("method=\"post\""),
            "{page} offers an action"
        );
    }
    let r = post(&ro, "/failed/clear", &[("_csrf", &token)]).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let n: u64 = con.llen(Keys::new(ns.as_str()).failed()).await.unwrap();
    assert_eq!(n, 2);
}

/// Replaces the value of `"retried_at":"…"` so entries compare without the volatile time.
fn mask_retried(s: &str) -> String {
    match s.find(r#""retried_at":""#) {
        Some(i) => {
            let start = i + r#""retried_at":""#.len();
            let end = start + s[start..].find('"').unwrap_or(0);
            format!("{}T{}", &s[..start], &s[end..])
        }
        None => s.to_string(),
    }
}

#[tokio::test]
async fn retry_and_remove_through_the_page_match_rubys_requeue_and_remove() {
    let mut con = support::con().await;
    // Retry (fixture 08 = Ruby's Failure.requeue(0) on 07's list).
    let ns = support::namespace("webretry");
    let f = admin_common::load_fixture(
        &mut con,
        "resque/08_failure_requeue.json",
        "keys_before",
        &ns,
    )
    .await;
    let k = Keys::new(ns.as_str());
    let app = router(&ns, |c| c).await;
    let page = get(&app, "/failed").await.body;
    let first: Vec<String> = con.lrange(k.failed(), 0, 0).await.unwrap();
    let id = element_id(first[0].as_bytes());
    let form = forms(&page, "failed/retry")
        .into_iter()
        .find(|f| f["id"] == id)
        .expect("a retry form for entry 0");
    let fields: Vec<(&str, &str)> = form.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let r = post(&app, "/failed/retry", &fields).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(r.location(), "../failed?msg=retried&n=1");
    let got: Vec<String> = con.lrange(k.failed(), 0, -1).await.unwrap();
    let want = admin_common::fixture_list(&f, "keys", "failed");
    assert_eq!(
        got.iter().map(|s| mask_retried(s)).collect::<Vec<_>>(),
        want.iter().map(|s| mask_retried(s)).collect::<Vec<_>>()
    );
    assert!(got[0].contains(r#""retried_at":""#) && got[0].contains(" UTC\"}"));
    let queued: Vec<String> = con.lrange(k.queue("failing"), 0, -1).await.unwrap();
    assert_eq!(
        queued,
        admin_common::fixture_list(&f, "keys", "queue:failing")
    );
    // The page now marks it retried.
    assert!(get(&app, "/failed").await.body.contains("retried"));

    // Remove (fixture 09 = Ruby's Failure.remove(0)).
    let ns = support::namespace("webremove");
    let f = admin_common::load_fixture(
        &mut con,
        "resque/09_failure_remove.json",
        "keys_before",
        &ns,
    )
    .await;
    let k = Keys::new(ns.as_str());
    let app = router(&ns, |c| c).await;
    let page = get(&app, "/failed").await.body;
    let first: Vec<String> = con.lrange(k.failed(), 0, 0).await.unwrap();
    let id = element_id(first[0].as_bytes());
    let form = forms(&page, "failed/remove")
        .into_iter()
        .find(|f| f["id"] == id)
        .expect("a remove form for entry 0");
    let fields: Vec<(&str, &str)> = form.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let r = post(&app, "/failed/remove", &fields).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    let got: Vec<String> = con.lrange(k.failed(), 0, -1).await.unwrap();
    assert_eq!(got, admin_common::fixture_list(&f, "keys", "failed"));
    // A second remove of the same id finds nothing and says so.
    let r = post(&app, "/failed/remove", &fields).await;
    assert!(r.location().ends_with("msg=gone"), "{}", r.location());
}

#[tokio::test]
async fn actions_by_id_hit_the_right_entry_after_the_list_moved() {
    let ns = support::namespace("webmove");
    let mut con = support::con().await;
    let k = Keys::new(ns.as_str());
    for i in 0..40 {
        let e = web_common::failure(&format!("C{i}"), &format!("[{i}]"), "E", "e", "q");
        let () = con.rpush(k.failed(), e).await.unwrap();
    }
    let app = router(&ns, |c| c).await;
    let page = get(&app, "/failed").await.body;
    // Entry #30 as the page showed it.
    let form = forms(&page, "failed/retry")
        .into_iter()
        .find(|f| f["at"] == "30")
        .expect("entry 30 on the first page");
    // The list moves: five entries before it go, new failures arrive behind it.
    for _ in 0..5 {
        let _: Option<String> = con.lpop(k.failed(), None).await.unwrap();
    }
    for i in 40..45 {
        let e = web_common::failure(&format!("C{i}"), "[0]", "E", "e", "q");
        let () = con.rpush(k.failed(), e).await.unwrap();
    }
    let fields: Vec<(&str, &str)> = form.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let r = post(&app, "/failed/retry", &fields).await;
    assert!(r.location().contains("msg=retried"), "{}", r.location());
    let all: Vec<String> = con.lrange(k.failed(), 0, -1).await.unwrap();
    let retried: Vec<&String> = all.iter().filter(|e| e.contains("retried_at")).collect();
    assert_eq!(retried.len(), 1);
    assert!(retried[0].contains(r#""class":"C30""#), "{}", retried[0]);
    assert_eq!(all.iter().position(|e| e.contains("retried_at")), Some(25));
    let queued: Vec<String> = con.lrange(k.queue("q"), 0, -1).await.unwrap();
    assert_eq!(queued, vec![r#"{"class":"C30","args":[30]}"#.to_string()]);
}

#[tokio::test]
async fn filters_search_and_groups_are_urls_and_bounded() {
    let ns = support::namespace("websearch");
    let mut con = support::con().await;
    let k = Keys::new(ns.as_str());
    let mut p = redis::pipe();
    for i in 0..300 {
        let (class, exc, q) = match i % 3 {
            0 => ("Mailer", "Net::ReadTimeout", "mail"),
            1 => ("Billing::Charge", "Stripe::CardError", "billing"),
            _ => ("Report", "RuntimeError", "reports"),
        };
        let err = if i == 7 { "needle café" } else { "boom" };
        p.rpush(
            k.failed(),
            web_common::failure(class, &format!("[{i}]"), exc, err, q),
        );
    }
    let () = p.query_async(&mut con).await.unwrap();
    let app = router(&ns, |c| c.search_budget(120)).await;
    // Exact class filter: only that class, newest first, 25 per page.
    let r = get(&app, "/failed?class=Billing%3A%3ACharge").await;
    assert_eq!(r.status, StatusCode::OK);
    let rows = forms(&r.body, "failed/retry");
    assert_eq!(rows.len(), 25);
    assert!(rows.iter().all(|f| {
        let at: usize = f["at"].parse().unwrap();
        at % 3 == 1
    }));
    assert_eq!(rows[0]["at"], "298");
    assert!(
        r.body.contains("before=226"),
        "older link continues after the last match"
    );
    // Substring search (decoded text, case-insensitive), beyond the budget: it says where it
    // stopped and links on.
    let r = get(&app, "/failed?q=NEEDLE").await;
    assert_eq!(forms(&r.body, "failed/retry").len(), 0);
    assert!(
        r.body.contains("Stopped at the search budget of 120"),
        "{}",
        r.body
    );
    assert!(r.body.contains("q=NEEDLE&amp;before=180"), "{}", r.body);
    let r = get(&app, "/failed?q=NEEDLE&before=20").await;
    let rows = forms(&r.body, "failed/retry");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["at"], "7");
    let r = get(&app, "/failed?q=caf%C3%A9").await;
    assert!(r.body.contains("Stopped at the search budget"));
    // Groups: counts over the whole list (the first visit may still be counting).
    let counted = support::eventually(10, "failure counts", || {
        let app = app.clone();
        async move {
            let body = get(&app, "/failed?group=exception").await.body;
            body.contains("Counts over all 300 entries").then_some(body)
        }
    })
    .await;
    assert!(counted.contains("Stripe::CardError"));
    assert!(counted.contains("failed?exception=Stripe%3A%3ACardError"));
}

#[tokio::test]
async fn bulk_actions_cover_the_whole_filter_while_failures_keep_arriving() {
    let ns = support::namespace("webbulk");
    let mut con = support::con().await;
    let k = Keys::new(ns.as_str());
    let mut p = redis::pipe();
    for i in 0..2_500 {
        let class = if i % 2 == 0 { "Even" } else { "Odd" };
        p.rpush(
            k.failed(),
            web_common::failure(class, &format!("[{i}]"), "E", "e", "q"),
        );
    }
    let () = p.query_async(&mut con).await.unwrap();
    let app = router(&ns, |c| c).await;
    let token = csrf(&get(&app, "/failed").await.body);
    // A worker keeps pushing failures of another class meanwhile.
    let url = support::url();
    let key = k.failed();
    let pusher = tokio::spawn(async move {
        let mut c = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        for i in 0..300 {
            let e = web_common::failure("Late", &format!("[{i}]"), "E", "e", "q");
            let () = c.rpush(&key, e).await.unwrap();
            tokio::task::yield_now().await;
        }
    });
    let r = post(
        &app,
        "/failed/bulk",
        &[("_csrf", &token), ("action", "remove"), ("class", "Odd")],
    )
    .await;
    assert_eq!(r.location(), "../failed?class=Odd&msg=removed&n=1250&s=0");
    let r = post(
        &app,
        "/failed/bulk",
        &[("_csrf", &token), ("action", "retry"), ("class", "Even")],
    )
    .await;
    assert!(
        r.location().contains("msg=retried&n=1250"),
        "{}",
        r.location()
    );
    pusher.await.unwrap();
    let all: Vec<String> = con.lrange(k.failed(), 0, -1).await.unwrap();
    assert_eq!(all.len(), 1_250 + 300);
    assert!(!all.iter().any(|e| e.contains(r#""class":"Odd""#)));
    assert_eq!(
        all.iter().filter(|e| e.contains("retried_at")).count(),
        1_250
    );
    assert!(all
        .iter()
        .filter(|e| e.contains(r#""class":"Late""#))
        .all(|e| !e.contains("retried_at")));
    let queued: u64 = con.llen(k.queue("q")).await.unwrap();
    assert_eq!(queued, 1_250);
}

#[tokio::test]
async fn queue_jobs_are_deleted_by_their_bytes_and_queues_cleared() {
    let ns = support::namespace("webqueue");
    let mut con = support::con().await;
    let k = Keys::new(ns.as_str());
    let jobs: Vec<String> = (0..60)
        .map(|i| format!(r#"{{"class":"J","args":[{i}]}}"#))
        .collect();
    let () = con.sadd(k.queues(), "q").await.unwrap();
    let () = con.rpush(k.queue("q"), &jobs).await.unwrap();
    let app = router(&ns, |c| c).await;
    let page = get(&app, "/queue?name=q&offset=25").await.body;
    let form = forms(&page, "queue/delete")
        .into_iter()
        .find(|f| f["at"] == "30")
        .expect("job 30 on page 2");
    assert_eq!(form["id"], element_id(jobs[30].as_bytes()));
    // Workers take ten jobs from the head meanwhile.
    let _: Vec<String> = con
        .lpop(k.queue("q"), std::num::NonZeroUsize::new(10))
        .await
        .unwrap();
    let fields: Vec<(&str, &str)> = form.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let r = post(&app, "/queue/delete", &fields).await;
    assert_eq!(r.location(), "../queue?name=q&offset=25&msg=deleted");
    let left: Vec<String> = con.lrange(k.queue("q"), 0, -1).await.unwrap();
    assert_eq!(left.len(), 49);
    assert!(!left.contains(&jobs[30]));
    let r = post(&app, "/queue/delete", &fields).await;
    assert!(r.location().ends_with("msg=gone"));
    // Clear keeps the queue listed; remove (resque-web's) unlists it.
    let token = csrf(&page);
    let r = post(&app, "/queue/clear", &[("_csrf", &token), ("name", "q")]).await;
    assert_eq!(r.location(), "../queue?name=q&msg=cleared&n=49");
    let listed: bool = con.sismember(k.queues(), "q").await.unwrap();
    assert!(listed);
    let r = post(&app, "/queue/remove", &[("_csrf", &token), ("name", "q")]).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    let listed: bool = con.sismember(k.queues(), "q").await.unwrap();
    assert!(!listed);
}

#[tokio::test]
async fn delayed_run_now_matches_resque_scheduler_and_delete_cleans_up() {
    let ns = support::namespace("webdelayed");
    let mut con = support::con().await;
    let f =
        admin_common::load_fixture(&mut con, "resque/14_scheduler_delayed.json", "keys", &ns).await;
    let app = router(&ns, |c| c).await;
    let page = get(&app, "/delayed").await.body;
    assert!(page.contains("Jobs::Nested") && page.contains("unicode ✓"));
    let due_now = r#"{"class":"SimpleJob","args":["due-now"],"queue":"default"}"#;
    let form = forms(&page, "delayed/run")
        .into_iter()
        .find(|f| f["id"] == element_id(due_now.as_bytes()))
        .expect("run-now form of the due item");
    let fields: Vec<(&str, &str)> = form.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let r = post(&app, "/delayed/run", &fields).await;
    assert_eq!(r.location(), "../delayed?offset=0&msg=enqueued");
    // Fixture 15: what resque-scheduler's handle_delayed_items left after moving that item
    // (minus its master lock, which a web action does not take).
    let f15 = support::fixture("resque/15_scheduler_after_handle_delayed.json");
    let mut want = keydump::expected(&f15, "keys", &[]);
    want.retain(|key, _| !key.contains("master_lock"));
    let got = keydump::dump(&mut con, &ns).await;
    keydump::assert_same(&got, &want);
    drop(f);
    // Delete one of the two identical {"x":1} items: the other keeps the reverse index.
    let k = Keys::new(ns.as_str());
    let x1 = r#"{"class":"SimpleJob","args":[{"x":1}],"queue":"default"}"#;
    let page = get(&app, "/delayed").await.body;
    let form = forms(&page, "delayed/delete")
        .into_iter()
        .find(|f| f["id"] == element_id(x1.as_bytes()))
        .expect("delete form");
    let fields: Vec<(&str, &str)> = form.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let r = post(&app, "/delayed/delete", &fields).await;
    assert!(r.location().ends_with("msg=deleted"));
    let bucket: Vec<String> = con
        .lrange(k.delayed_bucket(1_795_296_426), 0, -1)
        .await
        .unwrap();
    assert_eq!(bucket.len(), 2);
    let members: Vec<String> = con.smembers(k.timestamps(x1)).await.unwrap();
    assert_eq!(members, vec!["delayed:1795296426".to_string()]);
    let r = post(&app, "/delayed/delete", &fields).await;
    assert!(r.location().ends_with("msg=deleted"));
    let exists: bool = con.exists(k.timestamps(x1)).await.unwrap();
    assert!(!exists, "last copy gone: reverse index cleaned");
    // The last item of a bucket takes the bucket and its timestamp with it.
    let nested = r#"{"class":"Jobs::Nested","args":["unicode ✓",null,1.5],"queue":"default"}"#;
    let form = forms(&get(&app, "/delayed").await.body, "delayed/delete")
        .into_iter()
        .find(|f| f["id"] == element_id(nested.as_bytes()))
        .expect("delete form");
    let fields: Vec<(&str, &str)> = form.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    post(&app, "/delayed/delete", &fields).await;
    let exists: bool = con.exists(k.delayed_bucket(1_795_296_486)).await.unwrap();
    assert!(!exists);
    let score: Option<f64> = con
        .zscore(k.delayed_schedule(), 1_795_296_486)
        .await
        .unwrap();
    assert_eq!(score, None);
}

#[tokio::test]
async fn recurring_enqueue_now() {
    let ns = support::namespace("webrecur");
    let mut con = support::con().await;
    let k = Keys::new(ns.as_str());
    let () = con
        .hset(
            k.persistent_schedules(),
            "nightly",
            r#"{"class":"NightlyReport","queue":"reports","args":[7],"cron":"0 3 * * *"}"#,
        )
        .await
        .unwrap();
    let app = router(&ns, |c| c).await;
    let page = get(&app, "/recurring").await.body;
    assert!(page.contains("cron 0 3 * * * (UTC)"));
    let form = &forms(&page, "recurring/enqueue")[0];
    let fields: Vec<(&str, &str)> = form.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let r = post(&app, "/recurring/enqueue", &fields).await;
    assert_eq!(r.location(), "../recurring?msg=enqueued");
    let queued: Vec<String> = con.lrange(k.queue("reports"), 0, -1).await.unwrap();
    assert_eq!(
        queued,
        vec![r#"{"class":"NightlyReport","args":[7]}"#.to_string()]
    );
}

/// The ids a jobs page links to (`job?id=…`), in page order.
fn job_links(html: &str) -> Vec<String> {
    html.split("href=\"./job?id=")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .map(str::to_string)
        .collect()
}

/// The `from=` of a page's "next ›" link (as the link carries it, HTML-escaped).
fn next_link(html: &str) -> Option<String> {
    let end = html.find("\">next ›</a>")?;
    let start = html[..end].rfind("href=\"")? + 6;
    Some(
        html[start..end]
            .replace("&amp;", "&")
            .trim_start_matches("./")
            .to_string(),
    )
}

/// The count a state tab shows.
fn tab_count(html: &str, state: &str) -> Option<u64> {
    let marker = format!(">{state}</span> <span class=\"count\">");
    let i = html.find(&marker)? + marker.len();
    html[i..]
        .split('<')
        .next()?
        .replace('\u{202f}', "")
        .parse()
        .ok()
}

#[tokio::test]
async fn tracked_jobs_are_listed_by_state_filtered_and_shown_whole() {
    let ns = support::namespace("webjobs");
    let mut con = support::con().await;
    let t = web_common::seed_tracked(&ns).await;
    let ruby = web_common::seed_ruby_status(&mut con, &ns).await;
    let app = router(&ns, |c| c).await;
    let page = get(&app, "/jobs").await;
    assert_eq!(page.status, StatusCode::OK);
    let body = &page.body;
    web_common::assert_escaped(body, "/jobs");
    // A tab per state with its count: where jobs are (the Ruby worker's job is working), and
    // resq's indexes; retries count as scheduled.
    for (state, n) in [
        ("queued", Some(1)),
        ("scheduled", Some(1)),
        ("waiting", Some(0)),
        ("working", Some(1)),
        ("retrying", None),
        ("completed", Some(1)),
        ("failed", Some(1)),
        ("killed", Some(0)),
        ("cancelled", Some(1)),
    ] {
        assert_eq!(tab_count(body, state), n, "{state}: {body}");
    }
    assert!(body.contains(">all</a>"), "{body}");
    assert!(body.contains("tracked or not"), "{body}");
    let mut listed = job_links(body);
    listed.sort();
    let mut all: Vec<String> = [
        &t.completed,
        &t.failed,
        &t.cancelled,
        &t.queued,
        &t.scheduled,
    ]
    .iter()
    .map(|i| i.to_string())
    .chain([ruby.clone()])
    .collect();
    all.sort();
    assert_eq!(listed, all);
    // The Ruby status shows by its name; the failure's hostile error as text.
    assert!(
        body.contains("MyStatusJob({&quot;num&quot;=&gt;10})"),
        "{body}"
    );
    assert!(
        body.contains("&lt;script&gt;window.__pwned=3&lt;/script&gt; &amp; &quot;quoted&quot;"),
        "{body}"
    );
    assert!(
        body.contains("<progress max=\"100\" value=\"100\">"),
        "{body}"
    );
    assert!(
        body.contains("<progress max=\"100\" value=\"30\">"),
        "{body}"
    );
    // Cancel is offered for jobs that have not finished (and the Ruby one, working).
    let mut cancellable: Vec<String> = forms(body, "jobs/cancel")
        .iter()
        .map(|f| f["id"].clone())
        .collect();
    cancellable.sort();
    let mut want = vec![t.queued.to_string(), t.scheduled.to_string(), ruby.clone()];
    want.sort();
    assert_eq!(cancellable, want);

    // Filters: by state (the tabs), queue, class, tag; a tab keeps the other filters.
    for (q, want) in [
        ("state=completed", vec![&t.completed]),
        ("state=cancelled", vec![&t.cancelled]),
        ("tag=eu", vec![&t.completed]),
        ("class=Doomed", vec![&t.failed]),
        ("queue=later&state=scheduled", vec![&t.scheduled]),
        ("state=retrying", vec![]),
    ] {
        let r = get(&app, &format!("/jobs?{q}")).await;
        assert_eq!(r.status, StatusCode::OK, "{q}");
        let want: Vec<String> = want.iter().map(|i| i.to_string()).collect();
        assert_eq!(job_links(&r.body), want, "{q}");
    }
    let working = get(&app, "/jobs?state=working").await.body;
    assert_eq!(job_links(&working), std::slice::from_ref(&ruby));
    let later = get(&app, "/jobs?queue=later").await.body;
    assert!(
        later.contains("href=\"./jobs?state=queued&amp;queue=later\""),
        "{later}"
    );
    assert!(
        later.contains("value=\"later\""),
        "the filter form shows it"
    );

    // One job whole: progress, result (escaped), options, worker, attempts, tags, history.
    let r = get(&app, &format!("/job?id={}", t.completed)).await;
    assert_eq!(r.status, StatusCode::OK);
    let job = &r.body;
    web_common::assert_escaped(job, "/job");
    assert!(
        job.contains("<span class=\"badge completed\">completed</span>"),
        "{job}"
    );
    assert!(
        job.contains("<progress max=\"100\" value=\"100\">"),
        "{job}"
    );
    assert!(job.contains(" (1 of 2)"), "{job}");
    assert!(
        job.contains("&quot;html&quot;: &quot;&lt;script&gt;window.__pwned=1&lt;/script&gt;&quot;"),
        "the result, pretty and escaped: {job}"
    );
    assert!(job.contains("No options."), "{job}");
    assert!(job.contains("(resq's own record, a hash)"), "{job}");
    assert!(job.contains("<dt>attempts</dt><dd>1</dd>"), "{job}");
    assert!(job.contains("href=\"./jobs?tag=nightly\""), "{job}");
    assert!(job.contains("href=\"./jobs?class=Report\""), "{job}");
    assert!(job.contains("~resq:"), "the worker: {job}");
    let events: Vec<&str> = job
        .split("<td><span class=\"badge ")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .collect();
    assert_eq!(events, ["enqueued", "started", "completed"], "{job}");
    assert!(job.contains(" UTC</td>"), "event times: {job}");
    assert!(
        forms(job, "jobs/cancel").is_empty(),
        "a finished job has no Cancel"
    );
    let failed = get(&app, &format!("/job?id={}", t.failed)).await.body;
    assert!(
        failed.contains("error=&lt;script&gt;")
            || failed.contains("&lt;script&gt;window.__pwned=3")
    );
    // The Ruby status: its fields, no history.
    let r = get(&app, &format!("/job?id={ruby}")).await.body;
    assert!(
        r.contains("<progress max=\"100\" value=\"30\">") && r.contains(" (3 of 10)"),
        "{r}"
    );
    assert!(r.contains("&quot;num&quot;: 10"), "{r}");
    assert!(r.contains("No history"), "{r}");
}

#[tokio::test]
async fn tracked_jobs_are_paged_fifty_at_a_time() {
    let ns = support::namespace("webjobpages");
    let c = resq::Client::connect(&support::url(), &ns).await.unwrap();
    let mut ids = Vec::new();
    for i in 0..55 {
        ids.push(
            c.enqueue_class_tracked(
                "bulk",
                "Bulk",
                &[serde_json::json!(i)],
                resq::jobs::Track::new(),
            )
            .await
            .unwrap()
            .to_string(),
        );
    }
    let app = router(&ns, |c| c).await;
    // A page of 50, and "next ›" from where it ended.
    for view in ["state=queued", "queue=bulk"] {
        let first = get(&app, &format!("/jobs?{view}")).await.body;
        let p1 = job_links(&first);
        assert_eq!(p1.len(), 50, "{view}");
        assert!(!first.contains("« first"), "{view}");
        let next = next_link(&first).unwrap_or_else(|| panic!("{view}: no next: {first}"));
        assert!(next.starts_with(&format!("jobs?{view}&from=")), "{next}");
        let second = get(&app, &format!("/{next}")).await.body;
        let p2 = job_links(&second);
        assert_eq!(p2.len(), 5, "{view}");
        assert!(second.contains("« first"), "{view}");
        assert!(next_link(&second).is_none(), "{view}: the end");
        let mut seen: Vec<String> = p1.into_iter().chain(p2).collect();
        seen.sort();
        ids.sort();
        assert_eq!(seen, ids, "{view}: every job once across the pages");
    }
    // Past any depth: 20,050 finished jobs, the oldest the only `Rare` one. A page stops at its
    // budget (1,000 entries) and says so; "next ›" goes on to it.
    let k = Keys::new(ns.as_str());
    let mut con = support::con().await;
    let deep: Vec<String> = (0..20_050)
        .map(|_| resq::jobs::JobId::new().to_string())
        .collect();
    for (n, chunk) in deep.chunks(2500).enumerate() {
        let mut p = redis::pipe();
        for (i, id) in chunk.iter().enumerate() {
            let at = n * 2500 + i;
            let class = if at == 0 { "Rare" } else { "Bulk" };
            p.hset_multiple(
                k.job_record(id),
                &[("state", "completed"), ("class", class)],
            )
            .ignore()
            .zadd(k.job_state("completed"), id, at + 1)
            .ignore();
        }
        let () = p.query_async(&mut con).await.unwrap();
    }
    let mut page = get(&app, "/jobs?state=completed&class=Rare").await.body;
    let mut pages = 1;
    while job_links(&page).is_empty() {
        assert!(page.contains("budget of entries"), "{page}");
        let next = next_link(&page).expect("a next link");
        page = get(&app, &format!("/{next}")).await.body;
        pages += 1;
        assert!(pages <= 100, "never reached");
    }
    assert!(pages > 1, "20,050 entries looked at in one request");
    assert_eq!(job_links(&page), [deep[0].clone()]);
    // A position that is not one is a bad request.
    let r = get(&app, "/jobs?state=completed&from=nowhere").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = get(&app, "/jobs?state=completed&from=workers").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn records_that_cannot_be_read_are_named_and_the_page_goes_on() {
    let ns = support::namespace("webjobbad");
    let k = Keys::new(ns.as_str());
    let mut con = support::con().await;
    let (good, list, odd) = (
        resq::jobs::JobId::new().to_string(),
        resq::jobs::JobId::new().to_string(),
        resq::jobs::JobId::new().to_string(),
    );
    let () = redis::pipe()
        .hset(k.job_record(&good), "state", "failed")
        .rpush(k.job_record(&list), "x")
        .hset(k.job_record(&odd), "state", b"\xff".as_slice())
        .hset(k.job_record(&odd), "class", "<b>Odd</b>")
        .zadd(k.job_state("failed"), &good, 1)
        .zadd(k.job_state("failed"), &list, 2)
        .zadd(k.job_state("failed"), &odd, 3)
        .query_async(&mut con)
        .await
        .unwrap();
    let app = router(&ns, |c| c).await;
    let r = get(&app, "/jobs?state=failed").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(job_links(&r.body), std::slice::from_ref(&good));
    assert!(
        r.body.contains(&format!(
            "{} holds a list, not a record",
            k.job_record(&list)
        )),
        "{}",
        r.body
    );
    assert!(r.body.contains(&k.job_record(&odd)), "{}", r.body);
    // One record: read as far as it goes, its bad fields named.
    let r = get(&app, &format!("/job?id={odd}")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.body.contains(">?</span>"), "{}", r.body);
    assert!(r.body.contains("state holds"), "{}", r.body);
    assert!(r.body.contains("&lt;b&gt;Odd&lt;/b&gt;"), "{}", r.body);
    // A record key of another type: the page says so, naming the key (issue 40).
    let r = get(&app, &format!("/job?id={list}")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.body.contains("data-unreadable"), "{}", r.body);
    assert!(r.body.contains(&k.job_record(&list)), "{}", r.body);
}

#[tokio::test]
async fn cancel_through_the_page_needs_the_token_and_is_refused_read_only() {
    let ns = support::namespace("webjobcancel");
    let mut con = support::con().await;
    let t = web_common::seed_tracked(&ns).await;
    let ruby = web_common::seed_ruby_status(&mut con, &ns).await;
    let k = Keys::new(ns.as_str());
    let c = resq::Client::connect(&support::url(), &ns).await.unwrap();
    let state = |id: resq::jobs::JobId| {
        let c = c.clone();
        async move { c.status(&id).await.unwrap().unwrap().state }
    };
    let app = router(&ns, |c| c).await;
    let list = get(&app, "/jobs?queue=later").await.body;
    let form = forms(&list, "jobs/cancel")
        .into_iter()
        .find(|f| f["id"] == t.queued.as_str())
        .expect("a Cancel form for the queued job");
    let fields: Vec<(&str, &str)> = form.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    // Without the token, or with a wrong one: refused, nothing changes.
    let no_token: Vec<(&str, &str)> = fields
        .iter()
        .copied()
        .filter(|(k, _)| *k != "_csrf")
        .collect();
    let r = post(&app, "/jobs/cancel", &no_token).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let mut wrong = no_token.clone();
    wrong.push(("_csrf", "0000"));
    assert_eq!(
        post(&app, "/jobs/cancel", &wrong).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(state(t.queued.clone()).await, resq::jobs::State::Queued);
    // Read-only: no Cancel on any page, and the POST is refused even with the token.
    let ro = router(&ns, |c| c.read_only(true)).await;
    for page in ["/jobs".to_string(), format!("/job?id={}", t.queued)] {
        let body = get(&ro, &page).await.body;
        assert!(!body.contains("method=\"post\""), "{page} offers an action");
    }
    assert_eq!(
        post(&ro, "/jobs/cancel", &fields).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(state(t.queued.clone()).await, resq::jobs::State::Queued);
    // With the token, from the list: cancelled, back to the same view.
    let r = post(&app, "/jobs/cancel", &fields).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    assert_eq!(r.location(), "../jobs?queue=later&msg=cancelled");
    assert_eq!(state(t.queued.clone()).await, resq::jobs::State::Cancelled);
    let back = get(&app, "/jobs?queue=later&msg=cancelled").await.body;
    assert!(back.contains("Cancelled: the job had not started and will never run."));
    let token = web_common::csrf(&list);
    // From the detail page of a running job: asked to stop, back to the job.
    let long = c
        .enqueue_class_tracked("default", "Long", &[], resq::jobs::Track::new())
        .await
        .unwrap();
    let w =
        support::start(support::builder(&ns, "default").registry(web_common::tracked_registry()))
            .await;
    support::eventually(10, "the long job working", || async {
        (c.status(&long).await.ok()??.state == resq::jobs::State::Working).then_some(())
    })
    .await;
    let detail = get(&app, &format!("/job?id={long}")).await.body;
    let form = &forms(&detail, "jobs/cancel")[0];
    assert_eq!(form["id"], long.as_str());
    assert!(!form.contains_key("to"));
    let r = post(
        &app,
        "/jobs/cancel",
        &[("id", long.as_str()), ("_csrf", &token)],
    )
    .await;
    assert_eq!(r.location(), format!("../job?id={long}&msg=stopping"));
    let asked = get(&app, &format!("/job?id={long}&msg=stopping"))
        .await
        .body;
    assert!(
        asked.contains("Stop requested") && asked.contains("stop asked"),
        "{asked}"
    );
    assert!(
        forms(&asked, "jobs/cancel").is_empty(),
        "asked once is enough"
    );
    let killed = c
        .wait(&long, std::time::Duration::from_secs(15))
        .await
        .unwrap()
        .unwrap();
    support::stop(w).await;
    assert_eq!(killed.state, resq::jobs::State::Killed);
    // A finished job: nothing done. An unknown id: nothing done, back to the list. A malformed
    // one: a bad request.
    let r = post(
        &app,
        "/jobs/cancel",
        &[("id", t.completed.as_str()), ("_csrf", &token)],
    )
    .await;
    assert_eq!(
        r.location(),
        format!("../job?id={}&msg=finished", t.completed)
    );
    assert_eq!(
        state(t.completed.clone()).await,
        resq::jobs::State::Completed
    );
    let unknown = resq::jobs::JobId::new();
    let r = post(
        &app,
        "/jobs/cancel",
        &[("id", unknown.as_str()), ("_csrf", &token)],
    )
    .await;
    assert_eq!(r.location(), "../jobs?msg=nojob");
    let r = post(&app, "/jobs/cancel", &[("id", "nope"), ("_csrf", &token)]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // A status Ruby's resque-status wrote, running on a Ruby worker: asked to stop through
    // resque-status's own switch (`_kill`), as its tab does.
    let r = post(
        &app,
        "/jobs/cancel",
        &[("id", ruby.as_str()), ("_csrf", &token)],
    )
    .await;
    assert_eq!(r.location(), format!("../job?id={ruby}&msg=stopping"));
    let killed: Vec<String> = con.smembers(k.resque_status_kill()).await.unwrap();
    assert!(killed.contains(&ruby), "{killed:?}");
    assert!(get(&app, "/jobs").await.body.contains("stop asked"));
}

/// Issue 34: a cancel from the page whose tree is larger than one call settles (a child with
/// 1,500 children, under a budget of 100 ends a call) says, as `resq job cancel` does, what
/// it left to the prune rounds and how to go on; one that left nothing says nothing of it.
#[tokio::test]
async fn cancel_through_the_page_says_what_is_still_settling() {
    // (Read by every cancel of this process: no other test here cancels a tree.)
    std::env::set_var("RESQ_FLOW_BUDGET", "100");
    let ns = support::namespace("webcancelsettle");
    let c = resq::Client::connect(&support::url(), &ns).await.unwrap();
    let track = resq::jobs::Track::new;
    let parent = c
        .enqueue_class_tracked("nobody", "Noop", &[], track())
        .await
        .unwrap();
    let child = c
        .enqueue_class_tracked("nobody", "Noop", &[], track().parent(parent.clone()))
        .await
        .unwrap();
    for i in 0..1_500 {
        c.enqueue_class_tracked(
            "nobody",
            "Noop",
            &[serde_json::json!(i)],
            track().parent(child.clone()),
        )
        .await
        .unwrap();
    }
    let lone = c
        .enqueue_class_tracked("nobody", "Noop", &[], track())
        .await
        .unwrap();
    let app = router(&ns, |c| c).await;
    let token = csrf(&get(&app, "/jobs").await.body);
    let r = post(
        &app,
        "/jobs/cancel",
        &[("id", parent.as_str()), ("_csrf", &token)],
    )
    .await;
    let to = r.location();
    assert_eq!(
        to,
        format!("../job?id={parent}&msg=cancelled&ends=0&trees=1"),
        "the redirect carries what is left"
    );
    let page = get(&app, &to.replacen("..", "", 1)).await.body;
    assert!(
        page.contains(
            "Still settling: 0 ends (batch counts, waiting jobs) and the children of 1 job"
        ) && page.contains("resq prune"),
        "{page}"
    );
    let r = post(
        &app,
        "/jobs/cancel",
        &[("id", lone.as_str()), ("_csrf", &token)],
    )
    .await;
    assert_eq!(r.location(), format!("../job?id={lone}&msg=cancelled"));
    let page = get(&app, &format!("/job?id={lone}&msg=cancelled"))
        .await
        .body;
    assert!(!page.contains("Still settling"), "{page}");
}

#[tokio::test]
async fn history_samples_feed_the_overview_graph() {
    let ns = support::namespace("webhist");
    let mut con = support::con().await;
    let k = Keys::new(ns.as_str());
    let () = con.set(k.stat_processed(), 1000).await.unwrap();
    let admin = resq::admin::Admin::connect(&support::url(), &ns)
        .await
        .unwrap();
    let s = admin.sample_history().await.unwrap();
    assert_eq!(s.processed, 1000);
    let minute = k.history_minute(s.at_ms / 60_000);
    let hour = k.history_hour(s.at_ms / 3_600_000);
    let (m, h): (String, String) = redis::pipe()
        .get(&minute)
        .get(&hour)
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(m, format!("{} 1000 0", s.at_ms));
    assert_eq!(h, m);
    let ttl: i64 = con.ttl(&minute).await.unwrap();
    assert!(ttl > 86_400 * 2 && ttl <= 86_400 * 2 + 3_600, "{ttl}");
    // The first sample of a minute stays (SET NX).
    let () = con.set(k.stat_processed(), 1060).await.unwrap();
    admin.sample_history().await.unwrap();
    let again: String = con.get(&minute).await.unwrap();
    assert_eq!(again, m);
    // A previous minute 60 jobs behind: the graph has a point.
    let prev = format!("{} 940 0", s.at_ms - 60_000);
    let () = con
        .set(k.history_minute(s.at_ms / 60_000 - 1), prev)
        .await
        .unwrap();
    let samples = admin
        .history(resq::admin::history::Resolution::Minute, s.at_ms, 60)
        .await
        .unwrap();
    assert_eq!(samples.len(), 61);
    let rates = resq::admin::history::rates(&samples, resq::admin::history::Resolution::Minute);
    assert_eq!(rates.last().unwrap().unwrap().processed, 60.0);
    let app = router(&ns, |c| c).await;
    let page = get(&app, "/overview?range=1h").await.body;
    assert!(page.contains("<polyline class=\"p\" points=\""), "{page}");
}

#[tokio::test]
async fn nested_under_a_prefix_every_link_stays_inside_it() {
    let ns = support::namespace("webnest");
    let mut con = support::con().await;
    web_common::seed_hostile(&mut con, &ns).await;
    let inner = router(&ns, |c| c).await;
    let app = axum::Router::new().nest("/ops/resq", inner);
    let root = get(&app, "/ops/resq").await;
    assert_eq!(root.status, StatusCode::OK);
    assert!(root.body.contains("href=\"resq/queues\""), "{}", root.body);
    assert!(root.body.contains("src=\"resq/assets/app.js"));
    assert!(root.body.contains("data-src=\"resq/api/live\""));
    let q = get(&app, "/ops/resq/queues").await;
    assert!(q.body.contains("href=\"./failed\""));
    assert!(q.body.contains("href=\"./overview\""));
    assert_eq!(
        get(&app, "/ops/resq/assets/app.css").await.status,
        StatusCode::OK
    );
    let token = csrf(&get(&app, "/ops/resq/failed").await.body);
    let r = post(&app, "/ops/resq/pause", &[("_csrf", &token)]).await;
    // From /ops/resq/pause, "./overview" is /ops/resq/overview.
    assert_eq!(r.location(), "./overview?msg=paused");
    assert_eq!(
        get(&app, "/ops/resq/overview?msg=paused").await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn serving_a_public_address_needs_authentication() {
    let ns = support::namespace("webbind");
    let admin = resq::admin::Admin::connect(&support::url(), &ns)
        .await
        .unwrap();
    let public: std::net::SocketAddr = "0.0.0.0:0".parse().unwrap();
    let err = resq::web::serve(public, WebConfig::new(admin.clone()))
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("RESQ_WEB_TOKEN"), "{err}");
    let server = resq::web::serve(
        "127.0.0.1:0".parse().unwrap(),
        WebConfig::new(admin.clone()),
    )
    .await
    .unwrap();
    assert!(server.addr.ip().is_loopback());
    let ok = resq::web::check_bind(
        public,
        &WebConfig::new(admin).auth(Auth::none().with_bearer("t")),
    );
    assert!(ok.is_ok());
}

#[test]
fn the_web_command_refuses_unsafe_settings_and_serves() {
    use std::io::{BufRead, Read, Write};
    let ns = support::namespace("webcli");
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = std::process::Command::new(support::resq_bin());
        cmd.args(["--url", &support::url(), "--namespace", &ns, "web"])
            .args(args)
            .env_remove("RESQ_WEB_TOKEN")
            .env_remove("RESQ_WEB_USER")
            .env_remove("RESQ_WEB_PASSWORD");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("run resq web")
    };
    let out = run(&["--bind", "0.0.0.0:0"], &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing") && err.contains("RESQ_WEB_TOKEN"),
        "{err}"
    );
    let out = run(&[], &[("RESQ_WEB_USER", "ops")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("RESQ_WEB_PASSWORD"), "{err}");
    // On loopback with a password: it serves, asks for it, and never prints it.
    let mut child = std::process::Command::new(support::resq_bin())
        .args([
            "--url",
            &support::url(),
            "--namespace",
            &ns,
            "web",
            "--bind",
            "127.0.0.1:0",
        ])
        .env("RESQ_WEB_USER", "ops")
        .env("RESQ_WEB_PASSWORD", "pw-never-printed")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn resq web");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("first line");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    let status = |auth: &str| {
        let mut s = std::net::TcpStream::connect(&addr).expect("connect");
        write!(
            s,
            "GET /overview HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
        )
        .expect("send");
        let mut reply = String::new();
        s.read_to_string(&mut reply).expect("read");
        reply.lines().next().unwrap_or("").to_string()
    };
    assert!(status("").contains(" 401 "));
    // base64("ops:pw-never-printed")
    let ok = status("Authorization: Basic b3BzOnB3LW5ldmVyLXByaW50ZWQ=\r\n");
    assert!(ok.contains(" 200 "), "{ok}");
    child.kill().expect("stop resq web");
    let out = child.wait_with_output().expect("wait");
    let all = format!("{line}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        all.contains("auth: basic auth") && !all.contains("pw-never-printed"),
        "{all}"
    );
}

#[tokio::test]
async fn limits_page_shows_use_and_queues_are_paused_from_the_list() {
    let ns = support::namespace("weblimits");
    let k = Keys::new(ns.as_str());
    let mut con = support::con().await;
    let limit = resq::limits::Limit::concurrency("payments", 5)
        .class("Charge")
        .weight("Refund", 2);
    let () = web_common::limit_fixture(&ns, &limit, 3)
        .zadd(
            k.limit_held("payments", None),
            r#"{"class":"Charge","args":[]}"#,
            99.0 * 1e13 + (chrono::Utc::now().timestamp_millis() - 5000) as f64,
        )
        .sadd(k.workers(), "rubybox:99:reports")
        .query_async(&mut con)
        .await
        .unwrap();
    let app = router(&ns, |c| c).await;
    let page = get(&app, "/limits").await;
    assert_eq!(page.status, StatusCode::OK);
    let row = page
        .body
        .split("<tr data-limit=\"payments\">")
        .nth(1)
        .and_then(|r| r.split("</tr>").next())
        .unwrap_or_else(|| panic!("no payments row: {}", page.body));
    for cell in [
        "class=Charge",
        "5 weight Refund=2",
        "<td class=\"num\" data-in-use>3</td>",
        "<td class=\"num\">1</td>",
        "declared",
    ] {
        assert!(row.contains(cell), "{cell}: {row}");
    }
    // A class limit covers every queue: the Ruby worker is named.
    assert!(
        page.body.contains("data-foreign-workers=\"payments\"")
            && page.body.contains("rubybox:99:reports"),
        "{}",
        page.body
    );

    // Pause from the Queues page: a form with the CSRF token, back to the list.
    let list = get(&app, "/queues").await.body;
    let form = forms(&list, "queue/pause")
        .into_iter()
        .find(|f| f["name"] == "reports")
        .unwrap_or_else(|| panic!("no pause form for reports: {list}"));
    assert_eq!(form["paused"], "1");
    let fields: Vec<(&str, &str)> = form.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let without: Vec<(&str, &str)> = fields
        .iter()
        .copied()
        .filter(|(n, _)| *n != "_csrf")
        .collect();
    let r = post(&app, "/queue/pause", &without).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let paused: bool = con.sismember(k.paused_queues(), "reports").await.unwrap();
    assert!(!paused);
    let r = post(&app, "/queue/pause", &fields).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert!(
        r.location().ends_with("queues?msg=paused"),
        "{}",
        r.location()
    );
    let paused: bool = con.sismember(k.paused_queues(), "reports").await.unwrap();
    assert!(paused);
    let list = get(&app, "/queues?msg=paused").await.body;
    assert!(list.contains("Paused."), "{list}");
    let resume = forms(&list, "queue/pause")
        .into_iter()
        .find(|f| f["name"] == "reports")
        .expect("a resume form");
    assert_eq!(resume["paused"], "0");
    let fields: Vec<(&str, &str)> = resume
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    // Read-only: no button, and the POST is refused.
    let ro = router(&ns, |c| c.read_only(true)).await;
    let ro_list = get(&ro, "/queues").await.body;
    assert!(forms(&ro_list, "queue/pause").is_empty(), "{ro_list}");
    assert!(ro_list.contains("paused"), "{ro_list}");
    let r = post(&ro, "/queue/pause", &fields).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let paused: bool = con.sismember(k.paused_queues(), "reports").await.unwrap();
    assert!(paused);
    let r = post(&app, "/queue/pause", &fields).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    let paused: bool = con.sismember(k.paused_queues(), "reports").await.unwrap();
    assert!(!paused);
}

/// Coverage: each queue's classes against the registry the dashboard was given (the report of
/// `resq coverage`); without one, the page says how to get it.
#[tokio::test]
async fn coverage_page_names_the_classes_without_a_handler() {
    let ns = support::namespace("web-coverage");
    let mut con = support::con().await;
    let k = Keys::new(ns.as_str());
    let wrapper = r#"{"class":"ActiveJob::QueueAdapters::ResqueAdapter::JobWrapper","args":[{"job_class":"WelcomeJob","arguments":[]}]}"#;
    let _: () = con
        .rpush(
            k.queue("mail"),
            &[
                r#"{"class":"Archive","args":[1]}"#,
                r#"{"class":"Legacy","args":[]}"#,
                wrapper,
            ],
        )
        .await
        .unwrap();
    let _: () = con
        .rpush(k.queue("ok"), r#"{"class":"Archive","args":[2]}"#)
        .await
        .unwrap();
    let _: () = con.sadd(k.queues(), &["mail", "ok"]).await.unwrap();
    let registry =
        resq::Registry::new().handler("Archive", |_ctx: resq::JobContext| async { Ok(()) });
    let app = web_common::router(&ns, |c| c.registry(registry)).await;
    let page = web_common::get(&app, "/coverage").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let mail = &page.body[page.body.find(r#"data-queue="mail""#).expect("mail")..];
    let mail = &mail[..mail.find("</section>").expect("section end")];
    assert!(mail.contains(r#"data-ready="no""#), "{mail}");
    for missing in ["Legacy", "WelcomeJob"] {
        let row = &mail[mail
            .find(&format!(r#"data-class="{missing}""#))
            .expect(missing)..];
        assert!(
            row[..row.find("</tr>").unwrap()].contains("data-missing"),
            "{row}"
        );
    }
    let row = &mail[mail.find(r#"data-class="Archive""#).expect("Archive")..];
    assert!(
        !row[..row.find("</tr>").unwrap()].contains("data-missing"),
        "{row}"
    );
    assert!(mail.contains("(ActiveJob)"), "{mail}");
    let ok = &page.body[page.body.find(r#"data-queue="ok""#).expect("ok")..];
    assert!(ok[..ok.find("</section>").unwrap()].contains(r#"data-ready="yes""#));
    // One queue, and a dashboard without handlers.
    let one = web_common::get(&app, "/coverage?queue=ok").await;
    assert!(one.body.contains(r#"data-queue="ok""#) && !one.body.contains(r#"data-queue="mail""#));
    let bare = web_common::router(&ns, |c| c).await;
    let page = web_common::get(&bare, "/coverage").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains("started without handlers"),
        "{}",
        page.body
    );
}
