// Scenario 4: node-resque's admin API (Queue) reads what resq writes.
// A resq compat_worker with two slots works queues adm_a,adm_b; node-resque's Queue then
// lists its workers, what they work on, its failures (Fail, Panic, an unknown class, a
// malformed payload), its stats, queue lengths and resq's delayed items. Each API gets its own
// RESULT line so that one known gap does not hide the others.
"use strict";
const { Checks } = require("../lib/check");
const { withContext } = require("../lib/context");
const { startCompatWorker } = require("../lib/resq");
const { QA, QB } = require("./admin/shared");
const { checkWorkers, checkWorking, checkCleanOld } = require("./admin/workers");
const { checkFailed, checkStats } = require("./admin/failures");
const { checkLength, checkDelayed } = require("./admin/queues");

const NAMES = [
  "admin_workers",
  "admin_working_on",
  "admin_all_working_on_attribution",
  "admin_failed",
  "admin_failed_retry",
  "admin_failed_retry_malformed",
  "admin_stats",
  "admin_length",
  "admin_delayed_read",
  "admin_match_by_args",
  "admin_clean_old_workers",
];
async function run(config) {
  const c = Object.fromEntries(NAMES.map((n) => [n, new Checks(n)]));
  // Documented node-resque limitations (README "Findings" 1-4): asserted, reported as KNOWN.
  c.admin_all_working_on_attribution.peerLimitation("allWorkingOn() keys records by a node-only `worker` field, so non-node workers collapse under 'undefined'");
  c.admin_failed_retry_malformed.peerLimitation("retryAndRemoveFailed() removes the entry, then throws on a null payload");
  c.admin_match_by_args.peerLimitation("del/scheduledAt/delDelayed match node's own {class,queue,args} bytes only (Ruby's and resq's never match)");
  c.admin_clean_old_workers.peerLimitation("cleanOldWorkers() needs the node-only `worker` field; it bumps stat:failed and cleans nothing");
  await withContext(config, "admin", async (ctx) => {
    const worker = await startCompatWorker(config, ctx.redis, { namespace: ctx.ns, queues: `${QA},${QB}`, concurrency: 2 });
    ctx.defer(() => worker.stop());
    const queue = await ctx.queue();
    const ids = worker.ids;

    const workers = await c.admin_workers.guard("queue.workers()", () => queue.workers());
    if (workers) checkWorkers(c.admin_workers, workers, ids);

    // Each step guards itself, so a missing feature fails its own line only.
    await c.admin_working_on.guard("working-on step", () => checkWorking(ctx, queue, ids, workers || {}, c.admin_working_on, c.admin_all_working_on_attribution));
    await c.admin_failed.guard("failed step", () => checkFailed(ctx, queue, ids, c.admin_failed, c.admin_failed_retry, c.admin_failed_retry_malformed));
    await c.admin_stats.guard("stats step", () => checkStats(queue, ids, c.admin_stats));
    await c.admin_length.guard("length step", () => checkLength(ctx, queue, c.admin_length));
    await c.admin_delayed_read.guard("delayed step", () => checkDelayed(ctx, queue, c.admin_delayed_read, c.admin_match_by_args));
    await c.admin_clean_old_workers.guard("cleanOldWorkers step", () => checkCleanOld(ctx, queue, ids, c.admin_clean_old_workers));

    // After a graceful stop resq must have unregistered: node-resque sees no workers left.
    const stopped = await worker.stop();
    c.admin_workers.ok("compat_worker exits 0 on QUIT", stopped.code === 0 && !stopped.forced, JSON.stringify(stopped));
    c.admin_workers.eq("workers() after QUIT", await queue.workers(), {});
    const statKeys = Object.keys(await queue.stats()).filter((k) => ids.some((id) => k.endsWith(id)));
    c.admin_stats.eq("per-worker stats removed after QUIT", statKeys, []);
  });
  return Object.values(c);
}

module.exports = { NAMES, run };
