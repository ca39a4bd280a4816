//! The `host` binary stopped with `SIGTERM`, as a service manager or a
//! deploy stops it: the request in progress is answered whole, an idle
//! connection does not hold the exit back, and the process then exits 0.

use std::process::Command;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{HostProcess, TempDir};

const DISCOVER: &str = r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

fn discover_request(keep_alive: bool) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: server/discover\r\nconnection: {}\r\ncontent-length: {}\r\n\r\n{DISCOVER}",
        if keep_alive { "keep-alive" } else { "close" },
        DISCOVER.len()
    )
}

/// Everything the server sends until it closes the connection (or 10 s).
async fn read_to_close(s: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut got)).await;
    String::from_utf8_lossy(&got).into_owned()
}

/// The host binary over `dir`, with a grace period far longer than the
/// tests wait: an exit within it is the drain's (or a second signal's).
fn spawn_host(dir: &TempDir) -> HostProcess {
    HostProcess::spawn(
        dir.path(),
        &["--shutdown-grace-ms", "60000"],
        &[
            ("MCP_AUTH", "insecure-local"),
            (
                "MCP_STATE_SECRET",
                "shutdown-test-state-secret-of-32-bytes!",
            ),
        ],
        &[],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_answers_the_request_in_progress_then_exits() {
    let dir = TempDir::new("shutdown");
    let mut host = spawn_host(&dir);
    host.listening().await;
    let port = host.port;

    // A keep-alive connection, idle after one answer.
    let mut idle = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    idle.write_all(discover_request(true).as_bytes())
        .await
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = idle.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    // A request in progress: its head and half its body sent.
    let whole = discover_request(false);
    let half = whole.len() - DISCOVER.len() / 2;
    let mut busy = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    busy.write_all(&whole.as_bytes()[..half]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let killed = Command::new("kill")
        .args(["-TERM", &host.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        host.child.try_wait().unwrap().is_none(),
        "the host exited with a request in progress"
    );
    // The idle connection was closed.
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), idle.read(&mut buf))
            .await
            .expect("the idle connection was left open")
            .unwrap_or(0),
        0
    );
    // The rest of the body: the request is answered whole, and the
    // connection closed after it.
    busy.write_all(&whole.as_bytes()[half..]).await.unwrap();
    let answer = read_to_close(&mut busy).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(answer.contains(r#""result""#), "{answer}");

    let Some(status) = host.exit_within(Duration::from_secs(30)).await else {
        panic!("the host did not exit once its connections were done");
    };
    let stderr = host.stderr();
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.contains("host: shutting down"), "{stderr}");
    assert!(!stderr.contains("are cut"), "{stderr}");
}

/// A second `SIGTERM` during the drain exits at once (status 130), without
/// waiting for the request in progress or the grace period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sigterm_exits_at_once() {
    let dir = TempDir::new("shutdown-twice");
    let mut host = spawn_host(&dir);
    host.listening().await;
    // A request in progress that never completes.
    let whole = discover_request(false);
    let half = whole.len() - DISCOVER.len() / 2;
    let mut busy = TcpStream::connect(("127.0.0.1", host.port)).await.unwrap();
    busy.write_all(&whole.as_bytes()[..half]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let term = |pid: u32| {
        let killed = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
    };
    term(host.child.id());
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        host.child.try_wait().unwrap().is_none(),
        "the first signal waits for the request in progress"
    );
    term(host.child.id());
    let Some(status) = host.exit_within(Duration::from_secs(10)).await else {
        panic!("the host did not exit on the second signal");
    };
    let stderr = host.stderr();
    assert_eq!(status.code(), Some(130), "{status}: {stderr}");
    assert!(stderr.contains("a second signal"), "{stderr}");
}

/// `SIGTERM` while a tick is in a long step (a job API sending its answer
/// a byte a second): the host exits within its grace period, not when the
/// step is done; the step runs again once its lease runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_long_step_exits_within_the_grace_period() {
    let (origin, api) = crate::outbound::trickling_api(Duration::from_secs(1)).await;
    let dir = TempDir::new("shutdown-step");
    let url = format!("{origin}/api");
    let mut host = HostProcess::spawn(
        dir.path(),
        &["--shutdown-grace-ms", "1000", "--env", "JOB_API_URL"],
        &[
            ("MCP_AUTH", "insecure-local"),
            (
                "MCP_STATE_SECRET",
                "shutdown-test-state-secret-of-32-bytes!",
            ),
            ("MCP_TOOLS", "demo"),
            ("MCP_OUTBOUND_ALLOW", origin.as_str()),
            ("JOB_API_URL", url.as_str()),
            // A step may take up to about 48 s: the answer's 14 s fit.
            ("MCP_LEASE_MS", "60000"),
        ],
        &[],
    );
    host.listening().await;
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_job","arguments":{"input":"a.csv"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}},"elicitation":{"form":{}}}}}}"#;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: run_job\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{call}",
        call.len()
    );
    let mut s = TcpStream::connect(("127.0.0.1", host.port)).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let answer = read_to_close(&mut s).await;
    assert!(answer.contains(r#""resultType":"task""#), "{answer}");
    // The ticker takes the task up and waits on the answer's body (its
    // request times out at 10 s).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let killed = Command::new("kill")
        .args(["-TERM", &host.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let Some(status) = host.exit_within(Duration::from_secs(5)).await else {
        panic!("the host waited for the step past its grace period");
    };
    let stderr = host.stderr();
    assert!(status.success(), "{status}: {stderr}");
    api.abort();
}
