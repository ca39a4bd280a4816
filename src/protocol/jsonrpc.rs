//! JSON-RPC 2.0 framing: the two-phase parse of one incoming message and the
//! serialisation of responses.
//!
//! Phase one reads only the envelope, keeping `params` as raw JSON text, so a
//! malformed envelope can still report the request id. Phase two (in the
//! server) parses `params` into the exact type of the method.

use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

use super::scan::Members;

use super::error::RpcError;

/// A request id: a string or an integer, never null.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Id {
    Int(i64),
    Uint(u64),
    Str(String),
}

impl Id {
    /// Reads an id from raw JSON; `None` for null, floats, objects and the like.
    /// The id whose JSON text is `raw`.
    fn from_raw(raw: &str) -> Option<Id> {
        match crate::json::from_str::<serde_json::Value>(raw).ok()? {
            serde_json::Value::String(s) => Some(Id::Str(s)),
            serde_json::Value::Number(n) => {
                n.as_i64().map(Id::Int).or_else(|| n.as_u64().map(Id::Uint))
            }
            _ => None,
        }
    }

    /// The id as a JSON value, for embedding in `_meta`.
    pub fn to_value(&self) -> serde_json::Value {
        match self {
            Id::Int(i) => serde_json::Value::from(*i),
            Id::Uint(u) => serde_json::Value::from(*u),
            Id::Str(s) => serde_json::Value::from(s.as_str()),
        }
    }
}

fn present<'de, D>(d: D) -> Result<Option<&'de RawValue>, D::Error>
where
    D: Deserializer<'de>,
{
    <&RawValue>::deserialize(d).map(Some)
}

/// Every member is kept raw so that phase one never fails on a member's type:
/// the checks below decide, and can still recover the id.
#[derive(Deserialize)]
pub(super) struct RawEnvelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

impl<'a> RawEnvelope<'a> {
    /// The members as `scan::members` gives them (without the split).
    pub(super) fn members(self) -> Members<'a> {
        Members {
            jsonrpc: self.jsonrpc.map(RawValue::get),
            id: self.id.map(RawValue::get),
            method: self.method.map(RawValue::get),
            params: self.params.map(RawValue::get),
            result: self.result.map(RawValue::get),
            error: self.error.map(RawValue::get),
            split: None,
        }
    }
}

/// One well-formed incoming message.
#[derive(Debug)]
pub struct Message<'a> {
    /// `None` for a notification.
    pub id: Option<Id>,
    pub method: String,
    /// The JSON text of `params`, `None` when absent.
    pub params: Option<&'a str>,
    /// `params` split at its `_meta` member (see
    /// [`super::meta::split_meta`]), when the reading of the envelope
    /// could do it in the same pass; `None` otherwise.
    pub split: Option<super::meta::Split<'a>>,
}

/// Why phase one refused a message, with the id when it could be recovered.
#[derive(Debug)]
pub struct EnvelopeError {
    pub id: Option<Id>,
    pub error: RpcError,
}

/// Phase one: the envelope. Non-JSON is -32700 (without an id); a JSON value that
/// is not a single well-formed request or notification is -32600.
pub fn parse_message(body: &[u8]) -> Result<Message<'_>, EnvelopeError> {
    // JSON text is UTF-8; anything else is not JSON at all.
    let Ok(text) = std::str::from_utf8(body) else {
        return Err(EnvelopeError {
            id: None,
            error: RpcError::parse_error(),
        });
    };
    // A derived struct would also accept a JSON array, filling the members
    // by position: only an object can be a message.
    if text.trim_start().as_bytes().first() != Some(&b'{') {
        return Err(classify_unparsable(text));
    }
    // One pass where it can be sure (nearly every message); serde where
    // it cannot, which reads the same members or refuses the text.
    let env = match super::scan::members(text) {
        Some(members) => members,
        None => match crate::json::from_str::<RawEnvelope<'_>>(text) {
            Ok(env) => env.members(),
            Err(_) => return Err(classify_unparsable(text)),
        },
    };
    message_of(env)
}

/// The rest of phase one, for a JSON object whose members have been read
/// (by [`parse_message`], or by `scan::members_within` with the shape
/// check).
pub(crate) fn message_of(env: Members<'_>) -> Result<Message<'_>, EnvelopeError> {
    let id = match env.id {
        None => None,
        Some(raw) => match Id::from_raw(raw) {
            Some(id) => Some(id),
            None => {
                return Err(EnvelopeError {
                    id: None,
                    error: RpcError::invalid_request("The id must be a string or an integer."),
                });
            }
        },
    };
    let invalid = |msg: &str| EnvelopeError {
        id: id.clone(),
        error: RpcError::invalid_request(msg),
    };
    if env.jsonrpc != Some("\"2.0\"") {
        return Err(invalid("The jsonrpc member must be \"2.0\"."));
    }
    if env.result.is_some() || env.error.is_some() {
        return Err(invalid("Clients must not send responses to the server."));
    }
    let method = match env.method {
        Some(raw) => match crate::json::from_str::<String>(raw) {
            Ok(m) => m,
            Err(_) => return Err(invalid("The method member must be a string.")),
        },
        None => return Err(invalid("The method member is missing.")),
    };
    if let Some(p) = env.params {
        match p.as_bytes().first() {
            Some(b'{') => {}
            // A structured value, so a valid request (JSON-RPC 2.0), whose
            // params no MCP method takes by position: -32602 with 400.
            Some(b'[') => {
                return Err(EnvelopeError {
                    id,
                    error: RpcError::missing_meta(
                        "Invalid params: MCP methods take their params by name, as an object.",
                    ),
                });
            }
            _ => return Err(invalid("The params member must be an object.")),
        }
    }
    Ok(Message {
        id,
        method,
        params: env.params,
        split: env.split,
    })
}

fn classify_unparsable(body: &str) -> EnvelopeError {
    match crate::json::from_str::<IgnoredAny>(body) {
        Err(_) => EnvelopeError {
            id: None,
            error: RpcError::parse_error(),
        },
        Ok(_) => {
            let trimmed = body.bytes().find(|b| !b.is_ascii_whitespace());
            let error = if trimmed == Some(b'[') {
                RpcError::invalid_request(
                    "Batches are not supported; send one message per request.",
                )
            } else if trimmed == Some(b'{') {
                RpcError::invalid_request("The message is not a valid JSON-RPC request.")
            } else {
                RpcError::invalid_request("The message must be a JSON object.")
            };
            EnvelopeError {
                id: recover_id(body),
                error,
            }
        }
    }
}

/// The id of a body refused before it was read as a message (one past the
/// shape limits), if it has a readable one.
pub(crate) fn id_of(body: &[u8]) -> Option<Id> {
    std::str::from_utf8(body).ok().and_then(recover_id)
}

/// Best-effort id recovery from an object whose other members are wrong
/// (for example duplicated keys).
fn recover_id(body: &str) -> Option<Id> {
    #[derive(Deserialize)]
    struct OnlyId<'a> {
        #[serde(borrow)]
        id: Option<&'a RawValue>,
    }
    let v: OnlyId<'_> = crate::json::from_str(body).ok()?;
    v.id.map(RawValue::get).and_then(Id::from_raw)
}

#[derive(Serialize)]
struct ResultResponse<'a, T: Serialize> {
    jsonrpc: &'static str,
    id: &'a Id,
    result: &'a T,
}

#[derive(Serialize)]
struct ErrorResponse<'a> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a Id>,
    error: &'a RpcError,
}

#[derive(Serialize)]
struct NotificationOut<'a, T: Serialize> {
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a T,
}

/// Serialises a success response.
pub fn result_bytes<T: Serialize>(id: &Id, result: &T) -> Vec<u8> {
    to_bytes(&ResultResponse {
        jsonrpc: "2.0",
        id,
        result,
    })
}

/// Completes a message whose innermost object is `{"_meta":…}` followed by
/// the members of `object` (the JSON text of an object, such as a stored
/// task snapshot), without parsing them again: `head` (which ends with
/// `"_meta":`), then `meta_json`, the members, and the two closing braces.
pub fn close_with_members(mut head: Vec<u8>, meta_json: &[u8], object: &str) -> Vec<u8> {
    let members = object
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .unwrap_or("");
    head.reserve(meta_json.len() + members.len() + 3);
    head.extend_from_slice(meta_json);
    if !crate::limits::trimmed(members).is_empty() {
        head.push(b',');
        head.extend_from_slice(members.as_bytes());
    }
    head.extend_from_slice(b"}}");
    head
}

/// Serialises an error response; `id: None` (a request whose id could not
/// be read) leaves `id` out, as MCP's schema has it (`id?: RequestId`; a
/// `null` id fails the TypeScript SDK's parsing of the error).
pub fn error_bytes(id: Option<&Id>, error: &RpcError) -> Vec<u8> {
    to_bytes(&ErrorResponse {
        jsonrpc: "2.0",
        id,
        error,
    })
}

/// Serialises a notification.
pub fn notification_bytes<T: Serialize>(method: &str, params: &T) -> Vec<u8> {
    to_bytes(&NotificationOut {
        jsonrpc: "2.0",
        method,
        params,
    })
}

/// Serialising our own types cannot fail (string keys, no non-finite floats);
/// should it ever, the caller still gets a valid JSON-RPC error.
fn to_bytes<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_else(|_| {
        br#"{"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error: the response could not be serialised."}}"#.to_vec()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::error::ErrorCode;

    fn err(body: &str) -> EnvelopeError {
        match parse_message(body.as_bytes()) {
            Ok(m) => panic!("expected an error, got {m:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn parses_request_and_notification() {
        let m = parse_message(
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{}}}"#,
        )
        .unwrap();
        assert_eq!(m.id, Some(Id::Int(7)));
        assert_eq!(m.method, "tools/list");
        assert_eq!(m.params, Some(r#"{"_meta":{}}"#));
        let n = parse_message(br#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#).unwrap();
        assert_eq!(n.id, None);
        let s = parse_message(br#"{"jsonrpc":"2.0","id":"a","method":"x"}"#).unwrap();
        assert_eq!(s.id, Some(Id::Str("a".into())));
    }

    #[test]
    fn parse_errors_have_null_id() {
        for body in ["", "{", "not json", "{\"id\":1,", "\u{0}"] {
            let e = err(body);
            assert_eq!(e.error.code, ErrorCode::PARSE_ERROR, "{body:?}");
            assert_eq!(e.id, None);
        }
        let e = parse_message(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}").unwrap_err();
        assert_eq!(e.error.code, ErrorCode::PARSE_ERROR);
    }

    #[test]
    fn invalid_requests_recover_the_id() {
        let e = err(r#"{"jsonrpc":"1.0","id":3,"method":"x"}"#);
        assert_eq!(
            (e.error.code, e.id),
            (ErrorCode::INVALID_REQUEST, Some(Id::Int(3)))
        );
        let e = err(r#"{"jsonrpc":"2.0","id":"q","method":5}"#);
        assert_eq!(
            (e.error.code, e.id),
            (ErrorCode::INVALID_REQUEST, Some(Id::Str("q".into())))
        );
        let e = err(r#"{"jsonrpc":"2.0","id":4,"method":"x","params":[1]}"#);
        assert_eq!(
            (e.error.code, e.error.status, e.id),
            (ErrorCode::INVALID_PARAMS, Some(400), Some(Id::Int(4)))
        );
        let e = err(r#"{"jsonrpc":"2.0","id":4,"method":"x","params":7}"#);
        assert_eq!(
            (e.error.code, e.id),
            (ErrorCode::INVALID_REQUEST, Some(Id::Int(4)))
        );
        let e = err(r#"{"jsonrpc":"2.0","id":4,"result":{}}"#);
        assert_eq!(
            (e.error.code, e.id),
            (ErrorCode::INVALID_REQUEST, Some(Id::Int(4)))
        );
        let e = err(r#"{"jsonrpc":"2.0","id":9,"id":9,"method":"x"}"#);
        assert_eq!((e.error.code, e.id), (ErrorCode::INVALID_REQUEST, None));
    }

    #[test]
    fn bad_ids_and_non_objects_are_invalid_requests() {
        for body in [
            r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"x"}]"#,
            r#"["2.0",1,"tools/list",{}]"#,
            r#"[]"#,
            r#"42"#,
            r#""text""#,
        ] {
            let e = err(body);
            assert_eq!(e.error.code, ErrorCode::INVALID_REQUEST, "{body}");
            assert_eq!(e.id, None, "{body}");
        }
    }

    #[test]
    fn deep_nesting_and_huge_numbers_do_not_crash() {
        // A deep array is still an array: no batches.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(err(&deep).error.code, ErrorCode::INVALID_REQUEST);
        // Deep params are kept raw in phase one; phase two refuses them.
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"x","params":{{"a":{}{}}}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        match parse_message(deep.as_bytes()) {
            Ok(m) => {
                let typed = crate::json::from_str::<serde_json::Value>(m.params.unwrap());
                assert!(typed.is_err(), "the recursion limit must stop deep params");
            }
            Err(e) => assert_eq!(e.error.code, ErrorCode::INVALID_REQUEST),
        }
        // Grammatically valid JSON, but not an integer id.
        let e = err(r#"{"jsonrpc":"2.0","id":1e999,"method":"x"}"#);
        assert_eq!(e.error.code, ErrorCode::INVALID_REQUEST);
        // A number no float can hold stays raw in phase one; phase two refuses it.
        let m = parse_message(br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"n":1e999}}"#)
            .unwrap();
        assert!(crate::json::from_str::<serde_json::Value>(m.params.unwrap()).is_err());
        let big =
            parse_message(br#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"x"}"#).unwrap();
        assert_eq!(big.id, Some(Id::Uint(u64::MAX)));
        let e = err(r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"x"}"#);
        assert_eq!(e.error.code, ErrorCode::INVALID_REQUEST);
    }

    #[test]
    fn responses_serialise_exactly() {
        let ok = result_bytes(&Id::Int(1), &serde_json::json!({"resultType":"complete"}));
        assert_eq!(
            String::from_utf8(ok).unwrap(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}"#
        );
        let e = error_bytes(None, &RpcError::parse_error());
        assert_eq!(
            String::from_utf8(e).unwrap(),
            r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error: the body is not valid JSON."}}"#
        );
    }
}
