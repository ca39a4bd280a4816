//! A test harness around the core: a server over a shared in-memory store,
//! a fixed clock the test moves, deterministic ids, and a client that sets
//! the standard MCP headers from the body the way a conforming client does.

use std::cell::Cell;
use std::sync::Arc;

use mcp_tasks_edge::block_on;
use mcp_tasks_edge::http::{self, HttpBody, HttpRequest, HttpResponse};
use mcp_tasks_edge::ids::SequentialIds;
use mcp_tasks_edge::server::{Config, RequestContext, Server};
use mcp_tasks_edge::store::{Entry, MemoryStore, Store, StoreError, Version};
use mcp_tasks_edge::tasks::record::Owner;
use mcp_tasks_edge::tasks::runner::TickReport;
use mcp_tasks_edge::time::Millis;
use mcp_tasks_edge::tools::ToolSet;
use serde_json::{Value, json};

/// 2026-08-23T10:30:00.000Z
pub const T0: i64 = 1_787_481_000_000;
pub const TASKS: &str = "io.modelcontextprotocol/tasks";

pub fn owner(tenant: &str, principal: &str) -> Owner {
    Owner {
        tenant: tenant.into(),
        principal: principal.into(),
    }
}

/// Every tool the server crate offers with `MCP_TOOLS=all`: the
/// conformance fixtures, then the demo tools.
pub fn all_tools() -> ToolSet {
    mcp_tasks_edge::conformance::tools().and(mcp_tasks_edge::demo::tools(
        mcp_tasks_edge::demo::DEFAULT_OUTLINE_MS,
    ))
}

pub fn config() -> Config {
    Config {
        state_keys: mcp_tasks_edge::crypto::Keyring::new(
            b"test-secret-key-of-at-least-32-bytes".to_vec(),
        ),
        ..Config::default()
    }
}

/// Capabilities of a client that supports tasks and form elicitation, and
/// the required `_meta` (the library's test support).
pub use mcp_tasks_edge::testing::{full_capabilities as caps, meta};

pub type SharedStore = Arc<MemoryStore>;

pub struct Harness {
    pub store: SharedStore,
    pub server: Server<SharedStore>,
    pub now: Cell<i64>,
    pub owner: Owner,
    pub next_id: Cell<i64>,
}

impl Harness {
    pub fn new() -> Self {
        Self::over(Arc::new(MemoryStore::new()), 1)
    }

    /// A server over an existing store (a replica, or a restart).
    pub fn over(store: SharedStore, seed: u64) -> Self {
        Self::with_config(store, seed, config())
    }

    pub fn with_config(store: SharedStore, seed: u64, config: Config) -> Self {
        let server = Server::new(
            store.clone(),
            config,
            all_tools(),
            Box::new(SequentialIds::starting_at(seed * 1_000_000)),
        )
        .unwrap();
        Harness {
            store,
            server,
            now: Cell::new(T0),
            owner: owner("acme", "alice"),
            next_id: Cell::new(1),
        }
    }

    /// A harness whose server registers only `tools`, with the test
    /// settings.
    pub fn with_tools(tools: mcp_tasks_edge::tools::ToolSet) -> Self {
        Harness::new().with_server(|s| {
            Server::new(
                s.store().clone(),
                config(),
                tools,
                Box::new(SequentialIds::starting_at(1)),
            )
            .unwrap()
        })
    }

    /// Rebuilds the server (to lend it outbound HTTP, settings, a clock).
    pub fn with_server(
        mut self,
        f: impl FnOnce(Server<SharedStore>) -> Server<SharedStore>,
    ) -> Self {
        self.server = f(self.server);
        self
    }

    pub fn owned_by(mut self, o: Owner) -> Self {
        self.owner = o;
        self
    }

    pub fn advance(&self, ms: i64) {
        self.now.set(self.now.get() + ms);
    }

    pub fn tick(&self) -> TickReport {
        block_on(self.server.tick(self.now.get()))
    }

    pub fn ctx(&self) -> RequestContext {
        RequestContext {
            owner: self.owner.clone(),
            now: self.now.get(),
        }
    }

    /// POSTs raw bytes with the given headers.
    pub fn post_raw(&self, headers: &[(&str, &str)], body: &[u8]) -> HttpResponse {
        self.request("POST", "/mcp", headers, body)
    }

    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> HttpResponse {
        let req = HttpRequest {
            method,
            path,
            headers,
            body,
        };
        block_on(http::serve(&self.server, &req, &self.ctx()))
    }

    /// POSTs a JSON-RPC message with the headers a conforming client derives
    /// from it. Returns the status and the parsed body (`Null` when empty).
    pub fn post(&self, msg: &Value) -> (u16, Value) {
        let headers = standard_headers(msg);
        let refs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let resp = self.post_raw(&refs, &serde_json::to_vec(msg).unwrap());
        (resp.status, body_json(&resp))
    }

    pub fn fresh_id(&self) -> i64 {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        id
    }

    /// Sends a request with the full-capability `_meta`; returns (status, response).
    pub fn send(&self, method: &str, params: Value) -> (u16, Value) {
        self.send_with(method, params, caps())
    }

    pub fn send_with(&self, method: &str, mut params: Value, caps: Value) -> (u16, Value) {
        params["_meta"] = meta(caps);
        let msg =
            json!({"jsonrpc": "2.0", "id": self.fresh_id(), "method": method, "params": params});
        self.post(&msg)
    }

    /// The `result` of a request that must succeed.
    pub fn ok(&self, method: &str, params: Value) -> Value {
        let (status, body) = self.send(method, params);
        assert_eq!(status, 200, "{method}: {body}");
        assert!(body.get("error").is_none(), "{method}: {body}");
        body["result"].clone()
    }

    /// Starts a tool call that must create a task; returns the task id.
    pub fn start(&self, tool: &str, args: Value) -> String {
        let r = self.ok("tools/call", json!({"name": tool, "arguments": args}));
        assert_eq!(r["resultType"], "task", "{r}");
        r["taskId"].as_str().unwrap().to_owned()
    }

    pub fn get(&self, task: &str) -> Value {
        self.ok("tasks/get", json!({"taskId": task}))
    }

    pub fn status(&self, task: &str) -> String {
        self.get(task)["status"].as_str().unwrap().to_owned()
    }

    /// Ticks until the task leaves `working` (at most `steps` ticks, each
    /// after moving the clock by `step_ms`).
    pub fn run_until_settled(&self, task: &str, step_ms: i64, steps: usize) -> Value {
        for _ in 0..steps {
            let t = self.get(task);
            if t["status"] != "working" {
                return t;
            }
            self.advance(step_ms);
            self.tick();
        }
        self.get(task)
    }
}

/// The keys of a result's `inputRequests`, in order.
pub fn input_keys(result: &Value) -> Vec<String> {
    result["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

pub fn body_json(resp: &HttpResponse) -> Value {
    match &resp.body {
        HttpBody::Bytes(b) if !b.is_empty() => serde_json::from_slice(b).unwrap(),
        _ => Value::Null,
    }
}

/// `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` as a client sets
/// them (the library's test support).
pub use mcp_tasks_edge::testing::standard_headers;

/// The claim in `outcome` (a test that expected one fails otherwise).
pub fn claimed(
    outcome: mcp_tasks_edge::tasks::runner::ClaimOutcome,
) -> mcp_tasks_edge::tasks::runner::Claim {
    match outcome {
        mcp_tasks_edge::tasks::runner::ClaimOutcome::Claimed(c) => *c,
        other => panic!("expected a claim, got {other:?}"),
    }
}

/// The result of an acknowledged `tasks/update` or `tasks/cancel`: complete,
/// with the server's info in `_meta`, as every result carries it.
pub fn ack() -> Value {
    json!({
        "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "mcp-tasks-edge", "version": "0.1.0"}},
    })
}

/// A store that, just before its next `put` once armed, lets another
/// writer in (`interloper`, given the store behind).
pub struct Interleaved<'a> {
    pub inner: &'a MemoryStore,
    pub arm: Cell<bool>,
    pub interloper: Box<dyn Fn(&MemoryStore) + 'a>,
}

impl Store for Interleaved<'_> {
    async fn get(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        self.inner.get(key).await
    }
    async fn put(
        &self,
        key: &str,
        expected: Option<Version>,
        body: &str,
        due_at: Option<Millis>,
    ) -> Result<Version, StoreError> {
        if self.arm.replace(false) {
            (self.interloper)(self.inner);
        }
        self.inner.put(key, expected, body, due_at).await
    }
    async fn delete(&self, key: &str, expected: Version) -> Result<(), StoreError> {
        self.inner.delete(key, expected).await
    }
    async fn due(&self, now: Millis, limit: usize) -> Result<Vec<String>, StoreError> {
        self.inner.due(now, limit).await
    }
    async fn next_due(&self) -> Result<Option<Millis>, StoreError> {
        self.inner.next_due().await
    }
}
