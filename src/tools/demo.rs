//! `generate_report`, the demo tool: a task that drafts an outline, asks the
//! user to approve it, then renders the report.
//!
//! Outcomes of the approval request (`approve_outline`):
//! - `accept` with `approved: true`: `completed`, the report is generated;
//! - `accept` with `approved: false`, or `decline`: `completed` with
//!   `approved: false` and no report (the user answered "no", a defined
//!   result, not an error);
//! - `cancel` (the user dismissed the question): the task ends `cancelled`.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    CallError, CallPlan, Requirements, StepContext, StepFuture, StepOutcome, TaskStart,
    TaskSupport, Tool, ToolCall, form_schema, ready,
};
use crate::error::RpcError;
use crate::protocol::tools::{
    CallToolResult, ElicitAction, InputRequest, InputRequests, ToolDescriptor,
};

pub struct GenerateReport {
    /// How long drafting the outline takes.
    pub outline_ms: u64,
}

const NAME: &str = "generate_report";
const APPROVE: &str = "approve_outline";

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Size {
    Small,
    Medium,
    Large,
}

impl Size {
    fn as_str(&self) -> &'static str {
        match self {
            Size::Small => "small",
            Size::Medium => "medium",
            Size::Large => "large",
        }
    }
}

#[derive(Deserialize)]
struct Args {
    size: Size,
}

impl Tool for GenerateReport {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: NAME,
            title: Some("Generate report"),
            description: "Drafts a report outline, asks you to approve it, then generates the report. Runs as a durable task.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "size": {"type": "string", "enum": ["small", "medium", "large"], "description": "How long the report should be."}
                },
                "required": ["size"],
            }),
            output_schema: Some(json!({
                "type": "object",
                "properties": {
                    "size": {"type": "string"},
                    "approved": {"type": "boolean"}
                },
                "required": ["size", "approved"],
            })),
        }
    }

    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Required).with_form_elicitation()
    }

    fn call(&self, call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        call.args::<Args>(NAME)?;
        Ok(CallPlan::Task(TaskStart {
            state: json!({"phase": "outline"}),
            first_step_in_ms: self.outline_ms,
            message: Some("Preparing report outline.".to_owned()),
        }))
    }

    fn step<'a>(&'a self, step: &'a StepContext<'a>) -> StepFuture<'a> {
        ready((|| {
            let size = match step.args::<Args>(NAME) {
                Ok(a) => a.size.as_str(),
                Err(e) => return StepOutcome::Fail(e),
            };
            match step.state().get("phase").and_then(Value::as_str) {
                Some("outline") => {
                    let mut requests = InputRequests::new();
                    requests.insert(
                        APPROVE.to_owned(),
                        InputRequest::elicit_form(
                            "Approve the generated report outline?",
                            form_schema(
                                json!({"approved": {"type": "boolean", "title": "Approve outline"}}),
                                &["approved"],
                            ),
                        ),
                    );
                    StepOutcome::NeedInput {
                        state: json!({"phase": "render"}),
                        requests,
                        message: Some("Waiting for outline approval.".to_owned()),
                    }
                }
                Some("render") => {
                    let answer = step.answer(APPROVE);
                    if answer
                        .as_ref()
                        .is_some_and(|a| a.action == ElicitAction::Cancel)
                    {
                        return StepOutcome::Cancel(
                            "The user cancelled the outline approval.".to_owned(),
                        );
                    }
                    let approved = answer
                        .as_ref()
                        .and_then(|a| a.accepted("approved"))
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    let text = if approved {
                        format!("Generated {size} report with approved outline.")
                    } else {
                        format!("No {size} report was generated: the outline was not approved.")
                    };
                    StepOutcome::Complete(CallToolResult::structured(
                        text,
                        json!({"size": size, "approved": approved}),
                    ))
                }
                _ => StepOutcome::Fail(RpcError::internal("Internal error: unknown report phase.")),
            }
        })())
    }
}
