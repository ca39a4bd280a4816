//! Quarantined records: a stored task that cannot be decoded is moved by
//! the runner from its key to `qrn_<key>`, out of the due index until the
//! task would have expired, then purged like a scratch record. The move is
//! logged once with the key; until the purge an operator finds the record
//! (its bytes as they were) under the `qrn_` prefix.

use serde::Deserialize;

use crate::time::Millis;

/// The prefix of every quarantined key.
pub const PREFIX: &str = "qrn_";

/// How long a quarantined record whose expiry cannot be read is kept.
pub const DEFAULT_HOLD_MS: i64 = 24 * 3_600_000;

/// The quarantine key of the record under `key`.
pub fn key(key: &str) -> String {
    format!("{PREFIX}{key}")
}

/// Whether `key` names a quarantined record.
pub fn is_key(key: &str) -> bool {
    key.starts_with(PREFIX)
}

/// The expiry recorded in the view line of an undecodable record, if that
/// much is still readable.
pub fn expiry(body: &str) -> Option<Millis> {
    #[derive(Deserialize)]
    struct Expiry {
        expires_at: Millis,
    }
    let first = body.split('\n').next()?;
    crate::json::from_str::<Expiry>(first)
        .ok()
        .map(|e| e.expires_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_expiry() {
        assert_eq!(key("tsk_x"), "qrn_tsk_x");
        assert!(is_key("qrn_tsk_x") && !is_key("tsk_x"));
        assert_eq!(expiry("{\"expires_at\":5,\"x\":1}\n{garbage"), Some(5));
        assert_eq!(expiry("garbage"), None);
    }
}
