#!/usr/bin/env bash
# Fuzzes the HTTP function for a fixed number of executions (not run in CI).
#   RUNS=500000 bash scripts/fuzz.sh
# Needs the nightly toolchain and cargo-fuzz (installed here if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-200000}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
mkdir -p fuzz/corpus/http
start=$(date +%s)
set +e
cargo +nightly fuzz run http fuzz/corpus/http fuzz/seeds/http -- \
  -runs="$RUNS" -max_len=8192 -print_final_stats=1 2>&1 | tee /tmp/fuzz-http.log | grep -E "^#[0-9]+ +(DONE|pulse|NEW)|stat::|ERROR|panicked|SUMMARY" | tail -25
rc=${PIPESTATUS[0]}
set -e
end=$(date +%s)
execs=$(grep -oE 'stat::number_of_executed_units: [0-9]+' /tmp/fuzz-http.log | awk '{print $2}' | tail -1)
crashes=$(ls fuzz/artifacts/http 2>/dev/null | grep -c '^crash-' || true)
echo "fuzz http: ${execs:-0} executions in $((end - start)) s, exit $rc, crash files: $crashes"
exit $rc
