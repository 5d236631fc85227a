#!/usr/bin/env bash
# Runs the node-resque compatibility scenarios against a running Redis.
#   REDIS_URL=redis://127.0.0.1:PORT  (required)
#   RESQ_BIN, COMPAT_WORKER_BIN       (default: <repo>/target/release/{resq,examples/compat_worker})
# Prints one "RESULT node-resque-<version> <scenario> <PASS|FAIL> <count> <detail>" line per
# check on stdout; exits 0 even with FAIL lines, non-zero only when the harness broke.
set -euo pipefail
cd "$(dirname "$0")"

# npm's own chatter goes to stderr so stdout carries only RESULT lines.
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error >&2
else
  npm install --no-audit --no-fund --loglevel=error >&2
fi

exec node main.js
