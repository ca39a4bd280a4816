//! The tasks extension: statuses, method params, and the task object as it
//! appears in `CreateTaskResult`, `tasks/get` and `notifications/tasks`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::RpcError;
use super::tools::InputRequests;

/// A task's status on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    pub const ALL: [TaskStatus; 5] = [
        TaskStatus::Working,
        TaskStatus::InputRequired,
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Cancelled,
    ];

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }
}

/// `tasks/get` and `tasks/cancel` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdParams {
    pub task_id: String,
}

/// `tasks/update` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTaskParams {
    pub task_id: String,
    pub input_responses: Map<String, Value>,
}

/// `subscriptions/listen` params.
#[derive(Debug, Deserialize)]
pub struct ListenParams {
    pub notifications: SubscriptionFilter,
}

/// The subscription filter; the core members are accepted and, as this
/// server has no list-change or resource notifications, left out of the
/// acknowledgement.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_list_changed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts_list_changed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources_list_changed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_subscriptions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ids: Option<Vec<String>>,
}

/// The status-specific payload of a detailed task. Built only from a task
/// record's phase, so a status always comes with exactly its own field.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum TaskPayload<'a> {
    None,
    InputRequests {
        #[serde(rename = "inputRequests")]
        input_requests: &'a InputRequests,
    },
    Result {
        result: Value,
    },
    Error {
        error: &'a RpcError,
    },
}

/// A task as it goes on the wire. `result_type` is `"task"` in a
/// `CreateTaskResult`, `"complete"` in a `tasks/get` result and absent in a
/// `notifications/tasks`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskWire<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_type: Option<&'static str>,
    pub task_id: &'a str,
    pub status: TaskStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_message: Option<&'a str>,
    pub created_at: String,
    pub last_updated_at: String,
    /// Always present: `null` means unlimited.
    pub ttl_ms: Option<u64>,
    pub poll_interval_ms: u64,
    #[serde(flatten)]
    pub payload: TaskPayload<'a>,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names() {
        for s in TaskStatus::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), Value::from(s.as_str()));
        }
    }

    #[test]
    fn wire_keeps_null_ttl_and_flattens_payload() {
        let err = RpcError::internal("boom");
        let w = TaskWire {
            result_type: Some("complete"),
            task_id: "t",
            status: TaskStatus::Failed,
            status_message: None,
            created_at: "a".into(),
            last_updated_at: "b".into(),
            ttl_ms: None,
            poll_interval_ms: 5,
            payload: TaskPayload::Error { error: &err },
            meta: None,
        };
        assert_eq!(
            serde_json::to_string(&w).unwrap(),
            r#"{"resultType":"complete","taskId":"t","status":"failed","createdAt":"a","lastUpdatedAt":"b","ttlMs":null,"pollIntervalMs":5,"error":{"code":-32603,"message":"boom"}}"#
        );
    }
}
