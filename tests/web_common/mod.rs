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
    let k = resq::Keys::new(ns);
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
    let _: () = redis::pipe()
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

/// `POST path` with a form.
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
