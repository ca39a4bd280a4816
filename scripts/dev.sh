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
# Local development only (git-ignored; created by \`make dev\`): random
# local-only secrets, never used by a deployment. Requests need a bearer
# token: \`node scripts/mint-token.mjs --sub alice --tenant acme\` mints one
# with MCP_JWT_HS256_SECRET below.
MCP_AUTH=jwt
MCP_STATE_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
# To skip tokens while hacking locally, set MCP_AUTH=insecure-local (every
# request then acts as MCP_INSECURE_PRINCIPAL, with no credentials checked).
MCP_INSECURE_PRINCIPAL=local/developer
MCP_JWT_HS256_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
MCP_JWT_ISSUER=http://127.0.0.1:${PORT:-8787}
MCP_RESOURCE_URL=http://127.0.0.1:${PORT:-8787}/mcp
VARS
  echo "dev: wrote .dev.vars (bearer-token auth, random local-only secrets; mint tokens with node scripts/mint-token.mjs)" >&2
fi

exec wrangler dev --ip 127.0.0.1 --port "${PORT:-8787}" "$@"
