// The harness environment, read once. Everything else takes its values from here so that
// a misconfiguration is reported by one clear message instead of as a scenario failure.
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const crypto = require("node:crypto");

/** Raised when the harness itself cannot run (exit code 2, no RESULT lines faked). */
class HarnessError extends Error {}

function executable(file, envName) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
  } catch {
    throw new HarnessError(`${envName}=${file} is not an executable file (build with: cargo build --release --examples --bins)`);
  }
  return file;
}

function loadConfig(env = process.env) {
  const redisUrl = env.REDIS_URL;
  if (!redisUrl) throw new HarnessError("REDIS_URL is not set; want redis://127.0.0.1:PORT");
  let url;
  try {
    url = new URL(redisUrl);
  } catch {
    throw new HarnessError(`REDIS_URL=${redisUrl} is not a URL; want redis://127.0.0.1:PORT`);
  }
  if (url.protocol !== "redis:") throw new HarnessError(`REDIS_URL=${redisUrl} is not a redis:// URL`);

  const repoRoot = path.resolve(__dirname, "..", "..", "..");
  const nodeResqueVersion = require("node-resque/package.json").version;
  return {
    redisUrl,
    // node-resque builds its own ioredis clients from these (it does not take a URL).
    connection: {
      host: url.hostname || "127.0.0.1",
      port: Number(url.port || 6379),
      database: Number(url.pathname.replace(/^\//, "") || 0),
      options: {
        username: url.username ? decodeURIComponent(url.username) : undefined,
        password: url.password ? decodeURIComponent(url.password) : undefined,
      },
    },
    resqBin: executable(env.RESQ_BIN || path.join(repoRoot, "target/release/resq"), "RESQ_BIN"),
    workerBin: executable(
      env.COMPAT_WORKER_BIN || path.join(repoRoot, "target/release/examples/compat_worker"),
      "COMPAT_WORKER_BIN",
    ),
    // compat_client (CONTRACT.md): resq's tracked enqueue; next to compat_worker by default.
    clientBin: executable(
      env.COMPAT_CLIENT_BIN ||
        path.join(path.dirname(env.COMPAT_WORKER_BIN || path.join(repoRoot, "target/release/examples/compat_worker")), "compat_client"),
      "COMPAT_CLIENT_BIN",
    ),
    peer: `node-resque-${nodeResqueVersion}`,
    keepKeys: env.KEEP_KEYS === "1",
  };
}

/** A namespace no other scenario (or earlier run) uses, so scenarios cannot see each other's keys. */
function freshNamespace(scenario) {
  return `cnode-${scenario}-${process.pid}-${crypto.randomBytes(3).toString("hex")}`;
}

/** node-resque connection options for one namespace (a fresh object: node-resque mutates it). */
function nodeConnection(config, namespace) {
  const { host, port, database, options } = config.connection;
  return { host, port, database, namespace, options: { ...options } };
}

module.exports = { HarnessError, loadConfig, freshNamespace, nodeConnection };
