//! The task domain: the persisted record, the pure state machine, the
//! client-facing service (create, get, update, cancel) and the runner that
//! advances due work.
//!
//! Every read-modify-write is a compare-and-swap loop on the record's
//! version, so concurrent clients and runners never overwrite each other.

pub mod input;
pub mod quota;
pub mod record;
pub mod runner;
pub mod state;
pub mod subscription;

use serde_json::{Map, Value};

use crate::error::RpcError;
use crate::store::{Store, StoreError, Version};
use crate::time::Millis;
use record::{Change, Owner, Phase, TaskRecord};

/// How often a compare-and-swap loop retries before giving up.
const CAS_ATTEMPTS: usize = 8;

/// Maps a backend failure to the error a client sees: -32603, HTTP 503 so
/// that clients retry. The backend's message stays in logs.
pub fn store_unavailable(_e: &StoreError) -> RpcError {
    RpcError::internal("Internal error: task storage is unavailable; retry later.").with_status(503)
}

fn contention() -> RpcError {
    RpcError::internal("Internal error: the task is busy; retry later.").with_status(503)
}

/// Serialises a record for the store.
pub fn encode(record: &TaskRecord) -> Result<String, RpcError> {
    serde_json::to_string(record)
        .map_err(|_| RpcError::internal("Internal error: a task could not be encoded."))
}

/// Whether `id` has the shape of a task id. Other keys in the store (quota
/// records) are never read as tasks, and junk ids cost no store read.
pub fn is_task_id(id: &str) -> bool {
    id.len() <= 64
        && id.starts_with("tsk_")
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Reads a record from the store. A body that does not decode is reported,
/// never overwritten.
pub async fn load<S: Store>(
    store: &S,
    id: &str,
) -> Result<Option<(Version, TaskRecord)>, RpcError> {
    if !is_task_id(id) {
        return Ok(None);
    }
    let Some(entry) = store.get(id).await.map_err(|e| store_unavailable(&e))? else {
        return Ok(None);
    };
    let record = serde_json::from_str(&entry.body)
        .map_err(|_| RpcError::internal("Internal error: a stored task could not be read."))?;
    Ok(Some((entry.version, record)))
}

/// Writes `record` if its version is still `expected`.
pub async fn save<S: Store>(
    store: &S,
    expected: Option<Version>,
    record: &TaskRecord,
) -> Result<Result<Version, StoreError>, RpcError> {
    let body = encode(record)?;
    match store
        .put(&record.id, expected, &body, Some(record.due_at()))
        .await
    {
        Ok(v) => Ok(Ok(v)),
        Err(e @ StoreError::Conflict { .. }) => Ok(Err(e)),
        Err(e) => Err(store_unavailable(&e)),
    }
}

/// The client-facing task operations, all scoped to the caller.
pub struct TaskService<'a, S: Store> {
    pub store: &'a S,
}

impl<'a, S: Store> TaskService<'a, S> {
    pub fn new(store: &'a S) -> Self {
        TaskService { store }
    }

    /// The task if `owner` may see it; otherwise the one not-found error.
    async fn visible(
        &self,
        owner: &Owner,
        id: &str,
        now: Millis,
    ) -> Result<(Version, TaskRecord), RpcError> {
        match load(self.store, id).await? {
            Some((v, r)) if r.id == id && r.visible_to(owner, now) => Ok((v, r)),
            _ => Err(RpcError::task_not_found()),
        }
    }

    /// Persists a new task; `Ok(false)` if the id is taken.
    pub async fn create(&self, record: &TaskRecord) -> Result<bool, RpcError> {
        Ok(save(self.store, None, record).await?.is_ok())
    }

    /// `tasks/get`: the caller's task.
    pub async fn get(&self, owner: &Owner, id: &str, now: Millis) -> Result<TaskRecord, RpcError> {
        self.visible(owner, id, now).await.map(|(_, r)| r)
    }

    /// `tasks/update`: records answers to outstanding input requests. Keys
    /// that are not outstanding (unknown, answered, superseded) are ignored;
    /// an answer that does not fit its request is -32602 and nothing changes.
    pub async fn update(
        &self,
        owner: &Owner,
        id: &str,
        responses: &Map<String, Value>,
        now: Millis,
    ) -> Result<(), RpcError> {
        for _ in 0..CAS_ATTEMPTS {
            let (version, mut record) = self.visible(owner, id, now).await?;
            let Phase::InputRequired { input_requests } = &record.phase else {
                return Ok(());
            };
            for (key, response) in responses {
                if let Some(request) = input_requests.get(key) {
                    input::validate(request, response).map_err(|why| {
                        RpcError::invalid_params(format!(
                            "Invalid input response for {}: {why}.",
                            crate::error::truncate(key, 64)
                        ))
                    })?;
                }
            }
            if !record.record_answers(responses, now) {
                return Ok(());
            }
            if save(self.store, Some(version), &record).await?.is_ok() {
                return Ok(());
            }
        }
        Err(contention())
    }

    /// `tasks/cancel`: records cancellation intent. A task waiting on input
    /// or on a timer is cancelled at once; a running step is cancelled at its
    /// boundary by the runner; a terminal task is left as it is.
    pub async fn cancel(&self, owner: &Owner, id: &str, now: Millis) -> Result<(), RpcError> {
        for _ in 0..CAS_ATTEMPTS {
            let (version, mut record) = self.visible(owner, id, now).await?;
            if record.status().is_terminal() {
                return Ok(());
            }
            if record.leased_at(now) {
                if record.cancel_requested {
                    return Ok(());
                }
                record.cancel_requested = true;
            } else {
                let change = Change::Cancel {
                    message: Some("Cancelled at the client's request.".to_owned()),
                };
                if record.apply(change, now).is_err() {
                    return Ok(());
                }
            }
            if save(self.store, Some(version), &record).await?.is_ok() {
                return Ok(());
            }
        }
        Err(contention())
    }
}
