//! A component whose settings are missing or invalid serves nothing: every
//! request is 503 with a JSON-RPC error that names no secret, and a tick
//! reports an error; nothing traps.

use serde_json::json;

use crate::runtime::{Clock, Settings};
use crate::support::{HostProcess, TempDir, env, meta, runtime, standard_headers};

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

/// The `host` binary started without its state secret, as an operator
/// might: it serves (every request 503, above), and its ticker, whose
/// every tick fails alike, writes that failure once rather than ten times
/// a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_without_its_settings_writes_the_failing_tick_once() {
    let dir = TempDir::new("config-host");
    let mut host = HostProcess::spawn(
        dir.path(),
        &[],
        &[("MCP_AUTH", "insecure-local")],
        &["MCP_STATE_SECRET"],
    );
    host.listening().await;
    // Twenty ticks and more (one each 100 ms).
    tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;
    assert!(host.exit_within(std::time::Duration::ZERO).await.is_none());
    let stderr = host.stderr();
    assert!(
        stderr.contains("invalid configuration: MCP_STATE_SECRET is not set"),
        "{stderr}"
    );
    let ticks: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("host: tick"))
        .collect();
    assert_eq!(ticks.len(), 1, "{stderr}");
    assert!(ticks[0].contains("errors=1"), "{stderr}");
}

/// Limits the host cannot keep (none at all, more than it can count, a
/// timeout of nothing) are refused at start, naming the option, rather
/// than taken as 1, as a panic on a serving thread, or as a timeout that
/// closes every keep-alive connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_refuses_limits_it_cannot_keep() {
    let dir = TempDir::new("config-limits");
    for args in [
        ["--max-connections", "0"],
        ["--max-connections", "18446744073709551615"],
        ["--max-instances", "0"],
        ["--max-instances", "4294967296"],
        ["--header-timeout-ms", "0"],
        ["--body-timeout-ms", "0"],
        ["--body-timeout-ms", "soon"],
    ] {
        let mut host =
            HostProcess::spawn(dir.path(), &args, &[("MCP_AUTH", "insecure-local")], &[]);
        let Some(status) = host.exit_within(std::time::Duration::from_secs(30)).await else {
            panic!("{args:?}: the host started");
        };
        let stderr = host.stderr();
        assert!(!status.success(), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("{} must be a whole number from 1 to", args[0])),
            "{args:?}: {stderr}"
        );
    }
}

/// `MCP_SERVER_NAME`, `MCP_SERVER_VERSION` and `MCP_INSTRUCTIONS` name the
/// component's server; a name it cannot take is a setting refused (503).
/// With the demo tools only (`MCP_TOOLS=demo`) it advertises no prompts,
/// resources or completions, and their methods are -32601 (404).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_is_named_by_its_settings() {
    let dir = TempDir::new("config-name");
    let rt = runtime(
        dir.path(),
        settings_without(
            "",
            &[
                ("MCP_SERVER_NAME", "acme-reports"),
                ("MCP_SERVER_VERSION", "2.1.0"),
                ("MCP_INSTRUCTIONS", "Call generate_report first."),
                ("MCP_TOOLS", "demo"),
            ],
        ),
    );
    let resp = discover(&rt).await;
    let v = resp.json();
    assert_eq!(resp.status, 200, "{v}");
    assert_eq!(
        v["result"]["_meta"]["io.modelcontextprotocol/serverInfo"],
        json!({"name": "acme-reports", "version": "2.1.0"}),
        "{v}"
    );
    assert_eq!(v["result"]["instructions"], "Call generate_report first.");
    let caps = v["result"]["capabilities"].as_object().unwrap();
    assert_eq!(
        caps.keys().collect::<Vec<_>>(),
        ["extensions", "tools"],
        "{v}"
    );
    for method in ["prompts/list", "resources/list", "completion/complete"] {
        let msg = json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": {"_meta": meta(json!({}))}});
        let resp = crate::support::post_raw(
            &rt,
            &standard_headers(&msg),
            serde_json::to_vec(&msg).unwrap(),
        )
        .await;
        let v = resp.json();
        assert_eq!(
            (resp.status, &v["error"]["code"]),
            (404, &json!(-32601)),
            "{method}: {v}"
        );
    }
    let long = "x".repeat(200);
    let rt = runtime(
        dir.path(),
        settings_without("", &[("MCP_SERVER_NAME", long.as_str())]),
    );
    assert_eq!(discover(&rt).await.status, 503);
}

/// A variable in the host's environment that is not UTF-8 and not one it
/// reads (any process may inherit one) does not stop it from starting; one
/// it passes on to the component is refused at start, by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_variable_that_is_not_utf8_stops_the_host_only_if_it_reads_it() {
    use std::os::unix::ffi::OsStrExt;
    let dir = TempDir::new("config-not-utf8");
    let spawn = |name: &str| {
        let port = crate::support::free_port();
        let child = std::process::Command::new(crate::support::host_binary())
            .args(["--port", &port.to_string(), "--data"])
            .arg(dir.path())
            .envs([
                ("MCP_AUTH", "insecure-local"),
                ("MCP_STATE_SECRET", "wasi-tests-state-secret-of-32-bytes"),
            ])
            .env(name, std::ffi::OsStr::from_bytes(b"caf\xe9"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        HostProcess { child, port }
    };
    let mut host = spawn("UNRELATED_LATIN1");
    host.listening().await;
    let mut host = spawn("MCP_SERVER_NAME");
    let Some(status) = host.exit_within(std::time::Duration::from_secs(30)).await else {
        panic!("the host started with a setting it cannot read");
    };
    let stderr = host.stderr();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("MCP_SERVER_NAME is not valid UTF-8") && !stderr.contains("panicked"),
        "{stderr}"
    );
}
