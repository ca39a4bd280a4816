//! Per-principal quotas on tasks, kept in one small record per owner and
//! updated with compare-and-swap when a task is created:
//!
//! - **unfinished tasks** (at most `max_outstanding`);
//! - **bytes stored** (at most `max_stored_bytes`): each task is charged its
//!   stored size, from creation until it expires, finished or not;
//! - **creation rate** (a token bucket of `max_per_minute`, refilled
//!   continuously).
//!
//! The record lists the owner's tasks with their expiry and charge. Finished
//! tasks are found lazily, only when a limit would refuse a create (so a
//! normal create costs one read and one write of this record); that scan
//! reads each listed task, moves finished ones to a second list (no longer
//! counted as unfinished, still charged until they expire; up to
//! [`MAX_FINISHED`] of them, so that [`listed`] can still name them) and
//! recharges each task at its current stored size, results included.
//! A record that cannot be read is refused loudly, never reset.
//! With every limit off no record is kept and nothing is listed.

use serde::{Deserialize, Serialize};

use crate::sorted::SortedMap;

use super::{TaskError, decode as decode_task, store_failed};
use crate::crypto::{b64url, sha256};
use crate::owner::Owner;
use crate::store::{Store, StoreError};
use crate::time::Millis;

const ATTEMPTS: usize = 8;

/// Finished tasks kept listed per owner; beyond it the oldest are dropped
/// from the list (the tasks themselves stay readable until they expire).
pub const MAX_FINISHED: usize = 1_000;

/// The limits [`reserve`] enforces; 0 turns a limit off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota {
    pub max_outstanding: usize,
    pub max_stored_bytes: u64,
    pub max_per_minute: u32,
}

impl Quota {
    fn is_off(&self) -> bool {
        self.max_outstanding == 0 && self.max_stored_bytes == 0 && self.max_per_minute == 0
    }
}

/// Which limit refused a create.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exceeded {
    /// `max` unfinished tasks already.
    Tasks { max: usize },
    /// The bytes stored for the caller's tasks would pass `max`.
    Bytes { max: u64 },
    /// More than `per_minute` creates; the next is allowed in `retry_ms`.
    Rate { per_minute: u32, retry_ms: u64 },
    /// `max` listen streams open already.
    Streams { max: usize },
}

#[derive(Default, Serialize, Deserialize)]
struct Outstanding {
    /// Task id -> expiry, for tasks not known to be finished.
    tasks: SortedMap<Millis>,
    /// Task id -> expiry, for finished tasks (not counted as unfinished).
    #[serde(default, skip_serializing_if = "SortedMap::is_empty")]
    finished: SortedMap<Millis>,
    /// Task id -> bytes charged (listed tasks only).
    #[serde(default, skip_serializing_if = "SortedMap::is_empty")]
    bytes: SortedMap<u64>,
    /// The creation-rate bucket: tokens left (thousandths) and when it was
    /// last filled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bucket: Option<(u64, Millis)>,
    /// Bytes of finished tasks dropped from the list (beyond
    /// [`MAX_FINISHED`]), still charged until the latest of them expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spilled: Option<(u64, Millis)>,
    /// When the listed tasks were last read back ([`rescan`]): at most one
    /// rescan a second, however often a caller at its limit retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rescanned_at: Option<Millis>,
}

/// The most tasks one rescan reads.
const MAX_RESCAN: usize = 100;

/// The least time between two rescans of one caller's tasks.
const RESCAN_EVERY_MS: Millis = 1_000;

/// Listed tasks beyond which a create is refused even with the
/// unfinished-task limit off, so the record stays small.
const MAX_LISTED: usize = 10_000;

impl Outstanding {
    fn prune_expired(&mut self, now: Millis) {
        self.tasks.retain(|_, exp| *exp > now);
        self.finished.retain(|_, exp| *exp > now);
        if self.spilled.is_some_and(|(_, until)| until <= now) {
            self.spilled = None;
        }
        while self.finished.len() > MAX_FINISHED {
            let oldest = self
                .finished
                .iter()
                .min_by_key(|(id, exp)| (**exp, (*id).clone()))
                .map(|(id, exp)| (id.clone(), *exp));
            let Some((id, exp)) = oldest else {
                break;
            };
            self.finished.remove(&id);
            // Its bytes stay charged until it expires.
            let bytes = self.bytes.remove(&id).unwrap_or(0);
            let (total, until) = self.spilled.unwrap_or((0, exp));
            self.spilled = Some((total.saturating_add(bytes), until.max(exp)));
        }
        let (tasks, finished) = (&self.tasks, &self.finished);
        self.bytes
            .retain(|id, _| tasks.contains_key(id) || finished.contains_key(id));
    }

    fn stored_bytes(&self) -> u64 {
        let spilled = self.spilled.map_or(0, |(b, _)| b);
        self.bytes.values().sum::<u64>().saturating_add(spilled)
    }

    /// Takes one token from the creation bucket, or says when one will be
    /// there.
    fn take_token(&mut self, per_minute: u32, now: Millis) -> Result<(), u64> {
        if per_minute == 0 {
            return Ok(());
        }
        let full = u64::from(per_minute) * 1_000;
        let (tokens, at) = self.bucket.unwrap_or((full, now));
        let elapsed = u64::try_from(now.saturating_sub(at)).unwrap_or(0);
        // per_minute tokens per 60,000 ms, in thousandths of a token.
        let refill = elapsed.saturating_mul(u64::from(per_minute)) / 60;
        let tokens = tokens.saturating_add(refill).min(full);
        if tokens < 1_000 {
            self.bucket = Some((tokens, now));
            let missing = 1_000 - tokens;
            return Err((missing * 60).div_ceil(u64::from(per_minute)).max(1));
        }
        self.bucket = Some((tokens - 1_000, now));
        Ok(())
    }
}

fn decode(key: &str, body: &str) -> Result<Outstanding, TaskError> {
    crate::json::from_str::<Outstanding>(body)
        .map_err(|_| TaskError::QuotaUnreadable(key.to_owned()))
}

/// The ids of `owner`'s tasks that have not expired at `now`, with their
/// expiry: unfinished ones and (up to [`MAX_FINISHED`]) finished ones. One
/// read. The list may name a task that has since been purged; readers check
/// each task.
pub async fn listed<S: Store>(
    store: &S,
    owner: &Owner,
    now: Millis,
) -> Result<Vec<(String, Millis)>, TaskError> {
    let key = key(owner);
    let Some(entry) = store.get(&key).await.map_err(store_failed)? else {
        return Ok(Vec::new());
    };
    let list = decode(&key, &entry.body)?;
    Ok(list
        .tasks
        .into_iter()
        .chain(list.finished)
        .filter(|(_, exp)| *exp > now)
        .collect())
}

/// The store key of `owner`'s quota record. It never looks like a task id.
pub fn key(owner: &Owner) -> String {
    let digest = sha256(format!("{}\u{0}{}", owner.tenant, owner.principal).as_bytes());
    format!("own_{}", b64url(&digest[..18]))
}

/// The task a create would add: its id, expiry and stored size.
#[derive(Clone, Copy, Debug)]
pub struct Charge<'a> {
    pub task_id: &'a str,
    pub expires_at: Millis,
    pub bytes: u64,
}

/// Counts a new task against `owner`'s quota, or refuses with
/// [`TaskError::QuotaExceeded`] (-32602, HTTP 429).
pub async fn reserve<S: Store>(
    store: &S,
    owner: &Owner,
    charge: Charge<'_>,
    now: Millis,
    quota: Quota,
) -> Result<(), TaskError> {
    if quota.is_off() {
        return Ok(());
    }
    let key = key(owner);
    let id = charge.task_id;
    for _ in 0..ATTEMPTS {
        let current = store.get(&key).await.map_err(store_failed)?;
        let (version, mut list) = match &current {
            Some(e) => (Some(e.version), decode(&key, &e.body)?),
            None => (None, Outstanding::default()),
        };
        list.prune_expired(now);
        // A retried create of the same task (a replayed round) is not
        // charged twice.
        if list.tasks.contains_key(id) || list.finished.contains_key(id) {
            return Ok(());
        }
        let full = |l: &Outstanding| {
            (quota.max_outstanding > 0 && l.tasks.len() >= quota.max_outstanding)
                || l.tasks.len() >= MAX_LISTED
                || (quota.max_stored_bytes > 0
                    && l.stored_bytes().saturating_add(charge.bytes) > quota.max_stored_bytes)
        };
        let refusal = |l: &Outstanding| {
            if quota.max_outstanding > 0 && l.tasks.len() >= quota.max_outstanding {
                Some(Exceeded::Tasks {
                    max: quota.max_outstanding,
                })
            } else if l.tasks.len() >= MAX_LISTED {
                Some(Exceeded::Tasks { max: MAX_LISTED })
            } else if full(l) {
                Some(Exceeded::Bytes {
                    max: quota.max_stored_bytes,
                })
            } else {
                None
            }
        };
        if full(&list) {
            let due = list
                .rescanned_at
                .is_none_or(|at| now.saturating_sub(at) >= RESCAN_EVERY_MS);
            if due {
                rescan(store, owner, &mut list, now).await?;
                list.rescanned_at = Some(now);
            }
            if let Some(exceeded) = refusal(&list) {
                // Keep what the rescan learnt (and when it ran), so a caller
                // retrying at its limit does not make it read again at once.
                if due {
                    let body = serde_json::to_string(&list).map_err(|_| TaskError::Encoding)?;
                    match store.put(&key, version, &body, None).await {
                        Ok(_) | Err(StoreError::Conflict { .. }) => {}
                        Err(e) => return Err(store_failed(e)),
                    }
                }
                return Err(TaskError::QuotaExceeded(exceeded));
            }
        }
        if let Err(retry_ms) = list.take_token(quota.max_per_minute, now) {
            return Err(TaskError::QuotaExceeded(Exceeded::Rate {
                per_minute: quota.max_per_minute,
                retry_ms,
            }));
        }
        list.tasks.insert(id.to_owned(), charge.expires_at);
        list.bytes.insert(id.to_owned(), charge.bytes);
        let body = serde_json::to_string(&list).map_err(|_| TaskError::Encoding)?;
        match store.put(&key, version, &body, None).await {
            Ok(_) => return Ok(()),
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(store_failed(e)),
        }
    }
    Err(TaskError::QuotaBusy)
}

/// Reads (up to [`MAX_RESCAN`] of) the tasks listed as unfinished:
/// finished ones move to the finished list (their size no longer changes,
/// so they are not read again), purged ones leave the record, and each is
/// charged its current stored size.
async fn rescan<S: Store>(
    store: &S,
    owner: &Owner,
    list: &mut Outstanding,
    now: Millis,
) -> Result<(), TaskError> {
    let ids: Vec<String> = list.tasks.keys().take(MAX_RESCAN).cloned().collect();
    for id in ids {
        let Some(entry) = store.get(&id).await.map_err(store_failed)? else {
            list.tasks.remove(&id);
            list.finished.remove(&id);
            list.bytes.remove(&id);
            continue;
        };
        // An unreadable task still takes its space, and is not unfinished
        // work of the caller's.
        let unfinished = decode_task(&entry.body)
            .is_ok_and(|r| r.visible_to(owner, now) && !r.status().is_terminal());
        list.bytes.insert(id.clone(), entry.body.len() as u64);
        if !unfinished && let Some(exp) = list.tasks.remove(&id) {
            list.finished.insert(id, exp);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_refills_continuously() {
        let mut o = Outstanding::default();
        for _ in 0..3 {
            assert_eq!(o.take_token(3, 0), Ok(()));
        }
        // Empty: one token comes back every 20 s.
        assert_eq!(o.take_token(3, 0), Err(20_000));
        assert_eq!(o.take_token(3, 10_000), Err(10_000));
        assert_eq!(o.take_token(3, 20_000), Ok(()));
        assert!(o.take_token(3, 20_001).is_err());
        // A long pause refills to the burst, no more.
        for _ in 0..3 {
            assert_eq!(o.take_token(3, 10_000_000), Ok(()));
        }
        assert!(o.take_token(3, 10_000_000).is_err());
        assert_eq!(o.take_token(0, 0), Ok(()), "off");
    }

    #[test]
    fn finished_tasks_dropped_from_the_list_stay_charged_until_they_expire() {
        let mut o = Outstanding::default();
        for i in 0..MAX_FINISHED + 50 {
            let id = format!("t{i:05}");
            o.finished.insert(id.clone(), 1_000 + i as Millis);
            o.bytes.insert(id, 10);
        }
        let before = o.stored_bytes();
        o.prune_expired(0);
        assert_eq!(o.finished.len(), MAX_FINISHED);
        assert_eq!(
            o.stored_bytes(),
            before,
            "the dropped ones are still charged"
        );
        // Once the latest of the dropped ones has expired, so has its charge.
        o.prune_expired(1_000 + 48);
        assert!(o.spilled.is_some());
        o.prune_expired(1_000 + 49);
        assert_eq!(o.spilled, None);
    }

    #[test]
    fn a_corrupt_record_is_refused_not_reset() {
        assert!(matches!(
            decode("own_x", "{not json"),
            Err(TaskError::QuotaUnreadable(k)) if k == "own_x"
        ));
    }
}
