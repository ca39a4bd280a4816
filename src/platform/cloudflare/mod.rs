//! The Cloudflare Workers adapter. Nothing here is exported by this crate:
//! a user's crate declares the Worker's handlers and the shard Durable
//! Object class with [`crate::cloudflare_worker!`], naming its tool factory.
//!
//! - `fetch` translates the request into the core's [`HttpRequest`], runs
//!   [`http::handle`] over the Worker's store ([`store`]), and translates the
//!   answer back, streaming `subscriptions/listen` as SSE ([`sse`]). One JSON
//!   log line per request.
//! - [`shard::Shard`] is the Durable Object that stores a shard's task
//!   records in SQLite and advances them from its alarm.
//! - `scheduled` (cron) asks every shard to sweep: the backstop for lost
//!   alarms, and the purge of expired tasks.
//!
//! No business logic lives here: everything the server decides is the core's.

pub mod settings;
pub mod wire;

#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
mod entry;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
mod env;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
mod js;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
mod outbound;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
pub mod shard;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
mod sse;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
pub mod store;
#[cfg(all(target_arch = "wasm32", target_os = "unknown", feature = "test-hooks"))]
mod test_hooks;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
mod webcrypto;

#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
pub use entry::{fetch, scheduled};
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
pub use env::now_ms;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
pub use shard::Shard;
