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
  local t0=$SECONDS
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local took=$((SECONDS - t0))
  local lines
  lines=$(grep -E 'test result:|conformance|store contract:|wasi component:|passed|failed' "$log" | sed 's/^ *//' | grep -v 'checks passed' | grep -E '^(test result|conformance|store contract|e2e|wasi|workerd e2e|legacy sdk|python mcp|python user server)' || true)
  summary+=("[$name] exit $rc, ${took} s")
  while IFS= read -r l; do [[ -n $l ]] && summary+=("    $l"); done <<<"$lines"
  if [[ $rc -ne 0 ]]; then
    # The summary is often all a CI record keeps: carry the failure's cause.
    local cause
    cause=$(grep -E '^error|error(\[|:)|panicked|No space left|Killed|signal: |FAIL|failed to' "$log" | tail -n 12)
    [[ -n $cause ]] || cause=$(tail -n 8 "$log")
    while IFS= read -r l; do [[ -n $l ]] && summary+=("    | ${l:0:300}"); done <<<"$cause"
  fi
  rm -f "$log"
  [[ $rc -eq 0 ]] || status=1
}

# A registry that stumbles once should not fail a stage: cargo retries each
# download this many times.
export CARGO_NET_RETRY=10
summary+=("[machine] $(nproc) cores, $(df -h --output=avail . | tail -n 1 | tr -d ' ') free on the build disk at the start")

# Toolchain pieces the wasm builds need.
rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2
# Every crate of every target (the Worker's wasm32 crates included) and the
# fuzz target's, downloaded once here, so a later stage never waits on the
# network and a registry failure shows as this stage's.
run "fetch crates" bash -c 'for try in 1 2 3; do
    cargo fetch --locked && cargo fetch --locked --manifest-path fuzz/Cargo.toml && exit 0
    echo "fetch: attempt $try failed; retrying in 20 s" >&2; sleep 20
  done; exit 1'

run "format" cargo fmt --all --check
run "clippy" bash scripts/lint.sh host
run "clippy (wasi component)" bash scripts/lint.sh wasi
run "core tests" bash -c 'cargo test --locked --lib --test core --features demo,conformance-tools &&
  cargo test --locked -p mcp-tasks-edge-host --lib &&
  cargo test --locked --doc -p mcp-tasks-edge-host &&
  cargo test --locked --doc -p mcp-tasks-edge --features demo,conformance-tools &&
  cargo test --locked -p mcp-tasks-edge-server &&
  cargo test --locked -p mcp-tasks-edge-server --features conformance &&
  cargo test --locked -p mcp-tasks-edge-starter'
# The HTTP fuzz target is run with nightly (scripts/fuzz.sh); here it must
# at least build against today's API (one target dir with the rest).
run "fuzz target builds" bash -c 'CARGO_TARGET_DIR="$PWD/target" cargo check --locked --manifest-path fuzz/Cargo.toml'

# The wasi tests load the release component; build it first (never from
# inside a test: a nested cargo would wait on the target-dir lock).
# The server's and the starter's components, in one build of the library.
run "wasi component" bash -c 'cargo build --release --target wasm32-wasip2 --locked \
    -p mcp-tasks-edge-server -p mcp-tasks-edge-starter --features mcp-tasks-edge-server/conformance &&
  for c in mcp_tasks_edge_server mcp_tasks_edge_starter; do
    w=target/wasm32-wasip2/release/$c.wasm
    echo "wasi component: $c $(stat -c %s "$w") bytes, $(gzip -9c "$w" | wc -c) gzipped"
  done'
# The kill test runs the host example as a process.
run "wasi tests" bash -c 'cargo build --locked -p mcp-tasks-edge-host && cargo test --locked --test wasi --features demo,conformance-tools'
run "conformance (wasi host)" bash scripts/conformance.sh

# --- Cloudflare Worker (issue 4) -------------------------------------------
# Installs the pinned Worker toolchain if missing (scripts/cf-env.sh), lints
# the wasm32-unknown-unknown build, builds the bundles and runs the workerd
# end-to-end tests (scripts/workerd-e2e.sh, tests/workerd/e2e.mjs).
run "clippy (worker, wasm32)" bash -c 'source scripts/cf-env.sh && cf_ensure_tools && bash scripts/lint.sh worker'
run "workerd e2e" bash scripts/workerd-e2e.sh
# --- end Cloudflare Worker --------------------------------------------------

summary+=("[machine] $(df -h --output=avail . | tail -n 1 | tr -d ' ') free on the build disk at the end, target/ $(du -sh target 2>/dev/null | cut -f1)")
section "summary"
printf '%s\n' "${summary[@]}"
echo "total: ${SECONDS} s"
if [[ $status -eq 0 ]]; then echo "ALL TESTS PASSED"; else echo "SOME TESTS FAILED"; fi
exit $status
