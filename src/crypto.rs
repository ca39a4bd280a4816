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

fn mac_over(key: &[u8], parts: &[&[u8]]) -> HmacSha256 {
    // HMAC accepts keys of any length, so this never fails; the fallback key
    // keeps the function total without a panic path.
    let mut mac =
        HmacSha256::new_from_slice(key).unwrap_or_else(|_| HmacSha256::new(&Default::default()));
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
    fn base64url_round_trip() {
        assert_eq!(b64url(&[0xfb, 0xff]), "-_8");
        assert_eq!(b64url_decode("-_8"), Some(vec![0xfb, 0xff]));
        assert_eq!(b64url_decode("*"), None);
    }
}
