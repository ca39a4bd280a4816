//! Error codes and the one JSON-RPC error object every failure becomes.
//!
//! The constructors here are the only place a code and its message are
//! paired; the HTTP layer maps codes to statuses in one function,
//! [`RpcError::http_status`] (an error may carry an explicit status, as the
//! task layer's storage and contention errors do: 503, and the quota's 429).

use serde::Serialize;
use serde_json::{Value, json};

use super::{SUPPORTED_VERSIONS, TASKS_EXTENSION};

/// The JSON-RPC error codes this server emits.
pub struct ErrorCode;

impl ErrorCode {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// A mirrored HTTP header differs from the body, is missing or malformed.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// The request needs a client capability that was not declared.
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// The protocol version in `_meta` is not one this server speaks.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

/// A JSON-RPC error object: `{code, message, data?}`.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub data: Option<Value>,
    /// Which HTTP status this error travels with; not part of the wire object.
    #[serde(skip)]
    pub status: Option<u16>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
            status: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// Overrides the HTTP status [`RpcError::http_status`] would choose.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    pub fn parse_error() -> Self {
        RpcError::new(
            ErrorCode::PARSE_ERROR,
            "Parse error: the body is not valid JSON.",
        )
    }

    pub fn invalid_request(message: &str) -> Self {
        RpcError::new(
            ErrorCode::INVALID_REQUEST,
            format!("Invalid request: {message}"),
        )
    }

    pub fn method_not_found(method: &str) -> Self {
        let removed = crate::protocol::methods::REMOVED.contains(&method);
        let reason = if removed {
            "This method was removed in MCP 2026-07-28."
        } else {
            "This server does not implement this method."
        };
        RpcError::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("Method not found: {}", truncate(method, 64)),
        )
        .with_data(json!({ "reason": reason, "supported": SUPPORTED_VERSIONS }))
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        RpcError::new(ErrorCode::INVALID_PARAMS, message)
    }

    /// A missing or malformed required `_meta` field: -32602 with HTTP 400.
    pub fn missing_meta(message: impl Into<String>) -> Self {
        RpcError::new(ErrorCode::INVALID_PARAMS, message).with_status(400)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        RpcError::new(ErrorCode::INTERNAL_ERROR, message)
    }

    pub fn header_mismatch(message: impl Into<String>) -> Self {
        RpcError::new(
            ErrorCode::HEADER_MISMATCH,
            format!("Header mismatch: {}", message.into()),
        )
    }

    /// -32021 naming the capabilities the client must declare.
    pub fn missing_capability(required: Value) -> Self {
        RpcError::new(
            ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            "Missing required client capability.",
        )
        .with_data(json!({ "requiredCapabilities": required }))
    }

    /// -32021 for the tasks extension.
    pub fn tasks_extension_required() -> Self {
        RpcError::missing_capability(json!({ "extensions": { TASKS_EXTENSION: {} } }))
    }

    pub fn unsupported_version(requested: &str) -> Self {
        RpcError::new(
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version.",
        )
        .with_data(json!({ "supported": SUPPORTED_VERSIONS, "requested": requested }))
    }

    /// The one answer for a task the caller cannot see: unknown, expired,
    /// purged or owned by someone else all look exactly like this.
    pub fn task_not_found() -> Self {
        RpcError::invalid_params("Failed to retrieve task: Task not found")
    }

    /// The caller's own task that has expired (while its record remains).
    pub fn task_expired() -> Self {
        RpcError::invalid_params("Failed to retrieve task: Task has expired")
    }

    /// A `taskId` that is not the shape of a task id (`tsk_` and 22, 24, 30 or 32
    /// base64url characters): a syntax error that says nothing about any
    /// task.
    pub fn malformed_task_id() -> Self {
        RpcError::invalid_params(
            "Invalid taskId: not a task id (expected tsk_ and 22, 24, 30 or 32 base64url characters)",
        )
    }

    /// The HTTP status this error travels with on Streamable HTTP.
    pub fn http_status(&self) -> u16 {
        if let Some(status) = self.status {
            return status;
        }
        match self.code {
            ErrorCode::PARSE_ERROR | ErrorCode::INVALID_REQUEST => 400,
            ErrorCode::METHOD_NOT_FOUND => 404,
            ErrorCode::HEADER_MISMATCH
            | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
            | ErrorCode::UNSUPPORTED_PROTOCOL_VERSION => 400,
            ErrorCode::INTERNAL_ERROR => 500,
            _ => 200,
        }
    }
}

/// Cuts untrusted text that is echoed in an error message to a bounded length
/// (on a character boundary).
pub fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_shapes() {
        let e = RpcError::tasks_extension_required();
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"code":-32021,"message":"Missing required client capability.","data":{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}"#
        );
        let e = RpcError::unsupported_version("1999-01-01");
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"code":-32022,"message":"Unsupported protocol version.","data":{"requested":"1999-01-01","supported":["2026-07-28"]}}"#
        );
    }

    #[test]
    fn statuses() {
        assert_eq!(RpcError::parse_error().http_status(), 400);
        assert_eq!(RpcError::method_not_found("x").http_status(), 404);
        assert_eq!(RpcError::header_mismatch("x").http_status(), 400);
        assert_eq!(RpcError::tasks_extension_required().http_status(), 400);
        assert_eq!(RpcError::unsupported_version("x").http_status(), 400);
        assert_eq!(RpcError::missing_meta("x").http_status(), 400);
        assert_eq!(RpcError::task_not_found().http_status(), 200);
        assert_eq!(RpcError::internal("x").http_status(), 500);
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("abc", 10), "abc");
    }
}
