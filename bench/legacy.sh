#!/usr/bin/env bash
# tasks/get through the 2025-11-25 adapter against the modern path, on one
# WASI host (release, fsync on), alternating the two ROUNDS times at 1 and
# 16 connections so that both see the same machine. Prints each run, then
# the mean requests/s of each and the ratio legacy ÷ modern.
#
#   bash bench/legacy.sh              # 3 rounds of 5 s per run
#   ROUNDS=5 SECONDS_PER=8 bash bench/legacy.sh
#
# Not part of `make test` (figures, not assertions).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
SECONDS_PER=${SECONDS_PER:-5}
PORT=${PORT:-18791}
cargo build --release --target wasm32-wasip2 --quiet -p mcp-tasks-edge-server --features conformance
cargo build --release -p mcp-tasks-edge-host --quiet
(cd bench && cargo build --release --quiet --bin load)
work=$(mktemp -d /tmp/mcp-legacy-bench.XXXXXX)
setsid env MCP_STATE_SECRET=bench-state-secret-0123456789-abcdef MCP_AUTH=insecure-local MCP_TOOLS=all \
  MCP_MAX_OUTSTANDING_TASKS=0 MCP_MAX_STORED_BYTES=0 MCP_MAX_TASKS_PER_MINUTE=0 MCP_MAX_LISTEN_STREAMS=0 MCP_REPORT_OUTLINE_MS=0 \
  ./target/release/host --port "$PORT" --data "$work/store" >"$work/host.log" 2>&1 &
pid=$!
trap 'kill -TERM -- "-$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
url="http://127.0.0.1:$PORT/mcp"
for _ in $(seq 1 100); do
  curl -s -o /dev/null -m 1 -X POST "$url" -H 'content-type: application/json' -d '{}' && break
  sleep 0.2
done
for _ in $(seq 1 "$ROUNDS"); do
  for w in legacy-get get; do
    for c in 1 16; do
      bench/target/release/load --url "$url" --workload "$w" --concurrency "$c" \
        --seconds "$SECONDS_PER" --label ours-wasi | tee -a "$work/runs.jsonl"
    done
  done
done
python3 - "$work/runs.jsonl" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
for c in (1, 16):
    mean = {w: sum(r["rps"] for r in runs if r["workload"] == w and r["concurrency"] == c)
               / max(1, sum(1 for r in runs if r["workload"] == w and r["concurrency"] == c))
            for w in ("get", "legacy-get")}
    print(f"figure: tasks/get, {c} conn.: modern {mean['get']:.0f} req/s, legacy {mean['legacy-get']:.0f} req/s, "
          f"legacy/modern {mean['legacy-get'] / mean['get']:.2f}")
PY
