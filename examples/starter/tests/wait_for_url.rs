//! The tool through the server, with a fake HTTP client: what a test of
//! your own tool looks like.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use mcp_tasks_edge::ids::SequentialIds;
use mcp_tasks_edge::outbound::{FakeOutbound, OutboundPolicy, OutboundResponse};
use mcp_tasks_edge::server::{Config, Server};
use mcp_tasks_edge::store::MemoryStore;
use mcp_tasks_edge::testing::TestClient;
use serde_json::json;

/// A client of the starter's server whose outbound requests get `status`.
fn client(status: Rc<Cell<u16>>) -> (TestClient<Arc<MemoryStore>>, Rc<FakeOutbound>) {
    let config = Config {
        state_keys: mcp_tasks_edge::crypto::Keyring::new(
            b"starter-test-secret-of-32-bytes-or-more".to_vec(),
        ),
        outbound: OutboundPolicy::allowing(&["https://app.example".to_owned()], 4096).unwrap(),
        ..Config::default()
    };
    let fake = Rc::new(FakeOutbound::new(move |_| {
        Ok(OutboundResponse {
            status: status.get(),
            headers: vec![],
            body: vec![],
        })
    }));
    let tools = mcp_tasks_edge_starter::tools(&|_: &str| None).unwrap();
    let server = Server::new(
        Arc::new(MemoryStore::new()),
        config,
        tools,
        Box::new(SequentialIds::starting_at(1)),
    )
    .unwrap()
    .with_outbound(Box::new(fake.clone()));
    (TestClient::new(server, 1_790_000_000_000), fake)
}

#[test]
fn waits_until_the_url_answers_2xx() {
    let status = Rc::new(Cell::new(503));
    let (c, fake) = client(status.clone());
    let task = c
        .start("wait_for_url", json!({"url": "https://app.example/health"}))
        .unwrap();
    c.tick_after(0);
    c.tick_after(1_000);
    assert_eq!(c.task(&task).unwrap()["status"], "working");
    status.set(200);
    c.tick_after(2_000);
    let t = c.task(&task).unwrap();
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["result"]["structuredContent"]["checks"], 3);
    assert_eq!(fake.requests().len(), 3);
}

#[test]
fn gives_up_after_max_checks_and_refuses_other_origins() {
    let (c, _) = client(Rc::new(Cell::new(503)));
    let task = c
        .start(
            "wait_for_url",
            json!({"url": "https://app.example/", "max_checks": 2}),
        )
        .unwrap();
    c.tick_after(0);
    c.tick_after(1_000);
    let t = c.task(&task).unwrap();
    assert_eq!(t["status"], "failed", "{t}");

    let task = c
        .start("wait_for_url", json!({"url": "https://elsewhere.example/"}))
        .unwrap();
    c.tick_after(0);
    let t = c.task(&task).unwrap();
    assert_eq!(t["status"], "failed");
    let message = t["error"]["message"].as_str().unwrap();
    assert!(message.contains("not on the allow-list"), "{message}");
}
