//! What travels between the Worker and the shard Durable Objects, how a task
//! id picks its shard, and the KV cache format. Pure code: it builds and is
//! tested on the host too.

use serde::{Deserialize, Serialize};

use crate::store::{Entry, StoreError, Version};
use crate::tasks::runner::TickReport;
use crate::time::Millis;

/// Shards when `MCP_TASK_SHARDS` is not set.
pub const DEFAULT_SHARDS: u32 = 16;
/// The most shards a deployment may configure. The cron sweep makes one
/// subrequest per shard (Workers Paid allows 1,000 per invocation; on
/// Workers Free, which allows 50, keep to 45 or fewer).
pub const MAX_SHARDS: u32 = 512;

/// The most shards new tasks may be placed over (`MCP_TASK_CAPACITY`): a
/// placement is two bytes of the task id.
pub const MAX_CAPACITY: u32 = 65_535;

/// Shards one cron run sweeps at most (`MCP_SWEEP_SHARDS` sets fewer):
/// whatever the capacity, the backstop stays within one invocation's
/// subrequest limit.
pub const DEFAULT_SWEEP_SHARDS: u32 = 32;

/// Where keys live: a task id placed by [`crate::ids::placed_task_id`] in
/// the shard it names; every other key (quota records, scratch records,
/// task ids minted before placement) in `shard_of(key, base)`. `base` is the
/// deployment's original shard count and never changes; `capacity` (the
/// shards new tasks are placed over) may grow at any time without moving a
/// task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub base: u32,
    pub capacity: u32,
}

impl Layout {
    /// The shard that owns `key`; `None` for a placed id naming a shard
    /// beyond every one this deployment uses (no task can live there, so
    /// no Durable Object is woken, or created, for it).
    pub fn shard_for(&self, key: &str) -> Option<u32> {
        match crate::ids::placement_of(key) {
            Some(p) if u32::from(p) < self.total() => Some(u32::from(p)),
            Some(_) => None,
            None => Some(shard_of(key, self.base)),
        }
    }

    /// Every shard that may hold a key.
    pub fn total(&self) -> u32 {
        self.base.max(self.capacity).max(1)
    }

    /// The shards the cron run of minute `minute` sweeps: `batch` of them,
    /// in turn, so every shard is swept once every `total / batch` minutes
    /// (every minute while the total fits in one batch).
    pub fn sweep_window(&self, minute: u64, batch: u32) -> Vec<u32> {
        let total = self.total();
        let batch = batch.clamp(1, total);
        let start = (minute.wrapping_mul(u64::from(batch)) % u64::from(total)) as u32;
        (0..batch).map(|i| (start + i) % total).collect()
    }
}

/// The shard that owns `key`: 64-bit FNV-1a of the key's bytes, modulo the
/// shard count. Stable across releases and platforms: it places every key
/// that is not a placed task id, over the deployment's original shard count
/// ([`Layout::base`]), which never changes.
pub fn shard_of(key: &str, shards: u32) -> u32 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let hash = key
        .bytes()
        .fold(OFFSET, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME));
    (hash % u64::from(shards.max(1))) as u32
}

/// The Durable Object name of shard `i`.
pub fn shard_name(i: u32) -> String {
    format!("shard-{i}")
}

/// One store operation (or a maintenance request) sent to a shard, as JSON
/// in the default external tagging (`{"get":{"key":"tsk_…"}}`, `"sweep"`):
/// it decodes without buffering, which keeps the bundle smaller.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Get {
        key: String,
    },
    Put {
        key: String,
        expected: Option<Version>,
        body: String,
        due_at: Option<Millis>,
    },
    Delete {
        key: String,
        expected: Version,
    },
    /// Keys due at `now`, with their due times (so the Worker can merge the
    /// answers of several shards in order).
    Due {
        now: Millis,
        limit: usize,
    },
    NextDue,
    /// The cron backstop: advance due work now and re-arm the alarm.
    Sweep,
    /// Test hooks: read or delete the shard's alarm.
    #[cfg(feature = "test-hooks")]
    AlarmGet,
    #[cfg(feature = "test-hooks")]
    AlarmDelete,
    /// Test hooks: the shard's version floor (what a key created now starts
    /// above).
    #[cfg(feature = "test-hooks")]
    Floor,
    /// Test hooks: one SQL statement run on the shard that owns `key`, to
    /// plant a fault (a trigger that refuses a write).
    #[cfg(feature = "test-hooks")]
    Exec {
        key: String,
        sql: String,
    },
}

impl Op {
    /// Whether the operation may change the shard's data.
    pub fn writes(&self) -> bool {
        matches!(self, Op::Put { .. } | Op::Delete { .. })
    }
}

/// What one sweep (alarm or cron) did: the runner's tick, and when the
/// shard's alarm fires next.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepReport {
    pub tick: TickReport,
    pub alarm_at: Option<Millis>,
}

/// A shard's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    Entry(Option<Entry>),
    Version(Version),
    Deleted,
    Due(Vec<(String, Millis)>),
    NextDue(Option<Millis>),
    Swept(SweepReport),
    Alarm(Option<Millis>),
    /// The compare-and-swap precondition failed.
    Conflict(Option<Version>),
    /// The shard could not do it; the text is for logs.
    Unavailable(String),
}

impl Reply {
    /// The store error a failed reply stands for.
    pub fn from_store_error(e: StoreError) -> Reply {
        match e {
            StoreError::Conflict { current } => Reply::Conflict(current),
            StoreError::Unavailable(m) => Reply::Unavailable(m),
        }
    }

    /// A reply that is not the expected kind becomes a store error.
    pub fn into_error(self, op: &str) -> StoreError {
        match self {
            Reply::Conflict(current) => StoreError::Conflict { current },
            Reply::Unavailable(m) => StoreError::Unavailable(format!("shard {op}: {m}")),
            other => StoreError::Unavailable(format!("shard {op}: unexpected reply {other:?}")),
        }
    }
}

/// The KV key of a cached task record.
pub fn cache_key(task_id: &str) -> String {
    format!("task:{task_id}")
}

/// KV refuses expirations less than 60 s ahead.
pub const KV_MIN_EXPIRATION_S: i64 = 60;

/// Whether `entry`, read from the Durable Object under `key`, may be cached:
/// only a stored task with that id in a terminal status (terminal
/// records never change again). Returns the KV value and its absolute
/// expiration in seconds since the epoch: the task's expiry, or the earliest
/// expiration KV accepts if that is sooner (the core treats an expired record
/// as absent, so a cached copy that outlives the task is never served).
pub fn cacheable(key: &str, entry: &Entry, now: Millis) -> Option<(String, u64)> {
    let expires_at = crate::tasks::finished_until(key, &entry.body)?;
    if now >= expires_at {
        return None;
    }
    let value = serde_json::to_string(entry).ok()?;
    let expires_s = expires_at.div_euclid(1000) + 1;
    let earliest_s = now.div_euclid(1000) + KV_MIN_EXPIRATION_S + 1;
    Some((value, expires_s.max(earliest_s).max(0) as u64))
}

/// Reads a cached value back; `None` if it is not one of ours.
pub fn from_cache(value: &str) -> Option<Entry> {
    crate::json::from_str(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::record::TaskRecord;
    use serde_json::json;

    #[test]
    fn placed_ids_stay_put_and_the_sweep_is_bounded() {
        let small = Layout {
            base: 4,
            capacity: 4,
        };
        let grown = Layout {
            base: 4,
            capacity: 40_000,
        };
        let placed = crate::ids::placed_task_id(&[9; 16], 3);
        let unplaced = "tsk_AAAAAAAAAAAAAAAAAAAAAQ";
        for key in [placed.as_str(), unplaced, "own_abc", "scr_xyz"] {
            assert_eq!(small.shard_for(key), grown.shard_for(key), "{key} moved");
        }
        // A crafted id naming a shard beyond the deployment's reaches none.
        assert_eq!(
            small.shard_for(&crate::ids::placed_task_id(&[0; 16], 4)),
            None
        );
        assert_eq!(
            grown.shard_for(&crate::ids::placed_task_id(&[0; 16], 40_000)),
            None
        );
        assert_eq!(
            grown.shard_for(&crate::ids::placed_task_id(&[0; 16], 39_999)),
            Some(39_999)
        );
        // Every run sweeps at most the batch; all shards are covered in
        // total / batch runs.
        let mut seen = vec![false; grown.total() as usize];
        let runs = grown.total().div_ceil(32) as u64;
        for minute in 0..runs {
            let w = grown.sweep_window(minute, 32);
            assert_eq!(w.len(), 32);
            for s in w {
                seen[s as usize] = true;
            }
        }
        assert!(seen.iter().all(|s| *s), "every shard swept in {runs} runs");
        // A small layout is swept whole every minute.
        let mut w = small.sweep_window(7, 32);
        w.sort();
        assert_eq!(w, [0, 1, 2, 3]);
    }

    #[test]
    fn shards_are_stable_and_spread() {
        // FNV-1a 64 reference values: changing the hash would strand tasks.
        assert_eq!(
            shard_of("", 1 << 31),
            (0xcbf2_9ce4_8422_2325u64 % (1 << 31)) as u32
        );
        assert_eq!(
            shard_of("a", 1 << 31),
            (0xaf63_dc4c_8601_ec8cu64 % (1 << 31)) as u32
        );
        assert_eq!(shard_of("anything", 1), 0);
        assert_eq!(
            shard_of("anything", 0),
            0,
            "a zero count cannot divide by zero"
        );
        let mut seen = [0u32; 16];
        for i in 0..1600 {
            seen[shard_of(&format!("tsk_{i:022}"), 16) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 50), "uneven spread: {seen:?}");
        assert_eq!(shard_name(3), "shard-3");
    }

    #[test]
    fn ops_and_replies_have_a_fixed_shape() {
        let op = Op::Put {
            key: "k".into(),
            expected: Some(2),
            body: "b".into(),
            due_at: None,
        };
        assert_eq!(
            serde_json::to_value(&op).unwrap(),
            json!({"put": {"key": "k", "expected": 2, "body": "b", "due_at": null}})
        );
        assert!(op.writes());
        assert!(!Op::NextDue.writes());
        let back: Op = serde_json::from_value(json!({"due": {"now": 5, "limit": 3}})).unwrap();
        assert_eq!(back, Op::Due { now: 5, limit: 3 });
        assert_eq!(serde_json::to_value(Op::Sweep).unwrap(), json!("sweep"));
        assert_eq!(
            serde_json::to_value(Reply::Conflict(None)).unwrap(),
            json!({"conflict": null})
        );
        assert_eq!(
            Reply::Conflict(Some(4)).into_error("put"),
            StoreError::Conflict { current: Some(4) }
        );
        assert!(matches!(
            Reply::Version(1).into_error("get"),
            StoreError::Unavailable(_)
        ));
    }

    fn record(status: &str, created_at: Millis) -> Entry {
        let phase = match status {
            "completed" => {
                json!({"status": "completed", "result": {"content": [], "resultType": "complete"}})
            }
            "working" => json!({"status": "working"}),
            _ => json!({"status": status}),
        };
        let body = json!({
            "id": "tsk_1",
            "owner": {"tenant": "t", "principal": "p"},
            "tool": "slow_compute",
            "arguments": {},
            "capabilities": {},
            "phase": phase,
            "status_message": null,
            "created_at": created_at,
            "last_updated_at": created_at,
            "ttl_ms": 3_600_000,
            "poll_interval_ms": 1000,
            "state": null,
            "wake_at": null,
            "cancel_requested": false,
            "lease": null,
            "steps": 1
        });
        let record: TaskRecord = serde_json::from_value(body).expect("fixture decodes");
        Entry {
            version: 3,
            body: crate::tasks::encode(&record, &json!({"name": "t"})).expect("encodes"),
            due_at: Some(created_at + 3_600_000),
        }
    }

    #[test]
    fn only_terminal_records_are_cached_until_they_expire() {
        let now = 1_800_000_000_000;
        let done = record("cancelled", now - 1_000);
        let (value, exp) = cacheable("tsk_1", &done, now).expect("terminal is cacheable");
        assert_eq!(exp, ((now - 1_000 + 3_600_000) / 1000 + 1) as u64);
        assert_eq!(from_cache(&value), Some(done.clone()));
        assert!(
            cacheable("tsk_2", &done, now).is_none(),
            "the id must match the key"
        );

        let working = record("working", now - 1_000);
        assert!(cacheable("tsk_1", &working, now).is_none());

        let nearly_expired = record("cancelled", now - 3_590_000);
        let (_, exp) = cacheable("tsk_1", &nearly_expired, now).unwrap();
        assert_eq!(
            exp as i64,
            now / 1000 + KV_MIN_EXPIRATION_S + 1,
            "KV's minimum"
        );
        let expired = record("cancelled", now - 3_600_000);
        assert!(cacheable("tsk_1", &expired, now).is_none());

        let junk = Entry {
            version: 1,
            body: "not a task".into(),
            due_at: None,
        };
        assert!(cacheable("tsk_1", &junk, now).is_none());
        assert_eq!(from_cache("{}"), None);
        assert_eq!(cache_key("tsk_1"), "task:tsk_1");
    }
}
