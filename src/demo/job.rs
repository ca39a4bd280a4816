//! `run_job`, the demo of a task that does real work: it submits a job to
//! an HTTP API, polls it with backoff until it finishes, asks the user to
//! confirm the result, and returns it as structured content.
//!
//! The upstream is the tool setting `JOB_API_URL` (its origin must be on
//! the operator's `MCP_OUTBOUND_ALLOW`); `JOB_API_KEY`, when set, is sent as
//! a bearer token. The API:
//!
//! - `POST {JOB_API_URL}/jobs` with `Idempotency-Key` and `{"input": …}`
//!   answers `{"id": …}` (the same job for the same key);
//! - `GET {JOB_API_URL}/jobs/{id}` answers `{"status": "running" |
//!   "succeeded" | "failed", "result": …, "error": …}`;
//! - 429 and 5xx are retried with backoff (honouring `Retry-After`); the
//!   API's other refusals and a job that failed complete the task with an
//!   error result (`isError`), which the model sees and may act on; what
//!   the server cannot get past (an origin off the allow-list, a malformed
//!   answer, attempts used up) fails the task with a JSON-RPC error.
//!
//! Confirmation (`confirm_result`): `accept` with `confirmed: true` returns
//! the result; `accept` with `false` or `decline` completes with
//! `confirmed: false` and no result; `cancel` ends the task `cancelled`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::outbound::{OutboundError, OutboundRequest, OutboundResponse};
use crate::protocol::tools::{CallToolResult, ElicitAction, InputRequest, InputRequests};
use crate::tools::{Requirements, Start, Step, StepContext, TaskSupport, TaskTool, form_schema};

pub struct RunJob;

const CONFIRM: &str = "confirm_result";
/// The first wait between polls; it doubles up to [`MAX_POLL_MS`].
const FIRST_POLL_MS: u64 = 250;
const MAX_POLL_MS: u64 = 5_000;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// What the job should process.
    input: String,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "lowercase")]
pub enum JobState {
    Submit,
    Poll { job: String, polls: u32 },
    Confirm { job: String, result: Value },
}

#[derive(Serialize, JsonSchema)]
pub struct JobOutput {
    job: String,
    confirmed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
}

#[derive(Deserialize)]
struct Submitted {
    id: String,
}

#[derive(Deserialize)]
struct Status {
    status: String,
    #[serde(default)]
    result: Value,
    #[serde(default)]
    error: Option<String>,
}

/// What to do with an upstream answer that is not a success.
fn upstream_failure<S, O>(what: &str, r: Result<&OutboundResponse, &OutboundError>) -> Step<S, O> {
    match r {
        Ok(resp) if resp.status == 429 || resp.status >= 500 => Step::Retry {
            error: format!("{what}: the job API answered {}", resp.status),
            after_ms: resp
                .header("retry-after")
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|s| s.saturating_mul(1000)),
        },
        // The API refused the job (its input, say): the model is told, in
        // a completed task whose result is an error, and may try again.
        Ok(resp) => Step::DoneWith(CallToolResult::error(format!(
            "{what}: the job API answered {}",
            resp.status
        ))),
        Err(e @ OutboundError::NotAllowed(_)) => Step::Fail(format!("{what}: {e}")),
        Err(e) => Step::retry(format!("{what}: {e}")),
    }
}

impl RunJob {
    fn request(cx: &StepContext<'_>, req: OutboundRequest) -> OutboundRequest {
        match cx.secret("JOB_API_KEY") {
            Some(key) => req.header("authorization", &format!("Bearer {}", key.expose())),
            None => req,
        }
    }
}

impl TaskTool for RunJob {
    type Args = Args;
    type State = JobState;
    type Output = JobOutput;
    const NAME: &'static str = "run_job";
    const TITLE: Option<&'static str> = Some("Run a job");
    const DESCRIPTION: &'static str = "Submits a job to the job API, waits for it to finish, asks you to confirm the result, then returns it. Runs as a durable task.";

    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Required).with_form_elicitation()
    }

    fn start(&self, _args: &Args) -> Start<JobState> {
        Start::now(JobState::Submit).message("Submitting the job.")
    }

    async fn step(
        &self,
        args: Args,
        state: JobState,
        cx: &StepContext<'_>,
    ) -> Step<JobState, JobOutput> {
        let Some(base) = cx.setting("JOB_API_URL") else {
            return Step::Fail("run_job is not configured: JOB_API_URL is not set.".to_owned());
        };
        let base = base.trim_end_matches('/');
        match state {
            JobState::Submit => {
                let body = json!({"input": args.input}).to_string().into_bytes();
                let req = OutboundRequest::post(&format!("{base}/jobs"), body)
                    .header("content-type", "application/json")
                    .header("idempotency-key", cx.idempotency_key());
                let resp = cx.fetch(Self::request(cx, req)).await;
                match &resp {
                    Ok(r) if r.is_success() => match r.json::<Submitted>() {
                        Ok(s) => Step::Continue {
                            state: JobState::Poll {
                                job: s.id,
                                polls: 0,
                            },
                            wake_in_ms: FIRST_POLL_MS,
                            message: Some("The job is running.".to_owned()),
                        },
                        Err(e) => Step::Fail(format!("submit: {e}")),
                    },
                    other => upstream_failure("submit", other.as_ref()),
                }
            }
            JobState::Poll { job, polls } => {
                if cx.cancel_requested().await {
                    return Step::Cancel("Cancelled while the job was running.".to_owned());
                }
                let req = OutboundRequest::get(&format!("{base}/jobs/{job}"));
                let resp = cx.fetch(Self::request(cx, req)).await;
                let status = match &resp {
                    Ok(r) if r.is_success() => match r.json::<Status>() {
                        Ok(s) => s,
                        Err(e) => return Step::Fail(format!("poll: {e}")),
                    },
                    other => return upstream_failure("poll", other.as_ref()),
                };
                match status.status.as_str() {
                    "succeeded" => {
                        let mut requests = InputRequests::new();
                        requests.insert(
                            CONFIRM.to_owned(),
                            InputRequest::elicit_form(
                                format!("Job {job} finished. Use its result?"),
                                form_schema(
                                    json!({"confirmed": {"type": "boolean", "title": "Use the result"}}),
                                    &["confirmed"],
                                ),
                            ),
                        );
                        Step::NeedInput {
                            state: JobState::Confirm {
                                job,
                                result: status.result,
                            },
                            requests,
                            message: Some("The job finished; waiting for confirmation.".to_owned()),
                        }
                    }
                    // The job ran and failed: the tool's answer, an error
                    // result the model sees (a `failed` task is for the
                    // server's own faults, a JSON-RPC error).
                    "failed" => Step::DoneWith(CallToolResult::error(format!(
                        "The job failed: {}",
                        status.error.as_deref().unwrap_or("no reason given")
                    ))),
                    _ => {
                        let wait = FIRST_POLL_MS
                            .saturating_mul(1u64 << polls.min(16))
                            .min(MAX_POLL_MS);
                        Step::Continue {
                            state: JobState::Poll {
                                job,
                                polls: polls.saturating_add(1),
                            },
                            wake_in_ms: wait,
                            message: Some(format!("The job is running (check {}).", polls + 1)),
                        }
                    }
                }
            }
            JobState::Confirm { job, result } => {
                let answer = cx.answer(CONFIRM);
                if answer
                    .as_ref()
                    .is_some_and(|a| a.action == ElicitAction::Cancel)
                {
                    return Step::Cancel("The user cancelled the confirmation.".to_owned());
                }
                let confirmed = answer
                    .as_ref()
                    .and_then(|a| a.accepted("confirmed"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                Step::Done(JobOutput {
                    job,
                    confirmed,
                    result: confirmed.then_some(result),
                })
            }
        }
    }
}
