//! Shared by the dashboard's HTTP and browser tests: requests through the router in-process,
//! reading forms back out of a page, and hostile strings to seed Redis with.

#![allow(dead_code)]

use axum::body::Body;
use axum::http::{header, HeaderMap, Method, Request, StatusCode};
use axum::Router;
use resq::admin::Admin;
use resq::web::{self, WebConfig};
use std::collections::HashMap;
use tower::ServiceExt;

/// Strings that would run script or break out of an attribute if printed unescaped.
pub const SCRIPT_CLASS: &str = "<script>window.__pwned=1</script>";
/// Breaks out of a quoted attribute and adds an element whose handler would run.
pub const QUOTE_BREAK: &str = "\"'><img src=x onerror=window.__pwned=2>";
/// An error message with a script.
pub const SCRIPT_ERROR: &str = "<script>window.__pwned=3</script> & \"quoted\"";

/// A failure entry in Ruby's shape (keys in Ruby's order).
pub fn failure(class: &str, args: &str, exception: &str, error: &str, queue: &str) -> String {
    let s = |v: &str| serde_json::Value::String(v.to_string()).to_string();
    format!(
        r#"{{"failed_at":"2026/11/21 19:26:58 UTC","payload":{{"class":{},"args":{args}}},"exception":{},"error":{},"backtrace":["/app/jobs.rb:40:in `perform'"],"worker":{},"queue":{}}}"#,
        s(class),
        s(exception),
        s(error),
        s(&format!("vm:21705:{queue}")),
        s(queue)
    )
}

/// Seeds namespace `ns` with hostile strings in a queue name, class names, args and error
/// messages, a worker, a delayed item, a stored schedule and a resque-status status.
pub async fn seed_hostile(con: &mut redis::aio::MultiplexedConnection, ns: &str) {
    let k = crate::support::Keys::new(ns);
    let args = serde_json::json!([QUOTE_BREAK, SCRIPT_CLASS]).to_string();
    let job = serde_json::json!({"class": SCRIPT_CLASS, "args": [QUOTE_BREAK]}).to_string();
    let item =
        serde_json::json!({"class": SCRIPT_CLASS, "args": [QUOTE_BREAK], "queue": QUOTE_BREAK})
            .to_string();
    let record = serde_json::json!({"queue": QUOTE_BREAK, "run_at": "2026-11-21T19:15:33Z",
        "payload": {"class": SCRIPT_CLASS, "args": [QUOTE_BREAK]}})
    .to_string();
    let worker = format!("box{QUOTE_BREAK}:123:{SCRIPT_CLASS}");
    let status = serde_json::json!({"time": 1795495079, "status": "working",
        "uuid": "ba69034b39c05d28a5403ac10e276e79", "options": {"x": QUOTE_BREAK},
        "name": SCRIPT_CLASS, "num": 3, "total": 10, "message": SCRIPT_ERROR})
    .to_string();
    let schedule = serde_json::json!({"class": SCRIPT_CLASS, "queue": "q", "args": [QUOTE_BREAK],
        "every": "1h", "description": SCRIPT_ERROR})
    .to_string();
    // A limit on a hostile class (so the hostile worker polls what it covers), partitioned by a
    // key one of whose values is hostile.
    let limit = serde_json::json!({"name": "hostile", "kind": "concurrency", "limit": 2,
        "class": SCRIPT_CLASS, "key": "k-{args.0}"})
    .to_string();
    let _: () = redis::pipe()
        .hset(k.limits_declared(), "hostile", limit)
        .sadd(k.limit_parts("hostile"), QUOTE_BREAK)
        .hset(k.limit_holders("hostile", Some(QUOTE_BREAK)), "__units", 1)
        .sadd(k.queues(), &["default", QUOTE_BREAK][..])
        .rpush(k.queue("default"), &job)
        .rpush(k.queue(QUOTE_BREAK), &job)
        .rpush(
            k.failed(),
            failure(SCRIPT_CLASS, &args, QUOTE_BREAK, SCRIPT_ERROR, QUOTE_BREAK),
        )
        .rpush(
            k.failed(),
            failure("Plain", "[1]", "RuntimeError", "boom", "default"),
        )
        .set(k.stat_processed(), 10)
        .set(k.stat_failed(), 2)
        .sadd(k.workers(), &worker)
        .set(k.worker(&worker), record)
        .rpush(k.delayed_bucket(1_795_289_221), &item)
        .zadd(k.delayed_schedule(), 1_795_289_221, 1_795_289_221)
        .hset(k.persistent_schedules(), SCRIPT_CLASS, schedule)
        .zadd(
            k.resque_statuses(),
            "ba69034b39c05d28a5403ac10e276e79",
            1_795_495_079,
        )
        .set(k.resque_status("ba69034b39c05d28a5403ac10e276e79"), status)
        .query_async(con)
        .await
        .expect("seed");
}

/// Seeds namespace `ns` with a plausible fleet (for page tests and the screenshots): queues of
/// several kinds, workers of every runtime, failures of a few classes (one retried), delayed
/// items, stored schedules, resque-status statuses and a day of history samples.
pub async fn seed_demo(con: &mut redis::aio::MultiplexedConnection, ns: &str) {
    use chrono::Utc;
    use resq::time;
    let k = crate::support::Keys::new(ns);
    let now = Utc::now();
    let mut p = redis::pipe();
    let enq = |mins: i64| (now - chrono::Duration::minutes(mins)).timestamp();
    for (q, n, class) in [
        ("default", 120, "Archive"),
        ("mailers", 35, "ActionMailer::MailDeliveryJob"),
        ("reports", 8, "NightlyReport"),
        ("critical", 0, "Charge"),
    ] {
        p.sadd(k.queues(), q);
        for i in 0..n {
            let job = serde_json::json!({"class": class, "args": [i, "main"],
                "enqueued_at": enq(n as i64 - i as i64)});
            p.rpush(k.queue(q), job.to_string());
        }
    }
    p.sadd(k.queues(), "scheduled");
    for i in 0..5 {
        let job = serde_json::json!({"class": "Reminder", "args": [i], "vars": {}});
        p.zadd(
            k.queue("scheduled"),
            job.to_string(),
            (now.timestamp() + 3600 * i) * 1000,
        );
    }
    let hb = time::heartbeat(now);
    let run_at = time::run_at(now - chrono::Duration::seconds(42));
    let workers = [
        ("web-1~resq:4242-0:critical,default", true),
        ("web-1~resq:4242-1:critical,default", false),
        ("web-1~resq:4242-2:critical,default", true),
        ("app-2:31337:mailers", true),
        ("app-3:8812-0:JAVA_DYNAMIC_QUEUES,reports", false),
    ];
    for (id, busy) in workers {
        p.sadd(k.workers(), id);
        p.set(
            k.worker_started(id),
            time::started(now - chrono::Duration::hours(3)),
        );
        if !id.contains("JAVA") {
            p.hset(k.heartbeats(), id, &hb);
        }
        p.set(k.stat_processed_by(id), 1234);
        if busy {
            let rec = serde_json::json!({"queue": "default", "run_at": run_at,
                "payload": {"class": "Archive", "args": [77, "main"]}});
            p.set(k.worker(id), rec.to_string());
        }
    }
    let kinds = [
        (
            "Archive",
            "Errno::ECONNRESET",
            "Connection reset by peer",
            "default",
        ),
        (
            "ActionMailer::MailDeliveryJob",
            "Net::ReadTimeout",
            "Net::ReadTimeout with #<TCPSocket:(closed)>",
            "mailers",
        ),
        (
            "NightlyReport",
            "ActiveRecord::Deadlocked",
            "Mysql2::Error: Deadlock found when trying to get lock",
            "reports",
        ),
        (
            "Charge",
            "Stripe::CardError",
            "Your card was declined.",
            "critical",
        ),
    ];
    for i in 0..60 {
        let (class, exc, err, q) = kinds[(i * 7 + i / 5) % kinds.len()];
        let mut e = failure(class, &format!("[{i},\"main\"]"), exc, err, q);
        if i == 3 {
            e.truncate(e.len() - 1);
            e.push_str(r#","retried_at":"2026/11/21 19:30:02 UTC"}"#);
        }
        p.rpush(k.failed(), e);
    }
    for (i, due) in [90_i64, 600, 3600, 7200, 86_400].iter().enumerate() {
        let ts = now.timestamp() + due;
        let item = serde_json::json!({"class": "SendReminder", "args": [i, "user@example.com"], "queue": "mailers"});
        p.rpush(k.delayed_bucket(ts), item.to_string());
        p.sadd(
            k.timestamps(&item.to_string()),
            crate::support::Keys::delayed_bucket_member(ts),
        );
        p.zadd(k.delayed_schedule(), ts, ts);
    }
    for (name, cfg) in [
        (
            "nightly_report",
            r#"{"class":"NightlyReport","queue":"reports","args":[7],"cron":"0 3 * * *","description":"rebuild the nightly report"}"#,
        ),
        (
            "cleanup",
            r#"{"class":"Cleanup","queue":"default","args":[],"every":"1h"}"#,
        ),
        (
            "digest",
            r#"{"class":"Digest","queue":"mailers","args":["weekly"],"cron":"0 8 * * 1 Europe/Paris"}"#,
        ),
    ] {
        p.hset(k.persistent_schedules(), name, cfg);
    }
    p.hset(
        k.last_enqueued_at(),
        "nightly_report",
        "2026-11-21 03:00:00 +0000",
    );
    for (i, (state, num, total, msg)) in [
        ("working", 3, 10, "importing rows"),
        ("queued", 0, 0, ""),
        (
            "completed",
            10,
            10,
            "Completed at 2026-11-24 04:27:27 +0000",
        ),
        ("failed", 1, 4, "The task failed because of an error: boom"),
        ("killed", 2, 5, "Killed at 2026-11-24 04:38:10 +0000"),
    ]
    .into_iter()
    .enumerate()
    {
        let uuid = format!(
            "{:032x}",
            0xba69_034b_39c0_5d28_a540_3ac1_0e27_6e79_u128 + i as u128
        );
        let t = now.timestamp() - 60 * i as i64;
        let status = serde_json::json!({"time": t, "status": state, "uuid": uuid,
            "options": {"file": format!("import-{i}.csv")}, "name": format!("ImportJob({{\"file\"=>\"import-{i}.csv\"}})"),
            "num": num, "total": total, "message": msg});
        p.zadd(k.resque_statuses(), &uuid, t);
        p.set(k.resque_status(&uuid), status.to_string());
    }
    // A day of per-minute samples and a month of hourly ones, with a daily rhythm.
    let (mut processed, mut failed) = (5_000_000_u64, 12_000_u64);
    let minute_now = now.timestamp() / 60;
    for m in (minute_now - 1440)..=minute_now {
        let phase = (m % 1440) as f64 / 1440.0 * std::f64::consts::TAU;
        processed += (900.0 + 600.0 * phase.sin()) as u64;
        failed += (3.0 + 3.0 * (phase * 3.0).cos()).max(0.0) as u64;
        p.set(
            k.history_minute(m),
            format!("{} {processed} {failed}", m * 60_000),
        );
    }
    let hour_now = now.timestamp() / 3600;
    let (mut hp, mut hf) = (1_000_000_u64, 5_000_u64);
    for h in (hour_now - 24 * 30)..=hour_now {
        let phase = (h % 24) as f64 / 24.0 * std::f64::consts::TAU;
        hp += (54_000.0 + 36_000.0 * phase.sin()) as u64;
        hf += (180.0 + 120.0 * (phase * 2.0).cos()) as u64;
        p.set(k.history_hour(h), format!("{} {hp} {hf}", h * 3_600_000));
    }
    p.set(k.stat_processed(), processed);
    p.set(k.stat_failed(), failed);
    let () = p.query_async(con).await.expect("seed demo");
}

/// The router for namespace `ns` on the shared test server.
pub async fn router(ns: &str, f: impl FnOnce(WebConfig) -> WebConfig) -> Router {
    let admin = Admin::connect(&crate::support::url(), ns)
        .await
        .expect("connect");
    web::router(f(WebConfig::new(admin)))
}

/// A response, read whole.
pub struct Reply {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Body as text.
    pub body: String,
}

impl Reply {
    /// The `Location` header.
    pub fn location(&self) -> &str {
        self.headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

/// Sends `req` through `app`.
pub async fn send(app: &Router, req: Request<Body>) -> Reply {
    let res = app.clone().oneshot(req).await.expect("infallible");
    let status = res.status();
    let headers = res.headers().clone();
    let bytes = axum::body::to_bytes(res.into_body(), 16 << 20)
        .await
        .expect("body");
    Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// `GET path`.
pub async fn get(app: &Router, path: &str) -> Reply {
    send(
        app,
        Request::get(path).body(Body::empty()).expect("request"),
    )
    .await
}

/// `POST path` with a form, as the dashboard's own page at `http://127.0.0.1:5678` sends it
/// (`Host` and `Origin`).
pub async fn post(app: &Router, path: &str, form: &[(&str, &str)]) -> Reply {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in form {
        s.append_pair(k, v);
    }
    send(
        app,
        Request::builder()
            .method(Method::POST)
            .uri(path)
            .header(header::HOST, "127.0.0.1:5678")
            .header(header::ORIGIN, "http://127.0.0.1:5678")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(s.finish()))
            .expect("request"),
    )
    .await
}

/// Undoes maud's attribute escaping.
fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Every POST form of `html` whose action ends with `action`, as its hidden fields.
pub fn forms(html: &str, action: &str) -> Vec<HashMap<String, String>> {
    let mut out = Vec::new();
    for part in html.split("<form").skip(1) {
        let Some(end) = part.find("</form>") else {
            continue;
        };
        let form = &part[..end];
        let Some(a) = attr(form, "action") else {
            continue;
        };
        if !a.ends_with(action) || !form.contains("method=\"post\"") {
            continue;
        }
        let mut fields = HashMap::new();
        for input in form.split("<input").skip(1) {
            if let (Some(n), Some(v)) = (attr(input, "name"), attr(input, "value")) {
                fields.insert(n, v);
            }
        }
        out.push(fields);
    }
    out
}

/// The value of attribute `name` in the first tag of `tag`.
fn attr(tag: &str, name: &str) -> Option<String> {
    let close = tag.find('>').unwrap_or(tag.len());
    let head = &tag[..close];
    let start = head.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = head[start..].find('"')?;
    Some(unescape(&head[start..start + len]))
}

/// The CSRF token in a page's forms.
pub fn csrf(html: &str) -> String {
    let marker = "name=\"_csrf\" value=\"";
    let i = html.find(marker).expect("a form with a CSRF token") + marker.len();
    let len = html[i..].find('"').expect("token end");
    html[i..i + len].to_string()
}

/// Asserts no hostile string appears unescaped in `html`.
pub fn assert_escaped(html: &str, page: &str) {
    // maud escapes `&`, `<`, `>` and `"`; a `'` alone cannot end a double-quoted attribute.
    for bad in ["<script>window.__pwned", "<img src=x", "'><img", "\"'>"] {
        assert!(
            !html.contains(bad),
            "{page}: {bad:?} appears unescaped in:\n{html}"
        );
    }
}

/// `v` percent-encoded for a query string.
pub fn enc(v: &str) -> String {
    url::form_urlencoded::byte_serialize(v.as_bytes()).collect()
}

/// Tracked jobs [`seed_tracked`] made, one per state it reaches.
pub struct Tracked {
    /// Completed, with progress 1/2, tags `nightly` and `eu`, and a result holding
    /// [`SCRIPT_CLASS`] and [`QUOTE_BREAK`].
    pub completed: resq::jobs::JobId,
    /// Failed with [`SCRIPT_ERROR`].
    pub failed: resq::jobs::JobId,
    /// Cancelled before it ran.
    pub cancelled: resq::jobs::JobId,
    /// Queued on `later` (no worker reads it).
    pub queued: resq::jobs::JobId,
    /// Scheduled an hour from now.
    pub scheduled: resq::jobs::JobId,
}

/// Handlers for tracked-job tests: `Report` (progress 1/2 and a hostile result), `Doomed`
/// (fails with [`SCRIPT_ERROR`]), `Long` (reports progress until cancelled).
pub fn tracked_registry() -> resq::Registry {
    use resq::{JobContext, JobError};
    resq::Registry::new()
        .handler("Report", |ctx: JobContext| async move {
            ctx.progress(1, 2, "half way").await?;
            ctx.set_result(
                &serde_json::json!({"rows": 7, "html": SCRIPT_CLASS, "attr": QUOTE_BREAK}),
            )?;
            Ok(())
        })
        .handler("Doomed", |_ctx: JobContext| async {
            Err(JobError::msg(SCRIPT_ERROR))
        })
        .handler("Long", |ctx: JobContext| async move {
            for i in 0..1200u64 {
                ctx.progress(i, 1200, "working").await?;
                tokio::select! {
                    _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => {}
                    _ = ctx.cancelled() => return Err(ctx.killed()),
                }
            }
            Ok(())
        })
}

/// Tracked jobs in namespace `ns`, enqueued through `resq::Client` and run by an in-process
/// worker: one completed, one failed, one cancelled, one queued, one scheduled.
pub async fn seed_tracked(ns: &str) -> Tracked {
    use resq::jobs::Track;
    let c = resq::Client::connect(&crate::support::url(), ns)
        .await
        .expect("client");
    let completed = c
        .enqueue_class_tracked(
            "default",
            "Report",
            &[serde_json::json!(7)],
            Track::new().tag("nightly").tag("eu"),
        )
        .await
        .expect("enqueue");
    let failed = c
        .enqueue_class_tracked("default", "Doomed", &[], Track::new())
        .await
        .expect("enqueue");
    let cancelled = c
        .enqueue_class_tracked("default", "Report", &[serde_json::json!(0)], Track::new())
        .await
        .expect("enqueue");
    c.cancel(&cancelled).await.expect("cancel");
    let w =
        crate::support::start(crate::support::builder(ns, "default").registry(tracked_registry()))
            .await;
    for id in [&completed, &failed] {
        let s = c
            .wait(id, std::time::Duration::from_secs(15))
            .await
            .expect("wait")
            .expect("a record");
        assert!(s.state.is_final(), "not finished in time: {s:?}");
    }
    crate::support::stop(w).await;
    let queued = c
        .enqueue_class_tracked("later", "Report", &[serde_json::json!(1)], Track::new())
        .await
        .expect("enqueue");
    let scheduled = c
        .enqueue_class_tracked(
            "later",
            "Report",
            &[serde_json::json!(2)],
            Track::new()
                .delay(std::time::Duration::from_secs(3600))
                .expect("delay"),
        )
        .await
        .expect("enqueue");
    Tracked {
        completed,
        failed,
        cancelled,
        queued,
        scheduled,
    }
}

/// resque-status's `02_working` fixture (a status Ruby wrote; resq never touched it), stored in
/// `ns` with its `_statuses` member, and the Ruby worker that runs it (registered, its record
/// holding the job): its uuid.
pub async fn seed_ruby_status(con: &mut redis::aio::MultiplexedConnection, ns: &str) -> String {
    let k = crate::support::Keys::new(ns);
    let uuid = "ba69034b39c05d28a5403ac10e276e79";
    let worker = "rubyhost:4242:statused";
    let () = redis::pipe()
        .set(
            k.resque_status(uuid),
            r#"{"time":1795495079,"status":"working","uuid":"ba69034b39c05d28a5403ac10e276e79","options":{"num":10},"name":"MyStatusJob({\"num\"=>10})","num":3,"total":10,"message":"msg"}"#,
        )
        .zadd(k.resque_statuses(), uuid, 1_795_495_079)
        .sadd(k.workers(), worker)
        .set(
            k.worker(worker),
            r#"{"queue":"statused","run_at":"2026-11-24T08:00:00Z","payload":{"class":"MyStatusJob","args":["ba69034b39c05d28a5403ac10e276e79",{"num":10}]}}"#,
        )
        .query_async(con)
        .await
        .expect("seed status");
    uuid.to_string()
}

/// [`seed_demo_jobs`]'s jobs, and the worker still running the working one.
pub struct DemoJobs {
    /// `ImportCsv` of customers, completed with a result.
    pub completed: resq::jobs::JobId,
    /// Cancelled before it ran.
    pub cancelled: resq::jobs::JobId,
    /// Queued on `imports-bulk` (no worker reads it).
    pub queued: resq::jobs::JobId,
    /// `Reindex`, running (it reports progress until cancelled or done, about 20 s).
    pub working: resq::jobs::JobId,
    /// The worker running it (on `imports`).
    pub worker: resq::Running,
}

/// Plausible tracked jobs in namespace `ns` (for the Jobs page's screenshots and browser
/// test): two imports completed with results, a digest that failed, one cancelled, one running
/// with progress, one queued, one scheduled.
pub async fn seed_demo_jobs(ns: &str) -> DemoJobs {
    use resq::jobs::Track;
    use resq::{JobContext, JobError};
    use serde_json::json;
    let registry = resq::Registry::new()
        .handler("ImportCsv", |ctx: JobContext| async move {
            let file: String = ctx.arg(0)?;
            let rows: u64 = ctx.arg(1)?;
            for step in 0..=4 {
                ctx.progress(step * rows / 4, rows, &format!("importing {file}"))
                    .await?;
            }
            ctx.set_result(&json!({"file": file, "rows": rows, "skipped": 3}))?;
            Ok(())
        })
        .handler("SendDigest", |_ctx: JobContext| async {
            Err(JobError::msg(
                "Net::SMTPAuthenticationError: 535 5.7.8 Username and Password not accepted",
            ))
        })
        .handler("Reindex", |ctx: JobContext| async move {
            for i in 0..100u64 {
                ctx.progress(i, 100, "reindexing products").await?;
                tokio::select! {
                    _ = tokio::time::sleep(std::time::Duration::from_millis(200)) => {}
                    _ = ctx.cancelled() => return Err(ctx.killed()),
                }
            }
            Ok(())
        });
    let c = resq::Client::connect(&crate::support::url(), ns)
        .await
        .expect("client");
    let enqueue =
        |queue: &'static str, class: &'static str, args: Vec<serde_json::Value>, t: Track| {
            let c = c.clone();
            async move {
                c.enqueue_class_tracked(queue, class, &args, t)
                    .await
                    .expect("enqueue")
            }
        };
    let completed = enqueue(
        "imports",
        "ImportCsv",
        vec![json!("customers-2026-11.csv"), json!(12_840)],
        Track::new().tag("import").tag("team-growth"),
    )
    .await;
    let orders = enqueue(
        "imports",
        "ImportCsv",
        vec![json!("orders-2026-11.csv"), json!(48_211)],
        Track::new().tag("import"),
    )
    .await;
    let failed = enqueue("imports", "SendDigest", vec![json!("weekly")], Track::new()).await;
    let cancelled = enqueue(
        "imports",
        "ImportCsv",
        vec![json!("legacy.csv"), json!(1)],
        Track::new(),
    )
    .await;
    c.cancel(&cancelled).await.expect("cancel");
    let worker =
        crate::support::start(crate::support::builder(ns, "imports").registry(registry)).await;
    for id in [&completed, &orders, &failed] {
        let s = c
            .wait(id, std::time::Duration::from_secs(15))
            .await
            .expect("wait")
            .expect("a record");
        assert!(s.state.is_final(), "not finished in time: {s:?}");
    }
    let working = enqueue("imports", "Reindex", vec![json!("products")], Track::new()).await;
    let queued = enqueue(
        "imports-bulk",
        "ImportCsv",
        vec![json!("returns-2026-11.csv"), json!(310)],
        Track::new().tag("import"),
    )
    .await;
    enqueue(
        "imports-bulk",
        "SendDigest",
        vec![json!("monthly")],
        Track::new()
            .delay(std::time::Duration::from_secs(6 * 3600))
            .expect("delay"),
    )
    .await;
    DemoJobs {
        completed,
        cancelled,
        queued,
        working,
        worker,
    }
}

/// Declares `limit` as a worker does at start, with `units` of it in use, and a queue
/// `reports` holding one job (the Limits page's and the pause button's fixtures).
pub fn limit_fixture(ns: &str, limit: &resq::limits::Limit, units: u32) -> redis::Pipeline {
    let k = crate::support::Keys::new(ns);
    let mut pipe = redis::pipe();
    pipe.hset(
        k.limits_declared(),
        &limit.name,
        serde_json::to_string(limit).expect("a limit is JSON"),
    )
    .hset(k.limit_holders(&limit.name, None), "__units", units)
    .sadd(k.queues(), "reports")
    .rpush(k.queue("reports"), r#"{"class":"Report","args":[]}"#);
    pipe
}

/// Non-UTF-8 bytes in a name.
const BAD: &[u8] = b"bad\xff\xfe";

fn bad(prefix: &str) -> Vec<u8> {
    [prefix.as_bytes(), BAD].concat()
}

/// Seeds `ns` with a name that is not UTF-8 in every set, hash and index a page lists, and
/// records that are no records: returns the ids of the job records.
pub async fn seed_bad_names(con: &mut redis::aio::MultiplexedConnection, ns: &str) -> [String; 3] {
    let k = crate::support::Keys::new(ns);
    let not_json = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".to_string();
    let hash_status = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb".to_string();
    let list_record = "dddddddddddddddddddddddddddddddd".to_string();
    let limit = serde_json::json!({"name": "lim", "kind": "concurrency", "limit": 2,
        "key": "k-{args.0}"})
    .to_string();
    let _: () = redis::pipe()
        .sadd(k.queues(), bad("q-"))
        .sadd(k.queues(), "good")
        .rpush(k.queue("good"), r#"{"class":"Good","args":[]}"#)
        .sadd(k.workers(), [b"host-".as_slice(), BAD, b":1:good"].concat())
        .hset(
            k.persistent_schedules(),
            bad("sched-"),
            r#"{"class":"A","every":"1h","queue":"good"}"#,
        )
        .hset(k.limits_declared(), "lim", limit)
        .sadd(k.limit_parts("lim"), bad("part-"))
        // (Its held set, in the index of held sets as when it holds a job.)
        .zadd(
            k.held_sets(),
            [
                k.limit_base("lim", Some("part-")).as_bytes(),
                BAD,
                b":held".as_slice(),
            ]
            .concat(),
            0,
        )
        .zadd(k.batches(), bad("batch-"), 1)
        .zadd(k.job_state("waiting"), bad("wait-"), 1)
        .zadd(k.resque_statuses(), &not_json, 1)
        .set(
            k.resque_status(&not_json),
            [b"not json ".as_slice(), BAD].concat(),
        )
        .zadd(k.resque_statuses(), &hash_status, 2)
        .hset(k.resque_status(&hash_status), "x", "y")
        .rpush(k.job_record(&list_record), "x")
        .query_async(con)
        .await
        .expect("seed");
    [not_json, hash_status, list_record]
}

/// Seeds `ns` with a batch (a queued member, a member whose record is gone, a child batch)
/// and a job waiting for it: returns the batch's id.
pub async fn seed_batch(con: &mut redis::aio::MultiplexedConnection, ns: &str) -> String {
    let k = crate::support::Keys::new(ns);
    let batch = "0badc0de0badc0de0badc0de0badc0de".to_string();
    let child = "c41dc41dc41dc41dc41dc41dc41dc41d";
    let member = "11111111111111111111111111111111";
    let gone = "22222222222222222222222222222222";
    let waiter = "33333333333333333333333333333333";
    let now = chrono::Utc::now().timestamp_millis();
    let _: () = redis::pipe()
        .hset_multiple(
            k.batch(&batch),
            &[
                ("total", "3"),
                ("pending", "3"),
                ("unsucceeded", "3"),
                ("failed", "0"),
            ],
        )
        .hset(k.batch(&batch), "created_at", now)
        .hset_multiple(k.batch(child), &[("total", "0"), ("pending", "0")])
        .zadd(k.batches(), &batch, now)
        .sadd(
            k.batch_jobs(&batch),
            &[member, gone, &format!("@{child}")][..],
        )
        .hset_multiple(
            k.job_record(member),
            &[("state", "queued"), ("queue", "good"), ("class", "Member")],
        )
        .hset(k.job_record(member), "batch", &batch)
        .rpush(
            k.queue("good"),
            format!(r#"{{"class":"Member","args":[],"resq_id":"{member}"}}"#),
        )
        .hset_multiple(
            k.job_record(waiter),
            &[("state", "waiting"), ("queue", "good"), ("class", "After")],
        )
        .hset(k.job_record(waiter), "deps", member)
        .hset(k.job_record(waiter), "deps_left", 1)
        .zadd(k.job_state("waiting"), waiter, now)
        .query_async(con)
        .await
        .expect("seed batch");
    batch
}
