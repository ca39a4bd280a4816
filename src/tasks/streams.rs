//! The open-listen-stream quota: each principal may hold at most N
//! `subscriptions/listen` streams at once, on every replica together. A
//! small per-owner record lists each open stream with a lease; a stream
//! renews its lease while it runs and gives its slot back when it ends, and
//! the slot of a stream whose client (or isolate) went away frees itself
//! when its lease runs out. A record that cannot be read is refused
//! loudly, never reset. The record is written due [`KEEP_MS`] after its
//! last lease runs out, and the runner deletes it then
//! (`tasks::idle`).

use crate::sorted::SortedMap;

use serde::{Deserialize, Serialize};

use super::quota::Exceeded;
use super::{TaskError, store_failed};
use crate::crypto::{b64url, sha256};
use crate::owner::Owner;
use crate::store::{Store, StoreError};
use crate::time::Millis;

const ATTEMPTS: usize = 8;

/// How long a slot lasts without renewal.
pub const LEASE_MS: i64 = 60_000;
/// How often a running stream renews its slot.
pub const RENEW_MS: i64 = 30_000;
/// How long a record is kept after its last lease ran out: a principal's
/// next stream within the hour finds it, and a shard's alarm does not wake
/// at every renewal.
pub const KEEP_MS: i64 = 3_600_000;

const PREFIX: &str = "lsn_";

#[derive(Default, Serialize, Deserialize)]
struct Open {
    /// Stream id -> lease expiry.
    streams: SortedMap<Millis>,
}

impl Open {
    fn idle_at(&self) -> Millis {
        let last = self.streams.values().copied().max();
        last.unwrap_or(Millis::MIN).saturating_add(KEEP_MS)
    }
}

/// Whether `key` names a listen-stream record.
pub fn is_key(key: &str) -> bool {
    key.starts_with(PREFIX)
}

/// When the record's last lease has been out for [`KEEP_MS`], or `None`
/// when `body` cannot be decoded.
pub(super) fn idle_at(body: &str) -> Option<Millis> {
    crate::json::from_str::<Open>(body)
        .ok()
        .map(|o| o.idle_at())
}

/// One stream's slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    key: String,
    id: String,
    /// The cap the slot was taken under.
    max: usize,
    /// When the stream next renews its lease.
    pub renew_at: Millis,
}

/// The store key of `owner`'s stream record. It never looks like a task id.
pub fn key(owner: &Owner) -> String {
    let digest = sha256(format!("streams\u{0}{}\u{0}{}", owner.tenant, owner.principal).as_bytes());
    format!("{PREFIX}{}", b64url(&digest[..18]))
}

fn decode(key: &str, body: &str) -> Result<Open, TaskError> {
    crate::json::from_str(body).map_err(|_| TaskError::QuotaUnreadable(key.to_owned()))
}

/// A read-modify-write of the record with compare-and-swap; `edit` says
/// whether there is anything to write.
async fn modify<S: Store>(
    store: &S,
    key: &str,
    mut edit: impl FnMut(&mut Open) -> Result<bool, TaskError>,
) -> Result<(), TaskError> {
    for _ in 0..ATTEMPTS {
        let current = store.get(key).await.map_err(store_failed)?;
        let (version, mut open) = match &current {
            Some(e) => (Some(e.version), decode(key, &e.body)?),
            None => (None, Open::default()),
        };
        if !edit(&mut open)? {
            return Ok(());
        }
        let body = serde_json::to_string(&open).map_err(|_| TaskError::Encoding)?;
        match store.put(key, version, &body, Some(open.idle_at())).await {
            Ok(_) => return Ok(()),
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(store_failed(e)),
        }
    }
    Err(TaskError::QuotaBusy)
}

/// Takes a slot for stream `id` of `owner`, or refuses (429) when `max`
/// are open; `None` without a record when `max` is 0 (no limit).
pub async fn open<S: Store>(
    store: &S,
    owner: &Owner,
    id: &str,
    now: Millis,
    max: usize,
) -> Result<Option<Slot>, TaskError> {
    if max == 0 {
        return Ok(None);
    }
    let key = key(owner);
    modify(store, &key, |open| {
        open.streams.retain(|_, exp| *exp > now);
        if open.streams.len() >= max {
            return Err(TaskError::QuotaExceeded(Exceeded::Streams { max }));
        }
        open.streams
            .insert(id.to_owned(), now.saturating_add(LEASE_MS));
        Ok(true)
    })
    .await?;
    Ok(Some(Slot {
        key,
        id: id.to_owned(),
        max,
        renew_at: now.saturating_add(RENEW_MS),
    }))
}

/// Extends the slot's lease (best effort: a failure only lets the slot
/// expire early). A slot that expired meanwhile is taken again only if
/// there is room, so renewals never take the count past the cap. Returns
/// whether the stream still holds a slot: `false` when its lease ran out
/// (a client that stopped reading) and other streams took the room; the
/// stream then ends.
pub async fn renew<S: Store>(store: &S, slot: &mut Slot, now: Millis) -> bool {
    slot.renew_at = now.saturating_add(RENEW_MS);
    let mut held = true;
    let _ = modify(store, &slot.key, |open| {
        open.streams.retain(|_, exp| *exp > now);
        if !open.streams.contains_key(&slot.id) && open.streams.len() >= slot.max {
            held = false;
            return Ok(false);
        }
        held = true;
        open.streams
            .insert(slot.id.clone(), now.saturating_add(LEASE_MS));
        Ok(true)
    })
    .await;
    held
}

/// Gives the slot back (best effort: otherwise its lease runs out).
pub async fn close<S: Store>(store: &S, slot: &Slot, now: Millis) {
    let _ = modify(store, &slot.key, |open| {
        let had = open.streams.remove(&slot.id).is_some();
        open.streams.retain(|_, exp| *exp > now);
        Ok(had)
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block_on;
    use crate::store::MemoryStore;

    fn owner(p: &str) -> Owner {
        Owner {
            tenant: "t".into(),
            principal: p.into(),
        }
    }

    #[test]
    fn slots_are_counted_renewed_given_back_and_expire() {
        let store = MemoryStore::new();
        let a = owner("a");
        let s1 = block_on(open(&store, &a, "s1", 0, 2)).unwrap().unwrap();
        let mut s2 = block_on(open(&store, &a, "s2", 0, 2)).unwrap().unwrap();
        assert!(matches!(
            block_on(open(&store, &a, "s3", 0, 2)),
            Err(TaskError::QuotaExceeded(Exceeded::Streams { max: 2 }))
        ));
        // Another principal is not affected.
        assert!(block_on(open(&store, &owner("b"), "s1", 0, 2)).is_ok());
        // A slot given back is free at once.
        block_on(close(&store, &s1, 1));
        let s3 = block_on(open(&store, &a, "s3", 1, 2)).unwrap().unwrap();
        // A renewed slot outlives one that was not renewed.
        assert!(block_on(renew(&store, &mut s2, 50_000)));
        let at = LEASE_MS + 1;
        assert!(
            block_on(open(&store, &a, "s4", at, 2)).is_ok(),
            "s3 expired"
        );
        assert!(
            block_on(open(&store, &a, "s5", at, 2)).is_err(),
            "s2 and s4 hold"
        );
        drop(s3);
        // A lapsed slot is not taken back over the cap by its renewal.
        let at = at + 10;
        let mut lapsed = s2.clone();
        let _full = block_on(open(&store, &a, "s6", at + LEASE_MS, 2)).unwrap();
        let _full2 = block_on(open(&store, &a, "s7", at + LEASE_MS, 2)).unwrap();
        assert!(
            !block_on(renew(&store, &mut lapsed, at + LEASE_MS + 1)),
            "lapsed, and no room: the stream must end"
        );
        assert!(block_on(open(&store, &a, "s8", at + LEASE_MS + 2, 2)).is_err());
        let k = key(&a);
        let body = block_on(store.get(&k)).unwrap().unwrap().body;
        assert!(!body.contains("\"s2\""), "{body}");
        // No limit: no record.
        assert_eq!(
            block_on(open(&store, &owner("c"), "x", 0, 0)).unwrap(),
            None
        );
    }

    #[test]
    fn a_corrupt_record_is_refused_not_reset() {
        let store = MemoryStore::new();
        let k = key(&owner("a"));
        block_on(store.put(&k, None, "garbage", None)).unwrap();
        assert!(matches!(
            block_on(open(&store, &owner("a"), "s", 0, 2)),
            Err(TaskError::QuotaUnreadable(_))
        ));
    }
}
