//! Randomness is injected: task ids and nonces come from an [`IdSource`].

use std::sync::atomic::{AtomicU64, Ordering};

use crate::crypto::b64url;
use crate::error::RpcError;

/// Where new task ids and nonces come from.
pub trait IdSource: Send + Sync {
    /// Fills `buf` with unpredictable bytes.
    fn fill(&self, buf: &mut [u8]) -> Result<(), RpcError>;

    /// A new task id: `tsk_` and 128 random bits in base64url.
    fn task_id(&self) -> Result<String, RpcError> {
        let mut bytes = [0u8; 16];
        self.fill(&mut bytes)?;
        Ok(format!("tsk_{}", b64url(&bytes)))
    }
}

/// A task id placed on `placement` (of `placements`, at least 1): `tsk_`
/// and, in base64url, the placement as two bytes then the 16 `random`
/// bytes (28 characters in all). A platform that spreads tasks over several
/// stores (the Worker's shard Durable Objects) reads the placement back
/// with [`placement_of`], so a task stays where it was put however many
/// stores are added later.
///
/// ```
/// use mcp_tasks_edge::ids::{placed_task_id, placement_of};
/// let id = placed_task_id(&[7; 16], 300);
/// assert_eq!(id.len(), 28);
/// assert_eq!(placement_of(&id), Some(300));
/// assert_eq!(placement_of("tsk_AAAAAAAAAAAAAAAAAAAAAQ"), None);
/// ```
pub fn placed_task_id(random: &[u8; 16], placement: u16) -> String {
    let mut bytes = [0u8; 18];
    bytes[..2].copy_from_slice(&placement.to_be_bytes());
    bytes[2..].copy_from_slice(random);
    format!("tsk_{}", b64url(&bytes))
}

/// The placement a [`placed_task_id`] carries; `None` for any other id
/// (an unplaced one: `tsk_` and 22 characters).
pub fn placement_of(id: &str) -> Option<u16> {
    let rest = id.strip_prefix("tsk_")?;
    if rest.len() != 24 {
        return None;
    }
    let bytes = crate::crypto::b64url_decode(rest.get(..4)?)?;
    Some(u16::from_be_bytes([*bytes.first()?, *bytes.get(1)?]))
}

/// A new task id: unplaced (`tsk_` and 128 random bits) when `placements`
/// is 0, else placed on a random one of `placements`.
pub fn new_task_id(ids: &dyn IdSource, placements: u16) -> Result<String, RpcError> {
    if placements == 0 {
        return ids.task_id();
    }
    let mut bytes = [0u8; 18];
    ids.fill(&mut bytes)?;
    let pick = u16::from_be_bytes([bytes[16], bytes[17]]) % placements;
    let mut random = [0u8; 16];
    random.copy_from_slice(&bytes[..16]);
    Ok(placed_task_id(&random, pick))
}

/// The operating system's (or the host's) random source via `getrandom`:
/// `wasi:random` on WASI, `crypto.getRandomValues` on Workers.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemRandom;

impl IdSource for SystemRandom {
    fn fill(&self, buf: &mut [u8]) -> Result<(), RpcError> {
        getrandom::fill(buf)
            .map_err(|_| RpcError::internal("Internal error: no randomness available."))
    }
}

/// A deterministic source for tests and golden transcripts: each call yields
/// the next counter value, spread over the buffer. Never use in production.
#[derive(Debug, Default)]
pub struct SequentialIds {
    next: AtomicU64,
}

impl SequentialIds {
    pub fn starting_at(n: u64) -> Self {
        SequentialIds {
            next: AtomicU64::new(n),
        }
    }
}

impl IdSource for SequentialIds {
    fn fill(&self, buf: &mut [u8]) -> Result<(), RpcError> {
        let n = self.next.fetch_add(1, Ordering::SeqCst).to_be_bytes();
        // The counter, big-endian, right-aligned; zeros before it.
        buf.fill(0);
        for (b, v) in buf.iter_mut().rev().zip(n.iter().rev()) {
            *b = *v;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_ids_are_long_and_distinct() {
        let a = SystemRandom.task_id().unwrap();
        let b = SystemRandom.task_id().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 4 + 22);
        assert!(a.starts_with("tsk_"));
    }

    #[test]
    fn placed_ids_keep_their_placement() {
        for p in [0u16, 1, 15, 255, 256, 4_095, 65_535] {
            let id = placed_task_id(&[0xff; 16], p);
            assert_eq!(placement_of(&id), Some(p), "{id}");
            assert!(crate::tasks::is_task_id(&id), "{id}");
        }
        let s = SequentialIds::starting_at(1);
        for _ in 0..20 {
            let id = new_task_id(&s, 7).unwrap();
            assert!(placement_of(&id).unwrap() < 7);
        }
        assert_eq!(new_task_id(&s, 0).unwrap().len(), 26, "unplaced");
        assert_eq!(placement_of("tsk_short"), None);
    }

    #[test]
    fn sequential_ids_are_deterministic() {
        let s = SequentialIds::starting_at(1);
        assert_eq!(s.task_id().unwrap(), "tsk_AAAAAAAAAAAAAAAAAAAAAQ");
        assert_eq!(s.task_id().unwrap(), "tsk_AAAAAAAAAAAAAAAAAAAAAg");
    }
}
