#!/usr/bin/env bash
# resque-status peer of the resq compatibility suite, against the captured bytes of real
# resque-status 0.5.0 on real Resque 3.0.0 (fixtures/resque-status/; see README.md here).
#
#   REDIS_URL=redis://127.0.0.1:PORT [COMPAT_WORKER_BIN=…] [COMPAT_CLIENT_BIN=…] compat-tests/status/run.sh [scenario…]
#
# COMPAT_CLIENT_BIN defaults to compat_client next to COMPAT_WORKER_BIN. Prints one
# `RESULT resque-status-0.5.0-fixtures <scenario> <PASS|FAIL> <count> <detail>` line per
# scenario. Exits 0 whatever the results; non-zero only when the harness itself broke.
# The check against the real plugin is `run-real` (not run here; see README.md).
set -u

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

: "${REDIS_URL:?REDIS_URL must be set, e.g. redis://127.0.0.1:6390}"
export REDIS_URL
export COMPAT_WORKER_BIN="${COMPAT_WORKER_BIN:-$root/target/release/examples/compat_worker}"
export COMPAT_CLIENT_BIN="${COMPAT_CLIENT_BIN:-$(dirname "$COMPAT_WORKER_BIN")/compat_client}"
unset QUEUES QUEUE

for bin in "$COMPAT_WORKER_BIN" "$COMPAT_CLIENT_BIN"; do
  [ -x "$bin" ] || { echo "harness: $bin is not executable (cargo build --examples)" >&2; exit 2; }
done
command -v ruby >/dev/null || { echo "harness: ruby not found" >&2; exit 2; }
ruby -e 'require "redis"; require "redis-namespace"; require "json"' 2>/dev/null ||
  { echo "harness: needs ruby-redis ruby-redis-namespace ruby-json (apt-get install)" >&2; exit 2; }

out="$(ruby "$here/status.rb" "$@")"
rc=$?
[ -n "$out" ] && printf '%s\n' "$out"
[ $rc -eq 0 ] || { echo "harness: status.rb exited $rc" >&2; exit 2; }
grep -q '^RESULT ' <<<"$out" || { echo "harness: no RESULT line" >&2; exit 2; }
exit 0
