//! The storage seam: one small trait with compare-and-swap, implemented by
//! every platform (Durable Object SQLite, the WASI host, KV) and by
//! [`MemoryStore`] for tests.
//!
//! # Contract
//!
//! A store maps string keys to versioned entries. Every implementation must
//! pass [`contract::run`]; the rules it checks are:
//!
//! 1. **Versions.** Every successful write returns the entry's new version.
//!    A key's versions strictly increase while it exists. A created key
//!    starts above every version of every key deleted before (1 in a store
//!    that never deleted one; a Worker keeps this per shard), so a key
//!    created again after a delete never repeats a version it had: a
//!    writer that read it before the delete cannot replace the new entry.
//! 2. **Compare-and-swap.** `put(key, None, ..)` creates only if the key is
//!    absent; `put(key, Some(v), ..)` replaces only if the current version is
//!    `v`. Otherwise nothing changes and the result is
//!    [`StoreError::Conflict`]. Of any number of concurrent writers holding
//!    the same expected version, exactly one succeeds.
//! 3. **Read your writes.** Once `put` or `delete` returns `Ok`, every later
//!    `get` on any replica sees it (the write is durable and visible). A store
//!    that cannot promise this must wait until it holds before returning.
//! 4. **Delete** removes the entry only if its version is `expected`.
//! 5. **Due index.** Each entry carries an optional `due_at` (ms). `due(now,
//!    limit)` returns up to `limit` keys with `due_at <= now`, earliest first,
//!    in time proportional to what it returns (an ordered index, never a scan
//!    of every entry). `next_due()` is the earliest `due_at` of any entry.
//!    A write replaces the entry's `due_at`; a delete removes it.
//! 6. **Errors** other than a conflict are [`StoreError::Unavailable`]: the
//!    operation may or may not have happened, and callers treat it as an
//!    internal error, never as "not found".

pub mod contract;
mod counting;
mod memory;

pub use counting::{CountingStore, Counts};
pub use memory::MemoryStore;

use crate::time::Millis;

/// An entry's version counter.
pub type Version = u64;

/// One stored entry. Its serde form is also what a Worker's shards send
/// and what its KV cache holds (`{"version", "body", "due_at"}`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    pub version: Version,
    pub body: String,
    pub due_at: Option<Millis>,
}

/// Why a store operation did not happen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// The compare-and-swap precondition did not hold; `current` is the
    /// version found (`None`: the key is absent).
    Conflict { current: Option<Version> },
    /// The backend failed; the message is for logs, never for clients.
    Unavailable(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Conflict { current } => write!(f, "version conflict (current {current:?})"),
            StoreError::Unavailable(m) => write!(f, "store unavailable: {m}"),
        }
    }
}

/// Versioned key-value storage with compare-and-swap and a due-time index.
/// See the module documentation for the contract.
///
/// The futures are not required to be `Send`: Workers and WASI guests are
/// single-threaded, and native hosts drive one request at a time per store
/// handle.
#[allow(async_fn_in_trait)]
pub trait Store {
    /// The current entry of `key`, if any.
    async fn get(&self, key: &str) -> Result<Option<Entry>, StoreError>;

    /// Writes `body` and `due_at` under `key` if the current version is
    /// `expected` (`None`: create only if absent). Returns the new version.
    async fn put(
        &self,
        key: &str,
        expected: Option<Version>,
        body: &str,
        due_at: Option<Millis>,
    ) -> Result<Version, StoreError>;

    /// Deletes `key` if its current version is `expected`.
    async fn delete(&self, key: &str, expected: Version) -> Result<(), StoreError>;

    /// Up to `limit` keys whose `due_at <= now`, earliest first.
    async fn due(&self, now: Millis, limit: usize) -> Result<Vec<String>, StoreError>;

    /// The earliest `due_at` over all entries.
    async fn next_due(&self) -> Result<Option<Millis>, StoreError>;
}

/// A shared or borrowed store is a store: every call goes to the one behind.
macro_rules! forward_store {
    ($($ptr:ty),*) => {$(
        impl<S: Store + ?Sized> Store for $ptr {
            async fn get(&self, key: &str) -> Result<Option<Entry>, StoreError> {
                (**self).get(key).await
            }
            async fn put(
                &self,
                key: &str,
                expected: Option<Version>,
                body: &str,
                due_at: Option<Millis>,
            ) -> Result<Version, StoreError> {
                (**self).put(key, expected, body, due_at).await
            }
            async fn delete(&self, key: &str, expected: Version) -> Result<(), StoreError> {
                (**self).delete(key, expected).await
            }
            async fn due(&self, now: Millis, limit: usize) -> Result<Vec<String>, StoreError> {
                (**self).due(now, limit).await
            }
            async fn next_due(&self) -> Result<Option<Millis>, StoreError> {
                (**self).next_due().await
            }
        }
    )*};
}

forward_store!(&S, std::sync::Arc<S>, std::rc::Rc<S>);
