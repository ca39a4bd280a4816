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
    fn sequential_ids_are_deterministic() {
        let s = SequentialIds::starting_at(1);
        assert_eq!(s.task_id().unwrap(), "tsk_AAAAAAAAAAAAAAAAAAAAAQ");
        assert_eq!(s.task_id().unwrap(), "tsk_AAAAAAAAAAAAAAAAAAAAAg");
    }
}
