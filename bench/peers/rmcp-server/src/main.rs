//! Benchmark peer built on rmcp 3.11.0.
//!
//! Serves MCP 2026-07-28 over stateless Streamable HTTP at
//! `http://127.0.0.1:$PORT/mcp` with the `io.modelcontextprotocol/tasks`
//! extension. Tasks live in rmcp's in-memory `TaskManager` (one per process).
//!
//! Tools (same observable behaviour as mcp-tasks-edge's demo set):
//! - `generate_report {size}`: always a task; `working` for `OUTLINE_MS`
//!   (default 1000), then `input_required` with one form elicitation under
//!   the key `approve_outline`; completes after `tasks/update`.
//! - `slow_compute {seconds, label?}`: a task finishing after `seconds`
//!   (synchronous for 0 or when the caller did not declare the extension).
//! - `greet {name}`: synchronous.
//!
//! Usage: `rmcp-peer-server [PORT]` (or env `PORT`, default 8081).
//! Env: `OUTLINE_MS` (default 1000), `POLL_INTERVAL_MS` (default 1000),
//! `TASK_TTL_MS` (default 3600000), `JSON_RESPONSE` (default 1; 0 = SSE replies),
//! `TCP_NODELAY` (default 1; 0 = leave Nagle on).

use std::{borrow::Cow, sync::Arc, time::Duration};

use axum::serve::ListenerExt;
use rmcp::{
    ErrorData as McpError, ServerHandler,
    model::*,
    service::{RequestContext, RoleServer},
    task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions},
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::never::NeverSessionManager,
    },
};
use serde::Deserialize;
use serde_json::{Value, json};

const APPROVE_KEY: &str = "approve_outline";

/// Process-wide settings read once at start-up.
#[derive(Clone, Copy, Debug)]
struct Settings {
    outline_ms: u64,
    poll_interval_ms: u64,
    task_ttl_ms: u64,
}

impl Settings {
    fn from_env() -> Self {
        fn num(name: &str, default: u64) -> u64 {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(default)
        }
        Settings {
            outline_ms: num("OUTLINE_MS", 1_000),
            poll_interval_ms: num("POLL_INTERVAL_MS", 1_000).max(1),
            task_ttl_ms: num("TASK_TTL_MS", 3_600_000).max(1),
        }
    }

    fn task_options(&self, message: &str) -> TaskOptions {
        TaskOptions::new()
            .with_ttl_ms(self.task_ttl_ms)
            .with_poll_interval_ms(self.poll_interval_ms)
            .with_status_message(message.to_owned())
    }
}

/// One instance is built per HTTP request (stateless mode); the task manager
/// and the tool list are shared.
#[derive(Clone)]
struct PeerServer {
    tasks: TaskManager,
    tools: Arc<Vec<Tool>>,
    settings: Settings,
}

fn object(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => unreachable!("schemas are objects"),
    }
}

fn tool_list() -> Vec<Tool> {
    vec![
        Tool::new(
            "generate_report",
            "Drafts a report outline, asks you to approve it, then generates the report. Runs as a durable task.",
            object(json!({
                "type": "object",
                "properties": {
                    "size": {"type": "string", "enum": ["small", "medium", "large"],
                             "description": "How long the report should be."}
                },
                "required": ["size"]
            })),
        )
        .with_title("Generate report")
        .with_raw_output_schema(object(json!({
            "type": "object",
            "properties": {"size": {"type": "string"}, "approved": {"type": "boolean"}},
            "required": ["size", "approved"]
        }))),
        Tool::new(
            "slow_compute",
            "Simulates work that takes the given number of seconds; runs as a task when the client supports tasks.",
            object(json!({
                "type": "object",
                "properties": {
                    "seconds": {"type": "number", "minimum": 0, "maximum": 3600},
                    "label": {"type": "string"}
                },
                "required": ["seconds"]
            })),
        )
        .with_title("Slow compute"),
        Tool::new(
            "greet",
            "Greets someone by name. Always answers at once.",
            object(json!({
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"]
            })),
        )
        .with_title("Greet"),
    ]
}

#[derive(Deserialize)]
struct ReportArgs {
    size: String,
}

#[derive(Deserialize)]
struct SlowArgs {
    seconds: f64,
    #[serde(default)]
    label: Option<String>,
}

#[derive(Deserialize)]
struct GreetArgs {
    name: String,
}

fn parse<T: for<'de> Deserialize<'de>>(tool: &str, args: &Option<JsonObject>) -> Result<T, String> {
    serde_json::from_value(Value::Object(args.clone().unwrap_or_default()))
        .map_err(|e| format!("Invalid arguments for tool {tool}: {e}."))
}

/// A tool-level error: `isError: true`, so the model can correct itself.
fn tool_error(message: String) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::error(vec![ContentBlock::text(message)]))
}

/// Text plus `structuredContent` (the text is the human-readable form).
fn structured(text: String, value: Value) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = Some(value);
    r
}

fn slow_result(a: &SlowArgs) -> CallToolResult {
    let label = a.label.as_deref().unwrap_or("computation");
    // Rust's `{}` for f64 prints 2.0 as "2" and 0.5 as "0.5", as our server does.
    structured(
        format!("{label}: finished after {} seconds.", a.seconds),
        json!({"label": label, "seconds": a.seconds}),
    )
}

fn approval_request() -> InputRequest {
    let schema = ElicitationSchema::builder()
        .required_bool_with("approved", |b| b.title("Approve outline"))
        .build()
        .expect("static elicitation schema");
    InputRequest::Elicitation(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: "Approve the generated report outline?".into(),
            requested_schema: schema,
        },
    ))
}

/// The `generate_report` task body.
async fn run_report(
    ctx: TaskContext,
    size: String,
    outline_ms: u64,
) -> Result<CallToolResult, TaskExit> {
    if outline_ms > 0 {
        tokio::select! {
            _ = ctx.cancelled() => return Err(TaskExit::Cancelled),
            _ = tokio::time::sleep(Duration::from_millis(outline_ms)) => {}
        }
    }
    ctx.set_status_message("Waiting for outline approval.");
    // Err(Cancelled) if tasks/cancel arrives while waiting.
    let answer = ctx.request_input(APPROVE_KEY, approval_request()).await?;
    let action = answer.get("action").and_then(Value::as_str).unwrap_or("");
    if action == "cancel" {
        return Err(TaskExit::Cancelled);
    }
    let approved = action == "accept"
        && answer
            .get("content")
            .and_then(|c| c.get("approved"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
    let text = if approved {
        format!("Generated {size} report with approved outline.")
    } else {
        format!("No {size} report was generated: the outline was not approved.")
    };
    Ok(structured(
        text,
        json!({"size": size, "approved": approved}),
    ))
}

fn declares_form_elicitation(caps: &ClientCapabilities) -> bool {
    caps.elicitation
        .as_ref()
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

impl ServerHandler for PeerServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new(
            "rmcp-peer-server",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&[ProtocolVersion::V_2026_07_28])
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items((*self.tools).clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caps = context.client_capabilities();
        let tasks_ok = caps.as_ref().is_some_and(|c| c.supports_tasks());
        match request.name.as_ref() {
            "greet" => {
                let a: GreetArgs = match parse("greet", &request.arguments) {
                    Ok(a) => a,
                    Err(e) => return Ok(tool_error(e)),
                };
                Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                    ContentBlock::text(format!("Hello, {}!", a.name)),
                ])))
            }
            "slow_compute" => {
                let a: SlowArgs = match parse("slow_compute", &request.arguments) {
                    Ok(a) => a,
                    Err(e) => return Ok(tool_error(e)),
                };
                if !(0.0..=3_600.0).contains(&a.seconds) {
                    return Ok(tool_error(
                        "Invalid arguments for tool slow_compute: seconds must be between 0 and 3600.".into(),
                    ));
                }
                if !tasks_ok || a.seconds == 0.0 {
                    return Ok(CallToolResponse::Complete(slow_result(&a)));
                }
                let task = self.tasks.spawn(self.settings.task_options("Computing."), move |ctx| {
                    Box::pin(async move {
                        tokio::select! {
                            _ = ctx.cancelled() => Err(TaskExit::Cancelled),
                            _ = tokio::time::sleep(Duration::from_secs_f64(a.seconds)) => Ok(slow_result(&a)),
                        }
                    })
                });
                Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
            }
            "generate_report" => {
                // Needs the tasks extension and form elicitation on this request.
                let has_form = caps.as_ref().is_some_and(declares_form_elicitation);
                if !tasks_ok || !has_form {
                    let mut required = ClientCapabilities::default();
                    if !tasks_ok {
                        required.extensions = Some(ExtensionCapabilities::from([(
                            TASKS_EXTENSION_ID.to_owned(),
                            JsonObject::new(),
                        )]));
                    }
                    if !has_form {
                        let mut elicitation = ElicitationCapability::default();
                        elicitation.form = Some(Default::default());
                        required.elicitation = Some(elicitation);
                    }
                    return Err(McpError::missing_required_client_capability(required));
                }
                let a: ReportArgs = match parse("generate_report", &request.arguments) {
                    Ok(a) => a,
                    Err(e) => return Ok(tool_error(e)),
                };
                if !matches!(a.size.as_str(), "small" | "medium" | "large") {
                    return Ok(tool_error(format!(
                        "Invalid arguments for tool generate_report: unknown size {:?} (expected small, medium or large).",
                        a.size
                    )));
                }
                let outline_ms = self.settings.outline_ms;
                let task = self.tasks.spawn(
                    self.settings.task_options("Preparing report outline."),
                    move |ctx| Box::pin(run_report(ctx, a.size, outline_ms)),
                );
                Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
            }
            other => Err(McpError::invalid_params(
                format!("Unknown tool: {other}."),
                None,
            )),
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.cancel_task(&request.task_id)
    }
}

fn port_from_args() -> u16 {
    std::env::args()
        .nth(1)
        .or_else(|| std::env::var("PORT").ok())
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or(8081)
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port = port_from_args();
    let settings = Settings::from_env();
    let ct = tokio_util::sync::CancellationToken::new();
    let tasks = TaskManager::new();
    let tools = Arc::new(tool_list());
    // JSON_RESPONSE=0 answers every request as an SSE stream (rmcp's default);
    // the default here (1) answers plain application/json when possible.
    let json_response = std::env::var("JSON_RESPONSE")
        .map(|v| v.trim() != "0")
        .unwrap_or(true);

    let service: StreamableHttpService<PeerServer, NeverSessionManager> =
        StreamableHttpService::new(
            move || {
                Ok(PeerServer {
                    tasks: tasks.clone(),
                    tools: tools.clone(),
                    settings,
                })
            },
            Default::default(),
            StreamableHttpServerConfig::default()
                .with_legacy_session_mode(false)
                .with_json_response(json_response)
                .with_sse_keep_alive(None)
                .with_cancellation_token(ct.child_token()),
        );
    let app = axum::Router::new().nest_service("/mcp", service);
    // TCP_NODELAY on accepted sockets (default on, as Python's asyncio does for
    // uvicorn). Without it, an SSE reply (JSON_RESPONSE=0) ends with a small
    // chunk that Nagle holds until the client's delayed ACK: ~40 ms stalls.
    let nodelay = std::env::var("TCP_NODELAY")
        .map(|v| v.trim() != "0")
        .unwrap_or(true);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await?
        .tap_io(move |tcp| {
            if nodelay {
                let _ = tcp.set_nodelay(true);
            }
        });
    eprintln!(
        "rmcp-peer-server listening on http://127.0.0.1:{port}/mcp ({settings:?}, json_response={json_response}, tcp_nodelay={nodelay})"
    );
    let shutdown = ct.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        shutdown.cancel();
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { ct.cancelled_owned().await })
        .await
}
