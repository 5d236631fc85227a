// Scenario 2: node-resque `Queue.enqueueIn` → resq's scheduler moves the items → resq runs them.
// Proves resq's scheduler reads node-resque's delayed items (same resque-scheduler keys, but
// node's {"class","queue","args"} item and a timestamp that node *rounds* to the second), moves
// them no earlier than the bucket's second and within 1.5 s of it, carries args unchanged,
// and cleans up the bucket, the schedule zset and the timestamps:<item> sets.
// Run twice, in parallel: scheduler inside compat_worker (RESQ_SCHEDULER=1) and `resq scheduler`.
"use strict";
const { isDeepStrictEqual } = require("node:util");
const { Checks, viaJson, show } = require("../lib/check");
const { withContext } = require("../lib/context");
const { startCompatWorker, startResqScheduler } = require("../lib/resq");
const { collectList, pollUntil } = require("../lib/wait");

const NAMES = ["node_enqueue_in_resq_scheduler_inproc", "node_enqueue_in_resq_scheduler_cli"];
const Q = "delayed_from_node";
const MAX_LATE_MS = 1500;

const JOBS = [
  { cls: "Echo", args: ["in2", 1], delayMs: 2000 },
  { cls: "EchoPayload", args: ["in2-payload", { k: [1.5, null] }], delayMs: 2000 },
  { cls: "Echo", args: ["in3", { x: "ü" }], delayMs: 3000 },
];

async function run(config) {
  return Promise.all([
    one(config, NAMES[0], { inproc: true }),
    one(config, NAMES[1], { inproc: false }),
  ]);
}

async function one(config, name, { inproc }) {
  const checks = new Checks(name);
  await withContext(config, inproc ? "in-inproc" : "in-cli", async (ctx) => {
    const worker = await startCompatWorker(config, ctx.redis, { namespace: ctx.ns, queues: Q, concurrency: 2, scheduler: inproc });
    ctx.defer(() => worker.stop());
    let scheduler = null;
    if (!inproc) {
      scheduler = startResqScheduler(config, ctx.ns);
      ctx.defer(() => scheduler.stop());
    }
    const queue = await ctx.queue();
    for (const j of JOBS) await queue.enqueueIn(j.delayMs, Q, j.cls, j.args);

    // The due second of each item is where node-resque filed it (its bucket), not now+delay.
    const due = new Map(); // item text -> bucket second
    for (const ts of await ctx.redis.zrange(ctx.key("delayed_queue_schedule"), 0, -1)) {
      for (const item of await ctx.redis.lrange(ctx.key(`delayed:${ts}`), 0, -1)) due.set(item, Number(ts));
    }
    checks.ok("node-resque wrote one item per job", due.size === JOBS.length, `${due.size} items`);

    const echoes = await collectList(ctx.blocking, ctx.key("compat", "echo"), JOBS.length, 15000);
    if (scheduler && scheduler.exit()) checks.note(`resq scheduler exited ${JSON.stringify(scheduler.exit())}: ${scheduler.stderr().trim().slice(-160)}`);
    const lateness = [];
    for (const j of JOBS) {
      const item = queue.encode(Q, j.cls, j.args);
      const dueMs = due.get(item) * 1000;
      const want = viaJson(j.args);
      const hit = echoes.find((e) => {
        const v = JSON.parse(e.text);
        return j.cls === "Echo" ? isDeepStrictEqual(v, want) : !Array.isArray(v) && isDeepStrictEqual(v.args, want);
      });
      if (!checks.ok(`${j.args[0]} ran`, hit !== undefined, `not run within 15 s; echoes ${show(echoes.map((e) => e.text))}`)) continue;
      checks.item();
      const late = hit.at - dueMs;
      lateness.push(late);
      checks.ok(`${j.args[0]} not before its second`, late >= -5, `${late} ms`);
      checks.ok(`${j.args[0]} within ${MAX_LATE_MS} ms of due`, late <= MAX_LATE_MS, `${late} ms late`);
      if (j.cls === "EchoPayload") {
        const moved = JSON.parse(hit.text);
        checks.eq("moved payload class", moved.class, j.cls);
        checks.note(`moved payload keys ${Object.keys(moved).join(",")}`);
      }
    }
    checks.note(`late ms ${lateness.join(",")}`);

    // Clean-up of the resque-scheduler keys happens after the move; give it a moment.
    const clean = await pollUntil(async () => {
      const [zcard, buckets, stamps] = await Promise.all([
        ctx.redis.zcard(ctx.key("delayed_queue_schedule")),
        ctx.keys("delayed:*"),
        ctx.keys("timestamps:*"),
      ]);
      return zcard === 0 && buckets.length === 0 && stamps.length === 0 ? true : null;
    }, { timeoutMs: 3000 });
    checks.ok("schedule, buckets and timestamps sets cleaned", clean.ok, "keys left behind");
    const failed = await ctx.redis.lrange(ctx.key("failed"), 0, -1);
    checks.ok("no failures", failed.length === 0, failed.join(" ").slice(0, 200));
    const stopped = await worker.stop();
    checks.ok("compat_worker exits 0 on QUIT", stopped.code === 0 && !stopped.forced, JSON.stringify(stopped));
  });
  return checks;
}

module.exports = { NAMES, run };
