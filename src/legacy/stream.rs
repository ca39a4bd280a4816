//! A 2025-11-25 response held open as SSE: `tasks/result` for a task that
//! has not finished, or a `tools/call` answered synchronously while input
//! is asked of the client. The stream polls the store, sends each pending
//! input request once while it is outstanding (with the related-task
//! `_meta` of a task the client made; a request asked again after its
//! answer is sent again), and ends with the response to the client's
//! request.
//!
//! A stream is bounded: by the configured maximum (`MCP_LISTEN_MAX_MS`) or
//! by what the adapter allows one request (a Worker's subrequests). When
//! the bound comes first, the response is a JSON-RPC error -32001 (request
//! timeout) saying the work goes on; the task is untouched, and the client
//! asks for `tasks/result` again (or polls `tasks/get`).

use std::collections::VecDeque;

use crate::sorted::SortedSet;

use serde_json::{Map, Value, json};

use super::input::{self, Round, Target};
use super::{RELATED_TASK, TASK_STATUS_NOTIFICATION, task_object};
use crate::crypto::StateKey;
use crate::error::RpcError;
use crate::http::{Next, sse_event};
use crate::owner::Owner;
use crate::protocol::jsonrpc::{Id, error_bytes, notification_bytes, result_bytes};
use crate::protocol::meta::ClientCapabilities;
use crate::protocol::tasks::TaskStatus;
use crate::protocol::tools::{CallToolResult, InputRequests};
use crate::server::{Server, StartTask, Trace};
use crate::store::Store;
use crate::tasks::{NewTaskId, own_view};
use crate::time::Millis;
use crate::tools::{CallError, CallPlan, ToolCall};

/// The error a bounded stream ends with when its bound comes first.
pub const TIMED_OUT: i64 = -32001;

/// What the stream waits for.
#[derive(Debug)]
enum Kind {
    /// A task to finish; `related` adds the related-task `_meta` to the
    /// final result (for `tasks/result`).
    Task {
        task_id: String,
        related: bool,
        last: Option<TaskStatus>,
    },
    /// A synchronous call's answers.
    Round(Box<RoundCall>),
}

/// A synchronous call between rounds: what it needs to be called again.
#[derive(Debug)]
pub struct RoundCall {
    pub key: String,
    pub tool: &'static str,
    pub arguments: Map<String, Value>,
    pub capabilities: ClientCapabilities,
    pub round_state: Value,
}

/// One held-open response.
#[derive(Debug)]
pub struct Stream {
    id: Id,
    owner: Owner,
    kind: Kind,
    pending: VecDeque<Vec<u8>>,
    /// Ids of the requests asked on this stream and still outstanding.
    sent: SortedSet,
    ends_at: Millis,
    poll_ms: u64,
    poll_now: bool,
    done: bool,
}

impl Stream {
    /// Waits for task `task_id` of `owner` to finish, answering request `id`.
    pub fn task(
        id: Id,
        owner: Owner,
        task_id: String,
        related: bool,
        ends_at: Millis,
        poll_ms: u64,
    ) -> Self {
        Stream::new(
            id,
            owner,
            Kind::Task {
                task_id,
                related,
                last: None,
            },
            ends_at,
            poll_ms,
        )
    }

    /// Waits for the answers to `requests` (already persisted as the round
    /// `call.key`), then calls the tool again.
    pub fn round(
        secret: &StateKey,
        id: Id,
        owner: Owner,
        call: RoundCall,
        requests: &InputRequests,
        ends_at: Millis,
        poll_ms: u64,
    ) -> Self {
        let target = Target::Round(call.key.clone());
        let mut s = Stream::new(id, owner, Kind::Round(Box::new(call)), ends_at, poll_ms);
        s.ask(secret, &target, requests, None);
        s
    }

    fn new(id: Id, owner: Owner, kind: Kind, ends_at: Millis, poll_ms: u64) -> Self {
        Stream {
            id,
            owner,
            kind,
            pending: VecDeque::new(),
            sent: SortedSet::new(),
            ends_at,
            poll_ms: poll_ms.max(1),
            poll_now: true,
            done: false,
        }
    }

    /// Ends the stream by `at` at the latest.
    pub fn end_by(&mut self, at: Millis) {
        self.ends_at = self.ends_at.min(at);
    }

    pub async fn advance<S: Store>(&mut self, server: &Server<S>, now: Millis) -> Next {
        loop {
            if let Some(frame) = self.pending.pop_front() {
                return Next::Send(frame);
            }
            if self.done {
                return Next::End;
            }
            if !self.poll_now {
                if now >= self.ends_at {
                    let mut e = RpcError::new(
                        TIMED_OUT,
                        "The request is still in progress and this response's time is up; ask again (tasks/result) or poll tasks/get.",
                    );
                    // A call answered synchronously never told its client the
                    // task's id: the error does, so that it can ask again.
                    if let Kind::Task { task_id, .. } = &self.kind {
                        e = e.with_data(json!({ "taskId": task_id }));
                    }
                    self.finish(error_bytes(Some(&self.id), &e));
                    continue;
                }
                self.poll_now = true;
                return Next::Wait(self.poll_ms);
            }
            self.poll_now = false;
            match &self.kind {
                Kind::Task { .. } => self.poll_task(server, now).await,
                Kind::Round(_) => self.poll_round(server, now).await,
            }
        }
    }

    fn finish(&mut self, frame: Vec<u8>) {
        self.pending.push_back(sse_event(&frame));
        self.done = true;
    }

    fn fail(&mut self, e: &RpcError) {
        let frame = error_bytes(Some(&self.id), e);
        self.finish(frame);
    }

    /// Queues each request not asked yet on this stream. `requests` are
    /// all the target's outstanding ones: a request asked before and no
    /// longer among them was answered, so one asked again under its key
    /// (a new round's, or the task's after its answer) is sent again.
    fn ask(
        &mut self,
        secret: &StateKey,
        target: &Target,
        requests: &InputRequests,
        related: Option<&str>,
    ) {
        let ids: Vec<String> = requests
            .keys()
            .map(|key| input::request_id(secret, &self.owner, target, key))
            .collect();
        self.sent.retain(|id| ids.iter().any(|i| i == id));
        for ((_, request), id) in requests.iter().zip(ids) {
            if !self.sent.insert(id.clone()) {
                continue;
            }
            let mut params = match &request.params {
                Value::Object(m) => m.clone(),
                _ => Map::new(),
            };
            if let Some(task_id) = related {
                let meta = params
                    .entry("_meta")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(meta) = meta {
                    meta.insert(RELATED_TASK.to_owned(), json!({ "taskId": task_id }));
                }
            }
            let frame = json!({
                "jsonrpc": "2.0",
                "id": id,
                "method": request.method,
                "params": params,
            });
            self.pending
                .push_back(sse_event(&serde_json::to_vec(&frame).unwrap_or_default()));
        }
    }

    async fn poll_task<S: Store>(&mut self, server: &Server<S>, now: Millis) {
        let Kind::Task {
            task_id,
            related,
            last,
        } = &mut self.kind
        else {
            return;
        };
        let (task_id, related) = (task_id.clone(), *related);
        let view = match own_view(
            server.store(),
            &task_id,
            &self.owner,
            now,
            server.server_info(),
        )
        .await
        {
            Ok(v) => v,
            Err(e) => return self.fail(&e.into()),
        };
        let snapshot: Value = crate::json::from_str(&view.snapshot).unwrap_or(Value::Null);
        let changed = *last != Some(view.status);
        *last = Some(view.status);
        if related && changed && !view.status.is_terminal() {
            let note = notification_bytes(TASK_STATUS_NOTIFICATION, &task_object(&snapshot));
            self.pending.push_back(sse_event(&note));
        }
        match view.status {
            TaskStatus::InputRequired => {
                let requests: InputRequests = snapshot
                    .get("inputRequests")
                    .cloned()
                    .and_then(|v| serde_json::from_value(v).ok())
                    .unwrap_or_default();
                let target = Target::Task(task_id.clone());
                let key = server.config().state_keys.current();
                // The related-task `_meta` only where the client made the
                // task: a held call's task is the server's own, and a
                // client that keeps a task store would refuse a request
                // naming a task it does not know.
                self.ask(key, &target, &requests, related.then_some(task_id.as_str()));
            }
            s if s.is_terminal() => {
                let frame = final_response(&self.id, &snapshot, related.then_some(&task_id));
                self.finish(frame);
            }
            _ => {}
        }
    }

    async fn poll_round<S: Store>(&mut self, server: &Server<S>, now: Millis) {
        let Kind::Round(call) = &self.kind else {
            return;
        };
        let store = server.store();
        let (version, round) = match Round::load(store, &call.key).await {
            Ok(Some(r)) => r,
            Ok(None) => {
                return self.fail(&RpcError::invalid_params(
                    "The input round expired before it was answered.",
                ));
            }
            Err(e) => return self.fail(&e),
        };
        if let Some(why) = &round.refused {
            Round::remove(store, &call.key, version).await;
            let frame = result_bytes(&self.id, &CallToolResult::error(why.clone()));
            return self.finish(frame);
        }
        if !round.complete() {
            return;
        }
        Round::remove(store, &call.key, version).await;
        // Inserted one by one: collecting into a map compiles a stable sort
        // of its entries into the Worker's wasm, for keys already in order.
        let mut answers = Map::new();
        for (key, answer) in round.answers {
            answers.insert(key, answer);
        }
        let Some((name, tool)) = server.tools().get_named(call.tool) else {
            return self.fail(&RpcError::invalid_params("Unknown tool."));
        };
        let plan = tool.call(&ToolCall {
            arguments: &call.arguments,
            capabilities: &call.capabilities,
            input_responses: Some(&answers),
            round_state: Some(&call.round_state),
            now,
            progress: None,
        });
        match plan {
            Err(CallError::InvalidArguments(why)) => {
                let frame = result_bytes(&self.id, &CallToolResult::error(why));
                self.finish(frame);
            }
            Err(CallError::Rpc(e)) => self.fail(&e),
            Ok(CallPlan::Result(result)) => {
                let frame = result_bytes(&self.id, &result);
                self.finish(frame);
            }
            Ok(CallPlan::InputRequired {
                requests,
                round_state,
            }) => {
                let next = Round {
                    owner: self.owner.clone(),
                    expires_at: round.expires_at,
                    requests: requests.clone(),
                    answers: Default::default(),
                    refused: None,
                };
                match Round::create(store, server.ids(), &next).await {
                    Ok(key) => {
                        let target = Target::Round(key.clone());
                        if let Kind::Round(call) = &mut self.kind {
                            call.key = key;
                            call.round_state = round_state;
                        }
                        let key = server.config().state_keys.current();
                        self.ask(key, &target, &requests, None);
                    }
                    Err(e) => self.fail(&e),
                }
            }
            Ok(CallPlan::Task(start)) => {
                let started = StartTask {
                    tool: name,
                    arguments: call.arguments.clone(),
                    capabilities: call.capabilities.clone(),
                    start,
                    ttl_ms: server.config().task_ttl_ms,
                    result: None,
                };
                let ctx = crate::server::RequestContext {
                    owner: self.owner.clone(),
                    now,
                };
                let mut trace = Trace::default();
                match server
                    .start_task(started, NewTaskId::Random(server.ids()), &ctx, &mut trace)
                    .await
                {
                    Ok(record) => {
                        self.kind = Kind::Task {
                            task_id: record.id,
                            related: false,
                            last: None,
                        };
                        self.poll_now = true;
                    }
                    Err(e) => self.fail(&e),
                }
            }
        }
    }
}

/// The response to the client's request once the task is terminal: the
/// tool's `CallToolResult` (with the related-task `_meta` when
/// `related`), or the task's error.
pub fn final_response(id: &Id, snapshot: &Value, related: Option<&String>) -> Vec<u8> {
    match snapshot.get("status").and_then(Value::as_str) {
        Some("completed") => {
            let mut result = snapshot.get("result").cloned().unwrap_or(Value::Null);
            if let Value::Object(map) = &mut result {
                map.remove("resultType");
                map.remove("_meta");
                if let Some(task_id) = related {
                    map.insert(
                        "_meta".to_owned(),
                        json!({ RELATED_TASK: { "taskId": task_id } }),
                    );
                }
            }
            result_bytes(id, &result)
        }
        Some("failed") => {
            let error = snapshot
                .get("error")
                .cloned()
                .and_then(|e| serde_json::from_value::<RpcError>(e).ok())
                .unwrap_or_else(|| RpcError::internal("The task failed."));
            error_bytes(Some(id), &error)
        }
        _ => error_bytes(
            Some(id),
            &RpcError::new(
                crate::error::ErrorCode::INTERNAL_ERROR,
                "The task was cancelled before it produced a result.",
            ),
        ),
    }
}
