//! The per-request `_meta` that every 2026-07-28 request carries: protocol
//! version and client capabilities, validated on each request and never
//! remembered from an earlier one.

use std::borrow::Cow;

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

/// A request's params with the `_meta` member taken out (see [`split_meta`]).
#[derive(Debug, PartialEq, Eq)]
pub struct Split<'a> {
    /// The text of `_meta`'s value, if the params have the member.
    pub meta: Option<&'a str>,
    /// The params object without `_meta`.
    pub rest: Cow<'a, str>,
    /// `_meta`'s version and capabilities members (see [`Known`]): noted
    /// by the envelope's scanner in its pass, or by [`split_meta`].
    pub(crate) known: Option<Known<'a>>,
}

/// The text of the values of `_meta`'s version and capabilities members:
/// only where `_meta` is an object, no member name in it has an escape,
/// and neither member comes twice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Known<'a> {
    pub version: Option<&'a str>,
    pub capabilities: Option<&'a str>,
}

/// Splits the text of a params object at its top-level `_meta` member, in
/// one pass over the bytes, so that neither the method's own params nor
/// `_meta` is read through the other. `params` must be a JSON value as
/// serde_json captured it (a `RawValue`). `None` where one cheap pass
/// cannot be sure: not an object, a member name written with an escape, or
/// `_meta` twice; the caller then reads the whole params with serde.
/// `_meta`'s version and capabilities members are noted as the envelope's
/// scanner notes them.
pub fn split_meta(params: &str) -> Option<Split<'_>> {
    let b = params.as_bytes();
    // The end of the previous member's value, and the `_meta` value's span
    // with the span to cut out of the object (the member and one comma).
    let mut prev_end = None;
    let mut found = None;
    let end = walk(b, skip_ws(b, 0), |m| {
        if params.get(m.name_start + 1..m.name_end - 1)? == "_meta" {
            if found.is_some() {
                return None;
            }
            let comma = (b.get(m.next) == Some(&b',')).then_some(m.next);
            found = Some(MetaAt::new(m.name_start, m.value, comma, prev_end));
        }
        prev_end = Some(m.value.1);
        Some(())
    })?;
    if skip_ws(b, end) != b.len() {
        return None;
    }
    let mut split = split_at(params, 0, params.len(), found)?;
    split.known = split.meta.and_then(known_of);
    Some(split)
}

/// Where the values of `_meta`'s version and capabilities members are, as
/// byte offsets (see [`Known`]).
pub(crate) type KnownSpans = (Option<(usize, usize)>, Option<(usize, usize)>);

/// Where `_meta` is in a params object, as byte offsets into the text the
/// object is part of: its value, and the span to cut out of the object
/// (the member and one comma next to it).
pub(crate) struct MetaAt {
    value: (usize, usize),
    cut: (usize, usize),
    /// The spans of the version's and the capabilities' values, if noted.
    pub(crate) known: Option<KnownSpans>,
}

impl MetaAt {
    /// The member whose name's opening quote is at `name_start` and whose
    /// value spans `value`; `comma` is where the comma after it is, if one
    /// follows, and `prev_end` where the member before it ends, if any.
    pub(crate) fn new(
        name_start: usize,
        value: (usize, usize),
        comma: Option<usize>,
        prev_end: Option<usize>,
    ) -> MetaAt {
        let cut = match (comma, prev_end) {
            (Some(comma), _) => (name_start, comma + 1),
            (None, Some(prev)) => (prev, value.1),
            (None, None) => (name_start, value.1),
        };
        MetaAt {
            value,
            cut,
            known: None,
        }
    }
}

/// The params object `text[start..end]` split at `meta` (its `_meta`
/// member, if it has one).
pub(crate) fn split_at(
    text: &str,
    start: usize,
    end: usize,
    meta: Option<MetaAt>,
) -> Option<Split<'_>> {
    let params = text.get(start..end)?;
    Some(match meta {
        None => Split {
            meta: None,
            rest: Cow::Borrowed(params),
            known: None,
        },
        Some(MetaAt { value, cut, known }) => {
            let span = |s: Option<(usize, usize)>| match s {
                Some((a, b)) => text.get(a..b).map(Some),
                None => Some(None),
            };
            let known = match known {
                Some((version, capabilities)) => Some(Known {
                    version: span(version)?,
                    capabilities: span(capabilities)?,
                }),
                None => None,
            };
            Split {
                meta: Some(text.get(value.0..value.1)?),
                rest: Cow::Owned([text.get(start..cut.0)?, text.get(cut.1..end)?].concat()),
                known,
            }
        }
    })
}

/// The values of `_meta`'s version and capabilities members, where `text`
/// is an object, no member name in it has an escape, and neither member
/// comes twice: what the envelope's scanner notes in its pass. `text` must
/// be valid JSON, as the envelope's readers leave a captured value: the
/// other members are skipped by their brackets, not checked.
pub(crate) fn known_of(text: &str) -> Option<Known<'_>> {
    use super::meta_keys::{CLIENT_CAPABILITIES, PROTOCOL_VERSION};
    let text = text.trim_matches([' ', '\t', '\n', '\r']);
    let mut known = Known::default();
    members(text, |key, value| {
        let slot = match key {
            PROTOCOL_VERSION => &mut known.version,
            CLIENT_CAPABILITIES => &mut known.capabilities,
            _ => return Some(()),
        };
        slot.replace(value).is_none().then_some(())
    })?;
    Some(known)
}

/// Reads the version and the client capabilities from `_meta`'s
/// [`Known`] members without serde's derived readers, where the version
/// is a string without escapes and the capabilities an object whose known
/// members have the types [`ClientCapabilities`] gives them. Their values
/// are built as serde builds them (an empty object directly, any other
/// value through serde), and unknown members are skipped. `None` for
/// anything else, including every error: the caller then reads `_meta`
/// with serde, which also words the errors.
pub(crate) fn read_known(known: Known<'_>) -> Option<(&str, ClientCapabilities)> {
    let version = known.version?;
    let b = version.as_bytes();
    let (end, escaped) = string_end(b, 0).filter(|_| b.first() == Some(&b'"'))?;
    (end == b.len() && !escaped).then_some(())?;
    Some((
        version.get(1..end - 1)?,
        plain_capabilities(known.capabilities?)?,
    ))
}

/// [`ClientCapabilities`] from a plain object (see [`read_known`]).
fn plain_capabilities(text: &str) -> Option<ClientCapabilities> {
    let mut caps = ClientCapabilities::default();
    let mut seen = 0;
    members(text, |key, value| {
        let field = ["elicitation", "sampling", "roots", "extensions"]
            .iter()
            .position(|f| *f == key);
        if let Some(i) = field
            && !first_time(&mut seen, i)
        {
            return None;
        }
        match field {
            Some(0) if value == "null" => {}
            Some(0) => {
                let mut e = ElicitationCapability::default();
                let mut seen = 0;
                members(value, |key, value| {
                    let (slot, i) = match key {
                        "form" => (&mut e.form, 0),
                        "url" => (&mut e.url, 1),
                        _ => return Some(()),
                    };
                    if !first_time(&mut seen, i) {
                        return None;
                    }
                    *slot = optional_value(value)?;
                    Some(())
                })?;
                caps.elicitation = Some(e);
            }
            Some(1) => caps.sampling = optional_value(value)?,
            Some(2) => caps.roots = optional_value(value)?,
            Some(_) => members(value, |key, value| {
                // A name twice: the last one stays, as in serde's map.
                caps.extensions.insert(key.to_owned(), plain_value(value)?);
                Some(())
            })?,
            None => {}
        }
        Some(())
    })?;
    Some(caps)
}

/// Whether the bit `i` of `seen` was clear; sets it.
fn first_time(seen: &mut u8, i: usize) -> bool {
    let bit = 1u8 << i;
    let first = *seen & bit == 0;
    *seen |= bit;
    first
}

/// An `Option<Value>` member as serde reads it: `null` is `None`.
fn optional_value(text: &str) -> Option<Option<Value>> {
    if text == "null" {
        return Some(None);
    }
    plain_value(text).map(Some)
}

/// A value as serde reads it; an empty object without serde.
fn plain_value(text: &str) -> Option<Value> {
    let b = text.as_bytes();
    if b.first() == Some(&b'{') && skip_ws(b, 1) + 1 == b.len() && b.last() == Some(&b'}') {
        return Some(Value::Object(Map::new()));
    }
    crate::json::from_str(text).ok()
}

/// Calls `f` with each member of the object `text` (valid JSON, no
/// whitespace around it): its name, and its value's text without the
/// whitespace around it. `None` if `text` is not an object, a member name
/// has an escape, or `f` says `None`.
fn members<'a>(text: &'a str, mut f: impl FnMut(&'a str, &'a str) -> Option<()>) -> Option<()> {
    let end = walk(text.as_bytes(), 0, |m| {
        f(
            text.get(m.name_start + 1..m.name_end - 1)?,
            text.get(m.value.0..m.value.1)?,
        )
    })?;
    (end == text.len()).then_some(())
}

/// One member of an object, as byte offsets into the text.
#[derive(Clone, Copy)]
struct Member {
    /// The name's opening quote.
    name_start: usize,
    /// One past the name's closing quote.
    name_end: usize,
    /// The value, without the whitespace around it.
    value: (usize, usize),
    /// The `,` or `}` after the value.
    next: usize,
}

/// Calls `f` with each member of the object that opens at `open`, in
/// order; returns one past its closing brace. `None` if no object opens
/// there, a member name has an escape, or `f` says `None`. The values are
/// skipped by their brackets, not checked (see [`value_end`]).
fn walk(b: &[u8], open: usize, mut f: impl FnMut(Member) -> Option<()>) -> Option<usize> {
    if b.get(open) != Some(&b'{') {
        return None;
    }
    let mut i = skip_ws(b, open + 1);
    if b.get(i) == Some(&b'}') {
        return Some(i + 1);
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let (name_end, escaped) = string_end(b, i)?;
        if escaped {
            return None;
        }
        let colon = skip_ws(b, name_end);
        if b.get(colon) != Some(&b':') {
            return None;
        }
        let start = skip_ws(b, colon + 1);
        let end = value_end(b, start)?;
        let next = skip_ws(b, end);
        let separator = *b.get(next)?;
        f(Member {
            name_start: i,
            name_end,
            value: (start, end),
            next,
        })?;
        match separator {
            b',' => i = skip_ws(b, next + 1),
            b'}' => return Some(next + 1),
            _ => return None,
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// One past the closing quote of the string that opens at `i`, and whether
/// it holds an escape.
fn string_end(b: &[u8], i: usize) -> Option<(usize, bool)> {
    let mut escaped = false;
    let mut j = i + 1;
    loop {
        j = crate::limits::quote_or_backslash(b, j)?;
        if b.get(j)? == &b'"' {
            return Some((j + 1, escaped));
        }
        escaped = true;
        j += 2;
    }
}

/// One past the end of the JSON value that starts at `i`.
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => string_end(b, i).map(|(end, _)| end),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match b.get(j)? {
                    b'"' => {
                        j = string_end(b, j)?.0;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while !matches!(
                b.get(j),
                None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            ) {
                j += 1;
            }
            Some(j)
        }
    }
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
        // The keys are unique, so the first match is the only one; compared
        // eight bytes at a time (every extension name shares the prefix
        // `io.modelcontextprotocol/`).
        self.extensions.iter().any(|(name, value)| {
            value.is_object()
                && crate::limits::same_bytes(name.as_bytes(), TASKS_EXTENSION.as_bytes())
        })
    }

    /// Whether form-mode elicitation may be sent: `elicitation: {}` means
    /// form only; otherwise `form` must be present.
    pub fn has_form_elicitation(&self) -> bool {
        match &self.elicitation {
            None => false,
            Some(e) => e.form.is_some() || e.url.is_none(),
        }
    }

    /// Whether a client with these capabilities can answer an input request
    /// of `method` with `params`: an elicitation of the mode it declared,
    /// sampling or roots if it declared them. A method this server does not
    /// know is not judged.
    pub fn can_answer(&self, method: &str, params: &Value) -> bool {
        match method {
            "elicitation/create" => match params.get("mode").and_then(Value::as_str) {
                Some("url") => self.elicitation.as_ref().is_some_and(|e| e.url.is_some()),
                _ => self.has_form_elicitation(),
            },
            "sampling/createMessage" => self.sampling.is_some(),
            "roots/list" => self.roots.is_some(),
            _ => true,
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
    fn has_tasks_only_for_the_tasks_extension_as_an_object() {
        let with = |ext: &str| caps(&format!(r#"{{"extensions": {ext}}}"#)).has_tasks();
        assert!(with(r#"{"io.modelcontextprotocol/tasks": {}}"#));
        assert!(with(
            r#"{"io.modelcontextprotocol/other": {}, "io.modelcontextprotocol/tasks": {"x": 1}}"#
        ));
        assert!(!with(r#"{"io.modelcontextprotocol/taskz": {}}"#));
        assert!(!with(r#"{"io.modelcontextprotocol/tasks/": {}}"#));
        assert!(!with(r#"{"xo.modelcontextprotocol/tasks": {}}"#));
        assert!(!with(r#"{"io.modelcontextprotocol/tasks": true}"#));
        assert!(!with(r#"{"io.modelcontextprotocol/tasks": null}"#));
        assert!(!with("{}"));
        assert!(!caps("{}").has_tasks());
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

    #[test]
    fn split_meta_cases() {
        let split = |s| split_meta(s).map(|p| (p.meta, p.rest.into_owned()));
        let some = |m: Option<&'static str>, r: &str| Some((m, r.to_owned()));
        assert_eq!(split(r#"{}"#), some(None, "{}"));
        assert_eq!(split(r#" { } "#), some(None, " { } "));
        assert_eq!(split(r#"{"a":1}"#), some(None, r#"{"a":1}"#));
        assert_eq!(split(r#"{"_meta":{}}"#), some(Some("{}"), "{}"));
        assert_eq!(
            split(r#"{"_meta":{"a":"}\""},"taskId":"x"}"#),
            some(Some(r#"{"a":"}\""}"#), r#"{"taskId":"x"}"#)
        );
        assert_eq!(
            split(r#"{"taskId":"x", "_meta" : [1,{"b":[]}] }"#),
            some(Some(r#"[1,{"b":[]}]"#), r#"{"taskId":"x" }"#)
        );
        assert_eq!(
            split(r#"{"a":true,"_meta":null,"b":-1.5e3}"#),
            some(Some("null"), r#"{"a":true,"b":-1.5e3}"#)
        );
        assert_eq!(
            split(r#"{"é":"\u00e9","_meta":5}"#),
            some(Some("5"), r#"{"é":"\u00e9"}"#)
        );
        // Left to serde: not an object, an escaped name, `_meta` twice.
        for s in [
            "[]",
            "null",
            r#""_meta""#,
            r#"{"\u005fmeta":{}}"#,
            r#"{"_meta":1,"_meta":2}"#,
            r#"{"a":1"#,
            r#"{"a":1,}"#,
            r#"{,}"#,
            r#"{"a":1} x"#,
        ] {
            assert_eq!(split_meta(s), None, "{s}");
        }
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let key = prop_oneof![
            Just("_meta".to_owned()),
            Just("taskId".to_owned()),
            Just("é".to_owned()),
            Just("_met".to_owned()),
            "[a-z_]{0,6}",
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[ -~é\\\\\"{}\\[\\],:]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 5, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec((key.clone(), inner), 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// What `Server::negotiate` reads without serde from a `_meta` split
    /// out of the params.
    fn read_plain(text: &str) -> Option<(&str, ClientCapabilities)> {
        known_of(text).and_then(read_known)
    }

    /// What `Server::negotiate` reads with serde: the version and the
    /// capabilities, or `None` where it answers an error.
    fn read_with_serde(text: &str) -> Option<(String, ClientCapabilities)> {
        let meta: RawMeta<'_> = crate::json::from_str(text).ok()?;
        let version = crate::json::from_str(meta.protocol_version?.get()).ok()?;
        let caps = crate::json::from_str(meta.client_capabilities?.get()).ok()?;
        Some((version, caps))
    }

    #[test]
    fn plain_meta_cases() {
        let load_sends = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},"io.modelcontextprotocol/clientInfo":{"name":"load","version":"1"}}"#;
        let pretty =
            serde_json::to_string_pretty(&serde_json::from_str::<Value>(load_sends).unwrap())
                .unwrap();
        for text in [
            load_sends,
            &pretty,
            r#"{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"x"}"#,
            r#" {"io.modelcontextprotocol/protocolVersion" : "2026-07-28" , "io.modelcontextprotocol/clientCapabilities" : { "sampling" : null , "roots" : { "listChanged" : true } , "elicitation" : { "url" : { } , "form" : null } , "extensions" : { "a" : 1 , "a" : { } , "b" : [ ] } } } "#,
        ] {
            let plain = read_plain(text);
            assert!(plain.is_some(), "{text}");
            let (version, caps) = plain.unwrap();
            assert_eq!(
                Some((version.to_owned(), caps)),
                read_with_serde(text),
                "{text}"
            );
        }
        let (_, caps) = read_plain(load_sends).unwrap();
        assert!(caps.has_tasks() && caps.has_form_elicitation());
        // Left to serde: whatever one pass cannot be sure of, every error.
        for text in [
            "null",
            "[]",
            "{}",
            r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#,
            r#"{"io.modelcontextprotocol/clientCapabilities":{}}"#,
            r#"{"io.modelcontextprotocol/protocolVersion":"2026\u002d07-28","io.modelcontextprotocol/clientCapabilities":{}}"#,
            r#"{"io.modelcontextprotocol\/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#,
            r#"{"io.modelcontextprotocol/protocolVersion":5,"io.modelcontextprotocol/clientCapabilities":{}}"#,
            r#"{"io.modelcontextprotocol/protocolVersion":"a","io.modelcontextprotocol/protocolVersion":"a","io.modelcontextprotocol/clientCapabilities":{}}"#,
            r#"{"io.modelcontextprotocol/protocolVersion":"a","io.modelcontextprotocol/clientCapabilities":[]}"#,
            r#"{"io.modelcontextprotocol/protocolVersion":"a","io.modelcontextprotocol/clientCapabilities":{"extensions":null}}"#,
            r#"{"io.modelcontextprotocol/protocolVersion":"a","io.modelcontextprotocol/clientCapabilities":{"elicitation":true}}"#,
            r#"{"io.modelcontextprotocol/protocolVersion":"a","io.modelcontextprotocol/clientCapabilities":{"roots":{},"roots":{}}}"#,
            r#"{"io.modelcontextprotocol/protocolVersion":"a","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{},"form":{}}}}"#,
        ] {
            assert_eq!(read_plain(text).map(|(v, _)| v), None, "{text}");
        }
    }

    /// The text of a `_meta`-like object: member names (some escaped,
    /// some twice) with values around the capabilities' shapes, compact
    /// or spaced.
    fn meta_text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let value = prop_oneof![
            Just(Value::Null),
            Just(serde_json::json!({})),
            Just(serde_json::json!({"form": {}})),
            Just(serde_json::json!({"url": {}, "form": null})),
            Just(serde_json::json!({"io.modelcontextprotocol/tasks": {}, "x": [1]})),
            Just(Value::from("2026-07-28")),
            json_value(),
        ];
        let cap_name = prop_oneof![
            Just(r#""elicitation""#),
            Just(r#""sampling""#),
            Just(r#""roots""#),
            Just(r#""extensions""#),
            Just(r#""ext\u0065nsions""#),
            Just(r#""form""#),
            Just(r#""other""#),
        ];
        let space = prop_oneof![Just(""), Just(" "), Just("\n  ")];
        let object = |members: Vec<(&str, String, &str)>| {
            let inner: Vec<String> = members
                .into_iter()
                .map(|(k, v, s)| format!("{s}{k}{s}:{s}{v}{s}"))
                .collect();
            format!("{{{}}}", inner.join(","))
        };
        let caps = proptest::collection::vec(
            (
                cap_name,
                value.clone().prop_map(|v| v.to_string()),
                space.clone(),
            ),
            0..5,
        )
        .prop_map(object);
        let meta_name = prop_oneof![
            Just(r#""io.modelcontextprotocol/protocolVersion""#),
            Just(r#""io.modelcontextprotocol/clientCapabilities""#),
            Just(r#""io.modelcontextprotocol\/clientCapabilities""#),
            Just(r#""io.modelcontextprotocol/clientInfo""#),
        ];
        let caps_or_other = {
            let caps = caps.clone();
            move |other: BoxedStrategy<String>| prop_oneof![3 => caps.clone(), 1 => other].boxed()
        };
        let member_value = prop_oneof![
            value.prop_map(|v| v.to_string()),
            Just(r#""a\"b""#.to_owned()),
            caps,
        ]
        .boxed();
        let version = prop_oneof![
            3 => Just(r#""2026-07-28""#.to_owned()),
            1 => member_value.clone(),
        ];
        (
            version,
            caps_or_other(member_value.clone()),
            space.clone(),
            proptest::collection::vec((meta_name, member_value, space), 0..3),
        )
            .prop_flat_map(move |(version, caps, s, extra)| {
                let mut members = vec![
                    (r#""io.modelcontextprotocol/protocolVersion""#, version, s),
                    (r#""io.modelcontextprotocol/clientCapabilities""#, caps, s),
                ];
                members.extend(extra);
                Just(members).prop_shuffle()
            })
            .prop_map(object)
    }

    proptest::proptest! {
        /// Wherever the one-pass reading of `_meta` answers, serde reads
        /// the same version and capabilities.
        #[test]
        fn read_plain_agrees_with_serde(text in meta_text()) {
            if let Some((version, caps)) = read_plain(&text) {
                proptest::prop_assert_eq!(Some((version.to_owned(), caps)), read_with_serde(&text), "{}", text);
            }
        }

        /// Any `_meta` serde_json writes with a plain version and
        /// capabilities of the right types is read in one pass, as serde
        /// reads it.
        #[test]
        fn read_plain_reads_what_serde_writes(
            elicitation in proptest::option::of(proptest::option::of(proptest::collection::vec(
                (proptest::prop_oneof![
                    proptest::strategy::Just("form".to_owned()),
                    proptest::strategy::Just("url".to_owned()),
                    "[a-z]{0,4}",
                ], json_value()),
                0..3,
            ))),
            sampling in proptest::option::of(json_value()),
            extensions in proptest::option::of(proptest::collection::vec(("[a-z/._]{0,8}", json_value()), 0..3)),
            info in proptest::option::of(json_value()),
            version in "[0-9a-z-]{0,12}",
            pretty in proptest::prelude::any::<bool>(),
        ) {
            let mut caps = Map::new();
            if let Some(e) = elicitation {
                let e = e.map_or(Value::Null, |m| Value::Object(m.into_iter().collect()));
                caps.insert("elicitation".into(), e);
            }
            if let Some(s) = sampling {
                caps.insert("sampling".into(), s);
            }
            if let Some(x) = extensions {
                caps.insert("extensions".into(), Value::Object(x.into_iter().collect()));
            }
            let mut meta = serde_json::json!({
                "io.modelcontextprotocol/protocolVersion": version,
                "io.modelcontextprotocol/clientCapabilities": caps,
            });
            if let Some(info) = info {
                meta["io.modelcontextprotocol/clientInfo"] = info;
            }
            let text = if pretty {
                serde_json::to_string_pretty(&meta).unwrap()
            } else {
                meta.to_string()
            };
            let plain = read_plain(&text);
            proptest::prop_assert!(plain.is_some(), "{}", text);
            let (version, caps) = plain.unwrap();
            proptest::prop_assert_eq!(Some((version.to_owned(), caps)), read_with_serde(&text), "{}", text);
        }

        /// On any object serde_json writes, compact or pretty, the split
        /// is taken and agrees with serde: `_meta`'s value, and the object
        /// without it.
        #[test]
        fn split_meta_agrees_with_serde(v in json_value(), pretty in proptest::prelude::any::<bool>()) {
            let text = if pretty {
                serde_json::to_string_pretty(&v).unwrap()
            } else {
                serde_json::to_string(&v).unwrap()
            };
            // What serde reads back (its float parsing may round).
            let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(&text) else {
                proptest::prop_assert!(split_meta(&text).is_none(), "{}", text);
                return Ok(());
            };
            let split = split_meta(&text);
            proptest::prop_assert!(split.is_some(), "{}", text);
            let split = split.unwrap();
            let meta = map.remove("_meta");
            let got_meta = split.meta.map(|m| serde_json::from_str::<Value>(m).unwrap());
            proptest::prop_assert_eq!(got_meta, meta);
            let rest: Value = serde_json::from_str(&split.rest).unwrap();
            proptest::prop_assert_eq!(rest, Value::Object(map));
        }
    }
}
