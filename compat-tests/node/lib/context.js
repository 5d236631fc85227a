// One scenario's world: a fresh namespace, Redis clients, node-resque objects, and the
// clean-up that runs whatever happened (stop resq, end node-resque, delete the namespace).
"use strict";
const Redis = require("ioredis");
const NR = require("node-resque");
const { freshNamespace, nodeConnection } = require("./config");

/** Keys matching `pattern`, by SCAN (never KEYS: the Redis may be shared). */
async function scanKeys(redis, pattern) {
  const found = new Set();
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1000);
    keys.forEach((k) => found.add(k));
    cursor = next;
  } while (cursor !== "0");
  return [...found];
}

async function deleteNamespace(redis, ns) {
  const keys = await scanKeys(redis, `${ns}:*`);
  for (let i = 0; i < keys.length; i += 500) await redis.del(...keys.slice(i, i + 500));
}

function client(config) {
  const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: 2 });
  redis.on("error", () => {}); // reported through the failing command instead
  return redis;
}

/**
 * Runs `fn(ctx)` in a fresh namespace and always cleans up. ctx offers:
 * ns, key(...parts), redis (commands), blocking (BLPOP), defer(fn),
 * queue() / worker(opts, jobs) / scheduler(opts): connected node-resque objects, ended at clean-up.
 */
async function withContext(config, scenario, fn) {
  const ns = freshNamespace(scenario);
  const redis = client(config);
  const blocking = client(config);
  const cleanups = [];
  const ctx = {
    config,
    ns,
    redis,
    blocking,
    key: (...parts) => [ns, ...parts].join(":"),
    /** Keys of this namespace matching `pattern` (given without the namespace). */
    keys: (pattern) => scanKeys(redis, `${ns}:${pattern}`),
    defer: (f) => cleanups.unshift(f),
    async queue() {
      const q = new NR.Queue({ connection: nodeConnection(config, ns) });
      q.on("error", () => {});
      await q.connect();
      ctx.defer(() => q.end());
      return q;
    },
    /** A started node-resque Worker; its `error` events are collected in worker.errors. */
    async worker(options, jobs) {
      const w = new NR.Worker({ connection: nodeConnection(config, ns), ...options }, jobs);
      w.errors = [];
      w.on("error", (error, queue) => w.errors.push({ error, queue, at: Date.now() }));
      await w.connect();
      await w.start();
      ctx.defer(() => w.end());
      return w;
    },
    /** A started node-resque Scheduler; its `error` events are collected in scheduler.errors. */
    async scheduler(options = {}) {
      const s = new NR.Scheduler({ connection: nodeConnection(config, ns), ...options });
      s.errors = [];
      s.on("error", (error) => s.errors.push(error));
      await s.connect();
      await s.start();
      ctx.defer(() => s.end());
      return s;
    },
  };
  try {
    return await fn(ctx);
  } finally {
    for (const f of cleanups) {
      try {
        await f();
      } catch (e) {
        process.stderr.write(`[${scenario}] clean-up: ${e.message}\n`);
      }
    }
    if (!config.keepKeys) await deleteNamespace(redis, ns).catch(() => {});
    redis.disconnect();
    blocking.disconnect();
  }
}

module.exports = { withContext, scanKeys };
