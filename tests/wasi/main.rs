#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

//! The WASI component under wasmtime: the release build of the `server`
//! world (`target/wasm32-wasip2/release/mcp_tasks_edge_server.wasm`, or
//! `$COMPONENT_WASM`), driven through `wasi:http/incoming-handler`,
//! `runner.tick` and `diagnostics`, over the host's SQLite store. Build the
//! component first: `cargo build --release --target wasm32-wasip2 -p mcp-tasks-edge-server --features conformance`.

// The local host (host/), the same code as the `host` binary.
use mcp_tasks_edge_host::{runtime, serve, sqlite};

mod config;
mod contract;
mod exchange;
mod exposure;
mod hostile;
mod inline;
mod kill;
mod legacy;
mod limits;
mod listen;
mod mcp_client;
mod outbound;
mod quotas;
mod replicas;
mod restart;
mod shutdown;
mod starter;
mod support;
mod tenancy;
mod transcript;
mod upstream;
