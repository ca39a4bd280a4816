#!/usr/bin/env bash
# Clippy over every build the project ships or tests, with warnings denied.
# `make lint` runs all of it; `make test` runs each part as its own stage.
#   host    the workspace on the host (library with the demo and fixture
#           tools its tests need, and without its default features, the
#           server with and without the conformance tools, the starter)
#   wasi    the WASI component (wasm32-wasip2)
#   worker  the Worker, deployed and test builds (wasm32-unknown-unknown)
set -euo pipefail
cd "$(dirname "$0")/.."
clippy() { cargo clippy --locked "$@" -- -D warnings; }

part=${1:-all}
if [[ $part == host || $part == all ]]; then
  clippy --workspace --all-targets --features mcp-tasks-edge/demo,mcp-tasks-edge/conformance-tools
  clippy -p mcp-tasks-edge --all-targets --no-default-features
  clippy -p mcp-tasks-edge-server --all-targets --features conformance
fi
if [[ $part == wasi || $part == all ]]; then
  rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2
  clippy --release --target wasm32-wasip2 -p mcp-tasks-edge-server --features conformance
  clippy --release --target wasm32-wasip2 -p mcp-tasks-edge-starter
fi
if [[ $part == worker || $part == all ]]; then
  rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
  clippy --target wasm32-unknown-unknown -p mcp-tasks-edge-server
  clippy --target wasm32-unknown-unknown -p mcp-tasks-edge-server --features test-hooks,conformance
  clippy --target wasm32-unknown-unknown -p mcp-tasks-edge-starter
fi
