//! The official conformance suite's fixture tools (fixed names and
//! behaviours, see the suite's `tasks-*` scenarios), written with the public
//! tool API. Behind the `conformance-tools` feature; never in a deployed
//! build.

mod mrtr;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{ErrorCode, RpcError};
use crate::prompts::{Prompt, PromptInfo, PromptMessage, PromptResult};
use crate::protocol::content::{Content, ResourceBody, ResourceContents};
use crate::protocol::tools::{
    CallToolResult, ElicitAction, InputRequest, InputRequests, ToolDescriptor,
};
use crate::resources::{
    ResourceInfo, ResourceTemplate, StaticResource, TemplateInfo, Vars, complete_from,
    text_resource,
};
use crate::tools::{
    CallError, CallPlan, Requirements, StepContext, StepFuture, StepOutcome, SyncTool, TaskStart,
    TaskSupport, Tool, ToolCall, ToolSet, form_schema, sync_tool,
};
#[cfg(target_arch = "wasm32")]
use crate::tools::{Start, Step, TaskTool, task_tool};

/// Every fixture tool, `greet` first.
pub fn tools() -> ToolSet {
    ToolSet::from_tools(vec![
        Box::new(Greet),
        Box::new(MissingCapability),
        Box::new(StreamingElicitation),
        Box::new(LoggingTool),
        sync_tool(SimpleText),
        sync_tool(ErrorHandling),
        Box::new(Elicitation),
        Box::new(Sampling),
        Box::new(WithProgress),
        Box::new(ContentTool::Image),
        Box::new(ContentTool::Audio),
        Box::new(ContentTool::Embedded),
        Box::new(ContentTool::Mixed),
        Box::new(CustomHeaders),
        Box::new(JsonSchema2020),
        Box::new(SlowCompute),
        Box::new(FailingJob),
        Box::new(ProtocolErrorJob),
        Box::new(ConfirmDelete),
        Box::new(MultiInput),
        Box::new(TestToolWithTask),
    ])
    .with_resource(
        text_resource(
            "test://static-text",
            "static-text",
            "text/plain",
            "This is the content of the static text resource.",
        )
        .title("Static Text Resource")
        .description("A static text resource for testing"),
    )
    .with_resource(StaticResource::from_contents(
        ResourceInfo::new("test://static-binary", "static-binary")
            .title("Static Binary Resource")
            .description("A static binary resource (image) for testing")
            .mime_type("image/png"),
        ResourceBody::Blob {
            blob: PNG_BASE64.to_owned(),
        },
    ))
    .with_template(DataTemplate)
    .with_prompt(SimplePrompt)
    .with_prompt(ArgsPrompt)
    .with_prompt(EmbeddedResourcePrompt)
    .with_prompt(ImagePrompt)
    .with_prompt(mrtr::ContextPrompt)
    .and(mrtr::tools())
    .and(poison())
}

/// `trap_step`, only where a trap ends the instance rather than the process
/// (a component): in a native process it would abort the process.
fn poison() -> ToolSet {
    #[cfg(target_arch = "wasm32")]
    return ToolSet::from_tools(vec![task_tool(TrapStep)]);
    #[cfg(not(target_arch = "wasm32"))]
    ToolSet::empty()
}

/// The 1x1 PNG the suite's reference server uses.
const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// The short WAV the suite's reference server uses.
const WAV_BASE64: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

fn png() -> Content {
    Content::Image {
        data: PNG_BASE64.to_owned(),
        mime_type: "image/png".to_owned(),
    }
}

/// `test://template/{id}/data`: JSON naming the id.
struct DataTemplate;

impl ResourceTemplate for DataTemplate {
    fn describe(&self) -> TemplateInfo {
        TemplateInfo::new("test://template/{id}/data", "template")
            .title("Resource Template")
            .description("A resource template with parameter substitution")
            .mime_type("application/json")
    }
    fn read(&self, uri: &str, vars: &Vars) -> Result<Option<ResourceContents>, String> {
        let id = vars.get("id").cloned().unwrap_or_default();
        let body = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
        Ok(Some(ResourceContents::text(
            uri,
            "application/json",
            body.to_string(),
        )))
    }
    fn complete(&self, _variable: &str, prefix: &str, _context: &Vars) -> Vec<String> {
        complete_from(&["1", "2", "3", "123"], prefix)
    }
}

/// `test_simple_prompt`: one user message.
struct SimplePrompt;

impl Prompt for SimplePrompt {
    fn describe(&self) -> PromptInfo {
        PromptInfo::new("test_simple_prompt", "A simple prompt without arguments")
            .title("Simple Test Prompt")
    }
    fn get(&self, _args: &Vars) -> Result<PromptResult, String> {
        Ok(PromptResult::new(vec![PromptMessage::user(Content::text(
            "This is a simple prompt for testing.",
        ))]))
    }
}

/// `test_prompt_with_arguments {arg1, arg2}`: both required, both echoed.
struct ArgsPrompt;

impl Prompt for ArgsPrompt {
    fn describe(&self) -> PromptInfo {
        PromptInfo::new(
            "test_prompt_with_arguments",
            "A prompt with required arguments",
        )
        .title("Prompt With Arguments")
        .argument("arg1", "First test argument", true)
        .argument("arg2", "Second test argument", true)
    }
    fn get(&self, args: &Vars) -> Result<PromptResult, String> {
        let arg = |n: &str| args.get(n).cloned().unwrap_or_default();
        Ok(PromptResult::new(vec![PromptMessage::user(Content::text(
            format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                arg("arg1"),
                arg("arg2")
            ),
        ))]))
    }
    fn complete(&self, argument: &str, prefix: &str, _context: &Vars) -> Vec<String> {
        let options: &[&str] = match argument {
            "arg1" => &["test", "testValue1", "other"],
            _ => &["testValue2"],
        };
        complete_from(options, prefix)
    }
}

/// `test_prompt_with_embedded_resource {resourceUri}`.
struct EmbeddedResourcePrompt;

impl Prompt for EmbeddedResourcePrompt {
    fn describe(&self) -> PromptInfo {
        PromptInfo::new(
            "test_prompt_with_embedded_resource",
            "A prompt that includes an embedded resource",
        )
        .title("Prompt With Embedded Resource")
        .argument("resourceUri", "URI of the resource to embed", true)
    }
    fn get(&self, args: &Vars) -> Result<PromptResult, String> {
        let uri = args.get("resourceUri").cloned().unwrap_or_default();
        Ok(PromptResult::new(vec![
            PromptMessage::user(Content::resource(ResourceContents::text(
                uri,
                "text/plain",
                "Embedded resource content for testing.",
            ))),
            PromptMessage::user(Content::text("Please process the embedded resource above.")),
        ]))
    }
}

/// `test_prompt_with_image`: an image, then a question about it.
struct ImagePrompt;

impl Prompt for ImagePrompt {
    fn describe(&self) -> PromptInfo {
        PromptInfo::new(
            "test_prompt_with_image",
            "A prompt that includes image content",
        )
        .title("Prompt With Image")
    }
    fn get(&self, _args: &Vars) -> Result<PromptResult, String> {
        Ok(PromptResult::new(vec![
            PromptMessage::user(png()),
            PromptMessage::user(Content::text("Please analyze the image above.")),
        ]))
    }
}

/// `json_schema_2020_12_tool`: an input schema written by hand with JSON
/// Schema 2020-12 features (`$defs` with `$anchor`, `$ref`, `allOf`/`anyOf`,
/// `if`/`then`/`else`), listed exactly as written.
struct JsonSchema2020;

impl Tool for JsonSchema2020 {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: "json_schema_2020_12_tool",
            title: None,
            description: "Tool with JSON Schema 2020-12 features",
            input_schema: json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "address": {
                        "$anchor": "addressDef",
                        "type": "object",
                        "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
                    }
                },
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"},
                    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                    "phone": {"type": "string"},
                    "email": {"type": "string"}
                },
                "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
                "then": {"required": ["phone"]},
                "else": {"required": ["email"]},
                "additionalProperties": false
            }),
            output_schema: None,
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Never)
    }
    fn call(&self, call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        let name = call
            .arguments
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("someone");
        Ok(CallPlan::Result(CallToolResult::text(format!(
            "Contact details received for {name}."
        ))))
    }
}

/// `test_custom_headers`: arguments mirrored into `Mcp-Param-*` headers
/// (`x-mcp-header`), which the server checks against the body.
struct CustomHeaders;

impl Tool for CustomHeaders {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: "test_custom_headers",
            title: None,
            description: "Echoes its region; region and priority travel in Mcp-Param headers too.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "region": {"type": "string", "description": "A region", "x-mcp-header": "Region"},
                    "priority": {"type": "integer", "description": "A priority", "x-mcp-header": "Priority"},
                    "query": {"type": "string", "description": "Not mirrored"}
                },
                "required": ["region"]
            }),
            output_schema: None,
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Never)
    }
    fn call(&self, call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        let region = call
            .arguments
            .get("region")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Ok(CallPlan::Result(CallToolResult::text(format!(
            "Region: {region}"
        ))))
    }
}

/// `test_image_content`, `test_audio_content`, `test_embedded_resource`,
/// `test_multiple_content_types`: one tool per kind of content block.
enum ContentTool {
    Image,
    Audio,
    Embedded,
    Mixed,
}

impl Tool for ContentTool {
    fn descriptor(&self) -> ToolDescriptor {
        let (name, description) = match self {
            ContentTool::Image => ("test_image_content", "Answers with an image."),
            ContentTool::Audio => ("test_audio_content", "Answers with audio."),
            ContentTool::Embedded => (
                "test_embedded_resource",
                "Answers with an embedded resource.",
            ),
            ContentTool::Mixed => (
                "test_multiple_content_types",
                "Answers with text, an image and an embedded resource.",
            ),
        };
        ToolDescriptor {
            name,
            title: None,
            description,
            input_schema: no_args(),
            output_schema: None,
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Never)
    }
    fn call(&self, _call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        let content = match self {
            ContentTool::Image => vec![png()],
            ContentTool::Audio => vec![Content::Audio {
                data: WAV_BASE64.to_owned(),
                mime_type: "audio/wav".to_owned(),
            }],
            ContentTool::Embedded => vec![Content::resource(ResourceContents::text(
                "test://embedded-resource",
                "text/plain",
                "This is an embedded resource content.",
            ))],
            ContentTool::Mixed => vec![
                Content::text("Multiple content types test:"),
                png(),
                Content::resource(ResourceContents::text(
                    "test://mixed-content-resource",
                    "application/json",
                    json!({"test": "data", "value": 123}).to_string(),
                )),
            ],
        };
        Ok(CallPlan::Result(CallToolResult {
            content,
            structured_content: None,
            is_error: false,
        }))
    }
}

fn schema(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

fn no_args() -> Value {
    json!({"type": "object", "properties": {}})
}

fn ask(key: &str, message: &str, field: &str, field_schema: Value) -> InputRequests {
    let mut r = InputRequests::new();
    r.insert(
        key.to_owned(),
        InputRequest::elicit_form(
            message,
            form_schema(json!({ field: field_schema }), &[field]),
        ),
    );
    r
}

fn one_second_task(message: &str) -> CallPlan {
    CallPlan::Task(TaskStart {
        state: Value::Null,
        first_step_in_ms: 1_000,
        message: Some(message.to_owned()),
    })
}

fn input_task(message: &str) -> CallPlan {
    CallPlan::Task(TaskStart {
        state: json!({"phase": "ask"}),
        first_step_in_ms: 0,
        message: Some(message.to_owned()),
    })
}

fn phase<'a>(step: &'a StepContext<'_>) -> Option<&'a str> {
    step.state().get("phase").and_then(Value::as_str)
}

/// `greet {name}`: always synchronous.
struct Greet;

#[derive(Deserialize)]
struct GreetArgs {
    name: String,
}

impl Tool for Greet {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: "greet",
            title: Some("Greet"),
            description: "Greets someone by name. Always answers at once.",
            input_schema: schema(json!({"name": {"type": "string"}}), &["name"]),
            output_schema: None,
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Never)
    }
    fn call(&self, call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        let a: GreetArgs = call.args("greet")?;
        Ok(CallPlan::Result(CallToolResult::text(format!(
            "Hello, {}!",
            a.name
        ))))
    }
}

/// `slow_compute {seconds, label}`: a task that finishes after `seconds`
/// (at once, synchronously, for 0 or without the tasks extension).
struct SlowCompute;

#[derive(Deserialize)]
struct SlowArgs {
    seconds: f64,
    #[serde(default)]
    label: Option<String>,
}

impl SlowArgs {
    fn parse(v: &serde_json::Map<String, Value>) -> Result<SlowArgs, String> {
        let a: SlowArgs = crate::tools::parse_args("slow_compute", v)?;
        if !(0.0..=3_600.0).contains(&a.seconds) {
            return Err(
                "Invalid arguments for tool slow_compute: seconds must be between 0 and 3600."
                    .into(),
            );
        }
        Ok(a)
    }

    fn result(&self) -> CallToolResult {
        let label = self.label.as_deref().unwrap_or("computation");
        CallToolResult::structured(
            format!("{label}: finished after {} seconds.", self.seconds),
            json!({"label": label, "seconds": self.seconds}),
        )
    }
}

impl Tool for SlowCompute {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: "slow_compute",
            title: Some("Slow compute"),
            description: "Simulates work that takes the given number of seconds; runs as a task when the client supports tasks.",
            input_schema: schema(
                json!({"seconds": {"type": "number", "minimum": 0, "maximum": 3600}, "label": {"type": "string"}}),
                &["seconds"],
            ),
            output_schema: None,
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Optional)
    }
    fn call(&self, call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        let a = SlowArgs::parse(call.arguments).map_err(CallError::InvalidArguments)?;
        if !call.capabilities.has_tasks() || a.seconds == 0.0 {
            return Ok(CallPlan::Result(a.result()));
        }
        Ok(CallPlan::Task(TaskStart {
            state: Value::Null,
            first_step_in_ms: (a.seconds * 1000.0) as u64,
            message: Some("Computing.".to_owned()),
        }))
    }
    fn step<'a>(&'a self, step: &'a StepContext<'a>) -> StepFuture<'a> {
        Box::pin(async move {
            match SlowArgs::parse(step.arguments()) {
                Ok(a) => StepOutcome::Complete(a.result()),
                Err(e) => StepOutcome::Fail(RpcError::internal(e)),
            }
        })
    }
}

/// `failing_job`: a task whose tool result is an error (`isError: true`),
/// which makes it `completed`, not `failed`.
struct FailingJob;

impl Tool for FailingJob {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: "failing_job",
            title: Some("Failing job"),
            description: "A task that completes after about a second with a tool error (isError: true).",
            input_schema: no_args(),
            output_schema: None,
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Required)
    }
    fn call(&self, _call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        Ok(one_second_task("Running a job that will fail."))
    }
    fn step<'a>(&'a self, _step: &'a StepContext<'a>) -> StepFuture<'a> {
        Box::pin(async move {
            StepOutcome::Complete(CallToolResult::error(
                "The job failed: simulated tool error.",
            ))
        })
    }
}

/// `protocol_error_job`: a task that ends `failed` with a JSON-RPC error.
struct ProtocolErrorJob;

impl Tool for ProtocolErrorJob {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: "protocol_error_job",
            title: Some("Protocol error job"),
            description: "A task that fails after about a second with a JSON-RPC error.",
            input_schema: no_args(),
            output_schema: None,
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Required)
    }
    fn call(&self, _call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        Ok(one_second_task(
            "Running a job that will hit a protocol error.",
        ))
    }
    fn step<'a>(&'a self, _step: &'a StepContext<'a>) -> StepFuture<'a> {
        Box::pin(async move {
            StepOutcome::Fail(RpcError::new(
                ErrorCode::INTERNAL_ERROR,
                "Internal error: the job hit a simulated protocol error.",
            ))
        })
    }
}

/// `confirm_delete {filename}`: a task that asks for confirmation.
struct ConfirmDelete;

#[derive(Deserialize)]
struct DeleteArgs {
    filename: String,
}

impl Tool for ConfirmDelete {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: "confirm_delete",
            title: Some("Confirm delete"),
            description: "A task that asks you to confirm before it (pretends to) delete a file.",
            input_schema: schema(json!({"filename": {"type": "string"}}), &["filename"]),
            output_schema: None,
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Required).with_form_elicitation()
    }
    fn call(&self, call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        call.args::<DeleteArgs>("confirm_delete")?;
        Ok(input_task("Preparing to delete."))
    }
    fn step<'a>(&'a self, step: &'a StepContext<'a>) -> StepFuture<'a> {
        Box::pin(async move {
            let file = match step.args::<DeleteArgs>("confirm_delete") {
                Ok(a) => a.filename,
                Err(e) => return StepOutcome::Fail(e),
            };
            if phase(step) == Some("ask") {
                return StepOutcome::NeedInput {
                    state: json!({"phase": "decide"}),
                    requests: ask(
                        "confirm",
                        &format!("Delete {file}?"),
                        "confirm",
                        json!({"type": "boolean", "title": "Confirm deletion"}),
                    ),
                    message: Some("Waiting for confirmation.".to_owned()),
                };
            }
            let answer = step.answer("confirm");
            if answer
                .as_ref()
                .is_some_and(|a| a.action == ElicitAction::Cancel)
            {
                return StepOutcome::Cancel("The user cancelled the deletion.".to_owned());
            }
            let confirmed = answer
                .as_ref()
                .and_then(|a| a.accepted("confirm"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let text = if confirmed {
                format!("Deleted {file}.")
            } else {
                format!("Kept {file}: deletion was not confirmed.")
            };
            StepOutcome::Complete(CallToolResult::structured(
                text,
                json!({"filename": file, "deleted": confirmed}),
            ))
        })
    }
}

/// `multi_input`: a task that asks two questions at once.
struct MultiInput;

impl Tool for MultiInput {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: "multi_input",
            title: Some("Multiple inputs"),
            description: "A task that asks two questions at once and answers when both are in.",
            input_schema: no_args(),
            output_schema: None,
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Required).with_form_elicitation()
    }
    fn call(&self, _call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        Ok(input_task("Preparing questions."))
    }
    fn step<'a>(&'a self, step: &'a StepContext<'a>) -> StepFuture<'a> {
        Box::pin(async move {
            if phase(step) == Some("ask") {
                let mut requests = ask(
                    "reviewer",
                    "Who reviews the change?",
                    "name",
                    json!({"type": "string"}),
                );
                requests.extend(ask(
                    "approval",
                    "Approve the change?",
                    "confirm",
                    json!({"type": "boolean"}),
                ));
                return StepOutcome::NeedInput {
                    state: json!({"phase": "answer"}),
                    requests,
                    message: Some("Waiting for two answers.".to_owned()),
                };
            }
            let reviewer = step
                .answer("reviewer")
                .and_then(|a| {
                    a.accepted("name")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .unwrap_or_else(|| "nobody".to_owned());
            let approved = step
                .answer("approval")
                .and_then(|a| a.accepted("confirm").and_then(Value::as_bool))
                .unwrap_or(false);
            StepOutcome::Complete(CallToolResult::structured(
                format!("Reviewer: {reviewer}; approved: {approved}."),
                json!({"reviewer": reviewer, "approved": approved}),
            ))
        })
    }
}

/// `test_tool_with_task`: core MRTR before the task exists. Round one asks
/// for a name (`input_required` with `requestState`); the retry with the
/// answer creates a task whose result greets that name.
struct TestToolWithTask;

impl Tool for TestToolWithTask {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: "test_tool_with_task",
            title: Some("MRTR, then a task"),
            description: "Asks for your name first (multi round-trip), then runs a task that greets you.",
            input_schema: no_args(),
            output_schema: None,
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Required).with_form_elicitation()
    }
    fn call(&self, call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        let name = call.response("user_name").and_then(|r| {
            r.accepted("name")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        match (call.round_state, name) {
            (Some(_), Some(name)) => Ok(CallPlan::Task(TaskStart {
                state: json!({"name": name}),
                first_step_in_ms: 500,
                message: Some("Greeting.".to_owned()),
            })),
            _ => Ok(CallPlan::InputRequired {
                requests: ask(
                    "user_name",
                    "What is your name?",
                    "name",
                    json!({"type": "string"}),
                ),
                round_state: json!({"round": 1}),
            }),
        }
    }
    fn step<'a>(&'a self, step: &'a StepContext<'a>) -> StepFuture<'a> {
        Box::pin(async move {
            let name = step
                .state
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("there");
            StepOutcome::Complete(CallToolResult::text(format!(
                "Hello, {name}! The task has finished."
            )))
        })
    }
}

/// `test_missing_capability`: needs sampling, which this server never uses
/// otherwise; a client that did not declare it gets -32021.
struct MissingCapability;

impl Tool for MissingCapability {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: "test_missing_capability",
            title: None,
            description: "Requires the sampling capability; refused with -32021 when the client did not declare it.",
            input_schema: no_args(),
            output_schema: None,
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Never).with_sampling()
    }
    fn call(&self, _call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        Ok(CallPlan::Result(CallToolResult::text(
            "The client declared sampling.",
        )))
    }
}

/// `test_streaming_elicitation`: where an older server would send an
/// elicitation request on the response stream, this one answers with a core
/// MRTR `input_required` result, then completes on the retry.
struct StreamingElicitation;

impl Tool for StreamingElicitation {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: "test_streaming_elicitation",
            title: None,
            description: "Asks for input through a multi round-trip result, never through a server-to-client request.",
            input_schema: no_args(),
            output_schema: None,
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Never)
    }
    fn call(&self, call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        if !call.capabilities.has_form_elicitation() {
            return Ok(CallPlan::Result(CallToolResult::text(
                "No elicitation capability; nothing to ask.",
            )));
        }
        let answer = call.response("feedback").and_then(|r| {
            r.accepted("text")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        match (call.round_state, answer) {
            (Some(_), Some(text)) => Ok(CallPlan::Result(CallToolResult::text(format!(
                "Thanks for the feedback: {text}"
            )))),
            _ => Ok(CallPlan::InputRequired {
                requests: ask(
                    "feedback",
                    "Any feedback?",
                    "text",
                    json!({"type": "string"}),
                ),
                round_state: json!({"round": 1}),
            }),
        }
    }
}

/// `test_logging_tool`: completes without log notifications (none are sent
/// unless a request asks for them with a log level).
struct LoggingTool;

impl Tool for LoggingTool {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: "test_logging_tool",
            title: None,
            description: "Completes at once and sends no log notifications.",
            input_schema: no_args(),
            output_schema: None,
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Never)
    }
    fn call(&self, _call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        Ok(CallPlan::Result(CallToolResult::text(
            "Done; nothing was logged.",
        )))
    }
}

/// `test_simple_text`: one text item.
struct SimpleText;

impl SyncTool for SimpleText {
    type Args = NoArgs;
    type Output = String;
    const NAME: &'static str = "test_simple_text";
    const DESCRIPTION: &'static str = "Answers with one text item.";

    fn run(&self, _args: NoArgs) -> Result<String, String> {
        Ok("This is a simple text response for testing.".to_owned())
    }
}

/// `test_error_handling`: a tool-level error (`isError: true`), not a
/// protocol error.
struct ErrorHandling;

impl SyncTool for ErrorHandling {
    type Args = NoArgs;
    type Output = String;
    const NAME: &'static str = "test_error_handling";
    const DESCRIPTION: &'static str =
        "Always fails as a tool (isError), never as a protocol error.";

    fn run(&self, _args: NoArgs) -> Result<String, String> {
        Err("This tool intentionally returns an error for testing".to_owned())
    }
}

/// `test_elicitation {message}`: asks the user for a username and an email
/// (an `input_required` round; a 2025-11-25 client gets the request on the
/// response stream) and echoes the answer.
struct Elicitation;

#[derive(Deserialize)]
struct MessageArgs {
    #[serde(default)]
    message: Option<String>,
}

impl Tool for Elicitation {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: "test_elicitation",
            title: None,
            description: "Asks the user for a username and an email, then echoes the answer.",
            input_schema: schema(json!({"message": {"type": "string"}}), &[]),
            output_schema: None,
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Never).with_form_elicitation()
    }
    fn call(&self, call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        let a: MessageArgs = call.args("test_elicitation")?;
        if let (Some(_), Some(answer)) = (call.round_state, call.response("user")) {
            let text = format!(
                "User response: action={}, content={}",
                serde_json::to_value(answer.action)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                answer
                    .content
                    .map(|c| Value::Object(c).to_string())
                    .unwrap_or_else(|| "{}".to_owned())
            );
            return Ok(CallPlan::Result(CallToolResult::text(text)));
        }
        let mut requests = InputRequests::new();
        requests.insert(
            "user".to_owned(),
            InputRequest::elicit_form(
                a.message
                    .unwrap_or_else(|| "Please provide your details.".to_owned()),
                json!({
                    "type": "object",
                    "properties": {
                        "username": {"type": "string", "description": "Your username"},
                        "email": {"type": "string", "description": "Your email address"}
                    },
                    "required": ["username", "email"]
                }),
            ),
        );
        Ok(CallPlan::InputRequired {
            requests,
            round_state: json!({"round": 1}),
        })
    }
}

/// `test_sampling {prompt}`: asks the client's model (`sampling/createMessage`)
/// and returns its answer.
struct Sampling;

#[derive(Deserialize)]
struct PromptArgs {
    #[serde(default)]
    prompt: Option<String>,
}

impl Tool for Sampling {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: "test_sampling",
            title: None,
            description: "Asks the client's language model to answer a prompt, and returns the answer.",
            input_schema: schema(json!({"prompt": {"type": "string"}}), &[]),
            output_schema: None,
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Never).with_sampling()
    }
    fn call(&self, call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        let a: PromptArgs = call.args("test_sampling")?;
        let answer = call
            .round_state
            .and(call.input_responses)
            .and_then(|r| r.get("llm"));
        if let Some(answer) = answer {
            let text = answer
                .get("content")
                .and_then(|c| c.get("text"))
                .and_then(Value::as_str)
                .unwrap_or("(no text)");
            return Ok(CallPlan::Result(CallToolResult::text(format!(
                "LLM response: {text}"
            ))));
        }
        let prompt = a.prompt.unwrap_or_else(|| "Say hello.".to_owned());
        let mut requests = InputRequests::new();
        requests.insert(
            "llm".to_owned(),
            InputRequest {
                method: "sampling/createMessage".to_owned(),
                params: json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                    "maxTokens": 100
                }),
            },
        );
        Ok(CallPlan::InputRequired {
            requests,
            round_state: json!({"round": 1}),
        })
    }
}

/// `test_tool_with_progress`: reports progress at 0, 50 and 100 of 100
/// while it computes.
struct WithProgress;

impl Tool for WithProgress {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: "test_tool_with_progress",
            title: None,
            description: "Reports progress three times (0, 50, 100 of 100), then answers.",
            input_schema: no_args(),
            output_schema: None,
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Never)
    }
    fn call(&self, call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        for (done, message) in [(0.0, "Starting"), (50.0, "Halfway"), (100.0, "Done")] {
            call.report_progress(done, Some(100.0), Some(message));
        }
        Ok(CallPlan::Result(CallToolResult::text(
            "Progress reported: 0, 50, 100 of 100.",
        )))
    }
}

#[cfg(target_arch = "wasm32")]
/// `trap_step`: a poison task for the runner's tests. Every step aborts
/// (on wasm: traps the instance, like a panic with `panic = "abort"`), so
/// the task must fail after the maximum number of attempts while other
/// tasks go on. Never call it in a host process: it aborts that process.
struct TrapStep;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

#[cfg(target_arch = "wasm32")]
impl TaskTool for TrapStep {
    type Args = NoArgs;
    type State = ();
    type Output = String;
    const NAME: &'static str = "trap_step";
    const DESCRIPTION: &'static str = "Test fixture: a task whose every step traps the runtime.";

    fn start(&self, _args: &NoArgs) -> Start<()> {
        Start::now(())
    }

    async fn step(&self, _: NoArgs, _: (), _: &StepContext<'_>) -> Step<(), String> {
        std::process::abort()
    }
}

#[cfg(all(test, feature = "demo"))]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_a_valid_object_schema() {
        let set = tools().and(crate::demo::tools(0));
        let names: Vec<_> = set.descriptors().iter().map(|d| d.name).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "names are unique");
        assert_eq!(
            names[0], "greet",
            "a tool that answers any call comes first"
        );
        assert_eq!(
            names.len(),
            32,
            "trap_step is registered in components only"
        );
        for d in set.descriptors() {
            let s = &d.input_schema;
            assert_eq!(s["type"], "object", "{}", d.name);
            assert!(!d.description.is_empty(), "{}", d.name);
            assert!(
                d.name.len() <= 128
                    && d.name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
            );
            assert!(s["properties"].is_object(), "{}", d.name);
            if let Some(req) = s.get("required") {
                for r in req.as_array().unwrap() {
                    assert!(
                        s["properties"].get(r.as_str().unwrap()).is_some(),
                        "{}: {r}",
                        d.name
                    );
                }
            }
        }
    }
}
