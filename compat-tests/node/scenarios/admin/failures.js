// Admin steps about failures and counters: failed(), retryAndRemoveFailed(), stats().
"use strict";
const crypto = require("node:crypto");
const { show } = require("../../lib/check");
const { pollUntil } = require("../../lib/wait");
const { QA } = require("./shared");

async function checkFailed(ctx, queue, ids, failed, retry, retryMalformed) {
  const tag = crypto.randomBytes(3).toString("hex");
  const malformed = `{"class":"Echo","args":["malformed-${tag}",`;
  await queue.enqueue(QA, "Fail", [`boom-${tag}`]);
  await queue.enqueue(QA, "Panic", [`panic-${tag}`]);
  await queue.enqueue(QA, "NoSuchClass", [1, "two"]);
  await ctx.redis.multi().sadd(ctx.key("queues"), QA).rpush(ctx.key("queue", QA), malformed).exec();
  const four = await pollUntil(async () => (await ctx.redis.llen(ctx.key("failed"))) >= 4, { timeoutMs: 30000 });
  failed.ok("four failures recorded", four.ok, `${await ctx.redis.llen(ctx.key("failed"))} entries`);

  const entries = await failed.guard("queue.failed(0,-1)", () => queue.failed(0, -1));
  if (!entries) return;
  failed.eq("failed() length", entries.length, 4);
  const find = (pred) => entries.find((e) => {
    try {
      return pred(e);
    } catch {
      return false;
    }
  });
  const expect = [
    ["Fail", find((e) => e.payload.class === "Fail"), (e) => e.exception === "RuntimeError" && e.error === `boom-${tag}`],
    ["Panic", find((e) => e.payload.class === "Panic"), (e) => e.exception === "Resq::Panic" && String(e.error).includes(`panic-${tag}`)],
    ["unknown class", find((e) => e.payload.class === "NoSuchClass"), (e) => typeof e.exception === "string" && e.exception !== "" && String(e.error).includes("NoSuchClass")],
    ["malformed", find((e) => JSON.stringify(e).includes(`malformed-${tag}`)), (e) => typeof e.exception === "string" && e.exception !== ""],
  ];
  for (const [what, e, specific] of expect) {
    if (!failed.ok(`${what} entry present`, e !== undefined, show(entries.map((x) => x.exception)))) continue;
    failed.item();
    failed.ok(`${what} exception/error`, specific(e), `${e.exception}: ${String(e.error).slice(0, 120)}`);
    failed.eq(`${what} queue`, e.queue, QA);
    failed.ok(`${what} worker is a resq id`, ids.includes(e.worker), show(e.worker));
    const at = Date.parse(e.failed_at);
    failed.ok(`${what} failed_at parses within 60 s`, Number.isFinite(at) && Math.abs(Date.now() - at) < 60000, `${e.failed_at}`);
    failed.ok(`${what} backtrace is an array`, Array.isArray(e.backtrace), show(e.backtrace));
    failed.note(`${what}: ${e.exception}: ${String(e.error).slice(0, 60)}`);
  }
  const malformedEntry = expect[3][1];
  if (malformedEntry) failed.note(`malformed payload stored as ${show(malformedEntry.payload).slice(0, 80)}`);

  // retryAndRemoveFailed = LREM failed 1 JSON.stringify(entry): it only finds resq's entry if
  // resq's bytes equal JavaScript's re-encoding of them.
  const fail = expect[0][1];
  if (!fail) return;
  retry.item();
  const raws = await ctx.redis.lrange(ctx.key("failed"), 0, -1);
  const raw = raws.find((r) => r.includes(`boom-${tag}`));
  retry.ok("entry bytes == JSON.stringify(JSON.parse(bytes))", raw === JSON.stringify(fail), firstDiff(raw, JSON.stringify(fail)));
  const retried = await retry.guard("queue.retryAndRemoveFailed()", () => queue.retryAndRemoveFailed(fail));
  if (retried === undefined) return;
  // The re-enqueued Fail job fails again in resq: exactly one boom entry again, four in total.
  const again = await pollUntil(async () => {
    const now = await ctx.redis.lrange(ctx.key("failed"), 0, -1);
    return now.length === 4 && now.filter((r) => r.includes(`boom-${tag}`)).length === 1;
  }, { timeoutMs: 15000 });
  retry.ok("retried job ran in resq and failed again", again.ok, "failed list did not settle at 4 with one boom entry");

  // resq stores an unparseable payload as `payload: null` (wire-format §6.6). Retrying that
  // entry cannot work; what matters is that the attempt does not destroy the entry.
  if (!malformedEntry) return;
  retryMalformed.item();
  let threw = null;
  try {
    await queue.retryAndRemoveFailed(malformedEntry);
  } catch (e) {
    threw = e.message;
  }
  const still = (await ctx.redis.lrange(ctx.key("failed"), 0, -1)).some((r) => r.includes(`malformed-${tag}`));
  retryMalformed.ok("entry still in the failed list after a failed retry", still, `entry removed; retry ${threw ? `threw "${threw}"` : "returned"}`);
}

function firstDiff(a, b) {
  if (a === undefined) return "raw entry not found";
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  return `differs at ${i}: redis ${show(a.slice(Math.max(0, i - 20), i + 30))} vs js ${show(b.slice(Math.max(0, i - 20), i + 30))}`;
}

// So far: 2 Sleep successes; Fail, Panic, unknown, malformed, and the retried Fail failed.
// Ruby semantics (resq's documented default): stat:processed counts every attempt.
async function checkStats(queue, ids, checks) {
  const stats = await checks.guard("queue.stats()", () => queue.stats());
  if (!stats) return;
  checks.item(2);
  checks.eq("stat failed", stats.failed, "5");
  checks.eq("stat processed (Ruby semantics: all attempts)", stats.processed, "7");
  const sum = (kind) => ids.reduce((n, id) => n + Number(stats[`${kind}:${id}`] || 0), 0);
  checks.eq("sum of processed:<id>", sum("processed"), Number(stats.processed));
  checks.eq("sum of failed:<id>", sum("failed"), Number(stats.failed));
  checks.note(`stats ${show(stats)}`);
}

module.exports = { checkFailed, checkStats };
