//! The pinned 2025-11-25 adapter: clients that open with `initialize` (the
//! TypeScript SDK 1.x and what is built on it, such as the MCP Inspector;
//! Python `mcp` in legacy mode) reach the same tools, the same store and
//! the same task services as 2026-07-28 clients.
//!
//! Every legacy name and shape lives in this module. The modern path never
//! learns one: a 2026-07-28 request for `initialize`, `ping`, `tasks/result`
//! or `tasks/list` still answers -32601.
//!
//! # Which path a request takes
//!
//! Decided per request, from the request alone ([`claims`]):
//!
//! 1. An `MCP-Protocol-Version` header naming any other revision than
//!    2025-11-25, 2025-06-18 or 2025-03-26 (2026-07-28, or one nobody
//!    speaks): the modern path, which answers it as it always has.
//! 2. A body whose `params._meta` carries
//!    `io.modelcontextprotocol/protocolVersion` (only 2026-07-28 clients
//!    send it): the modern path, whatever the headers say.
//! 3. Otherwise legacy if any of: the header names a legacy revision, an
//!    `Mcp-Session-Id` header is present (only this adapter issues
//!    sessions), the body is an `initialize` request, or the body is a
//!    JSON-RPC response (the answer to a request this adapter sent).
//! 4. Anything else: the modern path.
//!
//! # Sessions without server memory
//!
//! `initialize` negotiates the revision (the client's if this adapter
//! speaks it, otherwise the newest) and returns an `Mcp-Session-Id` that is
//! a signed token ([`session`]): it carries the revision and the client's
//! declared capabilities, bound to the authenticated principal. Any replica
//! verifies it; a tampered token, or one presented by another principal,
//! gets 404. Sessions cannot be ended early (DELETE answers 405) and need
//! no cleanup. A request without a session is served with no declared
//! client capabilities.
//!
//! A 2025-03-26 session may send a JSON-RPC batch (up to 32 messages): each
//! message is answered as if it came alone, in one JSON array, or as SSE
//! when one of them streams.
//!
//! # Tasks (2025-11-25, experimental)
//!
//! `tools/call` with `params.task` creates the same durable task the modern
//! path creates (persisted before the answer) and answers a
//! `CreateTaskResult`. `tasks/get`, `tasks/cancel` answer the task's status
//! fields (`tasks/cancel` cancels at once, a running step included: its
//! outcome is dropped), `tasks/list` the caller's tasks (oldest first, opaque cursor),
//! and `tasks/result` the original `CallToolResult` once the task is
//! terminal, holding the response open as SSE until then. While the task
//! waits for input, that stream carries its `elicitation/create` (or other)
//! requests, with the related-task `_meta`; the client's response, POSTed
//! to any replica, becomes the task's `tasks/update` ([`input`]). A
//! `tools/call` of a task tool without `params.task`, or of a tool that
//! asks for input in rounds, is answered the same way on its own stream,
//! its requests without the related-task `_meta` (the client made no
//! task).
//! See [`stream`] for the bound on a held-open response.

pub mod input;
mod peek;
pub mod session;
pub mod stream;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::catalog;
use crate::crypto::{b64url, b64url_decode};
use crate::error::{ErrorCode, RpcError, truncate};
use crate::http::{EventStream, HttpBody, HttpRequest, HttpResponse};
use crate::prompts::PromptPlan;
use crate::protocol::jsonrpc::{Id, error_bytes, message_of, parse_message, result_bytes};
use crate::protocol::meta::ClientCapabilities;
use crate::protocol::methods;
use crate::protocol::scan::Members;
use crate::server::{RequestContext, Server, StartTask, Trace};
use crate::store::Store;
use crate::tasks::{NewTaskId, TaskService, load_view, own_view, quota};
use crate::tools::{CallError, CallPlan, Progress, TaskStart, TaskSupport, ToolCall};
use input::Round;
use session::Session;
use stream::RoundCall;
pub use stream::Stream;

/// The revisions this adapter speaks, newest first.
pub const VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// The newest revision this adapter speaks.
const LATEST: &str = "2025-11-25";

/// The first revision with tasks.
const TASKS_SINCE: &str = "2025-11-25";

/// The one revision with JSON-RPC batches (2025-06-18 removed them).
const BATCHES_IN: &str = "2025-03-26";

/// Most messages one batch may carry.
const MAX_BATCH: usize = 32;

const INITIALIZE: &str = "initialize";
const PING: &str = "ping";
const TASKS_RESULT: &str = "tasks/result";
const TASKS_LIST: &str = "tasks/list";
const SESSION_HEADER: &str = "mcp-session-id";
/// `_meta` key tying a message to a task.
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The optional status notification on an open stream.
pub const TASK_STATUS_NOTIFICATION: &str = "notifications/tasks/status";

/// Tasks per `tasks/list` page.
const PAGE: usize = 50;

/// The four fields of a token `<prefix>.<a>.<b>.<c>.<d>` (sessions and the
/// ids of requests this adapter sends), if it has that shape.
fn token_fields<'t>(token: &'t str, prefix: &str) -> Option<[&'t str; 4]> {
    let mut parts = token.split('.');
    if parts.next() != Some(prefix) {
        return None;
    }
    let fields = [parts.next()?, parts.next()?, parts.next()?, parts.next()?];
    parts.next().is_none().then_some(fields)
}

/// Whether this request is for the 2025-11-25 adapter (see the module
/// documentation for the rule).
pub fn claims(req: &HttpRequest<'_>) -> bool {
    judge(req).is_some()
}

/// [`claims`], and for a request it claims whether that request is
/// answered at once ([`answers_at_once`]), from one reading of the body.
pub(crate) fn judge(req: &HttpRequest<'_>) -> Option<bool> {
    let Ok(header) = version_header(req) else {
        return None;
    };
    let Some(peek) = peek::peek(req.body) else {
        // Not a message at all (or a batch, or a method name with
        // escapes): a legacy client's (by its headers) is answered in its
        // own terms.
        return (header.is_some() || req.header(SESSION_HEADER).is_some())
            .then(|| answers_at_once(req.body));
    };
    if peek.modern_meta {
        return None;
    }
    let claimed = header.is_some()
        || req.header(SESSION_HEADER).is_some()
        || match peek.method {
            Some(m) => m == INITIALIZE,
            None => peek.response,
        };
    // The body read as the object `answers_at_once` reads: the same method.
    claimed.then_some(method_answers_at_once(peek.method))
}

/// The request's `MCP-Protocol-Version` as one of [`VERSIONS`]: `Ok(None)`
/// without the header, `Err(())` for a version this adapter does not speak.
fn version_header(req: &HttpRequest<'_>) -> Result<Option<&'static str>, ()> {
    let Some(v) = req.header("mcp-protocol-version") else {
        return Ok(None);
    };
    let v = crate::limits::trim_ows(v);
    VERSIONS
        .iter()
        .find(|s| **s == v)
        .copied()
        .map(Some)
        .ok_or(())
}

/// One request as the adapter sees it.
struct Ctx<'a> {
    ctx: &'a RequestContext,
    session: Option<Session>,
    version: &'static str,
}

impl Ctx<'_> {
    fn capabilities(&self) -> ClientCapabilities {
        self.session
            .as_ref()
            .map(|s| s.capabilities.clone())
            .unwrap_or_else(|| session::capabilities_of(0))
    }
}

/// What a legacy request is answered with.
enum Answer {
    Json(Vec<u8>),
    Stream(Stream),
    /// Messages all known now, sent as SSE (progress, then the result).
    Frames(Vec<Vec<u8>>),
    /// The `initialize` result and the session to return with it.
    Initialized(Vec<u8>, String),
}

/// Serves a request [`claims`] chose, for an authenticated caller.
pub async fn serve<S: Store>(
    server: &Server<S>,
    req: &HttpRequest<'_>,
    ctx: &RequestContext,
) -> HttpResponse {
    serve_scanned(server, req, ctx, None).await
}

/// [`serve`], where `scanned` is the request's envelope if the caller's
/// one pass read it (see [`crate::protocol::scan::members_within`]), so
/// that it is not read again.
pub(crate) async fn serve_scanned<S: Store>(
    server: &Server<S>,
    req: &HttpRequest<'_>,
    ctx: &RequestContext,
    scanned: Option<Members<'_>>,
) -> HttpResponse {
    let keys = &server.config().state_keys;
    let session = match req.header(SESSION_HEADER) {
        Some(token) => match session::verify_kept(
            keys,
            &ctx.owner,
            crate::limits::trim_ows(token),
            &server.verifications().sessions,
        ) {
            Some(s) => Some(s),
            None => {
                return HttpResponse::rpc_error(
                    404,
                    None,
                    &RpcError::new(-32001, "Session not found; initialize again."),
                );
            }
        },
        None => None,
    };
    let version = version_header(req)
        .ok()
        .flatten()
        .or(session.as_ref().map(|s| s.version))
        .unwrap_or("2025-03-26");
    let lc = Ctx {
        ctx,
        session,
        version,
    };
    let parsed = match scanned {
        Some(members) => message_of(members),
        None => parse_message(req.body),
    };
    let msg = match parsed {
        Ok(m) => m,
        Err(_) if lc.version == BATCHES_IN && is_array(req.body) => {
            return batch(server, &lc, req.body).await;
        }
        Err(e) => {
            // Not a request or notification: perhaps the client's answer to
            // a request this adapter sent.
            if let Some(response) = client_response(server, req.body, ctx).await {
                return response;
            }
            return HttpResponse::rpc_error(400, e.id.as_ref(), &e.error);
        }
    };
    let Some(id) = msg.id else {
        // notifications/initialized, notifications/cancelled, ...
        return accepted();
    };
    let raw = msg.params.unwrap_or("{}");
    let mut trace = Trace::default();
    let answer = match dispatch(server, &lc, &id, &msg.method, raw, &mut trace).await {
        Ok(a) => a,
        Err(e) => {
            trace.error = Some(e.code);
            Answer::Json(error_bytes(Some(&id), &e))
        }
    };
    let mut response = match answer {
        Answer::Json(body) => HttpResponse::json(200, body),
        Answer::Initialized(body, token) => {
            let mut r = HttpResponse::json(200, body);
            r.headers.push((SESSION_HEADER, token));
            r
        }
        Answer::Stream(stream) => HttpResponse::event_stream(EventStream::legacy(stream)),
        Answer::Frames(frames) => HttpResponse::event_stream(EventStream::frames(frames)),
    };
    response.trace = trace;
    response
}

/// Whether a request [`claims`] chose is answered at once, never held open
/// as a stream: all but `tools/call` and `tasks/result` (the two that
/// [`dispatch`] may answer with a [`Stream`]), and a batch, which may carry
/// them.
pub(crate) fn answers_at_once(body: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Peek<'a> {
        #[serde(borrow, default)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    if is_array(body) {
        return false;
    }
    match crate::json::from_slice::<Peek<'_>>(body) {
        Ok(p) => method_answers_at_once(p.method.as_deref()),
        // Not a message: an error, at once.
        Err(_) => true,
    }
}

/// Whether a message with `method` is answered at once: all but the two
/// that [`dispatch`] may answer with a [`Stream`].
fn method_answers_at_once(method: Option<&str>) -> bool {
    !matches!(method, Some(methods::TOOLS_CALL | TASKS_RESULT))
}

/// Whether `body` is a JSON array (by its first byte; the reading decides
/// the rest).
fn is_array(body: &[u8]) -> bool {
    body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[')
}

/// A 2025-03-26 batch: each message in order, as if it came alone. Requests
/// answered now are answered as a JSON array; if one answers over a stream
/// (a task tool's held call) or with progress, every answer goes out as
/// SSE, the streams' in turn. `initialize` may not be part of a batch.
async fn batch<S: Store>(server: &Server<S>, lc: &Ctx<'_>, body: &[u8]) -> HttpResponse {
    let refused = |why: &str| HttpResponse::rpc_error(400, None, &RpcError::invalid_request(why));
    let Ok(items) = crate::json::from_slice::<Vec<&RawValue>>(body) else {
        return HttpResponse::rpc_error(400, None, &RpcError::parse_error());
    };
    if items.is_empty() {
        return refused("An empty batch has nothing to answer.");
    }
    if items.len() > MAX_BATCH {
        return refused(&format!(
            "A batch may carry at most {MAX_BATCH} messages; send the rest in another."
        ));
    }
    let mut answers = Vec::new();
    let mut streams = Vec::new();
    let mut notifications = false;
    let mut refusal = None;
    for item in items {
        let text = item.get().as_bytes();
        let msg = match parse_message(text) {
            Ok(m) => m,
            Err(e) => {
                // The client's answer to a request of ours is taken as in a
                // POST of its own; a response gets no answer. One that
                // cannot be taken refuses a batch that has nothing else to
                // answer.
                match client_response(server, text, lc.ctx).await {
                    None => answers.push(error_bytes(e.id.as_ref(), &e.error)),
                    Some(r) if r.status >= 400 => {
                        refusal.get_or_insert(r);
                    }
                    Some(_) => {}
                }
                continue;
            }
        };
        let Some(id) = msg.id else {
            continue;
        };
        if msg.method == INITIALIZE {
            let e = RpcError::invalid_request("initialize must not be part of a batch.");
            answers.push(error_bytes(Some(&id), &e));
            continue;
        }
        let raw = msg.params.unwrap_or("{}");
        let mut trace = Trace::default();
        match dispatch(server, lc, &id, &msg.method, raw, &mut trace).await {
            Ok(Answer::Json(b) | Answer::Initialized(b, _)) => answers.push(b),
            Ok(Answer::Frames(frames)) => {
                notifications |= frames.len() > 1;
                answers.extend(frames);
            }
            Ok(Answer::Stream(stream)) => streams.push(stream),
            Err(e) => answers.push(error_bytes(Some(&id), &e)),
        }
    }
    if answers.is_empty() && streams.is_empty() {
        // Responses and notifications only: 202 if every one was taken,
        // as the 2025-03-26 transport asks; otherwise the first refusal.
        return refusal.unwrap_or_else(accepted);
    }
    if streams.is_empty() && !notifications {
        let mut array = Vec::with_capacity(answers.iter().map(|a| a.len() + 1).sum::<usize>() + 1);
        array.push(b'[');
        for (i, a) in answers.iter().enumerate() {
            if i > 0 {
                array.push(b',');
            }
            array.extend_from_slice(a);
        }
        array.push(b']');
        return HttpResponse::json(200, array);
    }
    HttpResponse::event_stream(EventStream::batch(answers, streams))
}

fn accepted() -> HttpResponse {
    HttpResponse {
        status: 202,
        headers: Vec::new(),
        body: HttpBody::Empty,
        trace: Trace::default(),
    }
}

/// A JSON-RPC response from the client (the answer to an input request this
/// adapter sent): 202 once recorded or ignored, 400 if it cannot be taken.
async fn client_response<S: Store>(
    server: &Server<S>,
    body: &[u8],
    ctx: &RequestContext,
) -> Option<HttpResponse> {
    #[derive(Deserialize)]
    struct Response<'a> {
        #[serde(borrow, default)]
        method: Option<&'a RawValue>,
        #[serde(default)]
        id: Option<Value>,
        #[serde(default)]
        result: Option<Value>,
        #[serde(default)]
        error: Option<Value>,
    }
    let r: Response<'_> = crate::json::from_slice(body).ok()?;
    if r.method.is_some() || (r.result.is_none() && r.error.is_none()) {
        return None;
    }
    let refused = |why: &str| {
        Some(HttpResponse::rpc_error(
            400,
            None,
            &RpcError::invalid_request(why),
        ))
    };
    let Some(Value::String(id)) = r.id else {
        return refused("This response answers no request of this server.");
    };
    let keys = &server.config().state_keys;
    let Some((target, key)) = keys
        .keys()
        .find_map(|k| input::parse_id(k, &ctx.owner, &id))
    else {
        return refused("This response answers no request of this server.");
    };
    let outcome = match (r.result, r.error) {
        (Some(result), _) => Ok(result),
        (None, error) => Err(error.unwrap_or(Value::Null)),
    };
    let runner = server.runner();
    let service = TaskService::new(server.store(), server.server_info())
        .limited(server.config().limits.max_task_bytes)
        .with_inline_steps(&runner);
    match input::deliver(service, &ctx.owner, &target, &key, outcome, ctx.now).await {
        Ok(()) => Some(accepted()),
        Err(e) => Some(HttpResponse::rpc_error(e.http_status().max(400), None, &e)),
    }
}

async fn dispatch<S: Store>(
    server: &Server<S>,
    lc: &Ctx<'_>,
    id: &Id,
    method: &str,
    raw: &str,
    trace: &mut Trace,
) -> Result<Answer, RpcError> {
    let json = |v: &Value| Ok(Answer::Json(result_bytes(id, v)));
    if !catalog::offers(server.tools(), method) {
        return Err(RpcError::method_not_found(method));
    }
    match method {
        INITIALIZE => initialize(server, lc, id, raw),
        PING => json(&json!({})),
        methods::TOOLS_LIST => json(&tools_list(server, raw)?),
        methods::TOOLS_CALL => tools_call(server, lc, id, raw, trace).await,
        methods::TASKS_GET => {
            // The hot path: the stored snapshot's members are copied as
            // they are, never parsed into values.
            let p: TaskParams = params(raw, method)?;
            let snapshot = own_snapshot(server, lc, &p.task_id).await?;
            let task = TaskFields::read(&snapshot)?;
            trace.task_id = Some(p.task_id);
            Ok(Answer::Json(result_bytes(id, &task)))
        }
        methods::TASKS_CANCEL => {
            let p: TaskParams = params(raw, method)?;
            let service = TaskService::new(server.store(), server.server_info());
            let finished = |task: &Value| {
                RpcError::invalid_params(format!(
                    "Cannot cancel task: it is already {}.",
                    task.get("status")
                        .and_then(Value::as_str)
                        .unwrap_or("finished")
                ))
            };
            let before = own_task(server, lc, &p.task_id).await?;
            if is_terminal(&before) {
                return Err(finished(&before));
            }
            // Cancelled before the answer, a running step included (the
            // 2025-11-25 rule), unlike the modern protocol's cooperative
            // cancellation.
            service
                .cancel_now(&lc.ctx.owner, &p.task_id, lc.ctx.now)
                .await
                .map_err(|e| trace.task_error(e))?;
            let after = own_task(server, lc, &p.task_id).await?;
            if after.get("status").and_then(Value::as_str) != Some("cancelled") {
                // It finished on its own in between.
                return Err(finished(&after));
            }
            trace.task_id = Some(p.task_id);
            json(&task_object(&after))
        }
        TASKS_RESULT => {
            let p: TaskParams = params(raw, method)?;
            let task = own_task(server, lc, &p.task_id).await?;
            trace.task_id = Some(p.task_id.clone());
            if is_terminal(&task) {
                return Ok(Answer::Json(stream::final_response(
                    id,
                    &task,
                    Some(&p.task_id),
                )));
            }
            Ok(Answer::Stream(hold(server, lc, id, p.task_id, true)))
        }
        TASKS_LIST => json(&tasks_list(server, lc, raw).await?),
        methods::RESOURCES_LIST => json(&catalog::resources_list(
            server.tools(),
            &params(raw, method)?,
        )?),
        methods::RESOURCE_TEMPLATES_LIST => json(&catalog::templates_list(
            server.tools(),
            &params(raw, method)?,
        )?),
        methods::RESOURCES_READ => json(&catalog::resources_read(
            server.tools(),
            &params(raw, method)?,
        )?),
        methods::PROMPTS_LIST => json(&catalog::prompts_list(
            server.tools(),
            &params(raw, method)?,
        )?),
        methods::PROMPTS_GET => {
            match catalog::prompts_get(server.tools(), &params(raw, method)?, None)? {
                PromptPlan::Messages(result) => json(&catalog::prompt_result(&result)?),
                PromptPlan::InputRequired { .. } => Err(RpcError::internal(
                    "This prompt asks for input first, which 2025-11-25 prompts cannot do.",
                )),
            }
        }
        methods::COMPLETION_COMPLETE => {
            json(&catalog::complete(server.tools(), &params(raw, method)?)?)
        }
        _ => Err(RpcError::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("Method not found: {}", truncate(method, 64)),
        )),
    }
}

fn params<T: serde::de::DeserializeOwned>(raw: &str, method: &str) -> Result<T, RpcError> {
    crate::json::from_str(raw).map_err(|e| {
        RpcError::invalid_params(format!(
            "Invalid params for {method}: {}.",
            truncate(&e.to_string(), 200)
        ))
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskParams {
    task_id: String,
}

fn initialize<S: Store>(
    server: &Server<S>,
    lc: &Ctx<'_>,
    id: &Id,
    raw: &str,
) -> Result<Answer, RpcError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Params {
        protocol_version: String,
        #[serde(default)]
        capabilities: Value,
    }
    let p: Params = params(raw, INITIALIZE)?;
    let version = VERSIONS
        .iter()
        .find(|v| **v == p.protocol_version)
        .copied()
        .unwrap_or(LATEST);
    let config = server.config();
    let mut capabilities = json!({ "tools": { "listChanged": false } });
    if let Value::Object(map) = &mut capabilities {
        map.extend(catalog::capabilities(server.tools()));
    }
    if version >= TASKS_SINCE
        && let Value::Object(map) = &mut capabilities
    {
        map.insert(
            "tasks".to_owned(),
            json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } }),
        );
    }
    let mut result = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": server.server_info(),
    });
    if let (Some(text), Value::Object(map)) = (&config.instructions, &mut result) {
        map.insert("instructions".into(), Value::from(text.as_str()));
    }
    let token = session::issue(
        config.state_keys.current(),
        server.ids(),
        &lc.ctx.owner,
        version,
        &p.capabilities,
    )?;
    Ok(Answer::Initialized(result_bytes(id, &result), token))
}

fn tools_list<S: Store>(server: &Server<S>, raw: &str) -> Result<Value, RpcError> {
    #[derive(Deserialize)]
    struct Params {
        #[serde(default)]
        cursor: Option<String>,
    }
    let p: Params = params(raw, methods::TOOLS_LIST)?;
    if p.cursor.is_some() {
        return Err(RpcError::invalid_params(
            "Invalid cursor: this list has a single page.",
        ));
    }
    let tools: Vec<Value> = server
        .tools()
        .iter()
        .map(|(descriptor, tool)| {
            let mut v = serde_json::to_value(descriptor).unwrap_or(Value::Null);
            let support = match tool.requirements().tasks {
                TaskSupport::Never => "forbidden",
                TaskSupport::Optional => "optional",
                TaskSupport::Required => "required",
            };
            if let Value::Object(map) = &mut v {
                map.insert("execution".into(), json!({ "taskSupport": support }));
            }
            v
        })
        .collect();
    Ok(json!({ "tools": tools }))
}

async fn tools_call<S: Store>(
    server: &Server<S>,
    lc: &Ctx<'_>,
    id: &Id,
    raw: &str,
    trace: &mut Trace,
) -> Result<Answer, RpcError> {
    #[derive(Deserialize)]
    struct Params {
        name: String,
        #[serde(default)]
        arguments: Option<Map<String, Value>>,
        #[serde(default)]
        task: Option<TaskHint>,
    }
    #[derive(Deserialize)]
    struct TaskHint {
        #[serde(default)]
        ttl: Option<u64>,
    }
    let p: Params = params(raw, methods::TOOLS_CALL)?;
    let caps = lc.capabilities();
    let known = server.tools().get(&p.name);
    // An unknown tool is one, with params.task or without (not a tool
    // that does not run as a task).
    if known.is_none() {
        server.tool_for(&p.name, &caps, trace)?;
    }
    let support = known.map_or(TaskSupport::Never, |t| t.requirements().tasks);
    let tasks_known = lc.version >= TASKS_SINCE;
    let as_task = p.task.is_some() && support != TaskSupport::Never && tasks_known;
    // A version without tasks knows no task support: its call of a
    // task-only tool is held open until the task ends, as any other.
    if support == TaskSupport::Required && !as_task && tasks_known {
        return Err(RpcError::new(
            ErrorCode::METHOD_NOT_FOUND,
            "This tool runs only as a task (its taskSupport is \"required\"): call it with params.task.",
        ));
    }
    if support == TaskSupport::Never && p.task.is_some() && tasks_known {
        return Err(RpcError::new(
            ErrorCode::METHOD_NOT_FOUND,
            "This tool does not run as a task (its taskSupport is \"forbidden\"): call it without params.task.",
        ));
    }
    let (name, tool) = server.tool_for(&p.name, &caps, trace)?;
    let config = server.config();
    let arguments = p.arguments.unwrap_or_default();
    if let Some(why) = server.argument_refusal(name, &arguments) {
        return Ok(Answer::Json(result_bytes(
            id,
            &crate::protocol::tools::CallToolResult::error(why),
        )));
    }
    let token = crate::server::progress_token(raw);
    let progress = Progress::default();
    let plan = tool.call(&ToolCall {
        arguments: &arguments,
        capabilities: &caps,
        input_responses: None,
        round_state: None,
        now: lc.ctx.now,
        progress: token.is_some().then_some(&progress),
    });
    let plan = match plan {
        Ok(plan) => plan,
        Err(CallError::InvalidArguments(why)) => {
            return Ok(Answer::Json(result_bytes(
                id,
                &crate::protocol::tools::CallToolResult::error(why),
            )));
        }
        Err(CallError::Rpc(e)) => return Err(e),
    };
    let ends_at = lc.ctx.now.saturating_add(config.listen_max_ms as i64);
    let ttl_ms = p
        .task
        .as_ref()
        .and_then(|t| t.ttl)
        // At least a second, at most the server's (which may be shorter
        // than a second: `clamp` would panic).
        .map_or(config.task_ttl_ms, |t| t.max(1_000).min(config.task_ttl_ms));
    match plan {
        CallPlan::Result(result) if as_task => {
            // Asked to be a task, answered at once: a task created
            // complete, in its one write.
            let started = StartTask {
                tool: name,
                arguments,
                capabilities: caps,
                start: TaskStart {
                    state: Value::Null,
                    first_step_in_ms: ttl_ms,
                    message: None,
                },
                ttl_ms,
                result: Some(result),
            };
            let record = server
                .start_task(started, NewTaskId::Random(server.ids()), lc.ctx, trace)
                .await?;
            let snapshot = own_task(server, lc, &record.id).await?;
            Ok(Answer::Json(result_bytes(
                id,
                &json!({ "task": task_object(&snapshot) }),
            )))
        }
        CallPlan::Result(result) => {
            let response = || result_bytes(id, &result);
            match crate::server::progress_frames(token.as_ref(), &progress, response) {
                Some(frames) => Ok(Answer::Frames(frames)),
                None => Ok(Answer::Json(response())),
            }
        }
        CallPlan::InputRequired {
            requests,
            round_state,
        } => {
            let expires_at = lc
                .ctx
                .now
                .saturating_add(config.request_state_ttl_ms as i64);
            let round = Round {
                owner: lc.ctx.owner.clone(),
                expires_at,
                requests: requests.clone(),
                answers: Default::default(),
                refused: None,
            };
            let key = Round::create(server.store(), server.ids(), &round).await?;
            let call = RoundCall {
                key,
                tool: name,
                arguments,
                capabilities: caps,
                round_state,
            };
            Ok(Answer::Stream(Stream::round(
                config.state_keys.current(),
                id.clone(),
                lc.ctx.owner.clone(),
                call,
                &requests,
                ends_at,
                config.listen_poll_ms,
            )))
        }
        CallPlan::Task(start) => {
            let started = StartTask {
                tool: name,
                arguments,
                capabilities: caps,
                start,
                ttl_ms,
                result: None,
            };
            let record = server
                .start_task(started, NewTaskId::Random(server.ids()), lc.ctx, trace)
                .await?;
            if as_task {
                let snapshot = serde_json::to_value(record.wire(None, server.server_info(), None))
                    .unwrap_or(Value::Null);
                return Ok(Answer::Json(result_bytes(
                    id,
                    &json!({ "task": task_object(&snapshot) }),
                )));
            }
            Ok(Answer::Stream(hold(server, lc, id, record.id, false)))
        }
    }
}

/// A stream that answers request `id` when task `task_id` ends.
fn hold<S: Store>(
    server: &Server<S>,
    lc: &Ctx<'_>,
    id: &Id,
    task_id: String,
    related: bool,
) -> Stream {
    let config = server.config();
    Stream::task(
        id.clone(),
        lc.ctx.owner.clone(),
        task_id,
        related,
        lc.ctx.now.saturating_add(config.listen_max_ms as i64),
        config.listen_poll_ms,
    )
}

/// The caller's task's stored snapshot (JSON text); the one not-found
/// error otherwise (a foreign task is indistinguishable from an unknown
/// one).
async fn own_snapshot<S: Store>(
    server: &Server<S>,
    lc: &Ctx<'_>,
    id: &str,
) -> Result<String, RpcError> {
    let view = own_view(
        server.store(),
        id,
        &lc.ctx.owner,
        lc.ctx.now,
        server.server_info(),
    )
    .await?;
    Ok(view.snapshot)
}

/// The caller's task as its stored snapshot, parsed.
async fn own_task<S: Store>(server: &Server<S>, lc: &Ctx<'_>, id: &str) -> Result<Value, RpcError> {
    crate::json::from_str(&own_snapshot(server, lc, id).await?)
        .map_err(|_| RpcError::internal("Internal error: a task could not be read."))
}

/// A task's 2025-11-25 fields, borrowed from a stored snapshot as raw JSON
/// (the same renames as [`task_object`]; see [`TaskFields::read`]).
#[derive(Deserialize, serde::Serialize)]
struct TaskFields<'a> {
    #[serde(rename = "taskId", borrow)]
    task_id: &'a RawValue,
    #[serde(borrow)]
    status: &'a RawValue,
    /// Only whether the result is an error, for the status.
    #[serde(default, skip_serializing)]
    result: Option<ErrorFlag>,
    #[serde(
        rename = "statusMessage",
        borrow,
        default,
        skip_serializing_if = "Option::is_none"
    )]
    status_message: Option<&'a RawValue>,
    #[serde(rename = "createdAt", borrow)]
    created_at: &'a RawValue,
    #[serde(rename = "lastUpdatedAt", borrow)]
    last_updated_at: &'a RawValue,
    #[serde(rename(deserialize = "ttlMs", serialize = "ttl"), borrow)]
    ttl: &'a RawValue,
    #[serde(
        rename(deserialize = "pollIntervalMs", serialize = "pollInterval"),
        borrow
    )]
    poll_interval: &'a RawValue,
}

/// Whether a tool result is an error (`isError: true`).
#[derive(Deserialize)]
struct ErrorFlag {
    #[serde(rename = "isError", default)]
    is_error: bool,
}

/// `"failed"` as raw JSON, for [`TaskFields::read`].
const FAILED: &str = "\"failed\"";

impl<'a> TaskFields<'a> {
    /// The fields of the stored `snapshot`. A task completed with an error
    /// result (`isError: true`) is `failed` here: 2025-11-25 counts a tool's
    /// error result as a failure, where 2026-07-28 counts it as a
    /// completion. `tasks/result` still answers that result.
    fn read(snapshot: &'a str) -> Result<Self, RpcError> {
        let mut task: TaskFields<'a> = crate::json::from_str(snapshot)
            .map_err(|_| RpcError::internal("Internal error: a task could not be read."))?;
        if task.result.as_ref().is_some_and(|r| r.is_error)
            && let Ok(failed) = crate::json::from_str::<&'static RawValue>(FAILED)
        {
            task.status = failed;
        }
        Ok(task)
    }
}

fn is_terminal(snapshot: &Value) -> bool {
    matches!(
        snapshot.get("status").and_then(Value::as_str),
        Some("completed" | "failed" | "cancelled")
    )
}

/// A task in 2025-11-25 shape, from the stored (2026-07-28) snapshot: a
/// task completed with an error result is `failed`, as `TaskFields::read`
/// reads it from the raw snapshot.
pub fn task_object(snapshot: &Value) -> Value {
    let mut task = Map::new();
    let error_result = snapshot
        .get("result")
        .and_then(|r| r.get("isError"))
        .and_then(Value::as_bool)
        == Some(true);
    if error_result {
        task.insert("status".to_owned(), Value::from("failed"));
    }
    for (from, to) in [
        ("taskId", "taskId"),
        ("status", "status"),
        ("statusMessage", "statusMessage"),
        ("createdAt", "createdAt"),
        ("lastUpdatedAt", "lastUpdatedAt"),
        ("ttlMs", "ttl"),
        ("pollIntervalMs", "pollInterval"),
    ] {
        if let Some(v) = snapshot.get(from)
            && !(error_result && from == "status")
        {
            task.insert(to.to_owned(), v.clone());
        }
    }
    Value::Object(task)
}

/// `tasks/list`: the caller's tasks, oldest first, [`PAGE`] at a time.
/// The cursor is opaque to the client (the position after the last task
/// of the previous page).
async fn tasks_list<S: Store>(
    server: &Server<S>,
    lc: &Ctx<'_>,
    raw: &str,
) -> Result<Value, RpcError> {
    #[derive(Deserialize)]
    struct Params {
        #[serde(default)]
        cursor: Option<String>,
    }
    let p: Params = params(raw, TASKS_LIST)?;
    let after = match &p.cursor {
        None => None,
        Some(c) => Some(decode_cursor(c).ok_or_else(|| {
            RpcError::invalid_params("Invalid cursor: it was not issued by this server.")
        })?),
    };
    let listed = quota::listed(server.store(), &lc.ctx.owner, lc.ctx.now).await?;
    // By expiry, then id: whole entries are compared, so an unstable sort
    // gives the same order, and it is the instance the quota's finished list
    // already compiles (a stable sort of `(String, i64)` was one more in the
    // Worker's wasm).
    let mut order: Vec<(i64, &String)> = listed.iter().map(|(id, exp)| (*exp, id)).collect();
    order.sort_unstable();
    let start = match &after {
        None => 0,
        Some((exp, id)) => order.partition_point(|(e, i)| (*e, *i) <= (*exp, id)),
    };
    let mut tasks = Vec::new();
    let mut last = None;
    let mut more = false;
    for &(exp, task_id) in order.iter().skip(start) {
        if tasks.len() == PAGE {
            more = true;
            break;
        }
        last = Some((exp, task_id.clone()));
        if let Some(view) = load_view(
            server.store(),
            task_id,
            &lc.ctx.owner,
            lc.ctx.now,
            server.server_info(),
        )
        .await?
        {
            let snapshot: Value = crate::json::from_str(&view.snapshot).unwrap_or(Value::Null);
            tasks.push(task_object(&snapshot));
        }
    }
    let mut result = json!({ "tasks": tasks });
    if more && let (Some((exp, id)), Value::Object(map)) = (last, &mut result) {
        map.insert("nextCursor".into(), Value::from(encode_cursor(exp, &id)));
    }
    Ok(result)
}

fn encode_cursor(expires_at: i64, id: &str) -> String {
    b64url(format!("{expires_at}:{id}").as_bytes())
}

fn decode_cursor(cursor: &str) -> Option<(i64, String)> {
    let text = String::from_utf8(b64url_decode(cursor)?).ok()?;
    let (exp, id) = text.split_once(':')?;
    Some((exp.parse().ok()?, id.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The version header is trimmed of spaces and tabs and matched once,
    /// for both `judge` and `serve_scanned`: a version the adapter speaks,
    /// one it does not (which `judge` leaves to the core), and none.
    #[test]
    fn the_version_header_is_trimmed_and_matched() {
        let version = |value: Option<&str>| {
            let headers: Vec<(&str, &str)> = value
                .map(|v| ("mcp-protocol-version", v))
                .into_iter()
                .collect();
            let req = HttpRequest {
                method: "POST",
                path: "/mcp",
                headers: &headers,
                body: br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            };
            (version_header(&req), judge(&req).is_some())
        };
        assert_eq!(version(Some("2025-11-25")), (Ok(Some("2025-11-25")), true));
        assert_eq!(
            version(Some(" \t2025-06-18 ")),
            (Ok(Some("2025-06-18")), true)
        );
        assert_eq!(version(Some("2025-03-26")), (Ok(Some("2025-03-26")), true));
        assert_eq!(version(Some("2026-07-28")), (Err(()), false));
        assert_eq!(version(Some("2025-11-2")), (Err(()), false));
        // Only spaces and tabs are a field's optional white space (RFC
        // 9110), as the core trims its headers.
        assert_eq!(version(Some("2025-11-25\u{a0}")), (Err(()), false));
        assert_eq!(version(Some("\u{85}2025-11-25")), (Err(()), false));
        assert_eq!(version(None), (Ok(None), false));
    }

    /// One reading of the body judges a request as the route and then the
    /// question whether it answers at once did, each reading it alone.
    #[test]
    fn a_request_judged_once_is_judged_as_twice() {
        let bodies: &[&str] = &[
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks\/result"}"#,
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
            r#"{"jsonrpc":"2.0","id":"r1","result":{"action":"accept"}}"#,
            r#"{"jsonrpc":"2.0","id":"r1","error":{"code":-1,"message":"no"}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"tasks/get"},{"jsonrpc":"2.0","id":2,"method":"tools/call"}]"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tasks/get"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1,2]}"#,
            "not json",
            "",
        ];
        let headers: &[&[(&str, &str)]] = &[
            &[],
            &[("mcp-protocol-version", "2025-11-25")],
            &[("mcp-protocol-version", "2025-03-26")],
            &[("mcp-protocol-version", "2026-07-28")],
            &[("mcp-session-id", "mts1.0.0.x.y")],
            &[("mcp-method", "subscriptions/listen")],
            &[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "subscriptions/listen"),
            ],
        ];
        for body in bodies {
            for h in headers {
                let h: Vec<(&str, &str)> = h.to_vec();
                let req = crate::http::HttpRequest {
                    method: "POST",
                    path: "/mcp",
                    headers: &h,
                    body: body.as_bytes(),
                };
                let route = crate::http::Route::of(&req);
                let at_once = match route {
                    crate::http::Route::Legacy => answers_at_once(req.body),
                    crate::http::Route::Core => crate::http::core_answers_at_once(&req),
                };
                assert_eq!(
                    crate::http::route_and_at_once(&req),
                    (route, at_once),
                    "{body} with {h:?}"
                );
            }
        }
    }

    #[test]
    fn cursors_round_trip_and_refuse_junk() {
        let c = encode_cursor(1_700_000_000_000, "tsk_abc");
        assert_eq!(
            decode_cursor(&c),
            Some((1_700_000_000_000, "tsk_abc".to_owned()))
        );
        assert_eq!(decode_cursor("!!"), None);
        assert_eq!(decode_cursor(&b64url(b"nocolon")), None);
    }

    #[test]
    fn task_object_renames_the_modern_fields() {
        let snap = json!({"taskId": "t", "status": "working", "createdAt": "a",
            "lastUpdatedAt": "b", "ttlMs": 5, "pollIntervalMs": 7, "inputRequests": {"k": {}}});
        let want = json!({"taskId": "t", "status": "working", "createdAt": "a",
            "lastUpdatedAt": "b", "ttl": 5, "pollInterval": 7});
        assert_eq!(task_object(&snap), want);
        // The borrowed form renders the same object.
        let text = snap.to_string();
        let fields: TaskFields<'_> = crate::json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_value(&fields).unwrap(), want);
        // A completion with an error result is a failure in 2025-11-25.
        let error_result = json!({"taskId": "t", "status": "completed", "createdAt": "a",
            "lastUpdatedAt": "b", "ttlMs": 5, "pollIntervalMs": 7,
            "result": {"content": [], "isError": true}});
        let want_failed = json!({"taskId": "t", "status": "failed", "createdAt": "a",
            "lastUpdatedAt": "b", "ttl": 5, "pollInterval": 7});
        assert_eq!(task_object(&error_result), want_failed);
        let text = error_result.to_string();
        let fields = TaskFields::read(&text).unwrap();
        assert_eq!(serde_json::to_value(&fields).unwrap(), want_failed);
        let mut fine = error_result.clone();
        fine["result"]["isError"] = json!(false);
        assert_eq!(task_object(&fine)["status"], "completed");
        let text = fine.to_string();
        assert_eq!(
            serde_json::to_value(TaskFields::read(&text).unwrap()).unwrap()["status"],
            "completed"
        );
        let with_message = json!({"taskId": "t", "status": "failed", "statusMessage": "x",
            "createdAt": "a", "lastUpdatedAt": "b", "ttlMs": null, "pollIntervalMs": 7});
        let text = with_message.to_string();
        let fields: TaskFields<'_> = crate::json::from_str(&text).unwrap();
        assert_eq!(
            serde_json::to_value(&fields).unwrap(),
            task_object(&with_message)
        );
    }
}
