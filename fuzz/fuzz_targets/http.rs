//! Fuzzes the adapter-facing HTTP function: arbitrary methods, header sets
//! and bodies, with and without a bearer token, against a server over an
//! in-memory store, followed by a tick. Any panic is a crash.

#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use mcp_tasks_edge::auth::{Auth, JwtAuth};
use mcp_tasks_edge::block_on;
use mcp_tasks_edge::http::{HttpBody, HttpRequest, handle};
use mcp_tasks_edge::ids::SequentialIds;
use mcp_tasks_edge::server::{Config, Server};
use mcp_tasks_edge::store::MemoryStore;
use mcp_tasks_edge::tasks::record::Owner;

const T0: i64 = 1_787_481_000_000;
const SECRET: &[u8] = b"fuzzing-hs256-secret-32-bytes-long!!";

fn server(jwt: bool) -> Server<Arc<MemoryStore>> {
    let auth = if jwt {
        Auth::Jwt(Box::new(JwtAuth {
            issuer: "https://issuer.test".into(),
            resource: "http://127.0.0.1/mcp".into(),
            hs256_secret: Some(SECRET.to_vec()),
            keys: Vec::new(),
            tenant_claim: "tenant".into(),
            tenant_required: false,
            types: Vec::new(),
            leeway_ms: 60_000,
            authorization_servers: vec![],
        }))
    } else {
        Auth::InsecureLocal(Owner {
            tenant: "t".into(),
            principal: "p".into(),
        })
    };
    let config = Config {
        state_keys: mcp_tasks_edge::crypto::Keyring::new(
            b"fuzz-state-secret-of-32-bytes!!!".to_vec(),
        ),
        auth,
        ..Config::default()
    };
    // Server construction cannot fail with a sequential id source.
    let tools = mcp_tasks_edge::conformance::tools().and(mcp_tasks_edge::demo::tools(1_000));
    match Server::new(
        Arc::new(MemoryStore::new()),
        config,
        tools,
        Box::new(SequentialIds::starting_at(1)),
    ) {
        Ok(s) => s,
        Err(_) => std::process::abort(),
    }
}

thread_local! {
    // The server is not `Sync` (it lends steps the runtime's outbound HTTP
    // and settings); the fuzzer runs its inputs on one thread.
    static SERVERS: (Server<Arc<MemoryStore>>, Server<Arc<MemoryStore>>) = (server(false), server(true));
}

fuzz_target!(|data: &[u8]| {
    SERVERS.with(|(open, jwt)| run(open, jwt, data));
});

fn run(open: &Server<Arc<MemoryStore>>, jwt: &Server<Arc<MemoryStore>>, data: &[u8]) {
    // Layout: [selector][header lines...]\0[body]
    let (&selector, rest) = match data.split_first() {
        Some(x) => x,
        None => return,
    };
    let (head, body) = match rest.iter().position(|b| *b == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (&rest[..0], rest),
    };
    let mut headers: Vec<(String, String)> = String::from_utf8_lossy(head)
        .lines()
        .filter_map(|l| l.split_once(':').map(|(a, b)| (a.to_owned(), b.to_owned())))
        .collect();
    // Often give the request the headers a real client sends, derived from
    // the body, so the fuzzer gets past the header checks.
    if selector & 1 == 1 {
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
            if let Some(m) = v.get("method").and_then(|m| m.as_str()) {
                headers.push(("Mcp-Method".into(), m.into()));
            }
            headers.push(("MCP-Protocol-Version".into(), "2026-07-28".into()));
            for k in ["name", "taskId", "uri"] {
                if let Some(n) = v
                    .get("params")
                    .and_then(|p| p.get(k))
                    .and_then(|n| n.as_str())
                {
                    headers.push(("Mcp-Name".into(), n.into()));
                }
            }
        }
    }
    let method = match selector >> 5 {
        0..=5 => "POST",
        6 => "GET",
        _ => "DELETE",
    };
    let path = if selector & 2 == 2 {
        "/.well-known/oauth-protected-resource/mcp"
    } else {
        "/mcp"
    };
    let server = if selector & 4 == 4 { jwt } else { open };
    let now = T0 + i64::from(selector & 0x18) * 10_000;
    let headers = mcp_tasks_edge::http::header_refs(&headers);
    let req = HttpRequest {
        method,
        path,
        headers: &headers,
        body,
    };
    let resp = block_on(handle(server, &req, now));
    assert!(
        resp.status != 500 || resp.trace.error == Some(-32603),
        "a 500 for input"
    );
    if let HttpBody::Events(mut stream) = resp.body {
        for _ in 0..4 {
            match block_on(stream.next(server, now)) {
                mcp_tasks_edge::http::Next::End => break,
                _ => {}
            }
        }
    }
    block_on(server.tick(now + 2_000));
}
