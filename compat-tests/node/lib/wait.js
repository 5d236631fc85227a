// Waiting without fixed sleeps: every wait polls a condition (or blocks on a Redis list)
// until it holds or a deadline passes, so a fast run stays fast and a slow one still ends.
"use strict";

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Calls `probe` every `everyMs` until it returns a truthy value or `timeoutMs` passes.
 * Returns { ok, value, waitedMs }; value is the last probe result (useful for messages).
 */
async function pollUntil(probe, { timeoutMs = 30000, everyMs = 25 } = {}) {
  const started = Date.now();
  let value;
  for (;;) {
    value = await probe();
    if (value) return { ok: true, value, waitedMs: Date.now() - started };
    if (Date.now() - started >= timeoutMs) return { ok: false, value, waitedMs: Date.now() - started };
    await pause(everyMs);
  }
}

/**
 * Pops up to `n` elements from a list with BLPOP (on a connection of its own, because BLPOP
 * blocks it), stamping each with the wall-clock time it arrived. Returns fewer than `n` when
 * the deadline passes. Elements are Buffers so byte-exact comparisons stay possible.
 */
async function collectList(blockingRedis, key, n, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  const got = [];
  while (got.length < n) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    // BLPOP takes seconds; fractions are accepted since Redis 6.
    const reply = await blockingRedis.blpopBuffer(key, Math.max(0.05, left / 1000).toFixed(3));
    if (reply) got.push({ bytes: reply[1], text: reply[1].toString("utf8"), at: Date.now() });
  }
  return got;
}

/** Rejects with a clear message if `promise` takes longer than `ms` (a scenario-level guard). */
function withTimeout(promise, ms, what) {
  let timer;
  const guard = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  return Promise.race([promise, guard]).finally(() => clearTimeout(timer));
}

module.exports = { pause, pollUntil, collectList, withTimeout };
