//! A local host for mcp-tasks-edge WASI components (world `server` of the
//! library's `wit/`): wasmtime runs the component, hyper serves it on
//! loopback, SQLite keeps the task store (several processes may share it),
//! and outbound requests reach only the origins in `MCP_OUTBOUND_ALLOW`.
//! The `host` binary serves a component; the `wasi` tests and the
//! benchmarks drive the same modules in process.

pub mod affine;
mod repeats;
pub mod runtime;
pub mod serve;
pub mod sqlite;
