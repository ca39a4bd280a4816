//! Bearer tokens already verified by this instance.
//!
//! A client sends the same token with every request until it expires, and
//! checking its signature is most of what a request costs: Ed25519 or ECDSA
//! P-256 arithmetic in the component's wasm, a WebCrypto call on the
//! Worker. So an instance keeps the outcome of each token it accepted (a
//! [`Kept`] cache: bounded, found by the signature, compared in full in
//! constant time): the caller, `exp` and `nbf`. A later request with a
//! byte-for-byte equal token, under the same settings, takes the caller
//! from here; its time claims are checked again against that request's
//! clock, with the same errors as a full verification. Refused tokens are
//! never kept, so nothing can be made to pass here that did not pass in
//! full.

use super::JwtAuth;
use crate::kept::Kept;
use crate::owner::Owner;
use crate::time::Millis;

/// What a verified token stands for, and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Verified {
    pub(crate) owner: Owner,
    /// `exp`, in milliseconds.
    pub(crate) exp: Millis,
    /// `nbf`, in milliseconds, if the token has one.
    pub(crate) nbf: Option<Millis>,
}

/// Verified bearer tokens: one cache per component instance, one per
/// isolate on the Worker (see the module's documentation).
pub(crate) type VerifiedTokens = Kept<JwtAuth, Verified>;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::cell::Cell;

    use serde_json::json;

    use super::*;
    use crate::auth::vectors::Counted;
    use crate::auth::{AuthError, RustCrypto, sign_hs256};
    use crate::kept::{CAPACITY, MAX_KEPT_LEN, key_of};

    const SECRET: &[u8] = b"cache-test-secret-0123456789-abcdef";
    const LEEWAY: Millis = 1_000;

    /// RustCrypto, counting the signatures it checks.
    fn counting() -> Counted<'static> {
        Counted {
            inner: &RustCrypto,
            calls: Cell::new(0),
        }
    }

    fn settings(resource: &str) -> JwtAuth {
        JwtAuth {
            issuer: "https://issuer.test".into(),
            resource: resource.into(),
            hs256_secret: Some(SECRET.to_vec()),
            keys: Vec::new(),
            tenant_claim: "tenant".into(),
            tenant_required: false,
            types: Vec::new(),
            leeway_ms: LEEWAY,
            authorization_servers: Vec::new(),
        }
    }

    /// A token for `sub`, valid from `nbf` (seconds, if any) until `exp`.
    fn token(sub: &str, exp: i64, nbf: Option<i64>) -> String {
        let mut claims = json!({"iss": "https://issuer.test", "aud": "https://mcp.test/mcp",
            "sub": sub, "tenant": "t1", "exp": exp});
        if let Some(nbf) = nbf {
            claims["nbf"] = json!(nbf);
        }
        sign_hs256(SECRET, &claims)
    }

    /// `token` with the last character of its signature changed.
    fn tampered(token: &str) -> String {
        let mut t = token.to_owned();
        let last = t.pop().unwrap();
        t.push(if last == 'A' { 'B' } else { 'A' });
        t
    }

    fn cached(
        auth: &JwtAuth,
        token: &str,
        now: Millis,
        v: &Counted<'_>,
        cache: &VerifiedTokens,
    ) -> Result<Owner, AuthError> {
        crate::block_on(auth.verify_cached(token, now, v, cache))
    }

    fn alone(auth: &JwtAuth, token: &str, now: Millis) -> Result<Owner, AuthError> {
        crate::block_on(auth.verify(token, now, &RustCrypto))
    }

    #[test]
    fn a_kept_token_is_not_verified_again() {
        let auth = settings("https://mcp.test/mcp");
        let (v, cache) = (counting(), VerifiedTokens::default());
        let t = token("alice", 2_000, None);
        let first = cached(&auth, &t, 1_000_000, &v, &cache).unwrap();
        assert_eq!(first.principal, "alice");
        assert_eq!(cached(&auth, &t, 1_500_000, &v, &cache), Ok(first));
        assert_eq!(
            v.calls.get(),
            1,
            "the second request took the cached caller"
        );
    }

    #[test]
    fn a_kept_token_expires_on_time_and_is_dropped() {
        let auth = settings("https://mcp.test/mcp");
        let (v, cache) = (counting(), VerifiedTokens::default());
        let t = token("alice", 2_000, None);
        assert!(cached(&auth, &t, 1_000_000, &v, &cache).is_ok());
        // The leeway applies as in a full verification: valid until
        // exp + leeway, exclusive.
        assert!(cached(&auth, &t, 2_000_000 + LEEWAY - 1, &v, &cache).is_ok());
        assert_eq!(
            cached(&auth, &t, 2_000_000 + LEEWAY, &v, &cache),
            Err(AuthError::InvalidToken("expired"))
        );
        assert_eq!(v.calls.get(), 1);
        assert_eq!(cache.len(), 0, "an expired token is dropped");
    }

    #[test]
    fn refused_tokens_are_never_kept() {
        let auth = settings("https://mcp.test/mcp");
        let (v, cache) = (counting(), VerifiedTokens::default());
        let t = token("alice", 2_000, None);
        let forged = tampered(&t);
        assert_eq!(
            cached(&auth, &forged, 1_000_000, &v, &cache),
            Err(AuthError::InvalidToken("bad signature"))
        );
        assert_eq!(cache.len(), 0);
        // Kept, then the forgery that shares its lookup key (the first
        // bytes of the signature) is still checked in full.
        assert!(cached(&auth, &t, 1_000_000, &v, &cache).is_ok());
        assert_eq!(key_of(&forged), key_of(&t));
        assert_eq!(
            cached(&auth, &forged, 1_000_000, &v, &cache),
            Err(AuthError::InvalidToken("bad signature"))
        );
        assert_eq!(v.calls.get(), 3);
        // A token not yet valid is refused and not kept either.
        let early = token("bob", 3_000, Some(2_500));
        assert_eq!(
            cached(&auth, &early, 1_000_000, &v, &cache),
            Err(AuthError::InvalidToken("not yet valid"))
        );
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn what_one_settings_kept_another_never_reads() {
        let a = settings("https://mcp.test/mcp");
        let b = settings("https://other.test/mcp");
        let (v, cache) = (counting(), VerifiedTokens::default());
        let t = token("alice", 2_000, None);
        assert!(cached(&a, &t, 1_000_000, &v, &cache).is_ok());
        assert_eq!(
            cached(&b, &t, 1_000_000, &v, &cache),
            Err(AuthError::InvalidToken("wrong audience"))
        );
        assert_eq!(v.calls.get(), 2, "verified again under the other settings");
    }

    #[test]
    fn at_most_capacity_tokens_are_kept_the_oldest_going_first() {
        let auth = settings("https://mcp.test/mcp");
        let (v, cache) = (counting(), VerifiedTokens::default());
        let tokens: Vec<String> = (0..=CAPACITY)
            .map(|i| token(&format!("user-{i}"), 2_000, None))
            .collect();
        for t in &tokens {
            assert!(cached(&auth, t, 1_000_000, &v, &cache).is_ok());
        }
        assert_eq!(cache.len(), CAPACITY);
        let calls = v.calls.get();
        assert!(cached(&auth, &tokens[CAPACITY], 1_000_000, &v, &cache).is_ok());
        assert_eq!(v.calls.get(), calls, "the newest is kept");
        assert!(cached(&auth, &tokens[0], 1_000_000, &v, &cache).is_ok());
        assert_eq!(v.calls.get(), calls + 1, "the oldest was replaced");
        // A token over the length bound is never kept.
        let long = token(&"x".repeat(MAX_KEPT_LEN), 2_000, None);
        assert!(key_of(&long).is_none());
    }

    proptest::proptest! {
        /// Through the cache, every request gets exactly what a full
        /// verification at its own time gives: valid, expired, not yet
        /// valid and forged tokens, in any order, at any time.
        #[test]
        fn the_cache_answers_as_a_full_verification(
            steps in proptest::collection::vec((0usize..8, 0i64..5_000_000), 1..40),
        ) {
            let auth = settings("https://mcp.test/mcp");
            let valid = token("alice", 2_000, None);
            let pool = [
                valid.clone(),
                token("bob", 3_000, Some(1_500)),
                token("carol", 1_000, None),
                token("dave", 4_000, Some(500)),
                tampered(&valid),
                token("erin", 2_500, None),
                format!("{valid}x"),
                "not.a.token-at-all".to_owned(),
            ];
            let (v, cache) = (counting(), VerifiedTokens::default());
            for (i, now) in steps {
                let t = &pool[i];
                proptest::prop_assert_eq!(cached(&auth, t, now, &v, &cache), alone(&auth, t, now));
            }
        }
    }
}
