#!/usr/bin/env bash
# The Cloudflare Worker on the real workerd runtime (part of `make test`):
# installs the pinned Worker toolchain if missing, builds the deployed bundle
# (build/) and the test bundle with the test-only hooks (build-e2e/), prints
# their sizes, then runs tests/workerd/e2e.mjs against `wrangler dev`.
# Prints `workerd e2e: N passed, N failed`; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cf-env.sh
source scripts/cf-env.sh
cf_ensure_tools || { echo "workerd e2e: 0 passed, 1 failed (toolchain install)"; exit 1; }

build() { # crate, "worker-build options", cargo options... (each crate built
  # the way a user's is)
  local crate=$1 opts=$2; shift 2
  local t0=$SECONDS log=.wrangler/worker-build.log
  # shellcheck disable=SC2086 # the options are words
  if ! worker-build $opts "$crate" "$@" >"$log" 2>&1; then
    cat "$log"
    echo "workerd e2e: 0 passed, 1 failed (worker-build $opts $crate $*)"
    exit 1
  fi
  echo "figure: worker-build $opts $crate $* took $((SECONDS - t0)) s"
}
mkdir -p .wrangler
build server "--profile worker --out-dir ../build"
build server "--profile worker --out-dir ../build-e2e" --features test-hooks,conformance
# The starter, as its own wrangler.toml builds it (wrangler dev runs the
# same command again at start, then from cache).
build examples/starter "--profile worker"

size() { stat -c %s "$1"; }
gz() { gzip -9c "$1" | wc -c; }
echo "figure: deployed bundle: wasm $(size build/index_bg.wasm) B raw, $(gz build/index_bg.wasm) B gzip -9; JS shim $(size build/index.js) B raw, $(gz build/index.js) B gzip -9"
echo "figure: starter bundle: wasm $(size examples/starter/build/index_bg.wasm) B raw, $(gz examples/starter/build/index_bg.wasm) B gzip -9"

node tests/workerd/e2e.mjs
