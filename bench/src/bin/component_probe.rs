//! Where the time of one call into the component goes: the same loop over
//! requests that do less and less work in the guest. Prints mean µs per
//! call (guest time, host store calls excluded) for each.

use mcp_tasks_edge_host::{runtime, sqlite};

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

/// A probe case: its name, path, headers and body.
type Case = (&'static str, &'static str, Vec<(String, String)>, Vec<u8>);

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio");
    let dir = std::env::temp_dir().join(format!("mcp-probe-{}", std::process::id()));
    let store =
        Arc::new(sqlite::SqliteStore::open_with(&dir, sqlite::Sync::Normal).expect("store"));
    // PROBE_JWT=<dir>: every request carries the bearer token that
    // `node bench/mint-jwt.mjs http://127.0.0.1:8788/mcp https://bench.example <dir>`
    // wrote, and the component verifies it (`MCP_AUTH=jwt`), as
    // `ours-wasi-jwt` in bench/run.sh runs.
    let jwt = std::env::var("PROBE_JWT").ok().map(|dir| {
        let read = |f: &str| {
            std::fs::read_to_string(std::path::Path::new(&dir).join(f)).expect("PROBE_JWT dir")
        };
        (read("jwks.json"), read("token").trim().to_owned())
    });
    let mut env: Vec<(String, String)> = [
        ("MCP_TOOLS", "all"),
        ("MCP_REPORT_OUTLINE_MS", "0"),
        ("MCP_AUTH", "insecure-local"),
        ("MCP_STATE_SECRET", "probe-state-secret-0123456789-abcdef"),
        ("MCP_MAX_OUTSTANDING_TASKS", "0"),
        ("MCP_MAX_STORED_BYTES", "0"),
        ("MCP_MAX_TASKS_PER_MINUTE", "0"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let bearer = jwt.map(|(keys, token)| {
        env.retain(|(k, _)| k != "MCP_AUTH");
        env.extend(
            [
                ("MCP_AUTH", "jwt"),
                ("MCP_RESOURCE_URL", "http://127.0.0.1:8788/mcp"),
                ("MCP_JWT_ISSUER", "https://bench.example"),
                ("MCP_JWT_KEYS", keys.as_str()),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        ("authorization".to_owned(), format!("Bearer {token}"))
    });
    let mut settings = runtime::Settings::new(env);
    settings.guest_stderr = false;
    let component = runtime::component_path();
    let rt = runtime::Runtime::new(&component, store, settings).expect("runtime");
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}});
    let body = |m: &str, p: serde_json::Value| {
        let mut p = p;
        p["_meta"] = meta.clone();
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": m, "params": p}))
            .expect("json")
    };
    tokio.block_on(async {
        let h = |m: &'static str, name: Option<String>| -> Vec<(String, String)> {
            let mut v = vec![
                ("host".into(), "127.0.0.1".into()),
                ("content-type".into(), "application/json".into()),
                ("mcp-protocol-version".into(), "2026-07-28".into()),
                ("mcp-method".into(), m.into()),
            ];
            if let Some(n) = name {
                v.push(("mcp-name".into(), n));
            }
            v.extend(bearer.clone());
            v
        };
        let created = {
            let hs = h("tools/call", Some("slow_compute".into()));
            let refs: Vec<(&str, &[u8])> =
                hs.iter().map(|(k, v)| (k.as_str(), v.as_bytes())).collect();
            let r = rt
                .request(
                    "POST",
                    "/mcp",
                    &refs,
                    body(
                        "tools/call",
                        json!({"name": "slow_compute", "arguments": {"seconds": 3600}}),
                    ),
                )
                .await
                .expect("create");
            r.json()["result"]["taskId"]
                .as_str()
                .expect("id")
                .to_owned()
        };
        // A 2025-11-25 session, as `load --workload legacy-get` opens one.
        let legacy_headers = {
            let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "probe", "version": "0"}}});
            let mut hs = vec![
                ("host", b"127.0.0.1".as_slice()),
                ("content-type", b"application/json".as_slice()),
            ];
            if let Some((k, v)) = &bearer {
                hs.push((k.as_str(), v.as_bytes()));
            }
            let r = rt
                .request("POST", "/mcp", &hs, serde_json::to_vec(&init).expect("json"))
                .await
                .expect("initialize");
            let session = r.header("mcp-session-id").expect("session").to_owned();
            vec![
                ("host".into(), "127.0.0.1".into()),
                ("content-type".into(), "application/json".into()),
                ("accept".into(), "application/json, text/event-stream".into()),
                ("mcp-protocol-version".into(), "2025-11-25".into()),
                ("mcp-session-id".into(), session),
            ]
            .into_iter()
            .chain(bearer.clone())
            .collect::<Vec<_>>()
        };
        // A message with the headers the load client sends, to the loopback
        // Host it names.
        let as_load_sends = |name, msg: serde_json::Value| {
            let mut hs = mcp_tasks_edge::testing::standard_headers(&msg);
            hs.insert(0, ("host".into(), "127.0.0.1:8788".into()));
            hs.extend(bearer.clone());
            (name, "/mcp", hs, serde_json::to_vec(&msg).expect("json"))
        };
        let cases: Vec<Case> = vec![
            (
                "GET /nope (404, no parsing)",
                "/nope",
                h("x", None),
                Vec::new(),
            ),
            (
                "POST parse error (400)",
                "/mcp",
                h("x", None),
                b"{".to_vec(),
            ),
            (
                "server/discover",
                "/mcp",
                h("server/discover", None),
                body("server/discover", json!({})),
            ),
            (
                "tasks/get",
                "/mcp",
                h("tasks/get", Some(created.clone())),
                body("tasks/get", json!({"taskId": created})),
            ),
            (
                "legacy tasks/get",
                "/mcp",
                legacy_headers,
                serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get",
                    "params": {"taskId": created}}))
                .expect("json"),
            ),
            // What `load --workload flow` sends first: a task whose first
            // step runs inside the request.
            as_load_sends(
                "tools/call generate_report",
                mcp_tasks_edge_bench::message(
                    8,
                    "tools/call",
                    json!({"name": "generate_report", "arguments": {"size": "small"}}),
                ),
            ),
            // Exactly what `load --workload get` sends.
            as_load_sends(
                "tasks/get as load sends it",
                mcp_tasks_edge_bench::message(7, "tasks/get", json!({"taskId": created})),
            ),
        ];
        // PROBE_ONLY=<name prefix> runs one case (for a profile of it).
        let only = std::env::var("PROBE_ONLY").ok();
        for (name, path, hs, b) in &cases {
            if only.as_deref().is_some_and(|o| !name.starts_with(o)) {
                continue;
            }
            let refs: Vec<(&str, &[u8])> =
                hs.iter().map(|(k, v)| (k.as_str(), v.as_bytes())).collect();
            let method = if path == &"/nope" { "GET" } else { "POST" };
            let first = rt
                .request(method, path, &refs, b.clone())
                .await
                .expect("first");
            let head = String::from_utf8_lossy(&first.body[..first.body.len().min(60)]);
            println!("{name}: {} {head}…", first.status);
            for _ in 0..200 {
                rt.request(method, path, &refs, b.clone())
                    .await
                    .expect("warm");
            }
            let before = rt.limit_stats().store_ns.get();
            let t = Instant::now();
            for _ in 0..n {
                rt.request(method, path, &refs, b.clone())
                    .await
                    .expect("call");
            }
            let total = t.elapsed().as_nanos() as f64;
            let store = (rt.limit_stats().store_ns.get() - before) as f64;
            println!(
                "wasi:http  {name:32} {:7.1} µs/call ({:.1} µs in host store calls)",
                (total - store) / f64::from(n) / 1000.0,
                store / f64::from(n) / 1000.0
            );
            // The same request through the `exchange` export.
            let fields = hs.iter().map(|(n, v)| (n.as_str(), v.as_bytes()));
            let request = runtime::ExchangeRequest::new(method, path, fields, b.clone())
                .expect("a request exchange carries");
            for _ in 0..200 {
                rt.exchange(&request).await.expect("warm");
            }
            let before = rt.limit_stats().store_ns.get();
            let calls_before = rt.limit_stats().store_calls.get();
            let t = Instant::now();
            for _ in 0..n {
                rt.exchange(&request).await.expect("call");
            }
            let total = t.elapsed().as_nanos() as f64;
            let store = (rt.limit_stats().store_ns.get() - before) as f64;
            let calls = (rt.limit_stats().store_calls.get() - calls_before) as f64;
            println!(
                "exchange   {name:32} {:7.1} µs/call ({:.1} µs in {:.1} host store calls)",
                (total - store) / f64::from(n) / 1000.0,
                store / f64::from(n) / 1000.0,
                calls / f64::from(n)
            );
        }
    });
    let only = std::env::var("PROBE_ONLY").ok();
    if only.is_none_or(|o| "create with quotas".starts_with(&o)) {
        tokio.block_on(creates_with_quotas(&component, &dir, n));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Creates by one caller under the default quotas (the unfinished-task and
/// byte limits; the rate limit off), 50 a second on a manual clock, each
/// task finishing in the next tick: the per-caller quota record in its
/// steady state, read and rewritten by every create.
async fn creates_with_quotas(component: &std::path::Path, dir: &std::path::Path, n: u32) {
    let dir = dir.join("quotas");
    let store =
        Arc::new(sqlite::SqliteStore::open_with(&dir, sqlite::Sync::Normal).expect("store"));
    let mut settings = runtime::Settings::new(
        [
            ("MCP_TOOLS", "all"),
            ("MCP_AUTH", "insecure-local"),
            ("MCP_STATE_SECRET", "probe-state-secret-0123456789-abcdef"),
            ("MCP_MAX_TASKS_PER_MINUTE", "0"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    settings.guest_stderr = false;
    let clock = runtime::Clock::manual(1_800_000_000_000);
    settings.clock = clock.clone();
    let rt = runtime::Runtime::new(component, store, settings).expect("runtime");
    let msg = mcp_tasks_edge_bench::message(
        9,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 0.001}}),
    );
    let mut headers = mcp_tasks_edge::testing::standard_headers(&msg);
    headers.insert(0, ("host".into(), "127.0.0.1:8788".into()));
    let fields = headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes()));
    let body = serde_json::to_vec(&msg).expect("json");
    let request = runtime::ExchangeRequest::new("POST", "/mcp", fields, body)
        .expect("a request exchange carries");
    // Every 50 creates the tasks made so far finish.
    let finish =
        || async { while rt.tick(rt.clock().now_ms()).await.expect("tick").stepped > 0 {} };
    let (mut guest_ns, mut refused) = (0f64, 0u32);
    // Warm: past the unfinished-task limit and the finished list's bound.
    let warm = 2_000;
    for i in 0..warm + n {
        clock.advance(20);
        if i % 50 == 0 {
            finish().await;
        }
        let before = rt.limit_stats().store_ns.get();
        let t = Instant::now();
        let r = rt.exchange(&request).await.expect("call");
        let spent = t.elapsed().as_nanos() as f64;
        let store = (rt.limit_stats().store_ns.get() - before) as f64;
        if r.is_none_or(|r| r.status != 200) {
            refused += 1;
        }
        if i >= warm {
            guest_ns += spent - store;
        }
    }
    // The record every create rewrites, and the finished list (when the
    // component keeps one).
    let largest = |pattern: &str| -> i64 {
        rusqlite::Connection::open(rt.store().path())
            .and_then(|c| {
                c.query_row(
                    &format!("SELECT COALESCE(MAX(LENGTH(CAST(body AS BLOB))), 0) FROM entries WHERE key LIKE 'own_%' AND key {pattern}"),
                    [],
                    |row| row.get(0),
                )
            })
            .unwrap_or(-1)
    };
    let (record, finished) = (largest("NOT LIKE '%_done'"), largest("LIKE '%_done'"));
    println!(
        "exchange   {:32} {:7.1} µs/call ({refused} of {} refused; quota record {record} B, finished list {finished} B)",
        "create with quotas (default)",
        guest_ns / f64::from(n) / 1000.0,
        warm + n,
    );
}
