// Scenario 3: resq enqueues (the `resq enqueue` CLI) → a real node-resque Worker runs the jobs;
// and resq's delayed enqueue (`--in 2`) → node-resque's Scheduler moves it → the Worker runs it.
// Proves node-resque accepts resq's Resque-form payload ({"class","args"}, no `queue` key) and
// resq's resque-scheduler item ({"class","args","queue"}), with the args unchanged.
"use strict";
const { Checks, viaJson, show } = require("../lib/check");
const { withContext } = require("../lib/context");
const { resqEnqueue } = require("../lib/resq");
const { pollUntil } = require("../lib/wait");
const { ARG_CASES } = require("../lib/cases");

const NAMES = ["resq_enqueue_node_worker", "resq_enqueue_in_node_scheduler"];
const Q = "from_resq";
const QD = "delayed_from_resq";
const DELAYED_ARGS = ["delayed", 42, { n: [true, null] }];

async function run(config) {
  const now = new Checks(NAMES[0]);
  const later = new Checks(NAMES[1]);
  await withContext(config, "resq2node", async (ctx) => {
    // The delayed job first, so its 2 s run concurrently with the immediate part.
    await later.guard("resq enqueue --in", () => resqEnqueue(config, ctx.ns, { queue: QD, inSecs: 2 }, "Echo", DELAYED_ARGS));
    const [ts] = (await ctx.redis.zrange(ctx.key("delayed_queue_schedule"), 0, -1)).map(Number);
    const items = ts ? await ctx.redis.lrange(ctx.key(`delayed:${ts}`), 0, -1) : [];
    later.ok("resq wrote one delayed item", items.length === 1, `${items.length} items at ${ts}`);
    if (items.length === 1) {
      const item = JSON.parse(items[0]);
      later.eq("item keys (resque-scheduler order)", Object.keys(item), ["class", "args", "queue"]);
      later.eq("item values", item, { class: "Echo", args: viaJson(DELAYED_ARGS), queue: QD });
    }

    for (const c of ARG_CASES) await now.guard(`resq enqueue ${c.name}`, () => resqEnqueue(config, ctx.ns, { queue: Q }, "Echo", c.args));
    checkStoredPayloads(now, await ctx.redis.lrange(ctx.key("queue", Q), 0, -1));

    const ran = []; // { queue, args, at }
    const jobs = {
      Echo: {
        perform: async function (...args) {
          ran.push({ queue: this.queue, args: viaJson(args), at: Date.now() });
        },
      },
    };
    const worker = await ctx.worker({ queues: [Q, QD], timeout: 100 }, jobs);
    const failures = [];
    worker.on("failure", (queue, job, error) => failures.push(`${job.class}: ${error.message}`));
    const scheduler = await ctx.scheduler({ timeout: 100 });

    const immediate = await pollUntil(() => ran.filter((r) => r.queue === Q).length >= ARG_CASES.length, { timeoutMs: 15000 });
    now.ok("all jobs ran", immediate.ok, `${ran.length}/${ARG_CASES.length}`);
    const mine = ran.filter((r) => r.queue === Q);
    ARG_CASES.forEach((c, i) => {
      // One worker pops FIFO, so the i-th run is the i-th enqueue.
      if (now.eq(`${c.name} args`, mine[i] && mine[i].args, viaJson(c.args))) now.item();
    });
    now.ok("no node-resque failures", failures.length === 0, failures.join(" | "));
    now.ok("no node-resque worker errors", worker.errors.length === 0, worker.errors.map((e) => e.error.message).join(" | "));

    // Nothing to wait for when resq did not file the item.
    const delayed = ts ? await pollUntil(() => ran.find((r) => r.queue === QD), { timeoutMs: 8000 }) : { ok: false };
    if (later.ok("delayed job ran", delayed.ok, "not run within 8 s")) {
      later.item();
      later.eq("delayed args", delayed.value.args, viaJson(DELAYED_ARGS));
      // node-resque's scheduler compares against round(now/1000): it may move up to 0.5 s early.
      const late = delayed.value.at - ts * 1000;
      later.ok("ran within [-600, +1500] ms of its second", late >= -600 && late <= 1500, `${late} ms`);
      later.note(`ran ${late} ms after its second`);
    }
    const leftovers = [
      ...(await ctx.keys("delayed:*")),
      ...(await ctx.keys("timestamps:*")),
    ];
    later.ok("node scheduler cleaned resq's delayed keys", leftovers.length === 0 && (await ctx.redis.zcard(ctx.key("delayed_queue_schedule"))) === 0, leftovers.join(","));
    later.ok("no node-resque scheduler errors", scheduler.errors.length === 0, scheduler.errors.map((e) => e.message).join(" | "));
  });
  return [now, later];
}

// What resq put on the queue, before any worker touches it: exactly {"class","args"} (compact).
function checkStoredPayloads(checks, stored) {
  checks.ok("one payload per enqueue", stored.length === ARG_CASES.length, `${stored.length}`);
  let identical = 0;
  stored.forEach((text, i) => {
    const c = ARG_CASES[i];
    if (!c) return;
    const payload = JSON.parse(text);
    checks.eq(`${c.name} payload keys`, Object.keys(payload), ["class", "args"]);
    checks.eq(`${c.name} payload args`, payload.args, viaJson(c.args));
    if (text === JSON.stringify({ class: "Echo", args: c.args })) identical++;
    else checks.note(`${c.name} stored as ${show(text)}`);
  });
  checks.note(`${identical}/${stored.length} payloads byte-identical to JSON.stringify`);
}

module.exports = { NAMES, run };
