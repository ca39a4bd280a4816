//! What a task step with one outbound call costs on the local host, next
//! to the bare HTTP round trip it makes. A job API on 127.0.0.1 answers
//! "running" to every poll; `run_job` polls it once per step. Prints the
//! mean time of a tick that runs one such step (claim, guest step with one
//! GET through `wasi:http/outgoing-handler`, commit), the mean raw GET round
//! trip from this process (a new connection each, as the host makes), and
//! the difference, for both SQLite sync modes.
//!
//! `cargo run --release --bin outbound_probe -- [N]` (after building the
//! component: `cargo build --release --target wasm32-wasip2 -p
//! mcp-tasks-edge-server --features conformance`).

use mcp_tasks_edge_host::{runtime, sqlite};

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::json;

const T0: i64 = 1_790_000_000_000;

async fn api(req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = if req.method() == hyper::Method::POST {
        r#"{"id":"job-1"}"#
    } else {
        r#"{"status":"running"}"#
    };
    let _ = req.into_body().collect().await;
    Ok(Response::new(Full::new(Bytes::from_static(
        body.as_bytes(),
    ))))
}

async fn start_api() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(api))
                    .await;
            });
        }
    });
    addr
}

/// One GET on a new connection, the body read.
async fn raw_get(addr: std::net::SocketAddr) {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let req = Request::get("/api/jobs/job-1")
        .header("host", addr.to_string())
        .body(Empty::<Bytes>::new())
        .expect("request");
    let resp = send.send_request(req).await.expect("response");
    let _ = resp.into_body().collect().await.expect("body");
}

async fn probe(n: u32, sync: sqlite::Sync, addr: std::net::SocketAddr) -> Duration {
    let dir = std::env::temp_dir().join(format!(
        "mcp-outbound-probe-{}-{sync:?}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Arc::new(sqlite::SqliteStore::open_with(&dir, sync).expect("store"));
    let origin = format!("http://{addr}");
    let url = format!("{origin}/api");
    let mut settings = runtime::Settings::new(
        [
            ("MCP_TOOLS", "all"),
            ("MCP_AUTH", "insecure-local"),
            ("MCP_STATE_SECRET", "probe-state-secret-0123456789-abcdef"),
            ("MCP_MAX_OUTSTANDING_TASKS", "0"),
            ("MCP_OUTBOUND_ALLOW", origin.as_str()),
            ("JOB_API_URL", url.as_str()),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    settings.guest_stderr = false;
    let clock = runtime::Clock::manual(T0);
    settings.clock = clock.clone();
    let component = runtime::component_path();
    let rt = runtime::Runtime::new(&component, store, settings).expect("runtime");
    let body = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "run_job", "arguments": {"input": "probe"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}}}}))
    .expect("json");
    let headers: [(&str, &[u8]); 5] = [
        ("host", b"x"),
        ("content-type", b"application/json"),
        ("mcp-protocol-version", b"2026-07-28"),
        ("mcp-method", b"tools/call"),
        ("mcp-name", b"run_job"),
    ];
    let created = rt
        .request("POST", "/mcp", &headers, body)
        .await
        .expect("call");
    assert_eq!(created.status, 200, "{:?}", created.body);
    rt.tick(clock.now_ms()).await.expect("submit");
    // Warm up: instances, connections to SQLite.
    for _ in 0..20 {
        clock.advance(6_000);
        rt.tick(clock.now_ms()).await.expect("tick");
    }
    let started = Instant::now();
    for _ in 0..n {
        clock.advance(6_000);
        let r = rt.tick(clock.now_ms()).await.expect("tick");
        assert_eq!(r.stepped, 1, "{r:?}");
    }
    let took = started.elapsed();
    let _ = std::fs::remove_dir_all(&dir);
    took / n
}

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    tokio.block_on(async {
        let addr = start_api().await;
        for _ in 0..20 {
            raw_get(addr).await;
        }
        let started = Instant::now();
        for _ in 0..n {
            raw_get(addr).await;
        }
        let raw = started.elapsed() / n;
        println!("raw GET round trip (new connection): {:.1} µs", raw.as_secs_f64() * 1e6);
        for sync in [sqlite::Sync::Normal, sqlite::Sync::Full] {
            let step = probe(n, sync, addr).await;
            println!(
                "tick with one outbound step, sync={sync:?}: {:.1} µs; over the raw round trip: {:.1} µs",
                step.as_secs_f64() * 1e6,
                (step.as_secs_f64() - raw.as_secs_f64()) * 1e6
            );
        }
    });
}
