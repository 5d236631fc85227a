// Admin steps about workers: workers(), workingOn(), allWorkingOn(), cleanOldWorkers().
"use strict";
const { show } = require("../../lib/check");
const { pollUntil } = require("../../lib/wait");
const { QA, QB, SLEEP_MS } = require("./shared");

// node-resque splits ids on ":": name = first two fields, queues = the rest re-joined.
function checkWorkers(checks, workers, ids) {
  checks.eq("one entry per resq slot", Object.keys(workers).length, ids.length);
  for (const id of ids) {
    const entry = Object.entries(workers).find(([name, queues]) => `${name}:${queues}` === id);
    if (checks.ok(`slot ${id} listed`, entry !== undefined, show(workers))) {
      checks.item();
      const listed = entry[1].split(",");
      checks.ok(`${id} queues field lists ${QA},${QB}`, listed.includes(QA) && listed.includes(QB), entry[1]);
    }
  }
  checks.note(`e.g. name=${Object.keys(workers)[0]} queues=${Object.values(workers)[0]}`);
}

async function checkWorking(ctx, queue, ids, workers, working, attribution) {
  const enqueuedAt = Date.now();
  for (let i = 0; i < ids.length; i++) await queue.enqueue(QA, "Sleep", [SLEEP_MS]);
  const busy = await pollUntil(async () => (await Promise.all(ids.map((id) => ctx.redis.exists(ctx.key("worker", id))))).every(Boolean), { timeoutMs: 10000 });
  working.ok("every slot busy with Sleep", busy.ok, "worker:<id> records never all present");

  // workingOn(name, queues) is GET worker:<name>:<queues> — the resq id rebuilt.
  const runAts = [];
  let recordKeys = "";
  for (const [name, queues] of Object.entries(workers)) {
    const raw = await working.guard("queue.workingOn()", () => queue.workingOn(name, queues));
    let record;
    try {
      record = JSON.parse(raw);
    } catch {
      working.ok(`${name} record is JSON`, false, String(raw).slice(0, 100));
      continue;
    }
    if (!working.ok(`${name} record present`, record !== null, "null")) continue;
    working.item();
    working.eq(`${name} queue`, record.queue, QA);
    working.eq(`${name} payload`, { class: record.payload && record.payload.class, args: record.payload && record.payload.args }, { class: "Sleep", args: [SLEEP_MS] });
    // node-resque's cleanOldWorkers does Date.parse(run_at): it must give the real start time.
    const runAt = Date.parse(record.run_at);
    working.ok(`${name} run_at parses (Date.parse) within 2 s of enqueue`, Number.isFinite(runAt) && runAt >= enqueuedAt - 2000 && runAt <= Date.now() + 1000, `${record.run_at} -> ${runAt}`);
    runAts.push(record.run_at);
    recordKeys = Object.keys(record).join(",");
  }
  working.note(`run_at ${runAts.join(", ")}; record keys ${recordKeys}`);

  // allWorkingOn keys each record by its `worker` field (written by node-resque workers only).
  const all = await working.guard("queue.allWorkingOn()", () => queue.allWorkingOn());
  if (all) {
    attribution.item(ids.length);
    for (const name of Object.keys(workers)) {
      const v = all[name];
      attribution.ok(`allWorkingOn()[${name}] is its job`, v && v.payload && v.payload.class === "Sleep", `got ${show(v)}`);
    }
    const records = Object.values(all).filter((v) => typeof v === "object" && v !== null);
    attribution.note(`keys ${Object.keys(all).join(" | ")}; ${records.length} record(s) for ${ids.length} busy slots`);
  }
  const idle = await pollUntil(async () => (await Promise.all(ids.map((id) => ctx.redis.exists(ctx.key("worker", id))))).every((n) => n === 0), { timeoutMs: SLEEP_MS + 10000 });
  working.ok("records removed after the jobs", idle.ok, "worker:<id> left behind");
}

// cleanOldWorkers(age) force-cleans every worker whose record's run_at is older than `age`:
// it writes a "Worker Timeout" failure for the job and unregisters the worker. It finds the
// worker through allWorkingOn(), i.e. through the record's `worker` field. Last step: it
// mutates stats.
async function checkCleanOld(ctx, queue, ids, checks) {
  const errors = [];
  const onError = (e) => errors.push(String(e && e.message ? e.message : e));
  queue.on("error", onError);
  await queue.enqueue(QA, "Sleep", [SLEEP_MS]);
  const AGE_MS = 1000;
  const old = await pollUntil(async () => {
    for (const id of ids) {
      const raw = await ctx.redis.get(ctx.key("worker", id));
      if (raw && Date.now() - Date.parse(JSON.parse(raw).run_at) > AGE_MS + 100) return id;
    }
    return null;
  }, { timeoutMs: 10000 });
  if (!checks.ok("a slot ran Sleep for over 1 s", old.ok, "no record old enough")) return;
  const before = { failed: await ctx.redis.get(ctx.key("stat", "failed")), entries: await ctx.redis.llen(ctx.key("failed")) };
  const cleaned = await checks.guard("queue.cleanOldWorkers()", () => queue.cleanOldWorkers(AGE_MS));
  queue.off("error", onError);
  const after = { failed: await ctx.redis.get(ctx.key("stat", "failed")), entries: await ctx.redis.llen(ctx.key("failed")) };
  checks.item();
  checks.ok(`the stuck slot ${old.value} is cleaned`, cleaned && Object.keys(cleaned).some((name) => old.value.startsWith(`${name}:`)), `cleaned ${show(cleaned)}`);
  const statDelta = Number(after.failed) - Number(before.failed);
  const entryDelta = after.entries - before.entries;
  checks.ok("stat:failed moves with the failure list", statDelta === entryDelta, `stat:failed +${statDelta}, failed list +${entryDelta}`);
  checks.ok("no error events", errors.length === 0, errors.join(" | "));
}

module.exports = { checkWorkers, checkWorking, checkCleanOld };
