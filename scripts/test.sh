#!/usr/bin/env bash
# The one test command (`make test`). Prints each runner's summary lines and
# a final tally; exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."

status=0
summary=()

section() { printf '\n=== %s ===\n' "$1"; }

run() { # name, command...
  local name=$1; shift
  section "$name"
  local log; log=$(mktemp)
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local lines
  lines=$(grep -E '^test result:|^conformance:|^store contract:|passed|failed' "$log" | grep -E '^(test result|conformance|store contract|e2e|wasi)' || true)
  summary+=("[$name] exit $rc")
  while IFS= read -r l; do [[ -n $l ]] && summary+=("    $l"); done <<<"$lines"
  rm -f "$log"
  [[ $rc -eq 0 ]] || status=1
}

run "format" cargo fmt --check
run "clippy" cargo clippy --all-targets --locked -- -D warnings
run "core tests" cargo test --all-targets --locked

section "summary"
printf '%s\n' "${summary[@]}"
if [[ $status -eq 0 ]]; then echo "ALL TESTS PASSED"; else echo "SOME TESTS FAILED"; fi
exit $status
