//! A component whose settings are missing or invalid serves nothing: every
//! request is 503 with a JSON-RPC error that names no secret, and a tick
//! reports an error; nothing traps.

use serde_json::json;

use crate::runtime::{Clock, Settings};
use crate::support::{TempDir, env, meta, runtime, standard_headers};

async fn discover(rt: &std::sync::Arc<crate::runtime::Runtime>) -> crate::runtime::Collected {
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta(json!({}))}});
    crate::support::post_raw(
        rt,
        &standard_headers(&msg),
        serde_json::to_vec(&msg).unwrap(),
    )
    .await
}

fn settings_without(var: &str, extra: &[(&str, &str)]) -> Settings {
    let mut e = env(extra);
    e.retain(|(k, _)| k != var);
    let mut s = Settings::new(e);
    s.clock = Clock::System;
    s.guest_stderr = false;
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_settings_answer_503_without_secrets() {
    let dir = TempDir::new("config");
    let cases = [
        ("no state secret", settings_without("MCP_STATE_SECRET", &[])),
        (
            "short state secret",
            settings_without("", &[("MCP_STATE_SECRET", "tiny-secret")]),
        ),
        (
            "unknown tool selection",
            settings_without("", &[("MCP_TOOLS", "everything")]),
        ),
    ];
    for (what, settings) in cases {
        let rt = runtime(dir.path(), settings);
        let resp = discover(&rt).await;
        let v = resp.json();
        assert_eq!(resp.status, 503, "{what}: {v}");
        assert_eq!(v["error"]["code"], -32603, "{what}: {v}");
        assert!(
            !String::from_utf8_lossy(&resp.body).contains("tiny-secret"),
            "{what}"
        );
        let tick = rt.tick(0).await.unwrap();
        assert_eq!((tick.errors, tick.stepped), (1, 0), "{what}: {tick}");
        // The diagnostics need no settings.
        assert_eq!(
            rt.run_store_contract("cfg:").await.unwrap(),
            Ok(13),
            "{what}"
        );
        assert_eq!(rt.traps(), 0, "{what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_auth_configured_serves_nothing() {
    let dir = TempDir::new("config-auth");
    let rt = runtime(dir.path(), settings_without("MCP_AUTH", &[]));
    let resp = discover(&rt).await;
    assert_eq!(resp.status, 503, "{}", resp.json());
    assert_eq!(resp.json()["error"]["code"], -32603);
    assert_eq!(rt.traps(), 0);
}
