//! The Worker's side of task storage: [`DoStore`] forwards each store
//! operation to the shard Durable Object that owns the key, and [`KvCached`]
//! puts an optional read-through cache of terminal task records in front of
//! it. Neither decides anything: the shards hold the data and the core the
//! rules.

use std::cell::{Cell, RefCell};

use futures_util::future::{LocalBoxFuture, join_all};
use worker::{Env, ObjectNamespace, console_warn};

use super::js::{Kv, request};
use super::now_ms;
use super::wire::{Layout, Op, Reply, cache_key, cacheable, from_cache, shard_name};
use crate::store::{Entry, Store, StoreError, Version};
use crate::tasks::is_task_id;
use crate::time::Millis;

/// The Durable Object binding of the shards (see wrangler.toml).
pub const SHARDS_BINDING: &str = "TASK_SHARDS";
/// The KV binding of the terminal-record cache.
pub const CACHE_BINDING: &str = "TASK_CACHE";

fn unavailable(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("{what}: {e}"))
}

/// Task storage in shard Durable Objects; a key lives in the shard its
/// [`Layout`] names.
pub struct DoStore {
    ns: ObjectNamespace,
    layout: Layout,
    /// Shard requests made so far (each is a subrequest of the request).
    calls: Cell<u32>,
}

impl DoStore {
    pub fn new(env: &Env, layout: Layout) -> worker::Result<Self> {
        Self::on_binding(env, SHARDS_BINDING, layout)
    }

    /// The store of the shards behind Durable Object binding `binding`.
    pub(crate) fn on_binding(env: &Env, binding: &str, layout: Layout) -> worker::Result<Self> {
        Ok(DoStore {
            ns: env.durable_object(binding)?,
            layout,
            calls: Cell::new(0),
        })
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    pub fn shard_for(&self, key: &str) -> Option<u32> {
        self.layout.shard_for(key)
    }

    /// Sends one operation to shard `shard` and returns its reply.
    pub async fn call(&self, shard: u32, op: &Op) -> Result<Reply, StoreError> {
        self.calls.set(self.calls.get().saturating_add(1));
        let stub = self
            .ns
            .id_from_name(&shard_name(shard))
            .and_then(|id| id.get_stub())
            .map_err(|e| unavailable("shard stub", e))?;
        let body = serde_json::to_string(op).map_err(|e| unavailable("encode op", e))?;
        let req = request(
            "https://shard.internal/op",
            "POST",
            None,
            Some(&body.into()),
        )
        .map_err(|e| unavailable("shard request", e))?;
        let mut resp = stub
            .fetch_with_request(req)
            .await
            .map_err(|e| unavailable("shard fetch", e))?;
        let text = resp
            .text()
            .await
            .map_err(|e| unavailable("shard body", e))?;
        if resp.status_code() != 200 {
            return Err(StoreError::Unavailable(format!(
                "shard answered HTTP {}",
                resp.status_code()
            )));
        }
        crate::json::from_str(&text).map_err(|e| unavailable("decode reply", e))
    }

    /// `op` on the shard that owns `key`. A key no shard can own (a
    /// crafted placement) is answered here: absent for a read, refused for
    /// a write.
    async fn on_key(&self, key: &str, op: Op) -> Result<Reply, StoreError> {
        match self.shard_for(key) {
            Some(shard) => self.call(shard, &op).await,
            None if matches!(op, Op::Get { .. }) => Ok(Reply::Entry(None)),
            None => Err(StoreError::Unavailable("no shard owns this key".to_owned())),
        }
    }

    /// The same operation on each of `shards`.
    pub async fn on_shards(&self, shards: &[u32], op: &Op) -> Vec<Result<Reply, StoreError>> {
        join_all(shards.iter().map(|i| self.call(*i, op))).await
    }

    /// The same operation on every shard (diagnostics and the store
    /// contract only: one subrequest per shard).
    pub async fn everywhere(&self, op: &Op) -> Vec<Result<Reply, StoreError>> {
        let all: Vec<u32> = (0..self.layout.total()).collect();
        self.on_shards(&all, op).await
    }
}

impl Store for DoStore {
    async fn get(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        let op = Op::Get {
            key: key.to_owned(),
        };
        match self.on_key(key, op).await? {
            Reply::Entry(e) => Ok(e),
            other => Err(other.into_error("get")),
        }
    }

    async fn put(
        &self,
        key: &str,
        expected: Option<Version>,
        body: &str,
        due_at: Option<Millis>,
    ) -> Result<Version, StoreError> {
        let op = Op::Put {
            key: key.to_owned(),
            expected,
            body: body.to_owned(),
            due_at,
        };
        match self.on_key(key, op).await? {
            Reply::Version(v) => Ok(v),
            other => Err(other.into_error("put")),
        }
    }

    async fn delete(&self, key: &str, expected: Version) -> Result<(), StoreError> {
        let op = Op::Delete {
            key: key.to_owned(),
            expected,
        };
        match self.on_key(key, op).await? {
            Reply::Deleted => Ok(()),
            other => Err(other.into_error("delete")),
        }
    }

    /// Asks every shard and merges: earliest first, then by key. (The
    /// runners work per shard inside the Durable Objects; this exists so the
    /// store contract holds for the Worker's view of all shards.)
    async fn due(&self, now: Millis, limit: usize) -> Result<Vec<String>, StoreError> {
        let mut all = Vec::new();
        for reply in self.everywhere(&Op::Due { now, limit }).await {
            match reply? {
                Reply::Due(keys) => all.extend(keys),
                other => return Err(other.into_error("due")),
            }
        }
        all.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        Ok(all.into_iter().take(limit).map(|(k, _)| k).collect())
    }

    async fn next_due(&self) -> Result<Option<Millis>, StoreError> {
        let mut earliest: Option<Millis> = None;
        for reply in self.everywhere(&Op::NextDue).await {
            match reply? {
                Reply::NextDue(d) => earliest = earliest.into_iter().chain(d).min(),
                other => return Err(other.into_error("next_due")),
            }
        }
        Ok(earliest)
    }
}

/// A cache fill waiting to be written (after the response, through
/// `ctx.wait_until`, or inline on a stream).
pub type Fill = LocalBoxFuture<'static, ()>;

/// A read-through cache of terminal task records in KV in front of a store.
/// With `kv: None` it passes everything through unchanged.
///
/// - `get` reads `task:{id}` from KV first; on a hit it returns the cached
///   entry. On a miss it reads the inner store, and when that returns a
///   terminal task record it queues a KV write of it (expiring with the
///   task) for [`KvCached::take_fills`].
/// - Writes go to the inner store only; `delete` also drops the cached copy.
///
/// Terminal records never change, so a cached copy always equals the
/// authoritative one; the core checks ownership and expiry on whatever it
/// gets. The guarantees are written down in the README.
pub struct KvCached<S> {
    inner: S,
    kv: Option<Kv>,
    fills: RefCell<Vec<Fill>>,
    kv_ops: Cell<u32>,
}

impl<S: Store> KvCached<S> {
    pub fn new(inner: S, kv: Option<Kv>) -> Self {
        KvCached {
            inner,
            kv,
            fills: RefCell::new(Vec::new()),
            kv_ops: Cell::new(0),
        }
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The cache writes queued so far.
    pub fn take_fills(&self) -> Vec<Fill> {
        self.fills.take()
    }

    fn count_kv(&self) {
        self.kv_ops.set(self.kv_ops.get().saturating_add(1));
    }

    fn queue_fill(&self, kv: &Kv, key: &str, entry: &Entry) {
        let Some((value, expiration)) = cacheable(key, entry, now_ms()) else {
            return;
        };
        self.count_kv();
        let kv = kv.clone();
        let cache_key = cache_key(key);
        self.fills.borrow_mut().push(Box::pin(async move {
            if let Err(e) = kv.put(&cache_key, &value, expiration).await {
                // 429s (one write per second per key) and outages only cost
                // a later cache miss.
                console_warn!(
                    "{}",
                    serde_json::json!({"event": "kv-cache-fill-failed", "error": e})
                );
            }
        }));
    }
}

impl KvCached<DoStore> {
    /// Subrequests made so far: shard calls and KV operations.
    pub fn subrequests(&self) -> u32 {
        self.inner.calls.get().saturating_add(self.kv_ops.get())
    }
}

impl<S: Store> Store for KvCached<S> {
    async fn get(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        // Only tasks are ever cached: other keys (quota records) skip KV.
        let Some(kv) = self.kv.as_ref().filter(|_| is_task_id(key)) else {
            return self.inner.get(key).await;
        };
        self.count_kv();
        match kv.get_text(&cache_key(key)).await {
            Ok(Some(value)) => {
                if let Some(entry) = from_cache(&value) {
                    return Ok(Some(entry));
                }
            }
            Ok(None) => {}
            Err(e) => console_warn!(
                "{}",
                serde_json::json!({"event": "kv-cache-read-failed", "error": e})
            ),
        }
        let entry = self.inner.get(key).await?;
        if let Some(e) = &entry {
            self.queue_fill(kv, key, e);
        }
        Ok(entry)
    }

    async fn put(
        &self,
        key: &str,
        expected: Option<Version>,
        body: &str,
        due_at: Option<Millis>,
    ) -> Result<Version, StoreError> {
        self.inner.put(key, expected, body, due_at).await
    }

    async fn delete(&self, key: &str, expected: Version) -> Result<(), StoreError> {
        self.inner.delete(key, expected).await?;
        if let Some(kv) = self.kv.as_ref().filter(|_| is_task_id(key)) {
            self.count_kv();
            if let Err(e) = kv.delete(&cache_key(key)).await {
                console_warn!(
                    "{}",
                    serde_json::json!({"event": "kv-cache-delete-failed", "error": e})
                );
            }
        }
        Ok(())
    }

    async fn due(&self, now: Millis, limit: usize) -> Result<Vec<String>, StoreError> {
        self.inner.due(now, limit).await
    }

    async fn next_due(&self) -> Result<Option<Millis>, StoreError> {
        self.inner.next_due().await
    }
}

/// The store of one Worker request: the shards, maybe behind the KV cache.
pub type WorkerStore = KvCached<DoStore>;
