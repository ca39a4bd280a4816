//! What [`super::judge`] reads of a body to route it: the method, whether
//! `_meta` names a 2026-07-28 protocol version, and whether the body is a
//! response (a `result` or an `error`).
//!
//! The envelope's one-pass scanner ([`crate::protocol::scan::members`])
//! answers for nearly every message; serde reads the rest (a member name
//! with an escape, a method name with one, a known member twice, `_meta`
//! that is not an object), so a route never depends on which of the two
//! read the body: where the scanner answers, it answers as serde does.

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::protocol::scan::Members;

/// The members of a body that decide its route, as serde reads them into
/// `Option`s: a member whose value is `null` counts as absent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Peek<'a> {
    /// The method, if it is a string (without escapes).
    pub method: Option<&'a str>,
    /// `params._meta` has the 2026-07-28 protocol version member.
    pub modern_meta: bool,
    /// The body has a `result` or an `error`.
    pub response: bool,
}

/// What `body` says about its route; `None` if it is not a JSON object
/// whose `method` is a string without escapes (or absent), whose `params`
/// and `params._meta` are objects (or absent).
pub(super) fn peek(body: &[u8]) -> Option<Peek<'_>> {
    let members = std::str::from_utf8(body)
        .ok()
        .and_then(crate::protocol::scan::members);
    match members.as_ref().and_then(of_members) {
        Some(peek) => Some(peek),
        None => by_serde(body),
    }
}

/// [`peek`] from the scanner's members, where they are enough to be sure.
pub(super) fn of_members<'a>(m: &Members<'a>) -> Option<Peek<'a>> {
    let present = |v: Option<&str>| v.is_some_and(|v| v != "null");
    let method = match m.method {
        None | Some("null") => None,
        Some(raw) => {
            let name = raw.strip_prefix('"')?.strip_suffix('"')?;
            // A string with an escape is not a borrowed name: serde's to say.
            if name.contains('\\') {
                return None;
            }
            Some(name)
        }
    };
    let modern_meta = match m.params {
        None | Some("null") => false,
        Some(params) if params.starts_with('{') => {
            let split = m.split.as_ref()?;
            match split.meta {
                None | Some("null") => false,
                Some(meta) if meta.starts_with('{') => present(split.known?.version),
                Some(_) => return None,
            }
        }
        Some(_) => return None,
    };
    Some(Peek {
        method,
        modern_meta,
        response: present(m.result) || present(m.error),
    })
}

/// [`peek`] by serde's reading of the whole body.
pub(super) fn by_serde(body: &[u8]) -> Option<Peek<'_>> {
    #[derive(Deserialize)]
    struct Body<'a> {
        #[serde(borrow, default)]
        method: Option<&'a str>,
        #[serde(default)]
        params: Option<Params>,
        #[serde(default)]
        result: Option<IgnoredAny>,
        #[serde(default)]
        error: Option<IgnoredAny>,
    }
    #[derive(Deserialize)]
    struct Params {
        #[serde(rename = "_meta", default)]
        meta: Option<Meta>,
    }
    #[derive(Deserialize)]
    struct Meta {
        #[serde(rename = "io.modelcontextprotocol/protocolVersion", default)]
        version: Option<IgnoredAny>,
    }
    let body = crate::json::from_slice::<Body<'_>>(body).ok()?;
    Some(Peek {
        method: body.method,
        modern_meta: body
            .params
            .and_then(|p| p.meta)
            .is_some_and(|m| m.version.is_some()),
        response: body.result.is_some() || body.error.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::{Peek, by_serde, of_members};
    use proptest::prelude::*;

    /// The scanner's answer, if it gives one.
    fn scanned(body: &str) -> Option<Peek<'_>> {
        crate::protocol::scan::members(body)
            .as_ref()
            .and_then(of_members)
    }

    /// Bodies the scanner answers for, each read as serde reads it.
    #[test]
    fn the_scanner_peeks_as_serde_reads() {
        let v = "io.modelcontextprotocol/protocolVersion";
        let cases = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t"}}"#.to_owned(),
            r#"{"method":"initialize","params":{"_meta":null}}"#.to_owned(),
            r#"{"method":null,"result":null,"error":{}}"#.to_owned(),
            r#"{"id":1,"result":null}"#.to_owned(),
            r#"{"id":1,"result":0}"#.to_owned(),
            r#"{"id":1,"error":null,"result":[]}"#.to_owned(),
            r#"{"method":"tools/call","params":null}"#.to_owned(),
            r#" { "method" : "x" , "params" : { } } "#.to_owned(),
            format!(r#"{{"method":"x","params":{{"_meta":{{"{v}":"2026-07-28"}}}}}}"#),
            format!(r#"{{"method":"x","params":{{"_meta":{{"{v}":null}}}}}}"#),
            format!(r#"{{"method":"x","params":{{"a":1,"_meta":{{"b":[1],"{v}":7}}}}}}"#),
            r#"{"method":"x","params":{"_meta":{}}}"#.to_owned(),
        ];
        for body in &cases {
            let fast = scanned(body);
            assert!(fast.is_some(), "the scanner left {body} to serde");
            assert_eq!(fast, by_serde(body.as_bytes()), "{body}");
        }
        assert_eq!(
            scanned(&cases[8]),
            Some(Peek {
                method: Some("x"),
                modern_meta: true,
                response: false
            })
        );
    }

    /// Bodies where serde's answer differs from a naive reading of the
    /// text (escapes, wrong types, duplicates): the scanner leaves them to
    /// serde.
    #[test]
    fn the_scanner_leaves_what_it_cannot_be_sure_of() {
        let v = "io.modelcontextprotocol/protocolVersion";
        let cases = [
            r#"{"method":"tasks\/get"}"#.to_owned(),
            r#"{"method":1}"#.to_owned(),
            r#"{"method":"x","params":[]}"#.to_owned(),
            r#"{"method":"x","params":"p"}"#.to_owned(),
            r#"{"method":"x","params":{"_meta":1}}"#.to_owned(),
            r#"{"method":"x","params":{"_meta":[]}}"#.to_owned(),
            format!(r#"{{"method":"x","params":{{"_meta":{{"{v}":1,"{v}":2}}}}}}"#),
            r#"{"method":"x","params":{"_meta":{"\u0061":1}}}"#.to_owned(),
        ];
        for body in &cases {
            assert_eq!(scanned(body), None, "{body}");
        }
    }

    /// A JSON value for one member, from a small set that covers each
    /// type, `null`, escapes and the names the route depends on.
    fn value() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "null",
            "1",
            "true",
            "[]",
            "[1,{}]",
            "{}",
            r#"{"a":null}"#,
            r#""x""#,
            r#""initialize""#,
            r#""tools/call""#,
            r#""tasks/result""#,
            r#""a\"b""#,
            r#""\u0069nitialize""#,
            r#""2026-07-28""#,
        ])
        .prop_map(str::to_owned)
    }

    /// A `_meta` value: objects with and without the version member (once,
    /// twice, `null`, escaped names), and other types.
    fn meta() -> impl Strategy<Value = String> {
        let v = "io.modelcontextprotocol/protocolVersion";
        let member = prop_oneof![
            value().prop_map(move |x| format!(r#""{v}":{x}"#)),
            value().prop_map(|x| format!(r#""io.modelcontextprotocol/clientCapabilities":{x}"#)),
            value().prop_map(|x| format!(r#""other":{x}"#)),
            value().prop_map(|x| format!(r#""\u0061":{x}"#)),
            value().prop_map(|x| { format!(r#""io.modelcontextprotocol\/protocolVersion":{x}"#) }),
        ];
        prop_oneof![
            value(),
            prop::collection::vec(member, 0..4).prop_map(|m| format!("{{{}}}", m.join(","))),
        ]
    }

    /// A params value: objects with `_meta` (once, twice, or not at all)
    /// among other members, and other types.
    fn params() -> impl Strategy<Value = String> {
        let member = prop_oneof![
            meta().prop_map(|m| format!(r#""_meta":{m}"#)),
            value().prop_map(|x| format!(r#""taskId":{x}"#)),
            value().prop_map(|x| format!(r#""\u005fmeta":{x}"#)),
        ];
        prop_oneof![
            value(),
            prop::collection::vec(member, 0..3).prop_map(|m| format!("{{{}}}", m.join(","))),
        ]
    }

    /// A message-like object: known members and others, in any order, some
    /// twice.
    fn body() -> impl Strategy<Value = String> {
        let member = prop_oneof![
            value().prop_map(|x| format!(r#""method":{x}"#)),
            params().prop_map(|p| format!(r#""params":{p}"#)),
            value().prop_map(|x| format!(r#""result":{x}"#)),
            value().prop_map(|x| format!(r#""error":{x}"#)),
            value().prop_map(|x| format!(r#""id":{x}"#)),
            value().prop_map(|x| format!(r#""jsonrpc":{x}"#)),
            value().prop_map(|x| format!(r#""extra":{x}"#)),
            value().prop_map(|x| format!(r#""m\u0065thod":{x}"#)),
        ];
        prop::collection::vec(member, 0..6).prop_map(|m| format!("{{{}}}", m.join(",")))
    }

    proptest! {
        /// Wherever the scanner answers, it answers as serde does.
        #[test]
        fn a_scanned_peek_agrees_with_serde(body in body()) {
            if let Some(fast) = scanned(&body) {
                prop_assert_eq!(Some(fast), by_serde(body.as_bytes()), "{}", body);
            }
        }
    }
}
