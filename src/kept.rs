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

/// A token's lookup key: the first eight bytes of its last part (the text
/// after its last `.`), or `None` for a token too short or too long to
/// keep.
pub(crate) fn key_of(token: &str) -> Option<u64> {
    if token.len() > MAX_KEPT_LEN {
        return None;
    }
    let last = token.rsplit('.').next()?.as_bytes();
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
        let same: bool = entry.token.as_ref().ct_eq(token.as_bytes()).into();
        same.then(|| entry.value.clone())
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
