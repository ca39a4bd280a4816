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
//!
//! The signature itself is checked through the [`SignatureVerifier`] seam:
//! [`RustCrypto`] in the WASI component, the local host and tests; the
//! platform's WebCrypto on the Worker. Everything else (the header, the
//! claims, which key) is decided here, the same on both.

use serde::Deserialize;
use serde_json::{Map, Value};

mod cache;
pub mod vectors;

use cache::Verified;
pub(crate) use cache::VerifiedTokens;

use crate::crypto::{b64url, b64url_decode, hmac_raw};
use crate::limits::same_bytes;
use crate::outbound::LocalFuture;
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
    /// A credential of another scheme (`Basic …`) was sent: answered as no
    /// token is, with no error code (RFC 6750 §3.1).
    NotBearer,
    /// The request is malformed (several `Authorization` headers): 400
    /// with `invalid_request` (RFC 6750 §3.1).
    Malformed(&'static str),
    /// A token was sent and refused; the reason is for logs only.
    InvalidToken(&'static str),
}

impl Auth {
    /// The caller at `now`, from the values of the request's
    /// `Authorization` header (one is expected); signatures are checked by
    /// `verifier`.
    pub async fn authenticate<'h>(
        &self,
        authorization: impl Iterator<Item = &'h str>,
        now: Millis,
        verifier: &dyn SignatureVerifier,
    ) -> Result<Owner, AuthError> {
        self.authenticate_with(authorization, now, verifier, None)
            .await
    }

    /// [`Auth::authenticate`], taking a token this instance already
    /// accepted from `verified` (and keeping one it accepts now).
    pub(crate) async fn authenticate_cached<'h>(
        &self,
        authorization: impl Iterator<Item = &'h str>,
        now: Millis,
        verifier: &dyn SignatureVerifier,
        verified: &VerifiedTokens,
    ) -> Result<Owner, AuthError> {
        self.authenticate_with(authorization, now, verifier, Some(verified))
            .await
    }

    async fn authenticate_with<'h>(
        &self,
        mut authorization: impl Iterator<Item = &'h str>,
        now: Millis,
        verifier: &dyn SignatureVerifier,
        verified: Option<&VerifiedTokens>,
    ) -> Result<Owner, AuthError> {
        match self {
            Auth::Unconfigured => Err(AuthError::NotConfigured),
            Auth::InsecureLocal(owner) => Ok(owner.clone()),
            Auth::Jwt(jwt) => {
                let header = authorization.next().ok_or(AuthError::MissingToken)?;
                if authorization.next().is_some() {
                    return Err(AuthError::Malformed("several Authorization headers"));
                }
                let token = bearer(header)?;
                match verified {
                    Some(cache) => jwt.verify_cached(token, now, verifier, cache).await,
                    None => jwt.verify(token, now, verifier).await,
                }
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

/// The token of a `Bearer` credential: [`AuthError::NotBearer`] for
/// another scheme, an invalid token for a `Bearer` without one, and a
/// malformed request for a value that holds several credentials
/// (`Bearer a, Bearer b`: the Fetch API joins repeated `Authorization`
/// headers so, on Workers; a token has no comma or space).
fn bearer(header: &str) -> Result<&str, AuthError> {
    let header = crate::limits::trim_ows(header);
    let (scheme, token) = header.split_once(' ').unwrap_or((header, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::NotBearer);
    }
    let token = crate::limits::trim_ows(token);
    if token.is_empty() {
        return Err(AuthError::InvalidToken("an empty bearer token"));
    }
    if token.contains([',', ' ']) {
        return Err(AuthError::Malformed("several credentials in one header"));
    }
    Ok(token)
}

/// A configured public key.
#[derive(Clone, Debug, Eq)]
pub struct PublicKey {
    pub kid: Option<String>,
    pub key: KeyKind,
}

/// A public key's material, as a JWK carries it.
#[derive(Clone, Debug, Eq)]
pub enum KeyKind {
    /// An Ed25519 public key (32 bytes), for `EdDSA`.
    Ed25519([u8; 32]),
    /// A P-256 public point's coordinates (32 bytes each), for `ES256`.
    P256 { x: [u8; 32], y: [u8; 32] },
}

impl PartialEq for PublicKey {
    /// The same kid and key (see [`JwtAuth`]'s `PartialEq`).
    fn eq(&self, other: &PublicKey) -> bool {
        let PublicKey { kid, key } = self;
        same_if_some(
            kid.as_deref().map(str::as_bytes),
            other.kid.as_deref().map(str::as_bytes),
        ) && *key == other.key
    }
}

impl PartialEq for KeyKind {
    /// The same kind of key with the same bytes, compared eight at a time
    /// (see [`JwtAuth`]'s `PartialEq`).
    fn eq(&self, other: &KeyKind) -> bool {
        match (self, other) {
            (KeyKind::Ed25519(a), KeyKind::Ed25519(b)) => same_bytes(a, b),
            (KeyKind::P256 { x: ax, y: ay }, KeyKind::P256 { x: bx, y: by }) => {
                same_bytes(ax, bx) && same_bytes(ay, by)
            }
            // Each pair of different kinds named, so that a new kind does
            // not compile until it is compared.
            (KeyKind::Ed25519(_), KeyKind::P256 { .. })
            | (KeyKind::P256 { .. }, KeyKind::Ed25519(_)) => false,
        }
    }
}

/// Both absent, or both present with the same bytes (compared eight at a
/// time).
fn same_if_some(a: Option<&[u8]>, b: Option<&[u8]>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => same_bytes(a, b),
        (a, b) => a.is_none() && b.is_none(),
    }
}

impl KeyKind {
    /// The JWS algorithm this key verifies.
    pub fn alg(&self) -> &'static str {
        match self {
            KeyKind::Ed25519(_) => "EdDSA",
            KeyKind::P256 { .. } => "ES256",
        }
    }

    /// The P-256 point in SEC1 uncompressed form (`04 || x || y`).
    pub fn sec1(x: &[u8; 32], y: &[u8; 32]) -> [u8; 65] {
        let mut out = [4u8; 65];
        out[1..33].copy_from_slice(x);
        out[33..].copy_from_slice(y);
        out
    }
}

/// The key a token's signature is checked with.
#[derive(Clone, Copy)]
pub enum VerifyingKey<'a> {
    /// HS256: HMAC-SHA-256 with this shared secret.
    Hs256(&'a [u8]),
    /// EdDSA or ES256 with this public key.
    Public(&'a KeyKind),
}

impl std::fmt::Debug for VerifyingKey<'_> {
    /// Never prints the HS256 secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerifyingKey::Hs256(_) => f.write_str("Hs256(..)"),
            VerifyingKey::Public(key) => f.debug_tuple("Public").field(key).finish(),
        }
    }
}

/// Why a signature could not be checked at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyUnusable;

/// Checks JWS signatures: the seam between the token rules (here) and a
/// runtime's cryptography. [`RustCrypto`] serves the WASI component and
/// tests; the Worker uses the platform's WebCrypto. Every implementation
/// must give the same answers on the shared vectors in
/// `tests/vectors/jwt.json`.
///
/// ```
/// use mcp_tasks_edge::auth::{KeyUnusable, SignatureVerifier, VerifyingKey};
/// use mcp_tasks_edge::outbound::LocalFuture;
///
/// /// Accepts nothing (a deployment without JWTs).
/// struct Refuse;
/// impl SignatureVerifier for Refuse {
///     fn verify<'a>(&'a self, _key: VerifyingKey<'a>, _signed: &'a [u8], _sig: &'a [u8])
///         -> LocalFuture<'a, Result<bool, KeyUnusable>> {
///         Box::pin(async { Ok(false) })
///     }
/// }
/// ```
pub trait SignatureVerifier {
    /// Whether `signature` is `key`'s valid signature over `signed`
    /// (`Err` when the key itself cannot be used).
    fn verify<'a>(
        &'a self,
        key: VerifyingKey<'a>,
        signed: &'a [u8],
        signature: &'a [u8],
    ) -> LocalFuture<'a, Result<bool, KeyUnusable>>;
}

/// Signature checks with the RustCrypto crates (`hmac`, `ed25519-dalek`
/// with strict verification, `p256`), synchronous underneath. Not on the
/// Worker, which has the platform's WebCrypto.
#[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
#[derive(Clone, Copy, Debug, Default)]
pub struct RustCrypto;

#[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
impl RustCrypto {
    /// The same check, without a future.
    pub fn verify_now(
        key: VerifyingKey<'_>,
        signed: &[u8],
        signature: &[u8],
    ) -> Result<bool, KeyUnusable> {
        Ok(match key {
            VerifyingKey::Hs256(secret) => {
                crate::crypto::hmac_raw_verify(secret, signed, signature)
            }
            VerifyingKey::Public(KeyKind::Ed25519(x)) => {
                let vk = ed25519_dalek::VerifyingKey::from_bytes(x).map_err(|_| KeyUnusable)?;
                ed25519_dalek::Signature::from_slice(signature)
                    .map(|sig| vk.verify_strict(signed, &sig).is_ok())
                    .unwrap_or(false)
            }
            VerifyingKey::Public(KeyKind::P256 { x, y }) => {
                use p256::ecdsa::signature::Verifier;
                let vk = p256::ecdsa::VerifyingKey::from_sec1_bytes(&KeyKind::sec1(x, y))
                    .map_err(|_| KeyUnusable)?;
                p256::ecdsa::Signature::from_slice(signature)
                    .map(|sig| vk.verify(signed, &sig).is_ok())
                    .unwrap_or(false)
            }
        })
    }
}

#[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
impl SignatureVerifier for RustCrypto {
    fn verify<'a>(
        &'a self,
        key: VerifyingKey<'a>,
        signed: &'a [u8],
        signature: &'a [u8],
    ) -> LocalFuture<'a, Result<bool, KeyUnusable>> {
        let verdict = Self::verify_now(key, signed, signature);
        Box::pin(std::future::ready(verdict))
    }
}

/// Refuses every signature: the default where no verifier was given and
/// the runtime has no built-in one (the Worker's glue installs WebCrypto).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoVerifier;

impl SignatureVerifier for NoVerifier {
    fn verify<'a>(
        &'a self,
        _key: VerifyingKey<'a>,
        _signed: &'a [u8],
        _signature: &'a [u8],
    ) -> LocalFuture<'a, Result<bool, KeyUnusable>> {
        Box::pin(std::future::ready(Err(KeyUnusable)))
    }
}

/// This runtime's built-in verifier: [`RustCrypto`], or [`NoVerifier`] on
/// the Worker (whose glue supplies WebCrypto).
pub fn default_verifier() -> Box<dyn SignatureVerifier> {
    #[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
    return Box::new(RustCrypto);
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    return Box::new(NoVerifier);
}

/// Bearer JWT verification settings.
#[derive(Clone, Eq)]
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

impl PartialEq for JwtAuth {
    /// Every field equal, strings and key bytes compared eight bytes at a
    /// time: the cache of verified tokens compares the settings it was
    /// filled under with the server's on every lookup, and `==` on bytes is
    /// a byte loop on wasm. Both sides are the server's own settings, so the
    /// comparison's time tells a client nothing.
    fn eq(&self, other: &Self) -> bool {
        let JwtAuth {
            issuer,
            resource,
            hs256_secret,
            keys,
            tenant_claim,
            tenant_required,
            types,
            leeway_ms,
            authorization_servers,
        } = self;
        let same = |a: &str, b: &str| same_bytes(a.as_bytes(), b.as_bytes());
        let same_strings = |a: &[String], b: &[String]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
        };
        same(issuer, &other.issuer)
            && same(resource, &other.resource)
            && same_if_some(hs256_secret.as_deref(), other.hs256_secret.as_deref())
            && *keys == other.keys
            && same(tenant_claim, &other.tenant_claim)
            && *tenant_required == other.tenant_required
            && same_strings(types, &other.types)
            && *leeway_ms == other.leeway_ms
            && same_strings(authorization_servers, &other.authorization_servers)
    }
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
    crate::json::from_slice(&bytes).ok()
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
    pub async fn verify(
        &self,
        token: &str,
        now: Millis,
        verifier: &dyn SignatureVerifier,
    ) -> Result<Owner, AuthError> {
        self.verify_token(token, now, verifier)
            .await
            .map(|v| v.owner)
    }

    /// [`JwtAuth::verify`], answered from `cache` for a token accepted
    /// before under these settings (its `exp` and `nbf` checked again at
    /// `now`); a token accepted now is kept there.
    pub(crate) async fn verify_cached(
        &self,
        token: &str,
        now: Millis,
        verifier: &dyn SignatureVerifier,
        cache: &VerifiedTokens,
    ) -> Result<Owner, AuthError> {
        if let Some(kept) = cache.lookup(self, token) {
            return match self.check_times(kept.exp, kept.nbf, now) {
                Ok(()) => Ok(kept.owner),
                Err(e) => {
                    cache.forget(token);
                    Err(e)
                }
            };
        }
        let verified = self.verify_token(token, now, verifier).await?;
        cache.remember(self, token, &verified);
        Ok(verified.owner)
    }

    async fn verify_token(
        &self,
        token: &str,
        now: Millis,
        verifier: &dyn SignatureVerifier,
    ) -> Result<Verified, AuthError> {
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
        self.check_signature(&header, signed, &signature, verifier)
            .await?;
        let claims: Map<String, Value> = b64_json(p).ok_or(bad("malformed claims"))?;
        self.check_claims(&claims, now)
    }

    async fn check_signature(
        &self,
        header: &Header,
        signed: &[u8],
        signature: &[u8],
        verifier: &dyn SignatureVerifier,
    ) -> Result<(), AuthError> {
        let bad = AuthError::InvalidToken;
        let key = match header.alg.as_str() {
            "HS256" => {
                let secret = self
                    .hs256_secret
                    .as_deref()
                    .ok_or(bad("HS256 is not accepted"))?;
                // An HMAC-SHA-256 tag is 32 bytes; no verifier sees another
                // length.
                if signature.len() != 32 {
                    return Err(bad("bad signature"));
                }
                VerifyingKey::Hs256(secret)
            }
            "EdDSA" | "ES256" => {
                let key = &self.key_for(&header.alg, header.kid.as_deref())?.key;
                // Fixed-size signatures: anything else is refused before
                // the runtime's cryptography sees it.
                let expected = match key {
                    KeyKind::Ed25519(_) | KeyKind::P256 { .. } => 64,
                };
                if signature.len() != expected {
                    return Err(bad("bad signature"));
                }
                VerifyingKey::Public(key)
            }
            "none" => return Err(bad("unsigned token")),
            _ => return Err(bad("unsupported algorithm")),
        };
        match verifier.verify(key, signed, signature).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(bad("bad signature")),
            Err(KeyUnusable) => Err(bad("the key cannot be used")),
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

    /// `exp` and `nbf` at `now`, with the configured leeway.
    fn check_times(&self, exp: Millis, nbf: Option<Millis>, now: Millis) -> Result<(), AuthError> {
        self.check_exp(exp, now)?;
        self.check_nbf(nbf, now)
    }

    fn check_exp(&self, exp: Millis, now: Millis) -> Result<(), AuthError> {
        if now >= exp.saturating_add(self.leeway_ms) {
            return Err(AuthError::InvalidToken("expired"));
        }
        Ok(())
    }

    fn check_nbf(&self, nbf: Option<Millis>, now: Millis) -> Result<(), AuthError> {
        if nbf.is_some_and(|nbf| now < nbf.saturating_sub(self.leeway_ms)) {
            return Err(AuthError::InvalidToken("not yet valid"));
        }
        Ok(())
    }

    fn check_claims(
        &self,
        claims: &Map<String, Value>,
        now: Millis,
    ) -> Result<Verified, AuthError> {
        let bad = AuthError::InvalidToken;
        let exp = date_ms(claims, "exp")?.ok_or(bad("no exp"))?;
        self.check_exp(exp, now)?;
        let nbf = date_ms(claims, "nbf")?;
        self.check_nbf(nbf, now)?;
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
        // No control characters: the owner's records are keyed by the two
        // joined with NUL, and ("a", "b\0c") must not share ("a\0b", "c")'s.
        let plain = |s: &str| !s.is_empty() && s.len() <= 256 && !s.chars().any(char::is_control);
        let sub = claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|s| plain(s))
            .ok_or(bad("no subject"))?;
        let tenant = match claims.get(&self.tenant_claim) {
            None if self.tenant_required => return Err(bad("no tenant")),
            None => format!("{ISSUER_TENANT_PREFIX}{iss}"),
            Some(Value::String(t)) if plain(t) && !t.starts_with(ISSUER_TENANT_PREFIX) => t.clone(),
            Some(_) => return Err(bad("malformed tenant")),
        };
        Ok(Verified {
            owner: Owner {
                tenant,
                principal: sub.to_owned(),
            },
            exp,
            nbf,
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
/// public keys. A key of another type or curve (RSA, P-384, X25519), or
/// whose `use` is not `sig`, whose `alg` is not its curve's (`EdDSA`,
/// `ES256`) or whose `key_ops` lack `verify`, is left out: it never
/// verifies a token.
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
    let jwks: Jwks = crate::json::from_str(text)
        .map_err(|_| "the key set is not a JWKS document".to_string())?;
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
                // Refused on every runtime, before any cryptography sees
                // it: a weak key is one for which forged signatures verify
                // under some verifiers.
                if ed25519_is_weak(&x) {
                    return Err(
                        "an Ed25519 key is of small order or not canonically encoded".into(),
                    );
                }
                KeyKind::Ed25519(x)
            }
            ("EC", Some("P-256")) => {
                let coordinate = |v: Vec<u8>| -> Result<[u8; 32], String> {
                    v.try_into()
                        .map_err(|_| "a P-256 key must have 32-byte coordinates".to_string())
                };
                KeyKind::P256 {
                    x: coordinate(decode(&k.x, "x")?)?,
                    y: coordinate(decode(&k.y, "y")?)?,
                }
            }
            // An identity provider's set often holds RSA keys (or keys on
            // other curves) beside the one this server verifies with: such
            // a key is left out, as a key for another use is. A set with no
            // usable key at all is refused when the settings are read.
            _ => continue,
        };
        // Where the crates are at hand, a key that is not a valid point is
        // a configuration error now; the Worker finds it when WebCrypto
        // imports the key (and refuses the token).
        #[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
        if key_is_unusable(&key) {
            return Err(match key {
                KeyKind::Ed25519(_) => "an Ed25519 key is invalid",
                KeyKind::P256 { .. } => "a P-256 key is invalid",
            }
            .into());
        }
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

/// The canonical encodings (sign bit ignored) of the Ed25519 points of
/// small order: 0 and 1 (orders 4 and 1), the two points of order 8, and
/// p − 1 (order 2). Their non-canonical forms (y ≥ p) are refused as such.
const ED25519_SMALL_ORDER: [[u8; 32]; 5] = {
    let mut one = [0u8; 32];
    one[0] = 1;
    let mut p_minus_1 = [0xffu8; 32];
    p_minus_1[0] = 0xec;
    p_minus_1[31] = 0x7f;
    [
        [0u8; 32],
        one,
        [
            0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef,
            0x98, 0xf0, 0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88,
            0x6d, 0x53, 0xfc, 0x05,
        ],
        [
            0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10,
            0x67, 0x0f, 0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77,
            0x92, 0xac, 0x03, 0x7a,
        ],
        p_minus_1,
    ]
};

/// Whether an Ed25519 public key is of small order or encodes its
/// coordinate non-canonically (y ≥ p): keys no deployment should trust,
/// which some verifiers accept forged signatures for.
fn ed25519_is_weak(x: &[u8; 32]) -> bool {
    let mut y = *x;
    y[31] &= 0x7f;
    // y ≥ p = 2^255 − 19: 0x7f, then 30 bytes of 0xff, then a low byte ≥ 0xed.
    let non_canonical = y[31] == 0x7f && y[1..31].iter().all(|&b| b == 0xff) && y[0] >= 0xed;
    non_canonical || ED25519_SMALL_ORDER.contains(&y)
}

#[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
fn key_is_unusable(key: &KeyKind) -> bool {
    matches!(
        RustCrypto::verify_now(VerifyingKey::Public(key), b"", &[0; 64]),
        Err(KeyUnusable)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_equal_only_when_every_field_is() {
        let base = JwtAuth {
            issuer: "https://issuer.test".into(),
            resource: "https://mcp.test/mcp".into(),
            hs256_secret: Some(b"a-secret-of-some-length-0123456789".to_vec()),
            keys: vec![
                PublicKey {
                    kid: Some("ed".into()),
                    key: KeyKind::Ed25519([7; 32]),
                },
                PublicKey {
                    kid: None,
                    key: KeyKind::P256 {
                        x: [1; 32],
                        y: [2; 32],
                    },
                },
            ],
            tenant_claim: "tenant".into(),
            tenant_required: false,
            types: vec!["jwt".into(), "at+jwt".into()],
            leeway_ms: 1_000,
            authorization_servers: vec!["https://as.test".into()],
        };
        assert!(base == base.clone());
        type Change = fn(&mut JwtAuth);
        let variants: Vec<(&str, Change)> = vec![
            ("issuer", |a| a.issuer.push('x')),
            ("issuer's last byte", |a| {
                a.issuer = "https://issuer.tesT".into()
            }),
            ("resource", |a| a.resource = "https://mcp.test/mcq".into()),
            ("no secret", |a| a.hs256_secret = None),
            ("secret's first byte", |a| {
                if let Some(s) = a.hs256_secret.as_mut() {
                    s[0] ^= 1;
                }
            }),
            ("secret's tail", |a| {
                if let Some(s) = a.hs256_secret.as_mut() {
                    s[33] ^= 0x80;
                }
            }),
            ("one key fewer", |a| {
                a.keys.pop();
            }),
            ("a kid", |a| a.keys[0].kid = Some("eD".into())),
            ("a kid more", |a| a.keys[1].kid = Some("p".into())),
            ("Ed25519 bytes", |a| {
                if let KeyKind::Ed25519(k) = &mut a.keys[0].key {
                    k[31] ^= 1;
                }
            }),
            ("P-256 x", |a| {
                if let KeyKind::P256 { x, .. } = &mut a.keys[1].key {
                    x[0] ^= 0x40;
                }
            }),
            ("P-256 y", |a| {
                if let KeyKind::P256 { y, .. } = &mut a.keys[1].key {
                    y[20] ^= 4;
                }
            }),
            ("another kind of key", |a| {
                a.keys[1].key = KeyKind::Ed25519([1; 32])
            }),
            ("tenant claim", |a| a.tenant_claim = "tenanT".into()),
            ("tenant required", |a| a.tenant_required = true),
            ("a type", |a| a.types[1] = "at+jwT".into()),
            ("a type fewer", |a| {
                a.types.pop();
            }),
            ("leeway", |a| a.leeway_ms = 999),
            ("authorization server", |a| {
                a.authorization_servers[0].push('/')
            }),
            ("no authorization server", |a| {
                a.authorization_servers.clear()
            }),
        ];
        for (what, change) in variants {
            let mut other = base.clone();
            change(&mut other);
            assert!(base != other, "{what}");
            assert!(other != base, "{what}");
        }
    }

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
        let ok = |h| bearer(h).ok();
        let empty = Err(AuthError::InvalidToken("an empty bearer token"));
        assert_eq!(ok("Bearer abc"), Some("abc"));
        assert_eq!(ok("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), Err(AuthError::NotBearer));
        assert_eq!(bearer("Basic"), Err(AuthError::NotBearer));
        assert_eq!(bearer("Bearer"), empty);
        assert_eq!(bearer("Bearer "), empty);
        let several = Err(AuthError::Malformed("several credentials in one header"));
        assert_eq!(bearer("Bearer a, Bearer b"), several);
        assert_eq!(bearer("Bearer a b"), several);
        // Optional whitespace is spaces and tabs; other white space stays
        // part of the credential (and fails its check).
        assert_eq!(ok("\tBearer abc\t"), Some("abc"));
        assert_eq!(ok("Bearer abc\u{a0}"), Some("abc\u{a0}"));
        assert_eq!(bearer("\u{2003}Bearer abc"), Err(AuthError::NotBearer));
    }
}
