//! Randomness is injected: task ids and nonces come from an [`IdSource`].

use std::sync::atomic::{AtomicU64, Ordering};

use crate::crypto::b64url;
use crate::error::RpcError;

/// Where new task ids and nonces come from.
pub trait IdSource: Send + Sync {
    /// Fills `buf` with unpredictable bytes.
    fn fill(&self, buf: &mut [u8]) -> Result<(), RpcError>;
}

/// Bytes of a new task id that hold its creation time.
const TIME_BYTES: usize = 6;

/// Bytes of a new task id: its time, then 128 random bits.
const ID_BYTES: usize = TIME_BYTES + 16;

/// A task id placed on `placement` (of `placements`, at least 1): `tsk_`
/// and, in base64url, the placement as two bytes then the id's bytes (22
/// from [`new_task_id`], its time and 128 random bits: 36 characters in
/// all; 16 from a round's derived id: 28). A platform that spreads tasks over several
/// stores (the Worker's shard Durable Objects) reads the placement back
/// with [`placement_of`], so a task stays where it was put however many
/// stores are added later.
///
/// ```
/// use mcp_tasks_edge::ids::{placed_task_id, placement_of};
/// let id = placed_task_id(&[7; 22], 300);
/// assert_eq!(id.len(), 36);
/// assert_eq!(placement_of(&id), Some(300));
/// assert_eq!(placement_of(&placed_task_id(&[7; 16], 2)), Some(2));
/// assert_eq!(placement_of("tsk_AAAAAAAAAAAAAAAAAAAAAQ"), None);
/// ```
pub fn placed_task_id(id: &[u8], placement: u16) -> String {
    let mut bytes = Vec::with_capacity(2 + id.len());
    bytes.extend_from_slice(&placement.to_be_bytes());
    bytes.extend_from_slice(id);
    format!("tsk_{}", b64url(&bytes))
}

/// The placement a [`placed_task_id`] carries; `None` for any other id
/// (an unplaced one: `tsk_` and 30 characters, or 22 from a round).
pub fn placement_of(id: &str) -> Option<u16> {
    let rest = id.strip_prefix("tsk_")?;
    if rest.len() != 24 && rest.len() != 32 {
        return None;
    }
    let bytes = crate::crypto::b64url_decode(rest.get(..4)?)?;
    Some(u16::from_be_bytes([*bytes.first()?, *bytes.get(1)?]))
}

/// A new task id made at `now_ms`: unplaced (`tsk_` and 22 bytes in
/// base64url) when `placements` is 0, else placed on a random one of
/// `placements` ([`placed_task_id`]).
///
/// Of the 22 bytes, the first 6 are `now_ms` (big-endian, its low 48 bits)
/// and the other 16 come from `ids` (a placement is read off their last
/// two): 128 unpredictable bits, so an id is
/// not guessed, and ids made about the same time sit together in a
/// store's key order. A store that keeps its keys in a B-tree then adds a
/// new task among the other recent ones instead of on a page of its own
/// (base64url does not sort in the order of its values, so ids cluster by
/// time rather than follow it exactly); with a
/// million stored tasks, that is the difference between a create that
/// writes back one page of its own and one that shares it.
///
/// ```
/// use mcp_tasks_edge::ids::{new_task_id, SequentialIds};
/// let ids = SequentialIds::starting_at(1);
/// let a = new_task_id(&ids, 0, 1_800_000_000_000).unwrap();
/// let b = new_task_id(&ids, 0, 1_800_000_000_001).unwrap();
/// assert_eq!((a.len(), &a[..10]), (34, &b[..10]), "same time prefix");
/// assert_ne!(a, b);
/// ```
pub fn new_task_id(ids: &dyn IdSource, placements: u16, now_ms: i64) -> Result<String, RpcError> {
    let mut bytes = [0u8; ID_BYTES];
    let time = (now_ms.max(0) as u64).to_be_bytes();
    bytes[..TIME_BYTES].copy_from_slice(&time[8 - TIME_BYTES..]);
    ids.fill(&mut bytes[TIME_BYTES..])?;
    if placements == 0 {
        return Ok(format!("tsk_{}", b64url(&bytes)));
    }
    // The placement is read off the id's own drawn bytes (it is in the id
    // anyway), so it is as unpredictable as they are.
    let pick = u16::from_be_bytes([bytes[ID_BYTES - 2], bytes[ID_BYTES - 1]]) % placements;
    Ok(placed_task_id(&bytes, pick))
}

/// When a task id made by [`new_task_id`] was made (its first 6 bytes);
/// `None` for a string that is no task id. An id made otherwise (derived
/// from a round's nonce) reads as an arbitrary time.
pub(crate) fn minted_at(id: &str) -> Option<i64> {
    let rest = id.strip_prefix("tsk_")?;
    let bytes = crate::crypto::b64url_decode(rest)?;
    let id_bytes = match bytes.len() {
        16 | ID_BYTES => &bytes[..],
        18 | 24 => bytes.get(2..)?,
        _ => return None,
    };
    let mut time = [0u8; 8];
    time[8 - TIME_BYTES..].copy_from_slice(id_bytes.get(..TIME_BYTES)?);
    i64::try_from(u64::from_be_bytes(time)).ok()
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
        let a = new_task_id(&SystemRandom, 0, 5).unwrap();
        let b = new_task_id(&SystemRandom, 0, 5).unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 4 + 30);
        assert!(a.starts_with("tsk_"));
        assert!(crate::tasks::is_task_id(&a), "{a}");
    }

    /// The first 6 of an id's 22 bytes are its time, the other 16 drawn.
    #[test]
    fn ids_lead_with_their_time() {
        let decode = |id: &str| crate::crypto::b64url_decode(&id[4..]).unwrap();
        let s = SequentialIds::starting_at(0x0102);
        let t = 0x0a0b_0c0d_0e0f_i64;
        let unplaced = decode(&new_task_id(&s, 0, t).unwrap());
        assert_eq!(unplaced.len(), 22);
        assert_eq!(&unplaced[..6], &[0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f]);
        // The counter fills the 16 drawn bytes from the right.
        assert_eq!(&unplaced[6..20], &[0; 14]);
        assert_eq!(&unplaced[20..], &[0x01, 0x02]);
        let placed = decode(&new_task_id(&s, 0x0100, t).unwrap());
        assert_eq!(placed.len(), 24);
        assert_eq!(&placed[..2], &[0, 0x03], "0x0103 % 0x0100");
        assert_eq!(&placed[2..8], &unplaced[..6]);
        assert_eq!(&placed[22..], &[0x01, 0x03]);
        assert_eq!(minted_at(&new_task_id(&s, 0x0100, t).unwrap()), Some(t));
        // Later ids sort after earlier ones, byte by byte; a negative time
        // counts as 0, not as a far future.
        let later = decode(&new_task_id(&s, 0, t + 1).unwrap());
        assert!(later > unplaced);
        let early = decode(&new_task_id(&s, 0, -1).unwrap());
        assert_eq!(&early[..6], &[0; 6]);
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
            let id = new_task_id(&s, 7, 1_800_000_000_000).unwrap();
            assert!(placement_of(&id).unwrap() < 7);
        }
        let unplaced = new_task_id(&s, 0, 1_800_000_000_000).unwrap();
        assert_eq!(unplaced.len(), 34, "unplaced");
        assert!(crate::tasks::is_task_id(&unplaced), "{unplaced}");
        assert_eq!(placement_of(&unplaced), None);
        assert_eq!(placement_of("tsk_short"), None);
    }

    #[test]
    fn sequential_ids_are_deterministic() {
        let s = SequentialIds::starting_at(1);
        assert_eq!(
            new_task_id(&s, 0, 0).unwrap(),
            "tsk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAQ"
        );
        assert_eq!(
            new_task_id(&s, 0, 0).unwrap(),
            "tsk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAg"
        );
    }
}
