//! Shared JWS test vectors (`tests/vectors/jwt.json`): every
//! [`SignatureVerifier`] must give the same verdict on each case. The core
//! tests run them with [`super::RustCrypto`]; the workerd end-to-end tests
//! run them inside the Worker with WebCrypto.

use serde::Deserialize;

use super::{AuthError, JwtAuth, SignatureVerifier, parse_jwks};
use crate::crypto::b64url_decode;
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
}

/// Runs every case in `text` (the vectors file) through `verifier`.
pub async fn run(text: &str, verifier: &dyn SignatureVerifier) -> Result<Report, String> {
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
    for case in v.cases {
        let got = auth.verify(&case.token, v.now, verifier).await;
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
