//! Prompts a server offers beside its tools: named message templates with
//! arguments, got with `prompts/get`, whose arguments the client can
//! complete with `completion/complete`.
//!
//! ```
//! use mcp_tasks_edge::prompts::{Prompt, PromptInfo, PromptMessage, PromptResult};
//! use mcp_tasks_edge::resources::{Vars, complete_from};
//! use mcp_tasks_edge::protocol::content::Content;
//! use mcp_tasks_edge::tools::ToolSet;
//!
//! struct Review;
//! impl Prompt for Review {
//!     fn describe(&self) -> PromptInfo {
//!         PromptInfo::new("review", "Asks for a code review.")
//!             .argument("language", "The language of the code", true)
//!     }
//!     fn get(&self, args: &Vars) -> Result<PromptResult, String> {
//!         let language = &args["language"]; // required: the server checked it
//!         Ok(PromptResult::new(vec![PromptMessage::user(Content::text(format!(
//!             "Review this {language} code."
//!         )))]))
//!     }
//!     fn complete(&self, _argument: &str, prefix: &str, _context: &Vars) -> Vec<String> {
//!         complete_from(&["go", "python", "rust"], prefix)
//!     }
//! }
//! assert!(ToolSet::empty().with_prompt(Review).prompt("review").is_some());
//! ```

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::protocol::content::Content;
use crate::protocol::meta::ClientCapabilities;
use crate::protocol::tools::{ElicitResult, InputRequests};
use crate::resources::Vars;

/// One argument of a prompt.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PromptArgument {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub required: bool,
}

/// A prompt as `prompts/list` describes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PromptInfo {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub arguments: Vec<PromptArgument>,
}

impl PromptInfo {
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        PromptInfo {
            name: name.into(),
            title: None,
            description: Some(description.into()),
            arguments: Vec::new(),
        }
    }

    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Adds an argument.
    pub fn argument(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        required: bool,
    ) -> Self {
        self.arguments.push(PromptArgument {
            name: name.into(),
            description: Some(description.into()),
            required,
        });
        self
    }
}

/// Who a message is from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

/// One message of a prompt.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PromptMessage {
    pub role: Role,
    pub content: Content,
}

impl PromptMessage {
    pub fn user(content: Content) -> Self {
        PromptMessage {
            role: Role::User,
            content,
        }
    }

    pub fn assistant(content: Content) -> Self {
        PromptMessage {
            role: Role::Assistant,
            content,
        }
    }
}

/// What `prompts/get` answers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PromptResult {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub messages: Vec<PromptMessage>,
}

impl PromptResult {
    pub fn new(messages: Vec<PromptMessage>) -> Self {
        PromptResult {
            description: None,
            messages,
        }
    }
}

/// A `prompts/get` round as a prompt that asks for input sees it.
pub struct PromptRound<'a> {
    pub capabilities: &'a ClientCapabilities,
    /// Answers to the previous round's requests, once its `requestState`
    /// verified.
    pub input_responses: Option<&'a Map<String, Value>>,
    /// The prompt's data from that round.
    pub round_state: Option<&'a Value>,
}

impl PromptRound<'_> {
    /// The answer to one input request of the previous round.
    pub fn response(&self, key: &str) -> Option<ElicitResult> {
        self.round_state?;
        crate::json::from_value_ref(self.input_responses?.get(key)?).ok()
    }
}

/// How a prompt answers one round.
pub enum PromptPlan {
    Messages(PromptResult),
    /// Ask for input first (core multi round-trip): the client answers the
    /// requests and asks again with the signed `round_state`.
    InputRequired {
        requests: InputRequests,
        round_state: Value,
    },
}

/// A prompt.
pub trait Prompt: Send + Sync + 'static {
    fn describe(&self) -> PromptInfo;

    /// The messages for `args`. The server has checked that every required
    /// argument is present; an error is a sentence for the client (-32602).
    fn get(&self, args: &Vars) -> Result<PromptResult, String>;

    /// One round of a prompt that may ask for input first; by default
    /// [`Prompt::get`].
    fn get_rounds(&self, args: &Vars, _round: &PromptRound<'_>) -> Result<PromptPlan, String> {
        self.get(args).map(PromptPlan::Messages)
    }

    /// Values for `argument` that start with `prefix`; `context` holds the
    /// arguments the client already chose.
    fn complete(&self, _argument: &str, _prefix: &str, _context: &Vars) -> Vec<String> {
        Vec::new()
    }
}

/// A prompt whose arguments are a serde type. Prompt arguments are strings:
/// a field of a number or boolean type (`u32`, `Option<bool>`) is read from
/// its text, and one that does not read as one is -32602. Its arguments, their
/// descriptions (the fields' doc comments) and which are required are
/// generated from the type (listed required first, each group by name);
/// register it with [`typed_prompt`].
///
/// ```
/// use mcp_tasks_edge::prompts::{PromptMessage, TypedPrompt, typed_prompt};
/// use mcp_tasks_edge::protocol::content::Content;
/// use mcp_tasks_edge::tools::ToolSet;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Args {
///     /// The language of the code.
///     language: String,
///     /// What to look at first.
///     focus: Option<String>,
/// }
///
/// struct Review;
/// impl TypedPrompt for Review {
///     type Args = Args;
///     const NAME: &'static str = "review";
///     const DESCRIPTION: &'static str = "Asks for a code review.";
///     fn messages(&self, args: Args) -> Result<Vec<PromptMessage>, String> {
///         let focus = args.focus.unwrap_or_else(|| "correctness".into());
///         Ok(vec![PromptMessage::user(Content::text(format!(
///             "Review this {} code, {focus} first.", args.language
///         )))])
///     }
/// }
///
/// let set = ToolSet::empty().with_prompt(typed_prompt(Review));
/// let (info, _) = set.prompt("review").unwrap();
/// assert_eq!(info.arguments[0].name, "language");
/// assert!(info.arguments[0].required && !info.arguments[1].required);
/// ```
pub trait TypedPrompt: Send + Sync + 'static {
    type Args: DeserializeOwned + JsonSchema;
    const NAME: &'static str;
    const TITLE: Option<&'static str> = None;
    const DESCRIPTION: &'static str;

    /// The messages; an error is a sentence for the client (-32602).
    fn messages(&self, args: Self::Args) -> Result<Vec<PromptMessage>, String>;

    /// Values for `argument` that start with `prefix`.
    fn complete(&self, _argument: &str, _prefix: &str, _context: &Vars) -> Vec<String> {
        Vec::new()
    }
}

/// Whether a property's schema asks for a number or a boolean (alone, or
/// beside `null` for an `Option`).
fn wants_scalar(property: &Value) -> bool {
    let scalar = |t: &Value| matches!(t.as_str(), Some("integer" | "number" | "boolean"));
    match property.get("type") {
        Some(Value::Array(types)) => types.iter().any(scalar),
        Some(t) => scalar(t),
        None => false,
    }
}

/// Registers a [`TypedPrompt`].
pub fn typed_prompt<P: TypedPrompt>(prompt: P) -> impl Prompt {
    TypedAdapter {
        prompt,
        schema: crate::schema::schema_of::<P::Args>(),
    }
}

/// A typed prompt, with its arguments' schema generated once.
struct TypedAdapter<P> {
    prompt: P,
    schema: Value,
}

impl<P: TypedPrompt> Prompt for TypedAdapter<P> {
    fn describe(&self) -> PromptInfo {
        let schema = &self.schema;
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut arguments: Vec<PromptArgument> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|props| {
                props
                    .iter()
                    .map(|(name, p)| PromptArgument {
                        name: name.clone(),
                        description: p
                            .get("description")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                        required: required.contains(&name.as_str()),
                    })
                    .collect()
            })
            .unwrap_or_default();
        // Required first; within each group, by name (the schema's order).
        arguments.sort_by_key(|a| !a.required);
        PromptInfo {
            name: P::NAME.to_owned(),
            title: P::TITLE.map(str::to_owned),
            description: Some(P::DESCRIPTION.to_owned()),
            arguments,
        }
    }

    fn get(&self, args: &Vars) -> Result<PromptResult, String> {
        // Prompt arguments arrive as strings: a field of a number or
        // boolean type is read from its text (`"3"` for a `u32`).
        let props = self.schema.get("properties").and_then(Value::as_object);
        let object: Map<String, Value> = args
            .iter()
            .map(|(k, v)| {
                let text = || Value::from(v.as_str());
                let value = match props.and_then(|p| p.get(k)) {
                    Some(p) if wants_scalar(p) => crate::json::from_str::<Value>(v)
                        .ok()
                        .filter(|x| x.is_number() || x.is_boolean())
                        .unwrap_or_else(text),
                    _ => text(),
                };
                (k.clone(), value)
            })
            .collect();
        let typed: P::Args = crate::json::from_value(Value::Object(object))
            .map_err(|e| crate::error::truncate(&e.to_string(), 200).to_owned())?;
        self.prompt.messages(typed).map(PromptResult::new)
    }

    fn complete(&self, argument: &str, prefix: &str, context: &Vars) -> Vec<String> {
        self.prompt.complete(argument, prefix, context)
    }
}
