//! The core [`Store`] over the host's `store` import. Host calls return
//! synchronously, so every future completes on its first poll.

use super::bindings::mcp::tasks_edge::store as host;
use crate::store::{Entry, Store, StoreError, Version};
use crate::time::Millis;

/// The host's store, as seen from the guest.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostStore;

fn error(e: host::StoreError) -> StoreError {
    match e {
        host::StoreError::Conflict(current) => StoreError::Conflict { current },
        host::StoreError::Unavailable(why) => StoreError::Unavailable(why),
    }
}

impl Store for HostStore {
    async fn get(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        host::get(key).map_err(error).map(|found| {
            found.map(|e| Entry {
                version: e.version,
                body: e.body,
                due_at: e.due_at,
            })
        })
    }

    async fn put(
        &self,
        key: &str,
        expected: Option<Version>,
        body: &str,
        due_at: Option<Millis>,
    ) -> Result<Version, StoreError> {
        host::put(key, expected, body, due_at).map_err(error)
    }

    async fn delete(&self, key: &str, expected: Version) -> Result<(), StoreError> {
        host::delete(key, expected).map_err(error)
    }

    async fn due(&self, now: Millis, limit: usize) -> Result<Vec<String>, StoreError> {
        host::due(now, u32::try_from(limit).unwrap_or(u32::MAX)).map_err(error)
    }

    async fn next_due(&self) -> Result<Option<Millis>, StoreError> {
        host::next_due().map_err(error)
    }
}
