#!/usr/bin/env bash
# Ruby peer of the resq compatibility suite (see README.md next to this file).
#
#   REDIS_URL=redis://127.0.0.1:PORT [RESQ_BIN=…] [COMPAT_WORKER_BIN=…] compat-tests/ruby/run.sh [scenario…]
#
# Prints one `RESULT ruby-<version> <scenario> <PASS|FAIL> <count> <detail>` line per
# scenario. Exits 0 whatever the results; non-zero only when the harness itself broke
# (no Redis, missing binaries, a scenario script that died without its RESULT line).
set -u

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

: "${REDIS_URL:?REDIS_URL must be set, e.g. redis://127.0.0.1:6390}"
export REDIS_URL
export RESQ_BIN="${RESQ_BIN:-$root/target/release/resq}"
export COMPAT_WORKER_BIN="${COMPAT_WORKER_BIN:-$root/target/release/examples/compat_worker}"
# A QUEUES/QUEUE in our environment would change how Worker.find parses ids
# (Resque falls back to it for an empty queue field); readers here have none.
unset QUEUES QUEUE

for bin in "$RESQ_BIN" "$COMPAT_WORKER_BIN"; do
  [ -x "$bin" ] || { echo "harness: $bin is not executable (cargo build --release --examples --bins)" >&2; exit 2; }
done
command -v ruby >/dev/null || { echo "harness: ruby not found" >&2; exit 2; }

# scenario name -> script and arguments
declare -A script=(
  [producer_json_gem]="producer.rb json_gem"
  [producer_oj]="producer.rb oj"
  [reads]="reads.rb"
  [prune]="prune.rb"
  [heartbeat]="heartbeat.rb"
  [consumer]="consumer.rb"
)
order=(producer_json_gem producer_oj reads prune heartbeat consumer)
[ $# -gt 0 ] && order=("$@")
# MultiJson's Oj adapter needs ruby-oj: its scenario fails the run without it (it is never
# left out silently).
if [[ " ${order[*]} " == *" producer_oj "* ]] && ! ruby -e 'require "oj"' 2>/dev/null; then
  echo "harness: ruby-oj is not installed and scenario producer_oj needs it (apt-get install -y ruby-oj; .ci/run installs it)" >&2
  exit 2
fi
broken=0
for name in "${order[@]}"; do
  [ -n "$name" ] || continue
  [ -n "${script[$name]:-}" ] || { echo "harness: unknown scenario $name" >&2; broken=1; continue; }
  # shellcheck disable=SC2086 # the table entry is "script [args]"
  out="$(ruby "$here/scenarios/"${script[$name]})"
  rc=$?
  [ -n "$out" ] && printf '%s\n' "$out"
  if [ $rc -ne 0 ] || ! grep -q "^RESULT .* $name " <<<"$out"; then
    echo "harness: scenario $name broke (exit $rc)" >&2
    broken=1
  fi
done
exit $broken
