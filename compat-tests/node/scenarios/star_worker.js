// Scenario 5: does a node-resque Worker with queues "*" choke on anything resq writes?
// First a namespace holding everything resq produces in Resque form — registered resq slots
// (ids, started, heartbeats), a failure, stats, a delayed item, jobs on queues whose names
// contain ":", "." and "-", and a Jesque-form payload ({"class","args","vars"}): node-resque
// must run the Echo jobs and emit no error. Then resq's Jesque-form *delayed* job, which turns
// <ns>:queue:<q> into a ZSET and adds q to <ns>:queues (wire-format §9.2, §14.1).
"use strict";
const { isDeepStrictEqual } = require("node:util");
const { Checks, viaJson, show } = require("../lib/check");
const { withContext } = require("../lib/context");
const { startCompatWorker, resqEnqueue } = require("../lib/resq");
const { pollUntil } = require("../lib/wait");

const NAMES = ["star_worker_resque_data", "star_worker_jesque_zset"];

const JOBS = [
  { queue: "s_a", args: ["a", 1] },
  { queue: "s_b:colon", args: ["colon", { z: null }] },
  { queue: "s-c.dots", args: ["dots", 2.5] },
  { queue: "s_jesque", args: ["jesque-form", 3], jesque: true },
];

function echoJobs(ran) {
  return {
    Echo: {
      perform: async function (...args) {
        ran.push({ queue: this.queue, args: viaJson(args), at: Date.now() });
      },
    },
  };
}

async function run(config) {
  const data = new Checks(NAMES[0]);
  const zset = new Checks(NAMES[1]).peerLimitation("a `*` worker gets WRONGTYPE on a Jesque zset queue and starves the queues after it (wire-format 14.1)");
  await withContext(config, "star", async (ctx) => {
    // resq's own footprint: a live worker on its own queue, one failure, one delayed item.
    const resq = await startCompatWorker(config, ctx.redis, { namespace: ctx.ns, queues: "s_resq", concurrency: 2 });
    ctx.defer(() => resq.stop());
    await resqEnqueue(config, ctx.ns, { queue: "s_resq" }, "Fail", ["for the failed list"]);
    await data.guard("resq enqueue --in", () => resqEnqueue(config, ctx.ns, { queue: "s_resq_later", inSecs: 300 }, "Echo", ["later"]));
    const failedOne = await pollUntil(async () => (await ctx.redis.llen(ctx.key("failed"))) === 1, { timeoutMs: 10000 });
    data.ok("resq recorded its failure", failedOne.ok, "no failure entry");
    for (const j of JOBS) await resqEnqueue(config, ctx.ns, { queue: j.queue, jesque: j.jesque }, "Echo", j.args);

    const ran = [];
    const worker = await ctx.worker({ queues: "*", timeout: 100 }, echoJobs(ran));
    const done = await pollUntil(() => ran.length >= JOBS.length, { timeoutMs: 10000 });
    data.ok("node worker ran every resq job", done.ok, `${ran.length}/${JOBS.length}: ${show(ran.map((r) => r.queue))}`);
    for (const j of JOBS) {
      const hit = ran.find((r) => r.queue === j.queue);
      if (data.ok(`job on ${j.queue} ran`, hit !== undefined, "not run") && data.eq(`${j.queue} args`, hit.args, viaJson(j.args))) data.item();
    }
    data.ok("no node-resque worker errors", worker.errors.length === 0, worker.errors.map((e) => `${e.queue}: ${e.error.message}`).join(" | "));
    data.note(`node expanded * to ${show(worker.queues)}`);
    await worker.end();

    // Now a Jesque-form delayed job on a queue sorting before the others.
    ran.length = 0;
    await zset.guard("resq enqueue --jesque --in", () => resqEnqueue(config, ctx.ns, { queue: "a_jesque_delayed", jesque: true, inSecs: 300 }, "Echo", ["jesque-delayed"]));
    const type = await ctx.redis.type(ctx.key("queue", "a_jesque_delayed"));
    zset.note(`queue:a_jesque_delayed is a ${type}`);
    await resqEnqueue(config, ctx.ns, { queue: "s_a" }, "Echo", ["after zset"]);
    const starWorker = await ctx.worker({ queues: "*", timeout: 100 }, echoJobs(ran));
    const after = await pollUntil(() => ran.find((r) => isDeepStrictEqual(r.args, ["after zset"])), { timeoutMs: 3000 });
    zset.item();
    zset.ok("job on s_a still runs", after.ok, "starved for 3 s");
    const wrongType = starWorker.errors.filter((e) => /WRONGTYPE/.test(e.error.message));
    zset.ok("no worker errors", starWorker.errors.length === 0, `${starWorker.errors.length} errors (${wrongType.length} WRONGTYPE on ${show([...new Set(starWorker.errors.map((e) => e.queue))])})`);
  });
  return [data, zset];
}

module.exports = { NAMES, run };
