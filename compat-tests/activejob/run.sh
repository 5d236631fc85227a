#!/usr/bin/env bash
# ActiveJob peer of the resq compatibility suite (see README.md next to this file).
#
#   REDIS_URL=redis://127.0.0.1:PORT compat-tests/activejob/run.sh [scenario…]
#
# Uses real ActiveJob: Debian's ruby-activejob (Rails 6.1) + ruby-globalid, and, for each
# directory listed in ACTIVEJOB_RAILS_SRC (colon-separated; each holding activesupport/lib
# and activejob/lib of another Rails, e.g. a `git archive v7.2.2` export), that Rails too.
# Binaries: target/release/examples/activejob_{worker,enqueue} (cargo build --release
# --examples), or ACTIVEJOB_WORKER_BIN / ACTIVEJOB_ENQUEUE_BIN; when COMPAT_WORKER_BIN is
# set, they are looked for next to it. RESQ_BIN is accepted and not needed.
#
# Prints one `RESULT activejob-<rails version> <scenario> <PASS|FAIL> <count> <detail>` line
# per scenario and Rails. Exits 0 whatever the results; non-zero only when the harness broke
# (no Redis, missing binaries or gems, a scenario that died without its RESULT line).
set -u

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

: "${REDIS_URL:?REDIS_URL must be set, e.g. redis://127.0.0.1:6390}"
export REDIS_URL
examples="$root/target/release/examples"
if [ -n "${COMPAT_WORKER_BIN:-}" ]; then examples="$(dirname "$COMPAT_WORKER_BIN")"; fi
export ACTIVEJOB_WORKER_BIN="${ACTIVEJOB_WORKER_BIN:-$examples/activejob_worker}"
export ACTIVEJOB_ENQUEUE_BIN="${ACTIVEJOB_ENQUEUE_BIN:-$examples/activejob_enqueue}"
unset QUEUES QUEUE

for bin in "$ACTIVEJOB_WORKER_BIN" "$ACTIVEJOB_ENQUEUE_BIN"; do
  [ -x "$bin" ] || { echo "harness: $bin is not executable (cargo build --release --examples)" >&2; exit 2; }
done
command -v ruby >/dev/null || { echo "harness: ruby not found" >&2; exit 2; }
ruby -e 'require "active_job"; require "global_id"; require "redis"; require "redis-namespace"; require "multi_json"' 2>/dev/null ||
  { echo "harness: needs ruby-activejob ruby-globalid ruby-redis ruby-redis-namespace ruby-multi-json (apt-get install)" >&2; exit 2; }

declare -A script=(
  [ruby_to_resq_json_gem]="ruby_to_resq.rb json_gem"
  [ruby_to_resq_oj]="ruby_to_resq.rb oj"
  [resq_to_ruby]="resq_to_ruby.rb"
  [delayed]="delayed.rb"
  [scheduled]="scheduled.rb"
  [failures]="failures.rb"
)
order=(ruby_to_resq_json_gem ruby_to_resq_oj resq_to_ruby delayed scheduled failures)
[ $# -gt 0 ] && order=("$@")
# MultiJson's Oj adapter needs ruby-oj: its scenario fails the run without it (it is never
# left out silently).
if [[ " ${order[*]} " == *" ruby_to_resq_oj "* ]] && ! ruby -e 'require "oj"' 2>/dev/null; then
  echo "harness: ruby-oj is not installed and scenario ruby_to_resq_oj needs it (apt-get install -y ruby-oj; .ci/run installs it)" >&2
  exit 2
fi

# "" = Debian's gem; then every extra Rails source tree.
IFS=':' read -r -a rails_dirs <<<"${ACTIVEJOB_RAILS_SRC:-}"
rails_dirs=("" "${rails_dirs[@]}")

broken=0
for src in "${rails_dirs[@]}"; do
  for name in "${order[@]}"; do
    [ -n "$name" ] || continue
    [ -n "${script[$name]:-}" ] || { echo "harness: unknown scenario $name" >&2; broken=1; continue; }
    # shellcheck disable=SC2086 # the table entry is "script [args]"
    out="$(RAILS_SRC="$src" ruby "$here/scenarios/"${script[$name]})"
    rc=$?
    printf '%s\n' "$out"
    if [ $rc -ne 0 ] || ! grep -q "^RESULT .* $name " <<<"$out"; then
      echo "harness: scenario $name broke (exit $rc${src:+, RAILS_SRC=$src})" >&2
      broken=1
    fi
  done
done
exit $broken
