//! The `host` binary stopped with `SIGTERM`, as a service manager or a
//! deploy stops it: the request in progress is answered whole, an idle
//! connection does not hold the exit back, and the process then exits 0.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{TempDir, free_port, host_binary};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_answers_the_request_in_progress_then_exits() {
    let bin = host_binary();
    assert!(
        bin.exists(),
        "{} is missing: cargo build -p mcp-tasks-edge-host",
        bin.display()
    );
    let dir = TempDir::new("shutdown");
    let port = free_port();
    let mut child = Command::new(bin)
        .args(["--port", &port.to_string(), "--data"])
        .arg(dir.path())
        // Far longer than the test waits: an exit within it is the drain's.
        .args(["--shutdown-grace-ms", "60000"])
        .env("MCP_AUTH", "insecure-local")
        .env(
            "MCP_STATE_SECRET",
            "shutdown-test-state-secret-of-32-bytes!",
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the host did not start");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

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

    let term = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        child.try_wait().unwrap().is_none(),
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

    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            term.elapsed() < Duration::from_secs(30),
            "the host did not exit once its connections were done"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.contains("host: shutting down"), "{stderr}");
    assert!(!stderr.contains("are cut"), "{stderr}");
}
