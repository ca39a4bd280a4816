//! The runner: advances due tasks one step at a time.
//!
//! For each due task: **claim** (write a lease with compare-and-swap and
//! count an attempt), **step** (the tool's `async` step, which may call
//! remote APIs through its [`StepContext`]), **commit** (compare-and-swap on
//! the leased version). The version is the fence: a runner whose lease was
//! taken over cannot commit on top. After a conflict with a client (a
//! `tasks/cancel` that raced the step) the runner re-reads and applies the
//! same outcome on the fresh record, where the cancellation wins over more
//! work: a step is never re-run because its commit lost a race. A runner
//! also refuses to commit once its own lease has expired (the step overran
//! its deadline and will run again, at least once semantics).
//!
//! Attempts: each claim counts one. A step that asks to retry backs off
//! exponentially; a step that reaches [`RetryPolicy::max_attempts`] without
//! a result (it keeps asking to retry, or its runner keeps dying) ends its
//! task `failed`, so a poison task leaves the due index.
//!
//! **Replayable steps** (a tool that declares
//! [`Requirements::with_replayable_steps`](crate::tools::Requirements::with_replayable_steps))
//! skip the claim when a runner finds its task due for less than
//! [`UNLEASED_WINDOW_MS`] and no attempt of the step counted: the runner
//! steps the record as it read it and commits with compare-and-swap on that
//! version, one write instead of two. Two runners may then run the same
//! step at once; one commit wins and the other is fenced. With no lease on
//! the record, a `tasks/cancel` cancels the task at once, and the step's
//! outcome (even a result) is dropped. A step that never commits (its
//! runner died) is started unleased again only within the window; after
//! it, the step is claimed and counted like any other, so a poison task
//! still ends `failed`. A replayable step gets no outbound HTTP: its
//! requests fail, as on a runtime without it.
//!
//! **Inline steps.** A replayable step that is due when a client's request
//! writes its task (the `tools/call` that creates it with no delay before
//! its first step, the `tasks/update` that answers its last outstanding
//! input request) runs inside that request, on the record about to be
//! written, and the one write stores the task as the step left it
//! ([`Runner::step_inline`]). The request answers after that write, so
//! the client's next `tasks/get` already sees the step's outcome. A step
//! that does not finish (its instance traps, the request is cut off)
//! leaves nothing written, as any failed request; a step that overruns its
//! lease time or would make the task too large is dropped, and the task is
//! written due, for the runner.

use super::record::{Change, ChangeError, Lease, TaskRecord};
use super::{TaskError, decode, load, quarantine, save, save_encoded};
use crate::crypto::Keyring;
use crate::error::{RpcError, truncate};
use crate::outbound::{LocalFuture, NoOutbound, Outbound, OutboundPolicy};
use crate::protocol::tasks::TaskStatus;
use crate::store::{Store, StoreError, Version};
use crate::time::Millis;
use crate::tools::{
    CancelProbe, StepContext, StepEnv, StepOutcome, ToolSet, ToolSettings, no_settings,
};
use serde_json::Value;

/// Most due keys a slice's tick reads to find its own share.
const DUE_SCAN_MAX: usize = 1_000;

/// How often a commit is retried after a client changed the record.
const COMMIT_ATTEMPTS: usize = 4;

/// How long after its task became due (by the runner's clock) a replayable
/// step may start without a lease (see the module notes). Past it, the step
/// is claimed and counted. An unleased step may then still be running, for
/// up to the lease time, beside a claimed one; one of them commits.
pub const UNLEASED_WINDOW_MS: Millis = 2_000;

/// What one tick did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TickReport {
    /// Due tasks looked at.
    pub due: usize,
    /// Steps committed.
    pub stepped: usize,
    /// Tasks that reached a terminal status in this tick.
    pub finished: usize,
    /// Tasks cancelled at a step boundary.
    pub cancelled: usize,
    /// Expired tasks deleted.
    pub purged: usize,
    /// Tasks left alone (leased elsewhere, not due, changed under us).
    pub skipped: usize,
    /// Commits refused because the lease was lost.
    pub fenced: usize,
    /// Store or decoding failures.
    pub errors: usize,
    /// Due tasks left for the next tick because the outbound client had
    /// fewer requests left than a step of this tick used
    /// ([`crate::outbound::Outbound::remaining`]).
    pub held_back: usize,
    /// The earliest due time left in the store, for alarms and timers.
    pub next_due: Option<Millis>,
}

impl std::fmt::Display for TickReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "due={} stepped={} finished={} cancelled={} purged={} skipped={} fenced={} errors={} held_back={} next_due={}",
            self.due,
            self.stepped,
            self.finished,
            self.cancelled,
            self.purged,
            self.skipped,
            self.fenced,
            self.errors,
            self.held_back,
            self.next_due.map_or("none".to_owned(), |d| d.to_string())
        )
    }
}

impl TickReport {
    /// Adds `other` (a concurrent tick's report) to this one: the counts
    /// summed, the earlier due time kept.
    pub fn absorb(&mut self, other: &TickReport) {
        self.due += other.due;
        self.stepped += other.stepped;
        self.finished += other.finished;
        self.cancelled += other.cancelled;
        self.purged += other.purged;
        self.skipped += other.skipped;
        self.fenced += other.fenced;
        self.errors += other.errors;
        self.held_back += other.held_back;
        self.next_due = match (self.next_due, other.next_due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// One of `of` disjoint shares of the due work, so that several ticks can
/// run at once without reaching for the same tasks: a key belongs to the
/// slice its hash picks. Ticks on different slices overlap their store
/// commits (which a store that groups commits turns into shared syncs).
///
/// ```
/// use mcp_tasks_edge::tasks::runner::Slice;
///
/// let slices: Vec<Slice> = (0..4).map(|i| Slice::new(i, 4).unwrap()).collect();
/// let owners = slices.iter().filter(|s| s.owns("tsk_AAAAAAAAAAAAAAAAAAAAAA")).count();
/// assert_eq!(owners, 1);
/// assert!(Slice::WHOLE.owns("anything"));
/// assert!(Slice::new(4, 4).is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    index: u32,
    of: u32,
}

impl Slice {
    /// All the due work.
    pub const WHOLE: Slice = Slice { index: 0, of: 1 };

    /// Slice `index` of `of` (`None` unless `index < of`).
    pub fn new(index: u32, of: u32) -> Option<Slice> {
        (index < of).then_some(Slice { index, of })
    }

    /// Whether `key` is in this slice (FNV-1a of the key, modulo `of`).
    pub fn owns(&self, key: &str) -> bool {
        if self.of <= 1 {
            return true;
        }
        let hash = key.bytes().fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
        hash % self.of == self.index
    }

    /// How many slices the work is cut into.
    pub fn count(&self) -> u32 {
        self.of
    }
}

/// A task this runner holds a lease on, or steps without one (a
/// replayable step, see the module notes).
#[derive(Clone, Debug)]
pub struct Claim {
    /// The version the commit is conditioned on.
    pub version: Version,
    pub record: TaskRecord,
    /// The lease, and the step's time limit. Stored in the record only when
    /// `leased`.
    pub lease: Lease,
    /// Whether the lease was written (and the attempt counted) before the
    /// step.
    pub leased: bool,
}

/// What claiming a due task led to.
#[derive(Debug)]
pub enum ClaimOutcome {
    Claimed(Box<Claim>),
    /// The step had already started the maximum number of attempts without
    /// a result: the task was failed.
    GaveUp,
    /// Past its TTL: deleted.
    Purged,
    /// A cancellation request was honoured at this step boundary.
    Cancelled,
    /// Nothing to do now (not due, not working, leased elsewhere, changed
    /// under us, or gone).
    Skipped,
}

/// What committing a step led to.
#[derive(Debug, PartialEq, Eq)]
pub enum CommitOutcome {
    Committed(TaskStatus),
    /// The lease (for an unleased step, its time limit) expired before the
    /// commit; nothing was written.
    LeaseExpired,
    /// Another runner holds or stepped the task, or a client cancelled it
    /// during an unleased step; nothing was written.
    Fenced,
}

/// How a step that fails is tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts a step may start before its task fails.
    pub max_attempts: u32,
    /// The first backoff; each further attempt doubles it.
    pub base_ms: u64,
    /// The longest backoff.
    pub cap_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base_ms: 1_000,
            cap_ms: 60_000,
        }
    }
}

impl RetryPolicy {
    /// The wait before attempt `attempts + 1`, after `attempts` failed.
    pub fn backoff(&self, attempts: u32, asked: Option<u64>) -> u64 {
        let exp = self
            .base_ms
            .saturating_mul(1u64 << attempts.saturating_sub(1).min(32));
        asked.unwrap_or(exp).min(self.cap_ms)
    }
}

static NO_OUTBOUND: NoOutbound = NoOutbound;
static NO_POLICY: OutboundPolicy = OutboundPolicy {
    allow: Vec::new(),
    max_response_bytes: 0,
};
static NO_SETTINGS: fn(&str) -> Option<String> = no_settings;
static NO_LOG: fn(&str) = |_| {};

/// A runner over one store and tool set.
pub struct Runner<'a, S: Store> {
    pub store: &'a S,
    pub tools: &'a ToolSet,
    /// Identifies this runner in leases.
    pub id: &'a str,
    pub lease_ms: u64,
    /// The server's identity, rendered into completed results.
    pub server_info: &'a Value,
    /// Keys the idempotency keys handed to steps (the key a task was
    /// created under, while it is configured).
    pub keys: &'a Keyring,
    pub retry: RetryPolicy,
    /// The platform clock, read after a step to commit at the right time;
    /// `None` commits at the tick's `now`.
    pub clock: Option<&'a dyn Fn() -> Millis>,
    pub outbound: &'a dyn Outbound,
    pub policy: &'a OutboundPolicy,
    pub settings: &'a dyn ToolSettings,
    /// Operator log lines (JSON): tasks given up on, refused outbound
    /// requests, quarantined records.
    pub log: &'a dyn Fn(&str),
    /// Largest stored task; a step that would pass it fails the task
    /// (0: no limit).
    pub max_task_bytes: usize,
}

fn io(e: StoreError) -> TaskError {
    super::store_failed(e)
}

pub use crate::tools::idempotency_key;

/// Reads the task to tell a step whether cancellation was requested.
struct StoreProbe<'a, S: Store> {
    store: &'a S,
    id: &'a str,
}

impl<S: Store> CancelProbe for StoreProbe<'_, S> {
    fn cancel_requested<'b>(&'b self) -> LocalFuture<'b, bool> {
        Box::pin(async move {
            match load(self.store, self.id).await {
                Ok(Some((_, r))) => r.cancel_requested || r.status() == TaskStatus::Cancelled,
                _ => false,
            }
        })
    }
}

impl<'a, S: Store> Runner<'a, S> {
    /// A runner with no outbound HTTP, no tool settings, the default retry
    /// policy and the tick's time as its clock.
    pub fn new(
        store: &'a S,
        tools: &'a ToolSet,
        id: &'a str,
        lease_ms: u64,
        server_info: &'a Value,
        keys: &'a Keyring,
    ) -> Self {
        Runner {
            store,
            tools,
            id,
            lease_ms,
            server_info,
            keys,
            retry: RetryPolicy::default(),
            clock: None,
            outbound: &NO_OUTBOUND,
            policy: &NO_POLICY,
            settings: &NO_SETTINGS,
            log: &NO_LOG,
            max_task_bytes: 0,
        }
    }

    /// Advances up to `budget` due tasks by one step each.
    pub async fn tick(&self, now: Millis, budget: usize) -> TickReport {
        self.tick_slice(now, budget, Slice::WHOLE).await
    }

    /// Advances this slice's earliest due tasks by one step each, at most
    /// `budget / slices` of them (rounded up; see [`Slice`]; ticks on the
    /// other slices may run at the same time), so the slices of one round
    /// together advance at most `budget` rounded up to a multiple of the
    /// slice count. A slice finds its own due tasks behind another slice's
    /// backlog among the first `budget · slices` due keys (at most 1,000).
    pub async fn tick_slice(&self, now: Millis, budget: usize, slice: Slice) -> TickReport {
        let mut report = TickReport::default();
        let share = budget.div_ceil(slice.count().max(1) as usize);
        // The earliest due keys of every slice: this slice's own come from
        // further down when another slice has a backlog due before them.
        let scan = budget
            .saturating_mul(slice.count().max(1) as usize)
            .min(DUE_SCAN_MAX)
            .max(budget);
        let keys: Vec<String> = match self.store.due(now, scan).await {
            Ok(k) => k
                .into_iter()
                .filter(|k| slice.owns(k))
                .take(share)
                .collect(),
            Err(_) => {
                report.errors += 1;
                return report;
            }
        };
        report.due = keys.len();
        // The most outbound requests one step of this tick has sent: a
        // bounded client with fewer left claims no further task.
        let mut most = 0;
        for (i, key) in keys.iter().enumerate() {
            let before = self.outbound.remaining();
            if before.is_some_and(|left| left == 0 || left < most) {
                report.held_back = report.due - i;
                break;
            }
            // Each task is claimed at the time the tick reaches it: a lease
            // taken at the tick's start would already have run out for the
            // tasks behind slow steps.
            let at = self.clock.map_or(now, |c| c().max(now));
            self.advance(key, at, &mut report).await;
            if let (Some(b), Some(a)) = (before, self.outbound.remaining()) {
                most = most.max(b.saturating_sub(a));
            }
        }
        match self.store.next_due().await {
            Ok(next) => report.next_due = next,
            Err(_) => report.errors += 1,
        }
        report
    }

    async fn advance(&self, key: &str, now: Millis, report: &mut TickReport) {
        if super::idle::is_key(key) {
            // A record other than a task comes due when it may be gone: a
            // scratch or quarantined one when it expires, a per-owner one
            // when it may hold nothing live.
            match super::idle::lapse(self.store, key, now).await {
                Ok(super::idle::Lapse::Deleted) => report.purged += 1,
                Ok(_) => {}
                Err(_) => report.errors += 1,
            }
            return;
        }
        let claim = match self.claim(key, now).await {
            Ok(ClaimOutcome::Claimed(c)) => *c,
            Ok(ClaimOutcome::Purged) => return report.purged += 1,
            Ok(ClaimOutcome::Cancelled) => {
                report.cancelled += 1;
                report.finished += 1;
                return;
            }
            Ok(ClaimOutcome::GaveUp) => {
                report.finished += 1;
                report.errors += 1;
                return;
            }
            Ok(ClaimOutcome::Skipped) => return report.skipped += 1,
            Err(TaskError::Unreadable) => {
                report.errors += 1;
                return self.quarantine(key, now).await;
            }
            Err(_) => return report.errors += 1,
        };
        let outcome = self.step(&claim, now).await;
        let done = self.clock.map_or(now, |c| c().max(now));
        match self.commit(claim, outcome, done).await {
            Ok(CommitOutcome::Committed(status)) => {
                report.stepped += 1;
                if status.is_terminal() {
                    report.finished += 1;
                }
                if status == TaskStatus::Cancelled {
                    report.cancelled += 1;
                }
            }
            Ok(CommitOutcome::LeaseExpired | CommitOutcome::Fenced) => report.fenced += 1,
            Err(_) => report.errors += 1,
        }
    }

    /// Moves the undecodable record under `key` out of the due index: to
    /// [`quarantine::key`] (due when the task would have expired, then
    /// purged), logged with its key once. It is never retried, so it never
    /// holds up other due work. An operator finds it under the `qrn_`
    /// prefix until then.
    async fn quarantine(&self, key: &str, now: Millis) {
        let Ok(Some(entry)) = self.store.get(key).await else {
            return;
        };
        if decode(&entry.body).is_ok() {
            return;
        }
        let until = quarantine::expiry(&entry.body)
            .unwrap_or_else(|| now.saturating_add(quarantine::DEFAULT_HOLD_MS));
        let target = quarantine::key(key);
        let moved = match self
            .store
            .put(&target, None, &entry.body, Some(until.max(now)))
            .await
        {
            Ok(_) => true,
            // Moved before (a crash between the two writes): just remove it.
            Err(StoreError::Conflict { .. }) => false,
            Err(_) => return,
        };
        if self.store.delete(key, entry.version).await.is_ok() && moved {
            let line = serde_json::json!({
                "event": "quarantine", "key": key, "moved_to": target,
                "bytes": entry.body.len(), "purge_at": until,
                "reason": "the stored task could not be decoded",
            });
            (self.log)(&line.to_string());
        }
    }

    /// Takes a lease on a due working task (or purges an expired one, or
    /// honours a pending cancellation). A replayable step within
    /// [`UNLEASED_WINDOW_MS`] is handed out without one: nothing is written
    /// and the claim is not `leased`.
    pub async fn claim(&self, key: &str, now: Millis) -> Result<ClaimOutcome, TaskError> {
        let Some((version, mut record)) = load(self.store, key).await? else {
            return Ok(ClaimOutcome::Skipped);
        };
        if record.is_expired(now) {
            return match self.store.delete(key, version).await {
                Ok(()) => Ok(ClaimOutcome::Purged),
                Err(StoreError::Conflict { .. }) => Ok(ClaimOutcome::Skipped),
                Err(e) => Err(io(e)),
            };
        }
        if record.status() != TaskStatus::Working || record.leased_at(now) {
            return Ok(ClaimOutcome::Skipped);
        }
        if record.cancel_requested {
            record.lease = None;
            let change = Change::Cancel {
                message: Some("Cancelled at the client's request.".to_owned()),
            };
            if record.apply(change, now).is_err() {
                return Ok(ClaimOutcome::Skipped);
            }
            return match save(self.store, Some(version), &record, self.server_info).await? {
                Ok(_) => Ok(ClaimOutcome::Cancelled),
                Err(_) => Ok(ClaimOutcome::Skipped),
            };
        }
        let due = record.lease.is_some() || record.wake_at.is_some_and(|w| w <= now);
        if !due {
            return Ok(ClaimOutcome::Skipped);
        }
        if record.attempts >= self.retry.max_attempts {
            // Every attempt so far started and never committed: its runner
            // died, trapped or overran the deadline. Stop here.
            record.lease = None;
            let change = Change::Fail {
                error: RpcError::internal(format!(
                    "Internal error: the step did not finish after {} attempts.",
                    record.attempts
                )),
                message: None,
            };
            if record.apply(change, now).is_err() {
                return Ok(ClaimOutcome::Skipped);
            }
            return match save(self.store, Some(version), &record, self.server_info).await? {
                Ok(_) => {
                    let line = serde_json::json!({
                        "event": "task-gave-up", "task": record.id, "tool": record.tool,
                        "attempts": record.attempts,
                    });
                    (self.log)(&line.to_string());
                    Ok(ClaimOutcome::GaveUp)
                }
                Err(_) => Ok(ClaimOutcome::Skipped),
            };
        }
        let lease = Lease {
            runner: self.id.to_owned(),
            expires_at: now.saturating_add(self.lease_ms as i64),
        };
        if self.unleased(&record, now) {
            return Ok(ClaimOutcome::Claimed(Box::new(Claim {
                version,
                record,
                lease,
                leased: false,
            })));
        }
        record.attempts = record.attempts.saturating_add(1);
        record.lease = Some(lease.clone());
        match save(self.store, Some(version), &record, self.server_info).await? {
            Ok(version) => Ok(ClaimOutcome::Claimed(Box::new(Claim {
                version,
                record,
                lease,
                leased: true,
            }))),
            Err(_) => Ok(ClaimOutcome::Skipped),
        }
    }

    /// Whether the due, unleased `record` may step without a claim: its tool
    /// declares replayable steps, no attempt of this step was counted, and
    /// it became due less than [`UNLEASED_WINDOW_MS`] ago.
    fn unleased(&self, record: &TaskRecord, now: Millis) -> bool {
        record.lease.is_none()
            && record.attempts == 0
            && record
                .wake_at
                .is_some_and(|w| w <= now && now.saturating_sub(w) < UNLEASED_WINDOW_MS)
            && self
                .tools
                .get(&record.tool)
                .is_some_and(|t| t.requirements().replayable_steps)
    }

    /// When a step started at `now` under `lease` must be done: a margin
    /// before the lease ends, so that its commit still lands in time.
    fn deadline(&self, lease: &Lease) -> Millis {
        let margin = (self.lease_ms / 5).min(5_000) as i64;
        lease.expires_at.saturating_sub(margin)
    }

    /// Runs the due replayable step of `record`, which a client's request
    /// is about to write (see the module notes on inline steps), and returns
    /// the record as the step's commit would leave it (the step counted, its
    /// outcome applied) with its encoding, for the request's one write.
    /// `None` when no step ran (not working, not due, cancellation asked, a
    /// tool without replayable steps) or its outcome was dropped (it overran
    /// its lease time, or would make the task larger than allowed).
    pub async fn step_inline(
        &self,
        record: &TaskRecord,
        now: Millis,
    ) -> Option<(TaskRecord, String)> {
        if record.status() != TaskStatus::Working
            || record.cancel_requested
            || !self.unleased(record, now)
        {
            return None;
        }
        let lease = Lease {
            runner: self.id.to_owned(),
            expires_at: now.saturating_add(self.lease_ms as i64),
        };
        let outcome = self.run_step(record, &lease, now).await;
        let done = self.clock.map_or(now, |c| c().max(now));
        if done >= lease.expires_at {
            return None;
        }
        let mut stepped = record.clone();
        stepped.attempts = stepped.attempts.saturating_add(1);
        apply_outcome(&mut stepped, outcome, done, &self.retry);
        let body = super::encode(&stepped, self.server_info).ok()?;
        if self.max_task_bytes > 0 && body.len() > self.max_task_bytes {
            return None;
        }
        Some((stepped, body))
    }

    /// Runs the tool's step on the claimed record.
    pub async fn step(&self, claim: &Claim, now: Millis) -> StepOutcome {
        self.run_step(&claim.record, &claim.lease, now).await
    }

    /// Runs the tool's step on `r`, within `lease`'s time.
    async fn run_step(&self, r: &TaskRecord, lease: &Lease, now: Millis) -> StepOutcome {
        let Some(tool) = self.tools.get(&r.tool) else {
            return StepOutcome::Fail(RpcError::internal(
                "Internal error: the task's tool is no longer available.",
            ));
        };
        let probe = StoreProbe {
            store: self.store,
            id: &r.id,
        };
        // A replayable step reaches nothing outside its task.
        let outbound = if tool.requirements().replayable_steps {
            &NO_OUTBOUND as &dyn Outbound
        } else {
            self.outbound
        };
        let cx = StepContext {
            now,
            deadline: self.deadline(lease),
            task_id: &r.id,
            step: r.steps,
            attempt: r.attempts.max(1),
            arguments: &r.arguments,
            state: &r.state,
            answers: &r.answers,
            capabilities: &r.capabilities,
            secret: r
                .key_id
                .as_deref()
                .and_then(|id| self.keys.by_id(id))
                .unwrap_or(self.keys.current())
                .secret(),
            idempotency_key: std::cell::OnceCell::new(),
            env: StepEnv {
                outbound,
                policy: self.policy,
                settings: self.settings,
                cancel: &probe,
                log: self.log,
                clock: self.clock,
            },
        };
        tool.step(&cx).await
    }

    /// Commits a step's outcome with compare-and-swap on the leased version.
    /// After a conflict with a client's change, the same outcome is applied
    /// on the fresh record (the step is not run again).
    pub async fn commit(
        &self,
        mut claim: Claim,
        outcome: StepOutcome,
        now: Millis,
    ) -> Result<CommitOutcome, TaskError> {
        for _ in 0..COMMIT_ATTEMPTS {
            if now >= claim.lease.expires_at {
                return Ok(CommitOutcome::LeaseExpired);
            }
            let mut record = claim.record.clone();
            if !claim.leased {
                // The attempt is counted with its outcome.
                record.attempts = record.attempts.saturating_add(1);
            }
            apply_outcome(&mut record, outcome.clone(), now, &self.retry);
            let mut body = super::encode(&record, self.server_info)?;
            if self.max_task_bytes > 0 && body.len() > self.max_task_bytes {
                // The step's state or result would make the task larger than
                // allowed: the task fails instead, and stays small.
                record = claim.record.clone();
                record.state = Value::Null;
                record.answers.clear();
                let error = RpcError::internal(format!(
                    "The task's state or result is larger than the {} bytes a task may store.",
                    self.max_task_bytes
                ));
                apply_outcome(&mut record, StepOutcome::Fail(error), now, &self.retry);
                body = super::encode(&record, self.server_info)?;
            }
            match save_encoded(self.store, Some(claim.version), &record, &body).await? {
                Ok(_) => return Ok(CommitOutcome::Committed(record.status())),
                Err(_) => {
                    // Someone wrote since the lease (or the read): a client
                    // (keep its change and apply the outcome on top of it)
                    // or a runner that took the task over or stepped it
                    // (stop).
                    let Some((version, fresh)) = load(self.store, &claim.record.id).await? else {
                        return Ok(CommitOutcome::Fenced);
                    };
                    let ours = if claim.leased {
                        fresh.lease.as_ref() == Some(&claim.lease)
                    } else {
                        fresh.lease.is_none()
                            && fresh.steps == claim.record.steps
                            && fresh.attempts == claim.record.attempts
                    };
                    if !ours || fresh.status() != TaskStatus::Working {
                        return Ok(CommitOutcome::Fenced);
                    }
                    claim = Claim {
                        version,
                        record: fresh,
                        ..claim
                    };
                }
            }
        }
        Ok(CommitOutcome::Fenced)
    }
}

/// Applies a step's outcome to the record being committed: the lease ends,
/// a pending cancellation wins over more work (but not over a result the
/// step already produced), and a tool that breaks the rules fails its task.
fn apply_outcome(record: &mut TaskRecord, outcome: StepOutcome, now: Millis, retry: &RetryPolicy) {
    record.lease = None;
    if matches!(outcome, StepOutcome::Retry { .. }) {
        // The same step runs again: same step number, same key.
    } else {
        record.steps += 1;
        record.attempts = 0;
    }
    let change = match outcome {
        StepOutcome::Continue { .. }
        | StepOutcome::NeedInput { .. }
        | StepOutcome::Retry { .. }
            if record.cancel_requested =>
        {
            Change::Cancel {
                message: Some("Cancelled at the client's request.".to_owned()),
            }
        }
        StepOutcome::Retry { error, .. } if record.attempts >= retry.max_attempts => Change::Fail {
            error: RpcError::internal(format!(
                "The step failed after {} attempts: {}",
                record.attempts,
                truncate(&error, 300)
            )),
            message: None,
        },
        StepOutcome::Retry { error, after_ms } => Change::Retry {
            wake_at: now.saturating_add(
                retry
                    .backoff(record.attempts, after_ms)
                    .min(i64::MAX as u64) as i64,
            ),
            message: Some(format!(
                "Attempt {} failed ({}); retrying.",
                record.attempts,
                truncate(&error, 200)
            )),
        },
        StepOutcome::Continue {
            state,
            wake_in_ms,
            message,
        } => Change::StepDone {
            state,
            wake_at: now.saturating_add(wake_in_ms.min(i64::MAX as u64) as i64),
            message,
        },
        StepOutcome::NeedInput {
            state,
            requests,
            message,
        } => Change::NeedInput {
            requests,
            state,
            message,
        },
        StepOutcome::Complete(result) => Change::Complete {
            result,
            message: Some("The task completed.".to_owned()),
        },
        StepOutcome::Fail(error) => Change::Fail {
            error,
            message: None,
        },
        StepOutcome::Cancel(message) => Change::Cancel {
            message: Some(message),
        },
    };
    if let Err(e) = record.apply(change, now) {
        let message = match e {
            ChangeError::KeyReused(_) => "Internal error: the tool reused an input key.".to_owned(),
            ChangeError::NoRequests => {
                "Internal error: the tool asked for input without a request.".to_owned()
            }
            ChangeError::Undeclared(method) => format!(
                "The tool asked for {}, which the client did not declare it can answer \
                 (the tool's requirements should name it).",
                truncate(&method, 64)
            ),
            ChangeError::Illegal(_) => {
                "Internal error: the tool made an illegal state change.".to_owned()
            }
        };
        let _ = record.apply(
            Change::Fail {
                error: RpcError::internal(message),
                message: None,
            },
            now,
        );
    }
}
