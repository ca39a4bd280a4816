//! Platform adapters. Each is compiled only for its target; nothing outside
//! this module names a platform type.

/// Cloudflare Workers (wasm32-unknown-unknown). Its pure parts (the shard
/// protocol, shard routing, the KV cache format) also build on the host so
/// that `cargo test` covers them.
#[cfg(any(test, all(target_arch = "wasm32", target_os = "unknown")))]
pub mod cloudflare;
#[cfg(target_os = "wasi")]
mod wasi;
