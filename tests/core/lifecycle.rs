//! The task lifecycle through the HTTP function: input rounds, partial
//! updates, lifetime-unique keys, cancellation in every state, failure
//! semantics, server-directed task creation and MRTR before a task.

use mcp_tasks_edge::ids::SequentialIds;
use mcp_tasks_edge::protocol::tools::{
    CallToolResult, InputRequest, InputRequests, ToolDescriptor,
};
use mcp_tasks_edge::server::Server;
use mcp_tasks_edge::tools::{
    CallError, CallPlan, Requirements, StepContext, StepFuture, StepOutcome, TaskStart,
    TaskSupport, Tool, ToolCall, ToolSet, ready,
};
use serde_json::{Value, json};

use crate::support::{Harness, caps, claimed, config, input_keys, meta};

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

fn update(h: &Harness, task: &str, responses: Value) -> (u16, Value) {
    h.send(
        "tasks/update",
        json!({"taskId": task, "inputResponses": responses}),
    )
}

fn wait_for_input(h: &Harness, task: &str) -> Value {
    let t = h.run_until_settled(task, 100, 20);
    assert_eq!(t["status"], "input_required", "{t}");
    t
}

#[test]
fn partial_update_keeps_the_task_waiting_and_lists_only_outstanding_keys() {
    let h = Harness::new();
    let task = h.start("multi_input", json!({}));
    let t = wait_for_input(&h, &task);
    assert_eq!(input_keys(&t), ["approval", "reviewer"]);

    let (_, ack) = update(
        &h,
        &task,
        json!({"approval": accept(json!({"name": "partial-1", "confirm": true}))}),
    );
    assert_eq!(ack["result"], crate::support::ack());
    let t = h.get(&task);
    assert_eq!(t["status"], "input_required");
    assert_eq!(input_keys(&t), ["reviewer"]);

    // Already answered, unknown and junk keys are ignored, and still acked.
    let before = h.store.len();
    let (_, ack) = update(
        &h,
        &task,
        json!({"approval": accept(json!({"confirm": false})), "unknown-key": {"ignored": true}}),
    );
    assert_eq!(ack["result"], crate::support::ack());
    assert_eq!(h.store.len(), before);
    assert_eq!(h.status(&task), "input_required");

    update(
        &h,
        &task,
        json!({"reviewer": accept(json!({"name": "partial-2", "confirm": true}))}),
    );
    assert_eq!(h.status(&task), "working");
    let done = h.run_until_settled(&task, 100, 5);
    assert_eq!(done["status"], "completed");
    assert_eq!(
        done["result"]["structuredContent"],
        json!({"reviewer": "partial-2", "approved": true}),
        "the first answer was kept"
    );
}

#[test]
fn an_answer_that_does_not_fit_its_request_is_refused_and_changes_nothing() {
    let h = Harness::new();
    let task = h.start("confirm_delete", json!({"filename": "a.txt"}));
    let before = wait_for_input(&h, &task);
    for bad in [
        json!("yes"),
        json!({"action": "accept", "content": {"confirm": "yes"}}),
        json!({"action": "accept"}),
    ] {
        let (status, body) = update(&h, &task, json!({"confirm": bad}));
        assert_eq!(
            (status, body["error"]["code"].as_i64()),
            (200, Some(-32602)),
            "{body}"
        );
    }
    assert_eq!(h.get(&task), before);
}

/// A tool that asks twice under the same key: the core refuses the second
/// round and fails the task.
struct ReusesKeys;

impl Tool for ReusesKeys {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: "reuse",
            title: None,
            description: "asks twice with one key",
            input_schema: json!({"type": "object", "properties": {}}),
            output_schema: None,
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Required)
    }
    fn call(&self, _: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        Ok(CallPlan::Task(TaskStart {
            state: json!(0),
            first_step_in_ms: 0,
            message: None,
        }))
    }
    fn step<'a>(&'a self, s: &'a StepContext<'a>) -> StepFuture<'a> {
        ready(self.next(s))
    }
}

impl ReusesKeys {
    fn next(&self, s: &StepContext<'_>) -> StepOutcome {
        let round = s.state().as_i64().unwrap_or(0);
        if round < 2 {
            let mut r = InputRequests::new();
            r.insert(
                "same".into(),
                InputRequest::elicit_form("again?", json!({"type": "object", "properties": {}})),
            );
            return StepOutcome::NeedInput {
                state: json!(round + 1),
                requests: r,
                message: None,
            };
        }
        StepOutcome::Complete(CallToolResult::text("unreachable"))
    }
}

#[test]
fn input_keys_are_unique_over_the_tasks_life() {
    let store = std::sync::Arc::new(mcp_tasks_edge::store::MemoryStore::new());
    let server = Server::new(
        store.clone(),
        config(),
        ToolSet::from_tools(vec![Box::new(ReusesKeys)]),
        Box::new(SequentialIds::starting_at(5)),
    )
    .unwrap();
    let h = Harness {
        server,
        ..Harness::over(store, 9)
    };
    let task = h.start("reuse", json!({}));
    wait_for_input(&h, &task);
    update(
        &h,
        &task,
        json!({"same": {"action": "accept", "content": {}}}),
    );
    let t = h.run_until_settled(&task, 100, 5);
    assert_eq!(t["status"], "failed", "{t}");
    assert_eq!(t["error"]["code"], -32603);
    assert!(
        t["statusMessage"]
            .as_str()
            .unwrap()
            .contains("reused an input key")
    );
}

#[test]
fn cancel_while_waiting_on_a_timer_is_immediate() {
    let h = Harness::new();
    let task = h.start("slow_compute", json!({"seconds": 60, "label": "x"}));
    let (_, ack) = h.send("tasks/cancel", json!({"taskId": task}));
    assert_eq!(ack["result"], crate::support::ack());
    let t = h.get(&task);
    assert_eq!(t["status"], "cancelled");
    assert!(t.get("result").is_none() && t.get("error").is_none());
    // Idempotent, and the runner has nothing left to do.
    let (_, again) = h.send("tasks/cancel", json!({"taskId": task}));
    assert_eq!(again["result"], crate::support::ack());
    h.advance(61_000);
    assert_eq!(h.tick().stepped, 0);
    assert_eq!(h.status(&task), "cancelled");
}

#[test]
fn cancel_while_waiting_on_input_is_immediate() {
    let h = Harness::new();
    let task = h.start("generate_report", json!({"size": "small"}));
    wait_for_input(&h, &task);
    h.send("tasks/cancel", json!({"taskId": task}));
    let t = h.get(&task);
    assert_eq!(t["status"], "cancelled");
    assert!(t.get("inputRequests").is_none());
    // Answering a cancelled task's old request is ignored.
    update(
        &h,
        &task,
        json!({"approve_outline": accept(json!({"approved": true}))}),
    );
    assert_eq!(h.status(&task), "cancelled");
}

#[test]
fn cancel_on_a_terminal_task_acks_and_changes_nothing() {
    let h = Harness::new();
    let task = h.start("slow_compute", json!({"seconds": 1}));
    let done = h.run_until_settled(&task, 1_000, 3);
    assert_eq!(done["status"], "completed");
    let (status, ack) = h.send("tasks/cancel", json!({"taskId": task}));
    assert_eq!(
        (status, ack["result"].clone()),
        (200, crate::support::ack())
    );
    assert_eq!(h.get(&task), done);
}

#[test]
fn cancel_during_a_running_step_is_honoured_at_the_step_boundary() {
    let h = Harness::new();
    // A tool whose steps are claimed (not replayable).
    let task = h.start("confirm_delete", json!({"filename": "f"}));
    h.advance(1_000);
    let runner = h.server.runner();
    let claim = claimed(mcp_tasks_edge::block_on(runner.claim(&task, h.now.get())).unwrap());
    // The client cancels while the step runs: only the intent is recorded.
    h.send("tasks/cancel", json!({"taskId": task}));
    assert_eq!(h.status(&task), "working");
    let outcome = mcp_tasks_edge::block_on(runner.step(&claim, h.now.get()));
    let committed = mcp_tasks_edge::block_on(runner.commit(claim, outcome, h.now.get())).unwrap();
    assert_eq!(
        committed,
        mcp_tasks_edge::tasks::runner::CommitOutcome::Committed(
            mcp_tasks_edge::protocol::tasks::TaskStatus::Cancelled
        )
    );
    assert_eq!(h.status(&task), "cancelled");
}

#[test]
fn cancel_during_an_unleased_step_cancels_at_once_and_fences_the_step() {
    let h = Harness::new();
    // generate_report declares replayable steps: no lease is written.
    let task = h.start("generate_report", json!({"size": "medium"}));
    h.advance(1_000);
    let runner = h.server.runner();
    let claim = claimed(mcp_tasks_edge::block_on(runner.claim(&task, h.now.get())).unwrap());
    assert!(!claim.leased);
    // No step holds the task, so the cancellation takes effect at once.
    h.send("tasks/cancel", json!({"taskId": task}));
    assert_eq!(h.status(&task), "cancelled");
    let outcome = mcp_tasks_edge::block_on(runner.step(&claim, h.now.get()));
    let committed = mcp_tasks_edge::block_on(runner.commit(claim, outcome, h.now.get())).unwrap();
    assert_eq!(
        committed,
        mcp_tasks_edge::tasks::runner::CommitOutcome::Fenced
    );
    assert_eq!(h.status(&task), "cancelled");
}

#[test]
fn tool_errors_complete_and_protocol_errors_fail() {
    let h = Harness::new();
    let failing = h.start("failing_job", json!({}));
    let t = h.run_until_settled(&failing, 1_000, 3);
    assert_eq!(t["status"], "completed");
    assert_eq!(t["result"]["isError"], true);
    assert_eq!(t["result"]["resultType"], "complete");
    assert!(t.get("error").is_none());

    let broken = h.start("protocol_error_job", json!({}));
    let t = h.run_until_settled(&broken, 1_000, 3);
    assert_eq!(t["status"], "failed");
    assert_eq!(t["error"]["code"], -32603);
    assert!(t["error"]["message"].is_string());
    assert!(t["statusMessage"].is_string());
    assert!(t.get("result").is_none());
}

#[test]
fn declining_or_cancelling_the_approval_has_a_defined_outcome() {
    let h = Harness::new();
    let declined = h.start("generate_report", json!({"size": "small"}));
    wait_for_input(&h, &declined);
    update(
        &h,
        &declined,
        json!({"approve_outline": {"action": "decline"}}),
    );
    let t = h.run_until_settled(&declined, 100, 3);
    assert_eq!(t["status"], "completed");
    assert_eq!(
        t["result"]["structuredContent"],
        json!({"size": "small", "approved": false})
    );
    assert_eq!(t["result"]["isError"], false);

    let dismissed = h.start("generate_report", json!({"size": "small"}));
    wait_for_input(&h, &dismissed);
    update(
        &h,
        &dismissed,
        json!({"approve_outline": {"action": "cancel"}}),
    );
    let t = h.run_until_settled(&dismissed, 100, 3);
    assert_eq!(t["status"], "cancelled");
}

#[test]
fn the_server_decides_per_call() {
    let h = Harness::new();
    // Never a task, even with a legacy hint.
    let r = h.ok(
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "World"}, "task": {"ttl": 60000}}),
    );
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["content"][0]["text"], "Hello, World!");
    assert!(r.get("taskId").is_none());
    // Optional: synchronous without the extension or for zero seconds.
    let (_, r) = h.send_with(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 5}}),
        json!({}),
    );
    assert_eq!(r["result"]["resultType"], "complete");
    let r = h.ok(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "instant"}}),
    );
    assert_eq!(r["resultType"], "complete");
    // A task otherwise, persisted before the handle is returned.
    let r = h.ok(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 2}}),
    );
    assert_eq!(r["resultType"], "task");
    for k in [
        "result",
        "error",
        "inputRequests",
        "requestState",
        "task",
        "ttl",
        "pollInterval",
    ] {
        assert!(r.get(k).is_none(), "{k} in {r}");
    }
    assert!(r["ttlMs"].as_u64().unwrap() > 0 && r["pollIntervalMs"].as_u64().unwrap() > 0);
    let id = r["taskId"].as_str().unwrap();
    assert_eq!(h.get(id)["status"], "working");
    // Two seconds of work: not done after one.
    h.advance(1_000);
    h.tick();
    assert_eq!(h.status(id), "working");
    h.advance(1_000);
    h.tick();
    assert_eq!(h.status(id), "completed");
}

/// A task's round is replayable for as long as its task may live, no
/// longer: once the task has expired and been purged, a replay is refused
/// instead of creating the task again (and running the tool twice).
#[test]
fn a_round_outlives_no_task_it_created() {
    let mut c = config();
    c.task_ttl_ms = 60_000;
    let h = Harness::with_config(
        std::sync::Arc::new(mcp_tasks_edge::store::MemoryStore::new()),
        1,
        c,
    );
    let r1 = h.ok(
        "tools/call",
        json!({"name": "test_tool_with_task", "arguments": {}}),
    );
    let key = input_keys(&r1)[0].clone();
    let state = r1["requestState"].as_str().unwrap().to_owned();
    let round2 = json!({"name": "test_tool_with_task", "arguments": {}, "inputResponses": {&key: accept(json!({"name": "Alice"}))}, "requestState": state});
    let task = h.ok("tools/call", round2.clone())["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    h.advance(61_000);
    h.tick();
    assert!(
        mcp_tasks_edge::block_on(mcp_tasks_edge::store::Store::get(h.store.as_ref(), &task))
            .unwrap()
            .is_none(),
        "purged"
    );
    let (status, v) = h.send("tools/call", round2);
    assert_eq!(
        (status, v["error"]["code"].as_i64()),
        (200, Some(-32602)),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Invalid requestState"),
        "{v}"
    );
    assert!(
        mcp_tasks_edge::block_on(mcp_tasks_edge::store::Store::get(h.store.as_ref(), &task))
            .unwrap()
            .is_none(),
        "not created again"
    );
}

/// A round's task is placed by the placements the round was signed with:
/// replayed on a replica whose capacity was raised since (a rolling
/// deploy, say), it finds the task the first answer created instead of
/// creating a second one on another placement.
#[test]
fn a_round_replayed_after_the_placements_changed_finds_its_task() {
    let placed = |n: u16| mcp_tasks_edge::config::Config {
        task_placements: n,
        ..crate::support::config()
    };
    let store = std::sync::Arc::new(mcp_tasks_edge::store::MemoryStore::new());
    let before = Harness::with_config(store.clone(), 1, placed(16));
    let r1 = before.ok(
        "tools/call",
        json!({"name": "test_tool_with_task", "arguments": {}}),
    );
    let key = input_keys(&r1)[0].clone();
    let round2 = json!({"name": "test_tool_with_task", "arguments": {},
        "inputResponses": {&key: accept(json!({"name": "Alice"}))},
        "requestState": r1["requestState"]});
    let created = before.ok("tools/call", round2.clone());
    assert_eq!(created["resultType"], "task", "{created}");
    let stored = store.len();
    // Each capacity places some of the rounds elsewhere; none may create a
    // second task.
    for n in [0, 1, 17, 32, 64, 1000] {
        let after = Harness::with_config(store.clone(), 2, placed(n));
        let replayed = after.ok("tools/call", round2.clone());
        assert_eq!(replayed["taskId"], created["taskId"], "{n}: {replayed}");
        assert_eq!(store.len(), stored, "{n}: no second task");
    }
}

#[test]
fn mrtr_rounds_come_before_the_task() {
    let h = Harness::new();
    let r1 = h.ok(
        "tools/call",
        json!({"name": "test_tool_with_task", "arguments": {}}),
    );
    assert_eq!(r1["resultType"], "input_required");
    assert!(r1.get("taskId").is_none());
    let key = input_keys(&r1)[0].clone();
    let state = r1["requestState"].as_str().unwrap().to_owned();
    let round2 = json!({"name": "test_tool_with_task", "arguments": {}, "inputResponses": {&key: accept(json!({"name": "Alice"}))}, "requestState": state});
    let r2 = h.ok("tools/call", round2.clone());
    assert_eq!(r2["resultType"], "task");
    assert!(r2.get("requestState").is_none() && r2.get("inputRequests").is_none());
    let task = r2["taskId"].as_str().unwrap().to_owned();
    // Replaying the round does not create a second task.
    let r3 = h.ok("tools/call", round2.clone());
    assert_eq!(r3["taskId"], r2["taskId"]);
    let tasks_before = h.store.len();
    let t = h.run_until_settled(&task, 500, 4);
    assert_eq!(t["status"], "completed");
    assert!(
        t["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Alice")
    );
    assert_eq!(h.store.len(), tasks_before);

    // Tampered, or replayed by someone else: refused.
    let mut tampered = round2.clone();
    tampered["requestState"] = json!(format!("{}-TAMPERED", r1["requestState"].as_str().unwrap()));
    let (_, e) = h.send("tools/call", tampered);
    assert_eq!(e["error"]["code"], -32602);
    let bob = Harness::over(h.store.clone(), 7).owned_by(crate::support::owner("acme", "bob"));
    let (_, e) = bob.send("tools/call", round2.clone());
    assert_eq!(e["error"]["code"], -32602);
    // Expired.
    h.advance(700_000);
    let (_, e) = h.send("tools/call", round2);
    assert_eq!(e["error"]["code"], -32602);
}

#[test]
fn every_result_carries_result_type_and_lists_are_cacheable() {
    let h = Harness::new();
    let d = h.ok("server/discover", json!({}));
    assert_eq!(d["resultType"], "complete");
    assert_eq!(
        d["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"],
        json!({})
    );
    assert!(d["capabilities"].get("tasks").is_none());
    assert_eq!(
        d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcp-tasks-edge"
    );
    let first = h.ok("tools/list", json!({}));
    for _ in 0..3 {
        assert_eq!(h.ok("tools/list", json!({})), first, "deterministic");
    }
    for m in [
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
    ] {
        let r = h.ok(m, json!({}));
        assert_eq!(r["resultType"], "complete", "{m}");
        assert!(r["ttlMs"].is_u64(), "{m}");
        assert_eq!(r["cacheScope"], "public", "{m}");
    }
    let _ = meta(caps());
}

/// The first round of a synchronous MRTR fixture, and its answered retry.
fn answered_round(h: &Harness) -> Value {
    let name = "test_input_required_result_elicitation";
    let r1 = h.ok("tools/call", json!({"name": name, "arguments": {}}));
    assert_eq!(r1["resultType"], "input_required", "{r1}");
    json!({
        "name": name,
        "arguments": {},
        "inputResponses": {"user_name": accept(json!({"name": "Ada"}))},
        "requestState": r1["requestState"],
    })
}

#[test]
fn a_synchronous_round_is_answered_once() {
    let h = Harness::new();
    let retry = answered_round(&h);
    let r = h.ok("tools/call", retry.clone());
    assert_eq!(r["content"][0]["text"], "Hello, Ada!");
    let before = h.store.len();
    // The same round again (a replay): refused, and nothing else stored.
    let (_, e) = h.send("tools/call", retry.clone());
    assert_eq!(e["error"]["code"], -32602, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already answered"),
        "{e}"
    );
    assert_eq!(h.store.len(), before);
    // A fresh round works as before.
    let again = answered_round(&h);
    assert_eq!(
        h.ok("tools/call", again)["content"][0]["text"],
        "Hello, Ada!"
    );
    // The spent-round records expire with their states, and the runner
    // purges them.
    h.advance(h.server.config().request_state_ttl_ms as i64 + 1);
    h.tick();
    assert_eq!(h.store.len(), 0, "spent rounds purged at expiry");
}

#[test]
fn request_states_survive_a_key_rotation_until_the_old_key_is_dropped() {
    use mcp_tasks_edge::crypto::Keyring;
    let store = std::sync::Arc::new(mcp_tasks_edge::store::MemoryStore::new());
    let with_keys = |seed: u64, keys: Keyring| {
        let mut c = crate::support::config();
        c.state_keys = keys;
        Harness::with_config(store.clone(), seed, c)
    };
    let old = b"the-old-state-key-of-32-bytes-or-more".to_vec();
    let new = b"the-new-state-key-of-32-bytes-or-more".to_vec();
    let before = with_keys(1, Keyring::new(old.clone()));
    let pending = answered_round(&before);
    let pending_too = answered_round(&before);
    // Rotated: the new key signs, the old one still verifies.
    let rotated = with_keys(2, Keyring::new(new.clone()).with_previous(old));
    assert_eq!(
        rotated.ok("tools/call", pending)["content"][0]["text"],
        "Hello, Ada!"
    );
    let fresh = answered_round(&rotated);
    // The old key dropped: what it signed is refused; the new key's states
    // still verify.
    let after = with_keys(3, Keyring::new(new));
    let (_, e) = after.send("tools/call", pending_too);
    assert_eq!(e["error"]["code"], -32602);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Invalid requestState"),
        "{e}"
    );
    assert_eq!(
        after.ok("tools/call", fresh)["content"][0]["text"],
        "Hello, Ada!"
    );
}

#[test]
fn a_round_answered_one_way_cannot_be_answered_the_other() {
    let h = Harness::new();
    let first_round = || {
        let r = h.ok(
            "tools/call",
            json!({"name": "test_tool_with_task", "arguments": {}}),
        );
        r["requestState"].as_str().unwrap().to_owned()
    };
    let retry = |state: &str, response: Value| {
        json!({"name": "test_tool_with_task", "arguments": {},
               "inputResponses": {"user_name": response}, "requestState": state})
    };
    let declined = json!({"action": "decline"});
    // Answered without a task first: the task-creating answer is refused.
    let state = first_round();
    let r = h.ok("tools/call", retry(&state, declined.clone()));
    assert_eq!(r["resultType"], "input_required", "{r}");
    let (_, e) = h.send("tools/call", retry(&state, accept(json!({"name": "Ada"}))));
    assert_eq!(e["error"]["code"], -32602, "{e}");
    // Answered with a task first: the task-less answer is refused, and the
    // task-creating one still finds its task.
    let state = first_round();
    let task = h.ok("tools/call", retry(&state, accept(json!({"name": "Ada"}))));
    assert_eq!(task["resultType"], "task");
    let (_, e) = h.send("tools/call", retry(&state, declined));
    assert_eq!(e["error"]["code"], -32602, "{e}");
    let again = h.ok("tools/call", retry(&state, accept(json!({"name": "Ada"}))));
    assert_eq!(again["taskId"], task["taskId"]);
}

/// Two answers of one round racing, one that creates a task (the user
/// gave a name) and one that does not (the user declined, so the tool asks
/// again): whichever comes first is answered, and the other is refused,
/// in either order. The round is single-use whatever its answers lead to.
#[test]
fn two_racing_answers_of_one_round_are_not_both_answered() {
    use mcp_tasks_edge::store::Store;
    for task_first in [true, false] {
        let h = Harness::new();
        let r1 = h.ok(
            "tools/call",
            json!({"name": "test_tool_with_task", "arguments": {}}),
        );
        let key = input_keys(&r1)[0].clone();
        let round = |answer: Value| {
            let mut params = json!({"name": "test_tool_with_task", "arguments": {},
                "inputResponses": {&key: answer}, "requestState": r1["requestState"]});
            params["_meta"] = meta(caps());
            json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params})
        };
        let named = round(accept(json!({"name": "Alice"})));
        let declined = round(json!({"action": "decline"}));
        let (first, second) = if task_first {
            (&named, &declined)
        } else {
            (&declined, &named)
        };
        // `second` runs inside `first`, just before `first`'s first write.
        let inner = std::rc::Rc::new(std::cell::RefCell::new(None));
        let seen = inner.clone();
        let h2 = Harness::over(h.store.clone(), 2);
        let store = crate::support::Interleaved {
            inner: &h.store,
            arm: std::cell::Cell::new(true),
            interloper: Box::new(move |_| {
                *seen.borrow_mut() = Some(h2.post(second));
            }),
        };
        let server = Server::new(
            store,
            config(),
            crate::support::all_tools(),
            Box::new(SequentialIds::starting_at(3_000_000)),
        )
        .unwrap();
        let headers = crate::support::standard_headers(first);
        let refs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let body = serde_json::to_vec(first).unwrap();
        let req = mcp_tasks_edge::http::HttpRequest {
            method: "POST",
            path: "/mcp",
            headers: &refs,
            body: &body,
        };
        let resp = mcp_tasks_edge::block_on(mcp_tasks_edge::http::serve(&server, &req, &h.ctx()));
        let outer = crate::support::body_json(&resp);
        let (_, inner) = inner.borrow_mut().take().expect("the other answer ran");
        let answered: Vec<&Value> = [&outer, &inner]
            .into_iter()
            .filter(|v| v.get("error").is_none())
            .collect();
        assert_eq!(
            answered.len(),
            1,
            "task first: {task_first}; outer {outer}; inner {inner}"
        );
        let refused = if answered[0] == &outer {
            &inner
        } else {
            &outer
        };
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        // No task exists unless the answer that creates one won.
        let won_with_task = answered[0]["result"]["resultType"] == "task";
        let tasks = mcp_tasks_edge::block_on(h.store.due(i64::MAX, 100))
            .unwrap()
            .into_iter()
            .filter(|k| k.starts_with("tsk_"))
            .count();
        assert_eq!(tasks, usize::from(won_with_task), "{answered:?}");
    }
}

/// A tool that asks one question, then retries the step that reads the
/// answer once (an API that failed), then answers with what it read; or,
/// with `{"empty": true}`, asks for input without a request.
struct RetriesAfterInput;

impl Tool for RetriesAfterInput {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: "retries_after_input",
            title: None,
            description: "asks, then retries the step that reads the answer",
            input_schema: json!({"type": "object", "properties": {"empty": {"type": "boolean"}}}),
            output_schema: None,
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Required)
    }
    fn call(&self, _: &ToolCall<'_>) -> Result<CallPlan, CallError> {
        Ok(CallPlan::Task(TaskStart {
            state: json!(0),
            first_step_in_ms: 0,
            message: None,
        }))
    }
    fn step<'a>(&'a self, s: &'a StepContext<'a>) -> StepFuture<'a> {
        ready(self.next(s))
    }
}

impl RetriesAfterInput {
    fn next(&self, s: &StepContext<'_>) -> StepOutcome {
        if s.arguments().get("empty") == Some(&json!(true)) {
            return StepOutcome::NeedInput {
                state: json!(1),
                requests: InputRequests::new(),
                message: None,
            };
        }
        if s.state().as_i64() == Some(0) {
            let mut r = InputRequests::new();
            r.insert(
                "name".into(),
                InputRequest::elicit_form(
                    "Who?",
                    json!({"type": "object", "properties": {"name": {"type": "string"}}}),
                ),
            );
            return StepOutcome::NeedInput {
                state: json!(1),
                requests: r,
                message: None,
            };
        }
        if s.attempt() == 1 {
            return StepOutcome::Retry {
                error: "the API answered 503".into(),
                after_ms: Some(10),
            };
        }
        let name = s
            .answer("name")
            .and_then(|a| a.accepted("name").cloned())
            .unwrap_or(json!("nobody"));
        StepOutcome::Complete(CallToolResult::text(format!("hello {name}")))
    }
}

fn retrying_harness() -> Harness {
    let store = std::sync::Arc::new(mcp_tasks_edge::store::MemoryStore::new());
    let server = Server::new(
        store.clone(),
        config(),
        ToolSet::from_tools(vec![Box::new(RetriesAfterInput)]),
        Box::new(SequentialIds::starting_at(5)),
    )
    .unwrap();
    Harness {
        server,
        ..Harness::over(store, 9)
    }
}

/// A step that retries after the client answered still reads the answers
/// in its next attempt: the same step, the same answers.
#[test]
fn a_retried_step_still_has_its_answers() {
    let h = retrying_harness();
    let task = h.start("retries_after_input", json!({}));
    wait_for_input(&h, &task);
    let (status, _) = update(
        &h,
        &task,
        json!({"name": {"action": "accept", "content": {"name": "Ada"}}}),
    );
    assert_eq!(status, 200);
    let t = h.run_until_settled(&task, 100, 5);
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["result"]["content"][0]["text"], "hello \"Ada\"", "{t}");
}

/// A step that asks for input without a request fails its task, rather
/// than leave it waiting for an answer nobody can give.
#[test]
fn input_asked_without_a_request_fails_the_task() {
    let h = retrying_harness();
    let task = h.start("retries_after_input", json!({"empty": true}));
    let t = h.run_until_settled(&task, 100, 3);
    assert_eq!(t["status"], "failed", "{t}");
    assert!(
        t["statusMessage"]
            .as_str()
            .unwrap()
            .contains("without a request"),
        "{t}"
    );
}

/// A tool that asks for a form elicitation without declaring it, called
/// by a client that did not declare elicitation: the task fails, naming
/// what it asked, instead of waiting for an answer that client cannot give.
#[test]
fn input_the_client_cannot_answer_fails_the_task() {
    let h = retrying_harness();
    let tasks_only = json!({"extensions": {crate::support::TASKS: {}}});
    let (status, r) = h.send_with(
        "tools/call",
        json!({"name": "retries_after_input", "arguments": {}}),
        tasks_only,
    );
    assert_eq!(status, 200, "{r}");
    let task = r["result"]["taskId"].as_str().unwrap().to_owned();
    let t = h.run_until_settled(&task, 100, 3);
    assert_eq!(t["status"], "failed", "{t}");
    assert!(
        t["statusMessage"]
            .as_str()
            .unwrap()
            .contains("asked for elicitation/create, which the client did not declare"),
        "{t}"
    );
}
