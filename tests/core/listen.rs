//! `subscriptions/listen`: the acknowledgement, snapshots as the task moves,
//! and the graceful end, as the SSE frames an adapter writes.

use mcp_tasks_edge::block_on;
use mcp_tasks_edge::http::{EventStream, HttpBody, Next};
use serde_json::{Value, json};

use crate::support::{Harness, caps, meta, standard_headers};

fn frame_json(bytes: &[u8]) -> Value {
    let text = std::str::from_utf8(bytes).unwrap();
    let data = text
        .strip_prefix("data: ")
        .and_then(|t| t.strip_suffix("\n\n"))
        .unwrap_or_else(|| panic!("not one data line: {text:?}"));
    assert!(!data.contains('\n'));
    serde_json::from_str(data).unwrap()
}

/// Opens a listen stream for `task_ids`; returns the acknowledgement and the stream.
pub fn open(h: &Harness, task_ids: Value) -> (Value, EventStream) {
    let mut params = json!({"notifications": {"taskIds": task_ids, "toolsListChanged": true}});
    params["_meta"] = meta(caps());
    let msg = json!({"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen", "params": params});
    let hs = standard_headers(&msg);
    let refs: Vec<(&str, &str)> = hs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let resp = h.post_raw(&refs, &serde_json::to_vec(&msg).unwrap());
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-type"), Some("text/event-stream"));
    let HttpBody::Events(mut stream) = resp.body else {
        panic!("not a stream")
    };
    let Next::Send(first) = block_on(stream.next(&h.server, h.now.get())) else {
        panic!("no acknowledgement")
    };
    (frame_json(&first), stream)
}

/// Collects frames until the stream waits or ends.
fn drain(h: &Harness, stream: &mut EventStream) -> (Vec<Value>, bool) {
    let mut frames = Vec::new();
    loop {
        match block_on(stream.next(&h.server, h.now.get())) {
            Next::Send(b) => frames.push(frame_json(&b)),
            Next::Wait(ms) => {
                assert!(ms > 0);
                return (frames, false);
            }
            Next::End => return (frames, true),
        }
    }
}

#[test]
fn snapshots_follow_the_task_to_completion() {
    let h = Harness::new();
    let task = h.start("generate_report", json!({"size": "large"}));
    let (ack, mut stream) = open(&h, json!([task]));
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"taskIds": [task]}),
        "list changes are not offered"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-1"
    );

    let (frames, ended) = drain(&h, &mut stream);
    assert!(!ended);
    assert_eq!(frames.len(), 1, "the current snapshot");
    let snap = &frames[0];
    assert_eq!(snap["method"], "notifications/tasks");
    assert_eq!(
        snap["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-1"
    );
    assert_eq!(snap["params"]["status"], "working");
    assert!(snap.get("id").is_none());

    // Nothing changed: nothing sent.
    assert_eq!(drain(&h, &mut stream).0.len(), 0);

    h.advance(1_000);
    h.tick();
    let (frames, _) = drain(&h, &mut stream);
    assert_eq!(frames.len(), 1);
    let mut snap = frames[0]["params"].clone();
    let get = h.get(&task);
    // The same snapshot tasks/get returns (tasks/get adds resultType and serverInfo).
    snap.as_object_mut().unwrap().remove("_meta");
    let mut expected = get.clone();
    expected.as_object_mut().unwrap().remove("_meta");
    expected.as_object_mut().unwrap().remove("resultType");
    assert_eq!(snap, expected);
    assert_eq!(snap["status"], "input_required");

    h.send("tasks/update", json!({"taskId": task, "inputResponses": {"approve_outline": {"action": "accept", "content": {"approved": true}}}}));
    h.tick();
    let (frames, ended) = drain(&h, &mut stream);
    let statuses: Vec<_> = frames
        .iter()
        .filter(|f| f["method"] == "notifications/tasks")
        .map(|f| f["params"]["status"].clone())
        .collect();
    assert_eq!(statuses, [json!("completed")]);
    let last = frames.last().unwrap();
    assert_eq!(
        last["id"], "listen-1",
        "the listen request's result ends the stream"
    );
    assert_eq!(
        last["result"],
        json!({"resultType": "complete", "_meta": {
            "io.modelcontextprotocol/subscriptionId": "listen-1",
            "io.modelcontextprotocol/serverInfo": {"name": "mcp-tasks-edge", "version": "0.1.0"},
        }})
    );
    assert!(ended);
}

#[test]
fn a_subscription_with_nothing_to_report_ends_at_once() {
    let h = Harness::new();
    let (ack, mut stream) = open(&h, json!(["tsk_not_there"]));
    assert_eq!(ack["params"]["notifications"], json!({}));
    let (frames, ended) = drain(&h, &mut stream);
    assert!(ended);
    assert_eq!(frames.len(), 1);
    assert!(frames[0].get("result").is_some());
}

#[test]
fn end_by_closes_gracefully_after_one_last_poll() {
    let h = Harness::new();
    let task = h.start("generate_report", json!({"size": "large"}));
    let (_, mut stream) = open(&h, json!([task]));
    let (frames, ended) = drain(&h, &mut stream);
    assert!(!ended);
    assert_eq!(frames.len(), 1, "the current snapshot");

    // The adapter's budget is spent: the stream must end with the listen
    // result although the task is still working and the stream is young.
    stream.end_by(h.now.get());
    h.advance(1_000);
    h.tick();
    let (frames, ended) = drain(&h, &mut stream);
    assert!(ended, "the stream ends");
    assert_eq!(frames.len(), 2, "the last snapshot, then the result");
    assert_eq!(frames[0]["params"]["status"], "input_required");
    assert_eq!(frames[1]["id"], "listen-1");
    assert_eq!(frames[1]["result"]["resultType"], "complete");
}

/// A task tool that counts to `n`, one step a second, saying how far it is.
struct CountTo;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct CountArgs {
    n: u32,
}

impl mcp_tasks_edge::tools::TaskTool for CountTo {
    type Args = CountArgs;
    type State = u32;
    type Output = String;
    const NAME: &'static str = "count_to";
    const DESCRIPTION: &'static str = "Counts to n, one step a second.";

    fn start(&self, _args: &CountArgs) -> mcp_tasks_edge::tools::Start<u32> {
        mcp_tasks_edge::tools::Start::now(0).message("Starting.")
    }

    async fn step(
        &self,
        args: CountArgs,
        done: u32,
        _cx: &mcp_tasks_edge::tools::StepContext<'_>,
    ) -> mcp_tasks_edge::tools::Step<u32, String> {
        let done = done + 1;
        if done >= args.n {
            return mcp_tasks_edge::tools::Step::Done(format!("Counted to {done}."));
        }
        mcp_tasks_edge::tools::Step::Continue {
            state: done,
            wake_in_ms: 1_000,
            message: Some(format!("Counted {done} of {}.", args.n)),
        }
    }
}

#[test]
fn a_task_tools_progress_shows_in_its_status_message_and_on_listen_streams() {
    let h = Harness::new().with_server(|s| {
        let store = s.store().clone();
        let config = s.config().clone();
        mcp_tasks_edge::server::Server::new(
            store,
            config,
            mcp_tasks_edge::tools::ToolSet::from_tools(vec![mcp_tasks_edge::tools::task_tool(
                CountTo,
            )]),
            Box::new(mcp_tasks_edge::ids::SequentialIds::starting_at(7)),
        )
        .unwrap()
    });
    let task = h.start("count_to", json!({"n": 3}));
    assert_eq!(h.get(&task)["statusMessage"], "Starting.");
    let (_, mut stream) = open(&h, json!([task]));
    let mut messages = Vec::new();
    let mut drain = |messages: &mut Vec<Value>| {
        while let Next::Send(b) = block_on(stream.next(&h.server, h.now.get())) {
            let f = frame_json(&b);
            if f["method"] == "notifications/tasks" {
                messages.push(f["params"]["statusMessage"].clone());
            }
        }
    };
    drain(&mut messages);
    for _ in 0..3 {
        h.tick();
        h.advance(1_000);
        drain(&mut messages);
    }
    assert_eq!(
        messages,
        [
            json!("Starting."),
            json!("Counted 1 of 3."),
            json!("Counted 2 of 3."),
            json!("The task completed.")
        ],
        "each step's message, then the completed snapshot"
    );
    assert_eq!(h.get(&task)["status"], "completed");
}

/// A host that runs what [`answers_at_once`] calls complete through a
/// one-call export (the component's `exchange`) has no stream to give: so
/// every form of the `Mcp-Method` header that the header check accepts for
/// a listen (spaces and tabs around it, `=?base64?…?=`) must be judged as
/// one that may stream, and every request judged complete must answer
/// without a stream.
#[test]
fn a_listen_is_judged_a_stream_in_every_form_its_header_may_take() {
    use mcp_tasks_edge::http::{HttpRequest, answers_at_once};
    let h = Harness::new();
    let task = h.start("generate_report", json!({"size": "large"}));
    let mut params = json!({"notifications": {"taskIds": [task]}});
    params["_meta"] = meta(caps());
    let msg =
        json!({"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen", "params": params});
    let body = serde_json::to_vec(&msg).unwrap();
    let forms = [
        "subscriptions/listen",
        " \tsubscriptions/listen\t ",
        "=?base64?c3Vic2NyaXB0aW9ucy9saXN0ZW4=?=",
        " =?base64?c3Vic2NyaXB0aW9ucy9saXN0ZW4=?= ",
        // Not the body's method, or not a header at all: answered at once
        // with the header check's error.
        "=?base64?c3Vic2NyaXB0aW9ucy9saXN0ZW4?=",
        "=?base64?dG9vbHMvbGlzdA==?=",
        "Subscriptions/Listen",
    ];
    let mut streams = 0;
    for form in forms {
        let mut hs = standard_headers(&msg);
        for (k, v) in hs.iter_mut() {
            if k.eq_ignore_ascii_case("mcp-method") {
                *v = form.to_owned();
            }
        }
        let refs: Vec<(&str, &str)> = hs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let req = HttpRequest {
            method: "POST",
            path: "/mcp",
            headers: &refs,
            body: &body,
        };
        let judged = answers_at_once(&req);
        let resp = h.post_raw(&refs, &body);
        let streamed = matches!(resp.body, HttpBody::Events(_));
        assert_eq!(judged, !streamed, "{form:?}: {}", resp.status);
        streams += usize::from(streamed);
    }
    assert_eq!(streams, 4, "the four forms the check accepts stream");
}

/// A keep-alive takes the place of a wait, not of the wait and the poll
/// after it: the next call still waits the interval (where an adapter also
/// checks its subrequest budget) before the stream polls again.
#[test]
fn after_a_keep_alive_the_stream_waits_before_it_polls() {
    let h = Harness::new();
    let task = h.start("slow_compute", json!({"seconds": 600, "label": "quiet"}));
    let (_, mut stream) = open(&h, json!([task]));
    let (_, ended) = drain(&h, &mut stream);
    assert!(!ended);
    // Fifteen seconds and more without a frame: the poll that finds
    // nothing new sends a keep-alive in place of its wait.
    h.advance(16_000);
    let Next::Send(b) = block_on(stream.next(&h.server, h.now.get())) else {
        panic!("no keep-alive")
    };
    assert_eq!(b, mcp_tasks_edge::http::KEEP_ALIVE);
    // The task changes at once; the stream still waits before it polls.
    let (status, _) = h.send("tasks/cancel", json!({"taskId": task}));
    assert_eq!(status, 200);
    let Next::Wait(ms) = block_on(stream.next(&h.server, h.now.get())) else {
        panic!("polled right after the keep-alive")
    };
    h.advance(ms as i64);
    let (frames, _) = drain(&h, &mut stream);
    assert!(
        frames.iter().any(|f| f["params"]["status"] == "cancelled"),
        "{frames:?}"
    );
}
