// Scenario 3b: a job resq enqueued with tracking (`Client::enqueue_class_tracked`, payload
// {"class","args","resq_id"}) → a real node-resque Worker runs it. Proves node-resque ignores the
// extra field: every job runs with its args unchanged, no failure, no worker error. The record
// resq wrote at enqueue stays `queued`: only resq's workers (and resque-status's) move records.
"use strict";
const { Checks, viaJson, show } = require("../lib/check");
const { withContext } = require("../lib/context");
const { resqEnqueueTracked } = require("../lib/resq");
const { pollUntil } = require("../lib/wait");
const { ARG_CASES } = require("../lib/cases");

const NAMES = ["resq_id_node_worker"];
const Q = "tracked_from_resq";

async function run(config) {
  const checks = new Checks(NAMES[0]);
  await withContext(config, "resqid", async (ctx) => {
    const ids = [];
    for (const c of ARG_CASES) {
      ids.push(await checks.guard(`enqueue-tracked ${c.name}`, () => resqEnqueueTracked(config, ctx.ns, Q, "Echo", c.args)));
    }
    const stored = await ctx.redis.lrange(ctx.key("queue", Q), 0, -1);
    checks.ok("one payload per enqueue", stored.length === ARG_CASES.length, `${stored.length}`);
    stored.forEach((text, i) => {
      const c = ARG_CASES[i];
      if (!c) return;
      const payload = JSON.parse(text);
      checks.eq(`${c.name} payload keys`, Object.keys(payload), ["class", "args", "resq_id"]);
      checks.eq(`${c.name} resq_id`, payload.resq_id, ids[i]);
      checks.ok(`${c.name} resq_id shape`, /^[0-9a-f]{32}$/.test(payload.resq_id || ""), show(payload.resq_id));
    });

    const ran = [];
    const jobs = {
      Echo: {
        perform: async function (...args) {
          ran.push(viaJson(args));
        },
      },
    };
    const worker = await ctx.worker({ queues: [Q], timeout: 100 }, jobs);
    const failures = [];
    worker.on("failure", (queue, job, error) => failures.push(`${job.class}: ${error.message}`));
    const done = await pollUntil(() => ran.length >= ARG_CASES.length, { timeoutMs: 15000 });
    checks.ok("all tracked jobs ran on node-resque", done.ok, `${ran.length}/${ARG_CASES.length}`);
    ARG_CASES.forEach((c, i) => {
      if (checks.eq(`${c.name} args`, ran[i], viaJson(c.args))) checks.item();
    });
    checks.ok("no node-resque failures", failures.length === 0, failures.join(" | "));
    checks.ok("no node-resque worker errors", worker.errors.length === 0, worker.errors.map((e) => e.error.message).join(" | "));
    checks.eq("failed list", await ctx.redis.llen(ctx.key("failed")), 0);
    const record = ids[0] ? await ctx.redis.get(ctx.key("status", ids[0])) : null;
    const status = record ? JSON.parse(record).status : null;
    checks.note(`node-resque ignored resq_id; resq's record of a job another worker ran stays ${status}`);
  });
  return [checks];
}

module.exports = { NAMES, run };
