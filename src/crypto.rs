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
    tag_of(absorb(new_mac(key), parts))
}

/// Constant-time check of a tag made by [`hmac_sha256`].
pub fn hmac_verify(key: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
    absorb(new_mac(key), parts).verify_slice(tag).is_ok()
}

/// A short tag for tokens: the first 16 bytes of [`hmac_sha256`] over
/// `parts`, base64url.
pub fn short_tag(key: &[u8], parts: &[&[u8]]) -> String {
    short_tag_of(absorb(new_mac(key), parts))
}

/// Constant-time check of a [`short_tag`] (any tag of at least 16 bytes
/// that is a prefix of the MAC).
pub fn short_tag_matches(key: &[u8], parts: &[&[u8]], tag: &str) -> bool {
    short_tag_check(|| absorb(new_mac(key), parts), tag)
}

/// One state key and its id (the first 8 base64url characters of the
/// SHA-256 of the key: it names the key without revealing it). Its own
/// MACs ([`StateKey::hmac`] and the others) equal the free functions'
/// with [`StateKey::secret`], and cost two SHA-256 blocks less each: the
/// key's padded blocks are hashed once, here.
///
/// ```
/// use mcp_tasks_edge::crypto::{StateKey, hmac_sha256, short_tag};
/// let key = StateKey::new(b"a secret of at least 32 bytes....".to_vec());
/// let parts: &[&[u8]] = &[b"label", b"value"];
/// assert_eq!(key.hmac(parts), hmac_sha256(key.secret(), parts));
/// assert!(key.short_tag_matches(parts, &short_tag(key.secret(), parts)));
/// ```
#[derive(Clone)]
pub struct StateKey {
    id: String,
    secret: Vec<u8>,
    keyed: HmacSha256,
}

impl PartialEq for StateKey {
    /// Compared eight bytes at a time (on wasm, `==` on byte strings is the
    /// C library's byte-by-byte `memcmp`): the caches of verified sessions
    /// and tokens compare the keyring they were filled under on every
    /// lookup. Both sides are the server's own keys, so how long the
    /// comparison takes tells a client nothing.
    fn eq(&self, other: &Self) -> bool {
        crate::limits::same_bytes(self.id.as_bytes(), other.id.as_bytes())
            && crate::limits::same_bytes(&self.secret, &other.secret)
    }
}

impl Eq for StateKey {}

impl StateKey {
    pub fn new(secret: impl Into<Vec<u8>>) -> Self {
        let secret = secret.into();
        let digest = sha256(&secret);
        let mut id = b64url(&digest);
        id.truncate(8);
        let keyed = new_mac(&secret);
        StateKey { id, secret, keyed }
    }

    /// [`hmac_sha256`] with this key.
    pub fn hmac(&self, parts: &[&[u8]]) -> [u8; 32] {
        tag_of(absorb(self.keyed.clone(), parts))
    }

    /// [`hmac_verify`] with this key.
    pub fn hmac_verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        absorb(self.keyed.clone(), parts).verify_slice(tag).is_ok()
    }

    /// [`short_tag`] with this key.
    pub fn short_tag(&self, parts: &[&[u8]]) -> String {
        short_tag_of(absorb(self.keyed.clone(), parts))
    }

    /// [`short_tag_matches`] with this key.
    pub fn short_tag_matches(&self, parts: &[&[u8]], tag: &str) -> bool {
        short_tag_check(|| absorb(self.keyed.clone(), parts), tag)
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

    /// Whether the key that signs is empty ([`Keyring::default`]): anyone
    /// could make what it signs.
    pub fn is_empty(&self) -> bool {
        self.current.secret.is_empty()
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

/// `mac` over `parts`, each prefixed with its length.
fn absorb(mut mac: HmacSha256, parts: &[&[u8]]) -> HmacSha256 {
    for part in parts {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    mac
}

fn tag_of(mac: HmacSha256) -> [u8; 32] {
    mac.finalize().into_bytes().into()
}

fn short_tag_of(mac: HmacSha256) -> String {
    b64url(tag_of(mac).get(..16).unwrap_or_default())
}

/// Whether `tag` is a short tag of the MAC `mac` makes (built only for a
/// tag that decodes).
fn short_tag_check(mac: impl FnOnce() -> HmacSha256, tag: &str) -> bool {
    b64url_decode(tag)
        .is_some_and(|tag| tag.len() >= 16 && mac().verify_truncated_left(&tag).is_ok())
}

#[cfg(test)]
mod tests {
    /// Keys are equal exactly when their secrets are: a difference at any
    /// byte, or in length, makes them differ.
    #[test]
    fn state_keys_compare_by_their_secrets() {
        use super::StateKey;
        let secret: Vec<u8> = (0..45u8).collect();
        let key = StateKey::new(secret.clone());
        assert!(key == StateKey::new(secret.clone()));
        // The same id (a prefix of the secret's digest) with another
        // secret: the secrets themselves decide.
        let with_secret = |secret: Vec<u8>| StateKey {
            secret,
            ..key.clone()
        };
        assert!(key == with_secret(secret.clone()));
        for i in 0..secret.len() {
            let mut other = secret.clone();
            other[i] ^= 0x20;
            assert!(key != with_secret(other.clone()), "byte {i}");
            assert!(key != StateKey::new(other), "byte {i}, its own id");
        }
        for len in [0, 1, 8, 44, 46] {
            let other: Vec<u8> = (0..len).collect();
            assert!(key != with_secret(other), "length {len}");
        }
    }

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

    /// What [`hmac_sha256`] is by definition: the raw HMAC over each part
    /// prefixed with its length (so anchored to RFC 4231 through
    /// `hmac_raw`).
    fn by_definition(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
        let mut data = Vec::new();
        for part in parts {
            data.extend_from_slice(&(part.len() as u64).to_be_bytes());
            data.extend_from_slice(part);
        }
        hmac_raw(key, &data)
    }

    proptest::proptest! {
        /// A state key's own MACs (its key blocks hashed once) are the free
        /// functions' with its secret, for keys shorter and longer than
        /// SHA-256's 64-byte block, and refuse another key's or an altered
        /// tag.
        #[test]
        fn a_state_keys_macs_are_the_free_functions(
            secret in proptest::collection::vec(proptest::num::u8::ANY, 0..150),
            parts in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..90), 0..4),
            flip in 0usize..32,
        ) {
            let key = StateKey::new(secret.clone());
            let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
            let tag = key.hmac(&parts);
            proptest::prop_assert_eq!(tag, hmac_sha256(&secret, &parts));
            proptest::prop_assert_eq!(tag, by_definition(&secret, &parts));
            proptest::prop_assert!(key.hmac_verify(&parts, &tag));
            let mut altered = tag;
            altered[flip] ^= 1;
            proptest::prop_assert!(!key.hmac_verify(&parts, &altered));
            let short = key.short_tag(&parts);
            proptest::prop_assert_eq!(&short, &short_tag(&secret, &parts));
            proptest::prop_assert!(key.short_tag_matches(&parts, &short));
            proptest::prop_assert!(key.short_tag_matches(&parts, &b64url(&tag)), "a longer prefix");
            proptest::prop_assert!(!key.short_tag_matches(&parts, &b64url(&tag[..15])), "too short");
            let mut other = secret.clone();
            other.push(1);
            let other = StateKey::new(other);
            proptest::prop_assert!(!other.hmac_verify(&parts, &tag));
            proptest::prop_assert!(!other.short_tag_matches(&parts, &short));
            let copy = key.clone();
            proptest::prop_assert_eq!(copy.hmac(&parts), tag, "a clone keeps the keyed state");
        }
    }

    #[test]
    fn base64url_round_trip() {
        assert_eq!(b64url(&[0xfb, 0xff]), "-_8");
        assert_eq!(b64url_decode("-_8"), Some(vec![0xfb, 0xff]));
        assert_eq!(b64url_decode("*"), None);
    }
}
