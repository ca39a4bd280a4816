//! Resources, prompts, completions, content blocks and progress through the
//! core's HTTP function (2026-07-28), with the conformance fixtures.

use mcp_tasks_edge::block_on;
use mcp_tasks_edge::http::{HttpBody, Next};
use serde_json::{Value, json};

use crate::support::{Harness, standard_headers};

fn err(h: &Harness, method: &str, params: Value) -> Value {
    let (_, v) = h.send(method, params);
    v["error"].clone()
}

#[test]
fn resources_list_read_and_not_found() {
    let h = Harness::new();
    let list = h.ok("resources/list", json!({}));
    let uris: Vec<_> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(uris, ["test://static-text", "test://static-binary"]);
    assert_eq!(list["ttlMs"], 300_000);
    assert_eq!(list["cacheScope"], "public");
    let text = h.ok("resources/read", json!({"uri": "test://static-text"}));
    assert_eq!(
        text["contents"][0]["text"],
        "This is the content of the static text resource."
    );
    assert_eq!(text["resultType"], "complete");
    assert_eq!(text["ttlMs"], 0, "reads are not cached");
    let blob = h.ok("resources/read", json!({"uri": "test://static-binary"}));
    assert_eq!(blob["contents"][0]["mimeType"], "image/png");
    assert!(
        blob["contents"][0]["blob"]
            .as_str()
            .unwrap()
            .starts_with("iVBOR")
    );
    let templates = h.ok("resources/templates/list", json!({}));
    assert_eq!(
        templates["resourceTemplates"][0]["uriTemplate"],
        "test://template/{id}/data"
    );
    let t = h.ok("resources/read", json!({"uri": "test://template/123/data"}));
    let body: Value = serde_json::from_str(t["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(body["id"], "123");
    assert_eq!(t["contents"][0]["uri"], "test://template/123/data");
    let e = err(&h, "resources/read", json!({"uri": "test://nope"}));
    assert_eq!(e["code"], -32602);
    assert_eq!(e["data"]["uri"], "test://nope");
    assert_eq!(
        err(&h, "resources/list", json!({"cursor": "x"}))["code"],
        -32602
    );
}

#[test]
fn prompts_get_checks_arguments() {
    let h = Harness::new();
    let list = h.ok("prompts/list", json!({}));
    let names: Vec<_> = list["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        names.contains(&"test_prompt_with_arguments".to_owned()),
        "{names:?}"
    );
    let args = &list["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "test_prompt_with_arguments")
        .unwrap()["arguments"];
    assert_eq!(
        args[0],
        json!({"name": "arg1", "description": "First test argument", "required": true})
    );
    let got = h.ok(
        "prompts/get",
        json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}}),
    );
    assert_eq!(
        got["messages"][0]["content"]["text"],
        "Prompt with arguments: arg1='a', arg2='b'"
    );
    assert_eq!(got["messages"][0]["role"], "user");
    let missing = err(
        &h,
        "prompts/get",
        json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "a"}}),
    );
    assert_eq!(missing["code"], -32602);
    assert!(missing["message"].as_str().unwrap().contains("arg2"));
    let not_string = err(
        &h,
        "prompts/get",
        json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": 1, "arg2": "b"}}),
    );
    assert_eq!(not_string["code"], -32602);
    assert_eq!(
        err(&h, "prompts/get", json!({"name": "nope"}))["code"],
        -32602
    );
    let image = h.ok("prompts/get", json!({"name": "test_prompt_with_image"}));
    assert_eq!(image["messages"][0]["content"]["type"], "image");
}

#[test]
fn completions_for_prompt_arguments_and_template_variables() {
    let h = Harness::new();
    let caps = h.ok("server/discover", json!({}))["capabilities"].clone();
    assert_eq!(caps["completions"], json!({}));
    let c = h.ok(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
               "argument": {"name": "arg1", "value": "test"}}),
    );
    assert_eq!(c["completion"]["values"], json!(["test", "testValue1"]));
    assert_eq!(c["completion"]["total"], 2);
    assert_eq!(c["completion"]["hasMore"], false);
    let t = h.ok(
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "test://template/{id}/data"},
               "argument": {"name": "id", "value": "1"}}),
    );
    assert_eq!(t["completion"]["values"], json!(["1", "123"]));
    let unknown = err(
        &h,
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "a", "value": ""}}),
    );
    assert_eq!(unknown["code"], -32602);
}

#[test]
fn content_blocks_of_every_kind() {
    let h = Harness::new();
    let r = h.ok(
        "tools/call",
        json!({"name": "test_multiple_content_types", "arguments": {}}),
    );
    let kinds: Vec<_> = r["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].clone())
        .collect();
    assert_eq!(kinds, [json!("text"), json!("image"), json!("resource")]);
    let a = h.ok(
        "tools/call",
        json!({"name": "test_audio_content", "arguments": {}}),
    );
    assert_eq!(a["content"][0]["mimeType"], "audio/wav");
}

#[test]
fn progress_goes_on_an_sse_response_before_the_result() {
    let h = Harness::new();
    let mut msg = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "test_tool_with_progress", "arguments": {}}});
    msg["params"]["_meta"] = mcp_tasks_edge::testing::meta(json!({}));
    msg["params"]["_meta"]["progressToken"] = json!(7);
    let headers = standard_headers(&msg);
    let refs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let r = h.post_raw(&refs, &serde_json::to_vec(&msg).unwrap());
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let HttpBody::Events(mut stream) = r.body else {
        panic!("not a stream")
    };
    let mut frames = Vec::new();
    while let Next::Send(b) = block_on(stream.next(&h.server, h.now.get())) {
        let text = String::from_utf8(b).unwrap();
        frames.push(
            serde_json::from_str::<Value>(text.strip_prefix("data: ").unwrap().trim()).unwrap(),
        );
    }
    let progress: Vec<_> = frames[..3]
        .iter()
        .map(|f| {
            (
                f["params"]["progressToken"].clone(),
                f["params"]["progress"].clone(),
            )
        })
        .collect();
    assert_eq!(
        progress,
        [
            (json!(7), json!(0.0)),
            (json!(7), json!(50.0)),
            (json!(7), json!(100.0))
        ]
    );
    assert_eq!(frames[3]["id"], 9);
    assert_eq!(frames[3]["result"]["resultType"], "complete");
    // Without a token: plain JSON.
    let (status, v) = h.send(
        "tools/call",
        json!({"name": "test_tool_with_progress", "arguments": {}}),
    );
    assert_eq!(
        (status, v["result"]["content"][0]["type"].clone()),
        (200, json!("text"))
    );
}

#[test]
fn mirrored_argument_headers_must_match_the_body() {
    let h = Harness::new();
    // A test_custom_headers call with `arguments` and the `Mcp-Param-*`
    // headers `params` (name suffix, value).
    let send = |id: u64, args: Value, params: &[(&str, &str)]| -> (u16, Value) {
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "test_custom_headers", "arguments": args}});
        msg["params"]["_meta"] = mcp_tasks_edge::testing::meta(json!({}));
        let mut headers = standard_headers(&msg);
        for (name, value) in params {
            headers.push((format!("mcp-param-{name}"), (*value).to_owned()));
        }
        let refs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let r = h.post_raw(&refs, &serde_json::to_vec(&msg).unwrap());
        (r.status, crate::support::body_json(&r))
    };
    let call = |region: Option<&str>, header: Option<&str>| -> (u16, Value) {
        let mut args = json!({});
        if let Some(r) = region {
            args["region"] = json!(r);
        }
        let params: Vec<(&str, &str)> = header.map(|v| ("region", v)).into_iter().collect();
        send(1, args, &params)
    };
    let ok = |(status, v): (u16, Value)| status == 200 && v.get("result").is_some();
    let mismatch = |(status, v): (u16, Value)| status == 400 && v["error"]["code"] == -32020;
    assert!(ok(call(Some("eu"), Some("eu"))));
    assert!(
        ok(call(Some("eu"), Some("  eu "))),
        "whitespace around the value"
    );
    assert!(ok(call(Some("Hello"), Some("=?base64?SGVsbG8=?="))));
    assert!(
        ok(call(Some("=?base64?SGVsbG8="), Some("=?base64?SGVsbG8="))),
        "no suffix: literal"
    );
    assert!(ok(call(None, None)));
    assert!(mismatch(call(Some("eu"), Some("us"))));
    assert!(mismatch(call(Some("eu"), None)), "missing header");
    assert!(
        mismatch(call(None, Some("eu"))),
        "header without its argument"
    );
    assert!(
        mismatch(call(Some("Hello"), Some("=?base64?SGVsbG8?="))),
        "bad padding"
    );
    assert!(
        mismatch(call(Some("Hello"), Some("=?base64?SGVs!!!bG8=?="))),
        "bad alphabet"
    );

    // An integer argument is compared by its value.
    let priority = |value: Value, header: &str| -> (u16, Value) {
        let args = json!({"region": "eu", "priority": value});
        send(2, args, &[("region", "eu"), ("priority", header)])
    };
    assert!(ok(priority(json!(3), "3")));
    assert!(ok(priority(json!(3.0), "3")), "3.0 in the body is 3");
    assert!(ok(priority(json!(42), "42.0")), "42.0 in the header is 42");
    assert!(ok(priority(json!(-7), "=?base64?LTc=?=")));
    assert!(mismatch(priority(json!(3), "4")));
    assert!(mismatch(priority(json!(3), "3x")));
    assert!(mismatch(priority(json!(3), "three")));
}

/// A typed prompt with a number and an optional boolean field.
struct Countdown;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct CountdownArgs {
    /// Where to start.
    from: u32,
    /// Shout it.
    loud: Option<bool>,
}

impl mcp_tasks_edge::prompts::TypedPrompt for Countdown {
    type Args = CountdownArgs;
    const NAME: &'static str = "countdown";
    const DESCRIPTION: &'static str = "Counts down.";
    fn messages(
        &self,
        args: CountdownArgs,
    ) -> Result<Vec<mcp_tasks_edge::prompts::PromptMessage>, String> {
        let text = format!("from {}, loud: {:?}", args.from, args.loud);
        Ok(vec![mcp_tasks_edge::prompts::PromptMessage::user(
            mcp_tasks_edge::protocol::content::Content::text(text),
        )])
    }
}

/// Prompt arguments arrive as strings: a typed prompt's number and boolean
/// fields are read from their text, and text that is not one is -32602.
#[test]
fn a_typed_prompt_reads_numbers_and_booleans_from_their_text() {
    let h = Harness::with_tools(
        mcp_tasks_edge::tools::ToolSet::empty()
            .with_prompt(mcp_tasks_edge::prompts::typed_prompt(Countdown)),
    );
    let get = |args: Value| {
        h.send(
            "prompts/get",
            json!({"name": "countdown", "arguments": args}),
        )
    };
    let (_, v) = get(json!({"from": "3", "loud": "true"}));
    assert_eq!(
        v["result"]["messages"][0]["content"]["text"], "from 3, loud: Some(true)",
        "{v}"
    );
    let (_, v) = get(json!({"from": "10"}));
    assert_eq!(
        v["result"]["messages"][0]["content"]["text"], "from 10, loud: None",
        "{v}"
    );
    for bad in [
        json!({"from": "three"}),
        json!({"from": "-1"}),
        json!({"from": "3", "loud": "yes"}),
    ] {
        let (_, v) = get(bad.clone());
        assert_eq!(v["error"]["code"], -32602, "{bad}: {v}");
    }
}

/// A chart's numbers, as a typed tool's structured output.
#[derive(serde::Serialize, schemars::JsonSchema)]
struct ChartOutput {
    points: u32,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct ChartArgs {
    points: u32,
}

struct Chart;

impl mcp_tasks_edge::tools::SyncTool for Chart {
    type Args = ChartArgs;
    type Output = ChartOutput;
    const NAME: &'static str = "chart";
    const DESCRIPTION: &'static str = "Draws a chart.";
    fn run(&self, args: ChartArgs) -> Result<ChartOutput, String> {
        Ok(ChartOutput {
            points: args.points,
        })
    }
    fn content(&self, output: &ChartOutput) -> Vec<mcp_tasks_edge::protocol::tools::Content> {
        use mcp_tasks_edge::protocol::tools::Content;
        vec![
            Content::image(&[0x89, b'P', b'N', b'G'], "image/png"),
            Content::resource_link(format!("charts://{}", output.points), "the chart"),
        ]
    }
}

struct SlowChart;

impl mcp_tasks_edge::tools::TaskTool for SlowChart {
    type Args = ChartArgs;
    type State = ();
    type Output = ChartOutput;
    const NAME: &'static str = "slow_chart";
    const DESCRIPTION: &'static str = "Draws a chart, as a task.";
    fn start(&self, _: &ChartArgs) -> mcp_tasks_edge::tools::Start<()> {
        mcp_tasks_edge::tools::Start::now(())
    }
    async fn step(
        &self,
        args: ChartArgs,
        _: (),
        _: &mcp_tasks_edge::tools::StepContext<'_>,
    ) -> mcp_tasks_edge::tools::Step<(), ChartOutput> {
        mcp_tasks_edge::tools::Step::Done(ChartOutput {
            points: args.points,
        })
    }
    fn content(&self, _: &ChartOutput) -> Vec<mcp_tasks_edge::protocol::tools::Content> {
        vec![mcp_tasks_edge::protocol::tools::Content::audio(
            b"RIFF",
            "audio/wav",
        )]
    }
}

/// A typed tool answers with the content blocks its `content` gives after
/// its structured content (which still matches its `outputSchema`), at
/// once or as a task's result.
#[test]
fn typed_tools_answer_with_more_content_blocks() {
    use mcp_tasks_edge::tools::{ToolSet, sync_tool, task_tool};
    let h = Harness::with_tools(ToolSet::from_tools(vec![
        sync_tool(Chart),
        task_tool(SlowChart),
    ]));
    let r = h.ok(
        "tools/call",
        json!({"name": "chart", "arguments": {"points": 3}}),
    );
    assert_eq!(r["structuredContent"], json!({"points": 3}), "{r}");
    let kinds: Vec<&str> = r["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["text", "image", "resource_link"], "{r}");
    assert_eq!(r["content"][1]["mimeType"], "image/png");
    assert_eq!(r["content"][2]["uri"], "charts://3");
    let task = h.start("slow_chart", json!({"points": 5}));
    let t = h.run_until_settled(&task, 100, 5);
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(
        t["result"]["structuredContent"],
        json!({"points": 5}),
        "{t}"
    );
    assert_eq!(t["result"]["content"][1]["type"], "audio", "{t}");
}
