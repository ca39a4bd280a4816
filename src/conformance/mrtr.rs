//! The `input-required-result-*` fixtures: synchronous tools (and a prompt)
//! that ask for input with core multi round-trip results
//! (`resultType: "input_required"`), each round's state signed in
//! `requestState`.

use serde_json::{Value, json};

use crate::prompts::{Prompt, PromptInfo, PromptMessage, PromptPlan, PromptResult, PromptRound};
use crate::protocol::content::Content;
use crate::protocol::tools::{CallToolResult, InputRequest, InputRequests, ToolDescriptor};
use crate::resources::Vars;
use crate::tools::{CallError, CallPlan, Requirements, TaskSupport, Tool, ToolCall, ToolSet};

fn no_args() -> Value {
    json!({"type": "object", "properties": {}})
}

fn elicit(message: &str, field: &str, kind: &str) -> InputRequest {
    InputRequest::elicit_form(
        message,
        json!({"type": "object", "properties": {field: {"type": kind}}, "required": [field]}),
    )
}

fn sample(text: &str, max_tokens: u32) -> InputRequest {
    InputRequest {
        method: "sampling/createMessage".to_owned(),
        params: json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": max_tokens
        }),
    }
}

fn roots() -> InputRequest {
    InputRequest {
        method: "roots/list".to_owned(),
        params: json!({}),
    }
}

/// The answers of a verified round, or `None` on a first call.
fn answers<'a>(call: &'a ToolCall<'_>) -> Option<&'a serde_json::Map<String, Value>> {
    call.round_state.and(call.input_responses)
}

/// Every fixture tool of this family.
pub fn tools() -> ToolSet {
    use Fixture::*;
    ToolSet::from_tools(
        [
            Elicitation,
            Sampling,
            ListRoots,
            RequestState,
            MultipleInputs,
            MultiRound,
            TamperedState,
            Capabilities,
        ]
        .into_iter()
        .map(|f| Box::new(f) as Box<dyn Tool>)
        .collect(),
    )
}

/// The fixtures' kinds, one tool each.
#[derive(Clone, Copy)]
pub enum Fixture {
    Elicitation,
    Sampling,
    ListRoots,
    RequestState,
    MultipleInputs,
    MultiRound,
    TamperedState,
    Capabilities,
}

impl Fixture {
    fn name(self) -> &'static str {
        match self {
            Fixture::Elicitation => "test_input_required_result_elicitation",
            Fixture::Sampling => "test_input_required_result_sampling",
            Fixture::ListRoots => "test_input_required_result_list_roots",
            Fixture::RequestState => "test_input_required_result_request_state",
            Fixture::MultipleInputs => "test_input_required_result_multiple_inputs",
            Fixture::MultiRound => "test_input_required_result_multi_round",
            Fixture::TamperedState => "test_input_required_result_tampered_state",
            Fixture::Capabilities => "test_input_required_result_capabilities",
        }
    }

    /// The first round's requests and state.
    fn first_round(self, call: &ToolCall<'_>) -> CallPlan {
        let mut requests = InputRequests::new();
        let mut state = json!({"round": 1});
        match self {
            Fixture::Elicitation => {
                requests.insert(
                    "user_name".into(),
                    elicit("What is your name?", "name", "string"),
                );
            }
            Fixture::Sampling => {
                requests.insert(
                    "capital_question".into(),
                    sample("What is the capital of France?", 100),
                );
            }
            Fixture::ListRoots => {
                requests.insert("client_roots".into(), roots());
            }
            Fixture::RequestState | Fixture::TamperedState => {
                requests.insert("confirm".into(), elicit("Please confirm", "ok", "boolean"));
                state = json!({"round": 1, "check": "state-ok"});
            }
            Fixture::MultipleInputs => {
                requests.insert(
                    "user_name".into(),
                    elicit("What is your name?", "name", "string"),
                );
                requests.insert("greeting".into(), sample("Generate a greeting", 50));
                requests.insert("client_roots".into(), roots());
            }
            Fixture::MultiRound => {
                requests.insert(
                    "step1".into(),
                    elicit("Step 1: What is your name?", "name", "string"),
                );
            }
            Fixture::Capabilities => {
                // Only what the client declared it can answer.
                if call.capabilities.sampling.is_some() {
                    requests.insert("sample_input".into(), sample("Sample request", 50));
                }
                if call.capabilities.has_form_elicitation() {
                    requests.insert(
                        "user_input".into(),
                        elicit("Your input?", "value", "string"),
                    );
                }
            }
        }
        CallPlan::InputRequired {
            requests,
            round_state: state,
        }
    }
}

impl Tool for Fixture {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: self.name(),
            title: None,
            description: "Asks for input with multi round-trip results (conformance fixture).",
            input_schema: no_args(),
            output_schema: None,
        }
    }

    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Never)
    }

    fn call(&self, call: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        let Some(answers) = answers(call) else {
            return Ok(self.first_round(call));
        };
        let text_of = |key: &str| {
            call.response(key)
                .and_then(|r| r.content)
                .map(|c| Value::Object(c).to_string())
        };
        let done = |text: String| Ok(CallPlan::Result(CallToolResult::text(text)));
        match self {
            Fixture::MultiRound if call.round_state.and_then(|s| s.get("name")).is_none() => {
                let Some(name) = call.response("step1").and_then(|r| {
                    r.accepted("name")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                }) else {
                    return Ok(self.first_round(call));
                };
                let mut requests = InputRequests::new();
                requests.insert(
                    "step2".into(),
                    elicit("Step 2: What is your favorite color?", "color", "string"),
                );
                Ok(CallPlan::InputRequired {
                    requests,
                    round_state: json!({"round": 2, "name": name}),
                })
            }
            Fixture::MultiRound => {
                let name = call
                    .round_state
                    .and_then(|s| s.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let color = call
                    .response("step2")
                    .and_then(|r| {
                        r.accepted("color")
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                    })
                    .unwrap_or_default();
                done(format!("Multi-round complete for {name} who likes {color}"))
            }
            Fixture::Elicitation => match call.response("user_name").and_then(|r| {
                r.accepted("name")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            }) {
                Some(name) => done(format!("Hello, {name}!")),
                None => Ok(self.first_round(call)),
            },
            Fixture::RequestState | Fixture::TamperedState => {
                let check = call
                    .round_state
                    .and_then(|s| s.get("check"))
                    .and_then(Value::as_str)
                    .unwrap_or("no state");
                done(format!("Confirmed: {check}"))
            }
            Fixture::Sampling
            | Fixture::ListRoots
            | Fixture::MultipleInputs
            | Fixture::Capabilities => {
                let keys: Vec<&str> = answers.keys().map(String::as_str).collect();
                let user = text_of("user_name").unwrap_or_default();
                done(format!("Received answers for {}. {user}", keys.join(", ")))
            }
        }
    }
}

/// `test_input_required_result_prompt`: a prompt that asks for context
/// first.
pub struct ContextPrompt;

impl Prompt for ContextPrompt {
    fn describe(&self) -> PromptInfo {
        PromptInfo::new(
            "test_input_required_result_prompt",
            "Asks for the context to use, then builds the prompt with it.",
        )
    }

    fn get(&self, _args: &Vars) -> Result<PromptResult, String> {
        Err("this prompt needs the context asked for first".to_owned())
    }

    fn get_rounds(&self, _args: &Vars, round: &PromptRound<'_>) -> Result<PromptPlan, String> {
        let context = round.response("user_context").and_then(|r| {
            r.accepted("context")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        match context {
            Some(context) => Ok(PromptPlan::Messages(PromptResult::new(vec![
                PromptMessage::user(Content::text(format!("Use this context: {context}"))),
            ]))),
            None => {
                let mut requests = InputRequests::new();
                requests.insert(
                    "user_context".into(),
                    elicit("What context should the prompt use?", "context", "string"),
                );
                Ok(PromptPlan::InputRequired {
                    requests,
                    round_state: json!({"round": 1}),
                })
            }
        }
    }
}
