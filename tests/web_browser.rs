//! The dashboard in a real browser: Debian's chromium, headless, driven through chromedriver
//! over WebDriver (fantoccini). Every page loads with no console error (the browser log read
//! through chromedriver, CSP violations included), a failure is retried and another removed by
//! clicking, a search filters, tracked jobs show with their results and are cancelled by
//! clicking, authentication holds, a POST without the CSRF token is refused, and hostile bytes
//! from Redis never run.
//!
//! chromium and chromedriver are required (`.ci/run` installs them): without them these tests
//! fail, saying so. `RESQ_WEB_SCREENSHOTS=<dir>` also saves PNGs of the main pages there (how
//! `docs/web/*.png` are made: `RESQ_WEB_SCREENSHOTS=docs/web cargo test --test web_browser`).

mod support;
mod web_common;

use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use redis::AsyncCommands;
use resq::admin::element_id;
use resq::admin::Admin;
use resq::web::{self, Auth, WebConfig, WebServer};
use serde_json::{json, Value};
use std::process::Child;
use std::sync::OnceLock;
use std::time::Duration;
use support::Keys;

/// The chromium binary (`CHROMIUM` overrides).
fn chromium() -> String {
    std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into())
}

/// The chromedriver binary (`CHROMEDRIVER` overrides).
fn chromedriver_bin() -> String {
    std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into())
}

/// One chromedriver for the test binary, on a free port, under the support guard (it dies
/// with the tests). Panics when chromium or chromedriver is missing.
fn chromedriver() -> &'static str {
    static URL: OnceLock<(Child, String)> = OnceLock::new();
    &URL.get_or_init(|| {
        for (what, path) in [
            ("chromium", chromium()),
            ("chromedriver", chromedriver_bin()),
        ] {
            if !std::path::Path::new(&path).exists() {
                panic!(
                    "{what} not found at {path}: the browser tests need Debian's chromium and \
                     chromium-driver (apt-get install -y chromium chromium-driver; .ci/run does)"
                );
            }
        }
        let port = support::free_port();
        let (guard, _) =
            support::spawn_guard(&chromedriver_bin(), &[format!("--port={port}")], None);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "chromedriver did not listen on port {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        (guard, format!("http://127.0.0.1:{port}"))
    })
    .1
}

/// Browser sessions run one at a time: chromium is heavy on 2 cores.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A headless chromium session with a fresh profile, and the profile's directory.
async fn browser() -> (Client, std::path::PathBuf) {
    browser_with(&[]).await
}

/// [`browser`] with more command-line switches.
async fn browser_with(extra: &[&str]) -> (Client, std::path::PathBuf) {
    let profile = std::env::temp_dir().join(format!(
        "resq-chromium-{}-{}",
        std::process::id(),
        support::free_port()
    ));
    let mut args: Vec<String> = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,900",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(format!("--user-data-dir={}", profile.display()));
    args.extend(extra.iter().map(|s| s.to_string()));
    let caps = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": chromium(),
            "args": args,
        },
        "goog:loggingPrefs": {"browser": "ALL"},
    });
    let Value::Object(caps) = caps else {
        unreachable!()
    };
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    let client = ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(chromedriver())
        .await
        .unwrap_or_else(|e| panic!("cannot start chromium through chromedriver: {e}"));
    (client, profile)
}

/// Ends the session and removes its profile.
async fn close(c: Client, profile: std::path::PathBuf) {
    c.close().await.expect("close the session");
    let _ = std::fs::remove_dir_all(profile);
}

/// chromedriver's browser log (`POST /session/:id/se/log`): entries since the last read.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!("session/{}/se/log", session_id.unwrap_or("")))
    }

    fn method_and_body(&self, _: &url::Url) -> (axum::http::Method, Option<String>) {
        (
            axum::http::Method::POST,
            Some(r#"{"type":"browser"}"#.into()),
        )
    }
}

/// The browser log's errors since the last call.
async fn console_errors(c: &Client) -> Vec<String> {
    let log = c.issue_cmd(BrowserLog).await.expect("browser log");
    log.as_array()
        .map(|entries| {
            entries
                .iter()
                .filter(|e| e["level"] == "SEVERE")
                .map(|e| e["message"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Starts the dashboard for `ns` on a free loopback port.
async fn serve(ns: &str, auth: Auth) -> WebServer {
    let admin = Admin::connect(&support::url(), ns).await.expect("connect");
    web::serve(
        "127.0.0.1:0".parse().unwrap(),
        WebConfig::new(admin).auth(auth),
    )
    .await
    .expect("serve")
}

/// Polls `check` until true, or panics after `secs` with `what`.
async fn until<F, Fut>(secs: u64, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    support::eventually(secs, what, || {
        let f = check();
        async move { f.await.then_some(()) }
    })
    .await
}

/// Saves a screenshot of the current page as `<name>.png` when `RESQ_WEB_SCREENSHOTS` names a
/// directory (and `name` is not empty).
async fn screenshot(c: &Client, name: &str) {
    let Ok(dir) = std::env::var("RESQ_WEB_SCREENSHOTS") else {
        return;
    };
    if name.is_empty() {
        return;
    }
    let png = c.screenshot().await.expect("screenshot");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(dir)
        .join(format!("{name}.png"));
    std::fs::create_dir_all(path.parent().expect("dir")).expect("screenshot dir");
    std::fs::write(&path, png).expect("write screenshot");
}

/// The pages (route, screenshot name or "" for none, a text the page must show).
const PAGES: &[(&str, &str, &str)] = &[
    ("overview", "overview", "Largest queues"),
    ("queues", "queues", "latency"),
    ("queue?name=default", "queue", "Queue default"),
    ("workers", "workers", "web-1~resq"),
    ("failed", "failed", "entries in the failure list"),
    ("failed?group=exception", "failed-grouped", "exception"),
    ("delayed", "delayed", "SendReminder"),
    ("recurring", "recurring", "nightly_report"),
    ("jobs", "", "ImportJob"),
    ("limits", "", "Limits"),
    ("stats", "stats", "redis_version"),
];

#[tokio::test]
async fn every_page_loads_without_console_errors() {
    let _one = ONE_AT_A_TIME.lock().await;
    // This test binary has its own redis-server and no other test uses `resque`, so the
    // screenshots show the usual namespace.
    let ns = "resque".to_string();
    let mut con = support::con().await;
    web_common::seed_demo(&mut con, &ns).await;
    let server = serve(&ns, Auth::none()).await;
    let base = format!("http://{}/", server.addr);
    let (c, profile) = browser().await;
    // The log is read for real: a console error shows up in it.
    c.goto(&format!("{base}limits")).await.unwrap();
    c.execute("console.error('probe-1795')", vec![])
        .await
        .unwrap();
    let probe = console_errors(&c).await;
    assert!(
        probe.iter().any(|m| m.contains("probe-1795")),
        "the browser log does not report console errors: {probe:?}"
    );
    // Workers keep processing while the overview is open, so its live graph moves.
    let k = Keys::new(ns.as_str());
    let url = support::url();
    let busy = tokio::spawn(async move {
        let mut c = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        loop {
            let _: () = redis::pipe()
                .incr(k.stat_processed(), 700 + rand::random::<u32>() % 300)
                .incr(k.stat_failed(), rand::random::<u32>() % 4)
                .query_async(&mut c)
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    for (route, name, text) in PAGES {
        c.goto(&format!("{base}{route}")).await.unwrap();
        let body = c
            .find(Locator::Css("body"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            body.contains(text),
            "{route}: {text:?} not on the page:\n{body}"
        );
        if *route == "overview" {
            // The script ran: the live counters were fetched and two rates drawn.
            until(60, "the live graph to be drawn", || async {
                let pts = c
                    .find(Locator::Css("#live-chart polyline.p"))
                    .await
                    .unwrap()
                    .attr("points")
                    .await
                    .unwrap()
                    .unwrap_or_default();
                // More points for a screenshot, so the graph shows a line.
                let want = if std::env::var_os("RESQ_WEB_SCREENSHOTS").is_some() {
                    15
                } else {
                    3
                };
                pts.split(' ').filter(|p| !p.is_empty()).count() >= want
            })
            .await;
            let status = c
                .find(Locator::Css("[data-live-status]"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            assert_eq!(status, "live");
        }
        if *route == "failed?group=exception" {
            until(20, "the failure counts", || async {
                let t = c
                    .find(Locator::Css("body"))
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap();
                if t.contains("Counts over all") {
                    return true;
                }
                c.refresh().await.unwrap();
                false
            })
            .await;
        }
        screenshot(&c, name).await;
        let errors = console_errors(&c).await;
        assert!(errors.is_empty(), "{route}: console errors {errors:?}");
    }
    busy.abort();
    close(c, profile).await;
}

/// Clicks the button of the `action` form (`failed/retry`…) carrying id `id`.
async fn click_action(c: &Client, action: &str, id: &str) {
    let xpath = format!(
        "//form[substring(@action, string-length(@action) - {len} + 1) = '{action}']\
         [.//input[@name='id' and @value='{id}']]//button",
        len = action.len()
    );
    c.find(Locator::XPath(&xpath))
        .await
        .unwrap_or_else(|e| panic!("no {action} button for {id}: {e}"))
        .click()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_failure_is_retried_and_another_removed_through_the_ui() {
    let _one = ONE_AT_A_TIME.lock().await;
    let ns = support::namespace("brretry");
    let mut con = support::con().await;
    let k = Keys::new(ns.as_str());
    let entries: Vec<String> = (0..5)
        .map(|i| web_common::failure(&format!("Job{i}"), &format!("[{i}]"), "E", "boom", "work"))
        .collect();
    let () = con.rpush(k.failed(), &entries).await.unwrap();
    let server = serve(&ns, Auth::none()).await;
    let base = format!("http://{}/", server.addr);
    let (c, profile) = browser().await;
    c.goto(&format!("{base}failed")).await.unwrap();
    click_action(&c, "failed/retry", &element_id(entries[2].as_bytes())).await;
    c.wait()
        .for_element(Locator::Css("p.flash.ok"))
        .await
        .unwrap();
    let flash = c
        .find(Locator::Css("p.flash"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(flash, "Retried 1 failure.");
    let list: Vec<String> = con.lrange(k.failed(), 0, -1).await.unwrap();
    assert!(list[2].contains("\"retried_at\":\"") && list[2].contains("\"class\":\"Job2\""));
    let queued: Vec<String> = con.lrange(k.queue("work"), 0, -1).await.unwrap();
    assert_eq!(queued, vec![r#"{"class":"Job2","args":[2]}"#.to_string()]);
    // The retried entry is marked on the page.
    let badge = c.find(Locator::Css("span.badge.completed")).await.unwrap();
    assert_eq!(badge.text().await.unwrap(), "retried");

    click_action(&c, "failed/remove", &element_id(entries[4].as_bytes())).await;
    // The page shown still has the retry's flash until the browser has loaded the next one:
    // wait for the new flash itself.
    c.wait()
        .for_element(Locator::XPath(
            "//p[contains(concat(' ', @class, ' '), ' flash ')][normalize-space(.)='Removed 1 failure.']",
        ))
        .await
        .expect("the remove's flash");
    let list: Vec<String> = con.lrange(k.failed(), 0, -1).await.unwrap();
    assert_eq!(list.len(), 4);
    assert!(!list.contains(&entries[4]));

    // The same form posted without its token is refused, and changes nothing.
    let status = c
        .execute_async(
            "const done = arguments[arguments.length - 1];\
             fetch('failed/clear', {method: 'POST', headers: {'Content-Type':\
             'application/x-www-form-urlencoded'}, body: ''})\
             .then(r => done(r.status), e => done(String(e)));",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(status, json!(403));
    let n: usize = con.llen(k.failed()).await.unwrap();
    assert_eq!(n, 4);
    let errors = console_errors(&c).await;
    assert!(
        errors.iter().all(|e| e.contains("403")),
        "only the refused POST may be logged: {errors:?}"
    );
    close(c, profile).await;
}

#[tokio::test]
async fn search_filters_the_failure_list() {
    let _one = ONE_AT_A_TIME.lock().await;
    let ns = support::namespace("brsearch");
    let mut con = support::con().await;
    let k = Keys::new(ns.as_str());
    for i in 0..40 {
        let err = if i % 10 == 3 { "needle in row" } else { "hay" };
        let e = web_common::failure("Job", &format!("[{i}]"), "E", err, "q");
        let () = con.rpush(k.failed(), e).await.unwrap();
    }
    let server = serve(&ns, Auth::none()).await;
    let base = format!("http://{}/", server.addr);
    let (c, profile) = browser().await;
    c.goto(&format!("{base}failed")).await.unwrap();
    let rows = c.find_all(Locator::Css("tbody tr")).await.unwrap();
    assert_eq!(rows.len(), 25);
    let input = c.find(Locator::Css("input[name=q]")).await.unwrap();
    input.send_keys("NEEDLE").await.unwrap();
    c.find(Locator::Css("form.filters button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    until(10, "the filtered view", || async {
        c.current_url().await.unwrap().query() == Some("q=NEEDLE")
    })
    .await;
    let rows = c.find_all(Locator::Css("tbody tr")).await.unwrap();
    assert_eq!(rows.len(), 4);
    for r in rows {
        assert!(r.text().await.unwrap().contains("needle in row"));
    }
    // The view is a URL: loading it again gives the same rows.
    c.goto(&format!("{base}failed?q=NEEDLE")).await.unwrap();
    assert_eq!(c.find_all(Locator::Css("tbody tr")).await.unwrap().len(), 4);
    assert!(console_errors(&c).await.is_empty());
    close(c, profile).await;
}

#[tokio::test]
async fn authentication_is_enforced_in_the_browser() {
    let _one = ONE_AT_A_TIME.lock().await;
    let ns = support::namespace("brauth");
    let mut con = support::con().await;
    web_common::seed_demo(&mut con, &ns).await;
    let server = serve(&ns, Auth::none().with_basic("ops", "s3cret pw")).await;
    let (c, profile) = browser().await;
    c.goto(&format!("http://{}/failed", server.addr))
        .await
        .unwrap();
    // Headless chromium shows nothing for a basic-auth challenge; the navigation's status
    // says what the server answered.
    let status = c
        .execute(
            "const n = performance.getEntriesByType('navigation')[0];\
             return n ? n.responseStatus : null",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(status, json!(401));
    let body = c.source().await.unwrap();
    assert!(!body.contains("entries in the failure list"), "{body}");
    console_errors(&c).await; // the 401 itself is logged
    c.goto(&format!("http://ops:s3cret%20pw@{}/overview", server.addr))
        .await
        .unwrap();
    // Pages, assets and the live endpoint all pass with the browser's credentials.
    until(20, "live counters", || async {
        c.find(Locator::Css("[data-live-status]"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
            == "live"
    })
    .await;
    let css = c
        .execute(
            "return getComputedStyle(document.querySelector('header.top')).display",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(css, json!("flex"), "the stylesheet loaded");
    assert!(console_errors(&c).await.is_empty());
    // The same page's requests without the browser's credentials are refused.
    let status = c
        .execute_async(
            "const done = arguments[arguments.length - 1];\
             const u = new URL('api/live', location.href); u.username = ''; u.password = '';\
             fetch(u, {credentials: 'omit'}).then(r => done(r.status), e => done(String(e)));",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(status, json!(401));
    close(c, profile).await;
}

#[tokio::test]
async fn hostile_bytes_from_redis_show_as_text_and_never_run() {
    let _one = ONE_AT_A_TIME.lock().await;
    let ns = support::namespace("brxss");
    let mut con = support::con().await;
    // Tracked jobs first: their worker would take the hostile job seeded on `default`.
    let tracked = web_common::seed_tracked(&ns).await;
    web_common::seed_hostile(&mut con, &ns).await;
    let tracked_job = format!("job?id={}", tracked.completed);
    let failed_job = format!("job?id={}", tracked.failed);
    let server = serve(&ns, Auth::none()).await;
    let base = format!("http://{}/", server.addr);
    let (c, profile) = browser().await;
    let hostile_queue = format!("queue?name={}", web_common::enc(web_common::QUOTE_BREAK));
    for route in [
        "overview",
        "queues",
        "queue?name=default",
        hostile_queue.as_str(),
        "workers",
        "failed",
        "delayed",
        "recurring",
        "jobs",
        "job?id=ba69034b39c05d28a5403ac10e276e79",
        tracked_job.as_str(),
        failed_job.as_str(),
    ] {
        c.goto(&format!("{base}{route}")).await.unwrap();
        let pwned = c
            .execute(
                "return window.__pwned === undefined ? null : window.__pwned",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(pwned, Value::Null, "{route}: injected script ran");
        let imgs = c.find_all(Locator::Css("img")).await.unwrap();
        assert!(imgs.is_empty(), "{route}: an injected element was parsed");
        let text = c
            .find(Locator::Css("body"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let visible = [
            web_common::SCRIPT_CLASS,
            web_common::QUOTE_BREAK,
            web_common::SCRIPT_ERROR,
        ];
        assert!(
            visible.iter().any(|s| text.contains(s)),
            "{route}: the hostile text is not shown as text:\n{text}"
        );
        let errors = console_errors(&c).await;
        assert!(errors.is_empty(), "{route}: console errors {errors:?}");
    }
    c.goto(&format!("{base}failed")).await.unwrap();
    let text = c
        .find(Locator::Css("body"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains(web_common::SCRIPT_ERROR), "{text}");
    screenshot(&c, "escaping").await;
    close(c, profile).await;
}

#[tokio::test]
async fn tracked_jobs_show_with_results_and_cancel_by_clicking() {
    let _one = ONE_AT_A_TIME.lock().await;
    // A namespace of its own (no other test of this binary uses it), named as an app's would
    // be, for the screenshots.
    let ns = "myapp";
    let d = web_common::seed_demo_jobs(ns).await;
    let admin = Admin::connect(&support::url(), ns).await.unwrap();
    // The running job has made some progress, so the page shows it.
    support::eventually(20, "the running job's progress", || async {
        let s = admin.job(&d.working).await.ok()??;
        (s.state == resq::jobs::State::Working && s.pct_complete >= 10.0).then_some(())
    })
    .await;
    let server = serve(ns, Auth::none()).await;
    let base = format!("http://{}/", server.addr);
    let (c, profile) = browser().await;
    let text = |c: &Client| {
        let c = c.clone();
        async move {
            c.find(Locator::Css("body"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    c.goto(&format!("{base}jobs")).await.unwrap();
    // A completed job and a cancelled one, with their states.
    for (id, state) in [
        (&d.completed, "completed"),
        (&d.cancelled, "cancelled"),
        (&d.working, "working"),
    ] {
        let row = c
            .find(Locator::XPath(&format!(
                "//tr[.//a[contains(@href, 'job?id={id}')]]"
            )))
            .await
            .unwrap_or_else(|e| panic!("no row for {id}: {e}"));
        let badge = row
            .find(Locator::Css("span.badge"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(badge, state);
    }
    let tab = c
        .find(Locator::Css("nav.tabs a.current"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(tab, "all");
    screenshot(&c, "jobs").await;
    // The completed job, whole: its result, its history.
    c.find(Locator::Css(&format!("a[href='./job?id={}']", d.completed)))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.wait()
        .for_element(Locator::Css("pre.result"))
        .await
        .unwrap();
    let result = c
        .find(Locator::Css("pre.result"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let shown: Value = serde_json::from_str(&result).expect("the result as JSON text");
    assert_eq!(
        shown,
        json!({"file": "customers-2026-11.csv", "rows": 12840, "skipped": 3})
    );
    let events = c
        .find_all(Locator::Css("table.history tbody tr"))
        .await
        .unwrap();
    assert_eq!(events.len(), 3);
    let page = text(&c).await;
    for want in [
        "enqueued",
        "started",
        "completed",
        "import, team-growth",
        "100% (12840 of 12840)",
    ] {
        assert!(page.contains(want), "{want:?} not on the page:\n{page}");
    }
    screenshot(&c, "job").await;
    // The cancelled one.
    c.goto(&format!("{base}jobs?state=cancelled"))
        .await
        .unwrap();
    c.find(Locator::Css(&format!("a[href='./job?id={}']", d.cancelled)))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.wait()
        .for_element(Locator::Css("table.history"))
        .await
        .unwrap();
    let events = c
        .find_all(Locator::Css("table.history tbody tr"))
        .await
        .unwrap();
    assert_eq!(events.len(), 2, "enqueued, cancelled");
    let page = text(&c).await;
    assert!(page.contains("cancelled"), "{page}");
    // Cancel the queued job by clicking in the list (the page asks first).
    c.goto(&format!("{base}jobs?queue=imports-bulk"))
        .await
        .unwrap();
    click_action(&c, "jobs/cancel", d.queued.as_str()).await;
    c.accept_alert().await.expect("the confirmation");
    c.wait()
        .for_element(Locator::Css("p.flash.ok"))
        .await
        .unwrap();
    let flash = c
        .find(Locator::Css("p.flash"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        flash,
        "Cancelled: the job had not started and will never run."
    );
    assert_eq!(
        c.current_url().await.unwrap().query(),
        Some("queue=imports-bulk&msg=cancelled")
    );
    let s = admin.job(&d.queued).await.unwrap().unwrap();
    assert_eq!(s.state, resq::jobs::State::Cancelled);
    // Stop the running one from its page.
    c.goto(&format!("{base}job?id={}", d.working))
        .await
        .unwrap();
    click_action(&c, "jobs/cancel", d.working.as_str()).await;
    c.accept_alert().await.expect("the confirmation");
    c.wait()
        .for_element(Locator::Css("p.flash.ok"))
        .await
        .unwrap();
    let page = text(&c).await;
    // The page says the stop was asked for; the job may already have stopped by the time it
    // is drawn (the handler watches for it), so the record reads either way.
    assert!(
        page.contains("Stop requested")
            && (page.contains("stop asked") || page.contains("state\nkilled")),
        "{page}"
    );
    let client = resq::Client::connect(&support::url(), ns).await.unwrap();
    let s = client
        .wait(&d.working, Duration::from_secs(15))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.state, resq::jobs::State::Killed);
    support::stop(d.worker).await;
    let errors = console_errors(&c).await;
    assert!(errors.is_empty(), "console errors {errors:?}");
    close(c, profile).await;
}

#[tokio::test]
async fn limits_page_lists_a_limit_and_a_queue_is_paused_by_clicking() {
    let _one = ONE_AT_A_TIME.lock().await;
    let ns = support::namespace("brlimits");
    let mut con = support::con().await;
    let k = Keys::new(ns.as_str());
    let limit = resq::limits::Limit::concurrency("payments", 5).class("Charge");
    let () = web_common::limit_fixture(&ns, &limit, 4)
        .query_async(&mut con)
        .await
        .unwrap();
    let server = serve(&ns, Auth::none()).await;
    let base = format!("http://{}/", server.addr);
    let (c, profile) = browser().await;
    c.goto(&format!("{base}limits")).await.unwrap();
    let row = c
        .find(Locator::Css("tr[data-limit=payments]"))
        .await
        .expect("the declared limit's row");
    let in_use = row
        .find(Locator::Css("td[data-in-use]"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(in_use, "4");
    assert!(row.text().await.unwrap().contains("class=Charge"));
    screenshot(&c, "limits").await;

    c.goto(&format!("{base}queues")).await.unwrap();
    let xpath = format!(
        "//form[substring(@action, string-length(@action) - {len} + 1) = 'queue/pause']\
         [.//input[@name='name' and @value='reports']]//button",
        len = "queue/pause".len()
    );
    c.find(Locator::XPath(&xpath))
        .await
        .expect("a pause button for reports")
        .click()
        .await
        .unwrap();
    c.wait()
        .for_element(Locator::Css("p.flash.ok"))
        .await
        .unwrap();
    let paused: bool = con.sismember(k.paused_queues(), "reports").await.unwrap();
    assert!(paused, "the click paused the queue in Redis");
    let state = c
        .find(Locator::Css("td[data-queue-state=reports]"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(state, "paused");
    let errors = console_errors(&c).await;
    assert!(errors.is_empty(), "console errors {errors:?}");
    close(c, profile).await;
}

/// The CSRF token in a page's source.
fn token_in(html: &str) -> Option<String> {
    let marker = "name=\"_csrf\" value=\"";
    let i = html.find(marker)? + marker.len();
    html.get(i..i + 64).map(str::to_string)
}

#[tokio::test]
async fn a_dns_rebinding_page_neither_reads_the_token_nor_pauses_the_fleet() {
    let _one = ONE_AT_A_TIME.lock().await;
    let ns = support::namespace("brrebind");
    let mut con = support::con().await;
    let k = Keys::new(ns.as_str());
    // The default setup: loopback, no authentication.
    let server = serve(&ns, Auth::none()).await;
    let port = server.addr.port();
    // `evil.test` resolves to 127.0.0.1: what a rebinding DNS server makes it do once the
    // attacker's page is loaded.
    let (c, profile) = browser_with(&["--host-resolver-rules=MAP evil.test 127.0.0.1"]).await;
    // The dashboard's own page has the token (and the real one is what an attacker wants).
    c.goto(&format!("http://127.0.0.1:{port}/overview"))
        .await
        .expect("own page");
    let token = token_in(&c.source().await.expect("source")).expect("the token on its page");
    // The attacker's page at http://evil.test:<port>/: same port, foreign Host.
    c.goto(&format!("http://evil.test:{port}/overview"))
        .await
        .expect("evil page");
    let shown = c.source().await.expect("source");
    assert!(shown.contains("421") && !shown.contains(&token), "{shown}");
    let fetch = |script: String| {
        let c = c.clone();
        async move { c.execute_async(&script, vec![]).await.expect("script ran") }
    };
    // Its script reads same-origin pages (as rebinding allows): refused, no token.
    let read = fetch(
        "const done = arguments[arguments.length - 1];\
         fetch('/overview').then(r => r.text().then(t => done([r.status, t])), e => done(String(e)));"
            .into(),
    )
    .await;
    assert_eq!(read[0], json!(421), "{read}");
    assert!(!read[1].as_str().unwrap_or("").contains(&token), "{read}");
    // It posts /pause with the real token, same-origin: refused. (A post from another
    // origin to the loopback one carries that Origin: tests/suite/web_every_namespace.rs.)
    let post = fetch(format!(
        "const done = arguments[arguments.length - 1];\
         fetch('/pause', {{method: 'POST', headers: {{'Content-Type': 'application/x-www-form-urlencoded'}}, body: '_csrf={token}'}})\
         .then(r => done(r.status), e => done(String(e)));"
    ))
    .await;
    assert_eq!(post, json!(421), "{post}");
    let paused: Option<String> = con.get(k.pause_all_workers()).await.expect("get");
    assert_eq!(paused, None, "a foreign origin paused the fleet");
    // The dashboard's own page still pauses it, with its token.
    c.goto(&format!("http://127.0.0.1:{port}/overview"))
        .await
        .expect("own page");
    let own = fetch(format!(
        "const done = arguments[arguments.length - 1];\
         fetch('pause', {{method: 'POST', headers: {{'Content-Type': 'application/x-www-form-urlencoded'}}, body: '_csrf={token}'}})\
         .then(r => done(r.status), e => done(String(e)));"
    ))
    .await;
    assert_eq!(own, json!(200), "{own}");
    let paused: Option<String> = con.get(k.pause_all_workers()).await.expect("get");
    assert!(paused.is_some(), "its own page did not pause the fleet");
    close(c, profile).await;
}

/// Walks the dashboard of `ns` in the browser from the overview, following every link of its
/// own (every page, tab, filter and pager it links to, `max` pages at most): no page is a
/// server error. Returns the pages visited.
async fn walk(c: &Client, base: &str, max: usize) -> Vec<String> {
    let mut queue = std::collections::VecDeque::from([format!("{base}/overview")]);
    let mut seen: std::collections::HashSet<String> = queue.iter().cloned().collect();
    let mut visited = Vec::new();
    while let Some(url) = queue.pop_front() {
        if visited.len() >= max {
            break;
        }
        c.goto(&url).await.expect("goto");
        let title = c.title().await.expect("title");
        // The status, asked again of the same URL (a page does not change Redis by a GET).
        let status = c
            .execute_async(
                "const done = arguments[arguments.length - 1];\
                 fetch(location.href).then(r => done(r.status), e => done(String(e)));",
                vec![],
            )
            .await
            .expect("status");
        let code = status.as_u64().unwrap_or(0);
        assert!(
            (200..500).contains(&code) && !title.starts_with("resq web: 5"),
            "{url}: {status} {title}"
        );
        visited.push(url.clone());
        let links = c
            .execute(
                "return [...document.querySelectorAll('a[href]')].map(a => a.href);",
                vec![],
            )
            .await
            .expect("links");
        for l in links.as_array().into_iter().flatten() {
            let Some(l) = l.as_str() else { continue };
            let l = l.split('#').next().unwrap_or(l).to_string();
            if l.starts_with(base) && !l.contains("/assets/") && seen.insert(l.clone()) {
                queue.push_back(l);
            }
        }
    }
    visited
}

#[tokio::test]
async fn every_page_and_tab_answers_on_an_empty_and_a_full_namespace() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut con = support::con().await;
    let empty = support::namespace("brwalkempty");
    let full = support::namespace("brwalkfull");
    web_common::seed_demo(&mut con, &full).await;
    web_common::seed_hostile(&mut con, &full).await;
    web_common::seed_bad_names(&mut con, &full).await;
    let batch = web_common::seed_batch(&mut con, &full).await;
    let (c, profile) = browser().await;
    for (ns, least) in [(&empty, 10), (&full, 40)] {
        let server = serve(ns, Auth::none()).await;
        let base = format!("http://127.0.0.1:{}", server.addr.port());
        let visited = walk(&c, &base, 150).await;
        assert!(
            visited.len() >= least,
            "{ns}: only {} pages: {visited:?}",
            visited.len()
        );
        for must in [
            "/batches",
            "/waiting",
            "/limits",
            "/jobs?state=queued",
            "/stats",
        ] {
            assert!(
                visited.iter().any(|v| v.ends_with(must)),
                "{ns}: {must} not reached: {visited:?}"
            );
        }
        if ns == &full {
            for must in [format!("/batch?id={batch}"), "/recurring".to_string()] {
                assert!(
                    visited.iter().any(|v| v.ends_with(&must)),
                    "{ns}: {must} not reached: {visited:?}"
                );
            }
        }
        server.stop();
    }
    close(c, profile).await;
}
