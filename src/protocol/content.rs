//! Content blocks (in tool results and prompt messages) and resource
//! contents, built from Rust values: binary data is base64-encoded here.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

/// One content block.
///
/// ```
/// use mcp_tasks_edge::protocol::content::{Content, ResourceContents};
/// let png = [0x89, b'P', b'N', b'G'];
/// let blocks = vec![
///     Content::text("Here is the chart:"),
///     Content::image(&png, "image/png"),
///     Content::resource(ResourceContents::text("file:///notes.md", "text/markdown", "# Notes")),
///     Content::resource_link("file:///data.csv", "data.csv"),
/// ];
/// let json = serde_json::to_value(&blocks).unwrap();
/// assert_eq!(json[1]["type"], "image");
/// assert_eq!(json[1]["data"], "iVBORw==");
/// assert_eq!(json[2]["resource"]["text"], "# Notes");
/// assert_eq!(json[3]["type"], "resource_link");
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    Text {
        text: String,
    },
    #[serde(rename_all = "camelCase")]
    Image {
        /// Base64 (standard alphabet, padded).
        data: String,
        mime_type: String,
    },
    #[serde(rename_all = "camelCase")]
    Audio {
        /// Base64 (standard alphabet, padded).
        data: String,
        mime_type: String,
    },
    /// A resource's contents, embedded.
    Resource {
        resource: ResourceContents,
    },
    /// A pointer to a resource the client may read.
    #[serde(rename_all = "camelCase")]
    ResourceLink {
        uri: String,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
}

impl Content {
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text { text: text.into() }
    }

    /// An image from its bytes.
    pub fn image(bytes: &[u8], mime_type: impl Into<String>) -> Self {
        Content::Image {
            data: STANDARD.encode(bytes),
            mime_type: mime_type.into(),
        }
    }

    /// Audio from its bytes.
    pub fn audio(bytes: &[u8], mime_type: impl Into<String>) -> Self {
        Content::Audio {
            data: STANDARD.encode(bytes),
            mime_type: mime_type.into(),
        }
    }

    pub fn resource(resource: ResourceContents) -> Self {
        Content::Resource { resource }
    }

    pub fn resource_link(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Content::ResourceLink {
            uri: uri.into(),
            name: name.into(),
            description: None,
            mime_type: None,
        }
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Content::Text { text } => Some(text),
            _ => None,
        }
    }
}

/// What a resource holds: text or binary, with its URI and media type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceContents {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(flatten)]
    pub body: ResourceBody,
}

/// A resource's text, or its bytes as base64.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ResourceBody {
    Text { text: String },
    Blob { blob: String },
}

impl ResourceContents {
    pub fn text(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        ResourceContents {
            uri: uri.into(),
            mime_type: Some(mime_type.into()),
            body: ResourceBody::Text { text: text.into() },
        }
    }

    /// Binary contents from their bytes.
    pub fn blob(uri: impl Into<String>, mime_type: impl Into<String>, bytes: &[u8]) -> Self {
        ResourceContents {
            uri: uri.into(),
            mime_type: Some(mime_type.into()),
            body: ResourceBody::Blob {
                blob: STANDARD.encode(bytes),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_trip() {
        for c in [
            Content::text("a"),
            Content::audio(b"RIFF", "audio/wav"),
            Content::resource(ResourceContents::blob(
                "test://b",
                "application/octet-stream",
                b"\0\x01",
            )),
            Content::resource_link("test://x", "x"),
        ] {
            let v = serde_json::to_value(&c).unwrap();
            assert_eq!(serde_json::from_value::<Content>(v).unwrap(), c);
        }
        assert_eq!(
            serde_json::to_string(&Content::text("hi")).unwrap(),
            r#"{"type":"text","text":"hi"}"#
        );
        assert_eq!(
            serde_json::to_value(ResourceContents::blob("u", "m", b"\xff")).unwrap(),
            serde_json::json!({"uri": "u", "mimeType": "m", "blob": "/w=="})
        );
    }
}
