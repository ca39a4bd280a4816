//! What can go wrong in the task domain, as a type. [`From<TaskError>`]
//! for [`RpcError`] is the one place these become a JSON-RPC code, a
//! message and an HTTP status; a store failure keeps its message for the
//! operator's log ([`TaskError::log_detail`]) and never shows it to the
//! client.

use serde_json::json;

use super::quota::Exceeded;
use crate::error::RpcError;
use crate::store::StoreError;

/// A failure of a task operation.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskError {
    /// Not the caller's, never issued, expired or purged: one answer for all.
    NotFound,
    /// The caller's own task, expired and not yet purged.
    Expired,
    /// Not the shape of a task id: decided without a store read, so it says
    /// nothing about any task.
    MalformedId,
    /// The store failed; the message is for the log only.
    Store(String),
    /// A compare-and-swap kept losing to other writers.
    Busy,
    /// The caller's quota record kept losing to other writers.
    QuotaBusy,
    /// A per-caller limit refused the request (HTTP 429).
    QuotaExceeded(super::quota::Exceeded),
    /// The caller's quota record could not be decoded (its key, for the
    /// log): refused, never reset.
    QuotaUnreadable(String),
    /// A stored task could not be decoded.
    Unreadable,
    /// A task (or quota record) could not be encoded.
    Encoding,
    /// Input that does not fit (an input response, a replayed round).
    InvalidInput(String),
    /// No unused task id after a few tries.
    NoTaskId,
    /// A failure from outside the domain (the id source), as it was.
    Other(RpcError),
}

impl TaskError {
    /// What the operator's log should say, beyond the client's message.
    pub fn log_detail(&self) -> Option<&str> {
        match self {
            TaskError::Store(why) => Some(why),
            TaskError::QuotaUnreadable(key) => Some(key),
            _ => None,
        }
    }
}

impl std::fmt::Display for TaskError {
    /// The client's message, and a store failure's own message after it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rpc = RpcError::from(self.clone());
        match self.log_detail() {
            Some(detail) => write!(f, "{} ({detail})", rpc.message),
            None => f.write_str(&rpc.message),
        }
    }
}

impl std::error::Error for TaskError {}

impl From<StoreError> for TaskError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict { .. } => TaskError::Busy,
            StoreError::Unavailable(why) => TaskError::Store(why),
        }
    }
}

impl From<RpcError> for TaskError {
    fn from(e: RpcError) -> Self {
        TaskError::Other(e)
    }
}

impl From<TaskError> for RpcError {
    fn from(e: TaskError) -> Self {
        match e {
            TaskError::NotFound => RpcError::task_not_found(),
            TaskError::Expired => RpcError::task_expired(),
            TaskError::MalformedId => RpcError::malformed_task_id(),
            // Retryable: clients back off on 503.
            TaskError::Store(_) => {
                RpcError::internal("Internal error: task storage is unavailable; retry later.")
                    .with_status(503)
            }
            TaskError::Busy => {
                RpcError::internal("Internal error: the task is busy; retry later.").with_status(503)
            }
            TaskError::QuotaBusy => {
                RpcError::internal("Internal error: the quota record is busy; retry later.")
                    .with_status(503)
            }
            TaskError::QuotaExceeded(Exceeded::Tasks { max }) => RpcError::invalid_params(format!(
                "Task quota exceeded: at most {max} unfinished tasks per caller; cancel or wait for one to finish."
            ))
            .with_data(json!({ "reason": "quota", "maxOutstandingTasks": max }))
            .with_status(429),
            TaskError::QuotaExceeded(Exceeded::Bytes { max }) => RpcError::invalid_params(format!(
                "Storage quota exceeded: the caller's tasks may store at most {max} bytes until they expire."
            ))
            .with_data(json!({ "reason": "storage", "maxStoredBytes": max }))
            .with_status(429),
            TaskError::QuotaExceeded(Exceeded::Rate {
                per_minute,
                retry_ms,
            }) => RpcError::invalid_params(format!(
                "Task creation rate exceeded: at most {per_minute} per minute; retry in {} s.",
                retry_ms.div_ceil(1000)
            ))
            .with_data(json!({
                "reason": "rate", "maxTasksPerMinute": per_minute, "retryAfterMs": retry_ms
            }))
            .with_status(429),
            TaskError::QuotaExceeded(Exceeded::Streams { max }) => RpcError::invalid_params(format!(
                "Too many open listen streams: at most {max} per caller; close one first."
            ))
            .with_data(json!({ "reason": "streams", "maxListenStreams": max }))
            .with_status(429),
            TaskError::QuotaUnreadable(_) => RpcError::internal(
                "Internal error: the caller's quota record could not be read.",
            ),
            TaskError::Unreadable => {
                RpcError::internal("Internal error: a stored task could not be read.")
            }
            TaskError::Encoding => RpcError::internal("Internal error: a task could not be encoded."),
            TaskError::InvalidInput(message) => RpcError::invalid_params(message),
            TaskError::NoTaskId => RpcError::internal("Internal error: could not allocate a task id."),
            TaskError::Other(e) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_maps_to_one_code_and_status() {
        let cases = [
            (TaskError::NotFound, -32602, 200),
            (TaskError::Expired, -32602, 200),
            (TaskError::MalformedId, -32602, 200),
            (TaskError::Store("disk on fire".into()), -32603, 503),
            (TaskError::Busy, -32603, 503),
            (TaskError::QuotaBusy, -32603, 503),
            (
                TaskError::QuotaExceeded(Exceeded::Tasks { max: 3 }),
                -32602,
                429,
            ),
            (
                TaskError::QuotaExceeded(Exceeded::Bytes { max: 3 }),
                -32602,
                429,
            ),
            (
                TaskError::QuotaExceeded(Exceeded::Rate {
                    per_minute: 3,
                    retry_ms: 1,
                }),
                -32602,
                429,
            ),
            (
                TaskError::QuotaExceeded(Exceeded::Streams { max: 3 }),
                -32602,
                429,
            ),
            (TaskError::QuotaUnreadable("own_x".into()), -32603, 500),
            (TaskError::Unreadable, -32603, 500),
            (TaskError::Encoding, -32603, 500),
            (TaskError::InvalidInput("no".into()), -32602, 200),
            (TaskError::NoTaskId, -32603, 500),
        ];
        for (e, code, status) in cases {
            let detail = e.log_detail().map(str::to_owned);
            let rpc = RpcError::from(e);
            assert_eq!((rpc.code, rpc.http_status()), (code, status), "{rpc:?}");
            if let Some(d) = detail {
                assert!(!rpc.message.contains(&d), "the store's message stays out");
            }
        }
    }
}
