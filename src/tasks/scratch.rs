//! Scratch records: short-lived entries that are not tasks (for example a
//! synchronous call's pending input round). Their keys carry a prefix no
//! task id has, their `due_at` is their expiry, and the runner deletes any
//! that come due, so one left behind by a client that went away never
//! lingers and never blocks due work.

/// The prefix of every scratch key.
pub const PREFIX: &str = "scr_";

/// The scratch key for `suffix` (URL-safe characters).
pub fn key(suffix: &str) -> String {
    format!("{PREFIX}{suffix}")
}

/// Whether `key` names a scratch record.
pub fn is_key(key: &str) -> bool {
    key.starts_with(PREFIX)
}
