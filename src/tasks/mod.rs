//! The task domain: the persisted record, the pure state machine, the
//! client-facing service (create, get, update, cancel) and the runner that
//! advances due work.
//!
//! Every read-modify-write is a compare-and-swap loop on the record's
//! version, so concurrent clients and runners never overwrite each other.

mod error;
mod head;
mod idle;
pub mod input;
pub mod quarantine;
pub mod quota;
pub mod record;
pub mod runner;
pub mod scratch;
pub mod state;
pub mod streams;
pub mod subscription;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::crypto::{b64url, hmac_sha256};
use crate::ids::IdSource;
use crate::owner::Owner;
use crate::protocol::meta::ClientCapabilities;
use crate::protocol::tasks::TaskStatus;
use crate::store::{Entry, Store, StoreError, Version};
use crate::time::Millis;
use record::{Change, Phase, TaskRecord};

/// How often a compare-and-swap loop retries before giving up.
const CAS_ATTEMPTS: usize = 8;

pub use error::TaskError;

/// A backend failure, keeping its message for the log.
fn store_failed(e: StoreError) -> TaskError {
    match e {
        StoreError::Unavailable(why) => TaskError::Store(why),
        StoreError::Conflict { .. } => TaskError::Busy,
    }
}

/// What is stored for a task, as three lines of JSON: the reader's head
/// (the facts that decide whether a caller may see the task), the snapshot
/// it is served (rendered once at write time), and the full record the
/// writers work on. Compact JSON has no raw newline, so a reader parses the
/// short first line only and serves the second as it is, without scanning
/// it. Records written earlier hold two lines (the head with the snapshot
/// as its `snapshot` member, then the record) or the record alone; both
/// are still read.
#[derive(Serialize)]
struct StoredHeadOut<'a> {
    owner: &'a Owner,
    expires_at: Millis,
    status: TaskStatus,
}

#[derive(Deserialize)]
struct StoredHead<'a> {
    #[serde(borrow)]
    owner: OwnerRef<'a>,
    expires_at: Millis,
    status: TaskStatus,
}

/// The head of a two-line record (written before the snapshot had its own
/// line).
#[derive(Deserialize)]
struct StoredHeadWithSnapshot<'a> {
    #[serde(borrow)]
    owner: OwnerRef<'a>,
    expires_at: Millis,
    status: TaskStatus,
    #[serde(borrow)]
    snapshot: &'a RawValue,
}

/// What a reader needs of a stored task.
struct StoredView<'a> {
    owner: OwnerRef<'a>,
    expires_at: Millis,
    status: TaskStatus,
    /// JSON text of an object.
    snapshot: &'a str,
}

impl<'a> StoredView<'a> {
    /// The reader's part of a stored task; `None` for a record written
    /// before views were stored.
    fn of(body: &'a str) -> Option<Self> {
        let (head, second, record) = three_lines(body)?;
        if record.is_some() {
            let h: StoredHead<'_> = match head::exact(head) {
                Some(h) => h,
                None => crate::json::from_str(head).ok()?,
            };
            // Written by `encode` as one object; a line that is not one is
            // never served (the record is read instead).
            let object = second.starts_with('{') && second.ends_with('}');
            return object.then_some(StoredView {
                owner: h.owner,
                expires_at: h.expires_at,
                status: h.status,
                snapshot: second,
            });
        }
        let h: StoredHeadWithSnapshot<'_> = crate::json::from_str(head).ok()?;
        Some(StoredView {
            owner: h.owner,
            expires_at: h.expires_at,
            status: h.status,
            snapshot: h.snapshot.get(),
        })
    }
}

/// `body`'s first line, its second, and the rest after the second's line
/// feed (`None` with no second line feed), as `body.splitn(3, '\n')` gives
/// them; `None` without a line feed. The line feeds are looked for eight
/// bytes at a time: on wasm, `str`'s own search goes four bytes at a time,
/// and a stored snapshot is a few hundred bytes long.
fn three_lines(body: &str) -> Option<(&str, &str, Option<&str>)> {
    let bytes = body.as_bytes();
    let first = crate::limits::first_byte(bytes, 0, b'\n')?;
    let head = body.get(..first)?;
    match crate::limits::first_byte(bytes, first + 1, b'\n') {
        Some(second) => Some((
            head,
            body.get(first + 1..second)?,
            Some(body.get(second + 1..)?),
        )),
        None => Some((head, body.get(first + 1..)?, None)),
    }
}

/// The `taskId` of a stored snapshot.
#[derive(Deserialize)]
struct SnapshotId<'a> {
    #[serde(rename = "taskId", borrow)]
    task_id: Cow<'a, str>,
}

#[derive(Deserialize)]
struct OwnerRef<'a> {
    #[serde(borrow)]
    tenant: Cow<'a, str>,
    #[serde(borrow)]
    principal: Cow<'a, str>,
}

impl OwnerRef<'_> {
    /// Whether this is `owner` (compared eight bytes at a time; see
    /// [`crate::limits::same_bytes`]).
    fn is(&self, owner: &Owner) -> bool {
        crate::limits::same_bytes(self.tenant.as_bytes(), owner.tenant.as_bytes())
            && crate::limits::same_bytes(self.principal.as_bytes(), owner.principal.as_bytes())
    }
}

/// A task as readers see it: the stored snapshot (the `DetailedTask`
/// object, without `resultType` and `_meta`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskView {
    pub status: TaskStatus,
    /// JSON text of an object.
    pub snapshot: String,
}

/// Serialises a record for the store: its head, its rendered snapshot and
/// the record, a line each.
pub fn encode(record: &TaskRecord, server_info: &Value) -> Result<String, TaskError> {
    let mut out = Vec::with_capacity(1024);
    let head = StoredHeadOut {
        owner: &record.owner,
        expires_at: record.expires_at(),
        status: record.status(),
    };
    serde_json::to_writer(&mut out, &head).map_err(|_| TaskError::Encoding)?;
    out.push(b'\n');
    serde_json::to_writer(&mut out, &record.wire(None, server_info, None))
        .map_err(|_| TaskError::Encoding)?;
    out.push(b'\n');
    serde_json::to_writer(&mut out, record).map_err(|_| TaskError::Encoding)?;
    // serde_json writes UTF-8 only.
    String::from_utf8(out).map_err(|_| TaskError::Encoding)
}

/// Decodes a stored task (current or earlier format): the record is the
/// last line.
pub fn decode(body: &str) -> Result<TaskRecord, TaskError> {
    let record = body.rsplit_once('\n').map_or(body, |(_, record)| record);
    crate::json::from_str::<TaskRecord>(record).map_err(|_| TaskError::Unreadable)
}

/// Whether the stored task `body` is `owner`'s and unfinished at `now`:
/// read from its head, or from the record if it has none. A body that
/// does not decode is not.
pub(crate) fn unfinished_for(body: &str, owner: &Owner, now: Millis) -> bool {
    visible_status(body, owner, now).is_some_and(|s| !s.is_terminal())
}

/// The status of the stored task `body` if it is `owner`'s and unexpired at
/// `now`: read from its head, or from the record if it has none.
fn visible_status(body: &str, owner: &Owner, now: Millis) -> Option<TaskStatus> {
    if let Some(v) = StoredView::of(body) {
        let own = v.owner.is(owner);
        return (own && now < v.expires_at).then_some(v.status);
    }
    decode(body)
        .ok()
        .filter(|r| r.visible_to(owner, now))
        .map(|r| r.status())
}

/// If the stored task `body` under `key` is finished (terminal), when it
/// expires: what a cache of finished tasks needs, read from the view line.
pub fn finished_until(key: &str, body: &str) -> Option<Millis> {
    if let Some(v) = StoredView::of(body) {
        if !v.status.is_terminal() {
            return None;
        }
        let id: SnapshotId<'_> = crate::json::from_str(v.snapshot).ok()?;
        return (id.task_id == key).then_some(v.expires_at);
    }
    let record = decode(body).ok()?;
    (record.id == key && record.status().is_terminal()).then(|| record.expires_at())
}

/// The stored entry of task `id`; `None` without a read if `id` cannot be a
/// task id.
async fn read_task<S: Store>(store: &S, id: &str) -> Result<Option<Entry>, TaskError> {
    if !is_task_id(id) {
        return Ok(None);
    }
    store.get(id).await.map_err(store_failed)
}

/// The reader's view of the task `id` if `owner` may see it at `now`.
/// Reads one entry and parses only what a reader needs.
pub async fn load_view<S: Store>(
    store: &S,
    id: &str,
    owner: &Owner,
    now: Millis,
    server_info: &Value,
) -> Result<Option<TaskView>, TaskError> {
    if !is_task_id(id) {
        return Ok(None);
    }
    Ok(
        match lookup_view(store, id, owner, now, server_info).await? {
            Lookup::Visible(view) => Some(view),
            Lookup::Expired | Lookup::Hidden => None,
        },
    )
}

/// What a caller may learn about a task id.
enum Lookup {
    /// The caller's live task.
    Visible(TaskView),
    /// The caller's own task, expired but not yet purged.
    Expired,
    /// Unknown, purged, or another owner's: one answer for all.
    Hidden,
}

/// The caller's task `id` as [`TaskService::view`] answers it: malformed
/// without a read, own-expired apart from hidden, and a foreign task
/// (expired or not) exactly like an unknown one.
pub async fn own_view<S: Store>(
    store: &S,
    id: &str,
    owner: &Owner,
    now: Millis,
    server_info: &Value,
) -> Result<TaskView, TaskError> {
    if !is_task_id(id) {
        return Err(TaskError::MalformedId);
    }
    match lookup_view(store, id, owner, now, server_info).await? {
        Lookup::Visible(view) => Ok(view),
        Lookup::Expired => Err(TaskError::Expired),
        Lookup::Hidden => Err(TaskError::NotFound),
    }
}

/// What [`Lookup`] `owner` gets for `id`, which the caller has checked with
/// [`is_task_id`].
async fn lookup_view<S: Store>(
    store: &S,
    id: &str,
    owner: &Owner,
    now: Millis,
    server_info: &Value,
) -> Result<Lookup, TaskError> {
    let Some(entry) = store.get(id).await.map_err(store_failed)? else {
        return Ok(Lookup::Hidden);
    };
    if let Some(v) = StoredView::of(&entry.body) {
        let own = v.owner.is(owner);
        return Ok(match (own, now < v.expires_at) {
            (false, _) => Lookup::Hidden,
            (true, false) => Lookup::Expired,
            (true, true) => Lookup::Visible(TaskView {
                status: v.status,
                snapshot: v.snapshot.to_owned(),
            }),
        });
    }
    // A record written before snapshots were stored: render it now.
    let record = decode(&entry.body)?;
    if record.id != id || record.owner != *owner {
        return Ok(Lookup::Hidden);
    }
    if record.is_expired(now) {
        return Ok(Lookup::Expired);
    }
    let snapshot = serde_json::to_string(&record.wire(None, server_info, None))
        .map_err(|_| TaskError::Encoding)?;
    Ok(Lookup::Visible(TaskView {
        status: record.status(),
        snapshot,
    }))
}

/// Length of an unplaced task id ([`crate::ids::new_task_id`]): `tsk_` and
/// 30 base64url characters (its time and 128 random bits); a placed one
/// ([`crate::ids::placed_task_id`]) has 32.
pub const TASK_ID_LEN: usize = 34;

/// Lengths of the ids of a round's task ([`round_task_id`], 128 derived
/// bits), unplaced and placed; ids made before the time prefix took its
/// own bytes have them too.
const ROUND_TASK_ID_LENS: [usize; 2] = [26, 28];

/// Whether `id` has the shape of a task id (`tsk_` and 22, 24, 30 or 32
/// base64url characters). Other keys in the store (quota records) are
/// never read as tasks, and malformed ids cost no store read.
pub fn is_task_id(id: &str) -> bool {
    (id.len() == TASK_ID_LEN
        || id.len() == TASK_ID_LEN + 2
        || ROUND_TASK_ID_LENS.contains(&id.len()))
        && id.starts_with("tsk_")
        && id
            .bytes()
            .skip(4)
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Reads a record from the store. A body that does not decode is reported,
/// never overwritten.
pub async fn load<S: Store>(
    store: &S,
    id: &str,
) -> Result<Option<(Version, TaskRecord)>, TaskError> {
    let Some(entry) = read_task(store, id).await? else {
        return Ok(None);
    };
    let record = decode(&entry.body)?;
    Ok(Some((entry.version, record)))
}

/// Writes `record` if its version is still `expected`.
pub async fn save<S: Store>(
    store: &S,
    expected: Option<Version>,
    record: &TaskRecord,
    server_info: &Value,
) -> Result<Result<Version, StoreError>, TaskError> {
    let body = encode(record, server_info)?;
    save_encoded(store, expected, record, &body).await
}

/// [`save`] of a record already encoded as `body`.
pub async fn save_encoded<S: Store>(
    store: &S,
    expected: Option<Version>,
    record: &TaskRecord,
    body: &str,
) -> Result<Result<Version, StoreError>, TaskError> {
    match store
        .put(&record.id, expected, body, Some(record.due_at()))
        .await
    {
        Ok(v) => Ok(Ok(v)),
        Err(e @ StoreError::Conflict { .. }) => Ok(Err(e)),
        Err(e) => Err(store_failed(e)),
    }
}

/// A task about to be created: who asks, for which tool call, and how the
/// tool wants it to start.
pub struct NewTask<'a> {
    pub owner: &'a Owner,
    pub tool: &'a str,
    pub arguments: Map<String, Value>,
    pub capabilities: ClientCapabilities,
    pub state: Value,
    pub first_step_in_ms: u64,
    pub message: Option<String>,
    pub now: Millis,
    pub ttl_ms: u64,
    pub poll_interval_ms: u64,
    /// The id of the state key its steps' idempotency keys derive from.
    pub key_id: Option<String>,
    /// A result the task has already: it is created completed, in its one
    /// write (a tool that answered at once a call asked to be a task).
    pub result: Option<crate::protocol::tools::CallToolResult>,
}

/// The refusal of a round whose id holds no task of the caller's.
fn stale_round() -> TaskError {
    TaskError::InvalidInput(
        "Invalid requestState: it was altered, has expired, or belongs to another request."
            .to_owned(),
    )
}

/// The id of the task a verified MRTR round with `nonce` creates (keyed by
/// the state key that signed the round), so that replaying the round finds
/// the same task.
pub fn round_task_id(secret: &[u8], nonce: &str, placements: u16) -> String {
    let derived = hmac_sha256(secret, &[b"mcp-tasks-edge/task-id/v1", nonce.as_bytes()]);
    let mut random = [0u8; 16];
    random.copy_from_slice(derived.get(..16).unwrap_or(&[0; 16]));
    match placements {
        0 => format!("tsk_{}", b64url(&random)),
        n => {
            let pick = u16::from_be_bytes([derived[16], derived[17]]) % n;
            crate::ids::placed_task_id(&random, pick)
        }
    }
}

/// What a create is held to: the caller's quota and the largest stored
/// task.
#[derive(Clone, Copy, Debug)]
pub struct StartLimits {
    pub quota: quota::Quota,
    pub max_task_bytes: usize,
    /// New ids are placed on one of this many stores (0: unplaced ids).
    pub placements: u16,
}

impl StartLimits {
    /// The limits of `limits`.
    pub fn of(limits: &crate::limits::Limits) -> Self {
        StartLimits {
            quota: quota::Quota {
                max_outstanding: limits.max_outstanding_tasks,
                max_stored_bytes: limits.max_stored_bytes,
                max_per_minute: limits.max_tasks_per_minute,
            },
            max_task_bytes: limits.max_task_bytes,
            placements: 0,
        }
    }
}

/// Where a new task's id comes from.
pub enum NewTaskId<'a> {
    /// Random, from the id source (a collision is retried).
    Random(&'a dyn IdSource),
    /// Derived from the nonce of a verified MRTR round (keyed by the state
    /// secret) and placed among the `placements` the round was signed
    /// with, so that replaying the round finds the same task.
    FromRound {
        secret: &'a [u8],
        nonce: &'a str,
        placements: u16,
    },
}

/// The client-facing task operations, all scoped to the caller.
pub struct TaskService<'a, S: Store> {
    pub store: &'a S,
    /// The server's identity, rendered into completed results.
    pub server_info: &'a Value,
    /// Largest stored task: a client change that would pass it (answers
    /// to input requests) is refused (0: no limit).
    pub max_task_bytes: usize,
    /// Runs a replayable step that a create or an update makes due inside
    /// that request (see [`runner`]'s notes on inline steps).
    pub inline: Option<&'a runner::Runner<'a, S>>,
}

impl<'a, S: Store> TaskService<'a, S> {
    pub fn new(store: &'a S, server_info: &'a Value) -> Self {
        TaskService {
            store,
            server_info,
            max_task_bytes: 0,
            inline: None,
        }
    }

    /// The same service, running a replayable step that a create or an
    /// update makes due with `runner`, inside the request, before the one
    /// write that stores the task.
    pub fn with_inline_steps(mut self, runner: &'a runner::Runner<'a, S>) -> Self {
        self.inline = Some(runner);
        self
    }

    /// `record` as its inline step (if any) leaves it, with its encoding;
    /// `None` when no step ran.
    async fn stepped(&self, record: &TaskRecord, now: Millis) -> Option<(TaskRecord, String)> {
        self.inline?.step_inline(record, now).await
    }

    /// The same service, refusing changes that make a task larger than
    /// `max` bytes.
    pub fn limited(mut self, max: usize) -> Self {
        self.max_task_bytes = max;
        self
    }

    /// `tasks/get`: the caller's task as readers see it (one read, no
    /// decoding of the full record).
    pub async fn view(&self, owner: &Owner, id: &str, now: Millis) -> Result<TaskView, TaskError> {
        own_view(self.store, id, owner, now, self.server_info).await
    }

    /// The task if `owner` may see it; otherwise why not, as
    /// [`TaskService::view`] says it.
    async fn visible(
        &self,
        owner: &Owner,
        id: &str,
        now: Millis,
    ) -> Result<(Version, TaskRecord), TaskError> {
        if !is_task_id(id) {
            return Err(TaskError::MalformedId);
        }
        match load(self.store, id).await? {
            Some((v, r)) if r.id == id && r.visible_to(owner, now) => Ok((v, r)),
            Some((_, r)) if r.id == id && r.owner == *owner => Err(TaskError::Expired),
            _ => Err(TaskError::NotFound),
        }
    }

    /// Persists a new task; `Ok(false)` if the id is taken.
    pub async fn create(&self, record: &TaskRecord) -> Result<bool, TaskError> {
        let body = encode(record, self.server_info)?;
        self.create_encoded(record, &body).await
    }

    async fn create_encoded(&self, record: &TaskRecord, body: &str) -> Result<bool, TaskError> {
        Ok(save_encoded(self.store, None, record, body).await?.is_ok())
    }

    /// Charges the new `record` to its owner's quota (at its encoded size),
    /// then runs its inline step (if one is due) and creates it as the step
    /// left it, if its id is free; `None` if the id is taken. The charge
    /// comes first, so a create the quota refuses runs no step; a step's
    /// outcome is charged at the owner's next rescan, as the runner's steps
    /// are.
    async fn charge_and_create(
        &self,
        record: &TaskRecord,
        limits: StartLimits,
        now: Millis,
    ) -> Result<Option<TaskRecord>, TaskError> {
        let body = self.encode_new(record, limits.max_task_bytes)?;
        let charge = quota::Charge {
            task_id: &record.id,
            expires_at: record.expires_at(),
            bytes: body.len() as u64,
        };
        let reserved = quota::reserve(self.store, &record.owner, charge, now, limits.quota).await?;
        let (stored, created) = match self.stepped(record, now).await {
            Some((stepped, body)) => {
                let created = self.create_encoded(&stepped, &body).await?;
                (Some(stepped), created)
            }
            None => (None, self.create_encoded(record, &body).await?),
        };
        if !created && reserved == quota::Reserved::Charged && !self.held_by(record, now).await {
            // The id is taken by no task of this owner's: this create adds
            // no task, so it adds no charge. Should the undo fail, the next
            // rescan reads the task under that id and charges what it finds
            // there, no more.
            let _ = quota::release(self.store, &record.owner, &record.id).await;
        }
        Ok(created.then(|| stored.unwrap_or_else(|| record.clone())))
    }

    /// Whether `record`'s id holds a task of its owner's: one that a
    /// concurrent replay of the same round created between this create's
    /// charge and its write. That task was charged by this create only (the
    /// replay found the id charged already), so the charge stays; a rescan
    /// moves it to the finished list once it ends.
    async fn held_by(&self, record: &TaskRecord, now: Millis) -> bool {
        match self.store.get(&record.id).await {
            Ok(Some(entry)) => visible_status(&entry.body, &record.owner, now).is_some(),
            // Unknown: keep the charge; the next rescan corrects it.
            Err(_) => true,
            Ok(None) => false,
        }
    }

    /// Encodes a new record, refusing one larger than `max_bytes`.
    fn encode_new(&self, record: &TaskRecord, max_bytes: usize) -> Result<String, TaskError> {
        let body = encode(record, self.server_info)?;
        if max_bytes > 0 && body.len() > max_bytes {
            return Err(TaskError::InvalidInput(format!(
                "The task would store {} bytes, more than the {max_bytes} allowed; send smaller arguments.",
                body.len()
            )));
        }
        Ok(body)
    }

    /// Creates a task (create-if-absent, after reserving the owner's quota
    /// of `max_outstanding` unfinished tasks) before any handle is
    /// returned. A task created from a verified MRTR round returns the task
    /// that round already created, if any.
    pub async fn start(
        &self,
        new: NewTask<'_>,
        id: NewTaskId<'_>,
        limits: StartLimits,
    ) -> Result<TaskRecord, TaskError> {
        let now = new.now;
        let owner = new.owner;
        let mut record = TaskRecord {
            id: String::new(),
            owner: owner.clone(),
            tool: new.tool.to_owned(),
            arguments: new.arguments,
            capabilities: new.capabilities,
            phase: Phase::Working,
            status_message: new.message,
            created_at: now,
            last_updated_at: now,
            ttl_ms: new.ttl_ms,
            poll_interval_ms: new.poll_interval_ms,
            state: new.state,
            wake_at: Some(now.saturating_add(new.first_step_in_ms.min(i64::MAX as u64) as i64)),
            issued_keys: Default::default(),
            answers: Default::default(),
            cancel_requested: false,
            lease: None,
            steps: 0,
            attempts: 0,
            key_id: new.key_id,
        };
        if let Some(result) = new.result {
            let done = Change::Complete {
                result,
                message: Some("The task completed.".to_owned()),
            };
            // A working task may always complete.
            let _ = record.apply(done, now);
        }
        match id {
            NewTaskId::FromRound {
                secret,
                nonce,
                placements,
            } => {
                record.id = round_task_id(secret, nonce, placements);
                // A replay of a round whose task exists answers with that
                // task: its first step is not run again, and it is not
                // charged again (a finished one has left the unfinished
                // list, and would count against the limit anew).
                if let Some((_, existing)) = load(self.store, &record.id).await? {
                    return if existing.visible_to(owner, now) {
                        Ok(existing)
                    } else {
                        Err(stale_round())
                    };
                }
                if let Some(created) = self.charge_and_create(&record, limits, now).await? {
                    return Ok(created);
                }
                match load(self.store, &record.id).await? {
                    Some((_, existing)) if existing.visible_to(owner, now) => Ok(existing),
                    _ => Err(stale_round()),
                }
            }
            NewTaskId::Random(ids) => {
                for _ in 0..3 {
                    record.id = crate::ids::new_task_id(ids, limits.placements, now)?;
                    if let Some(created) = self.charge_and_create(&record, limits, now).await? {
                        return Ok(created);
                    }
                }
                Err(TaskError::NoTaskId)
            }
        }
    }

    /// The method of `owner`'s outstanding input request `key` of task `id`,
    /// if there is one.
    pub async fn pending_method(
        &self,
        owner: &Owner,
        id: &str,
        key: &str,
        now: Millis,
    ) -> Result<Option<String>, TaskError> {
        let (_, record) = self.visible(owner, id, now).await?;
        Ok(match &record.phase {
            Phase::InputRequired { input_requests } => {
                input_requests.get(key).map(|r| r.method.clone())
            }
            _ => None,
        })
    }

    /// `tasks/update`: records answers to outstanding input requests. Keys
    /// that are not outstanding (unknown, answered, superseded) are ignored;
    /// an answer that does not fit its request is -32602 and nothing changes.
    pub async fn update(
        &self,
        owner: &Owner,
        id: &str,
        responses: &Map<String, Value>,
        now: Millis,
    ) -> Result<(), TaskError> {
        self.modify(owner, id, now, true, |record| {
            let Phase::InputRequired { input_requests } = &record.phase else {
                return Ok(false);
            };
            for (key, response) in responses {
                if let Some(request) = input_requests.get(key) {
                    input::validate(request, response).map_err(|why| {
                        TaskError::InvalidInput(format!(
                            "Invalid input response for {}: {why}.",
                            crate::error::truncate(key, 64)
                        ))
                    })?;
                }
            }
            Ok(record.record_answers(responses, now))
        })
        .await
    }

    /// Fails the caller's task `id` when its client refused the outstanding
    /// input request `key` (a 2025-11-25 client that answered a
    /// `sampling/createMessage` with a JSON-RPC error): the task cannot go
    /// on without that answer, so it ends now, `failed` with that said,
    /// rather than wait for an answer that will not come. Nothing changes
    /// if `key` is not outstanding (answered, superseded, the task
    /// finished).
    pub async fn refuse_input(
        &self,
        owner: &Owner,
        id: &str,
        key: &str,
        now: Millis,
    ) -> Result<(), TaskError> {
        self.modify(owner, id, now, false, |record| {
            let Phase::InputRequired { input_requests } = &record.phase else {
                return Ok(false);
            };
            let Some(request) = input_requests.get(key) else {
                return Ok(false);
            };
            let why = format!(
                "The client refused the {} request.",
                crate::error::truncate(&request.method, 64)
            );
            let change = Change::Fail {
                error: crate::error::RpcError::internal(why.clone()),
                message: Some(why),
            };
            Ok(record.apply(change, now).is_ok())
        })
        .await
    }

    /// `tasks/cancel`: records cancellation intent. A task waiting on input
    /// or on a timer is cancelled at once; a running step is cancelled at its
    /// boundary by the runner (an unleased replayable step is not seen as
    /// running: its task is cancelled at once and its outcome dropped); a
    /// terminal task is left as it is.
    pub async fn cancel(&self, owner: &Owner, id: &str, now: Millis) -> Result<(), TaskError> {
        self.cancel_with(owner, id, now, false).await
    }

    /// `tasks/cancel` as 2025-11-25 has it: the task is `cancelled` before
    /// this returns, a running step included. That step's commit then finds
    /// the task finished and is fenced: its outcome is dropped, and the task
    /// stays cancelled. A terminal task is left as it is.
    pub async fn cancel_now(&self, owner: &Owner, id: &str, now: Millis) -> Result<(), TaskError> {
        self.cancel_with(owner, id, now, true).await
    }

    async fn cancel_with(
        &self,
        owner: &Owner,
        id: &str,
        now: Millis,
        even_running: bool,
    ) -> Result<(), TaskError> {
        self.modify(owner, id, now, false, |record| {
            if record.status().is_terminal() {
                return Ok(false);
            }
            if even_running {
                record.lease = None;
            } else if record.leased_at(now) {
                if record.cancel_requested {
                    return Ok(false);
                }
                record.cancel_requested = true;
                return Ok(true);
            }
            let change = Change::Cancel {
                message: Some("Cancelled at the client's request.".to_owned()),
            };
            Ok(record.apply(change, now).is_ok())
        })
        .await
    }

    /// `record` encoded, or -32602 if it is larger than a task may be.
    fn fitting(&self, record: &TaskRecord) -> Result<String, TaskError> {
        let body = encode(record, self.server_info)?;
        if self.max_task_bytes > 0 && body.len() > self.max_task_bytes {
            return Err(TaskError::InvalidInput(format!(
                "The task would store {} bytes, more than the {} allowed; send a smaller answer.",
                body.len(),
                self.max_task_bytes
            )));
        }
        Ok(body)
    }

    /// A read-modify-write of the caller's task with compare-and-swap,
    /// retried on conflict. `change` edits the fresh record and says
    /// whether there is anything to write; with `step`, a replayable step
    /// the change made due runs inline (see [`TaskService::with_inline_steps`]).
    async fn modify(
        &self,
        owner: &Owner,
        id: &str,
        now: Millis,
        step: bool,
        mut change: impl FnMut(&mut TaskRecord) -> Result<bool, TaskError>,
    ) -> Result<(), TaskError> {
        for _ in 0..CAS_ATTEMPTS {
            let (version, mut record) = self.visible(owner, id, now).await?;
            if !change(&mut record)? {
                return Ok(());
            }
            let stepped = if step {
                self.stepped(&record, now).await
            } else {
                None
            };
            let body = match stepped {
                Some((r, body)) => {
                    // The client's change must fit on its own, whatever the
                    // step then keeps of it.
                    if self.max_task_bytes > 0 {
                        self.fitting(&record)?;
                    }
                    record = r;
                    body
                }
                None => self.fitting(&record)?,
            };
            if save_encoded(self.store, Some(version), &record, &body)
                .await?
                .is_ok()
            {
                return Ok(());
            }
        }
        Err(TaskError::Busy)
    }
}

#[cfg(test)]
mod tests {
    use super::three_lines;
    use proptest::prelude::*;

    /// What `three_lines` stands for.
    fn by_splitn(body: &str) -> Option<(&str, &str, Option<&str>)> {
        let mut lines = body.splitn(3, '\n');
        Some((lines.next()?, lines.next()?, lines.next()))
    }

    #[test]
    fn three_lines_are_split_as_splitn_splits_them() {
        let bodies = [
            "",
            "\n",
            "\n\n",
            "\n\n\n",
            "head",
            "head\n",
            "head\nsnapshot",
            "head\nsnapshot\n",
            "head\nsnapshot\nrecord",
            "head\nsnapshot\nrecord\nmore\n",
            "{\"a\":1}\n{\"taskId\":\"tsk_é\"}\n{\"id\":\"ü\"}",
            "0123456\n89abcde\ng",
            "01234567\n9abcdef0\n",
            "é0123456789abcdef\n€0123456789abcdef\n",
        ];
        for body in bodies {
            assert_eq!(three_lines(body), by_splitn(body), "{body:?}");
        }
        // A line feed at every offset around the word size.
        for n in 0..40 {
            for k in 0..n {
                let mut b = vec![b'x'; n];
                b[k] = b'\n';
                for j in (k + 1..n).step_by(3) {
                    let mut c = b.clone();
                    c[j] = b'\n';
                    let s = String::from_utf8(c).unwrap_or_default();
                    assert_eq!(three_lines(&s), by_splitn(&s), "{s:?}");
                }
                let s = String::from_utf8(b).unwrap_or_default();
                assert_eq!(three_lines(&s), by_splitn(&s), "{s:?}");
            }
        }
    }

    proptest! {
        #[test]
        fn three_lines_agree_with_splitn(body in "(\\PC|\n){0,64}") {
            prop_assert_eq!(three_lines(&body), by_splitn(&body));
        }
    }
}
