//! Per-call time of the component's exported handlers inside wasmtime
//! (pooled instances, as the local host runs them): the `exchange` export
//! the local host uses for requests, and `wasi:http/incoming-handler`,
//! excluding the time spent in host store calls (SQLite), which is measured
//! and subtracted. Needs the release component:
//! `cargo build --release --target wasm32-wasip2 -p mcp-tasks-edge-server --features conformance`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use mcp_tasks_edge_host::{runtime, sqlite};

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use mcp_tasks_edge::testing::{full_capabilities, meta, standard_headers};
use serde_json::{Value, json};

use runtime::{Runtime, Settings};

struct Req {
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn req(method: &str, mut params: Value) -> Req {
    params["_meta"] = meta(full_capabilities());
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut headers = standard_headers(&msg);
    headers.push(("host".to_owned(), "127.0.0.1".to_owned()));
    Req {
        headers,
        body: serde_json::to_vec(&msg).unwrap(),
    }
}

/// Through `wasi:http/incoming-handler`.
async fn send(rt: &Arc<Runtime>, r: &Req) -> Value {
    let h: Vec<(&str, &[u8])> = r
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_bytes()))
        .collect();
    let resp = rt
        .request("POST", "/mcp", &h, r.body.clone())
        .await
        .unwrap();
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
    resp.json()
}

/// Through the `exchange` export (what the local host uses for requests).
async fn exchange(rt: &Arc<Runtime>, r: &Req) -> Value {
    let fields = r.headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes()));
    let request = runtime::ExchangeRequest::new("POST", "/mcp", fields, r.body.clone())
        .expect("a request exchange carries");
    let resp = rt.exchange(&request).await.unwrap().expect("not a stream");
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(resp.body()));
    serde_json::from_slice(resp.body()).unwrap()
}

/// Times `iters` calls, minus the time spent inside host store calls.
async fn guest_time(rt: &Arc<Runtime>, iters: u64, mut call: impl AsyncFnMut() -> ()) -> Duration {
    let stats = rt.limit_stats();
    let store_before = stats.store_ns.get();
    let started = Instant::now();
    for _ in 0..iters {
        call().await;
    }
    let total = started.elapsed();
    let store = Duration::from_nanos(stats.store_ns.get() - store_before);
    total.saturating_sub(store)
}

fn benches(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("mcp-bench-component-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Arc::new(sqlite::SqliteStore::open_with(&dir, sqlite::Sync::Normal).unwrap());
    let mut settings = Settings::new(
        [
            ("MCP_TOOLS", "all"),
            ("MCP_AUTH", "insecure-local"),
            ("MCP_STATE_SECRET", "bench-state-secret-0123456789"),
            ("MCP_MAX_OUTSTANDING_TASKS", "0"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    settings.guest_stderr = false;
    let component = runtime::component_path();
    let rt = Runtime::new(&component, store, settings)
        .expect("the release component (cargo build --release --target wasm32-wasip2 -p mcp-tasks-edge-server --features conformance)");

    let task = tokio.block_on(async {
        let v = send(
            &rt,
            &req(
                "tools/call",
                json!({"name": "generate_report", "arguments": {"size": "large"}}),
            ),
        )
        .await;
        v["result"]["taskId"].as_str().unwrap().to_owned()
    });
    let get = req("tasks/get", json!({"taskId": task}));
    let discover = req("server/discover", json!({}));
    let create = req(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 3600}}),
    );

    let mut group = c.benchmark_group("component exchange (host store calls excluded)");
    group.bench_function("tasks/get", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(guest_time(&rt, iters, async || {
                exchange(&rt, &get).await;
            }))
        })
    });
    group.bench_function("server/discover (no store)", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(guest_time(&rt, iters, async || {
                exchange(&rt, &discover).await;
            }))
        })
    });
    group.bench_function("tools/call (create task)", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(guest_time(&rt, iters, async || {
                exchange(&rt, &create).await;
            }))
        })
    });
    group.bench_function("tasks/update (answer, resumes task)", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(async {
                let mut updates = Vec::new();
                for _ in 0..iters {
                    let v = exchange(&rt, &req("tools/call", json!({"name": "confirm_delete", "arguments": {"filename": "f"}}))).await;
                    let id = v["result"]["taskId"].as_str().unwrap().to_owned();
                    updates.push(req("tasks/update", json!({"taskId": id, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}})));
                }
                rt.tick(runtime::Clock::System.now_ms() + 1).await.unwrap();
                let mut it = updates.iter();
                guest_time(&rt, iters, async || { exchange(&rt, it.next().unwrap()).await; }).await
            })
        })
    });
    group.finish();

    let mut group = c.benchmark_group("component wasi:http (host store calls excluded)");
    group.bench_function("tasks/get", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(guest_time(&rt, iters, async || {
                send(&rt, &get).await;
            }))
        })
    });
    group.bench_function("server/discover (no store)", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(guest_time(&rt, iters, async || {
                send(&rt, &discover).await;
            }))
        })
    });
    group.bench_function("tools/call (create task)", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(guest_time(&rt, iters, async || {
                send(&rt, &create).await;
            }))
        })
    });
    group.bench_function("tasks/update (answer, resumes task)", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(async {
                // Tasks waiting for input, made outside the timed part.
                let mut updates = Vec::new();
                for _ in 0..iters {
                    let v = send(&rt, &req("tools/call", json!({"name": "confirm_delete", "arguments": {"filename": "f"}}))).await;
                    let id = v["result"]["taskId"].as_str().unwrap().to_owned();
                    updates.push(req("tasks/update", json!({"taskId": id, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}})));
                }
                rt.tick(runtime::Clock::System.now_ms() + 1).await.unwrap();
                let mut it = updates.iter();
                guest_time(&rt, iters, async || { send(&rt, it.next().unwrap()).await; }).await
            })
        })
    });
    group.bench_function("runner tick (one due task)", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    // Work left due by the benchmarks above is drained first
                    // (untimed), so the timed tick steps the one new task.
                    while rt.tick(runtime::Clock::System.now_ms()).await.unwrap().due > 0 {}
                    send(
                        &rt,
                        &req(
                            "tools/call",
                            json!({"name": "slow_compute", "arguments": {"seconds": 0.001}}),
                        ),
                    )
                    .await;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let now = runtime::Clock::System.now_ms();
                    total += guest_time(&rt, 1, async || {
                        rt.tick(now).await.unwrap();
                    })
                    .await;
                }
                total
            })
        })
    });
    group.finish();
    let stats = rt.limit_stats();
    eprintln!(
        "host store calls: {}, {:.1} µs each on average",
        stats.store_calls.get(),
        stats.store_ns.get() as f64
            / stats.store_calls.get().max(1) as f64
            / 1000.0
    );
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(component, benches);
criterion_main!(component);
