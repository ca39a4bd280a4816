//! At least once across a real crash: the local host process (the `host`
//! binary, `cargo build -p mcp-tasks-edge-host`) is killed with SIGKILL after the
//! job API received a step's submit and before the step committed. A new
//! host process over the same data repeats the step with the same
//! idempotency key, and the task completes once.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{TempDir, caps, free_port, host_binary, meta, standard_headers};
use crate::upstream::{Behave, Upstream};

/// A host process; killed (SIGKILL) when dropped.
struct Host(Child);

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn start_host(dir: &Path, port: u16, up: &Upstream) -> Host {
    let bin = host_binary();
    assert!(
        bin.exists(),
        "{} is missing: cargo build -p mcp-tasks-edge-host",
        bin.display()
    );
    let child = Command::new(bin)
        .args(["--port", &port.to_string(), "--data"])
        .arg(dir)
        .args(["--env", "JOB_API_URL"])
        .env("MCP_AUTH", "insecure-local")
        .env("MCP_INSECURE_PRINCIPAL", "acme/alice")
        .env("MCP_STATE_SECRET", "kill-test-state-secret-of-32-bytes!")
        .env("MCP_TOOLS", "all")
        .env("MCP_LEASE_MS", "2000")
        .env("MCP_OUTBOUND_ALLOW", up.origin())
        .env("JOB_API_URL", up.url())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let host = Host(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the host did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    host
}

/// One JSON-RPC request over HTTP/1.1 (the result, or the whole error).
async fn rpc(port: u16, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta(caps());
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let body = serde_json::to_vec(&msg).unwrap();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in standard_headers(&msg) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body).await.unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8_lossy(&out);
    let (_, payload) = text.split_once("\r\n\r\n").unwrap();
    let v: Value = serde_json::from_str(payload).unwrap_or_else(|e| panic!("{e}: {text}"));
    match v.get("result") {
        Some(r) => r.clone(),
        None => v,
    }
}

async fn wait_status(port: u16, task: &str, want: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let t = rpc(port, "tasks/get", json!({"taskId": task})).await;
        if t["status"] == want {
            return t;
        }
        assert!(
            Instant::now() < deadline && t["status"] == "working",
            "waiting for {want}: {t}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_after_the_submit_repeats_it_with_the_same_key() {
    let up = Upstream::start().await;
    // The first submit is received, then not answered for a minute.
    up.then(&[Behave::Hang(Duration::from_secs(60))]);
    let dir = TempDir::new("kill");
    let port = free_port();
    let first = start_host(dir.path(), port, &up).await;
    let created = rpc(
        port,
        "tools/call",
        json!({"name": "run_job", "arguments": {"input": "killed.csv"}}),
    )
    .await;
    let task = created["taskId"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    while up.submit_keys().is_empty() {
        assert!(Instant::now() < deadline, "the submit never arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(first); // SIGKILL, mid-step

    let port = free_port();
    let _second = start_host(dir.path(), port, &up).await;
    // The dead runner's lease (2 s) ends, the step runs again.
    let t = wait_status(port, &task, "input_required").await;
    assert!(t["inputRequests"]["confirm_result"].is_object(), "{t}");
    rpc(
        port,
        "tasks/update",
        json!({"taskId": task, "inputResponses": {
            "confirm_result": {"action": "accept", "content": {"confirmed": true}}
        }}),
    )
    .await;
    let t = wait_status(port, &task, "completed").await;
    assert_eq!(t["result"]["structuredContent"]["job"], "job-1", "{t}");
    let keys = up.submit_keys();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_eq!(keys[0], keys[1], "the repeated submit carries the same key");
    assert_eq!(up.jobs(), 1, "one job");
}
