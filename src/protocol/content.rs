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
#[serde(tag = "type", rename_all = "snake_case", try_from = "ContentFields")]
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

/// The kinds of content block, as `type` names them.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum ContentKind {
    Text,
    Image,
    Audio,
    Resource,
    ResourceLink,
}

/// A content block as it is read: its `type` and every member any kind
/// has. Reading through this flat struct, instead of serde's internally
/// tagged derive, does not buffer the block first.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContentFields {
    #[serde(rename = "type")]
    kind: ContentKind,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    data: Option<String>,
    #[serde(default)]
    mime_type: Option<String>,
    #[serde(default)]
    resource: Option<ResourceContents>,
    #[serde(default)]
    uri: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

impl TryFrom<ContentFields> for Content {
    type Error = &'static str;

    fn try_from(f: ContentFields) -> Result<Self, Self::Error> {
        let data = |d: Option<String>| d.ok_or("missing field `data`");
        let mime = |m: Option<String>| m.ok_or("missing field `mimeType`");
        Ok(match f.kind {
            ContentKind::Text => Content::Text {
                text: f.text.ok_or("missing field `text`")?,
            },
            ContentKind::Image => Content::Image {
                data: data(f.data)?,
                mime_type: mime(f.mime_type)?,
            },
            ContentKind::Audio => Content::Audio {
                data: data(f.data)?,
                mime_type: mime(f.mime_type)?,
            },
            ContentKind::Resource => Content::Resource {
                resource: f.resource.ok_or("missing field `resource`")?,
            },
            ContentKind::ResourceLink => Content::ResourceLink {
                uri: f.uri.ok_or("missing field `uri`")?,
                name: f.name.ok_or("missing field `name`")?,
                description: f.description,
                mime_type: f.mime_type,
            },
        })
    }
}

impl Content {
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text { text: text.into() }
    }

    /// An image from its bytes, then its MIME type (`image/png`).
    pub fn image(bytes: &[u8], mime_type: impl Into<String>) -> Self {
        Content::Image {
            data: STANDARD.encode(bytes),
            mime_type: mime_type.into(),
        }
    }

    /// Audio from its bytes, then its MIME type (`audio/wav`).
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
#[serde(rename_all = "camelCase", try_from = "ResourceFields")]
pub struct ResourceContents {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(flatten)]
    pub body: ResourceBody,
}

/// Resource contents as they are read: text wins over a blob when both are
/// there, as in [`ResourceBody`]'s own reading. Read flat, without serde's
/// buffering for a flattened member.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResourceFields {
    uri: String,
    #[serde(default)]
    mime_type: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    blob: Option<String>,
}

impl TryFrom<ResourceFields> for ResourceContents {
    type Error = &'static str;

    fn try_from(f: ResourceFields) -> Result<Self, Self::Error> {
        let body = match (f.text, f.blob) {
            (Some(text), _) => ResourceBody::Text { text },
            (None, Some(blob)) => ResourceBody::Blob { blob },
            (None, None) => return Err("resource contents need `text` or `blob`"),
        };
        Ok(ResourceContents {
            uri: f.uri,
            mime_type: f.mime_type,
            body,
        })
    }
}

/// A resource's text, or its bytes as base64.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ResourceBody {
    Text { text: String },
    Blob { blob: String },
}

impl ResourceContents {
    /// Text contents: the resource's `uri`, its `mime_type`, then the `text`
    /// itself, in that order.
    ///
    /// ```
    /// use mcp_tasks_edge::protocol::content::ResourceContents;
    ///
    /// let c = ResourceContents::text("docs://readme", "text/markdown", "# Hello");
    /// let v = serde_json::to_value(&c).unwrap();
    /// assert_eq!(v["mimeType"], "text/markdown");
    /// assert_eq!(v["text"], "# Hello");
    /// ```
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

    /// Binary contents from their bytes: the resource's `uri`, its
    /// `mime_type`, then the bytes.
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
        // Any member order, unknown members ignored, text before blob.
        let link: Content = crate::json::from_str(
            r#"{"name":"n","x":1,"mimeType":"text/csv","uri":"u","type":"resource_link"}"#,
        )
        .unwrap();
        assert_eq!(
            link,
            Content::ResourceLink {
                uri: "u".into(),
                name: "n".into(),
                description: None,
                mime_type: Some("text/csv".into()),
            }
        );
        let both: Content = crate::json::from_str(
            r#"{"resource":{"blob":"AA==","text":"t","uri":"u"},"type":"resource"}"#,
        )
        .unwrap();
        assert_eq!(
            both,
            Content::resource(ResourceContents {
                uri: "u".into(),
                mime_type: None,
                body: ResourceBody::Text { text: "t".into() },
            })
        );
        for bad in [
            r#"{"type":"image","data":"AA=="}"#,
            r#"{"type":"text"}"#,
            r#"{"type":"video","data":"AA=="}"#,
            r#"{"text":"no type"}"#,
            r#"{"type":"resource","resource":{"uri":"u"}}"#,
            r#"{"type":"resource_link","uri":"u"}"#,
        ] {
            assert!(crate::json::from_str::<Content>(bad).is_err(), "{bad}");
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
