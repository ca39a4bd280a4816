//! The runner: advances due tasks one step at a time.
//!
//! For each due task: **claim** (write a lease with compare-and-swap),
//! **step** (a pure call into the tool), **commit** (compare-and-swap on the
//! leased version). The version is the fence: a runner whose lease was taken
//! over, or whose record a client changed meanwhile, cannot commit on top.
//! After a conflict the runner re-reads; if its lease still stands it runs
//! the step again on the fresh record (steps are pure), so a client's
//! `tasks/cancel` or `tasks/update` that raced the step is kept and honoured.
//! A runner also refuses to commit once its own lease has expired.

use super::record::{Change, ChangeError, Lease, TaskRecord};
use super::{load, save};
use crate::error::RpcError;
use crate::protocol::tasks::TaskStatus;
use crate::store::{Store, StoreError, Version};
use crate::time::Millis;
use crate::tools::{StepContext, StepOutcome, ToolSet};
use serde_json::Value;

/// How often a commit is retried after a client changed the record.
const COMMIT_ATTEMPTS: usize = 4;

/// What one tick did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    /// The earliest due time left in the store, for alarms and timers.
    pub next_due: Option<Millis>,
}

impl std::fmt::Display for TickReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "due={} stepped={} finished={} cancelled={} purged={} skipped={} fenced={} errors={} next_due={}",
            self.due,
            self.stepped,
            self.finished,
            self.cancelled,
            self.purged,
            self.skipped,
            self.fenced,
            self.errors,
            self.next_due.map_or("none".to_owned(), |d| d.to_string())
        )
    }
}

/// A task this runner holds a lease on.
#[derive(Clone, Debug)]
pub struct Claim {
    pub version: Version,
    pub record: TaskRecord,
    pub lease: Lease,
}

/// What claiming a due task led to.
#[derive(Debug)]
pub enum ClaimOutcome {
    Claimed(Box<Claim>),
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
    /// The lease expired before the commit; nothing was written.
    LeaseExpired,
    /// Another runner holds the task now; nothing was written.
    Fenced,
}

/// A runner over one store and tool set.
pub struct Runner<'a, S: Store> {
    pub store: &'a S,
    pub tools: &'a ToolSet,
    /// Identifies this runner in leases.
    pub id: &'a str,
    pub lease_ms: u64,
    /// The server's identity, rendered into completed results.
    pub server_info: &'a Value,
}

fn io(e: StoreError) -> RpcError {
    super::store_unavailable(&e)
}

impl<S: Store> Runner<'_, S> {
    /// Advances up to `budget` due tasks by one step each.
    pub async fn tick(&self, now: Millis, budget: usize) -> TickReport {
        let mut report = TickReport::default();
        let keys = match self.store.due(now, budget).await {
            Ok(k) => k,
            Err(_) => {
                report.errors += 1;
                return report;
            }
        };
        report.due = keys.len();
        for key in keys {
            self.advance(&key, now, &mut report).await;
        }
        match self.store.next_due().await {
            Ok(next) => report.next_due = next,
            Err(_) => report.errors += 1,
        }
        report
    }

    async fn advance(&self, key: &str, now: Millis, report: &mut TickReport) {
        let claim = match self.claim(key, now).await {
            Ok(ClaimOutcome::Claimed(c)) => *c,
            Ok(ClaimOutcome::Purged) => return report.purged += 1,
            Ok(ClaimOutcome::Cancelled) => {
                report.cancelled += 1;
                report.finished += 1;
                return;
            }
            Ok(ClaimOutcome::Skipped) => return report.skipped += 1,
            Err(_) => return report.errors += 1,
        };
        let outcome = self.step(&claim, now);
        match self.commit(claim, outcome, now).await {
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

    /// Takes a lease on a due working task (or purges an expired one, or
    /// honours a pending cancellation).
    pub async fn claim(&self, key: &str, now: Millis) -> Result<ClaimOutcome, RpcError> {
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
        let lease = Lease {
            runner: self.id.to_owned(),
            expires_at: now.saturating_add(self.lease_ms as i64),
        };
        record.lease = Some(lease.clone());
        match save(self.store, Some(version), &record, self.server_info).await? {
            Ok(version) => Ok(ClaimOutcome::Claimed(Box::new(Claim {
                version,
                record,
                lease,
            }))),
            Err(_) => Ok(ClaimOutcome::Skipped),
        }
    }

    /// Runs the tool's step on the claimed record. Pure: no I/O.
    pub fn step(&self, claim: &Claim, now: Millis) -> StepOutcome {
        let r = &claim.record;
        let Some(tool) = self.tools.get(&r.tool) else {
            return StepOutcome::Fail(RpcError::internal(
                "Internal error: the task's tool is no longer available.",
            ));
        };
        tool.step(&StepContext {
            now,
            arguments: &r.arguments,
            state: &r.state,
            answers: &r.answers,
            capabilities: &r.capabilities,
        })
    }

    /// Commits a step's outcome with compare-and-swap on the leased version.
    pub async fn commit(
        &self,
        mut claim: Claim,
        mut outcome: StepOutcome,
        now: Millis,
    ) -> Result<CommitOutcome, RpcError> {
        for _ in 0..COMMIT_ATTEMPTS {
            if now >= claim.lease.expires_at {
                return Ok(CommitOutcome::LeaseExpired);
            }
            let mut record = claim.record.clone();
            apply_outcome(&mut record, outcome.clone(), now);
            match save(self.store, Some(claim.version), &record, self.server_info).await? {
                Ok(_) => return Ok(CommitOutcome::Committed(record.status())),
                Err(_) => {
                    // Someone wrote since the lease: a client (keep its change
                    // and step again on top of it) or a runner that took the
                    // task over (stop).
                    let Some((version, fresh)) = load(self.store, &claim.record.id).await? else {
                        return Ok(CommitOutcome::Fenced);
                    };
                    if fresh.lease.as_ref() != Some(&claim.lease)
                        || fresh.status() != TaskStatus::Working
                    {
                        return Ok(CommitOutcome::Fenced);
                    }
                    claim = Claim {
                        version,
                        record: fresh,
                        lease: claim.lease,
                    };
                    outcome = self.step(&claim, now);
                }
            }
        }
        Ok(CommitOutcome::Fenced)
    }
}

/// Applies a step's outcome to the record being committed: the lease ends,
/// a pending cancellation wins over more work (but not over a result the
/// step already produced), and a tool that breaks the rules fails its task.
fn apply_outcome(record: &mut TaskRecord, outcome: StepOutcome, now: Millis) {
    record.lease = None;
    record.steps += 1;
    let change = match outcome {
        StepOutcome::Continue { .. } | StepOutcome::NeedInput { .. } if record.cancel_requested => {
            Change::Cancel {
                message: Some("Cancelled at the client's request.".to_owned()),
            }
        }
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
            ChangeError::KeyReused(_) => "Internal error: the tool reused an input key.",
            ChangeError::Illegal(_) => "Internal error: the tool made an illegal state change.",
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
