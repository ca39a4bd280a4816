//! Resources, prompts and completions: the requests both protocol paths
//! answer the same way, as plain result objects (each path adds its own
//! envelope members: `resultType`, cache hints).

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::error::{RpcError, truncate};
use crate::prompts::{PromptPlan, PromptResult, PromptRound};
use crate::protocol::content::ResourceContents;
use crate::resources::{Vars, match_template};
use crate::tools::ToolSet;

/// Most completion values in one answer (the protocol's limit).
const MAX_COMPLETIONS: usize = 100;

/// Entries per page of `resources/list`, `resources/templates/list` and
/// `prompts/list`.
pub(crate) const PAGE: usize = 100;

/// One page of `items` after `cursor` (opaque to clients: the position of
/// the page, in a list whose order is fixed for a deployment), and the
/// cursor of the next page if there is one. A cursor this server did not
/// issue is -32602.
fn page<T>(items: Vec<T>, cursor: Option<&str>) -> Result<(Vec<T>, Option<String>), RpcError> {
    let start = match cursor {
        None => 0,
        Some(c) => crate::crypto::b64url_decode(c)
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|t| {
                // Only what `next` below writes: a page's first position,
                // in plain digits.
                t.strip_prefix("page:")
                    .and_then(|n| n.parse::<usize>().ok().filter(|v| v.to_string() == n))
            })
            .filter(|n| *n > 0 && *n < items.len() && *n % PAGE == 0)
            .ok_or_else(|| {
                RpcError::invalid_params("Invalid cursor: it was not issued by this server.")
            })?,
    };
    let total = items.len();
    let end = start.saturating_add(PAGE).min(total);
    let next = (end < total).then(|| crate::crypto::b64url(format!("page:{end}").as_bytes()));
    Ok((
        items.into_iter().skip(start).take(end - start).collect(),
        next,
    ))
}

/// A list result `{key: [...], "nextCursor"?}`.
fn listed<T: serde::Serialize>(key: &str, (items, next): (Vec<T>, Option<String>)) -> Value {
    let mut v = json!({ key: items });
    if let (Some(next), Value::Object(map)) = (next, &mut v) {
        map.insert("nextCursor".into(), Value::from(next));
    }
    v
}

/// The server capabilities the catalog offers with `tools`: `prompts`
/// where a prompt is registered, `resources` where a resource or a
/// template is, `completions` where either can be completed. Both
/// `server/discover` and the 2025-11-25 `initialize` advertise exactly
/// these, and [`offers`] serves exactly their methods.
pub(crate) fn capabilities(tools: &ToolSet) -> Map<String, Value> {
    let mut caps = Map::new();
    for capability in ["prompts", "resources", "completions"] {
        if offered(tools, capability) {
            caps.insert(capability.into(), json!({}));
        }
    }
    caps
}

/// Whether `tools` give the catalog capability named `capability`.
fn offered(tools: &ToolSet, capability: &str) -> bool {
    match capability {
        "prompts" => tools.prompts().next().is_some(),
        "resources" => tools.resources().next().is_some() || tools.templates().next().is_some(),
        "completions" => tools.has_completions(),
        _ => false,
    }
}

/// Whether `method`, a catalog method (prompts, resources, completion), is
/// behind a capability [`capabilities`] advertises for `tools`. One that is
/// not is answered -32601, as a method this server does not have.
pub(crate) fn offers(tools: &ToolSet, method: &str) -> bool {
    use crate::protocol::methods as m;
    let capability = match method {
        m::PROMPTS_LIST | m::PROMPTS_GET => "prompts",
        m::RESOURCES_LIST | m::RESOURCE_TEMPLATES_LIST | m::RESOURCES_READ => "resources",
        m::COMPLETION_COMPLETE => "completions",
        _ => return true,
    };
    offered(tools, capability)
}

#[derive(Deserialize)]
pub(crate) struct ListParams {
    #[serde(default)]
    pub cursor: Option<String>,
}

/// `resources/list`: `{"resources": [...], "nextCursor"?}`.
pub(crate) fn resources_list(set: &ToolSet, p: &ListParams) -> Result<Value, RpcError> {
    let all: Vec<_> = set.resources().map(|(info, _)| info).collect();
    Ok(listed("resources", page(all, p.cursor.as_deref())?))
}

/// `resources/templates/list`: `{"resourceTemplates": [...], "nextCursor"?}`.
pub(crate) fn templates_list(set: &ToolSet, p: &ListParams) -> Result<Value, RpcError> {
    let all: Vec<_> = set.templates().map(|(info, _)| info).collect();
    Ok(listed("resourceTemplates", page(all, p.cursor.as_deref())?))
}

#[derive(Deserialize)]
pub(crate) struct ReadParams {
    pub uri: String,
}

/// The resource-not-found error (SEP-2164): -32602 naming the URI.
pub(crate) fn resource_not_found(uri: &str) -> RpcError {
    RpcError::invalid_params(format!("Resource not found: {}", truncate(uri, 128)))
        .with_data(json!({ "uri": uri }))
}

fn read_failed(why: String) -> RpcError {
    RpcError::internal(format!(
        "The resource could not be read: {}",
        truncate(&why, 200)
    ))
}

/// `resources/read`: `{"contents": [...]}` from a fixed resource with that
/// URI, else the first template that matches it and has the resource.
pub(crate) fn resources_read(set: &ToolSet, p: &ReadParams) -> Result<Value, RpcError> {
    let contents: ResourceContents = match set.resources().find(|(info, _)| info.uri == p.uri) {
        Some((_, r)) => r.read().map_err(read_failed)?,
        None => {
            let mut found = None;
            for (info, t) in set.templates() {
                let Some(vars) = match_template(&info.uri_template, &p.uri) else {
                    continue;
                };
                if let Some(c) = t.read(&p.uri, &vars).map_err(read_failed)? {
                    found = Some(c);
                    break;
                }
            }
            found.ok_or_else(|| resource_not_found(&p.uri))?
        }
    };
    Ok(json!({ "contents": [contents] }))
}

/// `prompts/list`: `{"prompts": [...], "nextCursor"?}`.
pub(crate) fn prompts_list(set: &ToolSet, p: &ListParams) -> Result<Value, RpcError> {
    let all: Vec<_> = set.prompts().map(|(info, _)| info).collect();
    Ok(listed("prompts", page(all, p.cursor.as_deref())?))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GetPromptParams {
    pub name: String,
    #[serde(default)]
    pub arguments: Option<Map<String, Value>>,
    #[serde(default)]
    pub input_responses: Option<Map<String, Value>>,
    #[serde(default)]
    pub request_state: Option<String>,
}

/// Arguments as strings; anything else is -32602.
fn string_args(args: Option<&Map<String, Value>>) -> Result<Vars, RpcError> {
    let mut vars = Vars::new();
    for (k, v) in args.into_iter().flatten() {
        let Value::String(s) = v else {
            return Err(RpcError::invalid_params(format!(
                "Invalid argument {}: arguments are strings.",
                truncate(k, 64)
            )));
        };
        vars.insert(k.clone(), s.clone());
    }
    Ok(vars)
}

/// `prompts/get`: `{"description"?, "messages": [...]}`, or the prompt's
/// input requests for a multi round-trip answer (`round` is `None` where the
/// protocol has none: the 2025-11-25 path).
pub(crate) fn prompts_get(
    set: &ToolSet,
    p: &GetPromptParams,
    round: Option<&PromptRound<'_>>,
) -> Result<PromptPlan, RpcError> {
    let (info, prompt) = set.prompt(&p.name).ok_or_else(|| {
        RpcError::invalid_params(format!("Unknown prompt: {}", truncate(&p.name, 64)))
    })?;
    let args = string_args(p.arguments.as_ref())?;
    for a in &info.arguments {
        if a.required && !args.contains_key(&a.name) {
            return Err(RpcError::invalid_params(format!(
                "Missing required argument: {}",
                truncate(&a.name, 64)
            )));
        }
    }
    let invalid = |why: String| {
        RpcError::invalid_params(format!("Invalid arguments: {}", truncate(&why, 200)))
    };
    match round {
        Some(round) => prompt.get_rounds(&args, round).map_err(invalid),
        None => prompt.get(&args).map(PromptPlan::Messages).map_err(invalid),
    }
}

/// A prompt's messages as a result object.
pub(crate) fn prompt_result(result: &PromptResult) -> Result<Value, RpcError> {
    serde_json::to_value(result)
        .map_err(|_| RpcError::internal("Internal error: the prompt could not be encoded."))
}

#[derive(Deserialize)]
pub(crate) struct CompleteParams {
    #[serde(rename = "ref")]
    pub reference: Reference,
    pub argument: CompleteArgument,
    #[serde(default)]
    pub context: Option<CompleteContext>,
}

/// What a completion is for: a prompt by name or a resource template by URI.
#[derive(Deserialize)]
#[serde(try_from = "ReferenceFields")]
pub(crate) enum Reference {
    Prompt { name: String },
    Resource { uri: String },
}

#[derive(Deserialize)]
enum ReferenceKind {
    #[serde(rename = "ref/prompt")]
    Prompt,
    #[serde(rename = "ref/resource")]
    Resource,
}

/// A reference as it is read (flat, so nothing is buffered).
#[derive(Deserialize)]
struct ReferenceFields {
    #[serde(rename = "type")]
    kind: ReferenceKind,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    uri: Option<String>,
}

impl TryFrom<ReferenceFields> for Reference {
    type Error = &'static str;

    fn try_from(f: ReferenceFields) -> Result<Self, Self::Error> {
        Ok(match f.kind {
            ReferenceKind::Prompt => Reference::Prompt {
                name: f.name.ok_or("missing field `name`")?,
            },
            ReferenceKind::Resource => Reference::Resource {
                uri: f.uri.ok_or("missing field `uri`")?,
            },
        })
    }
}

#[derive(Deserialize)]
pub(crate) struct CompleteArgument {
    pub name: String,
    pub value: String,
}

#[derive(Deserialize)]
pub(crate) struct CompleteContext {
    #[serde(default)]
    pub arguments: Option<Map<String, Value>>,
}

/// `completion/complete`: `{"completion": {"values", "total", "hasMore"}}`
/// for a prompt's argument or a resource template's variable.
pub(crate) fn complete(set: &ToolSet, p: &CompleteParams) -> Result<Value, RpcError> {
    let context = string_args(p.context.as_ref().and_then(|c| c.arguments.as_ref()))?;
    let (name, prefix) = (&p.argument.name, &p.argument.value);
    let mut values = match &p.reference {
        Reference::Prompt { name: prompt } => set
            .prompt(prompt)
            .ok_or_else(|| {
                RpcError::invalid_params(format!("Unknown prompt: {}", truncate(prompt, 64)))
            })?
            .1
            .complete(name, prefix, &context),
        Reference::Resource { uri } => set
            .templates()
            .find(|(info, _)| info.uri_template == *uri)
            .ok_or_else(|| resource_not_found(uri))?
            .1
            .complete(name, prefix, &context),
    };
    let total = values.len();
    values.truncate(MAX_COMPLETIONS);
    Ok(json!({ "completion": {
        "values": values,
        "total": total,
        "hasMore": total > MAX_COMPLETIONS,
    }}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::text_resource;

    #[test]
    fn long_lists_come_in_pages_with_opaque_cursors() {
        let set = (0..250).fold(ToolSet::empty(), |set, i| {
            set.with_resource(text_resource(format!("r://{i:03}"), "r", "text/plain", "x"))
        });
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let v = resources_list(
                &set,
                &ListParams {
                    cursor: cursor.clone(),
                },
            )
            .unwrap();
            let page = v["resources"].as_array().unwrap();
            assert!(page.len() <= PAGE);
            seen.extend(page.iter().map(|r| r["uri"].as_str().unwrap().to_owned()));
            match v.get("nextCursor").and_then(Value::as_str) {
                Some(c) => cursor = Some(c.to_owned()),
                None => break,
            }
        }
        let want: Vec<String> = (0..250).map(|i| format!("r://{i:03}")).collect();
        assert_eq!(seen, want);
        let never_issued =
            ["page:50", "page:+100", "page:0100"].map(|t| crate::crypto::b64url(t.as_bytes()));
        for bad in ["x", "cGFnZTow", "cGFnZTo5OTk"]
            .into_iter()
            .chain(never_issued.iter().map(String::as_str))
        {
            let e = resources_list(
                &set,
                &ListParams {
                    cursor: Some(bad.into()),
                },
            )
            .unwrap_err();
            assert_eq!(e.code, -32602, "{bad}");
        }
        // A short list has no cursor.
        let one = ToolSet::empty().with_resource(text_resource("a://", "a", "t", "x"));
        assert!(
            resources_list(&one, &ListParams { cursor: None })
                .unwrap()
                .get("nextCursor")
                .is_none()
        );
    }
}
