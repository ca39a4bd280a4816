//! Test support for servers built with this library: a client that speaks
//! to a [`Server`] in process the way a conforming 2026-07-28 client does
//! (the `_meta` members, the mirrored `MCP-Protocol-Version`, `Mcp-Method`
//! and `Mcp-Name` headers), with a clock the test moves and a `tick` that
//! runs due steps.
//!
//! ```
//! use std::sync::Arc;
//! use mcp_tasks_edge::ids::SequentialIds;
//! use mcp_tasks_edge::server::{Config, Server};
//! use mcp_tasks_edge::store::MemoryStore;
//! use mcp_tasks_edge::testing::TestClient;
//! use mcp_tasks_edge::tools::ToolSet;
//!
//! let config = Config { state_keys: mcp_tasks_edge::crypto::Keyring::new(b"a test secret of at least 32 bytes".to_vec()), ..Config::default() };
//! let server = Server::new(Arc::new(MemoryStore::new()), config, ToolSet::empty(),
//!     Box::new(SequentialIds::starting_at(1))).unwrap();
//! let client = TestClient::new(server, 1_790_000_000_000);
//! let tools = client.call("tools/list", serde_json::json!({})).unwrap();
//! assert_eq!(tools["tools"], serde_json::json!([]));
//! ```

use std::cell::Cell;

use serde_json::{Value, json};

use crate::http::{self, HttpBody, HttpRequest};
use crate::owner::Owner;
use crate::protocol::{TASKS_EXTENSION, meta_keys};
use crate::server::{RequestContext, Server};
use crate::store::Store;
use crate::tasks::runner::TickReport;
use crate::time::Millis;

/// The protocol version the client speaks.
pub const VERSION: &str = "2026-07-28";

/// Capabilities of a client that supports tasks and form elicitation.
pub fn full_capabilities() -> Value {
    json!({"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}})
}

/// The required `_meta` of a request.
pub fn meta(capabilities: Value) -> Value {
    json!({
        meta_keys::PROTOCOL_VERSION: VERSION,
        meta_keys::CLIENT_CAPABILITIES: capabilities,
    })
}

/// The headers a conforming client sends with the JSON-RPC message `msg`:
/// the content headers, `MCP-Protocol-Version` from its `_meta`, `Mcp-Method`,
/// and `Mcp-Name` for the methods that carry one.
pub fn standard_headers(msg: &Value) -> Vec<(String, String)> {
    let mut h = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        (
            "accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ),
    ];
    let params = msg.get("params");
    let param = |name: &str| params.and_then(|p| p.get(name)).and_then(Value::as_str);
    let version = params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(meta_keys::PROTOCOL_VERSION))
        .and_then(Value::as_str);
    if let Some(v) = version {
        h.push(("mcp-protocol-version".to_owned(), v.to_owned()));
    }
    if let Some(m) = msg.get("method").and_then(Value::as_str) {
        h.push(("mcp-method".to_owned(), m.to_owned()));
        let name = match m {
            "tools/call" | "prompts/get" => param("name"),
            "resources/read" => param("uri"),
            "tasks/get" | "tasks/update" | "tasks/cancel" => param("taskId"),
            _ => None,
        };
        if let Some(n) = name {
            h.push(("mcp-name".to_owned(), n.to_owned()));
        }
    }
    h
}

/// A client of one server, in process.
pub struct TestClient<S: Store> {
    pub server: Server<S>,
    now: Cell<Millis>,
    next_id: Cell<i64>,
    /// Who the client is (the server's auth is not consulted in process).
    pub owner: Owner,
    /// What `_meta` declares.
    pub capabilities: Value,
}

impl<S: Store> TestClient<S> {
    /// A client with full capabilities, acting as `test/tester`, at `now`.
    pub fn new(server: Server<S>, now: Millis) -> Self {
        TestClient {
            server,
            now: Cell::new(now),
            next_id: Cell::new(1),
            owner: Owner {
                tenant: "test".to_owned(),
                principal: "tester".to_owned(),
            },
            capabilities: full_capabilities(),
        }
    }

    pub fn now(&self) -> Millis {
        self.now.get()
    }

    /// Moves the clock.
    pub fn advance(&self, ms: i64) {
        self.now.set(self.now.get().saturating_add(ms));
    }

    /// Moves the clock, then runs due steps.
    pub fn tick_after(&self, ms: i64) -> TickReport {
        self.advance(ms);
        crate::block_on(self.server.tick(self.now.get()))
    }

    /// Sends a request; returns the HTTP status and the response (`Null`
    /// for an empty body, or a stream).
    pub fn request(&self, method: &str, mut params: Value) -> (u16, Value) {
        if let Some(p) = params.as_object_mut() {
            p.insert("_meta".to_owned(), meta(self.capabilities.clone()));
        }
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let headers = standard_headers(&msg);
        let body = serde_json::to_vec(&msg).unwrap_or_default();
        let req = HttpRequest {
            method: "POST",
            path: &self.server.config().endpoint_path,
            headers: &http::header_refs(&headers),
            body: &body,
        };
        let ctx = RequestContext {
            owner: self.owner.clone(),
            now: self.now.get(),
        };
        let resp = crate::block_on(http::serve(&self.server, &req, &ctx));
        let value = match &resp.body {
            HttpBody::Bytes(b) => serde_json::from_slice(b).unwrap_or(Value::Null),
            _ => Value::Null,
        };
        (resp.status, value)
    }

    /// The `result` of a request, or its `error` object.
    pub fn call(&self, method: &str, params: Value) -> Result<Value, Value> {
        let (_, mut v) = self.request(method, params);
        if let Some(e) = v.get_mut("error") {
            return Err(e.take());
        }
        Ok(v.get_mut("result").map(Value::take).unwrap_or_default())
    }

    /// Calls `tool`; the task id if it created a task.
    pub fn start(&self, tool: &str, arguments: Value) -> Result<String, Value> {
        let r = self.call("tools/call", json!({"name": tool, "arguments": arguments}))?;
        match r.get("taskId").and_then(Value::as_str) {
            Some(id) => Ok(id.to_owned()),
            None => Err(r),
        }
    }

    /// `tasks/get`.
    pub fn task(&self, task_id: &str) -> Result<Value, Value> {
        self.call("tasks/get", json!({"taskId": task_id}))
    }
}
