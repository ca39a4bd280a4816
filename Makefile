# The two commands README promises: `make dev` runs the server locally,
# `make test` runs every test. Both install what they need first.

SHELL := /bin/bash

.PHONY: test test-core lint fmt dev test-workerd

## Run every test (installs missing toolchain pieces first).
test:
	bash scripts/test.sh

## Serve the Cloudflare Worker locally on http://127.0.0.1:8787/mcp
## (wrangler dev, local Durable Objects and KV; installs missing tools).
dev:
	bash scripts/dev.sh

## The Worker on workerd only: build, then the end-to-end tests.
test-workerd:
	bash scripts/workerd-e2e.sh

## Host tests of the core only (no wasm toolchain).
test-core:
	cargo test --lib --test core --features demo,conformance-tools

lint:
	cargo fmt --all --check
	bash scripts/lint.sh all

fmt:
	cargo fmt --all
