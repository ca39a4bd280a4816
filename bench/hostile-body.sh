#!/usr/bin/env bash
# Figures, not assertions: what a 100 MB request body costs the local host.
# Starts the release host (insecure-local, a temporary data directory), then
# sends 100 MB three ways and prints the answer, its time, and the host
# process's peak resident memory (VmHWM) before and after:
#   - declared (Content-Length: 104857600), refused from the head;
#   - declared to a wrong path (404 from the head);
#   - chunked, without a length (read as a stream, abandoned at the limit).
# Run: bash bench/hostile-body.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --target wasm32-wasip2 --quiet -p mcp-tasks-edge-server --features conformance
cargo build --release --quiet -p mcp-tasks-edge-host
DATA=$(mktemp -d)
PORT=$((20000 + RANDOM % 20000))
MCP_STATE_SECRET=bench-state-secret-0123456789-abcdef MCP_AUTH=insecure-local MCP_TOOLS=all \
  target/release/host --port "$PORT" --data "$DATA" >"$DATA/host.log" 2>&1 &
HOST_PID=$!
trap 'kill $HOST_PID 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do
  curl -s -o /dev/null "http://127.0.0.1:$PORT/mcp" && break
  sleep 0.1
done
python3 - "$PORT" "$HOST_PID" <<'PY'
import socket, sys, time
port, pid = int(sys.argv[1]), sys.argv[2]
def hwm():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(("VmHWM", "VmRSS")):
            yield line.split()[1]
def mem():
    hw, rss = None, None
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM"): hw = int(line.split()[1])
        if line.startswith("VmRSS"): rss = int(line.split()[1])
    return hw, rss
def send(path, chunked):
    s = socket.create_connection(("127.0.0.1", port))
    head = f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n"
    head += "transfer-encoding: chunked\r\n\r\n" if chunked else "content-length: 104857600\r\n\r\n"
    t0 = time.monotonic()
    s.sendall(head.encode())
    s.setblocking(False)
    chunk = b" " * (1 << 20)
    sent, answer = 0, b""
    while sent < 100 << 20:
        try:
            answer += s.recv(4096)
            if answer:
                break
        except BlockingIOError:
            pass
        frame = (b"%x\r\n" % len(chunk)) + chunk + b"\r\n" if chunked else chunk
        try:
            s.setblocking(True)
            s.settimeout(0.5)
            s.sendall(frame)
            sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            break
        finally:
            s.setblocking(False)
    s.setblocking(True)
    s.settimeout(5)
    try:
        while b"\r\n\r\n" not in answer:
            more = s.recv(4096)
            if not more:
                break
            answer += more
    except OSError:
        pass
    ms = (time.monotonic() - t0) * 1000
    s.close()
    return answer.split(b"\r\n")[0].decode(errors="replace"), sent, ms
for label, path, chunked in [("declared 100 MB", "/mcp", False), ("declared 100 MB, wrong path", "/elsewhere", False), ("chunked 100 MB", "/mcp", True)]:
    before = mem()
    status, sent, ms = send(path, chunked)
    after = mem()
    print(f"figure: host, {label}: {status!r} after {ms:.0f} ms, {sent >> 20} MiB sent by then; host VmHWM {before[0]} -> {after[0]} KiB, VmRSS {before[1]} -> {after[1]} KiB")
PY
