//! The members of a JSON-RPC message in one pass over its text.
//!
//! serde's reading of the envelope captures each member's value by
//! skipping it with its own parser, which in the component costs about as
//! much as everything else a `tasks/get` does with JSON. [`members`]
//! checks the whole text against JSON's grammar as serde_json reads it and
//! notes where each known member's value starts and ends, in one pass with
//! strings looked through eight bytes at a time. It answers only where it
//! is sure to agree with serde: anything else (a member name written with
//! an escape, a known member twice, nesting deeper than [`MAX_DEPTH`], or
//! text that is not JSON at all) is `None`, and the caller asks serde, so
//! what a message means, and the error a bad one gets, never depend on
//! which of the two read it.

use super::meta::{KnownSpans, MetaAt, Split, split_at};
use crate::limits::{bytes_below, bytes_equal, first_flagged};

/// The text of each known member's value, as serde_json's `RawValue`
/// would hold it (no whitespace around it).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Members<'a> {
    pub jsonrpc: Option<&'a str>,
    pub id: Option<&'a str>,
    pub method: Option<&'a str>,
    pub params: Option<&'a str>,
    pub result: Option<&'a str>,
    pub error: Option<&'a str>,
    /// `params` split at its `_meta` member, as
    /// [`crate::protocol::meta::split_meta`] splits it, when `params` is an
    /// object (read in the same pass).
    pub split: Option<Split<'a>>,
}

/// Deeper nesting is left to serde.
pub(crate) const MAX_DEPTH: usize = 40;

/// The known members of `text`, if it is one JSON object (whitespace
/// around it allowed) whose member names have no escapes and whose known
/// members appear at most once; `None` otherwise (ask serde).
pub(crate) fn members(text: &str) -> Option<Members<'_>> {
    scan(text, usize::MAX, usize::MAX, MAX_DEPTH)
}

/// [`members`], and `None` as well unless `text` is within `limits` (as
/// [`crate::limits::check_shape`] counts), so that a `Some` answers both
/// the shape check and the envelope's reading in one pass.
pub(crate) fn members_within<'a>(
    text: &'a str,
    limits: &crate::limits::Limits,
) -> Option<Members<'a>> {
    scan(
        text,
        limits.max_string_bytes,
        limits.max_members,
        limits.max_depth.min(MAX_DEPTH),
    )
}

fn scan(
    text: &str,
    max_string: usize,
    max_members: usize,
    max_depth: usize,
) -> Option<Members<'_>> {
    let mut s = Scanner {
        b: text.as_bytes(),
        i: 0,
        max_string,
        max_members,
        max_depth,
    };
    let mut found = Members::default();
    s.ws();
    s.eat(b'{')?;
    if s.max_depth == 0 {
        return None;
    }
    s.ws();
    let mut count = 1;
    if !s.eat_if(b'}') {
        loop {
            s.eat(b'"')?;
            let name_start = s.i;
            if s.string()? {
                // A name written with an escape: serde decodes it first.
                return None;
            }
            let name = text.get(name_start..s.i - 1)?;
            s.ws();
            s.eat(b':')?;
            s.ws();
            let start = s.i;
            let cut = if name == "params" && s.eat_if(b'{') {
                if s.max_depth <= 1 {
                    return None;
                }
                s.params(2)?
            } else {
                s.value(1)?;
                None
            };
            let value = text.get(start..s.i)?;
            if name == "params" && value.starts_with('{') {
                found.split = Some(split_at(text, start, s.i, cut)?);
            }
            let slot = match name {
                "jsonrpc" => Some(&mut found.jsonrpc),
                "id" => Some(&mut found.id),
                "method" => Some(&mut found.method),
                "params" => Some(&mut found.params),
                "result" => Some(&mut found.result),
                "error" => Some(&mut found.error),
                _ => None,
            };
            if let Some(slot) = slot {
                if slot.is_some() {
                    return None;
                }
                *slot = Some(value);
            }
            s.ws();
            if s.eat_if(b'}') {
                break;
            }
            s.eat(b',')?;
            s.count(&mut count)?;
            s.ws();
        }
    }
    s.ws();
    (s.i == s.b.len()).then_some(found)
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    /// The longest string (its bytes between the quotes, as written).
    max_string: usize,
    /// The most members of one array or object.
    max_members: usize,
    /// The most arrays and objects open at once.
    max_depth: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    /// JSON's whitespace, as serde_json skips it.
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\t' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.eat_if(byte).then_some(())
    }

    fn eat_if(&mut self, byte: u8) -> bool {
        let hit = self.peek() == Some(byte);
        if hit {
            self.i += 1;
        }
        hit
    }

    /// One value at nesting level `depth`.
    fn value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => {
                self.i += 1;
                self.string().map(|_| ())
            }
            b'{' | b'[' if depth >= self.max_depth => None,
            b'{' => {
                self.i += 1;
                self.object(depth + 1)
            }
            b'[' => {
                self.i += 1;
                self.array(depth + 1)
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// One more member after a comma: `None` past the limit.
    fn count(&self, count: &mut usize) -> Option<()> {
        *count += 1;
        (*count <= self.max_members).then_some(())
    }

    /// The rest of an object whose `{` has been read.
    fn object(&mut self, depth: usize) -> Option<()> {
        self.ws();
        if self.eat_if(b'}') {
            return Some(());
        }
        let mut count = 1;
        loop {
            self.eat(b'"')?;
            self.string()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            self.value(depth)?;
            self.ws();
            if self.eat_if(b'}') {
                return Some(());
            }
            self.eat(b',')?;
            self.count(&mut count)?;
            self.ws();
        }
    }

    /// The rest of the `params` object, whose `{` has been read, noting
    /// its `_meta` member. `None` (ask serde) where `split_meta` would not
    /// split: a member name with an escape, or `_meta` twice.
    fn params(&mut self, depth: usize) -> Option<Option<MetaAt>> {
        self.ws();
        if self.eat_if(b'}') {
            return Some(None);
        }
        let (mut count, mut prev_end, mut found) = (1, None, None);
        loop {
            let name_start = self.i;
            self.eat(b'"')?;
            if self.string()? {
                return None;
            }
            let name = self.b.get(name_start + 1..self.i - 1)?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            let value_start = self.i;
            let is_meta = name == b"_meta";
            let known = if is_meta && self.peek() == Some(b'{') && depth < self.max_depth {
                self.i += 1;
                self.meta(depth + 1)?
            } else {
                self.value(depth)?;
                None
            };
            let value_end = self.i;
            self.ws();
            let next = self.peek()?;
            if is_meta {
                if found.is_some() {
                    return None;
                }
                let comma = (next == b',').then_some(self.i);
                let mut at = MetaAt::new(name_start, (value_start, value_end), comma, prev_end);
                at.known = known;
                found = Some(at);
            }
            prev_end = Some(value_end);
            if self.eat_if(b'}') {
                return Some(found);
            }
            self.eat(b',')?;
            self.count(&mut count)?;
            self.ws();
        }
    }

    /// The rest of `_meta`'s object, whose `{` has been read, read as
    /// [`Self::object`] reads it, noting where the values of its version
    /// and capabilities members are: `Some(None)` where a member name has
    /// an escape or either member comes twice.
    fn meta(&mut self, depth: usize) -> Option<Option<KnownSpans>> {
        use super::meta_keys::{CLIENT_CAPABILITIES, PROTOCOL_VERSION};
        let mut known: Option<KnownSpans> = Some((None, None));
        self.ws();
        if self.eat_if(b'}') {
            return Some(known);
        }
        let mut count = 1;
        loop {
            let name_start = self.i + 1;
            self.eat(b'"')?;
            let escaped = self.string()?;
            let name = self.b.get(name_start..self.i - 1)?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            let start = self.i;
            self.value(depth)?;
            let span = (start, self.i);
            let plain = !escaped
                && known.as_mut().is_some_and(|(version, caps)| {
                    let slot = if name == PROTOCOL_VERSION.as_bytes() {
                        version
                    } else if name == CLIENT_CAPABILITIES.as_bytes() {
                        caps
                    } else {
                        return true;
                    };
                    slot.replace(span).is_none()
                });
            if !plain {
                known = None;
            }
            self.ws();
            if self.eat_if(b'}') {
                return Some(known);
            }
            self.eat(b',')?;
            self.count(&mut count)?;
            self.ws();
        }
    }

    /// The rest of an array whose `[` has been read.
    fn array(&mut self, depth: usize) -> Option<()> {
        self.ws();
        if self.eat_if(b']') {
            return Some(());
        }
        let mut count = 1;
        loop {
            self.value(depth)?;
            self.ws();
            if self.eat_if(b']') {
                return Some(());
            }
            self.eat(b',')?;
            self.count(&mut count)?;
            self.ws();
        }
    }

    /// The rest of a string whose opening quote has been read, up to and
    /// including its closing quote; whether it had an escape. A control
    /// character, or an escape JSON does not have, is `None`.
    fn string(&mut self) -> Option<bool> {
        let start = self.i;
        let mut escaped = false;
        loop {
            let j = first_flagged(
                self.b,
                self.i,
                |w| bytes_equal(w, b'"') | bytes_equal(w, b'\\') | bytes_below(w, 0x20),
                |c| c == b'"' || c == b'\\' || c < 0x20,
            )?;
            match self.b.get(j)? {
                b'"' => {
                    self.i = j + 1;
                    return (j - start <= self.max_string).then_some(escaped);
                }
                b'\\' => {
                    escaped = true;
                    self.i = j + 1 + self.escape(j + 1)?;
                }
                _ => return None,
            }
        }
    }

    /// The length of the escape whose letter is at `at`.
    fn escape(&self, at: usize) -> Option<usize> {
        match self.b.get(at)? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(1),
            b'u' => {
                let hex = self.b.get(at + 1..at + 5)?;
                hex.iter().all(u8::is_ascii_hexdigit).then_some(5)
            }
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// A number: `-`, then `0` or a digit run not starting with `0`, then
    /// optionally a fraction and an exponent, each with at least one digit.
    fn number(&mut self) -> Option<()> {
        self.eat_if(b'-');
        match self.peek()? {
            b'0' => {
                self.i += 1;
                if self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    return None;
                }
            }
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.eat_if(b'.') {
            self.some_digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            self.some_digits()?;
        }
        Some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
    }

    fn some_digits(&mut self) -> Option<()> {
        let start = self.i;
        self.digits();
        (self.i > start).then_some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// What serde reads of the same text, as `jsonrpc::parse_message`
    /// asks it, and `split_meta`'s split of the params.
    fn by_serde(text: &str) -> Option<Members<'_>> {
        if text.trim_start().as_bytes().first() != Some(&b'{') {
            return None;
        }
        let env: super::super::jsonrpc::RawEnvelope<'_> = serde_json::from_str(text).ok()?;
        let mut m = env.members();
        m.split = m
            .params
            .filter(|p| p.starts_with('{'))
            .and_then(crate::protocol::meta::split_meta);
        Some(m)
    }

    #[test]
    fn reads_a_request() {
        let text = r#" {"jsonrpc":"2.0", "id" : 7,"method":"tasks/get","params":{"taskId":"t","_meta":{"a":[1,-2.5e+3,true,null,"\u00e9\n"]}},"x":{}}
"#;
        let m = members(text).unwrap();
        assert_eq!(m.jsonrpc, Some(r#""2.0""#));
        assert_eq!(m.id, Some("7"));
        assert_eq!(m.method, Some(r#""tasks/get""#));
        assert_eq!(
            m.params,
            Some(r#"{"taskId":"t","_meta":{"a":[1,-2.5e+3,true,null,"\u00e9\n"]}}"#)
        );
        assert_eq!((m.result, m.error), (None, None));
        assert_eq!(Some(m), by_serde(text));
        assert_eq!(members("{}"), Some(Members::default()));
        assert_eq!(members(r#"{"params":null}"#).unwrap().params, Some("null"));
    }

    #[test]
    fn leaves_to_serde_what_it_cannot_be_sure_of() {
        for text in [
            "",
            "[]",
            "1",
            r#""x""#,
            "{",
            r#"{"id":1,}"#,
            r#"{"id":1}x"#,
            r#"{"id":1}{}"#,
            r#"{"id":01}"#,
            r#"{"id":1.}"#,
            r#"{"id":1e}"#,
            r#"{"id":-}"#,
            r#"{"id":+1}"#,
            r#"{"id":.5}"#,
            r#"{"id":tru}"#,
            r#"{"id":nul}"#,
            r#"{"id":"a"#,
            "{\"id\":\"a\u{1}\"}",
            r#"{"id":"\x"}"#,
            r#"{"id":"\u12g4"}"#,
            r#"{"id":[1 2]}"#,
            r#"{"id":{"a" 1}}"#,
            r#"{"id":{1:2}}"#,
            r#"{"id" 1}"#,
            r#"{"\u0069d":1}"#,
            r#"{"id":1,"id":2}"#,
            r#"{"params":{},"params":{}}"#,
            "{\"id\":1}\u{a0}",
            "\u{feff}{}",
        ] {
            assert_eq!(members(text), None, "{text:?}");
        }
        let deep = format!(
            "{{\"p\":{}1{}}}",
            "[".repeat(MAX_DEPTH),
            "]".repeat(MAX_DEPTH)
        );
        assert_eq!(members(&deep), None);
        let fits = format!(
            "{{\"p\":{}1{}}}",
            "[".repeat(MAX_DEPTH - 1),
            "]".repeat(MAX_DEPTH - 1)
        );
        assert!(members(&fits).is_some());
        // Unknown members may repeat, as serde ignores them.
        assert!(members(r#"{"x":1,"x":2}"#).is_some());
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "\\PC{0,8}|[\"\\\\\n\u{7}é]{0,4}".prop_map(Value::from),
        ];
        // `_meta` and its two members noted by the scanner among them.
        let key = prop_oneof![
            4 => "[a-z_\"]{0,3}",
            1 => Just("_meta".to_owned()),
            1 => Just(crate::protocol::meta_keys::PROTOCOL_VERSION.to_owned()),
            1 => Just(crate::protocol::meta_keys::CLIENT_CAPABILITIES.to_owned()),
        ];
        leaf.prop_recursive(4, 24, 4, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map(key.clone(), inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn message() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        proptest::collection::btree_map(
            proptest::sample::select(vec![
                "jsonrpc", "id", "method", "params", "result", "error", "x", "_meta",
            ]),
            json_value(),
            0..6,
        )
        .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
    }

    proptest::proptest! {
        /// Every object serde_json writes, compact or pretty, is read, and
        /// read as serde reads it.
        #[test]
        fn reads_what_serde_writes(v in message(), pretty in proptest::prelude::any::<bool>()) {
            let text = if pretty { serde_json::to_string_pretty(&v).unwrap() } else { v.to_string() };
            let want = by_serde(&text);
            proptest::prop_assert!(want.is_some());
            // Only a params member name with an escape is left to serde.
            let escaped_name = v.get("params").and_then(Value::as_object)
                .is_some_and(|p| p.keys().any(|k| k.contains('"')));
            match members(&text) {
                Some(m) => proptest::prop_assert_eq!(Some(m), want, "{}", text),
                None => proptest::prop_assert!(escaped_name, "{}", text),
            }
        }

        /// On text near a message, with bytes changed, dropped or repeated,
        /// it never reads anything serde would read differently or refuse.
        #[test]
        fn never_differs_from_serde(
            v in message(),
            edits in proptest::collection::vec(
                (proptest::prelude::any::<proptest::sample::Index>(),
                 0u8..3,
                 proptest::sample::select(b"\"\\{}[]:, 0-9.eE+tfnul\n\x01".to_vec())),
                1..4),
        ) {
            let mut bytes = v.to_string().into_bytes();
            for (at, how, byte) in edits {
                if bytes.is_empty() {
                    break;
                }
                let at = at.index(bytes.len());
                match how {
                    0 => bytes[at] = byte,
                    1 => { bytes.remove(at); }
                    _ => bytes.insert(at, byte),
                }
            }
            let Ok(text) = String::from_utf8(bytes) else { return Ok(()) };
            if let Some(m) = members(&text) {
                proptest::prop_assert_eq!(Some(m), by_serde(&text), "{}", text);
            }
        }
    }

    proptest::proptest! {
        /// Within limits means what the shape check means by it: an answer
        /// only where the shape check passes, and every message that passes
        /// and that [`members`] reads is answered.
        #[test]
        fn limits_are_the_shape_checks(
            v in message(),
            pretty in proptest::prelude::any::<bool>(),
            depth in 0usize..6,
            string in 0usize..10,
            count in 0usize..5,
        ) {
            let text = if pretty { serde_json::to_string_pretty(&v).unwrap() } else { v.to_string() };
            let limits = crate::limits::Limits {
                max_depth: depth,
                max_string_bytes: string,
                max_members: count,
                ..crate::limits::Limits::default()
            };
            let shape = crate::limits::check_shape(text.as_bytes(), &limits);
            match members_within(&text, &limits) {
                Some(m) => {
                    proptest::prop_assert_eq!(&shape, &Ok(()), "{}", text);
                    proptest::prop_assert_eq!(Some(m), members(&text));
                }
                None => proptest::prop_assert!(shape.is_err() || members(&text).is_none(), "{}", text),
            }
        }
    }

    #[test]
    fn notes_the_version_and_capabilities_of_meta() {
        use crate::protocol::meta::{Known, known_of};
        let known = |meta: &str| {
            let text = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"a":1,"_meta":{meta}}}}}"#
            );
            let m = members(&text).unwrap();
            let split = m.split.unwrap();
            assert_eq!(split.known, known_of(meta), "{meta}");
            split.known.map(|k| {
                (
                    k.version.map(str::to_owned),
                    k.capabilities.map(str::to_owned),
                )
            })
        };
        let v = r#""io.modelcontextprotocol/protocolVersion""#;
        let c = r#""io.modelcontextprotocol/clientCapabilities""#;
        let some =
            |a: Option<&str>, b: Option<&str>| Some((a.map(str::to_owned), b.map(str::to_owned)));
        assert_eq!(
            known(&format!(r#"{{{v}:"x",{c}:{{"a":[{v}]}},"z":{{}}}}"#)),
            some(
                Some(r#""x""#),
                Some(r#"{"a":["io.modelcontextprotocol/protocolVersion"]}"#)
            )
        );
        assert_eq!(
            known(&format!(r#"{{ {c} : null , {v} : 5 }}"#)),
            some(Some("5"), Some("null"))
        );
        assert_eq!(known("{}"), some(None, None));
        assert_eq!(known(r#"{"b":{"c":1}}"#), some(None, None));
        // Not noted: `_meta` not an object, a name with an escape, a known
        // member twice.
        assert_eq!(known("[]"), None);
        assert_eq!(known("null"), None);
        assert_eq!(known(&format!(r#"{{{v}:"x",{v}:"y"}}"#)), None);
        assert_eq!(known(&format!(r#"{{{c}:{{}},"a":1,{c}:{{}}}}"#)), None);
        assert_eq!(known(&format!(r#"{{{v}:"x","\u0061":1}}"#)), None);
        assert_eq!(Known::default(), known_of("{}").unwrap());
    }

    #[test]
    fn a_message_from_the_load_client_is_read() {
        let text = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {
            "taskId": "tsk_x", "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}})
        .to_string();
        assert!(members(&text).is_some());
    }
}
