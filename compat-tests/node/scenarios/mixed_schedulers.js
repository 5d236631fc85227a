// Scenario 6 (measurement): node-resque's Scheduler and resq's scheduler on one namespace.
// Their leader locks differ (<ns>:resque_scheduler_leader_lock vs
// <ns>:<ns>:resque_scheduler_master_lock), so both move the same due buckets at once
// (wire-format §9.4). Checks that each of 300 delayed jobs runs exactly once anyway, and
// reports who moved what: node-resque re-enqueues {"class","queue","args"}, resq {"class","args"}.
"use strict";
const { Checks } = require("../lib/check");
const { withContext } = require("../lib/context");
const { startCompatWorker, startResqScheduler } = require("../lib/resq");
const { pollUntil } = require("../lib/wait");

const NAMES = ["mixed_schedulers_exactly_once"];
const Q = "mixed";
const N = 300;

async function run(config) {
  const checks = new Checks(NAMES[0]);
  await withContext(config, "mixed", async (ctx) => {
    const worker = await startCompatWorker(config, ctx.redis, { namespace: ctx.ns, queues: Q, concurrency: 2 });
    ctx.defer(() => worker.stop());
    const queue = await ctx.queue();
    // All due in the same second, a little ahead, so both schedulers are polling when it comes.
    const dueMs = (Math.floor(Date.now() / 1000) + 2) * 1000 + 100;
    for (let i = 0; i < N; i++) await queue.enqueueAt(dueMs, Q, "EchoPayload", [i]);
    const resq = startResqScheduler(config, ctx.ns);
    ctx.defer(() => resq.stop());
    await ctx.scheduler({ timeout: 1000 });

    // Settled = nothing left delayed, queued or in progress; only then count (no fixed sleep).
    const settled = await pollUntil(async () => {
      const [zcard, qlen, busy] = await Promise.all([
        ctx.redis.zcard(ctx.key("delayed_queue_schedule")),
        ctx.redis.llen(ctx.key("queue", Q)),
        Promise.all(worker.ids.map((id) => ctx.redis.exists(ctx.key("worker", id)))),
      ]);
      return zcard === 0 && qlen === 0 && busy.every((n) => n === 0) && (await ctx.redis.llen(ctx.key("compat", "echo"))) >= N;
    }, { timeoutMs: 15000 });
    const payloads = (await ctx.redis.lrange(ctx.key("compat", "echo"), 0, -1)).map((t) => JSON.parse(t));
    const echoes = payloads.map((p) => p.args[0]);
    const byNode = payloads.filter((p) => "queue" in p).length;
    const seen = new Map();
    for (const i of echoes) seen.set(i, (seen.get(i) || 0) + 1);
    const lost = [...Array(N).keys()].filter((i) => !seen.has(i));
    const dup = [...seen].filter(([, n]) => n > 1).map(([i]) => i);
    checks.item(N);
    checks.ok("settled", settled.ok, "delayed/queued jobs left after 15 s");
    checks.ok("no job lost", lost.length === 0, `${lost.length} lost, e.g. ${lost.slice(0, 5)}`);
    checks.ok("no job run twice", dup.length === 0, `${dup.length} duplicated, e.g. ${dup.slice(0, 5)}`);
    checks.note(`${echoes.length} runs for ${N} jobs, ${byNode} moved by node-resque, ${payloads.length - byNode} by resq; resq lock ${await ctx.redis.exists(ctx.key(ctx.ns, "resque_scheduler_master_lock"))}, node lock ${await ctx.redis.exists(ctx.key("resque_scheduler_leader_lock"))}`);
  });
  return [checks];
}

module.exports = { NAMES, run };
