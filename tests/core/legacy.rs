//! The 2025-11-25 adapter through the core's HTTP function: initialize and
//! sessions, tools, experimental tasks with input over `tasks/result`, the
//! answer routing, listing, and the rule that keeps modern requests modern.

use mcp_tasks_edge::block_on;
use mcp_tasks_edge::http::{EventStream, HttpBody, HttpResponse, Next};
use serde_json::{Value, json};

use crate::support::{Harness, body_json, owner};

const V: &str = "2025-11-25";

/// A 2025-11-25 client over one harness: its session and next request id.
struct Legacy<'a> {
    h: &'a Harness,
    session: Option<String>,
    next: i64,
    version: &'static str,
}

impl<'a> Legacy<'a> {
    fn connect(h: &'a Harness, capabilities: Value) -> Self {
        Self::connect_as(h, V, capabilities)
    }

    /// A client of protocol `version` (2025-03-26 and later).
    fn connect_as(h: &'a Harness, version: &'static str, capabilities: Value) -> Self {
        let mut c = Legacy {
            h,
            session: None,
            next: 1,
            version,
        };
        let r = c.raw(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": capabilities,
                "clientInfo": {"name": "legacy-test", "version": "1"}}}),
            false,
        );
        assert_eq!(r.status, 200);
        let v = body_json(&r);
        assert_eq!(v["result"]["protocolVersion"], version, "{v}");
        c.session = Some(r.header("mcp-session-id").expect("a session").to_owned());
        let r = c.raw(
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            true,
        );
        assert_eq!(r.status, 202);
        c
    }

    fn raw(&self, msg: &Value, with_headers: bool) -> HttpResponse {
        let mut headers = vec![("content-type", "application/json")];
        if with_headers {
            headers.push(("mcp-protocol-version", self.version));
            if let Some(s) = &self.session {
                headers.push(("mcp-session-id", s.as_str()));
            }
        }
        self.h.post_raw(&headers, &serde_json::to_vec(msg).unwrap())
    }

    fn send(&mut self, method: &str, params: Value) -> HttpResponse {
        let id = self.next;
        self.next += 1;
        self.raw(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            true,
        )
    }

    fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.send(method, params);
        assert_eq!(r.status, 200);
        let v = body_json(&r);
        assert!(v.get("error").is_none(), "{method}: {v}");
        v["result"].clone()
    }
}

/// Every frame the stream has now (until it waits or ends).
fn drain(h: &Harness, stream: &mut EventStream) -> (Vec<Value>, bool) {
    let mut frames = Vec::new();
    loop {
        match block_on(stream.next(&h.server, h.now.get())) {
            Next::Send(b) => {
                let text = String::from_utf8(b).unwrap();
                if let Some(data) = text.strip_prefix("data: ") {
                    frames.push(serde_json::from_str(data.trim()).unwrap());
                }
            }
            Next::Wait(_) => return (frames, false),
            Next::End => return (frames, true),
        }
    }
}

fn stream_of(r: HttpResponse) -> EventStream {
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    match r.body {
        HttpBody::Events(s) => s,
        _ => panic!("not a stream"),
    }
}

#[test]
fn initialize_negotiates_and_issues_a_bound_session() {
    let h = Harness::new();
    for (asked, got) in [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2025-11-25"),
    ] {
        let r = h.post_raw(
            &[("content-type", "application/json")],
            &serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": asked, "capabilities": {},
                "clientInfo": {"name": "x", "version": "1"}}}))
            .unwrap(),
        );
        let v = body_json(&r);
        assert_eq!(v["result"]["protocolVersion"], got, "{asked}");
        assert_eq!(v["result"]["serverInfo"]["name"], "mcp-tasks-edge");
        let tasks = &v["result"]["capabilities"]["tasks"];
        assert_eq!(
            tasks.is_object(),
            got == "2025-11-25",
            "tasks only from 2025-11-25: {v}"
        );
        if got == "2025-11-25" {
            assert_eq!(
                *tasks,
                json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
            );
        }
        let session = r.header("mcp-session-id").unwrap();
        assert!(session.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    }

    let c = Legacy::connect(&h, json!({}));
    let mut c2 = Legacy {
        h: &h,
        session: c.session.clone(),
        next: 1,
        version: V,
    };
    assert_eq!(c2.send("ping", json!({})).status, 200);
    assert_eq!(body_json(&c2.send("ping", json!({})))["result"], json!({}));

    // Tampered, or presented by another principal: 404.
    let mut tampered = c.session.clone().unwrap();
    tampered.push('x');
    c2.session = Some(tampered);
    assert_eq!(c2.send("ping", json!({})).status, 404);
    let bob = Harness::new().owned_by(owner("acme", "bob"));
    let c3 = Legacy {
        h: &bob,
        session: c.session.clone(),
        next: 1,
        version: V,
    };
    let r = c3.raw(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}), true);
    assert_eq!(r.status, 404);
}

/// `initialize` advertises the same catalog capabilities as
/// `server/discover`: none for a server with only tools, whose prompts,
/// resources and completion methods are then -32601.
#[test]
fn initialize_advertises_only_the_catalog_it_serves() {
    let h = Harness::with_tools(mcp_tasks_edge::demo::tools(0));
    let init = |h: &Harness| {
        let r = h.post_raw(
            &[("content-type", "application/json")],
            &serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": V, "capabilities": {},
                "clientInfo": {"name": "x", "version": "1"}}}))
            .unwrap(),
        );
        body_json(&r)["result"]["capabilities"].clone()
    };
    let caps = init(&h);
    for capability in ["prompts", "resources", "completions"] {
        assert!(caps.get(capability).is_none(), "{capability}: {caps}");
    }
    assert!(
        caps["tools"].is_object() && caps["tasks"].is_object(),
        "{caps}"
    );
    let mut c = Legacy::connect(&h, json!({}));
    for method in [
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
    ] {
        let v = body_json(&c.send(method, json!({})));
        assert_eq!(v["error"]["code"], -32601, "{method}: {v}");
    }
    let full = init(&Harness::new());
    for capability in ["prompts", "resources", "completions"] {
        assert!(full[capability].is_object(), "{capability}: {full}");
    }
}

#[test]
fn tools_list_and_synchronous_calls() {
    let h = Harness::new();
    let mut c = Legacy::connect(&h, json!({}));
    let tools = c.ok("tools/list", json!({}));
    let support = |name: &str| {
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["execution"]["taskSupport"].clone())
            .unwrap()
    };
    assert_eq!(support("greet"), "forbidden");
    assert_eq!(support("slow_compute"), "optional");
    assert_eq!(support("generate_report"), "required");

    let r = c.ok(
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "Ada"}}),
    );
    assert_eq!(r["content"][0]["text"], "Hello, Ada!");
    assert!(r.get("resultType").is_none(), "no 2026-07-28 members: {r}");
    let r = c.ok("tools/call", json!({"name": "test_error_handling"}));
    assert_eq!(r["isError"], true);

    // A task-required tool called without a task: -32601, as the spec says.
    let v = body_json(&c.send(
        "tools/call",
        json!({"name": "generate_report", "arguments": {"size": "small"}}),
    ));
    assert_eq!(v["error"]["code"], -32601);
    // A task-forbidden tool called as a task: -32601 too (the spec's SHOULD).
    let v = body_json(&c.send(
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "Ada"}, "task": {}}),
    ));
    assert_eq!(v["error"]["code"], -32601, "{v}");
}

/// A version before 2025-11-25 has no tasks, so no task support: its call
/// of a task-only tool is held open until the task ends, as a call of any
/// other task tool is, rather than refused for want of `params.task`.
#[test]
fn a_client_without_tasks_calls_a_task_only_tool_and_waits_for_it() {
    let h = Harness::new();
    let mut c = Legacy::connect_as(&h, "2025-06-18", json!({}));
    let mut stream = stream_of(c.send(
        "tools/call",
        json!({"name": "failing_job", "arguments": {}}),
    ));
    let (frames, ended) = drain(&h, &mut stream);
    assert!(!ended && frames.is_empty(), "{frames:?}");
    h.advance(1_500);
    h.tick();
    let (frames, ended) = drain(&h, &mut stream);
    assert!(ended);
    let last = frames.last().unwrap();
    assert_eq!(last["id"], 1, "{last}");
    assert_eq!(last["result"]["isError"], true, "{last}");
}

/// A held call whose task has nothing to send for a while is kept alive
/// from the start, as any stream is once it has sent something: proxies
/// and HTTP clients with idle timeouts do not cut it.
#[test]
fn a_held_call_is_kept_alive_before_its_first_frame() {
    let h = Harness::new();
    let mut c = Legacy::connect_as(&h, "2025-06-18", json!({}));
    let mut stream = stream_of(c.send(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 600}}),
    ));
    let (frames, ended) = drain(&h, &mut stream);
    assert!(!ended && frames.is_empty(), "{frames:?}");
    h.advance(16_000);
    let Next::Send(b) = block_on(stream.next(&h.server, h.now.get())) else {
        panic!("no keep-alive before the first frame")
    };
    assert_eq!(b, mcp_tasks_edge::http::KEEP_ALIVE);
}

/// The input requests of a held call (a task tool called without
/// `params.task`) do not name its task: the client made no task, and one
/// that keeps a task store would refuse a request naming an unknown one.
#[test]
fn a_held_calls_input_requests_name_no_task() {
    let h = Harness::new();
    let mut c = Legacy::connect_as(&h, "2025-06-18", json!({"elicitation": {}}));
    let mut stream = stream_of(c.send(
        "tools/call",
        json!({"name": "confirm_delete", "arguments": {"filename": "f"}}),
    ));
    h.tick();
    h.advance(1_000);
    let (frames, _) = drain(&h, &mut stream);
    let asked = frames
        .iter()
        .find(|f| f["method"] == "elicitation/create")
        .unwrap_or_else(|| panic!("no request: {frames:?}"));
    assert!(
        asked["params"]["_meta"]
            .get("io.modelcontextprotocol/related-task")
            .is_none(),
        "{asked}"
    );
}

/// An unknown tool is -32602 whether or not the call asks for a task (not
/// the -32601 of a known tool that does not run as one).
#[test]
fn an_unknown_tool_is_unknown_with_params_task_too() {
    let h = Harness::new();
    let mut c = Legacy::connect(&h, json!({}));
    let plain = body_json(&c.send("tools/call", json!({"name": "nope", "arguments": {}})));
    let tasked = body_json(&c.send(
        "tools/call",
        json!({"name": "nope", "arguments": {}, "task": {}}),
    ));
    assert_eq!(plain["error"]["code"], -32602, "{plain}");
    assert_eq!(tasked["error"], plain["error"], "{tasked}");
}

#[test]
fn a_task_asks_for_input_on_the_result_stream_and_finishes() {
    let h = Harness::new();
    let mut c = Legacy::connect(&h, json!({"elicitation": {"form": {}}}));
    let created = c.ok(
        "tools/call",
        json!({"name": "generate_report", "arguments": {"size": "small"}, "task": {"ttl": 600000}}),
    );
    let task = &created["task"];
    let id = task["taskId"].as_str().unwrap().to_owned();
    assert_eq!(task["status"], "working");
    assert_eq!(
        task["ttl"], 600000,
        "the requested ttl, within the server's"
    );
    assert!(task["pollInterval"].is_u64() && task["createdAt"].is_string());

    // Durable before the answer: a modern read sees it too.
    assert_eq!(h.status(&id), "working");

    // The result is held open; the step asks for approval on it.
    let mut stream = stream_of(c.send("tasks/result", json!({"taskId": id})));
    let (frames, ended) = drain(&h, &mut stream);
    assert!(
        !ended && frames.iter().all(|f| f.get("id").is_none()),
        "{frames:?}"
    );
    h.advance(60_000);
    h.tick();
    assert_eq!(
        c.ok("tasks/get", json!({"taskId": id}))["status"],
        "input_required"
    );
    let (frames, ended) = drain(&h, &mut stream);
    assert!(!ended);
    let request = frames
        .iter()
        .find(|f| f["method"] == "elicitation/create")
        .unwrap_or_else(|| panic!("{frames:?}"));
    assert_eq!(
        request["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str()
    );
    let rid = request["id"].as_str().unwrap().to_owned();

    // Asked once per stream.
    assert!(
        drain(&h, &mut stream)
            .0
            .iter()
            .all(|f| f.get("id").is_none())
    );

    // Forged and foreign answers are refused; nothing changes.
    let answer = |rid: &str| json!({"jsonrpc": "2.0", "id": rid, "result": {"action": "accept", "content": {"approved": true}}});
    let forged = rid.replacen(".t.", ".r.", 1);
    assert_eq!(c.raw(&answer(&forged), true).status, 400);
    assert_eq!(c.raw(&answer("7"), true).status, 400);
    let bob = Harness::over(h.store.clone(), 2).owned_by(owner("acme", "bob"));
    let bob_post = bob.post_raw(
        &[
            ("content-type", "application/json"),
            ("mcp-protocol-version", V),
        ],
        &serde_json::to_vec(&answer(&rid)).unwrap(),
    );
    assert_eq!(bob_post.status, 400);
    assert_eq!(h.status(&id), "input_required");

    // The real answer: 202, and the task moves on: its next step is
    // replayable, so it ran inside the answer's request.
    assert_eq!(c.raw(&answer(&rid), true).status, 202);
    assert_eq!(h.status(&id), "completed");
    // A replay is ignored, as tasks/update ignores a key already answered.
    assert_eq!(c.raw(&answer(&rid), true).status, 202);
    h.tick();
    let (frames, ended) = drain(&h, &mut stream);
    assert!(ended);
    let last = frames.last().unwrap();
    assert_eq!(last["id"], 2, "the tasks/result request's id");
    assert_eq!(
        last["result"]["content"][0]["text"],
        "Generated small report with approved outline."
    );
    assert_eq!(
        last["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str()
    );

    // Once terminal, tasks/result answers at once.
    let r = c.ok("tasks/result", json!({"taskId": id}));
    assert_eq!(r["structuredContent"]["approved"], true);
    // Cancelling a finished task is refused.
    let v = body_json(&c.send("tasks/cancel", json!({"taskId": id})));
    assert_eq!(v["error"]["code"], -32602);
}

/// A key asked again after its answer (a declined first step, asked anew
/// in the next round) is sent again on the stream, with the new round's
/// id, instead of being taken for one already asked.
#[test]
fn a_request_asked_again_after_its_answer_is_sent_again() {
    let h = Harness::new();
    let mut c = Legacy::connect(&h, json!({"elicitation": {}}));
    let mut stream = stream_of(c.send(
        "tools/call",
        json!({"name": "test_input_required_result_multi_round", "arguments": {}}),
    ));
    let (frames, ended) = drain(&h, &mut stream);
    assert!(!ended);
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0]["method"], "elicitation/create");
    let first = frames[0]["id"].as_str().unwrap().to_owned();
    let decline = json!({"jsonrpc": "2.0", "id": first, "result": {"action": "decline"}});
    assert_eq!(c.raw(&decline, true).status, 202);
    h.advance(1_000);
    let (frames, ended) = drain(&h, &mut stream);
    assert!(!ended);
    let again: Vec<&Value> = frames
        .iter()
        .filter(|f| f["method"] == "elicitation/create")
        .collect();
    assert_eq!(again.len(), 1, "step 1 asked again: {frames:?}");
    assert_eq!(again[0]["params"]["message"], "Step 1: What is your name?");
    assert_ne!(again[0]["id"], first.as_str(), "the new round's request");
    let accept = json!({"jsonrpc": "2.0", "id": again[0]["id"],
        "result": {"action": "accept", "content": {"name": "Ada"}}});
    assert_eq!(c.raw(&accept, true).status, 202);
    h.advance(1_000);
    let (frames, _) = drain(&h, &mut stream);
    assert!(
        frames.iter().any(|f| f["method"] == "elicitation/create"
            && f["params"]["message"] == "Step 2: What is your favorite color?"),
        "{frames:?}"
    );
}

#[test]
fn a_synchronous_call_asks_for_input_on_its_own_stream() {
    let h = Harness::new();
    let mut c = Legacy::connect(&h, json!({"elicitation": {}, "sampling": {}}));
    let mut stream = stream_of(c.send(
        "tools/call",
        json!({"name": "test_elicitation", "arguments": {"message": "Who are you?"}}),
    ));
    let (frames, ended) = drain(&h, &mut stream);
    assert!(!ended);
    let request = &frames[0];
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["message"], "Who are you?");
    let rid = request["id"].as_str().unwrap();
    let bad = json!({"jsonrpc": "2.0", "id": rid, "result": {"action": "accept", "content": {"username": 5}}});
    assert_eq!(
        c.raw(&bad, true).status,
        400,
        "validated as tasks/update would"
    );
    let good = json!({"jsonrpc": "2.0", "id": rid, "result": {"action": "accept",
        "content": {"username": "ada", "email": "ada@example.com"}}});
    assert_eq!(c.raw(&good, true).status, 202);
    let (frames, ended) = drain(&h, &mut stream);
    assert!(ended);
    let text = frames.last().unwrap()["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains("ada@example.com"), "{text}");

    // Sampling the same way; the pending round left nothing behind.
    let mut stream = stream_of(c.send(
        "tools/call",
        json!({"name": "test_sampling", "arguments": {"prompt": "2+2?"}}),
    ));
    let (frames, _) = drain(&h, &mut stream);
    assert_eq!(frames[0]["method"], "sampling/createMessage");
    assert_eq!(frames[0]["params"]["maxTokens"], 100);
    let rid = frames[0]["id"].as_str().unwrap();
    let answer = json!({"jsonrpc": "2.0", "id": rid, "result": {"role": "assistant",
        "content": {"type": "text", "text": "4"}, "model": "m", "stopReason": "endTurn"}});
    assert_eq!(c.raw(&answer, true).status, 202);
    let (frames, ended) = drain(&h, &mut stream);
    assert!(ended);
    assert_eq!(
        frames.last().unwrap()["result"]["content"][0]["text"],
        "LLM response: 4"
    );

    // A user who rejects the sampling request (an error response): the
    // call ends with an error result at once, not at its time bound.
    let mut stream = stream_of(c.send(
        "tools/call",
        json!({"name": "test_sampling", "arguments": {"prompt": "2+2?"}}),
    ));
    let (frames, _) = drain(&h, &mut stream);
    let rid = frames[0]["id"].as_str().unwrap();
    let refusal = json!({"jsonrpc": "2.0", "id": rid,
        "error": {"code": -1, "message": "User rejected sampling request"}});
    assert_eq!(c.raw(&refusal, true).status, 202);
    h.advance(1_000);
    let (frames, ended) = drain(&h, &mut stream);
    assert!(ended, "{frames:?}");
    let last = frames.last().unwrap();
    assert_eq!(last["result"]["isError"], true, "{last}");
    assert_eq!(
        last["result"]["content"][0]["text"],
        "The client refused the sampling/createMessage request."
    );
}

/// A tool without arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

/// A task tool whose first step asks the client's model.
struct AskModel;

impl mcp_tasks_edge::tools::TaskTool for AskModel {
    type Args = NoArgs;
    type State = ();
    type Output = String;
    const NAME: &'static str = "ask_model";
    const DESCRIPTION: &'static str = "asks the client's model, then answers what it said";
    fn requirements(&self) -> mcp_tasks_edge::tools::Requirements {
        mcp_tasks_edge::tools::Requirements::new(mcp_tasks_edge::tools::TaskSupport::Required)
    }
    fn start(&self, _: &NoArgs) -> mcp_tasks_edge::tools::Start<()> {
        mcp_tasks_edge::tools::Start::now(())
    }
    async fn step(
        &self,
        _: NoArgs,
        _: (),
        cx: &mcp_tasks_edge::tools::StepContext<'_>,
    ) -> mcp_tasks_edge::tools::Step<(), String> {
        use mcp_tasks_edge::protocol::tools::InputRequest;
        match cx.answer_as::<Value>("model") {
            Some(answer) => mcp_tasks_edge::tools::Step::Done(answer.to_string()),
            None => mcp_tasks_edge::tools::Step::NeedInput {
                state: (),
                requests: [(
                    "model".to_owned(),
                    InputRequest {
                        method: "sampling/createMessage".to_owned(),
                        params: json!({"messages": [{"role": "user",
                            "content": {"type": "text", "text": "2+2?"}}], "maxTokens": 10}),
                    },
                )]
                .into(),
                message: None,
            },
        }
    }
}

/// A task whose client refuses its sampling request (an error response)
/// fails at once, with that said, instead of waiting for an answer that
/// will not come.
#[test]
fn a_task_whose_client_refuses_its_sampling_request_fails_at_once() {
    let h = Harness::new().with_server(|s| {
        mcp_tasks_edge::server::Server::new(
            s.store().clone(),
            crate::support::config(),
            crate::support::all_tools().with(mcp_tasks_edge::tools::task_tool(AskModel)),
            Box::new(mcp_tasks_edge::ids::SequentialIds::starting_at(7)),
        )
        .unwrap()
    });
    let mut c = Legacy::connect(&h, json!({"sampling": {}}));
    let created = c.ok(
        "tools/call",
        json!({"name": "ask_model", "arguments": {}, "task": {}}),
    );
    let id = created["task"]["taskId"].as_str().unwrap().to_owned();
    h.tick();
    assert_eq!(h.status(&id), "input_required");
    let mut stream = stream_of(c.send("tasks/result", json!({"taskId": id})));
    let (frames, ended) = drain(&h, &mut stream);
    assert!(!ended);
    let request = frames
        .iter()
        .find(|f| f["method"] == "sampling/createMessage")
        .unwrap_or_else(|| panic!("{frames:?}"));
    let rid = request["id"].as_str().unwrap();
    let refusal = json!({"jsonrpc": "2.0", "id": rid,
        "error": {"code": -1, "message": "User rejected sampling request"}});
    assert_eq!(c.raw(&refusal, true).status, 202);
    assert_eq!(h.status(&id), "failed");
    let task = c.ok("tasks/get", json!({"taskId": id}));
    assert_eq!(task["status"], "failed", "{task}");
    assert_eq!(
        task["statusMessage"],
        "The client refused the sampling/createMessage request."
    );
    let (frames, ended) = drain(&h, &mut stream);
    assert!(ended, "{frames:?}");
    let last = frames.last().unwrap();
    assert_eq!(
        last["error"]["message"], "The client refused the sampling/createMessage request.",
        "{last}"
    );
    // A second refusal of the same request changes nothing.
    assert_eq!(c.raw(&refusal, true).status, 202);
    assert_eq!(h.status(&id), "failed");
}

#[test]
fn a_task_call_answered_at_once_is_a_completed_task() {
    let h = Harness::new();
    let mut c = Legacy::connect(&h, json!({}));
    let created = c.ok(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "now"}, "task": {"ttl": 60000}}),
    );
    let task = &created["task"];
    assert_eq!(task["status"], "completed", "{created}");
    let id = task["taskId"].as_str().unwrap();
    // Created completed, in one write: no window in which a failed second
    // write would leave it `working` (and charged) until it expires.
    let entry = block_on(mcp_tasks_edge::store::Store::get(h.store.as_ref(), id))
        .unwrap()
        .unwrap();
    assert_eq!(entry.version, 1, "one write");
    let r = c.ok("tasks/result", json!({"taskId": id}));
    assert_eq!(r["content"][0]["text"], "now: finished after 0 seconds.");
    // Nothing is left due for a runner.
    assert_eq!(h.tick().due, 0);
}

/// 2025-11-25 counts a tool's error result as a failed task (2026-07-28
/// as a completed one): the same stored task reads `failed` through the
/// adapter, and `tasks/result` answers the error result itself.
#[test]
fn a_task_ended_by_a_tool_error_is_failed_for_a_2025_11_25_client() {
    let h = Harness::new();
    let mut c = Legacy::connect(&h, json!({}));
    let created = c.ok(
        "tools/call",
        json!({"name": "failing_job", "arguments": {}, "task": {}}),
    );
    let id = created["task"]["taskId"].as_str().unwrap().to_owned();
    h.advance(1_500);
    assert_eq!(h.tick().finished, 1);
    assert_eq!(h.status(&id), "completed", "as the core stores it");
    let task = c.ok("tasks/get", json!({"taskId": id}));
    assert_eq!(task["status"], "failed", "{task}");
    let listed = c.ok("tasks/list", json!({}));
    assert_eq!(listed["tasks"][0]["status"], "failed", "{listed}");
    let result = c.ok("tasks/result", json!({"taskId": id}));
    assert_eq!(result["isError"], true, "{result}");
}

#[test]
fn a_held_result_ends_with_32001_at_its_bound_and_the_task_goes_on() {
    let h = Harness::new();
    let mut c = Legacy::connect(&h, json!({}));
    let created = c.ok(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 3000, "label": "long"}, "task": {}}),
    );
    let id = created["task"]["taskId"].as_str().unwrap().to_owned();
    let mut stream = stream_of(c.send("tasks/result", json!({"taskId": id})));
    let (frames, ended) = drain(&h, &mut stream);
    assert!(!ended);
    assert_eq!(frames[0]["method"], "notifications/tasks/status");
    assert_eq!(frames[0]["params"]["status"], "working");
    h.advance(h.server.config().listen_max_ms as i64 + 1);
    let (frames, ended) = drain(&h, &mut stream);
    assert!(ended);
    let last = frames.last().unwrap();
    assert_eq!(last["error"]["code"], -32001, "{last}");
    assert_eq!(last["error"]["data"]["taskId"], id.as_str(), "{last}");
    assert_eq!(last["id"], 2);
    assert_eq!(h.status(&id), "working", "the task is untouched");
}

/// A call answered synchronously never gave its client the task's id: when
/// its time is up, the -32001 carries it, so the client can ask again.
#[test]
fn a_held_call_that_times_out_names_its_task() {
    let h = Harness::new();
    let mut c = Legacy::connect(&h, json!({}));
    let mut stream = stream_of(c.send(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 3000, "label": "held"}}),
    ));
    let (_, ended) = drain(&h, &mut stream);
    assert!(!ended);
    h.advance(h.server.config().listen_max_ms as i64 + 1);
    let (frames, ended) = drain(&h, &mut stream);
    assert!(ended);
    let last = frames.last().unwrap();
    assert_eq!(last["error"]["code"], -32001, "{last}");
    let id = last["error"]["data"]["taskId"]
        .as_str()
        .expect("the task's id");
    let task = c.ok("tasks/get", json!({"taskId": id}));
    assert_eq!(task["status"], "working", "{task}");
}

#[test]
fn progress_goes_before_the_result_when_asked_for() {
    let h = Harness::new();
    let mut c = Legacy::connect(&h, json!({}));
    let mut stream = stream_of(c.send(
        "tools/call",
        json!({"name": "test_tool_with_progress", "_meta": {"progressToken": "p-1"}}),
    ));
    let (frames, ended) = drain(&h, &mut stream);
    assert!(ended);
    let progress: Vec<_> = frames
        .iter()
        .filter(|f| f["method"] == "notifications/progress")
        .map(|f| {
            (
                f["params"]["progressToken"].clone(),
                f["params"]["progress"].clone(),
            )
        })
        .collect();
    assert_eq!(
        progress,
        vec![
            (json!("p-1"), json!(0.0)),
            (json!("p-1"), json!(50.0)),
            (json!("p-1"), json!(100.0))
        ]
    );
    assert_eq!(frames.last().unwrap()["id"], 1);
    // Without a token: one plain JSON answer.
    let r = c.send("tools/call", json!({"name": "test_tool_with_progress"}));
    assert_eq!(r.header("content-type"), Some("application/json"));
}

#[test]
fn an_unanswered_round_expires_and_is_purged() {
    let h = Harness::new();
    let mut c = Legacy::connect(&h, json!({"elicitation": {}}));
    let mut stream = stream_of(c.send("tools/call", json!({"name": "test_elicitation"})));
    let _ = drain(&h, &mut stream);
    drop(stream);
    h.advance(24 * 3_600_000);
    let report = h.tick();
    assert_eq!(report.purged, 1, "{report:?}");
    assert_eq!(
        block_on(mcp_tasks_edge::store::Store::next_due(h.store.as_ref())).unwrap(),
        None
    );
}

#[test]
fn tasks_list_pages_the_callers_tasks_only() {
    let h = Harness::new();
    let mut c = Legacy::connect(&h, json!({}));
    let mut ids = Vec::new();
    for _ in 0..55 {
        let r = c.ok(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 60, "label": "x"}, "task": {}}),
        );
        ids.push(r["task"]["taskId"].as_str().unwrap().to_owned());
        h.advance(1);
    }
    // Another principal's task is never listed.
    let bob = Harness::over(h.store.clone(), 2).owned_by(owner("acme", "bob"));
    let foreign = bob.start("slow_compute", json!({"seconds": 60}));

    let first = c.ok("tasks/list", json!({}));
    let page: Vec<_> = first["tasks"].as_array().unwrap().clone();
    assert_eq!(page.len(), 50);
    let cursor = first["nextCursor"].as_str().unwrap().to_owned();
    let second = c.ok("tasks/list", json!({"cursor": cursor}));
    assert!(second.get("nextCursor").is_none());
    let listed: Vec<String> = page
        .iter()
        .chain(second["tasks"].as_array().unwrap())
        .map(|t| t["taskId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, ids, "oldest first, each once");
    assert!(!listed.contains(&foreign));
    let v = body_json(&c.send("tasks/list", json!({"cursor": "!!"})));
    assert_eq!(v["error"]["code"], -32602);

    // Foreign ids read like unknown ones everywhere.
    for m in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let a = body_json(&c.send(m, json!({"taskId": foreign})));
        let b = body_json(&c.send(m, json!({"taskId": "tsk_nopeAAAAAAAAAAAAAAAAAA"})));
        assert_eq!(a["error"], b["error"], "{m}");
        assert_eq!(a["error"]["code"], -32602, "{m}");
    }

    // Cancel answers the task's status fields.
    let r = c.ok("tasks/cancel", json!({"taskId": ids[0]}));
    assert_eq!(r["taskId"], ids[0].as_str());
    assert_eq!(r["status"], "cancelled");
}

/// 2025-11-25: the task is `cancelled` before `tasks/cancel` answers, even
/// while a runner is stepping it, and stays cancelled when that step ends.
#[test]
fn a_cancel_during_a_running_step_answers_cancelled_and_holds() {
    use mcp_tasks_edge::tasks::runner::CommitOutcome;
    let h = Harness::new();
    let mut c = Legacy::connect(&h, json!({}));
    let r = c.ok(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 1}, "task": {}}),
    );
    let task = r["task"]["taskId"].as_str().unwrap().to_owned();
    h.advance(1_000);
    let now = h.now.get();
    // A runner holds the step's lease, and its step completes the task.
    let claim = crate::support::claimed(block_on(h.server.runner().claim(&task, now)).unwrap());
    let outcome = block_on(h.server.runner().step(&claim, now));
    let r = c.ok("tasks/cancel", json!({"taskId": task}));
    assert_eq!(r["status"], "cancelled", "{r}");
    assert_eq!(
        block_on(h.server.runner().commit(claim, outcome, now + 1)).unwrap(),
        CommitOutcome::Fenced
    );
    let r = c.ok("tasks/get", json!({"taskId": task}));
    assert_eq!(r["status"], "cancelled", "{r}");
    // Cancelling it again is refused: it is finished.
    let v = body_json(&c.send("tasks/cancel", json!({"taskId": task})));
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already cancelled"),
        "{v}"
    );
}

/// 2025-03-26 is the one revision with batches: each message is answered
/// as if it came alone, in a JSON array, or as SSE when a call streams.
#[test]
fn a_2025_03_26_session_sends_batches() {
    let h = Harness::new();
    let r = h.post_raw(
        &[("content-type", "application/json")],
        &serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-03-26", "capabilities": {},
            "clientInfo": {"name": "old", "version": "1"}}}))
        .unwrap(),
    );
    assert_eq!(body_json(&r)["result"]["protocolVersion"], "2025-03-26");
    let session = r.header("mcp-session-id").unwrap().to_owned();
    // A 2025-03-26 client sends no protocol version header.
    let post = |body: &Value| {
        h.post_raw(
            &[
                ("content-type", "application/json"),
                ("mcp-session-id", session.as_str()),
            ],
            &serde_json::to_vec(body).unwrap(),
        )
    };
    let r = post(&json!([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "two", "method": "ping"},
        {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "id": 4},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "greet", "arguments": {"name": "Ada"}}}
    ]));
    assert_eq!(
        (r.status, r.header("content-type")),
        (200, Some("application/json"))
    );
    let v = body_json(&r);
    let answers = v.as_array().unwrap();
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert_eq!(
        ids,
        [&json!(1), &json!("two"), &json!(3), &json!(4), &json!(5)],
        "{v}"
    );
    assert!(answers[0]["result"]["tools"].is_array(), "{v}");
    assert_eq!(answers[1]["result"], json!({}));
    assert_eq!(
        answers[2]["error"]["code"], -32600,
        "initialize is not batched"
    );
    assert_eq!(answers[3]["error"]["code"], -32600);
    assert!(
        answers[4]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Ada"),
        "{v}"
    );

    // A call held until its task ends: everything as SSE, the held call last.
    let r = post(&json!([
        {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "slow_compute", "arguments": {"seconds": 1}}},
        {"jsonrpc": "2.0", "id": 7, "method": "ping"}
    ]));
    let mut stream = stream_of(r);
    let (frames, ended) = drain(&h, &mut stream);
    assert!(!ended);
    assert_eq!(frames[0]["id"], 7, "{frames:?}");
    h.advance(1_000);
    h.tick();
    let (frames, ended) = drain(&h, &mut stream);
    assert!(ended);
    let last = frames.last().unwrap();
    assert_eq!(last["id"], 6, "{frames:?}");
    assert!(last["result"]["content"].is_array(), "{last}");

    // Only notifications: accepted. Empty, or too long: refused.
    let r = post(&json!([{"jsonrpc": "2.0", "method": "notifications/initialized"}]));
    assert_eq!(r.status, 202);
    // Responses and notifications only, one response answering no request
    // of this server: refused, as that response alone would be.
    let r = post(&json!([
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "nope", "result": {}}
    ]));
    assert_eq!(
        (r.status, body_json(&r)["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
    let r = post(&json!([]));
    assert_eq!(
        (r.status, body_json(&r)["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
    let many: Vec<Value> = (0..33)
        .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "ping"}))
        .collect();
    let r = post(&Value::Array(many));
    assert_eq!(
        (r.status, body_json(&r)["error"]["code"].as_i64()),
        (400, Some(-32600))
    );

    // Later revisions have no batches.
    let mut c = Legacy::connect(&h, json!({}));
    let r = c.raw(
        &json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]),
        true,
    );
    c.next += 1;
    assert_eq!(
        (r.status, body_json(&r)["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
}

#[test]
fn modern_requests_never_reach_the_adapter() {
    let h = Harness::new();
    // With the modern header, or the modern _meta: -32601 as before.
    for m in ["initialize", "ping", "tasks/result", "tasks/list"] {
        let (status, v) = h.send(m, json!({}));
        assert_eq!(
            (status, v["error"]["code"].as_i64()),
            (404, Some(-32601)),
            "{m}"
        );
    }
    // A legacy header with a modern body is the modern path's to judge.
    let mut msg = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    msg["params"]["_meta"] = mcp_tasks_edge::testing::meta(json!({}));
    let r = h.post_raw(
        &[
            ("content-type", "application/json"),
            ("mcp-protocol-version", V),
            ("mcp-method", "tools/list"),
        ],
        &serde_json::to_vec(&msg).unwrap(),
    );
    assert_eq!(body_json(&r)["error"]["code"], -32020);
}

/// Every 2025-11-25 name lives in `src/legacy/`: no other module of the
/// library names one (the modern protocol's list of removed methods, which
/// answers them -32601, is the one exception).
#[test]
fn no_module_outside_the_adapter_names_a_legacy_method() {
    const LEGACY_ONLY: &[&str] = &[
        "\"initialize\"",
        "\"ping\"",
        "\"tasks/result\"",
        "\"tasks/list\"",
        "notifications/initialized",
        "notifications/tasks/status",
        "mcp-session-id",
        "io.modelcontextprotocol/related-task",
        "\"2025-11-25\"",
        "\"2025-06-18\"",
        "\"2025-03-26\"",
    ];
    fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    let mut legacy_lines = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let rel = file.strip_prefix(&src).unwrap();
        if rel.starts_with("legacy") {
            legacy_lines += text.lines().count();
            continue;
        }
        let mut in_removed = false;
        for (n, line) in text.lines().enumerate() {
            if line.contains("pub const REMOVED") {
                in_removed = true;
            }
            if !in_removed {
                for name in LEGACY_ONLY {
                    if line.contains(name) {
                        found.push(format!("{}:{}: {name}", rel.display(), n + 1));
                    }
                }
            }
            if in_removed && line.trim_end().ends_with("];") {
                in_removed = false;
            }
        }
    }
    assert!(
        found.is_empty(),
        "legacy names outside src/legacy: {found:#?}"
    );
    println!("src/legacy: {legacy_lines} lines");
    assert!(legacy_lines > 0);
}

/// A server whose task lifetime is under a second still serves a
/// 2025-11-25 task call that asks for a longer one: the server's wins.
#[test]
fn a_task_ttl_under_a_second_caps_a_legacy_clients_ttl() {
    let mut cfg = crate::support::config();
    cfg.task_ttl_ms = 500;
    let h = Harness::with_config(
        std::sync::Arc::new(mcp_tasks_edge::store::MemoryStore::new()),
        1,
        cfg,
    );
    let mut c = Legacy::connect(&h, json!({}));
    let created = c.ok(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 60}, "task": {"ttl": 5000}}),
    );
    assert_eq!(created["task"]["ttl"], 500, "{created}");
}
