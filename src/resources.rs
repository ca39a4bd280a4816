//! Resources a server offers beside its tools: fixed resources (listed,
//! read by URI) and resource templates (RFC 6570 level-1 URI templates such
//! as `file:///reports/{id}`, read by any URI they match, with completion
//! of their variables).
//!
//! ```
//! use mcp_tasks_edge::resources::{TemplateInfo, ResourceTemplate, Vars, complete_from, text_resource};
//! use mcp_tasks_edge::protocol::content::ResourceContents;
//! use mcp_tasks_edge::tools::ToolSet;
//!
//! struct Reports;
//! impl ResourceTemplate for Reports {
//!     fn describe(&self) -> TemplateInfo {
//!         TemplateInfo::new("reports://{id}", "report").mime_type("application/json")
//!     }
//!     fn read(&self, uri: &str, vars: &Vars) -> Result<Option<ResourceContents>, String> {
//!         let id = &vars["id"];
//!         Ok(id.parse::<u32>().ok().map(|n| {
//!             ResourceContents::text(uri, "application/json", format!("{{\"id\":{n}}}"))
//!         }))
//!     }
//!     fn complete(&self, _variable: &str, prefix: &str, _context: &Vars) -> Vec<String> {
//!         complete_from(&["1", "2", "10"], prefix)
//!     }
//! }
//!
//! let set = ToolSet::empty()
//!     .with_resource(text_resource("notes://today", "today", "text/plain", "Ship it."))
//!     .with_template(Reports);
//! assert_eq!(set.resources().count(), 1);
//! ```

use std::collections::BTreeMap;

use serde::Serialize;

use crate::protocol::content::{ResourceBody, ResourceContents};

/// Template variables (or prompt arguments) by name.
pub type Vars = BTreeMap<String, String>;

/// The `options` that start with `prefix`, in order: what most `complete`
/// methods answer.
///
/// ```
/// use mcp_tasks_edge::resources::complete_from;
/// assert_eq!(complete_from(&["rust", "ruby", "go"], "ru"), ["rust", "ruby"]);
/// ```
pub fn complete_from(options: &[&str], prefix: &str) -> Vec<String> {
    options
        .iter()
        .filter(|o| o.starts_with(prefix))
        .map(|o| (*o).to_owned())
        .collect()
}

/// A resource as `resources/list` describes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceInfo {
    pub uri: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

impl ResourceInfo {
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Self {
        ResourceInfo {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
        }
    }

    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }
}

/// A resource template as `resources/templates/list` describes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateInfo {
    pub uri_template: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

impl TemplateInfo {
    pub fn new(uri_template: impl Into<String>, name: impl Into<String>) -> Self {
        TemplateInfo {
            uri_template: uri_template.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
        }
    }

    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }
}

/// A fixed resource: listed by `resources/list`, read by its URI.
pub trait Resource: Send + Sync + 'static {
    fn describe(&self) -> ResourceInfo;

    /// The contents; an error is a sentence for the client (-32603).
    fn read(&self) -> Result<ResourceContents, String>;
}

/// A family of resources named by a URI template.
pub trait ResourceTemplate: Send + Sync + 'static {
    fn describe(&self) -> TemplateInfo;

    /// The contents at `uri` (which matched the template, giving `vars`);
    /// `Ok(None)` when there is no such resource (the client gets the
    /// resource-not-found error).
    fn read(&self, uri: &str, vars: &Vars) -> Result<Option<ResourceContents>, String>;

    /// Values for `variable` that start with `prefix` (`completion/complete`);
    /// `context` holds the variables the client already chose.
    fn complete(&self, _variable: &str, _prefix: &str, _context: &Vars) -> Vec<String> {
        Vec::new()
    }
}

/// A resource whose contents never change.
pub struct StaticResource {
    info: ResourceInfo,
    body: ResourceBody,
}

impl StaticResource {
    /// A fixed resource described by `info` whose contents are `body` (its
    /// media type is `info`'s).
    pub fn from_contents(info: ResourceInfo, body: ResourceBody) -> Self {
        StaticResource { info, body }
    }

    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.info.title = Some(title.into());
        self
    }

    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.info.description = Some(description.into());
        self
    }
}

impl Resource for StaticResource {
    fn describe(&self) -> ResourceInfo {
        self.info.clone()
    }

    fn read(&self) -> Result<ResourceContents, String> {
        Ok(ResourceContents {
            uri: self.info.uri.clone(),
            mime_type: self.info.mime_type.clone(),
            body: self.body.clone(),
        })
    }
}

/// A fixed text resource: its `uri`, its `name`, its `mime_type`, then
/// the `text` it reads as, in that order.
///
/// ```
/// use mcp_tasks_edge::resources::text_resource;
/// use mcp_tasks_edge::tools::ToolSet;
///
/// let set = ToolSet::empty().with_resource(text_resource(
///     "docs://readme", "readme", "text/markdown", "# Hello",
/// ));
/// let (info, _) = set.resources().next().unwrap();
/// assert_eq!((info.uri.as_str(), info.name.as_str()), ("docs://readme", "readme"));
/// ```
pub fn text_resource(
    uri: impl Into<String>,
    name: impl Into<String>,
    mime_type: impl Into<String>,
    text: impl Into<String>,
) -> StaticResource {
    StaticResource {
        info: ResourceInfo::new(uri, name).mime_type(mime_type),
        body: ResourceBody::Text { text: text.into() },
    }
}

/// A fixed binary resource: its `uri`, its `name`, its `mime_type`, then
/// its bytes.
pub fn blob_resource(
    uri: impl Into<String>,
    name: impl Into<String>,
    mime_type: impl Into<String>,
    bytes: &[u8],
) -> StaticResource {
    let uri = uri.into();
    let mime_type = mime_type.into();
    let body = ResourceContents::blob(uri.clone(), mime_type.clone(), bytes).body;
    StaticResource {
        info: ResourceInfo::new(uri, name).mime_type(mime_type),
        body,
    }
}

/// Matches `uri` against an RFC 6570 level-1 template (`{name}` simple
/// string expansion): the variables, percent-decoded, or `None`. A variable
/// matches one or more characters other than `/`, `?` and `#`, as level-1
/// expansion percent-encodes them.
///
/// ```
/// use mcp_tasks_edge::resources::match_template;
/// let vars = match_template("test://template/{id}/data", "test://template/42/data").unwrap();
/// assert_eq!(vars["id"], "42");
/// assert!(match_template("test://template/{id}/data", "test://template/4/2/data").is_none());
/// ```
pub fn match_template(template: &str, uri: &str) -> Option<Vars> {
    let mut vars = Vars::new();
    let mut rest = uri;
    let mut tpl = template;
    while !tpl.is_empty() {
        match tpl.find('{') {
            Some(0) => {
                let close = tpl.find('}')?;
                let name = tpl.get(1..close)?;
                if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                {
                    return None;
                }
                tpl = tpl.get(close + 1..)?;
                // The value runs to the next literal (or the end).
                let literal_end = tpl.find('{').unwrap_or(tpl.len());
                let literal = tpl.get(..literal_end)?;
                let end = if literal.is_empty() {
                    rest.len()
                } else if literal_end == tpl.len() {
                    // The template's last literal: it ends the URI, and the
                    // value may hold it too (`{name}.json` of `a.json.json`).
                    rest.len()
                        .checked_sub(literal.len())
                        .filter(|_| rest.ends_with(literal))?
                } else {
                    rest.find(literal)?
                };
                let raw = rest.get(..end)?;
                if raw.is_empty() || raw.contains(['/', '?', '#']) {
                    return None;
                }
                vars.insert(name.to_owned(), percent_decode(raw)?);
                rest = rest.get(end..)?;
            }
            next => {
                let literal_end = next.unwrap_or(tpl.len());
                let literal = tpl.get(..literal_end)?;
                rest = rest.strip_prefix(literal)?;
                tpl = tpl.get(literal_end..)?;
            }
        }
    }
    rest.is_empty().then_some(vars)
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes.get(i) {
            Some(b'%') => {
                // Two hex digits (`from_str_radix` alone takes a sign).
                let hex = s.get(i + 1..i + 3)?;
                if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return None;
                }
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            Some(b) => {
                out.push(*b);
                i += 1;
            }
            None => break,
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_level_one() {
        let t = "test://template/{id}/data";
        assert_eq!(
            match_template(t, "test://template/a%20b/data").unwrap()["id"],
            "a b"
        );
        assert!(match_template(t, "test://template//data").is_none());
        assert!(match_template(t, "test://template/x/data/more").is_none());
        assert!(match_template(t, "test://other/x/data").is_none());
        let two = match_template("db://{table}/{row}", "db://users/7").unwrap();
        assert_eq!((two["table"].as_str(), two["row"].as_str()), ("users", "7"));
        assert!(match_template("db://{table}/{row}", "db://users").is_none());
        assert!(match_template("x://{a", "x://1").is_none());
        assert!(match_template(t, "test://template/%zz/data").is_none());
        // A sign is not a hex digit.
        assert!(match_template("t://{id}", "t://%+1").is_none());
        assert!(match_template("t://{id}", "t://%-1").is_none());
        // The last literal ends the URI; the value may hold it too.
        let json = match_template("r://{name}.json", "r://a.json.json").unwrap();
        assert_eq!(json["name"], "a.json");
        assert!(match_template("r://{name}.json", "r://.json").is_none());
        assert!(match_template("r://{name}.json", "r://a.jso").is_none());
        assert_eq!(match_template("plain://a", "plain://a"), Some(Vars::new()));
    }
}
