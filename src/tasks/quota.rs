//! Per-principal quotas on tasks, kept in one small record per owner and
//! updated with compare-and-swap when a task is created:
//!
//! - **unfinished tasks** (at most `max_outstanding`);
//! - **bytes stored** (at most `max_stored_bytes`): each task is charged its
//!   stored size, from creation until it expires, finished or not;
//! - **creation rate** (a token bucket of `max_per_minute`, refilled
//!   continuously).
//!
//! The record lists the owner's tasks not known to be finished, with their
//! expiry and charge. Finished tasks are found lazily, only when a limit
//! would refuse a create or the list is long (so a normal create costs one
//! read and one write of this record): that scan, at most once a second,
//! reads up to 100 listed tasks, in turn from one scan to the next, and
//! recharges each at its current stored size, results included. The
//! finished ones leave the record: their bytes stay charged as a sum per
//! expiry (at most [`MAX_CHARGED`] sums), and their ids move to a second
//! record, the owner's finished list (up to [`MAX_FINISHED`] of them, so
//! that [`listed`] can still name them), which only that scan writes. So
//! the record a create reads and rewrites holds the unfinished tasks alone,
//! however many have finished.
//!
//! A record that cannot be read is refused loudly, never reset.
//! With every limit off no record is kept and nothing is listed.
//!
//! Both records are written due when nothing in them is live any more (the
//! last listed task or charged sum expired, the creation bucket full
//! again), and the runner deletes them then (`tasks::idle`): an owner who
//! goes away leaves no record behind.

use serde::{Deserialize, Serialize};

use crate::sorted::SortedMap;

use super::{TaskError, store_failed};
use crate::crypto::{b64url, sha256};
use crate::owner::Owner;
use crate::store::{Store, StoreError};
use crate::time::Millis;

const ATTEMPTS: usize = 8;

/// Finished tasks kept listed per owner; beyond it the oldest are dropped
/// from the list (the tasks themselves stay readable, and charged, until
/// they expire).
pub const MAX_FINISHED: usize = 1_000;

/// The sums of finished tasks' bytes a record keeps, each with the expiry
/// until which it is charged; beyond it the two closest in expiry are
/// merged, charged until the later one.
pub const MAX_CHARGED: usize = 32;

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
    /// Task id -> expiry, for finished tasks not yet moved to the owner's
    /// finished list ([`Finished`]): what a rescan found, until the record
    /// is written, and what records written before that list existed hold.
    #[serde(default, skip_serializing_if = "SortedMap::is_empty")]
    finished: SortedMap<Millis>,
    /// Task id -> bytes charged (listed tasks only).
    #[serde(default, skip_serializing_if = "SortedMap::is_empty")]
    bytes: SortedMap<u64>,
    /// The creation-rate bucket: tokens left (thousandths) and when it was
    /// last filled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bucket: Option<(u64, Millis)>,
    /// Bytes of finished tasks no longer listed, charged until an expiry
    /// (records written before [`Outstanding::charged`] existed; folded
    /// into it when read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spilled: Option<(u64, Millis)>,
    /// Bytes of finished tasks, summed per expiry: `(expiry, bytes)`,
    /// earliest first, at most [`MAX_CHARGED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    charged: Vec<(Millis, u64)>,
    /// When the listed tasks were last read back ([`rescan`]): at most one
    /// rescan a second, however often a caller at its limit retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rescanned_at: Option<Millis>,
    /// The last task the previous rescan read: the next one starts after
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rescan_after: Option<String>,
}

/// An owner's finished tasks, for [`listed`]: written only when a rescan
/// finds tasks finished, never by a plain create.
#[derive(Default, Serialize, Deserialize)]
struct Finished {
    /// Task id -> expiry.
    tasks: SortedMap<Millis>,
}

/// The most tasks one rescan reads.
const MAX_RESCAN: usize = 100;

/// The least time between two rescans of one caller's tasks.
const RESCAN_EVERY_MS: Millis = 1_000;

/// Listed tasks beyond which a create is refused even with the
/// unfinished-task limit off, so the record stays small.
const MAX_LISTED: usize = 10_000;

/// Listed tasks from which a create rescans them (at most once a second)
/// whatever the limits.
const CROWDED: usize = 2 * MAX_RESCAN;

impl Outstanding {
    fn prune_expired(&mut self, now: Millis) {
        self.tasks.retain(|_, exp| *exp > now);
        self.finished.retain(|_, exp| *exp > now);
        if let Some((bytes, until)) = self.spilled.take() {
            self.charge_finished(until, bytes);
        }
        self.charged.retain(|(exp, _)| *exp > now);
        let (tasks, finished) = (&self.tasks, &self.finished);
        self.bytes
            .retain(|id, _| tasks.contains_key(id) || finished.contains_key(id));
    }

    /// When nothing in the record is live: every task listed and every sum
    /// charged has expired, and the creation bucket (refilled at
    /// `per_minute`; 0 when it is not known) is full again.
    fn idle_at(&self, per_minute: u32) -> Millis {
        let mut last = Millis::MIN;
        for exp in self.tasks.values().chain(self.finished.values()) {
            last = last.max(*exp);
        }
        for (exp, _) in &self.charged {
            last = last.max(*exp);
        }
        if let Some((_, exp)) = self.spilled {
            last = last.max(exp);
        }
        if let (Some((tokens, at)), 1..) = (self.bucket, per_minute) {
            let missing = (u64::from(per_minute) * 1_000).saturating_sub(tokens);
            let ms = missing.saturating_mul(60).div_ceil(u64::from(per_minute));
            last = last.max(at.saturating_add(Millis::try_from(ms).unwrap_or(Millis::MAX)));
        }
        last
    }

    fn stored_bytes(&self) -> u64 {
        let charged = self.charged.iter().map(|(_, b)| *b).sum::<u64>();
        self.bytes.values().sum::<u64>().saturating_add(charged)
    }

    /// Charges `bytes` of finished tasks until `expires_at`, in at most
    /// [`MAX_CHARGED`] sums: never less, and never for shorter.
    fn charge_finished(&mut self, expires_at: Millis, bytes: u64) {
        let at = self.charged.partition_point(|(exp, _)| *exp < expires_at);
        match self.charged.get_mut(at) {
            Some((exp, sum)) if *exp == expires_at => *sum = sum.saturating_add(bytes),
            _ => self.charged.insert(at, (expires_at, bytes)),
        }
        while self.charged.len() > MAX_CHARGED {
            // The two neighbours closest in expiry become one sum, charged
            // until the later of them.
            let closest = (1..self.charged.len()).min_by_key(|&i| {
                let (a, b) = (self.charged.get(i - 1), self.charged.get(i));
                a.zip(b)
                    .map_or(Millis::MAX, |((ea, _), (eb, _))| eb.saturating_sub(*ea))
            });
            let Some(i) = closest else { break };
            let (_, earlier) = self.charged.remove(i - 1);
            if let Some((_, sum)) = self.charged.get_mut(i - 1) {
                *sum = sum.saturating_add(earlier);
            }
        }
    }

    /// Takes the finished tasks out of the record (once they are on the
    /// finished list): their bytes stay charged until they expire.
    fn unlist_finished(&mut self) {
        let finished = std::mem::take(&mut self.finished);
        for (id, exp) in finished.iter() {
            let bytes = self.bytes.remove(id).unwrap_or(0);
            self.charge_finished(*exp, bytes);
        }
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
        // The bucket's time never goes back: a request whose clock is
        // behind (another replica's, or one read before a slow body)
        // would otherwise have the time between counted twice.
        let stamp = now.max(at);
        if tokens < 1_000 {
            self.bucket = Some((tokens, stamp));
            let missing = 1_000 - tokens;
            return Err((missing * 60).div_ceil(u64::from(per_minute)).max(1));
        }
        self.bucket = Some((tokens - 1_000, stamp));
        Ok(())
    }
}

impl Finished {
    /// When the last listed task expires.
    fn idle_at(&self) -> Millis {
        self.tasks.values().copied().max().unwrap_or(Millis::MIN)
    }
}

/// Whether `key` names a quota record or a finished list.
pub fn is_key(key: &str) -> bool {
    key.starts_with(PREFIX)
}

/// When the quota record or finished list under `key` holds nothing live
/// (the creation bucket aside: the record was written due no earlier than
/// it is full), or `None` when `body` cannot be decoded.
pub(super) fn idle_at(key: &str, body: &str) -> Option<Millis> {
    if key.len() == FINISHED_KEY_LEN && key.ends_with(FINISHED_SUFFIX) {
        crate::json::from_str::<Finished>(body)
            .ok()
            .map(|f| f.idle_at())
    } else {
        crate::json::from_str::<Outstanding>(body)
            .ok()
            .map(|o| o.idle_at(0))
    }
}

fn decode<T: serde::de::DeserializeOwned>(key: &str, body: &str) -> Result<T, TaskError> {
    crate::json::from_str::<T>(body).map_err(|_| TaskError::QuotaUnreadable(key.to_owned()))
}

/// The ids of `owner`'s tasks that have not expired at `now`, with their
/// expiry: unfinished ones and (up to [`MAX_FINISHED`]) finished ones, each
/// once. Two reads (the record and the finished list). The list may name a
/// task that has since been purged; readers check each task.
pub async fn listed<S: Store>(
    store: &S,
    owner: &Owner,
    now: Millis,
) -> Result<Vec<(String, Millis)>, TaskError> {
    let key = key(owner);
    let Some(entry) = store.get(&key).await.map_err(store_failed)? else {
        return Ok(Vec::new());
    };
    let list: Outstanding = decode(&key, &entry.body)?;
    let done_key = finished_key(owner);
    let done: Finished = match store.get(&done_key).await.map_err(store_failed)? {
        Some(e) => decode(&done_key, &e.body)?,
        None => Finished::default(),
    };
    // A task may be named twice while it moves to the finished list.
    let mut all = done.tasks;
    for (id, exp) in list.tasks.into_iter().chain(list.finished) {
        all.insert(id, exp);
    }
    Ok(all.into_iter().filter(|(_, exp)| *exp > now).collect())
}

/// The bytes of an owner's SHA-256 a key carries.
const DIGEST_BYTES: usize = 18;

fn digest(owner: &Owner) -> String {
    let digest = sha256(format!("{}\u{0}{}", owner.tenant, owner.principal).as_bytes());
    b64url(&digest[..DIGEST_BYTES])
}

const PREFIX: &str = "own_";
const FINISHED_SUFFIX: &str = "_done";
/// The prefix, the digest in unpadded base64url, the suffix.
const FINISHED_KEY_LEN: usize = PREFIX.len() + DIGEST_BYTES * 4 / 3 + FINISHED_SUFFIX.len();

/// The store key of `owner`'s quota record. It never looks like a task id.
pub fn key(owner: &Owner) -> String {
    format!("{PREFIX}{}", digest(owner))
}

/// The store key of `owner`'s finished list. It never looks like a task
/// id.
pub fn finished_key(owner: &Owner) -> String {
    format!("{PREFIX}{}{FINISHED_SUFFIX}", digest(owner))
}

/// The task a create would add: its id, expiry and stored size.
#[derive(Clone, Copy, Debug)]
pub struct Charge<'a> {
    pub task_id: &'a str,
    pub expires_at: Millis,
    pub bytes: u64,
}

/// What [`reserve`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reserved {
    /// The task is now charged (undo with [`release`] if it is not
    /// created after all).
    Charged,
    /// Nothing to charge: every limit is off, or the task is charged
    /// already (a replayed create).
    Nothing,
}

/// Counts a new task against `owner`'s quota, or refuses with
/// [`TaskError::QuotaExceeded`] (-32602, HTTP 429).
pub async fn reserve<S: Store>(
    store: &S,
    owner: &Owner,
    charge: Charge<'_>,
    now: Millis,
    quota: Quota,
) -> Result<Reserved, TaskError> {
    if quota.is_off() {
        return Ok(Reserved::Nothing);
    }
    let key = key(owner);
    let id = charge.task_id;
    for _ in 0..ATTEMPTS {
        let current = store.get(&key).await.map_err(store_failed)?;
        let (version, mut list) = match &current {
            Some(e) => (Some(e.version), decode::<Outstanding>(&key, &e.body)?),
            None => (None, Outstanding::default()),
        };
        list.prune_expired(now);
        // A retried create of the same task (a replayed round) is not
        // charged twice.
        if list.tasks.contains_key(id) || list.finished.contains_key(id) {
            return Ok(Reserved::Nothing);
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
        // A long list is rescanned too (at the same pace), before any limit
        // is near, so that it does not grow with tasks long finished when
        // the unfinished-task limit is off or high.
        if full(&list) || list.tasks.len() >= CROWDED {
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
                    settle(store, owner, &mut list, now).await?;
                    let body = serde_json::to_string(&list).map_err(|_| TaskError::Encoding)?;
                    let idle = list.idle_at(quota.max_per_minute);
                    match store.put(&key, version, &body, Some(idle)).await {
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
        settle(store, owner, &mut list, now).await?;
        let body = serde_json::to_string(&list).map_err(|_| TaskError::Encoding)?;
        let idle = list.idle_at(quota.max_per_minute);
        match store.put(&key, version, &body, Some(idle)).await {
            Ok(_) => return Ok(Reserved::Charged),
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(store_failed(e)),
        }
    }
    Err(TaskError::QuotaBusy)
}

/// Undoes a [`Reserved::Charged`] for a task that was not created (its id
/// was taken): the task leaves the record, and its bytes are no longer
/// charged.
pub async fn release<S: Store>(store: &S, owner: &Owner, task_id: &str) -> Result<(), TaskError> {
    let key = key(owner);
    for _ in 0..ATTEMPTS {
        let Some(entry) = store.get(&key).await.map_err(store_failed)? else {
            return Ok(());
        };
        let mut list: Outstanding = decode(&key, &entry.body)?;
        if list.tasks.remove(task_id).is_none() {
            return Ok(());
        }
        list.bytes.remove(task_id);
        let body = serde_json::to_string(&list).map_err(|_| TaskError::Encoding)?;
        // The bucket's refill is not known here: the record stays due no
        // earlier than it was.
        let idle = list.idle_at(0).max(entry.due_at.unwrap_or(Millis::MIN));
        match store
            .put(&key, Some(entry.version), &body, Some(idle))
            .await
        {
            Ok(_) => return Ok(()),
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(store_failed(e)),
        }
    }
    Err(TaskError::QuotaBusy)
}

/// Moves the finished tasks `list` holds to the owner's finished list,
/// before `list` is written without them (if that write loses a race, the
/// next rescan finds them again, and the finished list names each once).
async fn settle<S: Store>(
    store: &S,
    owner: &Owner,
    list: &mut Outstanding,
    now: Millis,
) -> Result<(), TaskError> {
    if list.finished.is_empty() {
        return Ok(());
    }
    let key = finished_key(owner);
    for _ in 0..ATTEMPTS {
        let current = store.get(&key).await.map_err(store_failed)?;
        let (version, mut done) = match &current {
            Some(e) => (Some(e.version), decode::<Finished>(&key, &e.body)?),
            None => (None, Finished::default()),
        };
        done.tasks.retain(|_, exp| *exp > now);
        for (id, exp) in list.finished.iter() {
            done.tasks.insert(id.clone(), *exp);
        }
        if done.tasks.len() > MAX_FINISHED {
            // The earliest to expire leave the list first. (A sort: with
            // `select_nth_unstable` in its place the Worker's wasm was
            // 615 B larger gzipped.)
            let mut by_expiry: Vec<(Millis, &String)> =
                done.tasks.iter().map(|(id, exp)| (*exp, id)).collect();
            by_expiry.sort_unstable();
            let dropped: Vec<String> = by_expiry
                .iter()
                .take(done.tasks.len() - MAX_FINISHED)
                .map(|(_, id)| (*id).clone())
                .collect();
            for id in dropped {
                done.tasks.remove(&id);
            }
        }
        let body = serde_json::to_string(&done).map_err(|_| TaskError::Encoding)?;
        match store.put(&key, version, &body, Some(done.idle_at())).await {
            Ok(_) => {
                list.unlist_finished();
                return Ok(());
            }
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(store_failed(e)),
        }
    }
    Err(TaskError::QuotaBusy)
}

/// How long after a task id was made a rescan that finds no task under it
/// takes it for a create still under way rather than one that failed.
const CREATE_GRACE_MS: u64 = 10_000;

/// Reads up to [`MAX_RESCAN`] of the tasks listed as unfinished, taking
/// them in turn from one rescan to the next: finished ones move to the
/// finished list (their size no longer changes, so they are not read
/// again), purged ones leave the record, and each is charged its current
/// stored size.
async fn rescan<S: Store>(
    store: &S,
    owner: &Owner,
    list: &mut Outstanding,
    now: Millis,
) -> Result<(), TaskError> {
    // In turn: the listed tasks after the last one the previous rescan
    // read, then from the first, so every one is read however many are
    // listed (a long-running task never hides the ones after it).
    let keys: Vec<&String> = list.tasks.keys().collect();
    let start = list
        .rescan_after
        .as_deref()
        .map_or(0, |after| keys.partition_point(|k| k.as_str() <= after));
    let ids: Vec<String> = (0..keys.len().min(MAX_RESCAN))
        .filter_map(|i| keys.get((start + i) % keys.len()).map(|k| (*k).clone()))
        .collect();
    list.rescan_after = ids.last().cloned();
    for id in ids {
        let Some(entry) = store.get(&id).await.map_err(store_failed)? else {
            // A create charges its task before it writes it: a task made in
            // the last few seconds may be on its way, not gone, and stays
            // listed until a later rescan.
            if crate::ids::minted_at(&id).is_some_and(|t| t.abs_diff(now) <= CREATE_GRACE_MS) {
                continue;
            }
            list.tasks.remove(&id);
            list.finished.remove(&id);
            list.bytes.remove(&id);
            continue;
        };
        // An unreadable task still takes its space, and is not unfinished
        // work of the caller's.
        let unfinished = super::unfinished_for(&entry.body, owner, now);
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

    /// A request whose clock is behind the bucket's refills nothing and
    /// does not move the bucket's time back, so the time between is not
    /// counted a second time.
    #[test]
    fn a_clock_behind_the_bucket_refills_nothing_twice() {
        let mut o = Outstanding::default();
        for _ in 0..10 {
            assert_eq!(o.take_token(10, 60_000), Ok(()));
        }
        assert!(o.take_token(10, 60_000).is_err());
        assert!(o.take_token(10, 0).is_err(), "60 s behind: still empty");
        assert!(o.take_token(10, 60_000).is_err(), "and still empty now");
        // One token comes back 6 s after the bucket's own time.
        assert_eq!(o.take_token(10, 66_000), Ok(()));
    }

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

    /// What `charged` charges at `t`: the sums whose expiry is after `t`.
    fn charged_at(o: &Outstanding, t: Millis) -> u64 {
        o.charged
            .iter()
            .filter(|(exp, _)| *exp > t)
            .map(|(_, b)| b)
            .sum()
    }

    proptest::proptest! {
        /// However many finished tasks are summed, the sums are at most
        /// MAX_CHARGED, add up to every task's bytes, and charge no less
        /// than each task until it expires.
        #[test]
        fn finished_bytes_are_summed_never_under_charged(
            tasks in proptest::collection::vec((0i64..100_000, 0u64..10_000), 0..300),
        ) {
            let mut o = Outstanding::default();
            for (exp, bytes) in &tasks {
                o.charge_finished(*exp, *bytes);
            }
            proptest::prop_assert!(o.charged.len() <= MAX_CHARGED);
            proptest::prop_assert!(o.charged.windows(2).all(|w| w[0].0 < w[1].0));
            let total: u64 = tasks.iter().map(|(_, b)| b).sum();
            proptest::prop_assert_eq!(o.stored_bytes(), total);
            for (t, _) in &tasks {
                let owed: u64 = tasks.iter().filter(|(e, _)| e > t).map(|(_, b)| b).sum();
                proptest::prop_assert!(charged_at(&o, *t) >= owed);
            }
            // Once the last of them has expired, nothing is charged.
            let last = tasks.iter().map(|(e, _)| *e).max().unwrap_or(0);
            o.prune_expired(last);
            proptest::prop_assert_eq!(o.stored_bytes(), 0);
        }
    }

    #[test]
    fn a_record_from_before_the_finished_list_keeps_its_charges() {
        // The old layout: finished tasks listed in the record, and the
        // bytes of those dropped from it in one sum.
        let old = r#"{"tasks":{"tsk_a":5000},"finished":{"tsk_b":3000,"tsk_c":4000},"bytes":{"tsk_a":10,"tsk_b":20,"tsk_c":30},"spilled":[40,2000]}"#;
        let mut o: Outstanding = decode("own_x", old).unwrap();
        o.prune_expired(0);
        assert_eq!(o.stored_bytes(), 100);
        o.unlist_finished();
        assert!(o.finished.is_empty());
        assert_eq!(o.bytes.len(), 1, "only the unfinished task is listed");
        assert_eq!(o.stored_bytes(), 100, "every byte still charged");
        assert_eq!((charged_at(&o, 2_000), charged_at(&o, 3_000)), (50, 30));
        o.prune_expired(4_000);
        assert_eq!(o.stored_bytes(), 10);
        let new = serde_json::to_string(&o).unwrap();
        assert!(
            !new.contains("finished") && !new.contains("spilled"),
            "{new}"
        );
    }

    #[test]
    fn a_record_is_idle_once_its_last_charge_expired_and_its_bucket_is_full() {
        let mut o = Outstanding::default();
        assert_eq!(o.idle_at(2), Millis::MIN, "empty");
        o.tasks.insert("tsk_a".into(), 5_000);
        o.charge_finished(7_000, 10);
        assert_eq!(o.idle_at(0), 7_000);
        // Two creates a minute, both taken at 1,000: full again at 61,000.
        assert_eq!(o.take_token(2, 1_000), Ok(()));
        assert_eq!(o.take_token(2, 1_000), Ok(()));
        assert_eq!(o.idle_at(2), 61_000);
        assert_eq!(o.idle_at(0), 7_000, "the refill rate not known");
        let key = key(&Owner {
            tenant: "t".into(),
            principal: "p".into(),
        });
        let body = serde_json::to_string(&o).unwrap();
        assert_eq!(idle_at(&key, &body), Some(7_000));
        let done = r#"{"tasks":{"tsk_a":3000,"tsk_b":4000}}"#;
        assert_eq!(idle_at(&format!("{key}_done"), done), Some(4_000));
        assert_eq!(idle_at(&key, "{not json"), None);
    }

    /// A rescan running between another create's charge and its write
    /// finds no task under the charged id: a task made seconds ago stays
    /// charged (it was being dropped, and once written, was never counted),
    /// one made longer ago is taken as a create that failed.
    #[test]
    fn a_rescan_keeps_the_charge_of_a_task_still_being_created() {
        use crate::block_on;
        use crate::ids::{SequentialIds, new_task_id};
        use crate::owner::Owner;
        use crate::store::MemoryStore;
        let store = MemoryStore::new();
        let owner = Owner {
            tenant: "t".into(),
            principal: "p".into(),
        };
        let t0 = 1_800_000_000_000;
        let ids = SequentialIds::starting_at(1);
        let fresh = new_task_id(&ids, 0, t0).unwrap();
        let placed = new_task_id(&ids, 16, t0).unwrap();
        assert_eq!(crate::ids::minted_at(&fresh), Some(t0));
        assert_eq!(crate::ids::minted_at(&placed), Some(t0));
        let mut list = Outstanding::default();
        for id in [&fresh, &placed] {
            list.tasks.insert(id.clone(), t0 + 3_600_000);
            list.bytes.insert(id.clone(), 100);
        }
        block_on(rescan(&store, &owner, &mut list, t0 + 500)).unwrap();
        assert_eq!(list.tasks.len(), 2, "still being created");
        assert_eq!(list.bytes.len(), 2);
        block_on(rescan(&store, &owner, &mut list, t0 + 11_000)).unwrap();
        assert!(list.tasks.is_empty(), "a create that failed");
        assert!(list.bytes.is_empty());
    }

    /// Past [`MAX_FINISHED`], the finished list keeps the tasks that expire
    /// last, whatever order they arrive in.
    #[test]
    fn a_full_finished_list_drops_the_earliest_to_expire() {
        use crate::block_on;
        use crate::owner::Owner;
        use crate::store::MemoryStore;
        let store = MemoryStore::new();
        let owner = Owner {
            tenant: "t".into(),
            principal: "p".into(),
        };
        // Listed out of expiry order: ids and expiries do not sort alike.
        let mut old = Finished::default();
        for i in 0..MAX_FINISHED as i64 {
            old.tasks
                .insert(format!("old-{i:04}"), 20_000 + (i * 7919) % 5_000);
        }
        let body = serde_json::to_string(&old).unwrap();
        block_on(store.put(&finished_key(&owner), None, &body, None)).unwrap();
        let mut list = Outstanding::default();
        // Two expire before every listed one, one after.
        for (id, exp) in [("new-a", 19_000), ("new-b", 30_000), ("new-c", 19_500)] {
            list.finished.insert(id.to_owned(), exp);
        }
        block_on(settle(&store, &owner, &mut list, 0)).unwrap();
        let stored = block_on(store.get(&finished_key(&owner))).unwrap().unwrap();
        let done: Finished = decode(&finished_key(&owner), &stored.body).unwrap();
        assert!(!done.tasks.contains_key("new-a") && !done.tasks.contains_key("new-c"));
        assert!(done.tasks.contains_key("new-b"));
        // The one listed task that expires first (i = 0, at 20,000) goes
        // too: what stays is exactly the MAX_FINISHED latest of all.
        assert!(!done.tasks.contains_key("old-0000"));
        let mut all: Vec<(Millis, String)> = old
            .tasks
            .iter()
            .map(|(id, exp)| (*exp, id.clone()))
            .chain([(30_000, "new-b".to_owned())])
            .collect();
        all.sort_unstable();
        let mut kept: Vec<(Millis, String)> = done
            .tasks
            .iter()
            .map(|(id, exp)| (*exp, id.clone()))
            .collect();
        kept.sort_unstable();
        assert_eq!(kept, all[all.len() - MAX_FINISHED..]);
        assert!(list.finished.is_empty(), "moved out of the quota record");
    }

    #[test]
    fn a_corrupt_record_is_refused_not_reset() {
        assert!(matches!(
            decode::<Outstanding>("own_x", "{not json"),
            Err(TaskError::QuotaUnreadable(k)) if k == "own_x"
        ));
    }
}
