//! Who is calling. Every request is authenticated before the MCP layer sees
//! it; the resulting [`Owner`] scopes every task operation.
//!
//! Production deployments verify OAuth 2.1 bearer tokens (JWTs) as an MCP
//! protected resource: signature (HS256 with a shared secret, EdDSA
//! (Ed25519) or ES256 (P-256) with configured public keys), `exp`/`nbf` with
//! a small clock skew, `iss`, and `aud` equal to this server's resource URL,
//! so a token minted for another resource is refused, and optionally `typ`
//! (for example `at+jwt`, RFC 9068). The principal is the `sub` claim; the
//! tenant is the configured tenant claim (default `tenant`). A token without
//! that claim is refused when the deployment requires it; otherwise its
//! tenant is [`ISSUER_TENANT_PREFIX`] and the issuer, a name no tenant claim
//! may take, so the two can never share an owner.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::crypto::{b64url, b64url_decode, hmac_raw, hmac_raw_verify};
use crate::owner::Owner;
use crate::time::Millis;

/// Longest bearer token accepted.
pub const MAX_TOKEN_LEN: usize = 8 * 1024;

/// The tenant of a token without a tenant claim is this prefix and the
/// issuer; a tenant claim starting with it is refused, so the two never
/// collide.
pub const ISSUER_TENANT_PREFIX: &str = "iss:";

/// The largest clock skew a deployment may allow on `exp` and `nbf`.
pub const MAX_LEEWAY_MS: i64 = 300_000;

/// How callers are identified.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Auth {
    /// Nothing configured: the server refuses to serve rather than serving
    /// everyone as one identity.
    #[default]
    Unconfigured,
    /// Local development only: every request acts as this owner, with no
    /// credentials checked. Enabled explicitly with `MCP_AUTH=insecure-local`
    /// and announced loudly by the adapters.
    InsecureLocal(Owner),
    /// Bearer JWTs.
    Jwt(Box<JwtAuth>),
}

/// Why a request was not authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthError {
    /// The deployment has no authentication configured.
    NotConfigured,
    /// No bearer token was sent.
    MissingToken,
    /// A token was sent and refused; the reason is for logs only.
    InvalidToken(&'static str),
}

impl Auth {
    /// The caller at `now`, from the values of the request's
    /// `Authorization` header (one is expected).
    pub fn authenticate<'h>(
        &self,
        mut authorization: impl Iterator<Item = &'h str>,
        now: Millis,
    ) -> Result<Owner, AuthError> {
        match self {
            Auth::Unconfigured => Err(AuthError::NotConfigured),
            Auth::InsecureLocal(owner) => Ok(owner.clone()),
            Auth::Jwt(jwt) => {
                let header = authorization.next().ok_or(AuthError::MissingToken)?;
                if authorization.next().is_some() {
                    return Err(AuthError::InvalidToken("several Authorization headers"));
                }
                let token =
                    bearer(header).ok_or(AuthError::InvalidToken("not a Bearer credential"))?;
                jwt.verify(token, now)
            }
        }
    }

    pub fn is_insecure(&self) -> bool {
        matches!(self, Auth::InsecureLocal(_))
    }

    /// The JWT settings, when tokens are verified.
    pub fn jwt(&self) -> Option<&JwtAuth> {
        match self {
            Auth::Jwt(j) => Some(j),
            _ => None,
        }
    }
}

fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then_some(token)
}

/// A configured public key.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    pub kid: Option<String>,
    pub key: KeyKind,
}

#[derive(Clone, PartialEq, Eq)]
pub enum KeyKind {
    Ed25519(ed25519_dalek::VerifyingKey),
    P256(p256::ecdsa::VerifyingKey),
}

impl KeyKind {
    fn alg(&self) -> &'static str {
        match self {
            KeyKind::Ed25519(_) => "EdDSA",
            KeyKind::P256(_) => "ES256",
        }
    }
}

/// Bearer JWT verification settings.
#[derive(Clone, PartialEq, Eq)]
pub struct JwtAuth {
    /// Required `iss`.
    pub issuer: String,
    /// This server's resource URL: the required `aud`.
    pub resource: String,
    /// HS256 shared secret, if HS256 is accepted.
    pub hs256_secret: Option<Vec<u8>>,
    /// Public keys for EdDSA and ES256.
    pub keys: Vec<PublicKey>,
    /// The claim naming the tenant.
    pub tenant_claim: String,
    /// Whether a token must carry the tenant claim (otherwise its tenant
    /// is [`ISSUER_TENANT_PREFIX`] and the issuer).
    pub tenant_required: bool,
    /// Accepted `typ` header values (compared without case, with or
    /// without `application/`); empty = `typ` is not checked.
    pub types: Vec<String>,
    /// Allowed clock skew for `exp` and `nbf`.
    pub leeway_ms: i64,
    /// Authorization servers listed in the protected resource metadata.
    pub authorization_servers: Vec<String>,
}

impl std::fmt::Debug for JwtAuth {
    /// Never prints the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtAuth")
            .field("issuer", &self.issuer)
            .field("resource", &self.resource)
            .field("hs256", &self.hs256_secret.is_some())
            .field("keys", &self.keys.len())
            .field("tenant_claim", &self.tenant_claim)
            .field("tenant_required", &self.tenant_required)
            .field("types", &self.types)
            .finish()
    }
}

#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    crit: Option<Value>,
    #[serde(default)]
    typ: Option<String>,
}

/// A media type as `typ` carries it: lower case, without `application/`.
fn media_type(t: &str) -> String {
    let t = t.trim().to_ascii_lowercase();
    match t.strip_prefix("application/") {
        Some(rest) => rest.to_owned(),
        None => t,
    }
}

fn b64_json<T: serde::de::DeserializeOwned>(part: &str) -> Option<T> {
    let bytes = b64url_decode(part)?;
    serde_json::from_slice(&bytes).ok()
}

/// A NumericDate claim in milliseconds.
fn date_ms(claims: &Map<String, Value>, name: &str) -> Result<Option<Millis>, AuthError> {
    match claims.get(name) {
        None => Ok(None),
        Some(v) => {
            let secs = v
                .as_f64()
                .filter(|s| s.is_finite())
                .ok_or(AuthError::InvalidToken("a time claim is not a number"))?;
            Ok(Some(
                (secs * 1000.0).clamp(i64::MIN as f64, i64::MAX as f64) as Millis,
            ))
        }
    }
}

impl JwtAuth {
    /// The URL of this resource's RFC 9728 metadata.
    pub fn metadata_url(&self) -> String {
        let (origin, path) = split_url(&self.resource);
        format!("{origin}/.well-known/oauth-protected-resource{path}")
    }

    /// The RFC 9728 protected resource metadata document.
    pub fn metadata(&self) -> Value {
        serde_json::json!({
            "resource": self.resource,
            "authorization_servers": self.authorization_servers,
            "bearer_methods_supported": ["header"],
            "resource_name": "mcp-tasks-edge",
        })
    }

    /// Verifies a compact JWS and returns the caller.
    pub fn verify(&self, token: &str, now: Millis) -> Result<Owner, AuthError> {
        let bad = AuthError::InvalidToken;
        if token.len() > MAX_TOKEN_LEN {
            return Err(bad("token too long"));
        }
        let mut parts = token.split('.');
        let (Some(h), Some(p), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("not a compact JWS"));
        };
        let header: Header = b64_json(h).ok_or(bad("malformed header"))?;
        if header.crit.is_some() {
            return Err(bad("unsupported critical header"));
        }
        if !self.types.is_empty() {
            let typ = header.typ.as_deref().map(media_type);
            if !typ.is_some_and(|t| self.types.iter().any(|a| media_type(a) == t)) {
                return Err(bad("token type not accepted"));
            }
        }
        let signature = b64url_decode(s).ok_or(bad("malformed signature"))?;
        let signed = token
            .as_bytes()
            .get(..h.len() + 1 + p.len())
            .ok_or(bad("not a compact JWS"))?;
        self.check_signature(&header, signed, &signature)?;
        let claims: Map<String, Value> = b64_json(p).ok_or(bad("malformed claims"))?;
        self.check_claims(&claims, now)
    }

    fn check_signature(
        &self,
        header: &Header,
        signed: &[u8],
        signature: &[u8],
    ) -> Result<(), AuthError> {
        let bad = AuthError::InvalidToken;
        let ok = match header.alg.as_str() {
            "HS256" => {
                let secret = self
                    .hs256_secret
                    .as_deref()
                    .ok_or(bad("HS256 is not accepted"))?;
                hmac_raw_verify(secret, signed, signature)
            }
            "EdDSA" | "ES256" => match &self.key_for(&header.alg, header.kid.as_deref())?.key {
                KeyKind::Ed25519(vk) => ed25519_dalek::Signature::from_slice(signature)
                    .map(|sig| vk.verify_strict(signed, &sig).is_ok())
                    .unwrap_or(false),
                KeyKind::P256(vk) => {
                    use p256::ecdsa::signature::Verifier;
                    p256::ecdsa::Signature::from_slice(signature)
                        .map(|sig| vk.verify(signed, &sig).is_ok())
                        .unwrap_or(false)
                }
            },
            "none" => return Err(bad("unsigned token")),
            _ => return Err(bad("unsupported algorithm")),
        };
        if ok {
            Ok(())
        } else {
            Err(bad("bad signature"))
        }
    }

    /// The key for `alg`: by `kid` when the token names one, else the only
    /// key of that algorithm. A key never verifies another algorithm.
    fn key_for(&self, alg: &str, kid: Option<&str>) -> Result<&PublicKey, AuthError> {
        let mut of_alg = self.keys.iter().filter(|k| k.key.alg() == alg);
        match kid {
            Some(kid) => of_alg
                .find(|k| k.kid.as_deref() == Some(kid))
                .ok_or(AuthError::InvalidToken("unknown key id")),
            None => match (of_alg.next(), of_alg.next()) {
                (Some(k), None) => Ok(k),
                (None, _) => Err(AuthError::InvalidToken("no key for this algorithm")),
                (Some(_), Some(_)) => Err(AuthError::InvalidToken("several keys and no key id")),
            },
        }
    }

    fn check_claims(&self, claims: &Map<String, Value>, now: Millis) -> Result<Owner, AuthError> {
        let bad = AuthError::InvalidToken;
        let exp = date_ms(claims, "exp")?.ok_or(bad("no exp"))?;
        if now >= exp.saturating_add(self.leeway_ms) {
            return Err(bad("expired"));
        }
        if let Some(nbf) = date_ms(claims, "nbf")?
            && now < nbf.saturating_sub(self.leeway_ms)
        {
            return Err(bad("not yet valid"));
        }
        let iss = claims
            .get("iss")
            .and_then(Value::as_str)
            .ok_or(bad("no iss"))?;
        if iss != self.issuer {
            return Err(bad("wrong issuer"));
        }
        let aud_ok = match claims.get("aud") {
            Some(Value::String(a)) => *a == self.resource,
            Some(Value::Array(list)) => list
                .iter()
                .any(|a| a.as_str() == Some(self.resource.as_str())),
            _ => false,
        };
        if !aud_ok {
            return Err(bad("wrong audience"));
        }
        let sub = claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.len() <= 256)
            .ok_or(bad("no subject"))?;
        let tenant = match claims.get(&self.tenant_claim) {
            None if self.tenant_required => return Err(bad("no tenant")),
            None => format!("{ISSUER_TENANT_PREFIX}{iss}"),
            Some(Value::String(t))
                if !t.is_empty() && t.len() <= 256 && !t.starts_with(ISSUER_TENANT_PREFIX) =>
            {
                t.clone()
            }
            Some(_) => return Err(bad("malformed tenant")),
        };
        Ok(Owner {
            tenant,
            principal: sub.to_owned(),
        })
    }
}

/// Splits `https://host:port/path` into origin and path (`""` for `/`).
fn split_url(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => {
            let (origin, path) = url.split_at(after_scheme + i);
            (
                origin,
                if path == "/" {
                    ""
                } else {
                    path.trim_end_matches('/')
                },
            )
        }
        None => (url, ""),
    }
}

/// Signs an HS256 JWT (for development tokens and tests).
pub fn sign_hs256(secret: &[u8], claims: &Value) -> String {
    let header = b64url(br#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = b64url(serde_json::to_string(claims).unwrap_or_default().as_bytes());
    let input = format!("{header}.{payload}");
    let tag = hmac_raw(secret, input.as_bytes());
    format!("{input}.{}", b64url(&tag))
}

/// Parses a JWKS document (`{"keys":[...]}`) with OKP/Ed25519 and EC/P-256
/// public keys. A key whose `use` is not `sig`, whose `alg` is not its
/// curve's (`EdDSA`, `ES256`) or whose `key_ops` lack `verify` is left out:
/// it never verifies a token.
pub fn parse_jwks(text: &str) -> Result<Vec<PublicKey>, String> {
    #[derive(Deserialize)]
    struct Jwks {
        keys: Vec<Jwk>,
    }
    #[derive(Deserialize)]
    struct Jwk {
        kty: String,
        #[serde(default)]
        crv: Option<String>,
        #[serde(default)]
        kid: Option<String>,
        #[serde(default)]
        x: Option<String>,
        #[serde(default)]
        y: Option<String>,
        #[serde(default)]
        d: Option<Value>,
        #[serde(default, rename = "use")]
        usage: Option<String>,
        #[serde(default)]
        alg: Option<String>,
        #[serde(default)]
        key_ops: Option<Vec<String>>,
    }
    let jwks: Jwks =
        serde_json::from_str(text).map_err(|_| "the key set is not a JWKS document".to_string())?;
    let decode = |v: &Option<String>, what: &str| -> Result<Vec<u8>, String> {
        v.as_deref()
            .and_then(b64url_decode)
            .ok_or_else(|| format!("a key's {what} is missing or not base64url"))
    };
    let mut out = Vec::new();
    for k in jwks.keys {
        if k.d.is_some() {
            return Err("the key set contains a private key; configure public keys only".into());
        }
        let key = match (k.kty.as_str(), k.crv.as_deref()) {
            ("OKP", Some("Ed25519")) => {
                let x: [u8; 32] = decode(&k.x, "x")?
                    .try_into()
                    .map_err(|_| "an Ed25519 key must be 32 bytes".to_string())?;
                KeyKind::Ed25519(
                    ed25519_dalek::VerifyingKey::from_bytes(&x)
                        .map_err(|_| "an Ed25519 key is invalid".to_string())?,
                )
            }
            ("EC", Some("P-256")) => {
                let (x, y) = (decode(&k.x, "x")?, decode(&k.y, "y")?);
                if x.len() != 32 || y.len() != 32 {
                    return Err("a P-256 key must have 32-byte coordinates".into());
                }
                let mut sec1 = vec![4u8];
                sec1.extend_from_slice(&x);
                sec1.extend_from_slice(&y);
                KeyKind::P256(
                    p256::ecdsa::VerifyingKey::from_sec1_bytes(&sec1)
                        .map_err(|_| "a P-256 key is invalid".to_string())?,
                )
            }
            _ => return Err("only OKP/Ed25519 and EC/P-256 keys are supported".into()),
        };
        // A key published for another use, another algorithm or other
        // operations never verifies a token.
        let for_signatures = k.usage.as_deref().is_none_or(|u| u == "sig")
            && k.alg.as_deref().is_none_or(|a| a == key.alg())
            && k.key_ops
                .as_ref()
                .is_none_or(|ops| ops.iter().any(|o| o == "verify"));
        if for_signatures {
            out.push(PublicKey { kid: k.kid, key });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            split_url("https://a.example/mcp"),
            ("https://a.example", "/mcp")
        );
        assert_eq!(
            split_url("http://127.0.0.1:8787/"),
            ("http://127.0.0.1:8787", "")
        );
        assert_eq!(split_url("http://h"), ("http://h", ""));
    }

    #[test]
    fn bearer_scheme() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
        assert_eq!(bearer("Bearer "), None);
    }
}
