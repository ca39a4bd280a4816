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

/// The future that each entry point ([`fetch`], [`scheduled`],
/// [`Shard::fetch`], [`Shard::alarm`]) returns: boxed, so that the code
/// behind it is compiled once, in this crate.
///
/// The handlers that [`crate::cloudflare_worker!`] expands in the user's
/// crate await these. When they were `async fn`s, the user's crate compiled
/// their bodies again, and with them every generic function they reach:
/// the request path, the legacy adapter and the runner, for the Worker's
/// store. A wasm built with v0 symbol names showed 257 functions
/// (138,103 B) instantiated in the server crate, `Server::request` and the
/// legacy dispatch among them, and most of them twice in the wasm. A boxed
/// future is polled through a vtable that this crate builds: the deployed
/// wasm went from 1,008,188 to 964,855 B (333,729 to 318,667 B gzip).
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
pub type EntryFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + 'a>>;

#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
pub use entry::{fetch, scheduled};
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
pub use env::now_ms;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
pub use shard::Shard;
