//! An in-memory [`Store`]: a map plus an ordered due index. It backs the core
//! tests and is shareable between several server values (replicas) through
//! `Arc` or a reference.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};

use super::{Entry, Store, StoreError, Version};
use crate::time::Millis;

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    due: BTreeSet<(Millis, String)>,
    /// The highest version of any key deleted: a key created later starts
    /// above it.
    floor: Version,
}

/// The in-memory store. Thread-safe; every operation is atomic.
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> Result<MutexGuard<'_, Inner>, StoreError> {
        self.inner
            .lock()
            .map_err(|_| StoreError::Unavailable("memory store lock poisoned".into()))
    }

    /// Number of entries (for tests and diagnostics).
    pub fn len(&self) -> usize {
        self.lock().map(|i| i.entries.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of every stored body together (for tests and diagnostics).
    pub fn bytes(&self) -> usize {
        self.lock()
            .map(|i| i.entries.values().map(|e| e.body.len()).sum())
            .unwrap_or(0)
    }
}

impl Store for MemoryStore {
    async fn get(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        Ok(self.lock()?.entries.get(key).cloned())
    }

    async fn put(
        &self,
        key: &str,
        expected: Option<Version>,
        body: &str,
        due_at: Option<Millis>,
    ) -> Result<Version, StoreError> {
        let mut inner = self.lock()?;
        let current = inner.entries.get(key).map(|e| (e.version, e.due_at));
        if current.map(|c| c.0) != expected {
            return Err(StoreError::Conflict {
                current: current.map(|c| c.0),
            });
        }
        if let Some((_, Some(old_due))) = current {
            inner.due.remove(&(old_due, key.to_owned()));
        }
        let version = expected.map_or(inner.floor + 1, |v| v + 1);
        if let Some(d) = due_at {
            inner.due.insert((d, key.to_owned()));
        }
        inner.entries.insert(
            key.to_owned(),
            Entry {
                version,
                body: body.to_owned(),
                due_at,
            },
        );
        Ok(version)
    }

    async fn delete(&self, key: &str, expected: Version) -> Result<(), StoreError> {
        let mut inner = self.lock()?;
        let current = inner.entries.get(key).map(|e| (e.version, e.due_at));
        match current {
            Some((v, due)) if v == expected => {
                inner.entries.remove(key);
                inner.floor = inner.floor.max(v);
                if let Some(d) = due {
                    inner.due.remove(&(d, key.to_owned()));
                }
                Ok(())
            }
            other => Err(StoreError::Conflict {
                current: other.map(|c| c.0),
            }),
        }
    }

    async fn due(&self, now: Millis, limit: usize) -> Result<Vec<String>, StoreError> {
        let inner = self.lock()?;
        Ok(inner
            .due
            .iter()
            .take_while(|(d, _)| *d <= now)
            .take(limit)
            .map(|(_, k)| k.clone())
            .collect())
    }

    async fn next_due(&self) -> Result<Option<Millis>, StoreError> {
        Ok(self.lock()?.due.iter().next().map(|(d, _)| *d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block_on;

    #[test]
    fn passes_the_store_contract() {
        let store = MemoryStore::new();
        let report = block_on(super::super::contract::run(&store, "contract:"));
        assert!(report.failures.is_empty(), "{report}");
        assert_eq!(report.passed, 13, "{report}");
        assert!(store.is_empty(), "the suite must clean up after itself");
    }
}
