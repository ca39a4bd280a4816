//! The per-request `_meta` that every 2026-07-28 request carries: protocol
//! version and client capabilities, validated on each request and never
//! remembered from an earlier one.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::TASKS_EXTENSION;

/// The `_meta` members the server reads, kept raw so that a wrong type is
/// reported by the server, not by serde.
#[derive(Deserialize, Default)]
pub struct RawMeta<'a> {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", borrow, default)]
    pub protocol_version: Option<&'a RawValue>,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities", borrow, default)]
    pub client_capabilities: Option<&'a RawValue>,
}

/// Just the `_meta` member of any request's params.
#[derive(Deserialize, Default)]
pub struct MetaOnly<'a> {
    #[serde(rename = "_meta", borrow, default)]
    pub meta: Option<RawMeta<'a>>,
}

/// `ClientCapabilities`, as far as this server acts on it. Unknown members
/// are accepted and ignored.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct ClientCapabilities {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<ElicitationCapability>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roots: Option<Value>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extensions: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct ElicitationCapability {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<Value>,
}

impl ClientCapabilities {
    /// Whether the request declared the tasks extension.
    pub fn has_tasks(&self) -> bool {
        matches!(self.extensions.get(TASKS_EXTENSION), Some(Value::Object(_)))
    }

    /// Whether form-mode elicitation may be sent: `elicitation: {}` means
    /// form only; otherwise `form` must be present.
    pub fn has_form_elicitation(&self) -> bool {
        match &self.elicitation {
            None => false,
            Some(e) => e.form.is_some() || e.url.is_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(json: &str) -> ClientCapabilities {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn tasks_extension_must_be_an_object() {
        assert!(caps(r#"{"extensions":{"io.modelcontextprotocol/tasks":{}}}"#).has_tasks());
        assert!(!caps(r#"{"extensions":{"io.modelcontextprotocol/tasks":true}}"#).has_tasks());
        assert!(!caps(r#"{}"#).has_tasks());
        assert!(!caps(r#"{"tasks":{"requests":{}}}"#).has_tasks());
    }

    #[test]
    fn elicitation_modes() {
        assert!(caps(r#"{"elicitation":{}}"#).has_form_elicitation());
        assert!(caps(r#"{"elicitation":{"form":{}}}"#).has_form_elicitation());
        assert!(!caps(r#"{"elicitation":{"url":{}}}"#).has_form_elicitation());
        assert!(caps(r#"{"elicitation":{"url":{},"form":{}}}"#).has_form_elicitation());
        assert!(!caps(r#"{}"#).has_form_elicitation());
    }
}
