//! Tools: descriptors, `tools/call` params, `CallToolResult`, and the input
//! request/response shapes shared by core MRTR and task input.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A tool as `tools/list` describes it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDescriptor {
    pub name: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<&'static str>,
    pub description: &'static str,
    pub input_schema: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

/// `tools/call` params. A legacy `task` hint, like any unknown member, is
/// accepted and ignored.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolParams {
    pub name: String,
    #[serde(default)]
    pub arguments: Option<Map<String, Value>>,
    #[serde(default)]
    pub input_responses: Option<Map<String, Value>>,
    #[serde(default)]
    pub request_state: Option<String>,
}

/// `tools/list` params.
#[derive(Debug, Deserialize)]
pub struct ListToolsParams {
    #[serde(default)]
    pub cursor: Option<String>,
}

pub use super::content::Content;

/// The payload of a `CallToolResult` (without `resultType` and `_meta`,
/// which are added when it is written out).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    pub content: Vec<Content>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    #[serde(default)]
    pub is_error: bool,
}

impl CallToolResult {
    /// A successful result whose structured content is also given as text.
    pub fn structured(text: impl Into<String>, structured: Value) -> Self {
        CallToolResult {
            content: vec![Content::text(text)],
            structured_content: Some(structured),
            is_error: false,
        }
    }

    pub fn text(text: impl Into<String>) -> Self {
        CallToolResult {
            content: vec![Content::text(text)],
            structured_content: None,
            is_error: false,
        }
    }

    /// A tool-level error: reported in the result, not as a JSON-RPC error.
    pub fn error(text: impl Into<String>) -> Self {
        CallToolResult {
            content: vec![Content::text(text)],
            structured_content: None,
            is_error: true,
        }
    }
}

/// A server-to-client request embedded in `inputRequests`: `{method, params}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputRequest {
    pub method: String,
    pub params: Value,
}

/// Which method an input request uses, for capability checks.
pub const ELICITATION_CREATE: &str = "elicitation/create";

impl InputRequest {
    /// A form-mode `elicitation/create` asking for a flat object.
    pub fn elicit_form(message: impl Into<String>, requested_schema: Value) -> Self {
        InputRequest {
            method: ELICITATION_CREATE.to_owned(),
            params: json!({
                "mode": "form",
                "message": message.into(),
                "requestedSchema": requested_schema,
            }),
        }
    }
}

/// Outstanding input requests by key.
pub type InputRequests = BTreeMap<String, InputRequest>;

/// The user's choice in an `ElicitResult`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElicitAction {
    Accept,
    Decline,
    Cancel,
}

/// `ElicitResult`: the answer to an `elicitation/create` input request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ElicitResult {
    pub action: ElicitAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Map<String, Value>>,
}

impl ElicitResult {
    /// The accepted value of one form field, if the user accepted.
    pub fn accepted(&self, field: &str) -> Option<&Value> {
        match self.action {
            ElicitAction::Accept => self.content.as_ref()?.get(field),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_tool_result_shape() {
        let r = CallToolResult::structured("done", json!({"n": 1}));
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"content":[{"type":"text","text":"done"}],"structuredContent":{"n":1},"isError":false}"#
        );
    }

    #[test]
    fn elicit_form_shape() {
        let r = InputRequest::elicit_form("Approve?", json!({"type":"object","properties":{}}));
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"method":"elicitation/create","params":{"message":"Approve?","mode":"form","requestedSchema":{"properties":{},"type":"object"}}}"#
        );
    }

    #[test]
    fn legacy_task_hint_is_ignored() {
        let p: CallToolParams =
            serde_json::from_str(r#"{"name":"greet","arguments":{"name":"x"},"task":{"ttl":5}}"#)
                .unwrap();
        assert_eq!(p.name, "greet");
    }
}
