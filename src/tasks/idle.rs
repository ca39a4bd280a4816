//! Records other than tasks come due only to go. Per-owner records (the
//! quota record and finished list of [`super::quota`], the listen-stream
//! record of [`super::streams`]) are written with a `due_at`: the time from
//! which they hold nothing live; scratch and quarantined records
//! ([`super::scratch`], [`super::quarantine`]) are due when they expire,
//! whatever they hold. The runner takes each one as it comes due
//! ([`lapse`]) and deletes it then, so a caller who goes away leaves
//! nothing stored behind.
//!
//! - A record rewritten since it came due (its `due_at` is later now) is
//!   left alone.
//! - A per-owner record that still holds something live (its `due_at` set
//!   by other code than this: an operator, another version) comes due
//!   again when that lapses.
//! - A per-owner record that cannot be decoded is kept as it is, out of
//!   the due index: its readers refuse it loudly, and it never holds up
//!   other due work.
//!
//! A record written before records carried a `due_at` stays until its next
//! write gives it one.
//!
//! A record created again after its delete starts above every version it
//! had (the store contract), so a writer that read it just before the
//! delete is refused and reads again; it cannot replace the new record
//! with its edit of the old one.

use super::{quarantine, quota, scratch, streams};
use crate::store::{Store, StoreError};
use crate::time::Millis;

/// Whether `key` names a record other than a task: one that comes due
/// only to go.
pub fn is_key(key: &str) -> bool {
    quota::is_key(key) || streams::is_key(key) || scratch::is_key(key) || quarantine::is_key(key)
}

/// When the record under `key` holds nothing live, or `None` when `body`
/// cannot be decoded.
fn idle_at(key: &str, body: &str) -> Option<Millis> {
    if scratch::is_key(key) || quarantine::is_key(key) {
        Some(Millis::MIN)
    } else if streams::is_key(key) {
        streams::idle_at(body)
    } else {
        quota::idle_at(key, body)
    }
}

/// What [`lapse`] did with a due record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lapse {
    /// The record held nothing live: it is gone.
    Deleted,
    /// Absent, rewritten since it came due, or written meanwhile: left as
    /// it is.
    Untouched,
    /// Still live: due again when it lapses.
    Rearmed,
    /// Undecodable: kept, out of the due index.
    Unreadable,
}

/// Deletes the record under `key` if it is due at `now` and holds nothing
/// live (see the module documentation for the other cases). Every
/// write is a compare-and-swap on the version read, so a record written
/// meanwhile is never lost.
pub async fn lapse<S: Store>(store: &S, key: &str, now: Millis) -> Result<Lapse, StoreError> {
    let Some(entry) = store.get(key).await? else {
        return Ok(Lapse::Untouched);
    };
    if entry.due_at.is_none_or(|due| due > now) {
        return Ok(Lapse::Untouched);
    }
    let version = Some(entry.version);
    let written = match idle_at(key, &entry.body) {
        Some(at) if at > now => store
            .put(key, version, &entry.body, Some(at))
            .await
            .map(|_| Lapse::Rearmed),
        Some(_) => store
            .delete(key, entry.version)
            .await
            .map(|()| Lapse::Deleted),
        None => store
            .put(key, version, &entry.body, None)
            .await
            .map(|_| Lapse::Unreadable),
    };
    match written {
        Err(StoreError::Conflict { .. }) => Ok(Lapse::Untouched),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block_on;
    use crate::owner::Owner;
    use crate::store::MemoryStore;

    fn owner() -> Owner {
        Owner {
            tenant: "t".into(),
            principal: "p".into(),
        }
    }

    /// A store on which another writer rewrites the key right after each
    /// read.
    struct WriteAfterGet<'a> {
        inner: &'a MemoryStore,
        body: &'static str,
        due_at: Millis,
    }

    impl Store for WriteAfterGet<'_> {
        async fn get(&self, key: &str) -> Result<Option<crate::store::Entry>, StoreError> {
            let read = self.inner.get(key).await?;
            if let Some(e) = &read {
                self.inner
                    .put(key, Some(e.version), self.body, Some(self.due_at))
                    .await?;
            }
            Ok(read)
        }
        async fn put(
            &self,
            key: &str,
            expected: Option<crate::store::Version>,
            body: &str,
            due_at: Option<Millis>,
        ) -> Result<crate::store::Version, StoreError> {
            self.inner.put(key, expected, body, due_at).await
        }
        async fn delete(
            &self,
            key: &str,
            expected: crate::store::Version,
        ) -> Result<(), StoreError> {
            self.inner.delete(key, expected).await
        }
        async fn due(&self, now: Millis, limit: usize) -> Result<Vec<String>, StoreError> {
            self.inner.due(now, limit).await
        }
        async fn next_due(&self) -> Result<Option<Millis>, StoreError> {
            self.inner.next_due().await
        }
    }

    #[test]
    fn an_idle_record_is_deleted_once_due_and_only_then() {
        let store = MemoryStore::new();
        let key = quota::key(&owner());
        let body = r#"{"tasks":{"tsk_a":5000},"bytes":{"tsk_a":10}}"#;
        block_on(store.put(&key, None, body, Some(5_000))).unwrap();
        assert_eq!(block_on(lapse(&store, &key, 4_999)), Ok(Lapse::Untouched));
        assert!(block_on(store.get(&key)).unwrap().is_some());
        assert_eq!(block_on(lapse(&store, &key, 5_000)), Ok(Lapse::Deleted));
        assert_eq!(block_on(store.get(&key)), Ok(None));
        assert_eq!(block_on(lapse(&store, &key, 5_000)), Ok(Lapse::Untouched));
    }

    #[test]
    fn a_record_still_live_is_due_again_when_it_lapses() {
        let store = MemoryStore::new();
        let key = quota::finished_key(&owner());
        // Due at 1,000, though a task in it lives until 9,000.
        let body = r#"{"tasks":{"tsk_a":9000,"tsk_b":500}}"#;
        block_on(store.put(&key, None, body, Some(1_000))).unwrap();
        assert_eq!(block_on(lapse(&store, &key, 1_000)), Ok(Lapse::Rearmed));
        let entry = block_on(store.get(&key)).unwrap().unwrap();
        assert_eq!((entry.body.as_str(), entry.due_at), (body, Some(9_000)));
        assert_eq!(block_on(lapse(&store, &key, 9_000)), Ok(Lapse::Deleted));
    }

    /// A writer that read the quota record just before the runner deleted
    /// it cannot replace the record created since with its edit.
    #[test]
    fn a_writer_from_before_the_delete_is_refused() {
        let store = MemoryStore::new();
        let key = quota::key(&owner());
        block_on(store.put(&key, None, r#"{"tasks":{}}"#, Some(10))).unwrap();
        let stale = block_on(store.get(&key)).unwrap().unwrap();
        assert_eq!(block_on(lapse(&store, &key, 10)), Ok(Lapse::Deleted));
        let fresh = r#"{"tasks":{"tsk_new":99999}}"#;
        block_on(store.put(&key, None, fresh, Some(99_999))).unwrap();
        let r = block_on(store.put(&key, Some(stale.version), &stale.body, Some(10)));
        assert!(matches!(r, Err(StoreError::Conflict { .. })), "{r:?}");
        assert_eq!(block_on(store.get(&key)).unwrap().unwrap().body, fresh);
    }

    #[test]
    fn a_record_rewritten_or_written_meanwhile_is_kept() {
        let store = MemoryStore::new();
        let key = streams::key(&owner());
        let body = r#"{"streams":{}}"#;
        block_on(store.put(&key, None, body, Some(100))).unwrap();
        // Rewritten before the runner read it: due later now.
        block_on(store.put(&key, Some(1), body, Some(10_000))).unwrap();
        assert_eq!(block_on(lapse(&store, &key, 5_000)), Ok(Lapse::Untouched));
        assert!(block_on(store.get(&key)).unwrap().is_some());
        // A write between the runner's read and its delete wins.
        block_on(store.put(&key, Some(2), body, Some(10_000))).unwrap();
        let racing = WriteAfterGet {
            inner: &store,
            body: r#"{"streams":{"s1":99999}}"#,
            due_at: 99_999,
        };
        assert_eq!(block_on(lapse(&racing, &key, 20_000)), Ok(Lapse::Untouched));
        let entry = block_on(store.get(&key)).unwrap().unwrap();
        assert_eq!(entry.due_at, Some(99_999));
    }

    #[test]
    fn a_scratch_or_quarantined_record_goes_when_due_whatever_it_holds() {
        let store = MemoryStore::new();
        let (scr, qrn) = (scratch::key("abc"), quarantine::key("tsk_x"));
        block_on(store.put(&scr, None, "{not json", Some(100))).unwrap();
        block_on(store.put(&qrn, None, r#"{"tasks":{"a":9999}}"#, Some(100))).unwrap();
        assert!(is_key(&scr) && is_key(&qrn) && !is_key("tsk_abc"));
        assert_eq!(block_on(lapse(&store, &scr, 99)), Ok(Lapse::Untouched));
        assert_eq!(block_on(lapse(&store, &scr, 100)), Ok(Lapse::Deleted));
        assert_eq!(block_on(lapse(&store, &qrn, 100)), Ok(Lapse::Deleted));
        assert!(store.is_empty());
    }

    #[test]
    fn an_unreadable_record_is_kept_out_of_the_due_index() {
        let store = MemoryStore::new();
        let key = quota::key(&owner());
        block_on(store.put(&key, None, "{not json", Some(10))).unwrap();
        assert_eq!(block_on(lapse(&store, &key, 10)), Ok(Lapse::Unreadable));
        let entry = block_on(store.get(&key)).unwrap().unwrap();
        assert_eq!((entry.body.as_str(), entry.due_at), ("{not json", None));
        assert_eq!(block_on(store.due(i64::MAX, 10)), Ok(vec![]));
    }
}
