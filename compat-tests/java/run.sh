#!/usr/bin/env bash
# Java (real Jesque) compatibility harness for resq.
#
# Env: REDIS_URL (redis://127.0.0.1:PORT), RESQ_BIN, COMPAT_WORKER_BIN (required);
#      RESQUE_NAMESPACE (prefix of the per-scenario namespaces, default "compat");
#      JESQUE_MODULES (optional, e.g. "jesque-2.2.0" to run one version only).
# Prints `RESULT jesque-<version> <scenario> <PASS|FAIL> <count> <detail>` lines on stdout.
# Exits 0 whenever the harness ran (FAIL lines included); non-zero only if it could not run.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

for v in REDIS_URL RESQ_BIN COMPAT_WORKER_BIN; do
  if [ -z "${!v:-}" ]; then
    echo "run.sh: $v is not set (see compat-tests/java/README.md)" >&2
    exit 2
  fi
done

# Logs of this run only (resq stderr, Jesque's log, harness stderr, maven output).
rm -rf "$here/logs"
mkdir -p "$here/logs"

# Build every module. Offline first: once ~/.m2 holds the jars no network is needed;
# fall back to an online build to fetch them the first time.
if ! mvn -q -B -o package >"$here/logs/build.txt" 2>&1; then
  if ! mvn -q -B package >"$here/logs/build.txt" 2>&1; then
    cat "$here/logs/build.txt" >&2
    echo "run.sh: maven build failed" >&2
    exit 2
  fi
fi

modules="${JESQUE_MODULES:-$(ls -d jesque-*/ | tr -d / | sort -r)}"
status=0
for m in $modules; do
  # slf4j-simple: Jesque's own log (it logs every job failure as an error) goes to a file.
  java \
    -Djesque.label="$m" \
    -Dcompat.logdir="$here/logs" \
    -Dorg.slf4j.simpleLogger.logFile="$here/logs/$m-jesque.log" \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=info \
    -Dorg.slf4j.simpleLogger.showDateTime=true \
    ${JAVA_SCENARIOS:+-Dscenarios="$JAVA_SCENARIOS"} \
    -cp "$here/$m/target/classes:$here/$m/target/lib/*" \
    resqcompat.Main 2>>"$here/logs/$m-harness.log" || status=$?
  if [ "$status" -ne 0 ]; then
    tail -20 "$here/logs/$m-harness.log" >&2
    echo "run.sh: harness for $m exited $status" >&2
    exit "$status"
  fi
done
