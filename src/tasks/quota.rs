//! The outstanding-task quota: each principal may have at most N unfinished
//! tasks. A small per-owner record lists the ids of the owner's tasks with
//! their expiry; creating a task adds to it with compare-and-swap. Finished
//! tasks are found lazily, only when the list is full (so a normal create
//! costs one read and one write of this record, and a full one a read of
//! each listed task); they then move to a second list that no longer counts
//! against the quota and is kept until they expire (up to
//! [`MAX_FINISHED`] of them), so that [`listed`] can still name them.
//! With the quota off (`max` 0) no record is kept and nothing is listed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{TaskError, load, store_failed};
use crate::crypto::{b64url, sha256};
use crate::owner::Owner;
use crate::store::{Store, StoreError};
use crate::time::Millis;

const ATTEMPTS: usize = 8;

/// Finished tasks kept listed per owner; beyond it the oldest are dropped
/// from the list (the tasks themselves stay readable until they expire).
pub const MAX_FINISHED: usize = 1_000;

#[derive(Default, Serialize, Deserialize)]
struct Outstanding {
    /// Task id -> expiry, for tasks not known to be finished.
    tasks: BTreeMap<String, Millis>,
    /// Task id -> expiry, for finished tasks (not counted).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    finished: BTreeMap<String, Millis>,
}

impl Outstanding {
    fn prune_expired(&mut self, now: Millis) {
        self.tasks.retain(|_, exp| *exp > now);
        self.finished.retain(|_, exp| *exp > now);
        while self.finished.len() > MAX_FINISHED {
            let oldest = self
                .finished
                .iter()
                .min_by_key(|(id, exp)| (**exp, (*id).clone()))
                .map(|(id, _)| id.clone());
            match oldest {
                Some(id) => self.finished.remove(&id),
                None => break,
            };
        }
    }
}

/// The ids of `owner`'s tasks that have not expired at `now`, with their
/// expiry: unfinished ones and (up to [`MAX_FINISHED`]) finished ones. One
/// read. The list may name a task that has since been purged; readers check
/// each task.
pub async fn listed<S: Store>(
    store: &S,
    owner: &Owner,
    now: Millis,
) -> Result<Vec<(String, Millis)>, TaskError> {
    let Some(entry) = store.get(&key(owner)).await.map_err(store_failed)? else {
        return Ok(Vec::new());
    };
    let list = serde_json::from_str::<Outstanding>(&entry.body).unwrap_or_default();
    Ok(list
        .tasks
        .into_iter()
        .chain(list.finished)
        .filter(|(_, exp)| *exp > now)
        .collect())
}

/// The store key of `owner`'s quota record. It never looks like a task id.
pub fn key(owner: &Owner) -> String {
    let digest = sha256(format!("{}\u{0}{}", owner.tenant, owner.principal).as_bytes());
    format!("own_{}", b64url(&digest[..18]))
}

/// Counts `task_id` (expiring at `expires_at`) against `owner`'s quota of
/// `max` unfinished tasks, or refuses with -32602 (HTTP 429).
pub async fn reserve<S: Store>(
    store: &S,
    owner: &Owner,
    task_id: &str,
    expires_at: Millis,
    now: Millis,
    max: usize,
) -> Result<(), TaskError> {
    if max == 0 {
        return Ok(());
    }
    let key = key(owner);
    for _ in 0..ATTEMPTS {
        let current = store.get(&key).await.map_err(store_failed)?;
        let (version, mut list) = match &current {
            Some(e) => (
                Some(e.version),
                serde_json::from_str::<Outstanding>(&e.body).unwrap_or_default(),
            ),
            None => (None, Outstanding::default()),
        };
        list.prune_expired(now);
        if max > 0 && list.tasks.len() >= max && !list.tasks.contains_key(task_id) {
            let ids: Vec<String> = list.tasks.keys().cloned().collect();
            for id in ids {
                let unfinished = match load(store, &id).await? {
                    Some((_, r)) => r.visible_to(owner, now) && !r.status().is_terminal(),
                    None => false,
                };
                if !unfinished && let Some(exp) = list.tasks.remove(&id) {
                    list.finished.insert(id, exp);
                }
            }
            if list.tasks.len() >= max {
                return Err(TaskError::QuotaExceeded { max });
            }
        }
        list.tasks.insert(task_id.to_owned(), expires_at);
        let body = serde_json::to_string(&list).map_err(|_| TaskError::Encoding)?;
        match store.put(&key, version, &body, None).await {
            Ok(_) => return Ok(()),
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(store_failed(e)),
        }
    }
    Err(TaskError::QuotaBusy)
}
