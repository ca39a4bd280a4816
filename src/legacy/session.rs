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

use crate::crypto::{Keyring, StateKey, b64url};
use crate::error::RpcError;
use crate::ids::IdSource;
use crate::kept::Kept;
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
    let (index, bits) = verify_fields(key, owner, token)?;
    session_of(index, bits)
}

/// The version index and capability bits of `token`, if its tag is
/// `key`'s over them and `owner`.
fn verify_fields(key: &StateKey, owner: &Owner, token: &str) -> Option<(usize, u32)> {
    let [index, bits, nonce, given] = super::token_fields(token, PREFIX)?;
    let index: usize = index.parse().ok()?;
    let bits: u32 = bits.parse().ok()?;
    VERSIONS.get(index)?;
    with_parts(owner, index, bits, nonce, |parts| {
        key.short_tag_matches(parts, given)
    })
    .then_some((index, bits))
}

fn session_of(index: usize, bits: u32) -> Option<Session> {
    Some(Session {
        version: VERSIONS.get(index)?,
        capabilities: capabilities_of(bits),
    })
}

/// What a verified session token stands for, as [`VerifiedSessions`]
/// keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeptSession {
    owner: Owner,
    index: usize,
    bits: u32,
}

/// Session tokens this instance verified (a [`Kept`] cache): one per
/// component instance, one per isolate on the Worker. A session has no
/// expiry, so an entry stands until the keyring changes or a newer token
/// replaces it, and it answers only for the owner it was issued to.
pub(crate) type VerifiedSessions = Kept<Keyring, KeptSession>;

/// The session `token` stands for, if one of `keys` issued it to `owner`:
/// [`verify`] with each key in turn, answered from `kept` for a token
/// verified before under the same keys (one verified now is kept there).
/// Answers exactly as the keys would.
pub(crate) fn verify_kept(
    keys: &Keyring,
    owner: &Owner,
    token: &str,
    kept: &VerifiedSessions,
) -> Option<Session> {
    if let Some(k) = kept.lookup(keys, token)
        && k.owner == *owner
    {
        return session_of(k.index, k.bits);
    }
    let (index, bits) = keys
        .keys()
        .find_map(|key| verify_fields(key, owner, token))?;
    let session = session_of(index, bits)?;
    kept.remember(
        keys,
        token,
        &KeptSession {
            owner: owner.clone(),
            index,
            bits,
        },
    );
    Some(session)
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

    const ONE: &[u8] = b"0123456789abcdef0123456789abcdef";
    const TWO: &[u8] = b"fedcba9876543210fedcba9876543210";

    /// A session issued by `ring`'s current key to `who`.
    fn issued(ring: &Keyring, who: &str, n: u64) -> String {
        let ids = SequentialIds::starting_at(n);
        issue(
            ring.current(),
            &ids,
            &owner(who),
            "2025-06-18",
            &json!({"roots": {}}),
        )
        .unwrap()
    }

    /// What `ring`'s keys say of `token` for `who`, with nothing kept.
    fn full(ring: &Keyring, who: &Owner, token: &str) -> Option<Session> {
        ring.keys().find_map(|k| verify(k, who, token))
    }

    /// `token` with the last character of its tag changed.
    fn tampered(token: &str) -> String {
        let mut t = token.to_owned();
        let last = t.pop().unwrap();
        t.push(if last == 'A' { 'B' } else { 'A' });
        t
    }

    /// A keyring of [`ONE`], a cache, and a session of "a" already
    /// verified through it.
    fn a_session_kept() -> (Keyring, VerifiedSessions, String) {
        let ring = Keyring::new(ONE);
        let kept = VerifiedSessions::default();
        let token = issued(&ring, "a", 1);
        assert!(verify_kept(&ring, &owner("a"), &token, &kept).is_some());
        (ring, kept, token)
    }

    #[test]
    fn a_verified_session_is_kept_and_answered_from_there() {
        let ring = Keyring::new(ONE);
        let kept = VerifiedSessions::default();
        let token = issued(&ring, "a", 1);
        let first = verify_kept(&ring, &owner("a"), &token, &kept);
        assert_eq!(first, full(&ring, &owner("a"), &token));
        assert!(first.is_some());
        assert_eq!(kept.len(), 1, "the verified session is kept");
        // What is kept answers without the tag being checked: an entry for
        // a token no key issued is taken as it stands.
        let unsigned = "mts1.1.8.bm9uY2U.AAAAAAAAAAAAAAAAAAAAAA";
        assert_eq!(full(&ring, &owner("a"), unsigned), None);
        kept.remember(
            &ring,
            unsigned,
            &KeptSession {
                owner: owner("a"),
                index: 1,
                bits: ROOTS,
            },
        );
        let answered = verify_kept(&ring, &owner("a"), unsigned, &kept).unwrap();
        assert_eq!(answered.version, VERSIONS[1]);
        assert!(answered.capabilities.roots.is_some());
        // ... but only for its owner.
        assert_eq!(verify_kept(&ring, &owner("b"), unsigned, &kept), None);
    }

    #[test]
    fn a_kept_session_answers_only_its_owner() {
        let (ring, kept, token) = a_session_kept();
        assert_eq!(verify_kept(&ring, &owner("b"), &token, &kept), None);
        let other_tenant = Owner {
            tenant: "u".into(),
            principal: "a".into(),
        };
        assert_eq!(verify_kept(&ring, &other_tenant, &token, &kept), None);
        assert!(verify_kept(&ring, &owner("a"), &token, &kept).is_some());
        assert_eq!(kept.len(), 1);
    }

    #[test]
    fn a_forgery_sharing_the_lookup_key_is_checked_in_full() {
        let (ring, kept, token) = a_session_kept();
        let forged = tampered(&token);
        assert_eq!(crate::kept::key_of(&forged), crate::kept::key_of(&token));
        assert_eq!(verify_kept(&ring, &owner("a"), &forged, &kept), None);
        // Widened capabilities under the kept tag are refused too.
        let widened = token.replacen(".8.", ".15.", 1);
        assert_ne!(widened, token);
        assert_eq!(verify_kept(&ring, &owner("a"), &widened, &kept), None);
        assert_eq!(kept.len(), 1, "refused tokens are never kept");
    }

    #[test]
    fn kept_sessions_follow_the_keyring() {
        let (_, kept, token) = a_session_kept();
        // Rotated, the old key still verifying: still a session.
        let rotated = Keyring::new(TWO).with_previous(ONE);
        assert!(verify_kept(&rotated, &owner("a"), &token, &kept).is_some());
        // The old key retired: the kept entry no longer answers.
        let retired = Keyring::new(TWO);
        assert_eq!(verify_kept(&retired, &owner("a"), &token, &kept), None);
    }

    proptest::proptest! {
        /// Through the cache, every request gets exactly what the keys
        /// give: sessions of several owners, forged and widened ones, under
        /// keyrings rotating back and forth, in any order.
        #[test]
        fn kept_sessions_answer_as_the_keys_do(
            steps in proptest::collection::vec((0usize..7, 0usize..3, 0usize..3), 1..40),
        ) {
            let rings = [
                Keyring::new(ONE),
                Keyring::new(TWO).with_previous(ONE),
                Keyring::new(TWO),
            ];
            let a = issued(&rings[0], "a", 1);
            let pool = [
                a.clone(),
                issued(&rings[0], "b", 2),
                issued(&rings[2], "a", 3),
                tampered(&a),
                a.replacen(".8.", ".9.", 1),
                format!("{a}x"),
                "mts1.0.0.x.y".to_owned(),
            ];
            let who = [owner("a"), owner("b"), owner("c")];
            let kept = VerifiedSessions::default();
            for (t, o, r) in steps {
                proptest::prop_assert_eq!(
                    verify_kept(&rings[r], &who[o], &pool[t], &kept),
                    full(&rings[r], &who[o], &pool[t])
                );
            }
        }
    }
}
