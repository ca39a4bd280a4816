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
        (
            "MCP_STATE_SECRET".into(),
            "starter-state-secret-of-32-bytes!!".into(),
        ),
        ("MCP_OUTBOUND_ALLOW".into(), up.origin()),
    ];
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let c = Client::new(Runtime::from_component(&engine, &component, store, s).unwrap());

    let listed = c.ok("tools/list", json!({})).await;
    assert_eq!(listed["tools"][0]["name"], "wait_for_url", "{listed}");
    assert_eq!(listed["tools"][1]["name"], "check_urls", "{listed}");
    assert_eq!(listed["tools"].as_array().unwrap().len(), 2);

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

/// Progress reports seen: (progress, total).
type Seen = Arc<std::sync::Mutex<Vec<(f64, Option<f64>)>>>;

/// Collects the progress notifications rmcp hands to its client handler.
#[derive(Clone)]
struct ProgressCollector {
    config: rmcp::model::ClientConfig,
    seen: Seen,
}

impl rmcp::ClientHandler for ProgressCollector {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        self.config.clone()
    }

    fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) -> impl Future<Output = ()> + rmcp::service::MaybeSendFuture + '_ {
        self.seen
            .lock()
            .unwrap()
            .push((params.progress, params.total));
        std::future::ready(())
    }
}

/// The starter as a user's server beside its task tool: its resource, its
/// prompt (and the completion of its argument) and its progress-reporting
/// tool, through rmcp 3.11 over HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_reads_the_starters_resource_prompt_completion_and_progress() {
    use rmcp::model::{
        CallToolRequestParams, ClientCapabilities, GetPromptRequestParams, Implementation,
        NumberOrString, ProgressToken, ProtocolVersion, ReadResourceRequestParams,
        RequestParamsMeta,
    };
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::{ClientLifecycleMode, ClientServiceExt};

    let dir = TempDir::new("starter-rmcp");
    let clock = Clock::System;
    let (engine, component) = other_component("mcp_tasks_edge_starter");
    let mut s = settings(&clock);
    s.env = vec![
        ("MCP_AUTH".into(), "insecure-local".into()),
        (
            "MCP_STATE_SECRET".into(),
            "starter-state-secret-of-32-bytes!!".into(),
        ),
    ];
    s.guest_stderr = false;
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let rt = Runtime::from_component(&engine, &component, store, s).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = crate::serve::start(rt, listener, true).unwrap();

    let seen: Seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let handler = ProgressCollector {
        config: rmcp::model::ClientConfig::new(
            ClientCapabilities::builder().build(),
            Implementation::new("starter-user", "0.1.0"),
        ),
        seen: seen.clone(),
    };
    let client = handler
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(host.url()),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap();
    let peer = client.peer();

    let resources = serde_json::to_value(peer.list_resources(None).await.unwrap()).unwrap();
    assert_eq!(
        resources["resources"][0]["uri"], "starter://about",
        "{resources}"
    );
    let about = serde_json::to_value(
        peer.read_resource(ReadResourceRequestParams::new("starter://about"))
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(
        about["contents"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("# Starter"),
        "{about}"
    );

    let prompts = serde_json::to_value(peer.list_prompts(None).await.unwrap()).unwrap();
    assert_eq!(prompts["prompts"][0]["name"], "watch_deploy", "{prompts}");
    let mut args = serde_json::Map::new();
    args.insert("url".into(), json!("https://example.com/health"));
    let got = serde_json::to_value(
        peer.get_prompt(GetPromptRequestParams::new("watch_deploy").with_arguments(args))
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(
        got["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("https://example.com/health"),
        "{got}"
    );
    let values = peer
        .complete_prompt_simple("watch_deploy", "url", "https://")
        .await
        .unwrap();
    assert_eq!(values, ["https://", "https://localhost:8443/health"]);

    let mut call = CallToolRequestParams::new("check_urls").with_arguments(
        json!({"urls": ["https://a.example", "nope"]})
            .as_object()
            .unwrap()
            .clone(),
    );
    call.set_progress_token(ProgressToken(NumberOrString::Number(7)));
    let result = serde_json::to_value(peer.call_tool(call).await.unwrap()).unwrap();
    assert_eq!(
        result["structuredContent"],
        json!({"usable": ["https://a.example"], "unusable": ["nope"]}),
        "{result}"
    );
    // Notifications are handled as they arrive; give the last one a moment.
    for _ in 0..50 {
        if seen.lock().unwrap().len() >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // rmcp runs each notification's handler as its own task, so they may
    // finish in any order; the order on the wire is checked in the core
    // tests (tests/core/catalog.rs, tests/core/legacy.rs).
    let mut seen = seen.lock().unwrap().clone();
    seen.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(seen, [(0.0, Some(2.0)), (1.0, Some(2.0)), (2.0, Some(2.0))]);
    client.cancel().await.unwrap();
}
