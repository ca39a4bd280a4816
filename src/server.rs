//! One JSON-RPC message in, at most one response out: the two-phase parse,
//! per-request `_meta` negotiation, header mirroring checks, and dispatch on
//! the method. No transport details beyond the values of the mirrored
//! headers, which [`crate::http`] extracts.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use std::rc::Rc;

use crate::auth::{SignatureVerifier, VerifiedTokens};
use crate::catalog;
use crate::crypto::b64url;
use crate::error::{ErrorCode, RpcError, truncate};
use crate::ids::IdSource;
use crate::mrtr;
use crate::outbound::{NoOutbound, Outbound};
use crate::owner::Owner;
use crate::prompts::{PromptPlan, PromptRound};
use crate::protocol::jsonrpc::{
    EnvelopeError, Id, Message, close_with_members, error_bytes, notification_bytes, parse_message,
    result_bytes,
};
use crate::protocol::meta::{ClientCapabilities, MetaOnly, RawMeta, Split};
use crate::protocol::tasks::{ListenParams, TaskIdParams, TaskPayload, UpdateTaskParams};
use crate::protocol::tools::{CallToolParams, InputRequests, ListToolsParams};
use crate::protocol::{SUPPORTED_VERSIONS, TASKS_EXTENSION, meta_keys, methods, result_type};
use crate::store::Store;
use crate::tasks::record::TaskRecord;
use crate::tasks::record::complete_result;
use crate::tasks::runner::{Runner, TickReport};
use crate::tasks::subscription::{ListenSettings, Subscription};
use crate::tasks::{NewTask, NewTaskId, TaskError, TaskService};
use crate::time::Millis;
use crate::tools::{
    CallError, CallPlan, Progress, ProgressReport, TaskStart, TaskSupport, Tool, ToolCall, ToolSet,
    ToolSettings, no_settings,
};

pub use crate::config::Config;

/// Who is asking, and when. The adapter authenticates the request and reads
/// the platform clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestContext {
    pub owner: Owner,
    pub now: Millis,
}

/// One mirrored HTTP header as received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HeaderValue<'a> {
    #[default]
    Absent,
    Present(&'a str),
    /// Repeated with different values, or holding characters a header value
    /// may not contain.
    Invalid,
}

/// The standard MCP headers that must mirror the body. With `enforce` off
/// (transports without headers) nothing is checked.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mirror<'a> {
    pub enforce: bool,
    pub protocol_version: HeaderValue<'a>,
    pub method: HeaderValue<'a>,
    pub name: HeaderValue<'a>,
    /// Every request header, for the `Mcp-Param-*` headers that mirror tool
    /// arguments annotated with `x-mcp-header`.
    pub headers: &'a [(&'a str, &'a str)],
}

/// Whether a mirrored header's (decoded) text stands for the body's
/// `value`: a string as it is, a boolean as its JSON text, a number by its
/// value (`42.0` in the body is `42` in the header, as the spec suggests).
/// Integers are compared exactly: as floats, integers past 2^53 that
/// differ would compare equal.
fn mirrors(text: &str, value: &Value) -> bool {
    match value {
        Value::String(s) => text == s,
        // Read by the crate's JSON reader: `str::parse::<f64>` would add
        // core's own float parser (14 KB gzip to the Worker's wasm).
        Value::Number(n) => match crate::json::from_str::<Value>(text) {
            Ok(Value::Number(h)) => same_number(&h, n),
            _ => false,
        },
        Value::Bool(b) => text == if *b { "true" } else { "false" },
        Value::Null => text == "null",
        // Only scalars are mirrored into headers.
        Value::Array(_) | Value::Object(_) => false,
    }
}

/// Whether two JSON numbers have the same value: two floats as floats, two
/// integers exactly, and a float and an integer only where the float is
/// whole and exact (at most 2^53 in magnitude), as the integer.
fn same_number(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    let whole = |n: &serde_json::Number| -> Option<i128> {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    match (whole(a), whole(b)) {
        (Some(x), Some(y)) => x == y,
        (None, None) => a.as_f64() == b.as_f64(),
        (Some(i), None) | (None, Some(i)) => {
            const EXACT: f64 = 9_007_199_254_740_992.0;
            let f = if whole(a).is_none() { a } else { b };
            f.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() <= EXACT)
                .is_some_and(|f| f as i128 == i)
        }
    }
}

impl Mirror<'_> {
    /// No headers to check (a transport without them, or tests of the core).
    pub fn none() -> Mirror<'static> {
        Mirror::default()
    }

    /// The mirrored value of header `name`, as [`HeaderValue`].
    fn header(&self, name: &str) -> HeaderValue<'_> {
        mirrored(self.headers, name)
    }

    /// Each argument whose schema carries `x-mcp-header: "Name"` must come
    /// with a matching `Mcp-Param-Name` header (SEP-2243): a string as it is
    /// (or `=?base64?…?=`), a number or boolean as its JSON text; a header
    /// without its argument, or the other way round, is a mismatch.
    fn check_params(
        &self,
        input_schema: &Value,
        arguments: Option<&Map<String, Value>>,
    ) -> Result<(), RpcError> {
        if !self.enforce {
            return Ok(());
        }
        let Some(props) = input_schema.get("properties").and_then(Value::as_object) else {
            return Ok(());
        };
        for (param, schema) in props {
            let Some(suffix) = schema.get("x-mcp-header").and_then(Value::as_str) else {
                continue;
            };
            let header = format!("Mcp-Param-{suffix}");
            let expected = match arguments.and_then(|a| a.get(param)) {
                None | Some(Value::Null) => None,
                Some(v @ (Value::String(_) | Value::Number(_) | Value::Bool(_))) => Some(v),
                Some(_) => continue,
            };
            match (self.header(&header), expected) {
                (HeaderValue::Absent, None) => {}
                (HeaderValue::Present(v), Some(want))
                    if decode_sentinel(v).is_some_and(|got| mirrors(&got, want)) => {}
                (HeaderValue::Absent, Some(_)) => {
                    return Err(RpcError::header_mismatch(format!(
                        "the {header} header is required."
                    )));
                }
                _ => {
                    return Err(RpcError::header_mismatch(format!(
                        "the {header} header does not match the body."
                    )));
                }
            }
        }
        Ok(())
    }

    /// -32022 when the `MCP-Protocol-Version` header names a revision this
    /// server does not speak: the answer to a request that cannot be judged
    /// by its body's version (an unknown method, a missing `_meta`).
    fn unsupported_version(&self) -> Option<RpcError> {
        match self.protocol_version {
            HeaderValue::Present(v) if self.enforce => {
                let v = crate::limits::trim_ows(v);
                (!SUPPORTED_VERSIONS.contains(&v))
                    .then(|| RpcError::unsupported_version(truncate(v, 64)))
            }
            _ => None,
        }
    }

    fn check(
        &self,
        header: &str,
        got: HeaderValue<'_>,
        want: &str,
        required: bool,
    ) -> Result<(), RpcError> {
        if !self.enforce {
            return Ok(());
        }
        match got {
            HeaderValue::Absent if required => Err(RpcError::header_mismatch(format!(
                "the {header} header is required."
            ))),
            HeaderValue::Absent => Ok(()),
            HeaderValue::Invalid => Err(RpcError::header_mismatch(format!(
                "the {header} header is malformed."
            ))),
            HeaderValue::Present(v)
                if decode_sentinel(v).is_some_and(|got| {
                    crate::limits::same_bytes(got.as_bytes(), want.as_bytes())
                }) =>
            {
                Ok(())
            }
            HeaderValue::Present(_) => Err(RpcError::header_mismatch(format!(
                "the {header} header does not match the body."
            ))),
        }
    }
}

/// A header that must appear at most once with a valid value: absent,
/// present (trimmed of spaces and tabs), or invalid (repeated with
/// different values, or holding characters a header value may not contain).
pub(crate) fn mirrored<'a>(headers: &'a [(&'a str, &'a str)], name: &str) -> HeaderValue<'a> {
    headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .fold(HeaderValue::Absent, |seen, (_, v)| seen.and(v))
}

impl<'a> HeaderValue<'a> {
    /// What a header is once one more of its values, `value`, has been
    /// seen: the first value if it is valid, invalid if a later one differs.
    fn and(self, value: &'a str) -> HeaderValue<'a> {
        let value = crate::limits::trim_ows(value);
        match self {
            HeaderValue::Absent if crate::limits::is_field_text(value.as_bytes()) => {
                HeaderValue::Present(value)
            }
            HeaderValue::Present(first)
                if crate::limits::same_bytes(first.as_bytes(), value.as_bytes()) =>
            {
                self
            }
            _ => HeaderValue::Invalid,
        }
    }
}

impl<'a> Mirror<'a> {
    /// The mirrored headers of a request with `headers`, enforced, read in
    /// one pass over the headers (as [`mirrored`] reads each).
    pub(crate) fn of_headers(headers: &'a [(&'a str, &'a str)]) -> Mirror<'a> {
        let mut mirror = Mirror {
            enforce: true,
            headers,
            ..Mirror::default()
        };
        for (name, value) in headers {
            // Each of the three names starts with `mcp-` and has its own
            // length: most headers are passed over by these two checks.
            let (slot, wanted) = match name.len() {
                10 => (&mut mirror.method, "mcp-method"),
                8 => (&mut mirror.name, "mcp-name"),
                20 => (&mut mirror.protocol_version, "mcp-protocol-version"),
                _ => continue,
            };
            if crate::limits::same_name(name.as_bytes(), wanted.as_bytes()) {
                *slot = slot.and(value);
            }
        }
        mirror
    }
}

/// Decodes the `=?base64?...?=` form of a header value; other values are
/// returned as they are. A malformed sentinel decodes to `None`.
pub(crate) fn decode_sentinel(v: &str) -> Option<std::borrow::Cow<'_, str>> {
    match v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(inner) => {
            use base64::Engine;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(inner)
                .ok()?;
            String::from_utf8(bytes).ok().map(std::borrow::Cow::Owned)
        }
        None => Some(std::borrow::Cow::Borrowed(v)),
    }
}

/// What a request was, for the adapter's log line: only known method and
/// tool names and ids of tasks the caller could see, never raw input.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// The method, when it is one this server knows.
    pub method: Option<&'static str>,
    /// The tool called, when it is one this server offers.
    pub tool: Option<&'static str>,
    /// The task the request created or resolved.
    pub task_id: Option<String>,
    /// The JSON-RPC error code, if the request failed.
    pub error: Option<i64>,
    /// Why authentication failed (a fixed phrase, never token content).
    pub auth: Option<&'static str>,
    /// A store failure's own message, for the operator's log only (the
    /// client gets a generic error).
    pub detail: Option<String>,
}

impl Trace {
    /// Converts a task-domain error for the client, keeping what the
    /// operator needs to know.
    pub(crate) fn task_error(&mut self, e: TaskError) -> RpcError {
        if let Some(detail) = e.log_detail() {
            self.detail = Some(detail.to_owned());
        }
        e.into()
    }
}

/// What the server answers to one message.
#[derive(Debug)]
pub enum Reply {
    /// A notification: accepted, nothing to send back.
    Accepted,
    /// A JSON-RPC response, with the HTTP status it travels with.
    Json { status: u16, body: Vec<u8> },
    /// A `subscriptions/listen` stream.
    Listen(Subscription),
    /// Messages to send as an SSE stream (progress notifications, then the
    /// response).
    Frames(Vec<Vec<u8>>),
}

impl Reply {
    pub fn error(id: Option<&Id>, error: &RpcError) -> Reply {
        Reply::Json {
            status: error.http_status(),
            body: error_bytes(id, error),
        }
    }
}

/// The methods this server answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    Discover,
    ToolsList,
    ToolsCall,
    TasksGet,
    TasksUpdate,
    TasksCancel,
    Listen,
    PromptsList,
    PromptsGet,
    ResourcesList,
    ResourceTemplatesList,
    ResourcesRead,
    Complete,
}

/// Every method this server answers, by name: the one table both
/// directions read.
const METHODS: [(&str, Method); 13] = [
    (methods::SERVER_DISCOVER, Method::Discover),
    (methods::TOOLS_LIST, Method::ToolsList),
    (methods::TOOLS_CALL, Method::ToolsCall),
    (methods::TASKS_GET, Method::TasksGet),
    (methods::TASKS_UPDATE, Method::TasksUpdate),
    (methods::TASKS_CANCEL, Method::TasksCancel),
    (methods::SUBSCRIPTIONS_LISTEN, Method::Listen),
    (methods::PROMPTS_LIST, Method::PromptsList),
    (methods::PROMPTS_GET, Method::PromptsGet),
    (methods::RESOURCES_LIST, Method::ResourcesList),
    (
        methods::RESOURCE_TEMPLATES_LIST,
        Method::ResourceTemplatesList,
    ),
    (methods::RESOURCES_READ, Method::ResourcesRead),
    (methods::COMPLETION_COMPLETE, Method::Complete),
];

impl Method {
    fn from_name(name: &str) -> Option<Method> {
        METHODS.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
    }

    fn name(self) -> &'static str {
        METHODS
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("", |(n, _)| n)
    }

    fn is_task_method(self) -> bool {
        matches!(
            self,
            Method::TasksGet | Method::TasksUpdate | Method::TasksCancel
        )
    }
}

enum Outcome {
    Json(Vec<u8>),
    Listen(Subscription),
    /// Messages sent as SSE, the response last.
    Frames(Vec<Vec<u8>>),
}

/// What a server keeps from one request to the next: the credentials it
/// verified (see `crate::kept`), so that the same bytes are not checked
/// again. One per component instance; one per isolate on the Worker.
#[derive(Default)]
pub(crate) struct Verifications {
    /// Bearer tokens, with their caller and validity.
    pub(crate) tokens: VerifiedTokens,
    /// 2025-11-25 session ids, with their owner.
    #[cfg(feature = "legacy")]
    pub(crate) sessions: crate::legacy::session::VerifiedSessions,
}

/// The server: a store, the tools, settings, an id source.
pub struct Server<S: Store> {
    store: S,
    config: Config,
    tools: ToolSet,
    ids: Box<dyn IdSource>,
    runner_id: String,
    server_info: Value,
    result_meta: Value,
    result_meta_json: Vec<u8>,
    /// `server/discover`'s result, written once: it depends only on the
    /// configuration and the tools, both fixed at construction.
    discover_json: Vec<u8>,
    outbound: Box<dyn Outbound>,
    verifier: Box<dyn SignatureVerifier>,
    /// Tokens accepted before: this server's own, or the isolate's on the
    /// Worker (where a server lives for one request).
    verifications: Rc<Verifications>,
    tool_settings: Box<dyn ToolSettings>,
    clock: Option<fn() -> Millis>,
    log: fn(&str),
}

impl<S: Store> Server<S> {
    /// A server over `store` offering `tools`. `ids` supplies task ids,
    /// nonces and this instance's runner id. Refused without a state key
    /// (`config.state_keys` left at its empty default) or with one shorter
    /// than [`crate::config::MIN_STATE_SECRET_BYTES`], and for a tool set
    /// that registers a name or URI twice ([`ToolSet::duplicates`]).
    pub fn new(
        store: S,
        config: Config,
        tools: ToolSet,
        ids: Box<dyn IdSource>,
    ) -> Result<Self, RpcError> {
        // With no key, or a short one (a `Config` filled in by hand without
        // its `state_keys`, or with an empty previous key), anyone could
        // make request states, session tokens and input request ids.
        // `Config::from_env` holds MCP_STATE_SECRET and its previous key to
        // the same length.
        let min = crate::config::MIN_STATE_SECRET_BYTES;
        if config.state_keys.is_empty() {
            return Err(RpcError::internal(
                "The server has no state key: set Config::state_keys (MCP_STATE_SECRET).",
            ));
        }
        if config.state_keys.keys().any(|k| k.secret().len() < min) {
            return Err(RpcError::internal(format!(
                "A state key is shorter than {min} bytes: give Config::state_keys (MCP_STATE_SECRET and its previous key) at least {min} random bytes each."
            )));
        }
        if let Some(first) = tools.duplicates().first() {
            return Err(RpcError::internal(format!(
                "The tool set registers {first} twice; give each tool, prompt and resource its own name or URI."
            )));
        }
        let mut runner = [0u8; 9];
        ids.fill(&mut runner)?;
        let server_info = json!({ "name": config.server_name, "version": config.server_version });
        let result_meta = json!({ meta_keys::SERVER_INFO: server_info });
        let result_meta_json = serde_json::to_vec(&result_meta).unwrap_or_default();
        let discover_json = serde_json::to_vec(&discover(&config, &tools, &result_meta))
            .map_err(|_| RpcError::internal("The discover result could not be written."))?;
        Ok(Server {
            store,
            tools,
            ids,
            runner_id: b64url(&runner),
            server_info,
            result_meta,
            result_meta_json,
            discover_json,
            config,
            outbound: Box::new(NoOutbound),
            verifier: crate::auth::default_verifier(),
            verifications: Rc::default(),
            tool_settings: Box::new(no_settings),
            clock: None,
            log: |_| {},
        })
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn runner_id(&self) -> &str {
        &self.runner_id
    }

    /// Lends task steps the runtime's outbound HTTP (the operator's
    /// [`Config::outbound`] policy still applies to every request).
    pub fn with_outbound(mut self, outbound: Box<dyn Outbound>) -> Self {
        self.outbound = outbound;
        self
    }

    /// Checks bearer-token signatures with `verifier` instead of this
    /// runtime's default ([`crate::auth::default_verifier`]); the Worker's
    /// glue installs the platform's WebCrypto here.
    pub fn with_verifier(mut self, verifier: Box<dyn SignatureVerifier>) -> Self {
        self.verifier = verifier;
        self
    }

    /// The bearer-token signature verifier.
    pub fn verifier(&self) -> &dyn SignatureVerifier {
        &*self.verifier
    }

    /// Keeps the tokens this server accepts in `verifications`, shared
    /// with the other servers of one Worker isolate, instead of its own.
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    pub(crate) fn with_verifications(mut self, verifications: Rc<Verifications>) -> Self {
        self.verifications = verifications;
        self
    }

    /// The tokens this server accepted before.
    pub(crate) fn verifications(&self) -> &Verifications {
        &self.verifications
    }

    /// Lends task steps the runtime's settings and secrets (names starting
    /// with `MCP_` never reach a tool).
    pub fn with_tool_settings(mut self, settings: Box<dyn ToolSettings>) -> Self {
        self.tool_settings = settings;
        self
    }

    /// Gives the runner the platform clock, read after each step so that a
    /// slow step commits (and schedules its next wake-up) at the right time.
    pub fn with_clock(mut self, clock: fn() -> Millis) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Where the runner writes its operator log lines (JSON: a task given
    /// up on after its attempts, a refused outbound request).
    pub fn with_log(mut self, log: fn(&str)) -> Self {
        self.log = log;
        self
    }

    /// The runner that advances this server's tasks.
    pub fn runner(&self) -> Runner<'_, S> {
        let mut r = Runner::new(
            &self.store,
            &self.tools,
            &self.runner_id,
            self.config.lease_ms,
            &self.server_info,
            &self.config.state_keys,
        );
        r.retry = self.config.retry;
        r.outbound = self.outbound.as_ref();
        r.policy = &self.config.outbound;
        r.settings = self.tool_settings.as_ref();
        r.clock = self.clock.as_ref().map(|c| c as &dyn Fn() -> Millis);
        r.log = &self.log;
        r.max_task_bytes = self.config.limits.max_task_bytes;
        r
    }

    /// Advances due work: up to the configured budget of due tasks, one
    /// step each, and purges expired tasks.
    pub async fn tick(&self, now: Millis) -> TickReport {
        self.runner().tick(now, self.config.tick_budget).await
    }

    /// Advances the due tasks of one slice (see
    /// [`crate::tasks::runner::Slice`]): several of these may run at once,
    /// each on its own instance, without reaching for the same tasks.
    pub async fn tick_slice(&self, now: Millis, slice: crate::tasks::runner::Slice) -> TickReport {
        self.runner()
            .tick_slice(now, self.config.tick_budget, slice)
            .await
    }

    /// Handles one JSON-RPC message.
    pub async fn handle(
        &self,
        body: &[u8],
        mirror: &Mirror<'_>,
        ctx: &RequestContext,
        trace: &mut Trace,
    ) -> Reply {
        self.handle_parsed(parse_message(body), mirror, ctx, trace)
            .await
    }

    /// [`Server::handle`] for a message whose envelope has been read.
    pub(crate) async fn handle_parsed(
        &self,
        parsed: Result<Message<'_>, EnvelopeError>,
        mirror: &Mirror<'_>,
        ctx: &RequestContext,
        trace: &mut Trace,
    ) -> Reply {
        let msg = match parsed {
            Ok(m) => m,
            Err(e) => {
                trace.error = Some(e.error.code);
                return Reply::error(e.id.as_ref(), &e.error);
            }
        };
        let Some(id) = &msg.id else {
            // Notifications never get a response. `notifications/cancelled`
            // has nothing to cancel here (tasks use tasks/cancel). One sent
            // in a protocol version this server does not speak is not
            // accepted: 400 with -32022 and no id.
            if let Some(e) = mirror.unsupported_version() {
                trace.error = Some(e.code);
                return Reply::error(None, &e);
            }
            return Reply::Accepted;
        };
        match self.request(id, &msg, mirror, ctx, trace).await {
            Ok(Outcome::Json(body)) => Reply::Json { status: 200, body },
            Ok(Outcome::Listen(sub)) => Reply::Listen(sub),
            Ok(Outcome::Frames(frames)) => Reply::Frames(frames),
            Err(e) => {
                trace.error = Some(e.code);
                Reply::error(Some(id), &e)
            }
        }
    }

    /// The request `msg`, whose id is `id`.
    async fn request(
        &self,
        id: &Id,
        msg: &Message<'_>,
        mirror: &Mirror<'_>,
        ctx: &RequestContext,
        trace: &mut Trace,
    ) -> Result<Outcome, RpcError> {
        let method_name = msg.method.as_str();
        let method = Method::from_name(method_name).ok_or_else(|| {
            mirror
                .unsupported_version()
                .unwrap_or_else(|| RpcError::method_not_found(method_name))
        })?;
        trace.method = Some(method.name());
        let raw = msg.params.unwrap_or("{}");
        // Split while the envelope was read, or now.
        let later;
        let split = match &msg.split {
            Some(split) => Some(split),
            None => {
                later = crate::protocol::meta::split_meta(raw);
                later.as_ref()
            }
        };
        let meta = split.map(|s| s.meta);
        let caps = self
            .negotiate(raw, split, mirror)
            .map_err(|e| match e.code {
                // No version in the body to judge: the header's, if this
                // server does not speak it.
                ErrorCode::INVALID_PARAMS => mirror.unsupported_version().unwrap_or(e),
                _ => e,
            })?;
        mirror.check("Mcp-Method", mirror.method, method_name, true)?;
        if method.is_task_method() && !caps.has_tasks() {
            return Err(RpcError::tasks_extension_required());
        }
        let call = Call {
            id,
            method: method_name,
            raw,
            rest: split.map_or(raw, |s| &s.rest),
            meta,
            caps: &caps,
            mirror,
            ctx,
        };
        // A catalog method only behind a capability `server/discover`
        // advertises.
        if !catalog::offers(&self.tools, method_name) {
            return Err(RpcError::method_not_found(method_name));
        }
        match method {
            Method::Discover => Ok(Outcome::Json(raw_result_response(
                call.id,
                &self.discover_json,
            ))),
            Method::ToolsList => self.tools_list(&call),
            Method::ToolsCall => self.tools_call(&call, trace).await,
            Method::TasksGet => self.tasks_get(&call, trace).await,
            Method::TasksUpdate => self.tasks_update(&call, trace).await,
            Method::TasksCancel => self.tasks_cancel(&call, trace).await,
            Method::Listen => self.listen(&call).await,
            Method::PromptsList => {
                let list = catalog::prompts_list(&self.tools, &call.params()?)?;
                Ok(call.json(&self.cacheable(list)))
            }
            Method::ResourcesList => {
                let list = catalog::resources_list(&self.tools, &call.params()?)?;
                Ok(call.json(&self.cacheable(list)))
            }
            Method::ResourceTemplatesList => {
                let list = catalog::templates_list(&self.tools, &call.params()?)?;
                Ok(call.json(&self.cacheable(list)))
            }
            Method::PromptsGet => self.prompts_get(&call).await,
            Method::ResourcesRead => self.resources_read(&call),
            Method::Complete => {
                let result = catalog::complete(&self.tools, &call.params()?)?;
                Ok(call.json(&self.complete(result)))
            }
        }
    }

    fn tools_list(&self, c: &Call<'_>) -> Result<Outcome, RpcError> {
        let p: ListToolsParams = c.params()?;
        if p.cursor.is_some() {
            return Err(RpcError::invalid_params(
                "Invalid cursor: this list has a single page.",
            ));
        }
        Ok(c.json(&self.cacheable(json!({ "tools": self.tools.descriptors() }))))
    }

    async fn tools_call(&self, c: &Call<'_>, trace: &mut Trace) -> Result<Outcome, RpcError> {
        let p: CallToolParams = c.params()?;
        self.check_responses(p.input_responses.as_ref().map_or(0, Map::len))?;
        c.mirror.check("Mcp-Name", c.mirror.name, &p.name, true)?;
        if let Some(d) = self.tools.descriptor(&p.name) {
            c.mirror
                .check_params(&d.input_schema, p.arguments.as_ref())?;
        }
        let token = match c.meta {
            Some(meta) => meta.and_then(meta_progress_token),
            None => progress_token(c.raw),
        };
        let progress = Progress::default();
        let result = self
            .call_tool(
                p,
                c.caps,
                c.ctx,
                token.is_some().then_some(&progress),
                trace,
            )
            .await?;
        match progress_frames(token.as_ref(), &progress, || result_bytes(c.id, &result)) {
            Some(frames) => Ok(Outcome::Frames(frames)),
            None => Ok(c.json(&result)),
        }
    }

    async fn tasks_get(&self, c: &Call<'_>, trace: &mut Trace) -> Result<Outcome, RpcError> {
        let p = c.task_id_params()?;
        c.mirror
            .check("Mcp-Name", c.mirror.name, &p.task_id, false)?;
        let view = TaskService::new(&self.store, &self.server_info)
            .view(&c.ctx.owner, &p.task_id, c.ctx.now)
            .await
            .map_err(|e| trace.task_error(e))?;
        let body = snapshot_response(c.id, &self.result_meta_json, &view.snapshot);
        trace.task_id = Some(p.task_id);
        Ok(Outcome::Json(body))
    }

    async fn tasks_update(&self, c: &Call<'_>, trace: &mut Trace) -> Result<Outcome, RpcError> {
        let p: UpdateTaskParams = c.params()?;
        self.check_responses(p.input_responses.len())?;
        c.mirror
            .check("Mcp-Name", c.mirror.name, &p.task_id, false)?;
        let runner = self.runner();
        TaskService::new(&self.store, &self.server_info)
            .limited(self.config.limits.max_task_bytes)
            .with_inline_steps(&runner)
            .update(&c.ctx.owner, &p.task_id, &p.input_responses, c.ctx.now)
            .await
            .map_err(|e| trace.task_error(e))?;
        trace.task_id = Some(p.task_id);
        Ok(c.json(&self.complete(Value::Object(Map::new()))))
    }

    async fn tasks_cancel(&self, c: &Call<'_>, trace: &mut Trace) -> Result<Outcome, RpcError> {
        let p = c.task_id_params()?;
        c.mirror
            .check("Mcp-Name", c.mirror.name, &p.task_id, false)?;
        TaskService::new(&self.store, &self.server_info)
            .cancel(&c.ctx.owner, &p.task_id, c.ctx.now)
            .await
            .map_err(|e| trace.task_error(e))?;
        trace.task_id = Some(p.task_id);
        Ok(c.json(&self.complete(Value::Object(Map::new()))))
    }

    async fn listen(&self, c: &Call<'_>) -> Result<Outcome, RpcError> {
        let p: ListenParams = c.params()?;
        if p.notifications.task_ids.is_some() && !c.caps.has_tasks() {
            return Err(RpcError::tasks_extension_required());
        }
        let mut sub = Subscription::open(
            &self.store,
            c.id.clone(),
            c.ctx.owner.clone(),
            &p.notifications,
            c.ctx.now,
            ListenSettings {
                max_ms: self.config.listen_max_ms,
                poll_interval_ms: self.config.listen_poll_ms,
                server_info: self.server_info.clone(),
            },
        )
        .await?;
        let mut nonce = [0u8; 12];
        self.ids.fill(&mut nonce)?;
        sub.slot = crate::tasks::streams::open(
            &self.store,
            &c.ctx.owner,
            &crate::crypto::b64url(&nonce),
            c.ctx.now,
            self.config.limits.max_listen_streams,
        )
        .await?
        .map(Box::new);
        Ok(Outcome::Listen(sub))
    }

    async fn prompts_get(&self, c: &Call<'_>) -> Result<Outcome, RpcError> {
        let p: catalog::GetPromptParams = c.params()?;
        c.mirror.check("Mcp-Name", c.mirror.name, &p.name, true)?;
        self.check_responses(p.input_responses.as_ref().map_or(0, Map::len))?;
        // A prompt's rounds are bound to its name, its arguments and the
        // caller, like a tool's.
        let bound = format!("prompt:{}", p.name);
        let arguments = p.arguments.clone().unwrap_or_default();
        let verified = self.verify_round(c.ctx, &bound, &arguments, p.request_state.as_deref())?;
        let round = PromptRound {
            capabilities: c.caps,
            input_responses: verified.as_ref().and(p.input_responses.as_ref()),
            round_state: verified.as_ref().map(|v| &v.data),
        };
        let plan = catalog::prompts_get(&self.tools, &p, Some(&round))?;
        self.spend_round(verified.as_ref()).await?;
        match plan {
            PromptPlan::Messages(result) => {
                Ok(c.json(&self.complete(catalog::prompt_result(&result)?)))
            }
            PromptPlan::InputRequired {
                requests,
                round_state,
            } => Ok(c.json(&self.input_required(
                c.ctx,
                &bound,
                &arguments,
                &requests,
                round_state,
            )?)),
        }
    }

    fn resources_read(&self, c: &Call<'_>) -> Result<Outcome, RpcError> {
        let p: catalog::ReadParams = c.params()?;
        c.mirror.check("Mcp-Name", c.mirror.name, &p.uri, true)?;
        // A read is not cached: a resource may change at any time.
        let result = self.cached(catalog::resources_read(&self.tools, &p)?, 0, "private");
        Ok(c.json(&result))
    }

    /// Reads the required `_meta` members and checks the version against the
    /// header and the versions this server speaks. `split` is the params
    /// split at `_meta`, if they were; otherwise `_meta` is read from `raw`,
    /// the whole params.
    fn negotiate(
        &self,
        raw: &str,
        split: Option<&Split<'_>>,
        mirror: &Mirror<'_>,
    ) -> Result<ClientCapabilities, RpcError> {
        let meta = split.map(|s| s.meta);
        let plain = split.and_then(|s| s.known);
        if let Some((version, caps)) = plain.and_then(crate::protocol::meta::read_known) {
            return self.accept_version(version, mirror).map(|()| caps);
        }
        let not_object = |_| RpcError::missing_meta("Invalid params: _meta must be an object.");
        let meta: Option<RawMeta<'_>> = match meta {
            Some(None | Some("null")) => None,
            Some(Some(text)) => Some(crate::json::from_str(text).map_err(not_object)?),
            None => {
                crate::json::from_str::<MetaOnly<'_>>(raw)
                    .map_err(not_object)?
                    .meta
            }
        };
        let meta = meta.ok_or_else(|| {
            RpcError::missing_meta("Invalid params: the required params._meta is missing.")
        })?;
        let version_raw = meta.protocol_version.ok_or_else(|| {
            RpcError::missing_meta(format!(
                "Invalid params: _meta is missing {}.",
                meta_keys::PROTOCOL_VERSION
            ))
        })?;
        let version: String = crate::json::from_str(version_raw.get()).map_err(|_| {
            RpcError::missing_meta(format!(
                "Invalid params: {} must be a string.",
                meta_keys::PROTOCOL_VERSION
            ))
        })?;
        let caps_raw = meta.client_capabilities.ok_or_else(|| {
            RpcError::missing_meta(format!(
                "Invalid params: _meta is missing {}.",
                meta_keys::CLIENT_CAPABILITIES
            ))
        })?;
        let caps: ClientCapabilities = crate::json::from_str(caps_raw.get()).map_err(|_| {
            RpcError::missing_meta(format!(
                "Invalid params: {} is malformed.",
                meta_keys::CLIENT_CAPABILITIES
            ))
        })?;
        self.accept_version(&version, mirror).map(|()| caps)
    }

    /// Checks the `_meta` version against the header and the versions this
    /// server speaks.
    fn accept_version(&self, version: &str, mirror: &Mirror<'_>) -> Result<(), RpcError> {
        mirror.check(
            "MCP-Protocol-Version",
            mirror.protocol_version,
            version,
            true,
        )?;
        if !SUPPORTED_VERSIONS.contains(&version) {
            return Err(RpcError::unsupported_version(truncate(version, 64)));
        }
        Ok(())
    }

    fn check_responses(&self, n: usize) -> Result<(), RpcError> {
        let max = self.config.limits.max_input_responses;
        if n > max {
            return Err(RpcError::invalid_params(format!(
                "Too many inputResponses: at most {max} per request."
            )));
        }
        Ok(())
    }

    /// A complete result: `resultType` and this server's `_meta` added.
    fn complete(&self, mut v: Value) -> Value {
        if let Value::Object(map) = &mut v {
            map.insert("resultType".into(), Value::from(result_type::COMPLETE));
            map.insert("_meta".into(), self.result_meta.clone());
        }
        v
    }

    /// A complete, cacheable list result. Nothing listed here depends on
    /// who asks, so the scope is public.
    fn cacheable(&self, v: Value) -> Value {
        self.cached(v, self.config.list_ttl_ms, "public")
    }

    /// A complete result with cache hints.
    fn cached(&self, v: Value, ttl_ms: u64, scope: &str) -> Value {
        let mut v = self.complete(v);
        if let Value::Object(map) = &mut v {
            map.insert("ttlMs".into(), Value::from(ttl_ms));
            map.insert("cacheScope".into(), Value::from(scope));
        }
        v
    }

    async fn call_tool(
        &self,
        p: CallToolParams,
        caps: &ClientCapabilities,
        ctx: &RequestContext,
        progress: Option<&Progress>,
        trace: &mut Trace,
    ) -> Result<Value, RpcError> {
        let (name, tool) = self.tool_for(&p.name, caps, trace)?;
        let arguments = p.arguments.unwrap_or_default();
        if let Some(why) = self.argument_refusal(name, &arguments) {
            return Ok(complete_result(
                &crate::protocol::tools::CallToolResult::error(why),
                &self.server_info,
            ));
        }
        let verified = self.verify_round(ctx, &p.name, &arguments, p.request_state.as_deref())?;
        let call = ToolCall {
            arguments: &arguments,
            capabilities: caps,
            input_responses: verified.as_ref().and(p.input_responses.as_ref()),
            round_state: verified.as_ref().map(|v| &v.data),
            now: ctx.now,
            progress,
        };
        let plan = match tool.call(&call) {
            Ok(plan) => plan,
            Err(CallError::InvalidArguments(why)) => {
                return Ok(complete_result(
                    &crate::protocol::tools::CallToolResult::error(why),
                    &self.server_info,
                ));
            }
            Err(CallError::Rpc(e)) => return Err(e),
        };
        if matches!(plan, CallPlan::Task(_)) {
            // A round that creates a task may be replayed (it finds the
            // same task), unless it was answered without one.
            self.claim_task_round(verified.as_ref()).await?;
        } else {
            // Any other round is answered once.
            self.spend_round(verified.as_ref()).await?;
        }
        match plan {
            CallPlan::Result(result) => Ok(complete_result(&result, &self.server_info)),
            CallPlan::InputRequired {
                requests,
                round_state,
            } => self.input_required(ctx, &p.name, &arguments, &requests, round_state),
            CallPlan::Task(start) => {
                if !caps.has_tasks() {
                    return Err(RpcError::tasks_extension_required());
                }
                let id = match &verified {
                    Some(v) => NewTaskId::FromRound {
                        secret: self
                            .config
                            .state_keys
                            .by_id(&v.key_id)
                            .unwrap_or(self.config.state_keys.current())
                            .secret(),
                        nonce: &v.nonce,
                        placements: v.placements.unwrap_or(self.config.task_placements),
                    },
                    None => NewTaskId::Random(self.ids.as_ref()),
                };
                let started = StartTask {
                    tool: name,
                    arguments,
                    capabilities: caps.clone(),
                    start,
                    ttl_ms: self.config.task_ttl_ms,
                    result: None,
                };
                let record = self.start_task(started, id, ctx, trace).await?;
                let mut wire = record.wire(
                    Some(result_type::TASK),
                    &self.server_info,
                    Some(self.result_meta.clone()),
                );
                wire.payload = TaskPayload::None;
                serde_json::to_value(&wire)
                    .map_err(|_| RpcError::internal("Internal error: a task could not be encoded."))
            }
        }
    }

    /// The verified data of a multi round-trip retry's `requestState`, bound
    /// to `bound` (a tool's name, or `prompt:<name>`), the arguments and the
    /// caller; `None` on a first call.
    fn verify_round(
        &self,
        ctx: &RequestContext,
        bound: &str,
        arguments: &Map<String, Value>,
        state: Option<&str>,
    ) -> Result<Option<mrtr::Verified>, RpcError> {
        state
            .map(|state| {
                mrtr::verify(
                    &self.config.state_keys,
                    mrtr::Binding {
                        owner: &ctx.owner,
                        tool: bound,
                        arguments,
                    },
                    state,
                    ctx.now,
                )
            })
            .transpose()
    }

    /// Why `arguments` may not be used with tool `name`: a key its input
    /// schema does not declare, or more than the stored-argument limit.
    /// A tool argument error, so the model can correct itself.
    pub(crate) fn argument_refusal(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
    ) -> Option<String> {
        if let Some(d) = self.tools.descriptor(name)
            && let Some(key) = crate::tools::unknown_argument(&d.input_schema, arguments)
        {
            return Some(format!(
                "Invalid arguments: {:?} is not an argument of {name}.",
                truncate(key, 64)
            ));
        }
        let max = self.config.limits.max_argument_bytes;
        if max > 0 {
            let size = serde_json::to_string(arguments).map_or(usize::MAX, |s| s.len());
            if size > max {
                return Some(format!(
                    "Invalid arguments: {size} bytes of arguments, more than the {max} allowed."
                ));
            }
        }
        None
    }

    /// Marks a verified round as answered, so that its `requestState` is
    /// single-use: one create-if-absent of a scratch record that expires
    /// with the state (the runner purges it then). A second use is -32602.
    async fn spend_round(&self, verified: Option<&mrtr::Verified>) -> Result<(), RpcError> {
        let Some(v) = verified else {
            return Ok(());
        };
        // A round already answered with a task is spent too.
        if self.round_task_exists(v).await? {
            return Err(round_spent());
        }
        match self
            .store
            .put(&spent_key(v), None, "{}", Some(v.expires_at))
            .await
        {
            Ok(_) => Ok(()),
            Err(crate::store::StoreError::Conflict { .. }) => Err(round_spent()),
            Err(crate::store::StoreError::Unavailable(why)) => Err(TaskError::Store(why).into()),
        }
    }

    /// Claims a round that creates a task, or refuses it if it was already
    /// answered without one. The claim is the same create-if-absent record
    /// [`Self::spend_round`] writes, marked as a task's: whichever of two
    /// racing answers of one round (one that creates a task, one that does
    /// not) writes it first is the one answered. Replaying the round that
    /// created a task stays allowed (it finds that task).
    async fn claim_task_round(&self, verified: Option<&mrtr::Verified>) -> Result<(), RpcError> {
        let Some(v) = verified else {
            return Ok(());
        };
        let key = spent_key(v);
        let store_failed = |e: crate::store::StoreError| -> RpcError { TaskError::from(e).into() };
        match self
            .store
            .put(&key, None, TASK_ROUND, Some(v.expires_at))
            .await
        {
            Ok(_) => Ok(()),
            Err(crate::store::StoreError::Conflict { .. }) => {
                match self.store.get(&key).await.map_err(store_failed)? {
                    Some(entry) if entry.body == TASK_ROUND => Ok(()),
                    // Spent without a task, or gone with its expiry.
                    _ => Err(round_spent()),
                }
            }
            Err(e) => Err(store_failed(e)),
        }
    }

    /// Whether the task round `v` would create exists already.
    async fn round_task_exists(&self, v: &mrtr::Verified) -> Result<bool, RpcError> {
        let Some(key) = self.config.state_keys.by_id(&v.key_id) else {
            return Ok(false);
        };
        let placements = v.placements.unwrap_or(self.config.task_placements);
        let id = crate::tasks::round_task_id(key.secret(), &v.nonce, placements);
        self.store
            .get(&id)
            .await
            .map(|e| e.is_some())
            .map_err(|e| TaskError::from(e).into())
    }

    /// An `input_required` result: the requests, and the round's data signed
    /// into `requestState` with the same binding [`Self::verify_round`] checks.
    fn input_required(
        &self,
        ctx: &RequestContext,
        bound: &str,
        arguments: &Map<String, Value>,
        requests: &InputRequests,
        round_state: Value,
    ) -> Result<Value, RpcError> {
        // No longer than a task lives: a round that created a task must find
        // it (or its expiry) when replayed, never a purged id to create
        // again, running the tool a second time.
        let ttl = self
            .config
            .request_state_ttl_ms
            .min(self.config.task_ttl_ms);
        let expires = ctx.now.saturating_add(ttl.min(i64::MAX as u64) as i64);
        let state = mrtr::sign(
            &self.config.state_keys,
            self.ids.as_ref(),
            mrtr::Binding {
                owner: &ctx.owner,
                tool: bound,
                arguments,
            },
            round_state,
            expires,
            self.config.task_placements,
        )?;
        Ok(json!({
            "resultType": result_type::INPUT_REQUIRED,
            "inputRequests": requests,
            "requestState": state,
            "_meta": self.result_meta,
        }))
    }

    /// The tool called `name`, once the client's capabilities meet what it
    /// needs (otherwise -32021 naming what is missing).
    pub(crate) fn tool_for(
        &self,
        name: &str,
        caps: &ClientCapabilities,
        trace: &mut Trace,
    ) -> Result<(&'static str, &dyn Tool), RpcError> {
        let (name, tool) = self.tools.get_named(name).ok_or_else(|| {
            RpcError::invalid_params(format!("Unknown tool: {}", truncate(name, 64)))
        })?;
        trace.tool = Some(name);
        let needs = tool.requirements();
        let mut missing = Map::new();
        if needs.tasks == TaskSupport::Required && !caps.has_tasks() {
            missing.insert("extensions".into(), json!({ TASKS_EXTENSION: {} }));
        }
        if needs.form_elicitation && !caps.has_form_elicitation() {
            missing.insert("elicitation".into(), json!({ "form": {} }));
        }
        if needs.sampling && caps.sampling.is_none() {
            missing.insert("sampling".into(), json!({}));
        }
        if !missing.is_empty() {
            return Err(RpcError::missing_capability(Value::Object(missing)));
        }
        Ok((name, tool))
    }

    /// Persists a new task for a tool call (durable before any handle is
    /// returned), counted against the caller's quota.
    pub(crate) async fn start_task(
        &self,
        started: StartTask,
        id: NewTaskId<'_>,
        ctx: &RequestContext,
        trace: &mut Trace,
    ) -> Result<TaskRecord, RpcError> {
        let new = NewTask {
            owner: &ctx.owner,
            tool: started.tool,
            arguments: started.arguments,
            capabilities: started.capabilities,
            state: started.start.state,
            first_step_in_ms: started.start.first_step_in_ms,
            message: started.start.message,
            now: ctx.now,
            ttl_ms: started.ttl_ms,
            poll_interval_ms: self.config.poll_interval_ms,
            key_id: Some(self.config.state_keys.current().id().to_owned()),
            result: started.result,
        };
        let runner = self.runner();
        let record = TaskService::new(&self.store, &self.server_info)
            .with_inline_steps(&runner)
            .start(
                new,
                id,
                crate::tasks::StartLimits {
                    placements: self.config.task_placements,
                    ..crate::tasks::StartLimits::of(&self.config.limits)
                },
            )
            .await
            .map_err(|e| trace.task_error(e))?;
        trace.task_id = Some(record.id.clone());
        Ok(record)
    }

    /// The tools this server offers.
    #[cfg_attr(not(feature = "legacy"), allow(dead_code))]
    pub(crate) fn tools(&self) -> &ToolSet {
        &self.tools
    }

    /// `{"name", "version"}` of this server.
    #[cfg_attr(not(feature = "legacy"), allow(dead_code))]
    pub(crate) fn server_info(&self) -> &Value {
        &self.server_info
    }

    /// Where random tokens come from.
    #[cfg_attr(not(feature = "legacy"), allow(dead_code))]
    pub(crate) fn ids(&self) -> &dyn IdSource {
        self.ids.as_ref()
    }
}

/// A tool call about to become a task.
pub(crate) struct StartTask {
    pub tool: &'static str,
    pub arguments: Map<String, Value>,
    pub capabilities: ClientCapabilities,
    pub start: TaskStart,
    pub ttl_ms: u64,
    /// The result, when the tool answered at once (the task is created
    /// completed).
    pub result: Option<crate::protocol::tools::CallToolResult>,
}

/// The request's `_meta.progressToken` (a string or an integer), if any.
pub(crate) fn progress_token(raw_params: &str) -> Option<Value> {
    #[derive(serde::Deserialize)]
    struct P {
        #[serde(rename = "_meta", default)]
        meta: Option<TokenOnly>,
    }
    crate::json::from_str::<P>(raw_params).ok()?.meta?.token()
}

/// [`progress_token`] from the text of `_meta` alone.
fn meta_progress_token(meta: &str) -> Option<Value> {
    crate::json::from_str::<Option<TokenOnly>>(meta)
        .ok()??
        .token()
}

#[derive(serde::Deserialize)]
struct TokenOnly {
    #[serde(rename = "progressToken", default)]
    token: Option<Value>,
}

impl TokenOnly {
    fn token(self) -> Option<Value> {
        self.token
            .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
    }
}

/// A `notifications/progress` message for `token`.
fn progress_notification(token: &Value, report: ProgressReport) -> Vec<u8> {
    let mut params = serde_json::to_value(report).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut params {
        map.insert("progressToken".into(), token.clone());
    }
    notification_bytes(methods::NOTIFICATION_PROGRESS, &params)
}

/// The frames of a response that carries progress: each report as a
/// `notifications/progress` for `token`, then `response`. `None` when the
/// client sent no token or the call reported nothing (a plain response).
pub(crate) fn progress_frames(
    token: Option<&Value>,
    progress: &Progress,
    response: impl FnOnce() -> Vec<u8>,
) -> Option<Vec<Vec<u8>>> {
    let token = token?;
    let reports = progress.take();
    if reports.is_empty() {
        return None;
    }
    let mut frames: Vec<Vec<u8>> = reports
        .into_iter()
        .map(|r| progress_notification(token, r))
        .collect();
    frames.push(response());
    Some(frames)
}

/// `server/discover`'s result for a server with `config` and `tools`.
fn discover(config: &Config, tools: &ToolSet, result_meta: &Value) -> Value {
    let mut v = json!({
        "resultType": result_type::COMPLETE,
        "supportedVersions": SUPPORTED_VERSIONS,
        "capabilities": {
            "tools": {},
            "extensions": { TASKS_EXTENSION: {} }
        },
        "ttlMs": config.discover_ttl_ms,
        "cacheScope": "public",
        "_meta": result_meta,
    });
    if let (Some(text), Value::Object(map)) = (&config.instructions, &mut v) {
        map.insert("instructions".into(), Value::from(text.as_str()));
    }
    if let Some(Value::Object(caps)) = v.get_mut("capabilities") {
        caps.extend(catalog::capabilities(tools));
    }
    v
}

/// A response's text up to its result: `{"jsonrpc":"2.0","id":…,"result":`,
/// with room for `more` bytes.
fn result_head(id: &Id, more: usize) -> Vec<u8> {
    let mut head = Vec::with_capacity(more + 48);
    head.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    if serde_json::to_writer(&mut head, id).is_err() {
        head.extend_from_slice(b"null");
    }
    head.extend_from_slice(br#","result":"#);
    head
}

/// A response whose result is `result_json`, the JSON text of a value
/// written earlier.
fn raw_result_response(id: &Id, result_json: &[u8]) -> Vec<u8> {
    let mut out = result_head(id, result_json.len() + 1);
    out.extend_from_slice(result_json);
    out.push(b'}');
    out
}

/// A `tasks/get` response around a stored snapshot, without parsing it:
/// `{"jsonrpc":"2.0","id":…,"result":{"resultType":"complete","_meta":…,<snapshot members>}}`.
fn snapshot_response(id: &Id, meta_json: &[u8], snapshot: &str) -> Vec<u8> {
    let mut head = result_head(id, snapshot.len() + meta_json.len() + 40);
    head.extend_from_slice(br#"{"resultType":"complete","_meta":"#);
    close_with_members(head, meta_json, snapshot)
}

/// The body of a spent-round record whose round created a task (see
/// `Server::claim_task_round`); a round answered without one is `{}`.
const TASK_ROUND: &str = "{\"task\":true}";

/// The scratch record that marks a round as answered.
fn spent_key(v: &mrtr::Verified) -> String {
    crate::tasks::scratch::key(&format!("used_{}", v.nonce))
}

fn round_spent() -> RpcError {
    RpcError::invalid_params(
        "Invalid requestState: this round was already answered; start the request again.",
    )
}

/// Phase two: the method's exact params type. A mismatch is -32602.
fn typed<T: DeserializeOwned>(raw: &str, method: &str) -> Result<T, RpcError> {
    crate::json::from_str(raw).map_err(|e| {
        RpcError::invalid_params(format!(
            "Invalid params for {method}: {}.",
            truncate(&e.to_string(), 200)
        ))
    })
}

/// One request as its method's handler sees it, after negotiation.
struct Call<'a> {
    id: &'a Id,
    method: &'a str,
    /// The params object as received.
    raw: &'a str,
    /// The params without `_meta` (`raw` when they were not split).
    rest: &'a str,
    /// `_meta`'s text when the params were split (see
    /// [`crate::protocol::meta::split_meta`]).
    meta: Option<Option<&'a str>>,
    caps: &'a ClientCapabilities,
    mirror: &'a Mirror<'a>,
    ctx: &'a RequestContext,
}

impl Call<'_> {
    /// Phase two of the parse: the method's exact params type, read
    /// without `_meta` (no params type has that member). A failure is read
    /// again from the params as received, so that the error's positions are
    /// the client's own.
    fn params<T: DeserializeOwned>(&self) -> Result<T, RpcError> {
        typed(self.rest, self.method).or_else(|_| typed(self.raw, self.method))
    }

    /// `tasks/get` and `tasks/cancel` params: read straight from the form
    /// clients send (see [`canonical_task_id`]), by [`Call::params`]
    /// otherwise.
    fn task_id_params(&self) -> Result<TaskIdParams, RpcError> {
        match canonical_task_id(self.rest) {
            Some(id) => Ok(TaskIdParams {
                task_id: id.to_owned(),
            }),
            None => self.params(),
        }
    }

    /// A successful response carrying `result`.
    fn json<T: Serialize>(&self, result: &T) -> Outcome {
        Outcome::Json(result_bytes(self.id, result))
    }
}

/// The id in params that are exactly `{"taskId":"<id>"}` (no space, no
/// other member) with no escape in the id: what serde reads from them, for
/// the form every client's JSON writer produces. `None` for anything else,
/// which serde reads. `params` is valid JSON (the envelope's readers
/// checked it).
fn canonical_task_id(params: &str) -> Option<&str> {
    let id = params
        .strip_prefix(r#"{"taskId":""#)?
        .strip_suffix(r#""}"#)?;
    (!id.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20)).then_some(id)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::mirrors;

    proptest::proptest! {
        /// The canonical form's id is serde's reading of the same params,
        /// and the form a JSON writer gives an id without escapes is taken.
        #[test]
        fn canonical_task_ids_are_serdes(
            id in "[ -~\u{80}-\u{10ffff}\u{0}-\u{1f}]{0,24}",
            extra in proptest::option::of("[a-z]{1,3}"),
            spaced in proptest::bool::ANY,
        ) {
            let mut params = json!({"taskId": id});
            if let Some(name) = &extra {
                params[name.as_str()] = json!(1);
            }
            let text = if spaced {
                serde_json::to_string_pretty(&params).unwrap()
            } else {
                serde_json::to_string(&params).unwrap()
            };
            let serde = crate::json::from_str::<super::TaskIdParams>(&text).unwrap();
            match super::canonical_task_id(&text) {
                Some(fast) => proptest::prop_assert_eq!(fast, serde.task_id.as_str()),
                None => {
                    let plain = !id.chars().any(|c| c == '"' || c == '\\' || c < ' ');
                    proptest::prop_assert!(!plain || extra.is_some() || spaced, "not taken: {}", text);
                }
            }
        }
    }

    #[test]
    fn only_the_exact_form_is_read_past_serde() {
        use super::canonical_task_id as fast;
        assert_eq!(fast(r#"{"taskId":"tsk_a"}"#), Some("tsk_a"));
        assert_eq!(fast(r#"{"taskId":""}"#), Some(""));
        assert_eq!(fast(r#"{"taskId":"a\"b"}"#), None);
        assert_eq!(fast(r#"{"taskId":"a\u0041"}"#), None);
        assert_eq!(fast(r#"{"taskId":"a","b":"c"}"#), None);
        assert_eq!(fast(r#"{"taskId":"a","taskId":"c"}"#), None);
        assert_eq!(fast(r#"{"taskId": "a"}"#), None);
        assert_eq!(fast(r#"{"taskId":1}"#), None);
        assert_eq!(fast(r#"{"taskid":"a"}"#), None);
    }

    #[test]
    fn a_header_mirrors_scalars_by_their_text_or_value() {
        assert!(mirrors("eu", &json!("eu")));
        assert!(!mirrors("\"eu\"", &json!("eu")));
        assert!(mirrors("3", &json!(3.0)));
        assert!(mirrors("42.0", &json!(42)));
        assert!(!mirrors("3x", &json!(3)));
        assert!(mirrors("3e0", &json!(3)), "any JSON text of the value");
        assert!(mirrors("-7", &json!(-7)));
        assert!(mirrors("0.5", &json!(0.5)));
        assert!(!mirrors("+3", &json!(3)), "not a JSON number");
        assert!(!mirrors("1e400", &json!(1e300)), "out of range");
        assert!(!mirrors("\"3\"", &json!(3)), "a string is no number");
        assert!(!mirrors("18446744073709551615", &json!(-1)));
        assert!(
            !mirrors("9007199254740992", &json!(9_007_199_254_740_993u64)),
            "integers past 2^53 are compared exactly"
        );
        assert!(mirrors(
            "9007199254740993",
            &json!(9_007_199_254_740_993u64)
        ));
        assert!(
            !mirrors("9007199254740992.0", &json!(9_007_199_254_740_993u64)),
            "nor through a float's spelling"
        );
        assert!(!mirrors(
            "9007199254740994.0",
            &json!(9_007_199_254_740_993u64)
        ));
        assert!(mirrors("4.0", &json!(4)));
        assert!(!mirrors("4.5", &json!(4)));
        assert!(!mirrors(
            "-9007199254740992",
            &json!(-9_007_199_254_740_993i64)
        ));
        assert!(mirrors("true", &json!(true)));
        assert!(mirrors("false", &json!(false)));
        assert!(!mirrors("True", &json!(true)));
        assert!(!mirrors("1", &json!(true)));
        assert!(mirrors("null", &json!(null)));
        assert!(!mirrors("", &json!(null)));
        assert!(!mirrors("[1]", &json!([1])), "arrays are never mirrored");
        assert!(!mirrors("{}", &json!({})), "objects are never mirrored");
    }
}
