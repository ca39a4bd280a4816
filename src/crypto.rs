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
