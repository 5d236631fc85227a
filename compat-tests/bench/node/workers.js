// Benchmark peer: a real node-resque Worker (mode "worker") or MultiWorker (mode "multi") on one
// queue, with node-resque's default settings, until stdin closes.
//
// Usage: node workers.js <host> <port> <namespace> <queue> <worker|multi>
// Prints "ready" once started. Jobs: Noop (nothing), Echo (RPUSH <ns>:compat:echo "[]", the
// benchmark's pick-up signal).
"use strict";
const { Worker, MultiWorker } = require("node-resque");
const Redis = require("ioredis");

async function main() {
  const [host, portText, namespace, queue, mode] = process.argv.slice(2);
  const port = Number(portText);
  const echo = new Redis({ host, port });
  const echoKey = namespace ? `${namespace}:compat:echo` : "compat:echo";
  const jobs = {
    Noop: { perform: async () => {} },
    Echo: { perform: async () => { await echo.rpush(echoKey, "[]"); } },
  };
  const connection = { pkg: "ioredis", host, port, namespace };
  let w;
  if (mode === "multi") {
    w = new MultiWorker({ connection, queues: [queue] }, jobs);
    w.start();
  } else {
    w = new Worker({ connection, queues: [queue] }, jobs);
    await w.connect();
    w.start();
  }
  w.on("error", (e) => console.error("worker error", e));
  process.stdout.write("ready\n");
  process.stdin.resume();
  process.stdin.on("end", async () => {
    await w.end();
    echo.disconnect();
    process.exit(0);
  });
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
