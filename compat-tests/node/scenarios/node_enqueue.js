// Scenario 1: node-resque `Queue.enqueue` → a resq compat_worker runs the jobs.
// Proves resq reads node-resque's payload shape ({"class","queue","args"}: an extra `queue`
// key, node's key order) and hands the handler exactly the args node-resque encoded, and
// that the payload bytes reach the handler unchanged (EchoPayload).
"use strict";
const { isDeepStrictEqual } = require("node:util");
const { Checks, viaJson, show } = require("../lib/check");
const { withContext } = require("../lib/context");
const { startCompatWorker } = require("../lib/resq");
const { collectList, pollUntil } = require("../lib/wait");
const { ARG_CASES } = require("../lib/cases");

const NAMES = ["node_enqueue_args", "node_enqueue_payload_bytes", "node_enqueue_lone_surrogate"];
const Q = "from_node";

async function run(config) {
  const args = new Checks(NAMES[0]);
  const bytes = new Checks(NAMES[1]);
  const surrogate = new Checks(NAMES[2]);
  await withContext(config, "enqueue", async (ctx) => {
    const worker = await startCompatWorker(config, ctx.redis, { namespace: ctx.ns, queues: Q, concurrency: 2 });
    ctx.defer(() => worker.stop());
    const queue = await ctx.queue();

    // Non-array args are wrapped by node-resque (arrayify) before encoding; resq must see the array.
    const jobs = [
      ...ARG_CASES.map((c) => ({ name: c.name, given: c.args, args: c.args })),
      { name: "bare-string", given: "just a string", args: ["just a string"] },
      { name: "bare-object", given: { only: "object" }, args: [{ only: "object" }] },
    ];
    const t0 = Date.now();
    for (const job of jobs) {
      await queue.enqueue(Q, "Echo", job.given);
      await queue.enqueue(Q, "EchoPayload", job.given);
    }
    const echoes = await collectList(ctx.blocking, ctx.key("compat", "echo"), jobs.length * 2, 30000);
    args.note(`${echoes.length}/${jobs.length * 2} echoes in ${echoes.length ? echoes.at(-1).at - t0 : "-"} ms`);

    // Echo pushes a JSON array, EchoPayload the payload object: tell them apart by the first byte.
    const argEchoes = echoes.filter((e) => e.text.startsWith("["));
    const payloadEchoes = echoes.filter((e) => !e.text.startsWith("["));

    // Two slots run concurrently, so match as multisets, by value.
    const pending = jobs.map((j) => ({ ...j, expected: viaJson(j.args) }));
    let byteIdentical = 0;
    for (const e of argEchoes) {
      let value;
      try {
        value = JSON.parse(e.text);
      } catch {
        args.ok("echo is JSON", false, e.text.slice(0, 80));
        continue;
      }
      const i = pending.findIndex((p) => isDeepStrictEqual(p.expected, value));
      if (args.ok("echo matches an enqueued job", i >= 0, show(value))) {
        if (e.text === JSON.stringify(pending[i].args)) byteIdentical++;
        pending.splice(i, 1);
        args.item();
      }
    }
    for (const p of pending) args.ok(`job ${p.name} echoed`, false, `args ${show(p.expected)} never seen`);
    args.note(`${byteIdentical}/${argEchoes.length} arg echoes byte-identical to JSON.stringify`);

    // EchoPayload: the bytes resq reserved must be the bytes node-resque wrote.
    const wanted = jobs.map((j) => queue.encode(Q, "EchoPayload", j.args));
    for (const e of payloadEchoes) {
      const i = wanted.indexOf(e.text);
      if (bytes.ok("payload bytes unchanged", i >= 0 && Buffer.from(wanted[i]).equals(e.bytes), e.text.slice(0, 120))) {
        wanted.splice(i, 1);
        bytes.item();
      }
    }
    for (const w of wanted) bytes.ok("payload echoed", false, `never seen: ${w.slice(0, 120)}`);
    const failed = await ctx.redis.llen(ctx.key("failed"));
    args.ok("no failures recorded", failed === 0, `${failed} entries in failed`);

    await loneSurrogate(ctx, queue, surrogate);
    const stopped = await worker.stop();
    args.ok("compat_worker exits 0 on QUIT", stopped.code === 0 && !stopped.forced, JSON.stringify(stopped));
  });
  return [args, bytes, surrogate];
}

// JSON.stringify escapes a lone UTF-16 surrogate as "\ud800": valid JSON grammar, but Redis's
// Lua cjson (used by resq's reserve script, and by node-resque's own popAndStoreJob) refuses it.
// Nothing can run such a job; what must hold is §13 item 7: it does not vanish. So: each job
// either ran with its exact args/bytes, or left a failure entry that carries its exact text.
async function loneSurrogate(ctx, queue, checks) {
  const given = ["lone \ud800 surrogate"];
  const jobs = ["Echo", "EchoPayload"].map((cls) => ({ cls, text: queue.encode(Q, cls, given) }));
  for (const j of jobs) await queue.enqueue(Q, j.cls, given);
  const key = ctx.key("compat", "echo");
  const settled = await pollUntil(async () => (await ctx.redis.llen(key)) + (await ctx.redis.llen(ctx.key("failed"))) >= 2, { timeoutMs: 10000 });
  const echoes = await ctx.redis.lrange(key, 0, -1);
  const failures = (await ctx.redis.lrange(ctx.key("failed"), 0, -1)).map((f) => JSON.parse(f));
  checks.ok("both jobs settled (ran or failed)", settled.ok, `echoes=${echoes.length} failures=${failures.length}`);
  for (const j of jobs) {
    const ran = j.cls === "Echo" ? echoes.some((e) => e.startsWith("[") && isDeepStrictEqual(JSON.parse(e), given)) : echoes.includes(j.text);
    const kept = failures.find((f) => JSON.stringify(f.payload) === j.text || String(f.error).includes(j.text));
    if (checks.ok(`${j.cls} ran or kept in a failure`, ran || kept, "neither")) checks.item();
    checks.note(`${j.cls}: ${ran ? "ran" : kept ? `failed ${kept.exception}, payload ${JSON.stringify(kept.payload)}, text kept in error` : "lost"}`);
  }
}

module.exports = { NAMES, run };
