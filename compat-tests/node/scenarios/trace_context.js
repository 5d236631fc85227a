// Scenario: jobs resq enqueued with OpenTelemetry on (`resq enqueue` with the OTEL_* variables:
// the Resque form plus the W3C context as a top-level `traceparent`, the form Ruby's
// opentelemetry-instrumentation-resque writes) → a real node-resque Worker runs them. Proves
// node-resque ignores the extra member: each job runs once with exactly its args, no failure.
// resq exports its send spans to an OTLP/HTTP endpoint (a sink here that counts the POSTs).
"use strict";
const http = require("node:http");
const { Checks, viaJson } = require("../lib/check");
const { withContext } = require("../lib/context");
const { resqEnqueue } = require("../lib/resq");
const { pollUntil } = require("../lib/wait");

const NAMES = ["resq_trace_context_node_worker"];
const Q = "traced_from_resq";
const SENT = [[], [1, -5, "héllo 😀"], [{ a: [1, { b: null }] }, null, true]];

async function run(config) {
  const c = new Checks(NAMES[0]);
  let posts = 0;
  const sink = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (req.url === "/v1/traces") posts++;
      res.writeHead(200);
      res.end();
    });
  });
  await new Promise((resolve) => sink.listen(0, "127.0.0.1", resolve));
  const env = {
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sink.address().port}`,
    OTEL_SERVICE_NAME: "resq-compat",
  };
  try {
    await withContext(config, "resqtrace", async (ctx) => {
      for (const args of SENT) await c.guard("resq enqueue (traced)", () => resqEnqueue(config, ctx.ns, { queue: Q, env }, "Echo", args));
      const stored = await ctx.redis.lrange(ctx.key("queue", Q), 0, -1);
      c.eq("jobs queued", stored.length, SENT.length);
      for (const text of stored) {
        const payload = JSON.parse(text);
        c.eq("payload keys", Object.keys(payload), ["class", "args", "traceparent"]);
        c.ok("traceparent is W3C's", /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/.test(payload.traceparent), text);
      }
      c.ok("resq exported its spans over OTLP/HTTP", posts >= SENT.length, `${posts} POSTs to /v1/traces`);

      const ran = [];
      const jobs = { Echo: { perform: async (...args) => ran.push(viaJson(args)) } };
      const worker = await ctx.worker({ queues: [Q], timeout: 100 }, jobs);
      const failures = [];
      worker.on("failure", (queue, job, error) => failures.push(`${job.class}: ${error.message}`));
      const done = await pollUntil(() => ran.length >= SENT.length, { timeoutMs: 15000 });
      c.ok("all traced jobs ran", done.ok, `${ran.length}/${SENT.length}`);
      SENT.forEach((args, i) => {
        if (c.eq(`job ${i} args`, ran[i], viaJson(args))) c.item();
      });
      c.ok("no node-resque failures", failures.length === 0, failures.join(" | "));
      c.ok("no node-resque worker errors", worker.errors.length === 0, worker.errors.map((e) => e.error.message).join(" | "));
    });
  } finally {
    sink.close();
  }
  return [c];
}

module.exports = { NAMES, run };
