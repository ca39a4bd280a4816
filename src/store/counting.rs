//! A [`Store`] wrapper that counts round trips by kind, to show what each
//! method costs (`tests/core/round_trips.rs`, the benchmarks).

use std::sync::atomic::{AtomicU64, Ordering};

use super::{Entry, Store, StoreError, Version};
use crate::time::Millis;

/// Round trips by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub gets: u64,
    pub puts: u64,
    pub deletes: u64,
    pub due_queries: u64,
}

impl Counts {
    pub fn total(&self) -> u64 {
        self.gets + self.puts + self.deletes + self.due_queries
    }
}

/// Counts every operation on the inner store.
#[derive(Default)]
pub struct CountingStore<S> {
    pub inner: S,
    gets: AtomicU64,
    puts: AtomicU64,
    deletes: AtomicU64,
    due_queries: AtomicU64,
}

impl<S> CountingStore<S> {
    pub fn new(inner: S) -> Self {
        CountingStore {
            inner,
            gets: AtomicU64::new(0),
            puts: AtomicU64::new(0),
            deletes: AtomicU64::new(0),
            due_queries: AtomicU64::new(0),
        }
    }

    /// The counts so far, and a reset.
    pub fn take(&self) -> Counts {
        Counts {
            gets: self.gets.swap(0, Ordering::Relaxed),
            puts: self.puts.swap(0, Ordering::Relaxed),
            deletes: self.deletes.swap(0, Ordering::Relaxed),
            due_queries: self.due_queries.swap(0, Ordering::Relaxed),
        }
    }
}

impl<S: Store> Store for CountingStore<S> {
    async fn get(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        self.inner.get(key).await
    }
    async fn put(
        &self,
        key: &str,
        expected: Option<Version>,
        body: &str,
        due_at: Option<Millis>,
    ) -> Result<Version, StoreError> {
        self.puts.fetch_add(1, Ordering::Relaxed);
        self.inner.put(key, expected, body, due_at).await
    }
    async fn delete(&self, key: &str, expected: Version) -> Result<(), StoreError> {
        self.deletes.fetch_add(1, Ordering::Relaxed);
        self.inner.delete(key, expected).await
    }
    async fn due(&self, now: Millis, limit: usize) -> Result<Vec<String>, StoreError> {
        self.due_queries.fetch_add(1, Ordering::Relaxed);
        self.inner.due(now, limit).await
    }
    async fn next_due(&self) -> Result<Option<Millis>, StoreError> {
        self.due_queries.fetch_add(1, Ordering::Relaxed);
        self.inner.next_due().await
    }
}
