// Admin steps about queues and delayed items: length(), queues(), queued(), delByFunction(),
// allDelayed(), timestamps(), delayedAt(), and the args-matching del(), scheduledAt(), delDelayed().
"use strict";
const { show } = require("../../lib/check");
const { resqEnqueue } = require("../../lib/resq");
const { QA } = require("./shared");

async function checkLength(ctx, queue, checks) {
  const idle = "adm_idle";
  const jobs = [["x", 1], [{ y: [2] }], []];
  for (const args of jobs) await resqEnqueue(ctx.config, ctx.ns, { queue: idle }, "Noop", args);
  checks.item(jobs.length);
  checks.eq(`length(${idle})`, await queue.length(idle), jobs.length);
  checks.eq(`length(${QA}) once drained`, await queue.length(QA), 0);
  const queues = await queue.queues();
  checks.ok("queues() lists resq's queues", queues.includes(idle) && queues.includes(QA), show(queues));
  const queued = await checks.guard("queue.queued()", () => queue.queued(idle, 0, -1));
  if (queued) checks.eq("queued() payloads", queued, jobs.map((args) => ({ class: "Noop", args })));
  // delByFunction decodes each payload and compares the class: shape-independent.
  const removed = await checks.guard("queue.delByFunction()", () => queue.delByFunction(idle, "Noop"));
  checks.eq("delByFunction() removes resq's jobs", removed, jobs.length);
}

// resq files delayed items as resque-scheduler does: item {"class","args","queue"}.
async function checkDelayed(ctx, queue, read, match) {
  const q = "adm_later";
  const args = ["later", 7];
  await resqEnqueue(ctx.config, ctx.ns, { queue: q, inSecs: 300 }, "Echo", args);
  const [ts] = (await ctx.redis.zrange(ctx.key("delayed_queue_schedule"), 0, -1)).map(Number);
  const want = { class: "Echo", args, queue: q };
  read.item();
  const all = await read.guard("queue.allDelayed()", () => queue.allDelayed());
  if (all) read.eq("allDelayed()", all, { [String(ts * 1000)]: [want] });
  const stamps = await read.guard("queue.timestamps()", () => queue.timestamps());
  if (stamps) read.eq("timestamps()", stamps, [ts * 1000]);
  const at = await read.guard("queue.delayedAt()", () => queue.delayedAt(ts * 1000));
  if (at) read.eq("delayedAt()", at.tasks, [want]);

  // These look items up by node-resque's own encoding ({"class","queue","args"}), byte-exact.
  match.item(2);
  const q2 = "adm_match";
  await resqEnqueue(ctx.config, ctx.ns, { queue: q2 }, "Noop", args);
  const deleted = await match.guard("queue.del()", () => queue.del(q2, "Noop", args));
  match.eq("del() removes resq's job", deleted, 1);
  const when = await match.guard("queue.scheduledAt()", () => queue.scheduledAt(q, "Echo", args));
  if (when) match.eq("scheduledAt() finds resq's item", when, [ts]);
  const removed = await match.guard("queue.delDelayed()", () => queue.delDelayed(q, "Echo", args));
  if (removed) match.eq("delDelayed() removes resq's item", removed, [ts]);
}

module.exports = { checkLength, checkDelayed };
