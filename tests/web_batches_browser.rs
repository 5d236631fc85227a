//! The Batches tab in a real browser: Debian's chromium, headless, driven through chromedriver
//! over WebDriver (fantoccini), as `tests/web_browser.rs` does. The list renders a batch with
//! its counts and a drawn bar, its page opens by clicking, the waiting jobs show with their
//! dependencies, and no page logs a console error (a CSP violation included).
//!
//! chromium and chromedriver are required (`.ci/run` installs them): without them this test
//! fails, saying so. `RESQ_WEB_SCREENSHOTS=<dir>` also saves PNGs of the pages there
//! (`docs/web/batches.png` and `docs/web/batch.png` are made this way).

mod support;

use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use resq::admin::Admin;
use resq::jobs::Track;
use resq::web::{self, WebConfig};
use resq::workflows::Batch;
use resq::{JobContext, JobError, Registry};
use serde_json::{json, Value};
use std::process::Child;
use std::sync::OnceLock;
use std::time::Duration;

fn chromium() -> String {
    std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into())
}

fn chromedriver_bin() -> String {
    std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into())
}

/// One chromedriver for the test binary, on a free port, under the support guard.
fn chromedriver() -> &'static str {
    static URL: OnceLock<(Child, String)> = OnceLock::new();
    &URL.get_or_init(|| {
        for (what, path) in [
            ("chromium", chromium()),
            ("chromedriver", chromedriver_bin()),
        ] {
            assert!(
                std::path::Path::new(&path).exists(),
                "{what} not found at {path}: the browser tests need Debian's chromium and \
                 chromium-driver (apt-get install -y chromium chromium-driver; .ci/run does)"
            );
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

/// Saves a screenshot as `<name>.png` when `RESQ_WEB_SCREENSHOTS` names a directory.
async fn screenshot(c: &Client, name: &str) {
    let Ok(dir) = std::env::var("RESQ_WEB_SCREENSHOTS") else {
        return;
    };
    let png = c.screenshot().await.expect("screenshot");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(dir)
        .join(format!("{name}.png"));
    std::fs::create_dir_all(path.parent().expect("dir")).expect("screenshot dir");
    std::fs::write(&path, png).expect("write screenshot");
}

/// The text of the element `css` selects.
async fn text(c: &Client, css: &str) -> String {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css}: {e}"))
        .text()
        .await
        .expect("text")
}

#[tokio::test]
async fn the_batches_page_renders_a_batch_with_its_counts() {
    // This test binary has its own redis-server: the screenshots show the usual namespace.
    let ns = "resque";
    let registry = Registry::new()
        .handler("Resize", |ctx: JobContext| async move {
            match ctx.args().first().and_then(Value::as_str) {
                Some("broken.png") => Err(JobError::msg("not a PNG file")),
                _ => Ok(()),
            }
        })
        .handler("Export", |_ctx: JobContext| async { Ok(()) });
    let c = resq::Client::connect(&support::url(), ns).await.unwrap();
    let mut album = Batch::new()
        .description("thumbnails of album 7")
        .on_success("ContactSheet", vec![json!(7)]);
    for name in ["a", "b", "c", "d", "e", "f", "broken"] {
        album = album.job("images", "Resize", vec![json!(format!("{name}.png"))]);
    }
    let (album, mut ran) = c.create_batch(album).await.unwrap();
    let mut export = Batch::new().description("nightly export");
    for table in ["users", "orders", "invoices", "payments"] {
        export = export.job("exports", "Export", vec![json!(table)]);
    }
    let (_, exported) = c.create_batch(export).await.unwrap();
    ran.extend(exported);
    let mut uploads = Batch::new().description("transcode uploads");
    for i in 0..5 {
        uploads = uploads.job("video", "Transcode", vec![json!(format!("clip-{i}.mov"))]);
    }
    let (_, clips) = c.create_batch(uploads).await.unwrap();
    let sheet = c
        .enqueue_class_tracked(
            "video",
            "Playlist",
            &[],
            Track::new().after(clips[0].clone()).after(clips[1].clone()),
        )
        .await
        .unwrap();
    let w = support::start(support::builder(ns, "images,exports").registry(registry)).await;
    for id in &ran {
        let s = c.wait(id, Duration::from_secs(15)).await.unwrap().unwrap();
        assert!(s.state.is_final(), "{s:?}");
    }
    support::stop(w).await;

    let admin = Admin::connect(&support::url(), ns).await.unwrap();
    let server = web::serve("127.0.0.1:0".parse().unwrap(), WebConfig::new(admin))
        .await
        .expect("serve");
    let base = format!("http://{}/", server.addr);
    let profile = std::env::temp_dir().join(format!(
        "resq-chromium-{}-{}",
        std::process::id(),
        support::free_port()
    ));
    let caps = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": chromium(),
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--window-size=1280,720",
                format!("--user-data-dir={}", profile.display()),
            ],
        },
        "goog:loggingPrefs": {"browser": "ALL"},
    });
    let Value::Object(caps) = caps else {
        unreachable!()
    };
    let b = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(chromedriver())
        .await
        .unwrap_or_else(|e| panic!("cannot start chromium through chromedriver: {e}"));

    // From the overview, through the navigation.
    b.goto(&format!("{base}overview")).await.unwrap();
    b.find(Locator::LinkText("Batches"))
        .await
        .expect("a Batches tab")
        .click()
        .await
        .unwrap();
    let row = format!("tr[data-batch='{album}']");
    assert_eq!(text(&b, &format!("{row} td[data-total]")).await, "7");
    assert_eq!(text(&b, &format!("{row} td[data-succeeded]")).await, "6");
    assert_eq!(text(&b, &format!("{row} td[data-failed]")).await, "1");
    assert_eq!(text(&b, &format!("{row} td[data-pending]")).await, "0");
    assert_eq!(text(&b, &format!("{row} .badge")).await, "failed");
    // The bar is drawn: six sevenths of its width succeeded, one seventh failed.
    let widths = b
        .execute(
            "const r = document.querySelector(arguments[0]);
             const w = s => r.querySelector(s).getBoundingClientRect().width;
             return [w('svg.bar'), w('rect.ok'), w('rect.bad')];",
            vec![json!(row)],
        )
        .await
        .unwrap();
    let w: Vec<f64> = serde_json::from_value(widths).unwrap();
    assert!(w[0] > 50.0, "the bar has no width: {w:?}");
    assert!((w[1] / w[0] - 6.0 / 7.0).abs() < 0.02, "{w:?}");
    assert!((w[2] / w[0] - 1.0 / 7.0).abs() < 0.02, "{w:?}");
    screenshot(&b, "batches").await;
    let errors = console_errors(&b).await;
    assert!(errors.is_empty(), "batches: console errors {errors:?}");

    // A batch's page, by clicking its id.
    b.find(Locator::Css(&format!("{row} td a")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(text(&b, "h1").await, "Batch");
    assert_eq!(text(&b, "dd[data-succeeded]").await, "6");
    let body = text(&b, "body").await;
    assert!(body.contains("thumbnails of album 7"), "{body}");
    assert!(body.contains("not a PNG file"), "{body}");
    screenshot(&b, "batch").await;
    assert!(console_errors(&b).await.is_empty());

    // The waiting jobs, from the tab's views.
    b.goto(&format!("{base}batches")).await.unwrap();
    b.find(Locator::Css("nav.tabs a[href$='waiting']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let waiting = text(&b, &format!("tr[data-waiting='{sheet}']")).await;
    assert!(
        waiting.contains("Playlist") && waiting.contains("2 of 2"),
        "{waiting}"
    );
    assert!(console_errors(&b).await.is_empty());

    b.close().await.expect("close the session");
    let _ = std::fs::remove_dir_all(profile);
}
