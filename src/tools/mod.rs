//! The tool API: what a user implements to serve their own tools.
//!
//! - Typed (most tools): [`SyncTool`] answers at once; [`TaskTool`] is a
//!   durable task, a state type and one `async` step. Arguments, state and
//!   results are the tool's own serde types, and the schemas are generated.
//! - Low level: [`Tool`] decides per call how to answer ([`CallPlan`]): at
//!   once, with a core MRTR `input_required` round, or as a task whose
//!   steps ([`Tool::step`]) return what happens next ([`StepOutcome`]).
//!
//! Register tools in a [`ToolSet`]; a deployment builds its set with a
//! [`ToolFactory`]. A step reaches the outside world only through its
//! [`StepContext`]: outbound HTTP, settings and secrets, its idempotency
//! key, its deadline and the task's cancellation flag.

mod typed;

pub use crate::schema::schema_of;
pub use typed::{Start, Step, SyncTool, TaskTool, sync_tool, task_tool};

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::crypto::{b64url, hmac_sha256};
use crate::error::RpcError;
use crate::outbound::{
    LocalFuture, Outbound, OutboundError, OutboundPolicy, OutboundRequest, OutboundResponse,
};
use crate::prompts::{Prompt, PromptInfo};
use crate::protocol::meta::ClientCapabilities;
use crate::protocol::tools::{CallToolResult, ElicitResult, InputRequests, ToolDescriptor};
use crate::resources::{Resource, ResourceInfo, ResourceTemplate, TemplateInfo};
use crate::time::Millis;

/// Whether a tool can answer without the tasks extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskSupport {
    /// Never a task.
    Never,
    /// A task when the client declared the extension, otherwise answered
    /// synchronously.
    Optional,
    /// Only as a task: without the extension the call is refused with -32021.
    Required,
}

/// What a tool needs from the client, checked before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requirements {
    pub tasks: TaskSupport,
    /// The tool asks for form-mode elicitation.
    pub form_elicitation: bool,
    /// The tool asks for sampling.
    pub sampling: bool,
    /// The tool's steps may run more than once at the same time without
    /// harm (see [`Requirements::with_replayable_steps`]).
    pub replayable_steps: bool,
}

impl Requirements {
    pub const fn new(tasks: TaskSupport) -> Self {
        Requirements {
            tasks,
            form_elicitation: false,
            sampling: false,
            replayable_steps: false,
        }
    }

    pub const fn with_form_elicitation(mut self) -> Self {
        self.form_elicitation = true;
        self
    }

    pub const fn with_sampling(mut self) -> Self {
        self.sampling = true;
        self
    }

    /// Declares that the tool's steps only compute from the task (its
    /// arguments, state and answers) and reach nothing outside it: running
    /// one twice, even at the same time, changes nothing but the work done.
    /// The runner then steps a freshly due task without writing a lease
    /// first (one store write per step instead of two); the commit's
    /// compare-and-swap keeps exactly one outcome. A step that a client's
    /// request makes due at once (a `tools/call` whose first step has no
    /// delay, a `tasks/update` that answers the last outstanding input
    /// request) runs inside that request, and the one write that stores the
    /// task stores the step's outcome too, so keep such steps short. Leave it
    /// off for steps that call other services: a replayable step's outbound
    /// requests fail.
    ///
    /// ```
    /// use mcp_tasks_edge::tools::{Requirements, TaskSupport};
    ///
    /// let needs = Requirements::new(TaskSupport::Required).with_replayable_steps();
    /// assert!(needs.replayable_steps);
    /// ```
    pub const fn with_replayable_steps(mut self) -> Self {
        self.replayable_steps = true;
        self
    }
}

/// Why a tool did not produce a plan.
#[derive(Debug)]
pub enum CallError {
    /// The arguments do not fit the tool's input schema. Reported as a tool
    /// execution error (`isError: true`), so the model can correct itself.
    InvalidArguments(String),
    /// A protocol error.
    Rpc(RpcError),
}

impl From<RpcError> for CallError {
    fn from(e: RpcError) -> Self {
        CallError::Rpc(e)
    }
}

/// One `tools/call`, as a tool sees it.
pub struct ToolCall<'a> {
    pub arguments: &'a Map<String, Value>,
    pub capabilities: &'a ClientCapabilities,
    /// Answers to a previous `input_required` round, when this is a retry
    /// whose `requestState` verified.
    pub input_responses: Option<&'a Map<String, Value>>,
    /// The tool's data from that round's verified `requestState`.
    pub round_state: Option<&'a Value>,
    pub now: Millis,
    /// Where [`ToolCall::report_progress`] goes: present when the client
    /// asked for progress (sent a `progressToken`).
    pub progress: Option<&'a Progress>,
}

/// Progress a synchronous call reports while it computes. The server sends
/// each report as a `notifications/progress` on the response stream, before
/// the result, to a client that sent a `progressToken`.
#[derive(Debug, Default)]
pub struct Progress {
    reports: std::cell::RefCell<Vec<ProgressReport>>,
}

/// One progress report: `progress` out of `total` (if known).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ProgressReport {
    pub progress: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Progress {
    /// The reports so far, in order; the log is left empty.
    pub fn take(&self) -> Vec<ProgressReport> {
        self.reports.take()
    }
}

impl ToolCall<'_> {
    /// Deserialises the arguments into the tool's own type.
    pub fn args<T: DeserializeOwned>(&self, tool: &str) -> Result<T, CallError> {
        parse_args(tool, self.arguments).map_err(CallError::InvalidArguments)
    }

    /// Reports progress: `progress` (never decreasing) out of `total`. A
    /// no-op when the client did not ask for progress.
    ///
    /// ```
    /// # use mcp_tasks_edge::tools::{Progress, ToolCall};
    /// # use mcp_tasks_edge::protocol::meta::ClientCapabilities;
    /// let log = Progress::default();
    /// let (args, caps) = (Default::default(), ClientCapabilities::default());
    /// let call = ToolCall { arguments: &args, capabilities: &caps, input_responses: None,
    ///     round_state: None, now: 0, progress: Some(&log) };
    /// call.report_progress(50.0, Some(100.0), Some("halfway"));
    /// assert_eq!(log.take()[0].progress, 50.0);
    /// ```
    pub fn report_progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        if let Some(log) = self.progress {
            log.reports.borrow_mut().push(ProgressReport {
                progress,
                total,
                message: message.map(str::to_owned),
            });
        }
    }

    /// The answer to one input request of the previous MRTR round.
    pub fn response(&self, key: &str) -> Option<ElicitResult> {
        crate::json::from_value_ref(self.input_responses?.get(key)?).ok()
    }
}

/// Parses tool arguments into `T`; the error is a sentence for the model.
/// A struct is read from a JSON object only, at every depth.
pub fn parse_args<T: DeserializeOwned>(tool: &str, args: &Map<String, Value>) -> Result<T, String> {
    crate::json::from_value(Value::Object(args.clone())).map_err(|e| {
        format!(
            "Invalid arguments for tool {tool}: {}.",
            crate::error::truncate(&e.to_string(), 200)
        )
    })
}

/// How a tool answers a call.
#[derive(Debug)]
pub enum CallPlan {
    /// A synchronous `CallToolResult`.
    Result(CallToolResult),
    /// Core MRTR: ask for input now; `round_state` comes back, integrity
    /// protected, in the retry's `requestState`.
    InputRequired {
        requests: InputRequests,
        round_state: Value,
    },
    /// Run as a task, first step due at `now + first_step_in_ms`.
    Task(TaskStart),
}

#[derive(Debug)]
pub struct TaskStart {
    pub state: Value,
    pub first_step_in_ms: u64,
    pub message: Option<String>,
}

/// A boxed step future (not `Send`: steps may hold platform handles).
pub type StepFuture<'a> = LocalFuture<'a, StepOutcome>;

/// Wraps an outcome a step decided without waiting on anything.
pub fn ready<'a>(outcome: StepOutcome) -> StepFuture<'a> {
    Box::pin(std::future::ready(outcome))
}

/// A tool setting or secret, read from the runtime's environment (a Worker
/// variable or secret, the component's environment). Names starting with
/// `MCP_` are the server's own: a step never reads one
/// ([`StepContext::setting`]), and a [`ToolFactory`] reads them without the
/// server's secrets.
pub trait ToolSettings {
    fn get(&self, name: &str) -> Option<String>;
}

impl<F: Fn(&str) -> Option<String>> ToolSettings for F {
    fn get(&self, name: &str) -> Option<String> {
        self(name)
    }
}

/// No settings at all.
pub fn no_settings(_: &str) -> Option<String> {
    None
}

/// A secret value. Its `Debug` and `Display` never show it; read it with
/// [`Secret::expose`] where it is sent.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// Tells a running step whether its task's cancellation was requested.
pub(crate) trait CancelProbe {
    fn cancel_requested<'a>(&'a self) -> LocalFuture<'a, bool>;
}

/// What the runtime lends a step: outbound HTTP under the operator's
/// policy, tool settings, and the task's cancellation flag.
pub(crate) struct StepEnv<'a> {
    pub(crate) outbound: &'a dyn Outbound,
    pub(crate) policy: &'a OutboundPolicy,
    pub(crate) settings: &'a dyn ToolSettings,
    pub(crate) cancel: &'a dyn CancelProbe,
    /// Writes one operator log line (JSON; never a secret, header or body).
    pub(crate) log: &'a dyn Fn(&str),
    /// The platform clock, if the runtime lends one (else the step's start
    /// time stands for now).
    pub(crate) clock: Option<&'a dyn Fn() -> Millis>,
}

/// What one step sees, and the capabilities it may use.
///
/// Steps are **at least once**: a runner that stops after a remote call and
/// before its commit (a crash, a trap, an overrun deadline) leaves the step
/// to run again, with the same [`idempotency_key`](Self::idempotency_key).
/// Pass that key to remote APIs that accept one.
pub struct StepContext<'a> {
    pub(crate) now: Millis,
    pub(crate) deadline: Millis,
    pub(crate) task_id: &'a str,
    pub(crate) step: u64,
    pub(crate) attempt: u32,
    pub(crate) arguments: &'a Map<String, Value>,
    pub(crate) state: &'a Value,
    pub(crate) answers: &'a BTreeMap<String, Value>,
    pub(crate) capabilities: &'a ClientCapabilities,
    /// Keys the idempotency key, derived on first use.
    pub(crate) secret: &'a [u8],
    pub(crate) idempotency_key: std::cell::OnceCell<String>,
    pub(crate) env: StepEnv<'a>,
}

impl<'a> StepContext<'a> {
    /// The time the step started (ms since the epoch).
    pub fn now(&self) -> Millis {
        self.now
    }

    /// When the step must be done: its lease ends soon after, and a step
    /// still running then is abandoned and run again.
    pub fn deadline(&self) -> Millis {
        self.deadline
    }

    /// The task's id.
    pub fn task_id(&self) -> &str {
        self.task_id
    }

    /// Steps committed before this one (0 for the first).
    pub fn step_number(&self) -> u64 {
        self.step
    }

    /// Which attempt at this step this is (1 for the first).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// A key unique to this task and step number, the same on every attempt
    /// and on every replica: pass it to remote APIs as their idempotency key.
    pub fn idempotency_key(&self) -> &str {
        self.idempotency_key
            .get_or_init(|| idempotency_key(self.secret, self.task_id, self.step))
    }

    /// The task's arguments, as stored when it was created.
    pub fn arguments(&self) -> &Map<String, Value> {
        self.arguments
    }

    /// The tool's state, as the previous step left it.
    pub fn state(&self) -> &Value {
        self.state
    }

    /// The client's capabilities when it created the task.
    pub fn capabilities(&self) -> &ClientCapabilities {
        self.capabilities
    }

    /// The task's arguments, validated when it was created.
    pub fn args<T: DeserializeOwned>(&self, tool: &str) -> Result<T, RpcError> {
        parse_args(tool, self.arguments).map_err(RpcError::internal)
    }

    /// The answer under `key` to the input round that just ended, as `T`
    /// (for example [`ElicitResult`]).
    pub fn answer_as<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        crate::json::from_value_ref(self.answers.get(key)?).ok()
    }

    /// The elicitation answer under `key`, if one arrived.
    pub fn answer(&self, key: &str) -> Option<ElicitResult> {
        self.answer_as(key)
    }

    /// A tool setting (`None` for unset names and for the server's own
    /// `MCP_*` settings).
    pub fn setting(&self, name: &str) -> Option<String> {
        if name.starts_with("MCP_") {
            return None;
        }
        self.env.settings.get(name)
    }

    /// A tool secret: like [`setting`](Self::setting), wrapped so that it
    /// is never logged by accident.
    pub fn secret(&self, name: &str) -> Option<Secret> {
        self.setting(name).map(Secret)
    }

    /// Whether the client asked to cancel the task since the step started
    /// (reads the task once). A step that sees it should stop early; the
    /// runner ends the task `cancelled` at the step's commit either way.
    pub async fn cancel_requested(&self) -> bool {
        self.env.cancel.cancel_requested().await
    }

    /// Sends an HTTP request. The origin must be on the operator's
    /// allow-list; the timeout is cut to the step's deadline; the response
    /// body is capped.
    pub async fn fetch(
        &self,
        mut request: OutboundRequest,
    ) -> Result<OutboundResponse, OutboundError> {
        if let Err(e) = self.env.policy.check(&request.url) {
            let line = serde_json::json!({
                "event": "outbound-refused", "task": self.task_id, "reason": e.to_string(),
            });
            (self.env.log)(&line.to_string());
            return Err(e);
        }
        let now = self.env.clock.map_or(self.now, |clock| clock());
        let left = self.deadline.saturating_sub(now).max(0) as u64;
        request.timeout_ms = request.timeout_ms.min(left);
        if request.timeout_ms == 0 {
            return Err(OutboundError::Timeout);
        }
        self.env
            .outbound
            .send(request, self.env.policy.max_response_bytes)
            .await
    }
}

/// The idempotency key of step `step` of task `id`: the same on every
/// attempt and every replica (keyed by the shared state secret).
pub fn idempotency_key(secret: &[u8], id: &str, step: u64) -> String {
    let tag = hmac_sha256(
        secret,
        &[
            b"mcp-tasks-edge/idempotency/v1",
            id.as_bytes(),
            &step.to_be_bytes(),
        ],
    );
    format!("idem_{}", b64url(tag.get(..18).unwrap_or(&tag)))
}

/// What a step decided.
#[derive(Clone, Debug, PartialEq)]
pub enum StepOutcome {
    /// More work: the next step is due at `now + wake_in_ms`.
    Continue {
        state: Value,
        wake_in_ms: u64,
        message: Option<String>,
    },
    /// Ask the client for input; keys must be new for this task.
    NeedInput {
        state: Value,
        requests: InputRequests,
        message: Option<String>,
    },
    /// The tool's result (an `isError: true` result is still a completion).
    Complete(CallToolResult),
    /// A JSON-RPC error ends the task as `failed`.
    Fail(RpcError),
    /// The user cancelled through an input response.
    Cancel(String),
    /// This step did not succeed and should run again (same step number,
    /// same idempotency key) after a backoff: `after_ms` if given, else
    /// exponential from the runner's base, capped. After the runner's
    /// maximum number of attempts the task ends `failed` with `error`.
    Retry {
        error: String,
        after_ms: Option<u64>,
    },
}

/// A tool.
///
/// # Step semantics
///
/// - A step runs under a lease (unless it is replayable, below); its outcome
///   is committed with compare-and-swap on the leased version. A step is
///   **never re-run** because its commit raced a client: a `tasks/cancel`
///   that arrived meanwhile wins over more work, and the outcome is applied
///   on top of the fresh record.
/// - Steps are **at least once**: a runner that stops during a step (a
///   crash, a trap, a deadline overrun) leaves its lease to expire, and the
///   step runs again with the same idempotency key.
/// - Every start of a step counts as an attempt (a replayable step's, when
///   it commits). [`StepOutcome::Retry`] backs off and tries the same step
///   again, with the same state and the same answers; a step
///   that has started the maximum number of attempts without a result (it
///   keeps asking to retry, or keeps crashing) ends its task `failed`, so a
///   poison task never wedges the runner.
/// - [`StepOutcome::NeedInput`] asks only what the task's client declared
///   it can answer (an elicitation of its mode, sampling, roots), and at
///   least one request; otherwise the task ends `failed`, naming it.
/// - A tool whose [`Requirements`] declare
///   [replayable steps](Requirements::with_replayable_steps) has a freshly
///   due step run without a lease (one store write per step instead of
///   two); its attempt is counted when it commits. Such a step may run on
///   two runners at once; one commit wins. A step that keeps crashing is
///   claimed and counted like any other once its task has been due for
///   [`UNLEASED_WINDOW_MS`](crate::tasks::runner::UNLEASED_WINDOW_MS).
///   A `tasks/cancel` during such a step cancels the task at once, and the
///   step's outcome is dropped. Such a step that a client's request makes
///   due at once (the create, or the answer to the last input request) runs
///   inside that request, before its one write: the client's next
///   `tasks/get` already sees the outcome. If the request fails during the
///   step (a trap), nothing of it was written; a step that overruns the
///   lease time or would make the task too large is dropped, and the task
///   is stored due, for the runner.
pub trait Tool: Send + Sync {
    fn descriptor(&self) -> ToolDescriptor;

    fn requirements(&self) -> Requirements;

    /// Decides how to answer one call.
    fn call(&self, call: &ToolCall<'_>) -> Result<CallPlan, CallError>;

    /// Advances a task one step. Only task tools implement it.
    fn step<'a>(&'a self, _step: &'a StepContext<'a>) -> StepFuture<'a> {
        ready(StepOutcome::Fail(RpcError::internal(
            "Internal error: this tool has no steps.",
        )))
    }
}

/// Everything a server offers: its tools, and the resources, resource
/// templates and prompts beside them, each listed in registration order and
/// found by name (or URI).
#[derive(Default)]
pub struct ToolSet {
    /// Each tool with its descriptor, built once when it is registered.
    tools: Vec<(ToolDescriptor, Box<dyn Tool>)>,
    /// Likewise each resource, template and prompt with its description.
    resources: Vec<(ResourceInfo, Box<dyn Resource>)>,
    templates: Vec<(TemplateInfo, Box<dyn ResourceTemplate>)>,
    prompts: Vec<(PromptInfo, Box<dyn Prompt>)>,
    /// Names (and URIs) registered again, whose later registration was
    /// dropped: a server refuses such a set ([`ToolSet::duplicates`]).
    duplicates: Vec<String>,
}

/// Builds a deployment's tools from its settings (Worker variables and
/// secrets, the component's environment). The platform glue calls it
/// whenever it builds a server (on a Worker, for each request and each
/// shard alarm), so it should be cheap and give the same tools each time;
/// an `Err` is a configuration error (logged; the server answers 503). It
/// sees the server's own `MCP_*` settings (`MCP_TOOLS`, say) but not the
/// server's secrets ([`SERVER_SECRETS`]).
pub type ToolFactory = fn(&dyn ToolSettings) -> Result<ToolSet, String>;

/// The server's own secrets: no tool code reads them, the tool factory
/// included.
pub const SERVER_SECRETS: &[&str] = &[
    "MCP_STATE_SECRET",
    "MCP_STATE_SECRET_PREVIOUS",
    "MCP_JWT_HS256_SECRET",
];

/// `settings` as a [`ToolFactory`] is given them: without
/// [`SERVER_SECRETS`].
///
/// ```
/// use mcp_tasks_edge::tools::{ToolSettings, factory_settings};
///
/// let env = |name: &str| Some(format!("value of {name}"));
/// let seen = factory_settings(&env);
/// assert_eq!(seen.get("MCP_TOOLS").as_deref(), Some("value of MCP_TOOLS"));
/// assert_eq!(seen.get("MCP_STATE_SECRET"), None);
/// ```
pub fn factory_settings(settings: &dyn ToolSettings) -> impl ToolSettings + '_ {
    move |name: &str| {
        if SERVER_SECRETS.contains(&name) {
            None
        } else {
            settings.get(name)
        }
    }
}

impl ToolSet {
    /// Nothing offered.
    pub fn empty() -> Self {
        ToolSet::default()
    }

    /// Everything both sets offer, `self`'s first (a tool or prompt name,
    /// or a resource URI, already taken is dropped, and named in
    /// [`ToolSet::duplicates`]).
    pub fn and(self, other: ToolSet) -> Self {
        let ToolSet {
            tools,
            resources,
            templates,
            prompts,
            duplicates,
        } = other;
        let mut set = tools
            .into_iter()
            .fold(self, |set, (d, tool)| set.with_described(d, tool));
        set.duplicates.extend(duplicates);
        for (info, r) in resources {
            set = set.with_described_resource(info, r);
        }
        for (info, p) in prompts {
            set = set.with_described_prompt(info, p);
        }
        set.templates.extend(templates);
        set
    }

    /// A registry of the given tools; a later tool with a name already
    /// taken is dropped (see [`ToolSet::duplicates`]).
    pub fn from_tools(list: Vec<Box<dyn Tool>>) -> Self {
        list.into_iter().fold(ToolSet::default(), ToolSet::with)
    }

    /// The set with a fixed resource added (unless its URI is taken).
    pub fn with_resource(self, resource: impl Resource) -> Self {
        self.with_described_resource(resource.describe(), Box::new(resource))
    }

    fn with_described_resource(mut self, info: ResourceInfo, resource: Box<dyn Resource>) -> Self {
        if self.resources.iter().all(|(i, _)| i.uri != info.uri) {
            self.resources.push((info, resource));
        } else {
            self.duplicates.push(format!("the resource {}", info.uri));
        }
        self
    }

    /// The set with a resource template added. Templates are tried in
    /// registration order, after the fixed resources.
    pub fn with_template(mut self, template: impl ResourceTemplate) -> Self {
        self.templates
            .push((template.describe(), Box::new(template)));
        self
    }

    /// The set with a prompt added (unless its name is taken).
    pub fn with_prompt(self, prompt: impl Prompt) -> Self {
        self.with_described_prompt(prompt.describe(), Box::new(prompt))
    }

    fn with_described_prompt(mut self, info: PromptInfo, prompt: Box<dyn Prompt>) -> Self {
        if self.prompts.iter().all(|(i, _)| i.name != info.name) {
            self.prompts.push((info, prompt));
        } else {
            self.duplicates.push(format!("the prompt {}", info.name));
        }
        self
    }

    /// The fixed resources, each with its description (built once, when it
    /// was registered).
    pub fn resources(&self) -> impl Iterator<Item = (&ResourceInfo, &dyn Resource)> {
        self.resources.iter().map(|(i, r)| (i, r.as_ref()))
    }

    /// The resource templates, each with its description.
    pub fn templates(&self) -> impl Iterator<Item = (&TemplateInfo, &dyn ResourceTemplate)> {
        self.templates.iter().map(|(i, t)| (i, t.as_ref()))
    }

    /// The prompts, each with its description.
    pub fn prompts(&self) -> impl Iterator<Item = (&PromptInfo, &dyn Prompt)> {
        self.prompts.iter().map(|(i, p)| (i, p.as_ref()))
    }

    /// Whether anything takes `completion/complete` (a prompt or a
    /// resource template).
    pub fn has_completions(&self) -> bool {
        !self.prompts.is_empty() || !self.templates.is_empty()
    }

    /// The prompt called `name`, with its description.
    pub fn prompt(&self, name: &str) -> Option<(&PromptInfo, &dyn Prompt)> {
        self.prompts().find(|(i, _)| i.name == name)
    }

    /// The set with `tool` added at the end (unless its name is taken).
    pub fn with(self, tool: Box<dyn Tool>) -> Self {
        let descriptor = tool.descriptor();
        self.with_described(descriptor, tool)
    }

    fn with_described(mut self, descriptor: ToolDescriptor, tool: Box<dyn Tool>) -> Self {
        if self.tools.iter().all(|(d, _)| d.name != descriptor.name) {
            self.tools.push((descriptor, tool));
        } else {
            self.duplicates
                .push(format!("the tool {}", descriptor.name));
        }
        self
    }

    /// What was registered twice (a tool or prompt name, a resource URI),
    /// each named once per later registration, which was dropped.
    /// [`Server::new`](crate::server::Server::new) refuses a set with any,
    /// so that a tool is never shadowed without a word.
    ///
    /// ```
    /// use mcp_tasks_edge::resources::text_resource;
    /// use mcp_tasks_edge::tools::ToolSet;
    ///
    /// let doc = || text_resource("docs://a", "a", "text/plain", "A");
    /// let twice = ToolSet::empty().with_resource(doc()).with_resource(doc());
    /// assert!(twice.duplicates().iter().any(|d| d == "the resource docs://a"));
    /// assert!(ToolSet::empty().duplicates().is_empty());
    /// ```
    pub fn duplicates(&self) -> &[String] {
        &self.duplicates
    }

    /// The tool and its registered name.
    pub fn get_named(&self, name: &str) -> Option<(&'static str, &dyn Tool)> {
        self.tools
            .iter()
            .find(|(d, _)| d.name == name)
            .map(|(d, t)| (d.name, t.as_ref()))
    }

    /// Every tool with its descriptor, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = (&ToolDescriptor, &dyn Tool)> {
        self.tools.iter().map(|(d, t)| (d, t.as_ref()))
    }

    pub fn get(&self, name: &str) -> Option<&dyn Tool> {
        self.get_named(name).map(|(_, t)| t)
    }

    /// The descriptor of the tool called `name` (built when it was
    /// registered, not per request).
    pub fn descriptor(&self, name: &str) -> Option<&ToolDescriptor> {
        self.iter().find(|(d, _)| d.name == name).map(|(d, _)| d)
    }

    pub fn descriptors(&self) -> Vec<ToolDescriptor> {
        self.tools.iter().map(|(d, _)| d.clone()).collect()
    }
}

/// The first argument `schema` (a tool's `inputSchema`) does not declare:
/// a key outside `properties` when the schema lists properties and does not
/// allow others (`additionalProperties` absent or `false`).
///
/// ```
/// use mcp_tasks_edge::tools::unknown_argument;
/// use serde_json::json;
/// let schema = json!({"type": "object", "properties": {"url": {"type": "string"}}});
/// let args = json!({"url": "https://a.example", "junk": 1});
/// assert_eq!(unknown_argument(&schema, args.as_object().unwrap()), Some("junk"));
/// let open = json!({"type": "object", "properties": {}, "additionalProperties": true});
/// assert_eq!(unknown_argument(&open, args.as_object().unwrap()), None);
/// ```
pub fn unknown_argument<'a>(
    schema: &Value,
    arguments: &'a serde_json::Map<String, Value>,
) -> Option<&'a str> {
    let properties = schema.get("properties")?.as_object()?;
    match schema.get("additionalProperties") {
        None | Some(Value::Bool(false)) => {}
        Some(_) => return None,
    }
    arguments
        .keys()
        .find(|k| !properties.contains_key(k.as_str()))
        .map(String::as_str)
}

/// A flat form schema for `elicitation/create`.
pub fn form_schema(properties: Value, required: &[&str]) -> Value {
    serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": required,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(&'static str, &'static str);

    impl Tool for Named {
        fn descriptor(&self) -> ToolDescriptor {
            ToolDescriptor {
                name: self.0,
                title: None,
                description: self.1,
                input_schema: serde_json::json!({"type": "object", "properties": {}}),
                output_schema: None,
            }
        }
        fn requirements(&self) -> Requirements {
            Requirements::new(TaskSupport::Never)
        }
        fn call(&self, _: &ToolCall<'_>) -> Result<CallPlan, CallError> {
            Ok(CallPlan::Result(CallToolResult::text(self.1)))
        }
    }

    #[test]
    fn later_tools_with_a_taken_name_are_dropped() {
        let set = |tools: &[(&'static str, &'static str)]| {
            ToolSet::from_tools(
                tools
                    .iter()
                    .map(|(n, d)| Box::new(Named(n, d)) as Box<dyn Tool>)
                    .collect(),
            )
        };
        let listed = |s: &ToolSet| -> Vec<(&str, &str)> {
            s.descriptors()
                .iter()
                .map(|d| (d.name, d.description))
                .collect()
        };
        let a = set(&[("a", "first"), ("b", "first"), ("a", "again")]);
        assert_eq!(listed(&a), [("a", "first"), ("b", "first")]);
        let both = a.and(set(&[("c", "second"), ("b", "second")]));
        assert_eq!(
            listed(&both),
            [("a", "first"), ("b", "first"), ("c", "second")]
        );
        assert_eq!(listed(&ToolSet::empty().and(both)).len(), 3);
        assert!(ToolSet::empty().get("a").is_none());
    }
}
