#!/usr/bin/env bash
# The scale curve: one local host (SQLite on disk, every commit fsynced)
# filled step by step to at least 1k, 10k, 100k and 1M stored tasks; at
# each size `tasks/get` on 1 and 16 connections, creates on 16 and the full
# flow's p99. The creates and flows add tasks, so a size already passed is
# measured where the store stands (the table's first column says how many
# tasks were stored). Prints one JSON line per run and a table; results go
# to bench/results/scale.{jsonl,md}.
#
#   bash bench/scale.sh                      # up to 1,000,000 (about 10 minutes)
#   SIZES="1000 10000" SECONDS_PER=3 bash bench/scale.sh
#
# Not part of `make test`: figures, not assertions.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER=${SECONDS_PER:-5}
SIZES=${SIZES:-"1000 10000 100000 1000000"}
OUT=bench/results
WORK=$(mktemp -d /tmp/mcp-scale.XXXXXX)
RESULTS=$OUT/scale.jsonl
PORT=18970
URL=http://127.0.0.1:$PORT/mcp

cargo build --release --target wasm32-wasip2 --quiet -p mcp-tasks-edge-server --features conformance
cargo build --release -p mcp-tasks-edge-host --quiet
(cd bench && cargo build --release --quiet --bin load)
LOAD=bench/target/release/load

setsid env MCP_STATE_SECRET=bench-state-secret-0123456789-abcdef MCP_AUTH=insecure-local MCP_TOOLS=all \
  MCP_MAX_OUTSTANDING_TASKS=0 MCP_MAX_STORED_BYTES=0 MCP_MAX_TASKS_PER_MINUTE=0 MCP_MAX_LISTEN_STREAMS=0 \
  MCP_REPORT_OUTLINE_MS=0 target/release/host --port $PORT --data "$WORK/data" >"$WORK/host.log" 2>&1 &
HOST_PID=$!
trap 'kill -TERM -- -$HOST_PID 2>/dev/null || true; sleep 1; rm -rf "$WORK"' EXIT
for _ in $(seq 1 100); do
  curl -s -o /dev/null -m 1 -X POST "$URL" -H 'content-type: application/json' -d '{}' && break
  sleep 0.2
done

: >"$RESULTS"
stored=0
run() { # workload concurrency
  "$LOAD" --url "$URL" --workload "$1" --concurrency "$2" --seconds "$SECONDS_PER" --label ours-wasi --stored "$stored" \
    | tee -a "$RESULTS"
}
for size in $SIZES; do
  if ((size > stored)); then
    PREFILL_LIMIT_S=1800 "$LOAD" --url "$URL" --workload get --concurrency 16 --seconds 0 --prefill $((size - stored)) \
      --label prefill >/dev/null
    stored=$size
    # Let the store's write-ahead log settle after the burst of creates.
    sleep "${SETTLE_S:-10}"
  fi
  run get 1
  run get 16
  run create 16
  # Creates add tasks: count them before the next size.
  stored=$((stored + $(tail -1 "$RESULTS" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])')))
  run flow 16
  stored=$((stored + $(tail -1 "$RESULTS" | python3 -c 'import json,sys; print(json.load(sys.stdin)["flows"])')))
  echo "scale: $stored stored, database $(du -sh "$WORK/data" | cut -f1)" >&2
done

python3 - "$RESULTS" "$OUT/scale.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out = ["| stored tasks | get c=1 req/s | get c=16 req/s | create c=16 req/s | flow c=16 flows/s | flow p99 ms |",
       "|---:|---:|---:|---:|---:|---:|"]
by = {}
order = []
for r in rows:
    # the size a run belongs to: the stored count its group started with
    key = r["stored"]
    if r["workload"] == "get" and r["concurrency"] == 1:
        group = {"stored": key}
        order.append(group)
    group[(r["workload"], r["concurrency"])] = r
for g in order:
    f = lambda w, c, k: g.get((w, c), {}).get(k, 0)
    out.append(f"| {g['stored']:,} | {f('get',1,'rps'):,.0f} | {f('get',16,'rps'):,.0f} | {f('create',16,'rps'):,.0f} "
               f"| {f('flow',16,'flows_per_s'):,.0f} | {f('flow',16,'p99_us')/1000:.1f} |")
first, last = order[0], order[-1]
out.append("")
for w, c in [("get", 1), ("get", 16), ("create", 16)]:
    a, b = first[(w, c)]["rps"], last[(w, c)]["rps"]
    out.append(f"- {w} c={c}: {b:,.0f}/s at {last['stored']:,} stored vs {a:,.0f}/s at {first['stored']:,}: {b / a:.2f}x")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
PY
