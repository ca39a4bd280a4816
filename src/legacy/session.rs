//! `Mcp-Session-Id` without server memory: the session is a signed token
//! that names the negotiated revision and the client's declared
//! capabilities, bound to the principal that initialized it. Any replica
//! and any isolate verifies it with the state secret alone.
//!
//! Format: `mts1.<version index>.<capability bits>.<nonce>.<tag>`, all
//! visible ASCII; the tag is HMAC-SHA-256 (truncated to 16 bytes) over a
//! domain label, the three fields and the caller's tenant and principal. A
//! token that was altered, or that another principal presents, does not
//! verify, and the transport answers 404 as for an unknown session.

use serde_json::{Map, Value, json};

use crate::crypto::{StateKey, b64url};
use crate::error::RpcError;
use crate::ids::IdSource;
use crate::owner::Owner;
use crate::protocol::meta::{ClientCapabilities, ElicitationCapability};

use super::VERSIONS;

const LABEL: &[u8] = b"mcp-tasks-edge/legacy-session/v1";
const PREFIX: &str = "mts1";

const FORM: u32 = 1;
const URL: u32 = 2;
const SAMPLING: u32 = 4;
const ROOTS: u32 = 8;

/// What a session remembers: the negotiated revision and what the client
/// declared it can answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    pub version: &'static str,
    pub capabilities: ClientCapabilities,
}

/// The capability bits of a 2025-11-25 `ClientCapabilities` object: form
/// and URL elicitation, sampling, roots.
fn bits_of(declared: &Value) -> u32 {
    let mut bits = 0;
    if let Some(e) = declared.get("elicitation") {
        let form = e.get("form").is_some();
        let url = e.get("url").is_some();
        // `elicitation: {}` means form only.
        if form || !url {
            bits |= FORM;
        }
        if url {
            bits |= URL;
        }
    }
    if declared.get("sampling").is_some() {
        bits |= SAMPLING;
    }
    if declared.get("roots").is_some() {
        bits |= ROOTS;
    }
    bits
}

/// The core's view of the capabilities `bits` stand for. The tasks
/// extension is always on: the adapter decides per request whether the
/// client asked for a task.
pub(crate) fn capabilities_of(bits: u32) -> ClientCapabilities {
    let elicitation = (bits & (FORM | URL) != 0).then(|| ElicitationCapability {
        form: (bits & FORM != 0).then(|| json!({})),
        url: (bits & URL != 0).then(|| json!({})),
    });
    let mut extensions = Map::new();
    extensions.insert(crate::protocol::TASKS_EXTENSION.to_owned(), json!({}));
    ClientCapabilities {
        elicitation,
        sampling: (bits & SAMPLING != 0).then(|| json!({})),
        roots: (bits & ROOTS != 0).then(|| json!({})),
        extensions,
    }
}

/// Runs `f` on what the tag covers, for signing and verifying alike.
fn with_parts<R>(
    owner: &Owner,
    version: usize,
    bits: u32,
    nonce: &str,
    f: impl FnOnce(&[&[u8]]) -> R,
) -> R {
    let version = version.to_string();
    let bits = bits.to_string();
    f(&[
        LABEL,
        version.as_bytes(),
        bits.as_bytes(),
        nonce.as_bytes(),
        owner.tenant.as_bytes(),
        owner.principal.as_bytes(),
    ])
}

/// A new session for `owner`, who negotiated `version` and declared
/// `declared` (the `initialize` request's `capabilities`).
pub fn issue(
    key: &StateKey,
    ids: &dyn IdSource,
    owner: &Owner,
    version: &'static str,
    declared: &Value,
) -> Result<String, RpcError> {
    let index = VERSIONS.iter().position(|v| *v == version).unwrap_or(0);
    let bits = bits_of(declared);
    let mut nonce = [0u8; 12];
    ids.fill(&mut nonce)?;
    let nonce = b64url(&nonce);
    let tag = with_parts(owner, index, bits, &nonce, |parts| key.short_tag(parts));
    Ok(format!("{PREFIX}.{index}.{bits}.{nonce}.{tag}"))
}

/// The session `token` stands for, if it is one this server issued to
/// `owner`.
pub fn verify(key: &StateKey, owner: &Owner, token: &str) -> Option<Session> {
    let [index, bits, nonce, given] = super::token_fields(token, PREFIX)?;
    let index: usize = index.parse().ok()?;
    let bits: u32 = bits.parse().ok()?;
    let version = *VERSIONS.get(index)?;
    if !with_parts(owner, index, bits, nonce, |parts| {
        key.short_tag_matches(parts, given)
    }) {
        return None;
    }
    Some(Session {
        version,
        capabilities: capabilities_of(bits),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::SequentialIds;

    fn owner(p: &str) -> Owner {
        Owner {
            tenant: "t".into(),
            principal: p.into(),
        }
    }

    #[test]
    fn round_trip_and_binding() {
        let secret = &StateKey::new(b"0123456789abcdef0123456789abcdef".to_vec());
        let ids = SequentialIds::starting_at(1);
        let declared = json!({"elicitation": {}, "sampling": {}});
        let token = issue(secret, &ids, &owner("a"), "2025-06-18", &declared).unwrap();
        assert!(token.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        let s = verify(secret, &owner("a"), &token).unwrap();
        assert_eq!(s.version, "2025-06-18");
        assert!(s.capabilities.has_form_elicitation());
        assert!(s.capabilities.sampling.is_some());
        assert!(s.capabilities.roots.is_none());
        assert_eq!(
            verify(secret, &owner("b"), &token),
            None,
            "another principal"
        );
        let another = StateKey::new(b"another secret..".to_vec());
        assert_eq!(verify(&another, &owner("a"), &token), None);
        let widened = token.replacen(".5.", ".15.", 1);
        assert_ne!(widened, token);
        assert_eq!(verify(secret, &owner("a"), &widened), None, "altered bits");
        assert_eq!(verify(secret, &owner("a"), "mts1.0.0.x.y"), None);
        assert_eq!(verify(secret, &owner("a"), ""), None);
    }
}
