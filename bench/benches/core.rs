//! Micro-benchmarks of the core on the host: parse + dispatch + serialise
//! of `tasks/get`, `tools/call` (create), `tasks/update`, and one runner
//! step, through the HTTP function over `MemoryStore`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use mcp_tasks_edge::block_on;
use mcp_tasks_edge::http::{HttpRequest, serve};
use mcp_tasks_edge::ids::SequentialIds;
use mcp_tasks_edge::server::{Config, RequestContext, Server};
use mcp_tasks_edge::store::MemoryStore;
use mcp_tasks_edge::tasks::record::Owner;
use mcp_tasks_edge::testing::{full_capabilities, meta, standard_headers};
use serde_json::{Value, json};

const T0: i64 = 1_787_481_000_000;

fn server() -> Server<Arc<MemoryStore>> {
    let mut config = Config {
        state_keys: mcp_tasks_edge::crypto::Keyring::new(b"bench-state-secret-of-32-bytes-or-more".to_vec()),
        ..Config::default()
    };
    // One caller creates thousands of tasks here; the quota is measured
    // separately (round trips), so it is off for the timing.
    config.limits.max_outstanding_tasks = 0;
    config.limits.max_stored_bytes = 0;
    config.limits.max_tasks_per_minute = 0;
    config.limits.max_listen_streams = 0;
    Server::new(
        Arc::new(MemoryStore::new()),
        config,
        mcp_tasks_edge::conformance::tools().and(mcp_tasks_edge::demo::tools(1_000)),
        Box::new(SequentialIds::starting_at(1)),
    )
    .expect("server")
}

struct Request {
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn request(method: &str, mut params: Value) -> Request {
    params["_meta"] = meta(full_capabilities());
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    Request {
        headers: standard_headers(&msg),
        body: serde_json::to_vec(&msg).expect("json"),
    }
}

fn send(s: &Server<Arc<MemoryStore>>, r: &Request, now: i64) -> Vec<u8> {
    let req = HttpRequest {
        method: "POST",
        path: "/mcp",
        headers: &mcp_tasks_edge::http::header_refs(&r.headers),
        body: &r.body,
    };
    let ctx = RequestContext {
        owner: Owner {
            tenant: "acme".into(),
            principal: "alice".into(),
        },
        now,
    };
    block_on(serve(s, &req, &ctx)).body_bytes().to_vec()
}

fn create(s: &Server<Arc<MemoryStore>>, tool: &str, args: Value) -> String {
    let out = send(
        s,
        &request("tools/call", json!({"name": tool, "arguments": args})),
        T0,
    );
    let v: Value = serde_json::from_slice(&out).expect("json");
    v["result"]["taskId"].as_str().expect("task id").to_owned()
}

fn benches(c: &mut Criterion) {
    let s = server();
    let task = create(&s, "generate_report", json!({"size": "large"}));
    let get = request("tasks/get", json!({"taskId": task}));
    c.bench_function("tasks/get (working task)", |b| {
        b.iter(|| black_box(send(&s, &get, T0)))
    });

    let call = request(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 60}}),
    );
    c.bench_function("tools/call (create task)", |b| {
        b.iter(|| black_box(send(&s, &call, T0)))
    });

    // tasks/update on a task waiting for input: each iteration needs a fresh
    // waiting task, made outside the measured part.
    c.bench_function("tasks/update (answer, resumes task)", |b| {
        b.iter_batched(
            || {
                let s = server();
                let id = create(&s, "confirm_delete", json!({"filename": "f"}));
                block_on(s.tick(T0));
                let up = request("tasks/update", json!({"taskId": id, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}}));
                (s, up)
            },
            |(s, up)| black_box(send(&s, &up, T0)),
            criterion::BatchSize::SmallInput,
        )
    });

    c.bench_function("runner step (tick on one due task)", |b| {
        b.iter_batched(
            || {
                let s = server();
                create(&s, "slow_compute", json!({"seconds": 1}));
                s
            },
            |s| black_box(block_on(s.tick(T0 + 1_000))),
            criterion::BatchSize::SmallInput,
        )
    });
}

criterion_group!(core, benches);
criterion_main!(core);
