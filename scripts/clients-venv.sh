#!/usr/bin/env bash
# Creates (or reuses) .venv-clients with the pinned Python MCP client from
# tests/clients/requirements.txt, and prints its python's path. Rebuilt
# whenever the requirements change.
set -uo pipefail
cd "$(dirname "$0")/.."
venv=.venv-clients
if [[ ! -x $venv/bin/python ]] || ! cmp -s tests/clients/requirements.txt "$venv/requirements.txt"; then
  rm -rf "$venv"
  if ! { python3 -m venv "$venv" \
    && "$venv/bin/pip" install -q --disable-pip-version-check -r tests/clients/requirements.txt \
    && cp tests/clients/requirements.txt "$venv/"; } >&2; then
    echo "clients-venv: could not install tests/clients/requirements.txt" >&2
    rm -rf "$venv"
    exit 1
  fi
fi
echo "$PWD/$venv/bin/python"
