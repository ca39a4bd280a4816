//! Shared JWS test vectors (`tests/vectors/jwt.json`): every
//! [`SignatureVerifier`] must give the same verdict on each case. The core
//! tests run them with [`super::RustCrypto`]; the workerd end-to-end tests
//! run them inside the Worker with WebCrypto.
//!
//! Each case is also run twice through one cache of verified tokens (what a
//! server uses): both verdicts must be the file's, and a token accepted the
//! first time must not reach the verifier the second.

use std::cell::Cell;

use serde::Deserialize;

use super::parse_jwks;
use super::{AuthError, JwtAuth, KeyUnusable, SignatureVerifier, VerifiedTokens, VerifyingKey};
use crate::crypto::b64url_decode;
use crate::outbound::LocalFuture;
use crate::time::Millis;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Vectors {
    now: Millis,
    issuer: String,
    resource: String,
    hs256_secret: String,
    jwks: serde_json::Value,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    token: String,
    expect: Expect,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Expect {
    Refused { refused: String },
    Owner { tenant: String, principal: String },
}

/// What a run found.
#[derive(Debug, Default)]
pub struct Report {
    pub passed: usize,
    /// Each failing case: its name, what was expected, what came.
    pub failures: Vec<(String, String)>,
    /// Accepted cases whose token was in the cache before this run
    /// verified it (a cache that outlived an earlier run).
    pub cached_already: usize,
}

/// A verifier that counts the signatures it is asked to check.
pub(super) struct Counted<'v> {
    pub(super) inner: &'v dyn SignatureVerifier,
    pub(super) calls: Cell<usize>,
}

impl SignatureVerifier for Counted<'_> {
    fn verify<'a>(
        &'a self,
        key: VerifyingKey<'a>,
        signed: &'a [u8],
        signature: &'a [u8],
    ) -> LocalFuture<'a, Result<bool, KeyUnusable>> {
        self.calls.set(self.calls.get() + 1);
        self.inner.verify(key, signed, signature)
    }
}

/// Runs every case in `text` (the vectors file) through `verifier`, alone
/// and through a cache of verified tokens.
pub async fn run(text: &str, verifier: &dyn SignatureVerifier) -> Result<Report, String> {
    run_with(text, verifier, &VerifiedTokens::default()).await
}

/// [`run`] through `cache`, which may hold tokens from an earlier run.
pub(crate) async fn run_with(
    text: &str,
    verifier: &dyn SignatureVerifier,
    cache: &VerifiedTokens,
) -> Result<Report, String> {
    let v: Vectors = serde_json::from_str(text).map_err(|e| format!("vectors: {e}"))?;
    let auth = JwtAuth {
        issuer: v.issuer,
        resource: v.resource,
        hs256_secret: Some(b64url_decode(&v.hs256_secret).ok_or("vectors: hs256Secret")?),
        keys: parse_jwks(&v.jwks.to_string())?,
        tenant_claim: "tenant".into(),
        tenant_required: false,
        types: Vec::new(),
        leeway_ms: 0,
        authorization_servers: Vec::new(),
    };
    let mut report = Report::default();
    let counted = Counted {
        inner: verifier,
        calls: Cell::new(0),
    };
    for case in v.cases {
        let got = auth.verify(&case.token, v.now, verifier).await;
        let before = counted.calls.get();
        let first = auth
            .verify_cached(&case.token, v.now, &counted, cache)
            .await;
        if first.is_ok() && counted.calls.get() == before {
            report.cached_already += 1;
        }
        let before = counted.calls.get();
        let second = auth
            .verify_cached(&case.token, v.now, &counted, cache)
            .await;
        if first != got || second != got {
            report.failures.push((
                case.name,
                format!("alone {got:?}, through the cache {first:?} then {second:?}"),
            ));
            continue;
        }
        if got.is_ok() && counted.calls.get() != before {
            report.failures.push((
                case.name,
                "an accepted token was verified again instead of taken from the cache".into(),
            ));
            continue;
        }
        let pass = match (&case.expect, &got) {
            (Expect::Owner { tenant, principal }, Ok(owner)) => {
                owner.tenant == *tenant && owner.principal == *principal
            }
            (Expect::Refused { refused }, Err(AuthError::InvalidToken(why))) => why == refused,
            _ => false,
        };
        if pass {
            report.passed += 1;
        } else {
            let expected = match &case.expect {
                Expect::Owner { tenant, principal } => format!("{tenant}/{principal}"),
                Expect::Refused { refused } => format!("refused: {refused}"),
            };
            let got = match got {
                Ok(o) => format!("{}/{}", o.tenant, o.principal),
                Err(e) => format!("{e:?}"),
            };
            report
                .failures
                .push((case.name, format!("expected {expected}, got {got}")));
        }
    }
    Ok(report)
}
