//! The 2025-11-25 adapter in the component: a legacy client's task survives
//! a restart of the host between the input request and its answer, and the
//! session, the request id and the result need nothing the first process
//! held in memory.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::listen::Events;
use crate::runtime::{Clock, Runtime, build_request};
use crate::sqlite::SqliteStore;
use crate::support::{T0, TempDir, fresh_engine, post_raw, settings};

fn boot(dir: &std::path::Path, clock: &Clock) -> Arc<Runtime> {
    let (engine, component) = fresh_engine();
    let store = Arc::new(SqliteStore::open(dir).unwrap());
    Runtime::from_component(&engine, &component, store, settings(clock)).unwrap()
}

fn headers(session: Option<&str>) -> Vec<(String, String)> {
    let mut h = vec![("content-type".to_owned(), "application/json".to_owned())];
    if let Some(s) = session {
        h.push(("mcp-protocol-version".to_owned(), "2025-11-25".to_owned()));
        h.push(("mcp-session-id".to_owned(), s.to_owned()));
    }
    h
}

async fn call(rt: &Arc<Runtime>, session: &str, id: i64, method: &str, params: Value) -> Value {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let r = post_raw(
        rt,
        &headers(Some(session)),
        serde_json::to_vec(&msg).unwrap(),
    )
    .await;
    assert_eq!(r.status, 200, "{method}");
    serde_json::from_slice(&r.body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_task_survives_a_restart_between_question_and_answer() {
    let dir = TempDir::new("legacy-restart");
    let clock = Clock::manual(T0);
    let first = boot(dir.path(), &clock);

    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
        "clientInfo": {"name": "legacy-restart", "version": "1"}}});
    let r = post_raw(&first, &headers(None), serde_json::to_vec(&init).unwrap()).await;
    assert_eq!(r.status, 200);
    let session = r
        .headers
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_owned();

    let created = call(
        &first,
        &session,
        1,
        "tools/call",
        json!({"name": "generate_report", "arguments": {"size": "small"}, "task": {"ttl": 600000}}),
    )
    .await;
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    clock.advance(1_000);
    assert_eq!(first.tick(clock.now_ms()).await.unwrap().stepped, 1);

    // tasks/result is held open and carries the input request.
    let msg =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": task}});
    let h = headers(Some(&session));
    let refs: Vec<(&str, &[u8])> = h.iter().map(|(k, v)| (k.as_str(), v.as_bytes())).collect();
    let req = build_request("POST", "/mcp", &refs, serde_json::to_vec(&msg).unwrap()).unwrap();
    let resp = first.handle(req).await.unwrap();
    assert_eq!(
        resp.headers().get("content-type").unwrap(),
        "text/event-stream"
    );
    let mut events = Events::new(resp.into_body());
    let request = loop {
        let e = events.next().await.expect("an input request");
        if e["method"] == "elicitation/create" {
            break e;
        }
    };
    let rid = request["id"].as_str().unwrap().to_owned();

    // The host goes away with the stream still open.
    drop(events);
    drop(first);

    // A new process: the same session and request id work; the answer
    // becomes the task's update, whose (replayable) step runs inside it, so
    // the result is there at once and no tick has anything left to do.
    let second = boot(dir.path(), &clock);
    let answer = json!({"jsonrpc": "2.0", "id": rid, "result": {"action": "accept", "content": {"approved": true}}});
    let r = post_raw(&second, &h, serde_json::to_vec(&answer).unwrap()).await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    clock.advance(1_000);
    assert_eq!(second.tick(clock.now_ms()).await.unwrap().stepped, 0);
    let got = call(&second, &session, 3, "tasks/get", json!({"taskId": task})).await;
    assert_eq!(got["result"]["status"], "completed");
    let result = call(
        &second,
        &session,
        4,
        "tasks/result",
        json!({"taskId": task}),
    )
    .await;
    assert_eq!(
        result["result"]["content"][0]["text"],
        "Generated small report with approved outline."
    );
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task.as_str()
    );
}
