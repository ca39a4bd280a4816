//! Integrity-protected `requestState` for core multi round-trip requests.
//!
//! Format: `key id "." base64url(payload) "." base64url(tag)`, where the
//! key id names the [`Keyring`] key that signed it (so a rotated-out key
//! still verifies while it is configured as the previous one), the payload is
//! `{"e": expiry ms, "n": nonce, "d": tool data, "p": task placements}`
//! (`p`, where a task the round creates is placed, is absent from states
//! signed before it was added) and the tag is
//! HMAC-SHA-256 over a domain label, tenant, principal, tool name, the
//! SHA-256 of the canonical arguments, and the encoded payload. A state that
//! was tampered with, has expired, or is replayed by another principal, for
//! another tool or with other arguments fails verification.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::crypto::{Keyring, StateKey, b64url, b64url_decode, sha256};
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
    /// The server's task placements when it signed the round; absent from
    /// a state signed before it was carried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    p: Option<u16>,
}

/// What a round's state is bound to: the caller, the tool (or
/// `prompt:<name>`) and the call's arguments. A state is accepted only for
/// the binding it was signed for.
#[derive(Clone, Copy)]
pub struct Binding<'a> {
    pub owner: &'a Owner,
    pub tool: &'a str,
    pub arguments: &'a Map<String, Value>,
}

/// A verified state: the tool's data, the round's nonce, its expiry and
/// the key that signed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Verified {
    pub data: Value,
    pub nonce: String,
    pub expires_at: Millis,
    /// The id of the key that signed the state.
    pub key_id: String,
    /// The server's task placements when the round was signed: a task the
    /// round creates is placed by this count, so that a replay served
    /// after the count changed finds the same task. `None` for a state
    /// signed before the count was carried: the server's own count then.
    pub placements: Option<u16>,
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
fn with_tagged_parts<R>(at: Binding<'_>, payload: &str, f: impl FnOnce(&[&[u8]]) -> R) -> R {
    let digest = args_digest(at.arguments);
    f(&[
        LABEL,
        at.owner.tenant.as_bytes(),
        at.owner.principal.as_bytes(),
        at.tool.as_bytes(),
        &digest,
        payload.as_bytes(),
    ])
}

/// Signs tool data for the next round, bound to `at`, valid until
/// `expires_at`, on a server with `placements` task placements.
pub fn sign(
    keys: &Keyring,
    ids: &dyn IdSource,
    at: Binding<'_>,
    data: Value,
    expires_at: Millis,
    placements: u16,
) -> Result<String, RpcError> {
    let mut nonce = [0u8; 16];
    ids.fill(&mut nonce)?;
    let payload = Payload {
        e: expires_at,
        n: b64url(&nonce),
        d: data,
        p: Some(placements),
    };
    let json = serde_json::to_vec(&payload)
        .map_err(|_| RpcError::internal("Internal error: state encoding failed."))?;
    let encoded = b64url(&json);
    let key = keys.current();
    let t = with_tagged_parts(at, &encoded, |parts| key.hmac(parts));
    Ok(format!("{}.{encoded}.{}", key.id(), b64url(&t)))
}

fn invalid() -> RpcError {
    RpcError::invalid_params(
        "Invalid requestState: it was altered, has expired, or belongs to another request.",
    )
}

/// Verifies a state echoed by the client for the binding `at`.
pub fn verify(
    keys: &Keyring,
    at: Binding<'_>,
    state: &str,
    now: Millis,
) -> Result<Verified, RpcError> {
    if state.len() > MAX_LEN {
        return Err(invalid());
    }
    let mut parts = state.split('.');
    let (Some(key_id), Some(encoded), Some(tag_text), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid());
    };
    let key: &StateKey = keys.by_id(key_id).ok_or_else(invalid)?;
    let given = b64url_decode(tag_text).ok_or_else(invalid)?;
    let genuine = with_tagged_parts(at, encoded, |parts| key.hmac_verify(parts, &given));
    if !genuine {
        return Err(invalid());
    }
    let json = b64url_decode(encoded).ok_or_else(invalid)?;
    let payload: Payload = crate::json::from_slice(&json).map_err(|_| invalid())?;
    if now >= payload.e {
        return Err(invalid());
    }
    Ok(Verified {
        data: payload.d,
        nonce: payload.n,
        expires_at: payload.e,
        key_id: key.id().to_owned(),
        placements: payload.p,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::SequentialIds;
    use serde_json::json;

    fn k() -> Keyring {
        Keyring::new(b"k".to_vec())
    }

    fn owner(p: &str) -> Owner {
        Owner {
            tenant: "t".into(),
            principal: p.into(),
        }
    }

    fn at<'a>(owner: &'a Owner, tool: &'a str, arguments: &'a Map<String, Value>) -> Binding<'a> {
        Binding {
            owner,
            tool,
            arguments,
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
            &k(),
            &ids,
            at(&owner("alice"), "tool", &a),
            json!({"round": 1}),
            1_000,
            0,
        )
        .unwrap();
        let ok = verify(&k(), at(&owner("alice"), "tool", &a), &s, 999).unwrap();
        assert_eq!(ok.data, json!({"round": 1}));
        // Same arguments in another order still verify.
        let reordered = args(json!({"y": [true], "x": 1}));
        assert!(verify(&k(), at(&owner("alice"), "tool", &reordered), &s, 0).is_ok());
        let refusals = [
            verify(&k(), at(&owner("alice"), "tool", &a), &s, 1_000),
            verify(&k(), at(&owner("bob"), "tool", &a), &s, 0),
            verify(&k(), at(&owner("alice"), "other", &a), &s, 0),
            verify(
                &k(),
                at(&owner("alice"), "tool", &args(json!({"x": 2, "y": [true]}))),
                &s,
                0,
            ),
            verify(
                &Keyring::new(b"k2".to_vec()),
                at(&owner("alice"), "tool", &a),
                &s,
                0,
            ),
            verify(
                &k(),
                at(&owner("alice"), "tool", &a),
                &format!("{s}-TAMPERED"),
                0,
            ),
            verify(&k(), at(&owner("alice"), "tool", &a), "", 0),
            verify(&k(), at(&owner("alice"), "tool", &a), "a.b.c", 0),
            verify(
                &k(),
                at(&owner("alice"), "tool", &a),
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
        assert!(verify(&k(), at(&other_tenant, "tool", &a), &s, 0).is_err());
    }

    #[test]
    fn a_rotated_key_verifies_while_it_is_the_previous_one() {
        let ids = SequentialIds::starting_at(1);
        let a = Map::new();
        let old = Keyring::new(b"old-key".to_vec());
        let s = sign(
            &old,
            &ids,
            at(&owner("alice"), "tool", &a),
            json!(1),
            1_000,
            0,
        )
        .unwrap();
        let rotated = Keyring::new(b"new-key".to_vec()).with_previous(b"old-key".to_vec());
        let v = verify(&rotated, at(&owner("alice"), "tool", &a), &s, 0).unwrap();
        assert_eq!(v.key_id, old.current().id());
        // New states are signed with the new key.
        let fresh = sign(
            &rotated,
            &ids,
            at(&owner("alice"), "tool", &a),
            json!(1),
            1_000,
            0,
        )
        .unwrap();
        assert!(fresh.starts_with(rotated.current().id()));
        // Once the previous key is dropped, its states are refused.
        let dropped = Keyring::new(b"new-key".to_vec());
        assert!(verify(&dropped, at(&owner("alice"), "tool", &a), &s, 0).is_err());
        assert!(verify(&dropped, at(&owner("alice"), "tool", &a), &fresh, 0).is_ok());
        // Another key's id on a genuine state is refused.
        let (_, rest) = s.split_once('.').unwrap();
        let relabelled = format!("{}.{rest}", rotated.current().id());
        assert!(verify(&rotated, at(&owner("alice"), "tool", &a), &relabelled, 0).is_err());
    }

    #[test]
    fn changing_the_payload_breaks_the_tag() {
        let ids = SequentialIds::starting_at(1);
        let a = Map::new();
        let s = sign(
            &k(),
            &ids,
            at(&owner("alice"), "tool", &a),
            json!(1),
            1_000,
            0,
        )
        .unwrap();
        let (id, rest) = s.split_once('.').unwrap();
        let (_, t) = rest.split_once('.').unwrap();
        let forged = format!("{id}.{}.{t}", b64url(br#"{"e":99999999,"n":"x","d":2}"#));
        assert!(verify(&k(), at(&owner("alice"), "tool", &a), &forged, 0).is_err());
    }

    /// A state signed before the placements were carried has none: the
    /// server places its task by its own count, as it did then.
    #[test]
    fn a_state_without_placements_verifies_with_none() {
        let a = Map::new();
        let encoded = b64url(br#"{"e":1000,"n":"bm9uY2U","d":1}"#);
        let key = k();
        let tag = with_tagged_parts(at(&owner("alice"), "tool", &a), &encoded, |parts| {
            key.current().hmac(parts)
        });
        let old = format!("{}.{encoded}.{}", key.current().id(), b64url(&tag));
        let v = verify(&k(), at(&owner("alice"), "tool", &a), &old, 0).unwrap();
        assert_eq!((v.data, v.placements), (serde_json::json!(1), None));
        let ids = SequentialIds::starting_at(1);
        let fresh = sign(
            &k(),
            &ids,
            at(&owner("alice"), "tool", &a),
            json!(1),
            1_000,
            16,
        )
        .unwrap();
        let v = verify(&k(), at(&owner("alice"), "tool", &a), &fresh, 0).unwrap();
        assert_eq!(v.placements, Some(16));
    }
}
