#!/usr/bin/env bash
# `make dev`: installs what is missing (see scripts/cf-env.sh), creates a
# local-only .dev.vars (git-ignored) if there is none, and serves the Worker
# with `wrangler dev` on http://127.0.0.1:8787/mcp with local Durable Object
# and KV storage under .wrangler/state.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cf-env.sh
source scripts/cf-env.sh
cf_ensure_tools

if [[ ! -f .dev.vars ]]; then
  umask 077
  cat > .dev.vars <<VARS
# Local development only (git-ignored; created by \`make dev\`). Never use
# these settings in a deployment: insecure-local serves every request as one
# principal without checking any credentials.
MCP_AUTH=insecure-local
MCP_INSECURE_PRINCIPAL=local/developer
MCP_STATE_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
VARS
  echo "dev: wrote .dev.vars (local-only auth and a random MCP_STATE_SECRET)" >&2
fi

exec wrangler dev --ip 127.0.0.1 --port "${PORT:-8787}" "$@"
