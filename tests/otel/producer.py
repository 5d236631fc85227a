"""A Rails-like producer for tests/otel_trace.rs, on the real OpenTelemetry Python SDK.

Starts a trace (a server span `POST /checkout`), and inside it a producer span
`<queue> send` whose context it writes into a Resque job the way the Ruby instrumentation does:
`resque` form — top-level `traceparent`/`tracestate` members (opentelemetry-instrumentation-
resque's Resque.push); `activejob` form — a Rails ActiveJob wrapper whose job data carries
`__otel_headers` as Active Job's argument serializer leaves a hash: a list of [key, value]
pairs. Exports over OTLP/HTTP to argv[1] and prints one JSON line: the payload text, the trace
id and the send span's id.

usage: producer.py ENDPOINT FORM QUEUE CLASS ARGS_JSON
"""

import json
import sys
import uuid

from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind

endpoint, form, queue, klass, args = sys.argv[1:6]
args = json.loads(args)

provider = TracerProvider(resource=Resource.create({"service.name": "rails-producer"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint + "/v1/traces")))
tracer = provider.get_tracer("producer")

with tracer.start_as_current_span("POST /checkout", kind=SpanKind.SERVER):
    attributes = {
        "messaging.system": "resque",
        "messaging.destination": queue,
        "messaging.destination_kind": "queue",
        "messaging.resque.job_class": klass,
    }
    with tracer.start_as_current_span(queue + " send", kind=SpanKind.PRODUCER, attributes=attributes) as send:
        if form == "resque":
            item = {"class": klass, "args": args}
            propagate.inject(item)
        else:
            headers = {}
            propagate.inject(headers)
            item = {
                "class": "ActiveJob::QueueAdapters::ResqueAdapter::JobWrapper",
                "args": [
                    {
                        "job_class": klass,
                        "job_id": str(uuid.uuid4()),
                        "provider_job_id": None,
                        "queue_name": queue,
                        "priority": None,
                        "arguments": args,
                        "executions": 0,
                        "exception_executions": {},
                        "locale": "en",
                        "timezone": "UTC",
                        "enqueued_at": "2026-11-29T00:00:00Z",
                        "__otel_headers": [[k, v] for k, v in headers.items()],
                    }
                ],
            }
        ctx = send.get_span_context()
        out = {
            "payload": json.dumps(item, separators=(",", ":")),
            "trace_id": format(ctx.trace_id, "032x"),
            "span_id": format(ctx.span_id, "016x"),
        }

provider.shutdown()
print(json.dumps(out))
