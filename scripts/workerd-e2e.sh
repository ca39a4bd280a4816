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

build() { # out-dir, extra cargo args... (the server crate, like a user's)
  local out=$1; shift
  local t0=$SECONDS
  if ! worker-build --profile worker --out-dir "../$out" server "$@" >"$out.build.log" 2>&1; then
    cat "$out.build.log"
    echo "workerd e2e: 0 passed, 1 failed (worker-build $out)"
    exit 1
  fi
  echo "figure: worker-build $out took $((SECONDS - t0)) s"
}
mkdir -p .wrangler
build build
build build-e2e --features test-hooks,conformance
rm -f build.build.log build-e2e.build.log

size() { stat -c %s "$1"; }
gz() { gzip -9c "$1" | wc -c; }
echo "figure: deployed bundle: wasm $(size build/index_bg.wasm) B raw, $(gz build/index_bg.wasm) B gzip -9; JS shim $(size build/index.js) B raw, $(gz build/index.js) B gzip -9"

node tests/workerd/e2e.mjs
