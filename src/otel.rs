//! OpenTelemetry: W3C trace context read from and written into Resque payloads, spans exported
//! over OTLP/HTTP (protobuf). Configured only by the standard `OTEL_*` variables and off unless
//! they ask for it: with neither `OTEL_EXPORTER_OTLP_ENDPOINT` nor
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` set (or with `OTEL_TRACES_EXPORTER=none`,
//! `OTEL_SDK_DISABLED=true`) nothing is built, the worker's chain has no tracing layer and the
//! client writes no context. How a worker relates its span to the producer's and how spans are
//! named follow opentelemetry-instrumentation-resque's options (`propagation_style`,
//! `span_naming`), read from `RESQ_OTEL_PROPAGATION_STYLE` and `RESQ_OTEL_SPAN_NAMING`.
//!
//! The wire form is the Ruby instrumentation's: `traceparent` (and `tracestate` when not empty)
//! as top-level members of the payload (Resque, Sidekiq); Active Job's instrumentation puts the
//! same members in the job data's `__otel_headers`, a hash or, after Active Job's argument
//! serializer, a list of `[key, value]` pairs.

use opentelemetry::propagation::{Injector, TextMapPropagator};
use opentelemetry::trace::{
    Link, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState,
    Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use serde_json::{Map, Value};
use std::str::FromStr;
use std::sync::OnceLock;

/// Where Active Job's instrumentation carries the context inside the job data.
const AJ_HEADERS: &str = "__otel_headers";

/// How a worker's span relates to the producer's (opentelemetry-instrumentation-resque's
/// `propagation_style`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Propagation {
    /// A new trace whose root links to the producer's span (Ruby's default).
    Link,
    /// A child of the producer's span, in its trace.
    Child,
    /// A new trace, unrelated.
    None,
}

/// What a span is named after (`span_naming`): `<queue> process` or `<class> process`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Naming {
    /// The queue (Ruby's default).
    Queue,
    /// The job class.
    JobClass,
}

/// The installed pipeline.
pub(crate) struct Otel {
    /// The exporting provider (flushed at exit).
    provider: SdkTracerProvider,
    /// resq's tracer.
    tracer: SdkTracer,
    /// `RESQ_OTEL_PROPAGATION_STYLE`.
    pub(crate) propagation: Propagation,
    /// `RESQ_OTEL_SPAN_NAMING`.
    pub(crate) naming: Naming,
}

/// Built on first use, from the environment; `None` when tracing is off.
static OTEL: OnceLock<Option<Otel>> = OnceLock::new();

/// The pipeline, when the environment turns tracing on (read once per process).
pub(crate) fn get() -> Option<&'static Otel> {
    OTEL.get_or_init(from_env).as_ref()
}

/// Whether tracing is on in this process.
pub(crate) fn enabled() -> bool {
    get().is_some()
}

/// Exports every span ended so far (a short-lived process calls it before it exits).
pub fn flush() {
    if let Some(Some(o)) = OTEL.get() {
        if let Err(e) = o.provider.force_flush() {
            tracing::warn!(error = %e, "OpenTelemetry: spans not exported");
        }
    }
}

/// The pipeline the variables ask for, or `None`.
fn from_env() -> Option<Otel> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return None;
    }
    // A list (`otlp,console`): tracing is on when it names otlp, the one exporter built in.
    if let Some(list) = var("OTEL_TRACES_EXPORTER") {
        let names: Vec<String> = list
            .split(',')
            .map(|n| n.trim().to_ascii_lowercase())
            .collect();
        if !names.iter().any(|n| n == "otlp") {
            if names.iter().any(|n| n != "none") {
                tracing::warn!(
                    exporter = list,
                    "OpenTelemetry: only the otlp exporter is built in; tracing off"
                );
            }
            return None;
        }
    }
    if var("OTEL_EXPORTER_OTLP_ENDPOINT").is_none()
        && var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none()
    {
        return None;
    }
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
    {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(error = %e, "OpenTelemetry: no exporter, tracing off");
            return None;
        }
    };
    // The resource reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, the sampler
    // OTEL_TRACES_SAMPLER(_ARG), the exporter OTEL_EXPORTER_OTLP_* (the SDK's own readers).
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(opentelemetry_sdk::Resource::builder().build())
        .build();
    let tracer = provider.tracer_with_scope(
        opentelemetry::InstrumentationScope::builder("resq")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build(),
    );
    let unknown = |name: &str, value: &str, default: &str| {
        tracing::warn!(
            variable = name,
            value,
            "OpenTelemetry: unknown value, using {default}"
        );
    };
    let propagation = match var("RESQ_OTEL_PROPAGATION_STYLE").as_deref() {
        Some("child") => Propagation::Child,
        Some("none") => Propagation::None,
        None | Some("link") => Propagation::Link,
        Some(v) => {
            unknown("RESQ_OTEL_PROPAGATION_STYLE", v, "link");
            Propagation::Link
        }
    };
    let naming = match var("RESQ_OTEL_SPAN_NAMING").as_deref() {
        Some("job_class") => Naming::JobClass,
        None | Some("queue") => Naming::Queue,
        Some(v) => {
            unknown("RESQ_OTEL_SPAN_NAMING", v, "queue");
            Naming::Queue
        }
    };
    Some(Otel {
        provider,
        tracer,
        propagation,
        naming,
    })
}

/// The parts of a job its spans describe.
pub(crate) struct JobFacts<'a> {
    /// The queue.
    pub queue: &'a str,
    /// The class dispatched by (an Active Job job's `job_class`).
    pub class: &'a str,
    /// The message id (Active Job's `job_id`, a tracked job's id), when it has one.
    pub id: Option<&'a str>,
    /// Which run this is (1 for the first), when the payload says.
    pub attempt: Option<u64>,
}

impl Otel {
    /// The span name for `facts` and `operation` (`process`, `send`).
    fn name(&self, facts: &JobFacts<'_>, operation: &str) -> String {
        match self.naming {
            Naming::Queue => format!("{} {operation}", facts.queue),
            Naming::JobClass => format!("{} {operation}", facts.class),
        }
    }

    /// The attributes of a span for `facts`: the Ruby instrumentation's names and the
    /// messaging conventions' current ones.
    fn attributes(facts: &JobFacts<'_>, operation: &'static str) -> Vec<KeyValue> {
        let mut a = vec![
            KeyValue::new("messaging.system", "resque"),
            KeyValue::new("messaging.destination", facts.queue.to_string()),
            KeyValue::new("messaging.destination.name", facts.queue.to_string()),
            KeyValue::new("messaging.destination_kind", "queue"),
            KeyValue::new("messaging.operation.type", operation),
            KeyValue::new("messaging.resque.job_class", facts.class.to_string()),
        ];
        if let Some(id) = facts.id {
            a.push(KeyValue::new("messaging.message.id", id.to_string()));
        }
        if let Some(n) = facts.attempt {
            a.push(KeyValue::new("messaging.resque.attempt", n as i64));
        }
        a
    }

    /// Starts the consumer span of a job whose payload carried `parent` (an empty context when
    /// it carried none): a child, or a root linked to it, per the propagation style. Returns
    /// the context holding the span.
    pub(crate) fn start_process(&self, parent: &Context, facts: &JobFacts<'_>) -> Context {
        let remote = parent.span().span_context().clone();
        let mut builder = self
            .tracer
            .span_builder(self.name(facts, "process"))
            .with_kind(SpanKind::Consumer)
            .with_attributes(Self::attributes(facts, "process"));
        let parent_cx = match self.propagation {
            Propagation::Child => parent.clone(),
            Propagation::Link => {
                if remote.is_valid() {
                    builder = builder.with_links(vec![Link::with_context(remote)]);
                }
                Context::new()
            }
            Propagation::None => Context::new(),
        };
        let span = builder.start_with_context(&self.tracer, &parent_cx);
        parent_cx.with_span(span)
    }

    /// Starts the producer span of an enqueue (`<queue> send`, as Ruby's `Resque.push`), a
    /// child of the current context, and writes its context into `extra`.
    pub(crate) fn start_send(
        &self,
        facts: &JobFacts<'_>,
        extra: &mut Map<String, Value>,
    ) -> Context {
        let parent = Context::current();
        let span = self
            .tracer
            .span_builder(self.name(facts, "send"))
            .with_kind(SpanKind::Producer)
            .with_attributes(Self::attributes(facts, "send"))
            .start_with_context(&self.tracer, &parent);
        let cx = parent.with_span(span);
        inject(&cx, extra);
        cx
    }
}

impl Otel {
    /// [`Otel::start_send`] for an encoded payload (a recurring schedule's fire): the payload
    /// with the context members appended, or `None` when it is not a JSON object.
    pub(crate) fn start_send_encoded(
        &self,
        queue: &str,
        payload: &str,
    ) -> Option<(Context, String)> {
        let object: Map<String, Value> = serde_json::from_str(payload).ok()?;
        let body = payload.trim_end().strip_suffix('}')?;
        // An ActiveJob wrapper is named by its job_class, as Ruby's Resque.push names it.
        let class = match object.get("class").and_then(Value::as_str) {
            Some(c) if crate::wire::activejob::is_wrapper(c) => object
                .get("args")
                .and_then(|a| a.get(0))
                .and_then(|d| d.get("job_class"))
                .and_then(Value::as_str)
                .unwrap_or(c),
            c => c.unwrap_or_default(),
        };
        let facts = JobFacts {
            queue,
            class,
            id: None,
            attempt: None,
        };
        let mut members = Map::new();
        let cx = self.start_send(&facts, &mut members);
        let mut out = body.to_string();
        for (k, v) in members {
            if !object.is_empty() {
                out.push(',');
            }
            out.push_str(&Value::String(k).to_string());
            out.push(':');
            out.push_str(&v.to_string());
        }
        out.push('}');
        Some((cx, out))
    }
}

/// A producer span over a push of encoded bytes ([`Otel::start_send_encoded`]): the span's
/// context and `bytes` carrying it when tracing is on; no span and `bytes` unchanged otherwise.
pub(crate) fn send_encoded(queue: &str, bytes: String) -> (Option<Context>, String) {
    match get().and_then(|o| o.start_send_encoded(queue, &bytes)) {
        Some((cx, traced)) => (Some(cx), traced),
        None => (None, bytes),
    }
}

/// Ends the span of [`send_encoded`] with the outcome of the push.
pub(crate) fn end_send<T, E: std::fmt::Display>(cx: Option<Context>, pushed: &Result<T, E>) {
    if let Some(cx) = cx {
        let err = pushed.as_ref().err().map(ToString::to_string);
        end(&cx, err.as_deref().map(|m| ("Resq::EnqueueError", m)));
    }
}

/// Ends the span in `cx`, recording `error` (exception type and message) with status Error as
/// Ruby's instrumentation does.
pub(crate) fn end(cx: &Context, error: Option<(&str, &str)>) {
    let span = cx.span();
    if let Some((exception, message)) = error {
        span.add_event(
            "exception",
            vec![
                KeyValue::new("exception.type", exception.to_string()),
                KeyValue::new("exception.message", message.to_string()),
            ],
        );
        span.set_status(Status::error(format!(
            "Unhandled exception of type: {exception}"
        )));
    }
    span.end();
}

/// Writes the context of `cx` into `extra` as `traceparent` (and `tracestate` when not empty).
pub(crate) fn inject(cx: &Context, extra: &mut Map<String, Value>) {
    TraceContextPropagator::new().inject_context(cx, &mut MapInjector(extra));
}

/// The remote context a payload carries: its top-level members, or else an Active Job
/// wrapper's `__otel_headers` (hash or pairs). An empty context when neither is valid.
pub(crate) fn extract(payload: &Map<String, Value>) -> Context {
    if let Some(sc) = remote(payload) {
        return Context::new().with_remote_span_context(sc);
    }
    let headers = payload
        .get("args")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(|d| d.get(AJ_HEADERS));
    let Some(headers) = headers else {
        return Context::new();
    };
    let mut flat = Map::new();
    match headers {
        Value::Object(m) => {
            for (k, v) in m {
                if let Value::String(s) = v {
                    flat.insert(k.clone(), Value::String(s.clone()));
                }
            }
        }
        Value::Array(pairs) => {
            for pair in pairs {
                if let Some([Value::String(k), Value::String(v)]) =
                    pair.as_array().map(Vec::as_slice)
                {
                    flat.insert(k.clone(), Value::String(v.clone()));
                }
            }
        }
        _ => {}
    }
    match remote(&flat) {
        Some(sc) => Context::new().with_remote_span_context(sc),
        None => Context::new(),
    }
}

/// The span context of a carrier's `traceparent` (and `tracestate`), read as Ruby's
/// `TraceParent.from_string` reads it: two hex digits of version (not `ff`), 32 of trace id
/// and 16 of span id (neither all zeros, either case), two of flags of which only `sampled`
/// is kept — whatever other flags are set (W3C level 2's `random`, `03`, which the Python SDK
/// writes and `TraceContextPropagator` 0.31 refuses) — and anything after a further `-`
/// ignored.
fn remote(carrier: &Map<String, Value>) -> Option<SpanContext> {
    let text = carrier.get("traceparent")?.as_str()?;
    let mut parts = text.splitn(5, '-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !(hex(version, 2) && hex(trace, 32) && hex(span, 16) && hex(flags, 2)) {
        return None;
    }
    if version.eq_ignore_ascii_case("ff") {
        return None;
    }
    let trace = TraceId::from_hex(&trace.to_ascii_lowercase()).ok()?;
    let span = SpanId::from_hex(&span.to_ascii_lowercase()).ok()?;
    if trace == TraceId::INVALID || span == SpanId::INVALID {
        return None;
    }
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let state = carrier
        .get("tracestate")
        .and_then(Value::as_str)
        .and_then(|s| TraceState::from_str(s).ok())
        .unwrap_or_default();
    Some(SpanContext::new(
        trace,
        span,
        TraceFlags::new(flags) & TraceFlags::SAMPLED,
        true,
        state,
    ))
}

/// Writes members into a payload's extra fields (an empty value is left out, as Ruby's
/// propagator leaves out an empty `tracestate`).
struct MapInjector<'a>(&'a mut Map<String, Value>);

impl Injector for MapInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if !value.is_empty() {
            self.0.insert(key.to_string(), Value::String(value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TP: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    fn ids(cx: &Context) -> (String, String) {
        let sc = cx.span().span_context().clone();
        (sc.trace_id().to_string(), sc.span_id().to_string())
    }

    fn expect_remote(payload: Value) {
        let cx = extract(payload.as_object().expect("object"));
        assert_eq!(
            ids(&cx),
            (
                "0af7651916cd43dd8448eb211c80319c".to_string(),
                "b7ad6b7169203331".to_string()
            ),
            "{payload}"
        );
    }

    #[test]
    fn reads_top_level_members() {
        expect_remote(json!({"class": "A", "args": [], "traceparent": TP}));
        expect_remote(json!({"class": "A", "args": [], "traceparent": TP, "tracestate": "k=v"}));
        // What Ruby's TraceParent.from_string also reads: other flags (W3C level 2's random
        // flag, as the Python SDK writes `03`), upper case, a later version with more fields.
        for tp in [
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03",
            "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-future",
        ] {
            expect_remote(json!({"class": "A", "args": [], "traceparent": tp}));
        }
        let cx = extract(
            json!({"traceparent": TP, "tracestate": "k=v"})
                .as_object()
                .expect("o"),
        );
        assert_eq!(cx.span().span_context().trace_state().header(), "k=v");
        assert!(cx.span().span_context().is_sampled());
    }

    #[test]
    fn reads_active_job_headers_as_pairs_or_hash() {
        let wrap = |h: Value| {
            json!({"class": "ActiveJob::QueueAdapters::ResqueAdapter::JobWrapper",
                   "args": [{"job_class": "J", "arguments": [], "__otel_headers": h}]})
        };
        expect_remote(wrap(json!([["traceparent", TP]])));
        expect_remote(wrap(json!([["traceparent", TP], ["tracestate", "k=v"]])));
        expect_remote(wrap(json!({"traceparent": TP, "_aj_symbol_keys": []})));
        expect_remote(wrap(json!({"traceparent": TP, "_aj_ruby2_keywords": []})));
    }

    #[test]
    fn anything_else_is_no_context() {
        for p in [
            json!({"class": "A", "args": []}),
            json!({"class": "A", "args": [], "traceparent": "garbage"}),
            json!({"traceparent": "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}),
            json!({"traceparent": "00-00000000000000000000000000000000-b7ad6b7169203331-01"}),
            json!({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01"}),
            json!({"traceparent": "00-0af7651916cd43dd8448eb211c80319-b7ad6b7169203331-01"}),
            json!({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331"}),
            json!({"class": "A", "args": [], "traceparent": 5}),
            json!({"class": "A", "args": [{"__otel_headers": "x"}]}),
            json!({"class": "A", "args": [{"__otel_headers": [["traceparent"]]}]}),
            json!({"class": "A", "args": [{"__otel_headers": [[1, 2]]}]}),
        ] {
            let cx = extract(p.as_object().expect("object"));
            assert!(!cx.span().span_context().is_valid(), "{p}");
        }
    }

    #[test]
    fn appends_members_to_an_encoded_payload() {
        let cx = extract(json!({"traceparent": TP}).as_object().expect("object"));
        let _attached = cx.attach();
        let o = Otel {
            provider: SdkTracerProvider::builder().build(),
            tracer: SdkTracerProvider::builder().build().tracer("t"),
            propagation: Propagation::Child,
            naming: Naming::Queue,
        };
        let (sent, text) = o
            .start_send_encoded("q", r#"{"class":"A","args":[1.50]}"#)
            .expect("object");
        let (trace, span) = ids(&sent);
        assert_eq!(
            trace, "0af7651916cd43dd8448eb211c80319c",
            "child of the current span"
        );
        assert_eq!(
            text,
            format!(r#"{{"class":"A","args":[1.50],"traceparent":"00-{trace}-{span}-01"}}"#)
        );
        assert!(o.start_send_encoded("q", "[1]").is_none());
        // The ActiveJob wrapper, as Rails' Resque adapter pushes it.
        let wrapper = r#"{"class":"ActiveJob::QueueAdapters::ResqueAdapter::JobWrapper","args":[{"job_class":"SendInvoiceJob","arguments":[]}]}"#;
        let (_, text) = o.start_send_encoded("mailers", wrapper).expect("object");
        let v: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(v["args"][0]["job_class"], "SendInvoiceJob");
        assert!(
            text.starts_with(&wrapper[..wrapper.len() - 1]),
            "bytes kept: {text}"
        );
        assert!(v["traceparent"].is_string(), "{text}");
    }

    #[test]
    fn writes_ruby_form_without_empty_tracestate() {
        let cx = extract(json!({"traceparent": TP}).as_object().expect("object"));
        let mut extra = Map::new();
        inject(&cx, &mut extra);
        assert_eq!(Value::Object(extra), json!({"traceparent": TP}));
    }
}
