// Runs every scenario against REDIS_URL and prints one RESULT line per check group:
//   RESULT node-resque-<version> <scenario> <PASS|FAIL> <count> <detail>
// Exit status: 0 whenever the scenarios ran (even with FAIL lines), 2 when the harness itself
// could not run (bad environment, Redis unreachable, missing binaries).
"use strict";
const Redis = require("ioredis");
const { HarnessError, loadConfig } = require("./lib/config");
const { withTimeout } = require("./lib/wait");

const SCENARIOS = [
  require("./scenarios/node_enqueue"),
  require("./scenarios/node_enqueue_in"),
  require("./scenarios/resq_to_node"),
  require("./scenarios/trace_context"),
  require("./scenarios/resq_id"),
  require("./scenarios/admin"),
  require("./scenarios/star_worker"),
  require("./scenarios/mixed_schedulers"),
];
const SCENARIO_TIMEOUT_MS = 60000;

async function redisReachable(config) {
  const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: 1, retryStrategy: () => null, lazyConnect: true });
  redis.on("error", () => {});
  try {
    await redis.connect();
    await redis.ping();
  } catch (e) {
    throw new HarnessError(`cannot reach Redis at ${config.redisUrl}: ${e.message}`);
  } finally {
    redis.disconnect();
  }
}

async function main() {
  const config = loadConfig();
  await redisReachable(config);
  const only = process.env.ONLY ? new RegExp(process.env.ONLY) : null; // dev aid: ONLY=admin
  const started = Date.now();
  for (const scenario of SCENARIOS) {
    if (only && !scenario.NAMES.some((n) => only.test(n))) continue;
    const t0 = Date.now();
    let lines;
    try {
      const results = await withTimeout(scenario.run(config), SCENARIO_TIMEOUT_MS, scenario.NAMES[0]);
      lines = results.map((checks) => checks.line(config.peer));
    } catch (e) {
      // A scenario that throws still reports every one of its lines, as FAIL with the reason.
      const why = String(e && e.message ? e.message : e).replace(/\s+/g, " ").slice(0, 300);
      lines = scenario.NAMES.map((n) => `RESULT ${config.peer} ${n} FAIL 0 scenario error: ${why}`);
    }
    for (const line of lines) process.stdout.write(line + "\n");
    process.stderr.write(`[node] ${scenario.NAMES[0]}… took ${Date.now() - t0} ms\n`);
  }
  process.stderr.write(`[node] all scenarios took ${Date.now() - started} ms\n`);
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`[node] harness error: ${e instanceof HarnessError ? e.message : e.stack}\n`);
    process.exit(2);
  },
);
