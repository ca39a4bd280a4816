//! `generate_report`, the demo tool: a task that drafts an outline, asks the
//! user to approve it, then renders the report.
//!
//! Outcomes of the approval request (`approve_outline`):
//! - `accept` with `approved: true`: `completed`, the report is generated;
//! - `accept` with `approved: false`, or `decline`: `completed` with
//!   `approved: false` and no report (the user answered "no", a defined
//!   result, not an error);
//! - `cancel` (the user dismissed the question): the task ends `cancelled`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::protocol::tools::{ElicitAction, InputRequest, InputRequests};
use crate::tools::{Requirements, Start, Step, StepContext, TaskSupport, TaskTool, form_schema};

pub struct GenerateReport {
    /// How long drafting the outline takes.
    pub outline_ms: u64,
}

const APPROVE: &str = "approve_outline";

#[derive(Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Size {
    Small,
    Medium,
    Large,
}

impl Size {
    fn as_str(self) -> &'static str {
        match self {
            Size::Small => "small",
            Size::Medium => "medium",
            Size::Large => "large",
        }
    }
}

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// How long the report should be.
    size: Size,
}

/// Where the report is.
#[derive(Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "lowercase")]
pub enum Phase {
    Outline,
    Render,
}

#[derive(Serialize, JsonSchema)]
pub struct Report {
    size: Size,
    approved: bool,
}

impl TaskTool for GenerateReport {
    type Args = Args;
    type State = Phase;
    type Output = Report;
    const NAME: &'static str = "generate_report";
    const TITLE: Option<&'static str> = Some("Generate report");
    const DESCRIPTION: &'static str = "Drafts a report outline, asks you to approve it, then generates the report. Runs as a durable task.";

    // Its steps compute from the task alone (no outbound calls).
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Required)
            .with_form_elicitation()
            .with_replayable_steps()
    }

    fn start(&self, _args: &Args) -> Start<Phase> {
        Start::now(Phase::Outline)
            .after_ms(self.outline_ms)
            .message("Preparing report outline.")
    }

    async fn step(&self, args: Args, phase: Phase, cx: &StepContext<'_>) -> Step<Phase, Report> {
        match phase {
            Phase::Outline => {
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
                Step::NeedInput {
                    state: Phase::Render,
                    requests,
                    message: Some("Waiting for outline approval.".to_owned()),
                }
            }
            Phase::Render => {
                let answer = cx.answer(APPROVE);
                if answer
                    .as_ref()
                    .is_some_and(|a| a.action == ElicitAction::Cancel)
                {
                    return Step::Cancel("The user cancelled the outline approval.".to_owned());
                }
                let approved = answer
                    .as_ref()
                    .and_then(|a| a.accepted("approved"))
                    .and_then(serde_json::Value::as_bool)
                    .unwrap_or(false);
                let size = args.size.as_str();
                let text = if approved {
                    format!("Generated {size} report with approved outline.")
                } else {
                    format!("No {size} report was generated: the outline was not approved.")
                };
                Step::DoneWith(crate::protocol::tools::CallToolResult::structured(
                    text,
                    json!({"size": size, "approved": approved}),
                ))
            }
        }
    }
}
