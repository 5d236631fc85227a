// Driving resq from the outside, exactly as CONTRACT.md describes it: the compat_worker
// example (configured by environment only) and the `resq` CLI. Nothing here reads resq's
// source; if the contract changes, this is the one file to update.
"use strict";
const { spawn, execFile } = require("node:child_process");
const { pollUntil } = require("./wait");

const live = new Set(); // processes we started, killed on harness exit if still running

process.on("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

/** Keeps the last `max` characters of a stream, for failure messages. */
function tail(stream, max = 4000) {
  const buf = { text: "" };
  stream.setEncoding("utf8");
  stream.on("data", (chunk) => {
    buf.text = (buf.text + chunk).slice(-max);
  });
  return buf;
}

function track(child) {
  live.add(child);
  const exited = new Promise((resolve) => {
    child.on("exit", (code, signal) => {
      live.delete(child);
      resolve({ code, signal });
    });
  });
  return exited;
}

/**
 * Stops a process we started: `signal` first (QUIT lets resq finish jobs and unregister),
 * SIGKILL after `graceMs`. Returns { code, signal, forced }.
 */
async function stopProcess(child, exited, signal = "SIGQUIT", graceMs = 15000) {
  if (child.exitCode !== null || child.signalCode !== null) return { ...(await exited), forced: false };
  child.kill(signal);
  let timer;
  const late = new Promise((resolve) => {
    timer = setTimeout(() => resolve(null), graceMs);
  });
  const result = await Promise.race([exited, late]);
  clearTimeout(timer);
  if (result) return { ...result, forced: false };
  child.kill("SIGKILL");
  return { ...(await exited), forced: true };
}

/**
 * Starts compat_worker and waits until every slot printed `worker <id>` and is a member of
 * `<ns>:workers` (registration is what makes it ready to be observed by peers).
 * Returns { ids, stop(), stderr() }.
 */
async function startCompatWorker(config, redis, { namespace, queues, concurrency = 1, scheduler = false, env = {} }) {
  const child = spawn(config.workerBin, [], {
    env: {
      ...process.env,
      REDIS_URL: config.redisUrl,
      RESQUE_NAMESPACE: namespace,
      QUEUES: queues,
      CONCURRENCY: String(concurrency),
      ...(scheduler ? { RESQ_SCHEDULER: "1" } : {}),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = track(child);
  const stderr = tail(child.stderr);
  const ids = [];
  let stdoutRest = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk) => {
    stdoutRest += chunk;
    let nl;
    while ((nl = stdoutRest.indexOf("\n")) >= 0) {
      const line = stdoutRest.slice(0, nl).trim();
      stdoutRest = stdoutRest.slice(nl + 1);
      const m = /^worker (\S+)$/.exec(line);
      if (m) ids.push(m[1]);
    }
  });
  const handle = {
    ids,
    pid: child.pid,
    stderr: () => stderr.text,
    stop: (signal) => stopProcess(child, exited, signal),
  };
  const printed = await pollUntil(() => ids.length >= concurrency || child.exitCode !== null, { timeoutMs: 15000 });
  if (!printed.ok || ids.length < concurrency) {
    await handle.stop("SIGKILL");
    throw new Error(`compat_worker printed ${ids.length}/${concurrency} worker ids; stderr: ${stderr.text.slice(-600)}`);
  }
  const registered = await pollUntil(
    async () => {
      const members = await redis.smembers(`${namespace}:workers`);
      return ids.every((id) => members.includes(id));
    },
    { timeoutMs: 10000 },
  );
  if (!registered.ok) {
    await handle.stop("SIGKILL");
    throw new Error(`compat_worker ids ${ids.join(" ")} never appeared in ${namespace}:workers`);
  }
  return handle;
}

/** Starts `resq scheduler` standalone. Returns { stop(), stderr() }. */
function startResqScheduler(config, namespace) {
  const child = spawn(config.resqBin, ["scheduler", "--url", config.redisUrl, "--namespace", namespace], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = track(child);
  const stdout = tail(child.stdout);
  const stderr = tail(child.stderr);
  let exit = null;
  exited.then((e) => {
    exit = e;
  });
  return {
    stderr: () => stdout.text + stderr.text,
    /** null while running, else { code, signal } — lets a scenario explain a missing move. */
    exit: () => exit,
    stop: (signal = "SIGTERM") => stopProcess(child, exited, signal),
  };
}

/**
 * `resq enqueue` with one JSON text per argument. `opts`: queue, inSecs, jesque, vars.
 * Resolves with stdout; rejects with the CLI's stderr when it exits non-zero.
 */
function resqEnqueue(config, namespace, { queue, inSecs, jesque, vars, env }, cls, args = []) {
  const argv = ["enqueue", "--url", config.redisUrl, "--namespace", namespace, "--queue", queue];
  if (inSecs !== undefined) argv.push("--in", String(inSecs));
  if (jesque) argv.push("--jesque");
  if (vars !== undefined) argv.push("--vars", JSON.stringify(vars));
  // "--" so that an argument such as -2 is not taken for an option.
  argv.push("--", cls, ...args.map((a) => JSON.stringify(a)));
  return new Promise((resolve, reject) => {
    execFile(config.resqBin, argv, { timeout: 15000, env: { ...process.env, ...(env || {}) } }, (error, stdout, stderr) => {
      if (error) reject(new Error(`resq ${argv.join(" ")} failed: ${String(stderr).trim() || error.message}`));
      else resolve(stdout);
    });
  });
}

/**
 * `compat_client enqueue-tracked QUEUE CLASS ARG_JSON…` (resq's `Client::enqueue_class_tracked`:
 * the payload carries the job's id in the extra field `resq_id`). Resolves with the id.
 */
function resqEnqueueTracked(config, namespace, queue, cls, args = []) {
  const argv = ["enqueue-tracked", queue, cls, ...args.map((a) => JSON.stringify(a))];
  const env = { ...process.env, REDIS_URL: config.redisUrl, RESQUE_NAMESPACE: namespace };
  return new Promise((resolve, reject) => {
    execFile(config.clientBin, argv, { timeout: 15000, env }, (error, stdout, stderr) => {
      if (error) reject(new Error(`compat_client ${argv.join(" ")} failed: ${String(stderr).trim() || error.message}`));
      else resolve(String(stdout).trim());
    });
  });
}

module.exports = { startCompatWorker, startResqScheduler, resqEnqueue, resqEnqueueTracked };
