// Benchmark peer: a real BullMQ (pinned in package.json) Queue / Worker, for the driver's
// `peers` rows (compat-tests/bench/driver/src/peers.rs). BullMQ's defaults throughout
// (prefix "bull", completed jobs kept).
//
// Usage: node bullmq.js <host> <port> <queue> push <n>            # Queue.addBulk, 1000 a call
//        node bullmq.js <host> <port> <queue> work <n> <concurrency>
// The worker prints "ready" once connected, "BENCH first" when the first job has completed and
// "BENCH done" when the n-th has (counted in the process), and ends when stdin closes.
"use strict";
const { Queue, Worker } = require("bullmq");

async function main() {
  const [host, portText, queue, mode, nText, concText] = process.argv.slice(2);
  const connection = { host, port: Number(portText) };
  const n = Number(nText);
  if (mode === "push") {
    const q = new Queue(queue, { connection });
    for (let left = n; left > 0; left -= 1000) {
      const k = Math.min(left, 1000);
      await q.addBulk(Array.from({ length: k }, () => ({ name: "Noop", data: {} })));
    }
    await q.close();
    return;
  }
  const w = new Worker(queue, async () => {}, {
    connection,
    concurrency: Number(concText),
  });
  let done = 0;
  w.on("completed", () => {
    done += 1;
    if (done === 1) process.stdout.write("BENCH first\n");
    if (done === n) process.stdout.write("BENCH done\n");
  });
  w.on("error", (e) => console.error("worker error", e));
  await w.waitUntilReady();
  process.stdout.write("ready\n");
  process.stdin.resume();
  process.stdin.on("end", async () => {
    await w.close();
    process.exit(0);
  });
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
