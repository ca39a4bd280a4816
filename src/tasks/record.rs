//! The persisted task record and the one place where it changes state.

use std::collections::BTreeMap;

use crate::sorted::SortedSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::state::{self, Event, IllegalTransition};
use crate::error::RpcError;
use crate::protocol::meta::ClientCapabilities;
use crate::protocol::tasks::{TaskPayload, TaskStatus, TaskWire};
use crate::protocol::tools::{CallToolResult, InputRequests};
use crate::protocol::{meta_keys, result_type};
use crate::time::{Millis, iso8601};

pub use crate::owner::Owner;

/// Where the task is in its lifecycle, with the payload its status implies.
///
/// Stored as `{"status": ..., <payload>}`. It is read through a flat struct
/// of every member rather than serde's internally tagged derive, which
/// would buffer the whole phase (a result included) before reading it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", try_from = "PhaseFields")]
pub enum Phase {
    Working,
    InputRequired { input_requests: InputRequests },
    Completed { result: CallToolResult },
    Failed { error: RpcError },
    Cancelled,
}

/// A stored phase as it is read: the status and whichever payload it has.
/// Members the status does not use are ignored, as before.
#[derive(Deserialize)]
struct PhaseFields {
    status: TaskStatus,
    #[serde(default)]
    input_requests: Option<InputRequests>,
    #[serde(default)]
    result: Option<CallToolResult>,
    #[serde(default)]
    error: Option<RpcError>,
}

impl TryFrom<PhaseFields> for Phase {
    type Error = &'static str;

    fn try_from(f: PhaseFields) -> Result<Self, Self::Error> {
        Ok(match f.status {
            TaskStatus::Working => Phase::Working,
            TaskStatus::InputRequired => Phase::InputRequired {
                input_requests: f.input_requests.ok_or("missing field `input_requests`")?,
            },
            TaskStatus::Completed => Phase::Completed {
                result: f.result.ok_or("missing field `result`")?,
            },
            TaskStatus::Failed => Phase::Failed {
                error: f.error.ok_or("missing field `error`")?,
            },
            TaskStatus::Cancelled => Phase::Cancelled,
        })
    }
}

impl Phase {
    pub fn status(&self) -> TaskStatus {
        match self {
            Phase::Working => TaskStatus::Working,
            Phase::InputRequired { .. } => TaskStatus::InputRequired,
            Phase::Completed { .. } => TaskStatus::Completed,
            Phase::Failed { .. } => TaskStatus::Failed,
            Phase::Cancelled => TaskStatus::Cancelled,
        }
    }
}

/// A runner's claim on a task while it executes a step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub runner: String,
    pub expires_at: Millis,
}

/// Everything the server keeps about one task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub id: String,
    pub owner: Owner,
    pub tool: String,
    pub arguments: Map<String, Value>,
    /// The capabilities declared by the request that created the task; steps
    /// may only ask for input the client can answer.
    pub capabilities: ClientCapabilities,
    pub phase: Phase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    pub created_at: Millis,
    pub last_updated_at: Millis,
    pub ttl_ms: u64,
    pub poll_interval_ms: u64,
    /// The tool's own state between steps.
    pub state: Value,
    /// When the next step is due (working tasks only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_at: Option<Millis>,
    /// Every input key ever issued: keys are unique over the task's life.
    #[serde(default)]
    pub issued_keys: SortedSet,
    /// Responses received for the current input round, for the next step.
    #[serde(default)]
    pub answers: BTreeMap<String, Value>,
    #[serde(default)]
    pub cancel_requested: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// Committed steps so far.
    #[serde(default)]
    pub steps: u64,
    /// Attempts started at the current step (reset when a step makes
    /// progress).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempts: u32,
    /// The id of the state key current when the task was created: its
    /// steps' idempotency keys are derived with it while it is configured,
    /// so a key rotation does not change them mid-task. Absent in records
    /// written before keys had ids (the current key is used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A change to a task's lifecycle, with the data it brings.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    NeedInput {
        requests: InputRequests,
        state: Value,
        message: Option<String>,
    },
    InputReceived,
    StepDone {
        state: Value,
        wake_at: Millis,
        message: Option<String>,
    },
    /// The step failed and runs again at `wake_at`: the same step, with the
    /// same state and the same answers.
    Retry {
        wake_at: Millis,
        message: Option<String>,
    },
    Complete {
        result: CallToolResult,
        message: Option<String>,
    },
    Fail {
        error: RpcError,
        message: Option<String>,
    },
    Cancel {
        message: Option<String>,
    },
}

impl Change {
    fn event(&self) -> Event {
        match self {
            Change::NeedInput { .. } => Event::NeedInput,
            Change::InputReceived => Event::InputReceived,
            Change::StepDone { .. } | Change::Retry { .. } => Event::StepDone,
            Change::Complete { .. } => Event::Complete,
            Change::Fail { .. } => Event::Fail,
            Change::Cancel { .. } => Event::CancelRequested,
        }
    }
}

/// Why a change could not be applied.
#[derive(Clone, Debug, PartialEq)]
pub enum ChangeError {
    Illegal(IllegalTransition),
    /// A step asked for input under a key the task already used.
    KeyReused(String),
    /// A step asked for input without a request: nothing the client could
    /// answer, so the task would wait until it expires.
    NoRequests,
    /// A step asked for input of a kind (`method`) the task's client did
    /// not declare it can answer.
    Undeclared(String),
}

impl std::fmt::Display for ChangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChangeError::Illegal(e) => e.fmt(f),
            ChangeError::KeyReused(k) => write!(f, "input key {k:?} was already used by this task"),
            ChangeError::NoRequests => f.write_str("input was asked for without a request"),
            ChangeError::Undeclared(m) => write!(f, "the client did not declare it can answer {m}"),
        }
    }
}

impl TaskRecord {
    pub fn status(&self) -> TaskStatus {
        self.phase.status()
    }

    /// When the task stops existing for callers.
    pub fn expires_at(&self) -> Millis {
        self.created_at
            .saturating_add(self.ttl_ms.min(i64::MAX as u64) as i64)
    }

    pub fn is_expired(&self, now: Millis) -> bool {
        now >= self.expires_at()
    }

    /// Whether `owner` may see this task at `now`.
    pub fn visible_to(&self, owner: &Owner, now: Millis) -> bool {
        self.owner == *owner && !self.is_expired(now)
    }

    /// Whether a runner holds an unexpired lease at `now`.
    pub fn leased_at(&self, now: Millis) -> bool {
        self.lease.as_ref().is_some_and(|l| l.expires_at > now)
    }

    /// The time a runner should next look at this task: its wake-up (or the
    /// end of a running step's lease, so a crashed runner's task comes back),
    /// and in any case its expiry, when the sweep purges it.
    pub fn due_at(&self) -> Millis {
        let work = match (&self.lease, self.status()) {
            (Some(lease), _) => Some(lease.expires_at),
            (None, TaskStatus::Working) => self.wake_at,
            _ => None,
        };
        work.map_or(self.expires_at(), |w| w.min(self.expires_at()))
    }

    /// Applies a lifecycle change. This is the only place that moves the
    /// status. Changes to a terminal task are absorbed
    /// without touching it.
    pub fn apply(&mut self, change: Change, now: Millis) -> Result<(), ChangeError> {
        let from = self.status();
        let to = state::next(Some(from), change.event()).map_err(ChangeError::Illegal)?;
        if from.is_terminal() {
            return Ok(());
        }
        if let Change::NeedInput { requests, .. } = &change {
            if requests.is_empty() {
                return Err(ChangeError::NoRequests);
            }
            if let Some(k) = requests.keys().find(|k| self.issued_keys.contains(k)) {
                return Err(ChangeError::KeyReused(k.clone()));
            }
            // Never a request the client cannot answer: the task would wait
            // for an answer that will not come.
            if let Some(r) = requests
                .values()
                .find(|r| !self.capabilities.can_answer(&r.method, &r.params))
            {
                return Err(ChangeError::Undeclared(r.method.clone()));
            }
        }
        match change {
            Change::NeedInput {
                requests,
                state,
                message,
            } => {
                self.issued_keys.extend(requests.keys().cloned());
                self.answers.clear();
                self.phase = Phase::InputRequired {
                    input_requests: requests,
                };
                self.state = state;
                self.wake_at = None;
                self.status_message = message;
            }
            Change::InputReceived => {
                self.phase = Phase::Working;
                self.wake_at = Some(now);
                self.status_message = Some("Input received; resuming.".to_owned());
            }
            Change::StepDone {
                state,
                wake_at,
                message,
            } => {
                self.answers.clear();
                self.state = state;
                self.wake_at = Some(wake_at);
                if message.is_some() {
                    self.status_message = message;
                }
            }
            Change::Retry { wake_at, message } => {
                self.wake_at = Some(wake_at);
                if message.is_some() {
                    self.status_message = message;
                }
            }
            Change::Complete { result, message } => {
                self.phase = Phase::Completed { result };
                self.finish(message);
            }
            Change::Fail { error, message } => {
                self.status_message = Some(message.unwrap_or_else(|| error.message.clone()));
                self.phase = Phase::Failed { error };
                self.finish(None);
            }
            Change::Cancel { message } => {
                self.phase = Phase::Cancelled;
                self.finish(message.or_else(|| Some("The task was cancelled.".to_owned())));
            }
        }
        debug_assert_eq!(self.status(), to);
        self.touch(now);
        Ok(())
    }

    /// Records answers to outstanding input requests. Keys that are not
    /// outstanding are ignored. Once every request is answered the task
    /// resumes. Returns whether anything changed.
    pub fn record_answers(&mut self, responses: &Map<String, Value>, now: Millis) -> bool {
        let Phase::InputRequired { input_requests } = &mut self.phase else {
            return false;
        };
        let mut changed = false;
        for (key, response) in responses {
            if input_requests.remove(key).is_some() {
                self.answers.insert(key.clone(), response.clone());
                changed = true;
            }
        }
        if !changed {
            return false;
        }
        if input_requests.is_empty() {
            // Working is always reachable from input_required.
            let _ = self.apply(Change::InputReceived, now);
        } else {
            self.touch(now);
        }
        true
    }

    /// The one place `lastUpdatedAt` moves (never backwards, whatever the
    /// clocks of the replicas say).
    fn touch(&mut self, now: Millis) {
        self.last_updated_at = now.max(self.last_updated_at);
    }

    fn finish(&mut self, message: Option<String>) {
        if message.is_some() {
            self.status_message = message;
        }
        self.wake_at = None;
        self.answers.clear();
        self.cancel_requested = false;
        self.state = Value::Null;
        // No step runs for a finished task: a lease left on it (one that
        // ran out before a cancel) would keep it due at that lease's end.
        self.lease = None;
    }

    /// The task as it goes on the wire, with the payload its status implies.
    pub fn wire<'a>(
        &'a self,
        result_type: Option<&'static str>,
        server_info: &Value,
        meta: Option<Value>,
    ) -> TaskWire<'a> {
        let payload = match &self.phase {
            Phase::Working | Phase::Cancelled => TaskPayload::None,
            Phase::InputRequired { input_requests } => {
                TaskPayload::InputRequests { input_requests }
            }
            Phase::Completed { result } => TaskPayload::Result {
                result: complete_result(result, server_info),
            },
            Phase::Failed { error } => TaskPayload::Error { error },
        };
        TaskWire {
            result_type,
            task_id: &self.id,
            status: self.status(),
            status_message: self.status_message.as_deref(),
            created_at: iso8601(self.created_at),
            last_updated_at: iso8601(self.last_updated_at),
            ttl_ms: Some(self.ttl_ms),
            poll_interval_ms: self.poll_interval_ms,
            payload,
            meta,
        }
    }
}

/// A `CallToolResult` as a complete result: its own `resultType` and the
/// server's identity in `_meta`.
pub fn complete_result(result: &CallToolResult, server_info: &Value) -> Value {
    let mut v = serde_json::to_value(result).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut v {
        map.insert("resultType".to_owned(), Value::from(result_type::COMPLETE));
        let mut meta = Map::new();
        meta.insert(meta_keys::SERVER_INFO.to_owned(), server_info.clone());
        map.insert("_meta".to_owned(), Value::Object(meta));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::tools::InputRequest;
    use serde_json::json;

    fn record() -> TaskRecord {
        TaskRecord {
            id: "t1".into(),
            owner: Owner {
                tenant: "a".into(),
                principal: "p".into(),
            },
            tool: "x".into(),
            arguments: Map::new(),
            // A client that can answer form elicitations.
            capabilities: crate::json::from_str(r#"{"elicitation": {}}"#).unwrap_or_default(),
            phase: Phase::Working,
            status_message: None,
            created_at: 1_000,
            last_updated_at: 1_000,
            ttl_ms: 10_000,
            poll_interval_ms: 500,
            state: Value::Null,
            wake_at: Some(2_000),
            issued_keys: SortedSet::new(),
            answers: BTreeMap::new(),
            cancel_requested: false,
            lease: None,
            steps: 0,
            attempts: 0,
            key_id: None,
        }
    }

    #[test]
    fn input_the_client_cannot_answer_is_refused() {
        let mut r = record();
        r.capabilities = ClientCapabilities::default();
        assert_eq!(
            r.apply(ask("k1"), 1_100),
            Err(ChangeError::Undeclared("elicitation/create".into()))
        );
        assert_eq!(r.status(), TaskStatus::Working, "nothing changed");
        let mut requests = InputRequests::new();
        requests.insert(
            "m".into(),
            InputRequest {
                method: "sampling/createMessage".into(),
                params: json!({"messages": [], "maxTokens": 1}),
            },
        );
        let sample = Change::NeedInput {
            requests,
            state: json!(1),
            message: None,
        };
        let mut r = record();
        assert_eq!(
            r.apply(sample.clone(), 1_100),
            Err(ChangeError::Undeclared("sampling/createMessage".into()))
        );
        r.capabilities = crate::json::from_str(r#"{"sampling": {}}"#).unwrap_or_default();
        assert_eq!(r.apply(sample, 1_100), Ok(()));
        assert_eq!(r.status(), TaskStatus::InputRequired);
    }

    fn ask(key: &str) -> Change {
        let mut requests = InputRequests::new();
        requests.insert(
            key.into(),
            InputRequest::elicit_form("?", json!({"type":"object","properties":{}})),
        );
        Change::NeedInput {
            requests,
            state: json!(1),
            message: None,
        }
    }

    #[test]
    fn apply_moves_status_and_last_updated_at() {
        let mut r = record();
        r.apply(ask("k1"), 3_000).unwrap();
        assert_eq!(r.status(), TaskStatus::InputRequired);
        assert_eq!(r.last_updated_at, 3_000);
        assert_eq!(r.due_at(), 11_000, "waiting on input: due at expiry");
        r.apply(Change::InputReceived, 4_000).unwrap();
        assert_eq!(
            (r.status(), r.wake_at, r.due_at()),
            (TaskStatus::Working, Some(4_000), 4_000)
        );
        r.apply(
            Change::Complete {
                result: CallToolResult::text("ok"),
                message: None,
            },
            5_000,
        )
        .unwrap();
        assert_eq!(r.status(), TaskStatus::Completed);
        r.apply(Change::Cancel { message: None }, 6_000).unwrap();
        assert_eq!(
            (r.status(), r.last_updated_at),
            (TaskStatus::Completed, 5_000),
            "terminal absorbs"
        );
    }

    #[test]
    fn keys_are_unique_over_the_tasks_life() {
        let mut r = record();
        r.apply(ask("k1"), 3_000).unwrap();
        r.apply(Change::InputReceived, 4_000).unwrap();
        let before = r.clone();
        assert_eq!(
            r.apply(ask("k1"), 5_000),
            Err(ChangeError::KeyReused("k1".into()))
        );
        assert_eq!(r, before, "a refused change leaves the record as it was");
        r.apply(ask("k2"), 5_000).unwrap();
    }

    #[test]
    fn partial_answers_keep_waiting_and_unknown_keys_are_ignored() {
        let mut r = record();
        let Change::NeedInput { mut requests, .. } = ask("a") else {
            unreachable!()
        };
        let Change::NeedInput { requests: b, .. } = ask("b") else {
            unreachable!()
        };
        requests.extend(b);
        r.apply(
            Change::NeedInput {
                requests,
                state: Value::Null,
                message: None,
            },
            2_000,
        )
        .unwrap();
        let answer = json!({"action": "accept", "content": {}});
        let mut m = Map::new();
        m.insert("zzz".into(), answer.clone());
        assert!(!r.record_answers(&m, 2_500), "unknown keys change nothing");
        assert_eq!(r.last_updated_at, 2_000);
        m.insert("a".into(), answer.clone());
        assert!(r.record_answers(&m, 3_000));
        assert_eq!(r.status(), TaskStatus::InputRequired);
        assert_eq!(r.last_updated_at, 3_000);
        assert!(
            !r.record_answers(&m, 3_500),
            "answered keys are not outstanding any more"
        );
        m.insert("b".into(), answer);
        assert!(r.record_answers(&m, 4_000));
        assert_eq!(r.status(), TaskStatus::Working);
        assert_eq!(r.answers.len(), 2);
    }

    #[test]
    fn illegal_change_is_refused() {
        let mut r = record();
        let e = r.apply(Change::InputReceived, 2_000).unwrap_err();
        assert!(matches!(e, ChangeError::Illegal(_)));
        assert_eq!(r.last_updated_at, 1_000);
    }

    #[test]
    fn clock_skew_never_moves_last_updated_at_backwards() {
        let mut r = record();
        r.apply(
            Change::StepDone {
                state: Value::Null,
                wake_at: 5_000,
                message: None,
            },
            500,
        )
        .unwrap();
        assert_eq!(r.last_updated_at, 1_000);
    }

    #[test]
    fn every_phase_reads_back_what_was_stored_in_any_member_order() {
        let Change::NeedInput { requests, .. } = ask("k") else {
            unreachable!()
        };
        let phases = [
            Phase::Working,
            Phase::InputRequired {
                input_requests: requests,
            },
            Phase::Completed {
                result: CallToolResult::structured("done", json!({"n": 1})),
            },
            Phase::Failed {
                error: RpcError::invalid_params("bad"),
            },
            Phase::Cancelled,
        ];
        for phase in phases {
            let stored = serde_json::to_value(&phase).unwrap();
            assert_eq!(stored["status"], phase.status().as_str());
            let back: Phase = serde_json::from_value(stored.clone()).unwrap();
            assert_eq!(back, phase);
            // The status last, and a member it does not use: still the same.
            let Value::Object(members) = stored else {
                unreachable!()
            };
            let mut text = String::from("{\"unused\":[1,{}],");
            for (k, v) in members.iter().filter(|(k, _)| *k != "status") {
                text += &format!("{}:{v},", Value::from(k.as_str()));
            }
            text += &format!("\"status\":\"{}\"}}", phase.status().as_str());
            assert_eq!(crate::json::from_str::<Phase>(&text).unwrap(), phase);
        }
    }

    #[test]
    fn a_phase_without_its_payload_or_status_is_refused() {
        for text in [
            r#"{"status":"completed"}"#,
            r#"{"status":"failed","result":{"content":[]}}"#,
            r#"{"status":"input_required"}"#,
            r#"{"status":"paused"}"#,
            r#"{"result":{"content":[]}}"#,
            r#"{"status":"completed","result":null}"#,
        ] {
            assert!(crate::json::from_str::<Phase>(text).is_err(), "{text}");
        }
    }

    #[test]
    fn lease_and_expiry_bound_the_due_time() {
        let mut r = record();
        r.lease = Some(Lease {
            runner: "r".into(),
            expires_at: 1_500,
        });
        assert_eq!(r.due_at(), 1_500);
        r.lease = None;
        r.wake_at = Some(50_000);
        assert_eq!(r.due_at(), 11_000);
    }
}
