//! The starter crate (`examples/starter`) as a user deploys it: its own
//! component, under the local host, checking a URL on 127.0.0.1.

use std::sync::Arc;

use serde_json::json;

use crate::runtime::{Clock, Runtime};
use crate::sqlite::SqliteStore;
use crate::support::{Client, T0, TempDir, other_component, settings};
use crate::upstream::Upstream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_starter_component_waits_for_a_url() {
    let up = Upstream::start().await;
    up.health(&[503, 503]);
    let dir = TempDir::new("starter");
    let clock = Clock::manual(T0);
    let (engine, component) = other_component("mcp_tasks_edge_starter");
    let mut s = settings(&clock);
    s.env = vec![
        ("MCP_AUTH".into(), "insecure-local".into()),
        ("MCP_STATE_SECRET".into(), "starter-state-secret".into()),
        ("MCP_OUTBOUND_ALLOW".into(), up.origin()),
    ];
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let c = Client::new(Runtime::from_component(&engine, &component, store, s).unwrap());

    let listed = c.ok("tools/list", json!({})).await;
    assert_eq!(listed["tools"][0]["name"], "wait_for_url", "{listed}");
    assert_eq!(listed["tools"].as_array().unwrap().len(), 1);

    let url = format!("{}/health", up.origin());
    let task = c.start("wait_for_url", json!({"url": url})).await;
    let mut t = c.get(&task).await;
    for _ in 0..20 {
        if t["status"] != "working" {
            break;
        }
        clock.advance(2_000);
        c.rt.tick(clock.now_ms()).await.unwrap();
        t = c.get(&task).await;
    }
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["result"]["structuredContent"]["checks"], 3, "{t}");
    assert_eq!(up.seen().len(), 3);
}
