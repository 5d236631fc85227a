//! OpenTelemetry across the fleet (issue 38), checked in a real trace backend: a Jaeger built
//! by `scripts/setup` (from the Go module proxy) receives OTLP from every process here, and
//! each check reads Jaeger's own query API (`/api/traces`). Producers: a Python process on the
//! real OpenTelemetry SDK writing the Ruby instrumentation's payload forms
//! (`tests/otel/producer.py`), and resq's own `Client` (`resq enqueue`). Consumers: the
//! `compat_worker` example with the `OTEL_*` variables set. The context a resq job writes is
//! checked against the form opentelemetry-instrumentation-resque reads
//! (`fixtures/otel/ruby-resque-context.json`, from its source).
//!
//! Fails (does not skip) when Jaeger or the Python SDK is missing: run `scripts/setup`.

mod support;

use redis::AsyncCommands;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;
use support::WorkerProc;

/// Where `scripts/setup` puts its tools.
fn tools() -> PathBuf {
    std::env::var_os("RESQ_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/resq-tools")
        })
}

/// The Jaeger binary `scripts/setup` builds; while its background build runs (`building`
/// names the builder's pid), waited for (a first build takes minutes of CPU).
fn jaeger_bin() -> PathBuf {
    let dir = tools().join("jaeger/v1.76.0");
    let p = dir.join("jaeger");
    let building = || {
        std::fs::read_to_string(dir.join("building"))
            .ok()
            .is_some_and(|pid| std::path::Path::new(&format!("/proc/{}", pid.trim())).exists())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60 * 60);
    let mut said = false;
    while !p.exists() && building() && std::time::Instant::now() < deadline {
        if !said {
            eprintln!(
                "waiting for scripts/setup's background build of {}",
                p.display()
            );
            said = true;
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
    assert!(
        p.exists(),
        "{} is missing: run scripts/setup (it builds Jaeger from the Go module proxy); its \
         last build's log:\n{}",
        p.display(),
        std::fs::read_to_string(dir.join("build.log")).unwrap_or_default()
    );
    p
}

/// The Python with the OpenTelemetry SDK (`scripts/setup`'s virtualenv).
fn python() -> PathBuf {
    let p = tools().join("bin/python");
    let ok = Command::new(&p)
        .args([
            "-c",
            "import opentelemetry.sdk, opentelemetry.exporter.otlp.proto.http",
        ])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} has no OpenTelemetry SDK: run scripts/setup",
        p.display()
    );
    p
}

/// A Jaeger this test binary started, on free loopback ports, in-memory storage.
struct Jaeger {
    _guard: Child,
    /// `http://127.0.0.1:<port>` of its OTLP/HTTP receiver.
    otlp: String,
    /// Its query API and UI.
    query: Query,
}

/// Jaeger's query API at `127.0.0.1:<port>`.
#[derive(Clone)]
struct Query(String);

impl Jaeger {
    fn start() -> Jaeger {
        let bin = jaeger_bin();
        let [grpc, http, qhttp, qgrpc] = [(); 4].map(|_| support::free_port());
        let dir = std::env::temp_dir().join(format!("resq-test-jaeger-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let config = dir.join("config.yaml");
        // Jaeger's UI, when its built assets are given (the binary from the Go module proxy
        // embeds only a placeholder page): for docs/tracing.md's screenshot.
        let ui = std::env::var("RESQ_JAEGER_UI")
            .map(|p| format!("\n    ui:\n      assets_path: {p}"))
            .unwrap_or_default();
        std::fs::write(
            &config,
            format!(
                r#"service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:{qhttp}
    grpc:
      endpoint: 127.0.0.1:{qgrpc}{ui}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}
      http:
        endpoint: 127.0.0.1:{http}
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"#
            ),
        )
        .expect("write config");
        let log = dir.join("jaeger.log");
        let (guard, _pid) = support::spawn_guard(
            &bin.display().to_string(),
            &["--config".to_string(), config.display().to_string()],
            Some(&log),
        );
        let j = Jaeger {
            _guard: guard,
            otlp: format!("http://127.0.0.1:{http}"),
            query: Query(format!("127.0.0.1:{qhttp}")),
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let up = get(&j.query.0, "/api/services").is_some_and(|(s, _)| s == 200)
                && std::net::TcpStream::connect(("127.0.0.1", http)).is_ok();
            if up {
                return j;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "jaeger did not start; log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Query {
    /// The trace `id` once it holds at least `n` spans.
    fn trace(&self, id: &str, n: usize) -> Trace {
        support::wait_until(60, &format!("{n} spans of trace {id} in jaeger"), || {
            let (status, body) = get(&self.0, &format!("/api/traces/{id}"))?;
            if status != 200 {
                return None;
            }
            let v: Value = serde_json::from_str(&body).ok()?;
            let t = Trace(v["data"][0].clone());
            (t.spans().len() >= n).then_some(t)
        })
    }

    /// The traces of `service` (most recent first, up to 50).
    fn traces_of(&self, service: &str) -> Vec<Trace> {
        let (status, body) = get(
            &self.0,
            &format!("/api/traces?service={service}&limit=50&lookback=1h"),
        )
        .unwrap_or_default();
        if status != 200 {
            return Vec::new();
        }
        let v: Value = serde_json::from_str(&body).unwrap_or_default();
        v["data"]
            .as_array()
            .map(|a| a.iter().cloned().map(Trace).collect())
            .unwrap_or_default()
    }
}

/// An HTTP/1.0 GET (the response ends when the connection closes): status and body.
fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

/// A trace as Jaeger's query API returns it.
#[derive(Clone, Debug)]
struct Trace(Value);

/// A span of a [`Trace`], with its service.
#[derive(Clone, Debug)]
struct SpanView {
    span: Value,
    service: String,
}

impl Trace {
    fn spans(&self) -> Vec<SpanView> {
        let processes = &self.0["processes"];
        self.0["spans"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|s| SpanView {
                        service: processes[s["processID"].as_str().unwrap_or_default()]
                            ["serviceName"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        span: s.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The one span named `name` of `service`.
    fn span(&self, service: &str, name: &str) -> SpanView {
        let found: Vec<SpanView> = self
            .spans()
            .into_iter()
            .filter(|s| s.service == service && s.span["operationName"] == name)
            .collect();
        assert_eq!(
            found.len(),
            1,
            "one {service} span {name:?} in {:#}",
            self.0
        );
        found.into_iter().next().expect("one")
    }
}

impl SpanView {
    fn id(&self) -> &str {
        self.span["spanID"].as_str().unwrap_or_default()
    }

    fn trace_id(&self) -> &str {
        self.span["traceID"].as_str().unwrap_or_default()
    }

    fn tag(&self, key: &str) -> Value {
        self.span["tags"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["key"] == key))
            .map(|t| t["value"].clone())
            .unwrap_or(Value::Null)
    }

    /// `(refType, spanID)` of each reference.
    fn refs(&self) -> Vec<(String, String, String)> {
        self.span["references"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|r| {
                        (
                            r["refType"].as_str().unwrap_or_default().to_string(),
                            r["traceID"].as_str().unwrap_or_default().to_string(),
                            r["spanID"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Asserts it is a child of `parent` (same trace).
    fn assert_child_of(&self, parent: &SpanView) {
        assert_eq!(
            self.refs(),
            vec![(
                "CHILD_OF".to_string(),
                parent.trace_id().to_string(),
                parent.id().to_string()
            )],
            "{} is a child of {}",
            self.span["operationName"],
            parent.span["operationName"]
        );
    }

    /// Asserts the messaging attributes of a resq span.
    fn assert_messaging(&self, kind: &str, queue: &str, class: &str, operation: &str) {
        assert_eq!(self.tag("span.kind"), json!(kind), "{:#}", self.span);
        assert_eq!(self.tag("messaging.system"), json!("resque"));
        assert_eq!(self.tag("messaging.destination"), json!(queue));
        assert_eq!(self.tag("messaging.destination.name"), json!(queue));
        assert_eq!(self.tag("messaging.destination_kind"), json!("queue"));
        assert_eq!(self.tag("messaging.operation.type"), json!(operation));
        assert_eq!(self.tag("messaging.resque.job_class"), json!(class));
    }
}

/// What the Python producer made: the payload text, its trace id and send span id.
struct Produced {
    payload: String,
    trace_id: String,
    span_id: String,
}

/// Runs the Python producer (`form`: `resque` or `activejob`).
fn produce(jaeger: &Jaeger, form: &str, queue: &str, class: &str, args: Value) -> Produced {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/otel/producer.py");
    let out = Command::new(python())
        .arg(script)
        .args([&jaeger.otlp, form, queue, class, &args.to_string()])
        .output()
        .expect("run producer.py");
    assert!(
        out.status.success(),
        "producer.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("producer output");
    Produced {
        payload: v["payload"].as_str().expect("payload").to_string(),
        trace_id: v["trace_id"].as_str().expect("trace_id").to_string(),
        span_id: v["span_id"].as_str().expect("span_id").to_string(),
    }
}

/// Pushes `payload` onto `queue` of `ns`, as Ruby's Resque.push does.
async fn push(ns: &str, queue: &str, payload: &str) {
    let keys = support::Keys::new(ns);
    let mut con = support::con().await;
    let _: () = con.sadd(keys.queues(), queue).await.expect("sadd");
    let _: () = con.rpush(keys.queue(queue), payload).await.expect("rpush");
}

/// The payloads `EchoPayload` recorded in `ns`, once there are `n`.
async fn echoed(ns: &str, n: usize) -> Vec<Value> {
    let key = support::Keys::new(ns).compat_echo();
    support::eventually(60, "EchoPayload runs", || {
        let key = key.clone();
        async move {
            let mut con = support::con().await;
            let v: Vec<String> = con.lrange(&key, 0, -1).await.ok()?;
            (v.len() >= n).then(|| {
                v.iter()
                    .map(|t| serde_json::from_str(t).expect("payload JSON"))
                    .collect()
            })
        }
    })
    .await
}

/// The `OTEL_*` variables of a process exporting to `jaeger` as `service`.
fn otel_env<'a>(jaeger: &'a Jaeger, service: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", jaeger.otlp.as_str()),
        ("OTEL_SERVICE_NAME", service),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test"),
    ]
}

/// Asserts `payload` carries the context of `(trace, span)` exactly in the form
/// opentelemetry-instrumentation-resque's extraction reads (the fixture's form).
fn assert_ruby_readable(payload: &Value, trace: &str, span: &str) {
    let form = support::fixture("otel/ruby-resque-context.json");
    let tp = &payload["traceparent"];
    assert!(tp.is_string(), "a top-level string traceparent: {payload}");
    let tp = tp.as_str().expect("string");
    // The written form (stricter than the regexp Ruby reads with, which it implies).
    let parts: Vec<&str> = tp.split('-').collect();
    assert_eq!(parts.len(), 4, "{tp}");
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    assert!(
        parts[0] == "00" && hex(parts[1], 32) && hex(parts[2], 16),
        "{tp}"
    );
    assert!(parts[3] == "01" || parts[3] == "00", "{tp}");
    assert_ne!(parts[1], form["members"]["traceparent"]["invalid_trace_id"]);
    assert_ne!(parts[2], form["members"]["traceparent"]["invalid_span_id"]);
    assert_eq!(
        (parts[1], parts[2]),
        (trace, span),
        "the context of the send span"
    );
    match payload.get("tracestate") {
        None => {}
        Some(Value::String(s)) => assert!(!s.is_empty(), "no empty tracestate"),
        Some(other) => panic!("tracestate must be a string: {other}"),
    }
    // The members the fixture's example has besides class and args are exactly these.
    let example = form["example"].as_object().expect("example");
    for key in payload.as_object().expect("object").keys() {
        assert!(
            example.contains_key(key) || key == "tracestate",
            "{key} is not a member Ruby's Resque form has"
        );
    }
}

/// [`assert_ruby_readable`] for a payload whose class and args are Rails' wrapper.
fn assert_ruby_readable_members(payload: &Value, trace: &str, span: &str) {
    assert_eq!(
        payload["class"],
        "ActiveJob::QueueAdapters::ResqueAdapter::JobWrapper"
    );
    let mut plain = payload.clone();
    plain["class"] = json!("HardJob");
    assert_ruby_readable(&plain, trace, span);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_cross_producer_worker_and_the_jobs_it_enqueues() {
    let jaeger = tokio::task::spawn_blocking(Jaeger::start)
        .await
        .expect("join");
    let url = support::url();

    // A worker continuing traces as children (Ruby's propagation_style: :child).
    let ns = support::namespace("otel");
    let mut env = otel_env(&jaeger, "resq-worker");
    env.extend([
        ("RESQ_OTEL_PROPAGATION_STYLE", "child"),
        ("QUEUES", "orders,next"),
    ]);
    let worker = WorkerProc::start(&url, &ns, 1, &env);

    // (a) A Python producer writing Ruby's Resque form: the worker's span is a child of the
    // producer's send span; the job it enqueues carries the trace on, in Ruby's form, and the
    // worker that runs that one continues it too.
    let p = produce(&jaeger, "resque", "orders", "Forward", json!(["next"]));
    push(&ns, "orders", &p.payload).await;
    let echo = echoed(&ns, 1).await;
    let t = blocking_trace(&jaeger, &p.trace_id, 5).await;
    let send = t.span("rails-producer", "orders send");
    assert_eq!(send.id(), p.span_id);
    let process = t.span("resq-worker", "orders process");
    process.assert_child_of(&send);
    process.assert_messaging("consumer", "orders", "Forward", "process");
    assert_eq!(process.tag("otel.status_code"), Value::Null, "a success");
    let next_send = t.span("resq-worker", "next send");
    next_send.assert_child_of(&process);
    next_send.assert_messaging("producer", "next", "EchoPayload", "send");
    let next_process = t.span("resq-worker", "next process");
    next_process.assert_child_of(&next_send);
    // (c) What the worker enqueued carries the context exactly as Ruby's extraction reads it.
    assert_ruby_readable(&echo[0], &p.trace_id, next_send.id());

    // A failing job: the span has status Error and the exception recorded.
    let p = produce(&jaeger, "resque", "orders", "Fail", json!(["boom"]));
    push(&ns, "orders", &p.payload).await;
    let t = blocking_trace(&jaeger, &p.trace_id, 3).await;
    let failed = t.span("resq-worker", "orders process");
    failed.assert_child_of(&t.span("rails-producer", "orders send"));
    assert_eq!(failed.tag("error"), json!(true), "{:#}", failed.span);
    assert_eq!(failed.tag("otel.status_code"), json!("ERROR"));
    let description = failed.tag("otel.status_description");
    assert!(
        description
            .as_str()
            .is_some_and(|d| d.starts_with("Unhandled exception of type: ")),
        "{description}"
    );
    let logs = failed.span["logs"].to_string();
    assert!(
        logs.contains("exception") && logs.contains("boom"),
        "the exception event: {logs}"
    );

    // Active Job's __otel_headers as its argument serializer leaves them (a list of pairs),
    // with the job id and attempt as attributes.
    let p = produce(&jaeger, "activejob", "orders", "Noop", json!([]));
    push(&ns, "orders", &p.payload).await;
    let t = blocking_trace(&jaeger, &p.trace_id, 3).await;
    let aj = t.span("resq-worker", "orders process");
    aj.assert_child_of(&t.span("rails-producer", "orders send"));
    aj.assert_messaging("consumer", "orders", "Noop", "process");
    let sent: Value = serde_json::from_str(&p.payload).expect("payload");
    assert_eq!(aj.tag("messaging.message.id"), sent["args"][0]["job_id"]);
    assert_eq!(aj.tag("messaging.resque.attempt"), json!(1));

    // A Rails job resq enqueues (ActiveJobClient): the wrapper payload carries the context as
    // Ruby's Resque instrumentation writes it, the send span named by its job_class.
    let p = produce(&jaeger, "resque", "orders", "ForwardRails", json!(["next"]));
    push(&ns, "orders", &p.payload).await;
    let t = blocking_trace(&jaeger, &p.trace_id, 5).await;
    let process = t.span("resq-worker", "orders process");
    let rails_send = t.span("resq-worker", "next send");
    rails_send.assert_child_of(&process);
    rails_send.assert_messaging("producer", "next", "EchoPayload", "send");
    let rails_process = t.span("resq-worker", "next process");
    rails_process.assert_child_of(&rails_send);
    let wrapper = &echoed(&ns, 2).await[1];
    assert_ruby_readable_members(wrapper, &p.trace_id, rails_send.id());
    assert_eq!(
        rails_process.tag("messaging.message.id"),
        wrapper["args"][0]["job_id"]
    );

    // (b) resq's own Client (`resq enqueue`) starts a trace the worker continues.
    let mut c = support::cli::cmd(
        &ns,
        &[
            "--json", "enqueue", "--queue", "orders", "Forward", "\"next\"",
        ],
    );
    for (k, v) in otel_env(&jaeger, "resq-cli") {
        c.env(k, v);
    }
    let out = tokio::task::spawn_blocking(move || c.output().expect("run resq"))
        .await
        .expect("join");
    assert!(out.status.success(), "{}", support::cli::stderr(&out));
    let printed: Value = serde_json::from_slice(&out.stdout).expect("--json");
    let written: Value =
        serde_json::from_str(printed["payload"].as_str().expect("payload")).expect("JSON");
    let tp = written["traceparent"]
        .as_str()
        .expect("the enqueue carries a context");
    let trace_id = tp.split('-').nth(1).expect("trace id").to_string();
    let t = blocking_trace(&jaeger, &trace_id, 4).await;
    let cli_send = t.span("resq-cli", "orders send");
    assert!(cli_send.refs().is_empty(), "a new trace's root");
    cli_send.assert_messaging("producer", "orders", "Forward", "send");
    assert_ruby_readable(&written, &trace_id, cli_send.id());
    let process = t.span("resq-worker", "orders process");
    process.assert_child_of(&cli_send);
    // `resq enqueue` prints the bytes it wrote, the context included, tracked or not.
    for tracked in [false, true] {
        let mut args = vec!["--json", "enqueue", "--queue", "parked"];
        if tracked {
            args.push("--track");
        }
        args.extend(["Noop", "1"]);
        let mut c = support::cli::cmd(&ns, &args);
        for (k, v) in otel_env(&jaeger, "resq-cli") {
            c.env(k, v);
        }
        let out = tokio::task::spawn_blocking(move || c.output().expect("run resq"))
            .await
            .expect("join");
        assert!(out.status.success(), "{}", support::cli::stderr(&out));
        let printed: Value = serde_json::from_slice(&out.stdout).expect("--json");
        let mut con = support::con().await;
        let stored: Vec<String> = con
            .lrange(support::Keys::new(&ns).queue("parked"), -1, -1)
            .await
            .expect("lrange");
        assert_eq!(
            printed["payload"].as_str(),
            stored.first().map(String::as_str)
        );
        assert!(stored[0].contains("\"traceparent\":\"00-"), "{}", stored[0]);
    }

    let echo = echoed(&ns, 3).await;
    assert_eq!(
        echo[2]["traceparent"]
            .as_str()
            .and_then(|t| t.split('-').nth(1)),
        Some(trace_id.as_str())
    );

    // The screenshot of docs/tracing.md, when asked for.
    if let Ok(path) = std::env::var("RESQ_OTEL_SCREENSHOT") {
        let url = format!("http://{}/trace/{}", jaeger.query.0, p_first_trace(&echo));
        let ok = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--virtual-time-budget=10000",
                "--window-size=1400,420",
                &format!("--screenshot={path}"),
                &url,
            ])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "chromium screenshot of {url}");
    }
    drop(worker);

    // The scheduler's recurring fire is a send (a new trace, as resque-scheduler's push), and
    // the job it enqueued carries its context to the worker.
    let ns = support::namespace("otel-sched");
    let mut env = otel_env(&jaeger, "resq-scheduler");
    env.extend([
        ("RESQ_OTEL_PROPAGATION_STYLE", "child"),
        ("QUEUES", "orders,next"),
        ("RESQ_SCHEDULER", "1"),
    ]);
    let keys = support::Keys::new(&ns);
    {
        let mut con = support::con().await;
        let schedule =
            json!({"class": "Forward", "queue": "orders", "args": ["next"], "every": "1s"});
        let _: () = con
            .hset(keys.persistent_schedules(), "tick", schedule.to_string())
            .await
            .expect("hset");
        let _: () = con
            .sadd(keys.schedules_changed(), "tick")
            .await
            .expect("sadd");
    }
    let worker = WorkerProc::start(&url, &ns, 1, &env);
    let echo = echoed(&ns, 1).await;
    let fired = p_first_trace(&echo);
    let t = blocking_trace(&jaeger, &fired, 4).await;
    let fire = t.span("resq-scheduler", "orders send");
    assert!(fire.refs().is_empty(), "a fire starts a trace");
    fire.assert_messaging("producer", "orders", "Forward", "send");
    t.span("resq-scheduler", "orders process")
        .assert_child_of(&fire);
    drop(worker);

    // Ruby's default, propagation_style :link: the worker's span starts a new trace and links
    // to the producer's send span.
    // Its spans wait for a batch that never comes due (a minute): they leave when the worker
    // stops (QUIT), as a worker's last spans do.
    let ns = support::namespace("otel-link");
    let mut env = otel_env(&jaeger, "resq-linked");
    env.push(("OTEL_BSP_SCHEDULE_DELAY", "60000"));
    let mut worker = WorkerProc::start(&url, &ns, 1, &env);
    let p = produce(&jaeger, "resque", "default", "EchoPayload", json!([]));
    push(&ns, "default", &p.payload).await;
    echoed(&ns, 1).await;
    worker.signal("QUIT");
    assert!(worker.wait_exit(30).success(), "{}", worker.stderr());
    let linked = support::eventually(60, "the linked worker's trace", || {
        let j = jaeger.query.clone();
        async move {
            let traces = tokio::task::spawn_blocking(move || j.traces_of("resq-linked"))
                .await
                .ok()?;
            traces.into_iter().next()
        }
    })
    .await;
    let root = linked.span("resq-linked", "default process");
    assert_ne!(root.trace_id(), p.trace_id, "a trace of its own");
    assert_eq!(root.tag("messaging.resque.job_class"), json!("EchoPayload"));
    assert_eq!(
        root.refs(),
        vec![(
            "FOLLOWS_FROM".to_string(),
            p.trace_id.clone(),
            p.span_id.clone()
        )],
        "linked to the producer's send span"
    );

    // Tracing off — no endpoint, or OTEL_TRACES_EXPORTER=none whatever else is set: nothing
    // added to what a job enqueues (and no span exported).
    for (what, env) in [
        ("no endpoint", vec![("QUEUES", "orders,next")]),
        (
            "OTEL_TRACES_EXPORTER=none",
            vec![
                ("QUEUES", "orders,next"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", jaeger.otlp.as_str()),
                ("OTEL_SERVICE_NAME", "resq-off"),
                ("OTEL_TRACES_EXPORTER", "none"),
            ],
        ),
    ] {
        let ns = support::namespace("otel-off");
        let mut worker = WorkerProc::start(&url, &ns, 1, &env);
        push(&ns, "orders", r#"{"class":"Forward","args":["next"]}"#).await;
        let echo = echoed(&ns, 1).await;
        assert_eq!(
            echo[0],
            json!({"class": "EchoPayload", "args": ["forwarded"]}),
            "{what}"
        );
        worker.signal("QUIT");
        assert!(worker.wait_exit(30).success(), "{}", worker.stderr());
    }
    let services = get(&jaeger.query.0, "/api/services").expect("services").1;
    assert!(!services.contains("resq-off"), "{services}");
}

/// The trace id carried by the first echoed payload (the Python-started trace of (a)).
fn p_first_trace(echo: &[Value]) -> String {
    echo[0]["traceparent"]
        .as_str()
        .and_then(|t| t.split('-').nth(1))
        .unwrap_or_default()
        .to_string()
}

/// [`Query::trace`] off the async runtime's threads.
async fn blocking_trace(j: &Jaeger, id: &str, n: usize) -> Trace {
    let (q, id) = (j.query.clone(), id.to_string());
    tokio::task::spawn_blocking(move || q.trace(&id, n))
        .await
        .expect("join")
}
