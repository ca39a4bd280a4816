//! Tokens an instance verified before, so that the next request presenting
//! the same bytes skips the check.
//!
//! A client repeats its credentials on every request: a bearer token until
//! it expires, a 2025-11-25 session id for as long as the session lasts.
//! Checking them (a signature, an HMAC) is a large part of what a small
//! request costs, and the answer for the same bytes under the same settings
//! does not change. [`Kept`] holds what each accepted token stood for, tied
//! to the settings it was verified under: another settings' first use
//! empties it, so an entry never answers for settings it was not verified
//! under. Refused tokens are never kept, so nothing passes here that did
//! not pass in full; what the value still has to be checked against (a
//! token's expiry, the caller presenting a session) is its user's to check.
//!
//! Bounded: at most [`CAPACITY`] tokens of at most [`MAX_KEPT_LEN`] bytes;
//! a new one replaces the oldest. A token is found by the first bytes of
//! its last `.`-separated part (a signature or a MAC, unpredictable to
//! anyone without the key) and then compared in full in constant time.

use std::cell::RefCell;

use subtle::ConstantTimeEq;

/// Tokens kept at most.
pub(crate) const CAPACITY: usize = 128;

/// The longest token kept; a longer one is verified on every request.
pub(crate) const MAX_KEPT_LEN: usize = 2048;

struct Entry<V> {
    /// The first bytes of the token's last part, to find it by.
    key: u64,
    token: Box<[u8]>,
    value: V,
}

struct Inner<S, V> {
    /// The settings every entry was verified under.
    settings: Option<S>,
    entries: Vec<Entry<V>>,
    /// The entry the next new token replaces once the cache is full.
    next: usize,
}

impl<S, V> Default for Inner<S, V> {
    fn default() -> Self {
        Inner {
            settings: None,
            entries: Vec::new(),
            next: 0,
        }
    }
}

/// Verified tokens, each with what it stood for (`V`), all under one
/// settings value (`S`). See the module's documentation.
pub(crate) struct Kept<S, V> {
    inner: RefCell<Inner<S, V>>,
}

impl<S, V> Default for Kept<S, V> {
    fn default() -> Self {
        Kept {
            inner: RefCell::default(),
        }
    }
}

/// Whether `a` and `b` hold the same bytes, in time that depends only on
/// their lengths: the differences of every eight bytes OR-ed together with
/// no branch on them, the total through `subtle`'s optimisation barrier
/// once (the usual constant-time comparison; `subtle`'s own comparison of
/// byte slices puts every byte through the barrier, about 9,500 wasm
/// instructions for a 250-byte token).
fn same_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (a_words, a_tail) = a.as_chunks::<8>();
    let (b_words, b_tail) = b.as_chunks::<8>();
    let mut differ = 0u64;
    for (x, y) in a_words.iter().zip(b_words) {
        differ |= u64::from_le_bytes(*x) ^ u64::from_le_bytes(*y);
    }
    for (x, y) in a_tail.iter().zip(b_tail) {
        differ |= u64::from(x ^ y);
    }
    differ.ct_eq(&0).into()
}

/// A token's lookup key: the first eight bytes of its last part (the text
/// after its last `.`), or `None` for a token too short or too long to
/// keep.
pub(crate) fn key_of(token: &str) -> Option<u64> {
    if token.len() > MAX_KEPT_LEN {
        return None;
    }
    // The text after the last `.` (all of it without one), as
    // `rsplit('.').next()` gives it, without decoding characters.
    let bytes = token.as_bytes();
    let last = bytes
        .iter()
        .rposition(|&b| b == b'.')
        .map_or(bytes, |dot| bytes.get(dot + 1..).unwrap_or_default());
    let first: [u8; 8] = last.get(..8)?.try_into().ok()?;
    Some(u64::from_le_bytes(first))
}

impl<S: PartialEq + Clone, V: Clone> Kept<S, V> {
    /// What `token` was verified as under `settings`, if it is kept.
    pub(crate) fn lookup(&self, settings: &S, token: &str) -> Option<V> {
        let key = key_of(token)?;
        let inner = self.inner.try_borrow().ok()?;
        if inner.settings.as_ref() != Some(settings) {
            return None;
        }
        let entry = inner.entries.iter().find(|e| e.key == key)?;
        same_in_constant_time(&entry.token, token.as_bytes()).then(|| entry.value.clone())
    }

    /// Keeps `token`, just verified under `settings` as `value`.
    pub(crate) fn remember(&self, settings: &S, token: &str, value: &V) {
        let Some(key) = key_of(token) else { return };
        let Ok(mut inner) = self.inner.try_borrow_mut() else {
            return;
        };
        if inner.settings.as_ref() != Some(settings) {
            *inner = Inner {
                settings: Some(settings.clone()),
                ..Inner::default()
            };
        }
        let entry = Entry {
            key,
            token: token.as_bytes().into(),
            value: value.clone(),
        };
        let inner = &mut *inner;
        if let Some(same) = inner.entries.iter_mut().find(|e| e.key == key) {
            *same = entry;
        } else if inner.entries.len() < CAPACITY {
            inner.entries.push(entry);
        } else if let Some(oldest) = inner.entries.get_mut(inner.next % CAPACITY) {
            *oldest = entry;
            inner.next = (inner.next + 1) % CAPACITY;
        }
    }

    /// Drops `token` (it no longer stands for its value).
    pub(crate) fn forget(&self, token: &str) {
        let Some(key) = key_of(token) else { return };
        if let Ok(mut inner) = self.inner.try_borrow_mut() {
            inner.entries.retain(|e| e.key != key);
        }
    }

    /// Tokens kept now.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn len(&self) -> usize {
        self.inner.try_borrow().map_or(0, |i| i.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn constant_time_comparison_is_equality() {
        for len in 0..40 {
            let a: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            assert!(same_in_constant_time(&a, &a.clone()), "len {len}");
            // A flipped bit at every byte, in the words and in the tail.
            for at in 0..len {
                for bit in [0, 3, 7] {
                    let mut b = a.clone();
                    b[at] ^= 1 << bit;
                    assert!(!same_in_constant_time(&a, &b), "len {len}, byte {at}");
                    assert!(!same_in_constant_time(&b, &a), "len {len}, byte {at}");
                }
            }
            // A prefix is not the whole.
            if len > 0 {
                assert!(!same_in_constant_time(&a, &a[..len - 1]), "len {len}");
                assert!(!same_in_constant_time(&a[..len - 1], &a), "len {len}");
            }
        }
    }

    #[test]
    fn a_key_is_read_from_the_last_part() {
        for token in [
            "aaa.bbb.ccccdddd",
            "aaa.bbb.ccccddddeeee",
            "aaa.bbb.cccc",
            "abcdefgh",
            "abcdefg",
            "a.b.",
            ".abcdefgh",
            "aaa.bbbbbbbb.",
            "é.абвгдежз",
            "",
        ] {
            let expected = token
                .rsplit('.')
                .next()
                .and_then(|last| last.as_bytes().get(..8))
                .map(|first| u64::from_le_bytes(first.try_into().unwrap_or_default()));
            assert_eq!(key_of(token), expected, "{token:?}");
        }
        assert_eq!(key_of(&"x".repeat(MAX_KEPT_LEN + 1)), None);
    }

    proptest! {
        #[test]
        fn constant_time_comparison_agrees_with_eq(
            a in proptest::collection::vec(0u8..4, 0..48),
            b in proptest::collection::vec(0u8..4, 0..48),
        ) {
            prop_assert_eq!(same_in_constant_time(&a, &b), a == b);
        }

        #[test]
        fn a_key_is_what_rsplit_gives(token in "[a.é]{0,24}") {
            let expected = token
                .rsplit('.')
                .next()
                .and_then(|last| last.as_bytes().get(..8))
                .and_then(|first| <[u8; 8]>::try_from(first).ok())
                .map(u64::from_le_bytes);
            prop_assert_eq!(key_of(&token), expected);
        }
    }
}
