//! The shard Durable Object: a SQLite table of task records, served to the
//! Worker one store operation per request, and an alarm that advances the
//! shard's due work with the core's runner.
//!
//! Layout (one table per shard object):
//!
//! ```sql
//! CREATE TABLE tasks (key TEXT PRIMARY KEY, version INTEGER NOT NULL,
//!                     body TEXT NOT NULL, due_at INTEGER);
//! CREATE INDEX tasks_due ON tasks (due_at);
//! ```
//!
//! The runtime runs one event of an object at a time up to its next `await`,
//! and SQL calls are synchronous, so each store operation (a read, a
//! compare, a write) is atomic. After every write the object makes sure its
//! alarm is set at or before the earliest `due_at` (an absolute time).

use std::cell::Cell;

use worker::js_sys;
use worker::wasm_bindgen::JsValue;
use worker::{
    Env, Request, Response, ResponseBuilder, ScheduledTime, SqlStorage, SqlStorageValue, State,
    Storage, console_error, console_log,
};

use super::wire::{Op, Reply, SweepReport};
use super::{EntryFuture, now_ms};
use crate::ids::SystemRandom;
use crate::server::Server;
use crate::store::{Entry, Store, StoreError, Version};
use crate::tasks::runner::TickReport;
use crate::time::Millis;
use crate::tools::ToolFactory;

/// When a sweep leaves work due that it could not advance (a store error, an
/// unreadable record), the alarm retries after this long instead of at once.
const RETRY_MS: Millis = 1_000;
/// When the settings are broken, sweeps retry this rarely.
const MISCONFIGURED_RETRY_MS: Millis = 60_000;
/// An alarm this far in the past was lost (for example by a local runtime
/// restart) and is set again.
const STALE_ALARM_MS: Millis = 5_000;

const SCHEMA: [&str; 3] = [
    "CREATE TABLE IF NOT EXISTS tasks (key TEXT PRIMARY KEY, version INTEGER NOT NULL, body TEXT NOT NULL, due_at INTEGER)",
    "CREATE INDEX IF NOT EXISTS tasks_due ON tasks (due_at)",
    // The highest version of any key deleted here: keys created later start
    // above it (the store contract).
    "CREATE TABLE IF NOT EXISTS floor (one INTEGER PRIMARY KEY CHECK (one = 0), version INTEGER NOT NULL)",
];

fn sql_error(what: &str, e: worker::Error) -> StoreError {
    StoreError::Unavailable(format!("{what}: {e}"))
}

fn int(v: &SqlStorageValue) -> Option<i64> {
    match v {
        SqlStorageValue::Integer(i) => Some(*i),
        SqlStorageValue::Float(f) if f.fract() == 0.0 => Some(*f as i64),
        _ => None,
    }
}

/// One shard's table as a [`Store`]. Every operation runs synchronously;
/// the async trait methods complete on their first poll.
#[derive(Clone)]
pub struct SqlStore {
    sql: SqlStorage,
}

impl SqlStore {
    fn rows(
        &self,
        query: &str,
        bindings: Vec<SqlStorageValue>,
    ) -> std::result::Result<Vec<Vec<SqlStorageValue>>, StoreError> {
        self.sql
            .exec(query, bindings)
            .map_err(|e| sql_error("query", e))?
            .raw()
            .collect::<worker::Result<Vec<_>>>()
            .map_err(|e| sql_error("rows", e))
    }

    fn exec(&self, query: &str, bindings: Vec<SqlStorageValue>) -> Result<(), StoreError> {
        self.sql
            .exec(query, bindings)
            .map(|_| ())
            .map_err(|e| sql_error("write", e))
    }

    fn version_of(&self, key: &str) -> Result<Option<Version>, StoreError> {
        let rows = self.rows("SELECT version FROM tasks WHERE key = ?", vec![key.into()])?;
        match rows.first().map(|r| r.first().and_then(int)) {
            None => Ok(None),
            Some(Some(v)) if v > 0 => Ok(Some(v as Version)),
            Some(_) => Err(StoreError::Unavailable("bad version column".into())),
        }
    }

    pub fn get_now(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        let rows = self.rows(
            "SELECT version, body, due_at FROM tasks WHERE key = ?",
            vec![key.into()],
        )?;
        let Some(row) = rows.into_iter().next() else {
            return Ok(None);
        };
        match row.as_slice() {
            [version, SqlStorageValue::String(body), due] => {
                let version = int(version)
                    .filter(|v| *v > 0)
                    .ok_or_else(|| StoreError::Unavailable("bad version column".into()))?;
                let due_at = match due {
                    SqlStorageValue::Null => None,
                    d => Some(
                        int(d)
                            .ok_or_else(|| StoreError::Unavailable("bad due_at column".into()))?,
                    ),
                };
                Ok(Some(Entry {
                    version: version as Version,
                    body: body.clone(),
                    due_at,
                }))
            }
            _ => Err(StoreError::Unavailable("bad row".into())),
        }
    }

    pub fn put_now(
        &self,
        key: &str,
        expected: Option<Version>,
        body: &str,
        due_at: Option<Millis>,
    ) -> Result<Version, StoreError> {
        let current = self.version_of(key)?;
        if current != expected {
            return Err(StoreError::Conflict { current });
        }
        let next = match expected {
            Some(v) => v + 1,
            None => self.floor()? + 1,
        };
        let version =
            i64::try_from(next).map_err(|_| StoreError::Unavailable("version overflow".into()))?;
        if expected.is_none() {
            self.exec(
                "INSERT INTO tasks (key, version, body, due_at) VALUES (?, ?, ?, ?)",
                vec![key.into(), version.into(), body.into(), due_at.into()],
            )?;
        } else {
            self.exec(
                "UPDATE tasks SET version = ?, body = ?, due_at = ? WHERE key = ?",
                vec![version.into(), body.into(), due_at.into(), key.into()],
            )?;
        }
        Ok(next)
    }

    pub fn delete_now(&self, key: &str, expected: Version) -> Result<(), StoreError> {
        let current = self.version_of(key)?;
        if current != Some(expected) {
            return Err(StoreError::Conflict { current });
        }
        let version = i64::try_from(expected)
            .map_err(|_| StoreError::Unavailable("version overflow".into()))?;
        // The floor first: a statement that fails does not undo the ones
        // before it, and a delete stored without its floor would let a new
        // entry of the key reuse a version an old writer still holds (a
        // floor raised alone only makes later versions larger).
        self.exec(
            "INSERT INTO floor (one, version) VALUES (0, ?) \
             ON CONFLICT (one) DO UPDATE SET version = MAX(version, excluded.version)",
            vec![version.into()],
        )?;
        self.exec("DELETE FROM tasks WHERE key = ?", vec![key.into()])
    }

    /// The highest version of any key deleted here (0: none).
    fn floor(&self) -> Result<Version, StoreError> {
        let rows = self.rows("SELECT version FROM floor", Vec::new())?;
        match rows.first().map(|r| r.first().and_then(int)) {
            None => Ok(0),
            Some(Some(v)) if v >= 0 => Ok(v as Version),
            Some(_) => Err(StoreError::Unavailable("bad floor".into())),
        }
    }

    /// Up to `limit` due keys with their due times, earliest first (uses the
    /// `due_at` index; reads only what it returns).
    pub fn due_now(&self, now: Millis, limit: usize) -> Result<Vec<(String, Millis)>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.rows(
            "SELECT key, due_at FROM tasks WHERE due_at <= ? ORDER BY due_at, key LIMIT ?",
            vec![now.into(), limit.into()],
        )?
        .into_iter()
        .map(|row| match row.as_slice() {
            [SqlStorageValue::String(k), d] => int(d)
                .map(|d| (k.clone(), d))
                .ok_or_else(|| StoreError::Unavailable("bad due_at column".into())),
            _ => Err(StoreError::Unavailable("bad due row".into())),
        })
        .collect()
    }

    pub fn next_due_now(&self) -> Result<Option<Millis>, StoreError> {
        let rows = self.rows("SELECT MIN(due_at) FROM tasks", Vec::new())?;
        match rows.first().and_then(|r| r.first()) {
            None | Some(SqlStorageValue::Null) => Ok(None),
            Some(v) => int(v)
                .map(Some)
                .ok_or_else(|| StoreError::Unavailable("bad due_at column".into())),
        }
    }
}

impl Store for SqlStore {
    async fn get(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        self.get_now(key)
    }
    async fn put(
        &self,
        key: &str,
        expected: Option<Version>,
        body: &str,
        due_at: Option<Millis>,
    ) -> Result<Version, StoreError> {
        self.put_now(key, expected, body, due_at)
    }
    async fn delete(&self, key: &str, expected: Version) -> Result<(), StoreError> {
        self.delete_now(key, expected)
    }
    async fn due(&self, now: Millis, limit: usize) -> Result<Vec<String>, StoreError> {
        Ok(self
            .due_now(now, limit)?
            .into_iter()
            .map(|(k, _)| k)
            .collect())
    }
    async fn next_due(&self) -> Result<Option<Millis>, StoreError> {
        self.next_due_now()
    }
}

async fn set_alarm_at(storage: &Storage, at: Millis) -> worker::Result<()> {
    let date = js_sys::Date::new(&JsValue::from_f64(at as f64));
    storage.set_alarm(ScheduledTime::new(date)).await
}

/// One shard of the task table: the behaviour of the Durable Object class
/// that [`crate::cloudflare_worker!`] declares (`TaskShard`) in the user's
/// crate, running the user's tools from its alarm.
pub struct Shard {
    state: State,
    env: Env,
    tools: ToolFactory,
    schema_ready: Cell<bool>,
    /// Whether this instance has checked its alarm since it started. A new
    /// instance sets it again on its first request: a local runtime restart
    /// can forget scheduled alarms while storage still reports them.
    alarm_checked: Cell<bool>,
}

impl Shard {
    fn store(&self) -> Result<SqlStore, StoreError> {
        let sql = self.state.storage().sql();
        if !self.schema_ready.get() {
            for stmt in SCHEMA {
                sql.exec(stmt, None).map_err(|e| sql_error("schema", e))?;
            }
            self.schema_ready.set(true);
        }
        Ok(SqlStore { sql })
    }

    fn name(&self) -> String {
        self.state.id().name().unwrap_or_default()
    }

    async fn handle(&self, op: Op) -> Reply {
        let store = match self.store() {
            Ok(s) => s,
            Err(e) => return Reply::from_store_error(e),
        };
        let writes = op.writes();
        let result = match op {
            Op::Get { key } => store.get_now(&key).map(Reply::Entry),
            Op::Put {
                key,
                expected,
                body,
                due_at,
            } => store
                .put_now(&key, expected, &body, due_at)
                .map(Reply::Version),
            Op::Delete { key, expected } => {
                store.delete_now(&key, expected).map(|()| Reply::Deleted)
            }
            Op::Due { now, limit } => store.due_now(now, limit).map(Reply::Due),
            Op::NextDue => store.next_due_now().map(Reply::NextDue),
            #[cfg(feature = "test-hooks")]
            Op::Floor => store.floor().map(Reply::Version),
            #[cfg(feature = "test-hooks")]
            Op::Exec { sql, .. } => store.exec(&sql, Vec::new()).map(|()| Reply::Version(0)),
            Op::Sweep => return Reply::Swept(self.sweep("cron").await),
            #[cfg(feature = "test-hooks")]
            Op::AlarmGet => {
                return match self.state.storage().get_alarm().await {
                    Ok(at) => Reply::Alarm(at),
                    Err(e) => Reply::Unavailable(e.to_string()),
                };
            }
            #[cfg(feature = "test-hooks")]
            Op::AlarmDelete => {
                // Simulates a lost alarm: reads do not set it again.
                self.alarm_checked.set(true);
                return match self.state.storage().delete_alarm().await {
                    Ok(()) => Reply::Alarm(None),
                    Err(e) => Reply::Unavailable(e.to_string()),
                };
            }
        };
        let reply = result.unwrap_or_else(Reply::from_store_error);
        let wrote = writes && !matches!(reply, Reply::Conflict(_) | Reply::Unavailable(_));
        if wrote || !self.alarm_checked.get() {
            self.ensure_alarm(&store).await;
        }
        reply
    }

    /// Makes sure the alarm fires at or before the earliest due time.
    async fn ensure_alarm(&self, store: &SqlStore) {
        let fresh = !self.alarm_checked.replace(true);
        let want = match store.next_due_now() {
            Ok(Some(w)) => w,
            Ok(None) => return,
            Err(e) => {
                self.alarm_checked.set(false);
                return self.log_error("next-due", &e.to_string());
            }
        };
        let now = now_ms();
        let storage = self.state.storage();
        let have = if fresh {
            None
        } else {
            match storage.get_alarm().await {
                Ok(a) => a,
                Err(e) => {
                    self.log_error("get-alarm", &e.to_string());
                    None
                }
            }
        };
        let needed = match have {
            None => true,
            Some(h) => h > want || h + STALE_ALARM_MS < now,
        };
        if needed && let Err(e) = set_alarm_at(&storage, want.max(now)).await {
            self.alarm_checked.set(false);
            self.log_error("set-alarm", &e.to_string());
        }
    }

    /// Advances due work (up to the tick budget) and sets the next alarm.
    async fn sweep(&self, origin: &'static str) -> SweepReport {
        let now = now_ms();
        self.alarm_checked.set(true);
        let storage = self.state.storage();
        let settings = super::env::settings(&self.env);
        let (settings, store) = match (settings, self.store()) {
            (Ok(s), Ok(store)) => (s, store),
            (Err(e), _) => return self.sweep_failed(&storage, origin, &e, now).await,
            (_, Err(e)) => {
                return self
                    .sweep_failed(&storage, origin, &e.to_string(), now)
                    .await;
            }
        };
        let budget = settings.config.tick_budget;
        let subrequests = settings.tick_subrequests as usize;
        let lookup = super::env::env_lookup(&self.env);
        let tools = match (self.tools)(&crate::tools::factory_settings(&lookup)) {
            Ok(t) => t,
            Err(e) => return self.sweep_failed(&storage, origin, &e, now).await,
        };
        let server = match Server::new(store, settings.config, tools, Box::new(SystemRandom)) {
            Ok(s) => s,
            Err(e) => return self.sweep_failed(&storage, origin, &e.message, now).await,
        };
        let server = super::env::with_step_env(
            // The invocation's subrequest cap: the tick claims no task it
            // may not have room for, and the rest run in the next alarm.
            server.with_outbound(Box::new(crate::outbound::Budgeted::new(
                super::outbound::FetchOutbound,
                subrequests,
            ))),
            &self.env,
        );
        let tick = server.tick(now).await;
        let progress = tick.stepped + tick.purged + tick.cancelled > 0;
        let alarm_at = match tick.next_due {
            // The store failed before the tick learnt what is due next (its
            // due or next-due read): the work is still there, look again
            // soon rather than drop the alarm.
            None if tick.errors > 0 => Some(now + RETRY_MS),
            None => None,
            Some(n) if n > now => Some(n),
            // A backlog: continue at once, in a new invocation with its own
            // CPU budget (and subrequests, when the tick held tasks back).
            Some(_) if (tick.due >= budget || tick.held_back > 0) && progress => Some(now),
            // Due but stuck (store errors, unreadable entries): retry soon,
            // not in a tight loop.
            Some(_) => Some(now + RETRY_MS),
        };
        let armed = match alarm_at {
            Some(at) => set_alarm_at(&storage, at).await,
            None => storage.delete_alarm().await,
        };
        if let Err(e) = armed {
            self.alarm_checked.set(false);
            self.log_error("set-alarm", &e.to_string());
        }
        if tick.due > 0 || tick.errors > 0 {
            console_log!(
                "{}",
                serde_json::json!({
                    "event": "sweep", "origin": origin, "shard": self.name(),
                    "due": tick.due, "stepped": tick.stepped, "finished": tick.finished,
                    "purged": tick.purged, "skipped": tick.skipped, "fenced": tick.fenced,
                    "errors": tick.errors, "held_back": tick.held_back, "alarm_at": alarm_at,
                })
            );
        }
        SweepReport { tick, alarm_at }
    }

    async fn sweep_failed(
        &self,
        storage: &Storage,
        origin: &'static str,
        why: &str,
        now: Millis,
    ) -> SweepReport {
        self.log_error(origin, why);
        let at = now + MISCONFIGURED_RETRY_MS;
        if let Err(e) = set_alarm_at(storage, at).await {
            self.alarm_checked.set(false);
            self.log_error("set-alarm", &e.to_string());
        }
        SweepReport {
            tick: TickReport {
                errors: 1,
                ..TickReport::default()
            },
            alarm_at: Some(at),
        }
    }

    fn log_error(&self, what: &str, why: &str) {
        console_error!(
            "{}",
            serde_json::json!({"event": "shard-error", "shard": self.name(), "what": what, "error": why})
        );
    }
}

impl Shard {
    /// The shard object `state`, running the tools `tools` builds.
    pub fn new(state: State, env: Env, tools: ToolFactory) -> Self {
        Shard {
            state,
            env,
            tools,
            schema_ready: Cell::new(false),
            alarm_checked: Cell::new(false),
        }
    }

    /// One store operation from the Worker (the shard protocol of `wire`;
    /// boxed: see [`EntryFuture`]). Always a reply: a failure is
    /// [`Reply::Unavailable`].
    pub fn fetch(&self, req: Request) -> EntryFuture<'_, Response> {
        Box::pin(self.serve(req))
    }

    async fn serve(&self, mut req: Request) -> Response {
        let reply = match req.text().await {
            Ok(text) => match crate::json::from_str::<Op>(&text) {
                Ok(op) => self.handle(op).await,
                Err(e) => Reply::Unavailable(format!("not a shard operation: {e}")),
            },
            Err(e) => Reply::Unavailable(format!("unreadable request: {e}")),
        };
        // A reply is plain data: writing it cannot fail, and if it did the
        // Worker would read the fallback as the shard being unavailable.
        let body = serde_json::to_vec(&reply)
            .unwrap_or_else(|_| br#"{"unavailable":"the reply could not be written"}"#.to_vec());
        super::env::json_response(200, body)
    }

    /// Advances the shard's due work and sets the next alarm (boxed: see
    /// [`EntryFuture`]).
    ///
    /// The sweep handles its own errors by setting the alarm again (soon,
    /// after a store error). Only when that setting fails is the alarm
    /// answered with an error, so that the runtime retries it.
    pub fn alarm(&self) -> EntryFuture<'_, worker::Result<Response>> {
        Box::pin(async move {
            self.sweep("alarm").await;
            if self.alarm_checked.get() {
                Ok(ResponseBuilder::new().empty())
            } else {
                Err(worker::Error::RustError(
                    "the next alarm could not be set; the runtime retries this one".into(),
                ))
            }
        })
    }
}
