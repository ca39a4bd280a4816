//! The typed tool API: a tool's arguments, task state and result are its
//! own serde types, and its input and output schemas are generated from
//! them ([`schemars`]).
//!
//! - [`SyncTool`]: answers at once (`run`).
//! - [`TaskTool`]: a durable task; `start` picks the first state, and one
//!   `async` [`step`](TaskTool::step) moves it on until it returns a result.
//!
//! Register either with [`sync_tool`] / [`task_tool`] into a
//! [`ToolSet`](super::ToolSet).

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{
    CallError, CallPlan, Requirements, StepContext, StepFuture, StepOutcome, TaskStart,
    TaskSupport, Tool, ToolCall, parse_args,
};
use crate::error::RpcError;
use crate::protocol::tools::{CallToolResult, Content, InputRequests, ToolDescriptor};
use crate::schema::schema_of;

/// The schema of `T` if it describes a JSON object (what `outputSchema`
/// and `structuredContent` require).
fn object_schema_of<T: JsonSchema>() -> Option<Value> {
    let v = schema_of::<T>();
    (v.get("type").and_then(Value::as_str) == Some("object")).then_some(v)
}

/// A tool's result as a `CallToolResult`: an object becomes structured
/// content (with its JSON as the text), anything else text; `more`
/// content blocks follow.
fn result_of<O: Serialize>(output: &O, more: Vec<Content>) -> CallToolResult {
    let mut result = match serde_json::to_value(output) {
        Ok(Value::String(text)) => CallToolResult::text(text),
        Ok(v @ Value::Object(_)) => CallToolResult::structured(v.to_string(), v),
        Ok(v) => CallToolResult::text(v.to_string()),
        Err(_) => {
            return CallToolResult::error(
                "Internal error: the tool's result could not be encoded.",
            );
        }
    };
    result.content.extend(more);
    result
}

/// A tool that answers at once.
///
/// ```
/// use mcp_tasks_edge::tools::{SyncTool, ToolSet, sync_tool};
/// use schemars::JsonSchema;
/// use serde::Deserialize;
///
/// struct Greet;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct Args {
///     /// Who to greet.
///     name: String,
/// }
///
/// impl SyncTool for Greet {
///     type Args = Args;
///     type Output = String;
///     const NAME: &'static str = "greet";
///     const DESCRIPTION: &'static str = "Says hello.";
///     fn run(&self, args: Args) -> Result<String, String> {
///         Ok(format!("Hello, {}!", args.name))
///     }
/// }
///
/// let tools = ToolSet::from_tools(vec![sync_tool(Greet)]);
/// assert_eq!(tools.descriptors()[0].input_schema["required"][0], "name");
/// ```
pub trait SyncTool: Send + Sync + 'static {
    type Args: DeserializeOwned + JsonSchema;
    /// A string is answered as text; a struct as structured content with
    /// a generated `outputSchema`.
    type Output: Serialize + JsonSchema;
    const NAME: &'static str;
    const TITLE: Option<&'static str> = None;
    const DESCRIPTION: &'static str;

    /// The answer, or a message for the model (an `isError` result).
    fn run(&self, args: Self::Args) -> Result<Self::Output, String>;

    /// Like [`SyncTool::run`], with the call at hand: to report progress
    /// ([`ToolCall::report_progress`], sent to clients that asked for it)
    /// or to read the client's capabilities. By default [`SyncTool::run`].
    fn run_with(&self, args: Self::Args, _call: &ToolCall<'_>) -> Result<Self::Output, String> {
        self.run(args)
    }

    /// Content blocks the answer carries after its text or structured
    /// content: an image, audio, an embedded resource or a resource link
    /// ([`Content`]'s constructors). None by default. The structured
    /// content stays as `Output` gives it, so it still matches the
    /// generated `outputSchema`.
    ///
    /// ```
    /// use mcp_tasks_edge::protocol::tools::Content;
    /// use mcp_tasks_edge::tools::SyncTool;
    /// # use schemars::JsonSchema;
    /// # use serde::Deserialize;
    /// # #[derive(Deserialize, JsonSchema)]
    /// # struct Args { name: String }
    /// struct Chart;
    ///
    /// impl SyncTool for Chart {
    ///     type Args = Args;
    ///     type Output = String;
    ///     const NAME: &'static str = "chart";
    ///     const DESCRIPTION: &'static str = "Draws a chart.";
    ///     fn run(&self, args: Args) -> Result<String, String> {
    ///         Ok(format!("The chart of {}.", args.name))
    ///     }
    ///     fn content(&self, _output: &String) -> Vec<Content> {
    ///         vec![Content::image(b"\x89PNG...", "image/png")]
    ///     }
    /// }
    /// ```
    fn content(&self, _output: &Self::Output) -> Vec<Content> {
        Vec::new()
    }
}

/// How a task starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Start<S> {
    pub state: S,
    /// When the first step runs, from the call.
    pub first_step_in_ms: u64,
    /// The task's first `statusMessage`.
    pub message: Option<String>,
}

impl<S> Start<S> {
    /// The first step runs at once.
    pub fn now(state: S) -> Self {
        Start {
            state,
            first_step_in_ms: 0,
            message: None,
        }
    }

    pub fn after_ms(mut self, ms: u64) -> Self {
        self.first_step_in_ms = ms;
        self
    }

    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }
}

/// What a typed step decided.
#[derive(Clone, Debug, PartialEq)]
pub enum Step<S, O> {
    /// More work: the next step runs `wake_in_ms` from now, with `state`.
    Continue {
        state: S,
        wake_in_ms: u64,
        message: Option<String>,
    },
    /// Ask the client (keys must be new for this task); the next step runs
    /// once every request is answered, with `state`.
    NeedInput {
        state: S,
        requests: InputRequests,
        message: Option<String>,
    },
    /// The task's result.
    Done(O),
    /// A result the tool built itself (for example an `isError` result).
    DoneWith(CallToolResult),
    /// Try this step again later (same idempotency key); after the
    /// runner's maximum attempts the task fails with `error`.
    Retry {
        error: String,
        after_ms: Option<u64>,
    },
    /// The task fails with this message: `failed`, a JSON-RPC error
    /// (-32603). For what keeps the server from running the tool (a
    /// setting missing, an answer it cannot read). An error the tool
    /// reports to the model (an API refused the input, the work itself
    /// failed) is a completed task with an error result instead:
    /// `DoneWith(CallToolResult::error(…))`.
    Fail(String),
    /// The task ends `cancelled` (for example the user declined to go on).
    Cancel(String),
}

impl<S, O> Step<S, O> {
    /// More work after `wake_in_ms`.
    pub fn after(state: S, wake_in_ms: u64) -> Self {
        Step::Continue {
            state,
            wake_in_ms,
            message: None,
        }
    }

    /// Try again after the runner's backoff.
    pub fn retry(error: impl Into<String>) -> Self {
        Step::Retry {
            error: error.into(),
            after_ms: None,
        }
    }
}

/// A durable task tool: a state type and one `async` step.
///
/// The step semantics (at least once, retries, attempts, cancellation) are
/// those of [`Tool`](super::Tool). A step that calls a remote API passes
/// [`StepContext::idempotency_key`] along, so that a repeated attempt does
/// not do the work twice.
///
/// ```
/// use mcp_tasks_edge::tools::{Start, Step, StepContext, TaskTool, task_tool, ToolSet};
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// struct Countdown;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct Args { from: u32 }
///
/// #[derive(Serialize, Deserialize)]
/// struct Left(u32);
///
/// #[derive(Serialize, JsonSchema)]
/// struct Output { done: bool }
///
/// impl TaskTool for Countdown {
///     type Args = Args;
///     type State = Left;
///     type Output = Output;
///     const NAME: &'static str = "countdown";
///     const DESCRIPTION: &'static str = "Counts down, one step a second.";
///     fn start(&self, args: &Args) -> Start<Left> {
///         Start::now(Left(args.from))
///     }
///     async fn step(&self, _args: Args, state: Left, _cx: &StepContext<'_>) -> Step<Left, Output> {
///         match state.0 {
///             0 => Step::Done(Output { done: true }),
///             n => Step::after(Left(n - 1), 1_000),
///         }
///     }
/// }
///
/// let tools = ToolSet::from_tools(vec![task_tool(Countdown)]);
/// assert!(tools.get("countdown").is_some());
/// ```
#[allow(async_fn_in_trait)] // steps run on single-threaded runtimes; no Send bound
pub trait TaskTool: Send + Sync + 'static {
    type Args: DeserializeOwned + JsonSchema;
    type State: Serialize + DeserializeOwned;
    type Output: Serialize + JsonSchema;
    const NAME: &'static str;
    const TITLE: Option<&'static str> = None;
    const DESCRIPTION: &'static str;

    /// What the client must support; by default the tasks extension.
    ///
    /// A typed task tool always answers with a task. With
    /// [`TaskSupport::Optional`], a 2025-11-25 client that calls it without
    /// `params.task` has its call held open until the task ends, but a
    /// 2026-07-28 client that did not declare the extension is refused with
    /// -32021 as with `Required`: a tool that answers such a client
    /// synchronously implements [`Tool`](super::Tool) itself.
    /// [`TaskSupport::Never`] is read as `Required`, for the same reason.
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Required)
    }

    /// Refuses arguments that are well-formed but cannot be worked on (a
    /// value out of range, an origin the deployment does not allow), before
    /// any task is created: `Err(why)` answers the call with an error result
    /// (`isError`), which the model can correct, and stores nothing. By
    /// default every call that parses is taken.
    ///
    /// ```
    /// # use mcp_tasks_edge::tools::{Start, Step, StepContext, TaskTool};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// # struct Args { minutes: u32 }
    /// # struct Timer;
    /// impl TaskTool for Timer {
    ///     # type Args = Args;
    ///     # type State = ();
    ///     # type Output = String;
    ///     # const NAME: &'static str = "timer";
    ///     # const DESCRIPTION: &'static str = "Waits.";
    ///     fn check(&self, args: &Args) -> Result<(), String> {
    ///         if args.minutes > 60 {
    ///             return Err("minutes must be at most 60".to_owned());
    ///         }
    ///         Ok(())
    ///     }
    ///     # fn start(&self, args: &Args) -> Start<()> {
    ///     #     Start::now(()).after_ms(u64::from(args.minutes) * 60_000)
    ///     # }
    ///     # async fn step(&self, _: Args, _: (), _: &StepContext<'_>) -> Step<(), String> {
    ///     #     Step::Done("done".to_owned())
    ///     # }
    /// }
    /// ```
    fn check(&self, _args: &Self::Args) -> Result<(), String> {
        Ok(())
    }

    /// The first state, from the validated arguments.
    fn start(&self, args: &Self::Args) -> Start<Self::State>;

    /// Moves the task on by one step.
    async fn step(
        &self,
        args: Self::Args,
        state: Self::State,
        cx: &StepContext<'_>,
    ) -> Step<Self::State, Self::Output>;

    /// Content blocks the task's result carries after its text or
    /// structured content, for a step that ends with [`Step::Done`]: an
    /// image, audio, an embedded resource or a resource link. None by
    /// default (see [`SyncTool::content`]).
    fn content(&self, _output: &Self::Output) -> Vec<Content> {
        Vec::new()
    }
}

/// Registers a [`SyncTool`].
pub fn sync_tool<T: SyncTool>(tool: T) -> Box<dyn Tool> {
    Box::new(SyncAdapter(tool))
}

/// Registers a [`TaskTool`].
pub fn task_tool<T: TaskTool>(tool: T) -> Box<dyn Tool> {
    Box::new(TaskAdapter(tool))
}

struct SyncAdapter<T>(T);

/// A typed tool's descriptor: its names, and schemas generated from its
/// argument and output types.
fn descriptor<A: JsonSchema, O: JsonSchema>(
    name: &'static str,
    title: Option<&'static str>,
    description: &'static str,
) -> ToolDescriptor {
    ToolDescriptor {
        name,
        title,
        description,
        input_schema: schema_of::<A>(),
        output_schema: object_schema_of::<O>(),
    }
}

impl<T: SyncTool> Tool for SyncAdapter<T> {
    fn descriptor(&self) -> ToolDescriptor {
        descriptor::<T::Args, T::Output>(T::NAME, T::TITLE, T::DESCRIPTION)
    }

    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Never)
    }

    fn call(&self, call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        let args = call.args::<T::Args>(T::NAME)?;
        Ok(CallPlan::Result(match self.0.run_with(args, call) {
            Ok(output) => result_of(&output, self.0.content(&output)),
            Err(message) => CallToolResult::error(message),
        }))
    }
}

struct TaskAdapter<T>(T);

impl<T: TaskTool> Tool for TaskAdapter<T> {
    fn descriptor(&self) -> ToolDescriptor {
        descriptor::<T::Args, T::Output>(T::NAME, T::TITLE, T::DESCRIPTION)
    }

    fn requirements(&self) -> Requirements {
        let mut needs = self.0.requirements();
        // Always a task (see `TaskTool::requirements`).
        if needs.tasks == TaskSupport::Never {
            needs.tasks = TaskSupport::Required;
        }
        needs
    }

    fn call(&self, call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        let args = call.args::<T::Args>(T::NAME)?;
        if let Err(why) = self.0.check(&args) {
            return Ok(CallPlan::Result(CallToolResult::error(why)));
        }
        let start = self.0.start(&args);
        let state = serde_json::to_value(&start.state).map_err(|_| {
            RpcError::internal("Internal error: the task state could not be encoded.")
        })?;
        Ok(CallPlan::Task(TaskStart {
            state,
            first_step_in_ms: start.first_step_in_ms,
            message: start.message,
        }))
    }

    fn step<'a>(&'a self, cx: &'a StepContext<'a>) -> StepFuture<'a> {
        Box::pin(async move {
            let args = match parse_args::<T::Args>(T::NAME, cx.arguments()) {
                Ok(a) => a,
                Err(why) => return StepOutcome::Fail(RpcError::internal(why)),
            };
            let state = match crate::json::from_value_ref::<T::State>(cx.state()) {
                Ok(s) => s,
                Err(_) => {
                    return StepOutcome::Fail(RpcError::internal(
                        "Internal error: the task's stored state could not be read.",
                    ));
                }
            };
            let encode = |state: T::State| {
                serde_json::to_value(state).map_err(|_| {
                    StepOutcome::Fail(RpcError::internal(
                        "Internal error: the task state could not be encoded.",
                    ))
                })
            };
            match self.0.step(args, state, cx).await {
                Step::Continue {
                    state,
                    wake_in_ms,
                    message,
                } => match encode(state) {
                    Ok(state) => StepOutcome::Continue {
                        state,
                        wake_in_ms,
                        message,
                    },
                    Err(fail) => fail,
                },
                Step::NeedInput {
                    state,
                    requests,
                    message,
                } => match encode(state) {
                    Ok(state) => StepOutcome::NeedInput {
                        state,
                        requests,
                        message,
                    },
                    Err(fail) => fail,
                },
                Step::Done(output) => {
                    StepOutcome::Complete(result_of(&output, self.0.content(&output)))
                }
                Step::DoneWith(result) => StepOutcome::Complete(result),
                Step::Retry { error, after_ms } => StepOutcome::Retry { error, after_ms },
                Step::Fail(message) => StepOutcome::Fail(RpcError::internal(message)),
                Step::Cancel(message) => StepOutcome::Cancel(message),
            }
        })
    }
}
