#!/usr/bin/env bash
# Figures for the Worker on workerd (not part of `make test`): builds the
# e2e bundle if needed and runs tests/workerd/bench.mjs.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cf-env.sh
source scripts/cf-env.sh
cf_ensure_tools
worker-build --profile worker --out-dir ../build-e2e server --features test-hooks,conformance >/dev/null
node tests/workerd/bench.mjs
