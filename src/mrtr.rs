//! Integrity-protected `requestState` for core multi round-trip requests.
//!
//! Format: `base64url(payload) "." base64url(tag)`, where the payload is
//! `{"e": expiry ms, "n": nonce, "d": tool data}` and the tag is
//! HMAC-SHA-256 over a domain label, tenant, principal, tool name, the
//! SHA-256 of the canonical arguments, and the encoded payload. A state that
//! was tampered with, has expired, or is replayed by another principal, for
//! another tool or with other arguments fails verification.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::crypto::{b64url, b64url_decode, hmac_sha256, hmac_verify, sha256};
use crate::error::RpcError;
use crate::ids::IdSource;
use crate::owner::Owner;
use crate::time::Millis;

const LABEL: &[u8] = b"mcp-tasks-edge/requestState/v1";
/// Longest `requestState` accepted.
pub const MAX_LEN: usize = 8 * 1024;

#[derive(Serialize, Deserialize)]
struct Payload {
    e: Millis,
    n: String,
    d: Value,
}

/// A verified state: the tool's data and the round's nonce.
#[derive(Debug, Clone, PartialEq)]
pub struct Verified {
    pub data: Value,
    pub nonce: String,
}

fn args_digest(arguments: &Map<String, Value>) -> [u8; 32] {
    // serde_json's map is ordered, so this serialisation is canonical for
    // equal argument values.
    sha256(
        serde_json::to_string(arguments)
            .unwrap_or_default()
            .as_bytes(),
    )
}

/// Runs `f` on the inputs the tag covers: the label, the caller, the tool,
/// the arguments' digest and the encoded payload. Signing and verifying
/// both go through here, so the two cannot drift apart.
fn with_tagged_parts<R>(
    owner: &Owner,
    tool: &str,
    arguments: &Map<String, Value>,
    payload: &str,
    f: impl FnOnce(&[&[u8]]) -> R,
) -> R {
    let digest = args_digest(arguments);
    f(&[
        LABEL,
        owner.tenant.as_bytes(),
        owner.principal.as_bytes(),
        tool.as_bytes(),
        &digest,
        payload.as_bytes(),
    ])
}

/// Signs tool data for the next round.
pub fn sign(
    secret: &[u8],
    ids: &dyn IdSource,
    owner: &Owner,
    tool: &str,
    arguments: &Map<String, Value>,
    data: Value,
    expires_at: Millis,
) -> Result<String, RpcError> {
    let mut nonce = [0u8; 16];
    ids.fill(&mut nonce)?;
    let payload = Payload {
        e: expires_at,
        n: b64url(&nonce),
        d: data,
    };
    let json = serde_json::to_vec(&payload)
        .map_err(|_| RpcError::internal("Internal error: state encoding failed."))?;
    let encoded = b64url(&json);
    let t = with_tagged_parts(owner, tool, arguments, &encoded, |parts| {
        hmac_sha256(secret, parts)
    });
    Ok(format!("{encoded}.{}", b64url(&t)))
}

fn invalid() -> RpcError {
    RpcError::invalid_params(
        "Invalid requestState: it was altered, has expired, or belongs to another request.",
    )
}

/// Verifies a state echoed by the client for this caller, tool and arguments.
pub fn verify(
    secret: &[u8],
    owner: &Owner,
    tool: &str,
    arguments: &Map<String, Value>,
    state: &str,
    now: Millis,
) -> Result<Verified, RpcError> {
    if state.len() > MAX_LEN {
        return Err(invalid());
    }
    let (encoded, tag_text) = state.split_once('.').ok_or_else(invalid)?;
    let given = b64url_decode(tag_text).ok_or_else(invalid)?;
    let genuine = with_tagged_parts(owner, tool, arguments, encoded, |parts| {
        hmac_verify(secret, parts, &given)
    });
    if !genuine {
        return Err(invalid());
    }
    let json = b64url_decode(encoded).ok_or_else(invalid)?;
    let payload: Payload = serde_json::from_slice(&json).map_err(|_| invalid())?;
    if now >= payload.e {
        return Err(invalid());
    }
    Ok(Verified {
        data: payload.d,
        nonce: payload.n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::SequentialIds;
    use serde_json::json;

    fn owner(p: &str) -> Owner {
        Owner {
            tenant: "t".into(),
            principal: p.into(),
        }
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn round_trip_and_every_binding() {
        let ids = SequentialIds::starting_at(1);
        let a = args(json!({"x": 1, "y": [true]}));
        let s = sign(
            b"k",
            &ids,
            &owner("alice"),
            "tool",
            &a,
            json!({"round": 1}),
            1_000,
        )
        .unwrap();
        let ok = verify(b"k", &owner("alice"), "tool", &a, &s, 999).unwrap();
        assert_eq!(ok.data, json!({"round": 1}));
        // Same arguments in another order still verify.
        let reordered = args(json!({"y": [true], "x": 1}));
        assert!(verify(b"k", &owner("alice"), "tool", &reordered, &s, 0).is_ok());
        let refusals = [
            verify(b"k", &owner("alice"), "tool", &a, &s, 1_000),
            verify(b"k", &owner("bob"), "tool", &a, &s, 0),
            verify(b"k", &owner("alice"), "other", &a, &s, 0),
            verify(
                b"k",
                &owner("alice"),
                "tool",
                &args(json!({"x": 2, "y": [true]})),
                &s,
                0,
            ),
            verify(b"k2", &owner("alice"), "tool", &a, &s, 0),
            verify(
                b"k",
                &owner("alice"),
                "tool",
                &a,
                &format!("{s}-TAMPERED"),
                0,
            ),
            verify(b"k", &owner("alice"), "tool", &a, "", 0),
            verify(b"k", &owner("alice"), "tool", &a, "a.b.c", 0),
            verify(
                b"k",
                &owner("alice"),
                "tool",
                &a,
                &"x".repeat(MAX_LEN + 1),
                0,
            ),
        ];
        for r in refusals {
            assert_eq!(r.unwrap_err().code, crate::error::ErrorCode::INVALID_PARAMS);
        }
        // A tenant boundary is a principal boundary too.
        let other_tenant = Owner {
            tenant: "u".into(),
            principal: "alice".into(),
        };
        assert!(verify(b"k", &other_tenant, "tool", &a, &s, 0).is_err());
    }

    #[test]
    fn changing_the_payload_breaks_the_tag() {
        let ids = SequentialIds::starting_at(1);
        let a = Map::new();
        let s = sign(b"k", &ids, &owner("alice"), "tool", &a, json!(1), 1_000).unwrap();
        let (_, t) = s.split_once('.').unwrap();
        let forged = format!("{}.{t}", b64url(br#"{"e":99999999,"n":"x","d":2}"#));
        assert!(verify(b"k", &owner("alice"), "tool", &a, &forged, 0).is_err());
    }
}
