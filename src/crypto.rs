//! Small wrappers over RustCrypto (HMAC-SHA-256, SHA-256) and base64url.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// base64url without padding.
pub fn b64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Decodes base64url without padding; `None` on any defect.
pub fn b64url_decode(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(text).ok()
}

/// SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// HMAC-SHA-256 over the concatenation of `parts`, each prefixed with its
/// length so that part boundaries are unambiguous.
pub fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    mac_over(key, parts).finalize().into_bytes().into()
}

/// Constant-time check of a tag made by [`hmac_sha256`].
pub fn hmac_verify(key: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
    mac_over(key, parts).verify_slice(tag).is_ok()
}

/// A short tag for tokens: the first 16 bytes of [`hmac_sha256`] over
/// `parts`, base64url.
pub fn short_tag(key: &[u8], parts: &[&[u8]]) -> String {
    b64url(hmac_sha256(key, parts).get(..16).unwrap_or_default())
}

/// Constant-time check of a [`short_tag`] (any tag of at least 16 bytes
/// that is a prefix of the MAC).
pub fn short_tag_matches(key: &[u8], parts: &[&[u8]], tag: &str) -> bool {
    b64url_decode(tag).is_some_and(|tag| {
        tag.len() >= 16 && mac_over(key, parts).verify_truncated_left(&tag).is_ok()
    })
}

/// One state key and its id (the first 8 base64url characters of the
/// SHA-256 of the key: it names the key without revealing it).
#[derive(Clone, PartialEq, Eq)]
pub struct StateKey {
    id: String,
    secret: Vec<u8>,
}

impl StateKey {
    pub fn new(secret: impl Into<Vec<u8>>) -> Self {
        let secret = secret.into();
        let digest = sha256(&secret);
        let mut id = b64url(&digest);
        id.truncate(8);
        StateKey { id, secret }
    }

    /// The key's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The key's bytes.
    pub fn secret(&self) -> &[u8] {
        &self.secret
    }
}

/// The keys of everything the server signs (`requestState`, legacy session
/// tokens and request ids) and derives (task ids from rounds, idempotency
/// keys): the current key signs; the previous one, while configured, still
/// verifies, so a key is rotated without voiding what is in flight.
///
/// ```
/// use mcp_tasks_edge::crypto::Keyring;
/// let old = Keyring::new(b"an old secret of at least 32 bytes!".to_vec());
/// let rotated = Keyring::new(b"a new secret of at least 32 bytes!!".to_vec())
///     .with_previous(b"an old secret of at least 32 bytes!".to_vec());
/// assert!(rotated.by_id(old.current().id()).is_some());
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Keyring {
    current: StateKey,
    previous: Option<StateKey>,
}

impl Keyring {
    /// A keyring of one key.
    pub fn new(current: impl Into<Vec<u8>>) -> Self {
        Keyring {
            current: StateKey::new(current),
            previous: None,
        }
    }

    /// The same keyring, with `previous` still verifying.
    pub fn with_previous(mut self, previous: impl Into<Vec<u8>>) -> Self {
        self.previous = Some(StateKey::new(previous));
        self
    }

    /// The key that signs.
    pub fn current(&self) -> &StateKey {
        &self.current
    }

    /// The key named `id`, if configured.
    pub fn by_id(&self, id: &str) -> Option<&StateKey> {
        self.keys().find(|k| k.id == id)
    }

    /// Every key that verifies, current first.
    pub fn keys(&self) -> impl Iterator<Item = &StateKey> {
        std::iter::once(&self.current).chain(self.previous.as_ref())
    }

    /// The first key for which `check` holds.
    pub fn verifying(&self, mut check: impl FnMut(&[u8]) -> bool) -> Option<&StateKey> {
        self.keys().find(|k| check(&k.secret))
    }
}

impl Default for Keyring {
    /// An empty key: only for settings filled in later.
    fn default() -> Self {
        Keyring::new(Vec::new())
    }
}

impl std::fmt::Debug for Keyring {
    /// Shows key ids, never keys.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring")
            .field("current", &self.current.id)
            .field("previous", &self.previous.as_ref().map(|k| &k.id))
            .finish()
    }
}

/// HMAC-SHA-256 over `data` as it is (JWS HS256).
pub fn hmac_raw(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut mac = new_mac(key);
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// Constant-time check of an HMAC-SHA-256 tag over `data` as it is.
pub fn hmac_raw_verify(key: &[u8], data: &[u8], tag: &[u8]) -> bool {
    let mut mac = new_mac(key);
    mac.update(data);
    mac.verify_slice(tag).is_ok()
}

fn new_mac(key: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length, so this never fails; the fallback key
    // keeps the function total without a panic path.
    HmacSha256::new_from_slice(key).unwrap_or_else(|_| HmacSha256::new(&Default::default()))
}

fn mac_over(key: &[u8], parts: &[&[u8]]) -> HmacSha256 {
    let mut mac = new_mac(key);
    for part in parts {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    mac
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_known_answer() {
        let d = sha256(b"abc");
        assert_eq!(
            d.iter().map(|b| format!("{b:02x}")).collect::<String>(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn hmac_binds_part_boundaries() {
        let a = hmac_sha256(b"k", &[b"ab", b"c"]);
        let b = hmac_sha256(b"k", &[b"a", b"bc"]);
        assert_ne!(a, b);
        assert!(hmac_verify(b"k", &[b"ab", b"c"], &a));
        assert!(!hmac_verify(b"k2", &[b"ab", b"c"], &a));
        assert!(!hmac_verify(b"k", &[b"ab", b"c"], &a[..31]));
    }

    #[test]
    fn hmac_rfc4231_case_2() {
        let tag = hmac_raw(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            tag.iter().map(|b| format!("{b:02x}")).collect::<String>(),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert!(hmac_raw_verify(
            b"Jefe",
            b"what do ya want for nothing?",
            &tag
        ));
        assert!(!hmac_raw_verify(
            b"Jefe",
            b"what do ya want for nothing!",
            &tag
        ));
    }

    #[test]
    fn base64url_round_trip() {
        assert_eq!(b64url(&[0xfb, 0xff]), "-_8");
        assert_eq!(b64url_decode("-_8"), Some(vec![0xfb, 0xff]));
        assert_eq!(b64url_decode("*"), None);
    }
}
