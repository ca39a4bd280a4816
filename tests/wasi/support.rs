//! Test harness: the component compiled once per test binary, runtimes over
//! temporary SQLite stores with a manual clock, and a client that sets the
//! standard MCP headers from the body.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use serde_json::{Value, json};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::runtime::{Clock, Collected, Runtime, Settings};
use crate::sqlite::SqliteStore;

/// 2026-08-23T10:30:00.000Z, the core tests' epoch.
pub const T0: i64 = 1_787_481_000_000;

pub struct Compiled {
    pub engine: Engine,
    pub component: Component,
    serialized: Vec<u8>,
}

/// The component, compiled once for the whole test binary.
pub fn compiled() -> &'static Compiled {
    static COMPILED: OnceLock<Compiled> = OnceLock::new();
    COMPILED.get_or_init(|| {
        let path = crate::runtime::component_path();
        let bytes = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "cannot read the component {}: {e}\n\
                 Build it first: cargo build --release --target wasm32-wasip2 -p mcp-tasks-edge-server --features conformance \
                 (or point COMPONENT_WASM at it)",
                path.display()
            )
        });
        let engine = Runtime::engine().unwrap();
        let started = Instant::now();
        let component = Component::new(&engine, &bytes).unwrap();
        eprintln!(
            "compiled the component ({} bytes) in {:.2?}",
            bytes.len(),
            started.elapsed()
        );
        let serialized = component.serialize().unwrap();
        Compiled {
            engine,
            component,
            serialized,
        }
    })
}

/// Another component of this workspace (`target/wasm32-wasip2/release/{name}.wasm`),
/// compiled on a new engine.
pub fn other_component(name: &str) -> (Engine, Component) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/wasm32-wasip2/release")
        .join(format!("{name}.wasm"));
    let engine = Runtime::engine().unwrap();
    let component = Component::from_file(&engine, &path).unwrap_or_else(|e| {
        panic!(
            "cannot load {}: {e}\nBuild it first: cargo build --release --target wasm32-wasip2 -p {}",
            path.display(),
            name.replace('_', "-")
        )
    });
    (engine, component)
}

/// A new engine with the component loaded into it, as a restarted host
/// process does from its compilation cache: nothing is shared with the
/// engine of [`compiled`].
pub fn fresh_engine() -> (Engine, Component) {
    let engine = Runtime::engine().unwrap();
    // SAFETY: the bytes come from `Component::serialize` in this process,
    // with the same wasmtime version and engine configuration.
    let component = unsafe { Component::deserialize(&engine, &compiled().serialized) }.unwrap();
    (engine, component)
}

/// The guest's settings for tests: every tool, insecure local auth.
pub fn env(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = [
        ("MCP_TOOLS", "all"),
        ("MCP_AUTH", "insecure-local"),
        ("MCP_INSECURE_PRINCIPAL", "acme/alice"),
        ("MCP_STATE_SECRET", "wasi-tests-state-secret-of-32-bytes"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (k, v) in extra {
        env.retain(|(have, _)| have != k);
        env.push((k.to_string(), v.to_string()));
    }
    env
}

pub fn settings(clock: &Clock) -> Settings {
    let mut s = Settings::new(env(&[]));
    s.clock = clock.clone();
    s.guest_stderr = false;
    s
}

/// A runtime over the store in `dir`, on the shared engine.
pub fn runtime(dir: &Path, settings: Settings) -> Arc<Runtime> {
    let store = Arc::new(SqliteStore::open(dir).unwrap());
    let c = compiled();
    Runtime::from_component(&c.engine, &c.component, store, settings).unwrap()
}

/// The host binary (`cargo build -p mcp-tasks-edge-host`), for the tests
/// that run it as a process.
pub fn host_binary() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/debug/host")
}

/// A loopback port free a moment ago, for a host process to listen on.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The [`host_binary`] run as a process on a [`free_port`], its stdout
/// dropped and its stderr kept; killed when dropped.
pub struct HostProcess {
    pub child: std::process::Child,
    pub port: u16,
}

impl HostProcess {
    /// Starts the host with `--data data` and `args`, with `env` set and
    /// the variables in `unset` removed.
    pub fn spawn(data: &Path, args: &[&str], env: &[(&str, &str)], unset: &[&str]) -> Self {
        let bin = host_binary();
        assert!(
            bin.exists(),
            "{} is missing: cargo build -p mcp-tasks-edge-host",
            bin.display()
        );
        let port = free_port();
        let mut cmd = std::process::Command::new(bin);
        cmd.args(["--port", &port.to_string(), "--data"])
            .arg(data)
            .args(args)
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        for name in unset {
            cmd.env_remove(name);
        }
        HostProcess {
            child: cmd.spawn().unwrap(),
            port,
        }
    }

    /// Waits until the host listens (at most 60 s).
    pub async fn listening(&mut self) {
        let deadline = Instant::now() + std::time::Duration::from_secs(60);
        while tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "the host did not start");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Its exit status if it exits within `within`; `None` if it does not
    /// (it is then killed).
    pub async fn exit_within(
        &mut self,
        within: std::time::Duration,
    ) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return None;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Everything it wrote to stderr (once it has exited, or been killed).
    pub fn stderr(&mut self) -> String {
        let mut text = String::new();
        if let Some(mut err) = self.child.stderr.take() {
            std::io::Read::read_to_string(&mut err, &mut text).unwrap();
        }
        text
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A directory removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mcp-wasi-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Capabilities of a client that supports tasks and form elicitation, and
/// the required `_meta` (the library's test support).
pub use mcp_tasks_edge::testing::{full_capabilities as caps, meta};

/// The headers a conforming client derives from the body (the library's
/// test support).
pub use mcp_tasks_edge::testing::standard_headers;

/// Sends raw bytes with the given headers to `/mcp`.
pub async fn post_raw(rt: &Arc<Runtime>, headers: &[(String, String)], body: Vec<u8>) -> Collected {
    raw(rt, "POST", "/mcp", headers, body).await
}

pub async fn raw(
    rt: &Arc<Runtime>,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
) -> Collected {
    let refs: Vec<(&str, &[u8])> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_bytes()))
        .collect();
    rt.request(method, path, &refs, body)
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: the component failed: {e:#}"))
}

/// Sends raw bytes to `/mcp` through the `exchange` export; `None` when the
/// component says the answer is a stream.
pub async fn exchange_raw(
    rt: &Arc<Runtime>,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
) -> Option<(u16, Vec<(String, String)>, Vec<u8>)> {
    // As the host passes it: with the request's Host (the loopback one
    // unless the test sets its own).
    let mut headers = headers.to_vec();
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        headers.push(("host".into(), "127.0.0.1".into()));
    }
    let fields = headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes()));
    let request = crate::runtime::ExchangeRequest::new(method, path, fields, body)
        .unwrap_or_else(|| panic!("{method} {path}: not a request exchange can carry"));
    rt.exchange(&request)
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: the component failed: {e:#}"))
        .map(|r| (r.status, r.headers(), r.into_body()))
}

/// Which export a client goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    WasiHttp,
    Exchange,
}

/// A client of one runtime.
pub struct Client {
    pub rt: Arc<Runtime>,
    next_id: AtomicI64,
    pub via: Via,
}

impl Client {
    pub fn new(rt: Arc<Runtime>) -> Self {
        Client {
            rt,
            next_id: AtomicI64::new(1),
            via: Via::WasiHttp,
        }
    }

    pub fn via(mut self, via: Via) -> Self {
        self.via = via;
        self
    }

    /// POSTs a JSON-RPC message with the standard headers.
    pub async fn post(&self, msg: &Value) -> (u16, Value) {
        let headers = standard_headers(msg);
        let body = serde_json::to_vec(msg).unwrap();
        match self.via {
            Via::WasiHttp => {
                let resp = post_raw(&self.rt, &headers, body).await;
                (resp.status, resp.json())
            }
            Via::Exchange => {
                let (status, _, body) = exchange_raw(&self.rt, "POST", "/mcp", &headers, body)
                    .await
                    .expect("not a stream");
                (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
            }
        }
    }

    pub async fn send(&self, method: &str, mut params: Value) -> (u16, Value) {
        params["_meta"] = meta(caps());
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await
    }

    /// The `result` of a request that must succeed.
    pub async fn ok(&self, method: &str, params: Value) -> Value {
        let (status, body) = self.send(method, params).await;
        assert_eq!(status, 200, "{method}: {body}");
        assert!(body.get("error").is_none(), "{method}: {body}");
        body["result"].clone()
    }

    /// Starts a tool call that must create a task; returns its id.
    pub async fn start(&self, tool: &str, args: Value) -> String {
        let r = self
            .ok("tools/call", json!({"name": tool, "arguments": args}))
            .await;
        assert_eq!(r["resultType"], "task", "{r}");
        r["taskId"].as_str().unwrap().to_owned()
    }

    pub async fn get(&self, task: &str) -> Value {
        self.ok("tasks/get", json!({"taskId": task})).await
    }

    pub async fn status(&self, task: &str) -> String {
        self.get(task).await["status"].as_str().unwrap().to_owned()
    }
}
