//! The local host against a hostile network peer: refusals decided from the
//! request head (a 100 MB body is never read), insecure-local bound to
//! loopback hosts, and the host's caps (connections, live instances, the
//! header-read timeout) answered with 503 and `Retry-After`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::runtime::{Clock, Runtime, Settings};
use crate::serve::{Limits, Mode, Running, start_limited};
use crate::support::{TempDir, env, runtime};

pub(crate) async fn host(
    dir: &TempDir,
    extra: &[(&str, &str)],
    limits: Limits,
    instances: usize,
) -> (Arc<Runtime>, Running) {
    host_in(Mode::Component, dir, extra, limits, instances).await
}

/// [`host`] serving every request the way `mode` says.
async fn host_in(
    mode: Mode,
    dir: &TempDir,
    extra: &[(&str, &str)],
    limits: Limits,
    instances: usize,
) -> (Arc<Runtime>, Running) {
    let mut settings = Settings::new(env(extra));
    settings.clock = Clock::System;
    settings.guest_stderr = false;
    settings.max_instances = instances;
    let rt = runtime(dir.path(), settings);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let running = start_limited(rt.clone(), listener, false, mode, limits).unwrap();
    (rt, running)
}

/// Sends `head` (and nothing more), and reads what comes back until the
/// server closes or 5 s pass.
pub(crate) async fn answer_to_head(addr: std::net::SocketAddr, head: &str) -> (String, Duration) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let started = Instant::now();
    s.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => {
                got.extend_from_slice(&buf[..n]);
                if got.windows(4).any(|w| w == b"\r\n\r\n") && has_whole_body(&got) {
                    break;
                }
            }
        }
    }
    (
        String::from_utf8_lossy(&got).into_owned(),
        started.elapsed(),
    )
}

fn has_whole_body(resp: &[u8]) -> bool {
    let text = String::from_utf8_lossy(resp);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    head.lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
        })
        .is_none_or(|n| body.len() >= n)
}

/// A whole 2026-07-28 request as raw HTTP/1.1: `POST /mcp` to `host`
/// with the standard headers, `Mcp-Method: method`, the `extra` header
/// lines (each ending in CRLF) and `body`.
fn mcp_request(host: &str, method: &str, extra: &str, body: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: {method}\r\n{extra}content-length: {}\r\n\r\n{body}",
        body.len()
    )
}

pub(crate) fn status_of(resp: &str) -> u16 {
    resp.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_body_is_refused_from_its_head_before_a_byte_is_read() {
    let dir = TempDir::new("exposure-body");
    let (rt, running) = host(&dir, &[], Limits::default(), 8).await;
    // 100 MB declared, none sent: an answer can only come from the head.
    let post = |extra: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: 104857600\r\n{extra}\r\n"
        )
    };
    let (resp, took) = answer_to_head(running.addr, &post("")).await;
    assert_eq!(status_of(&resp), 413, "{resp}");
    assert!(resp.contains("-32600"), "{resp}");
    eprintln!("100 MB declared body on the host: 413 in {took:?}, no body byte sent");
    // The same for a wrong path (404) and a disallowed Origin (403).
    let (resp, _) = answer_to_head(
        running.addr,
        &post("").replace("POST /mcp", "POST /elsewhere"),
    )
    .await;
    assert_eq!(status_of(&resp), 404, "{resp}");
    let (resp, _) = answer_to_head(running.addr, &post("origin: https://evil.example\r\n")).await;
    assert_eq!(status_of(&resp), 403, "{resp}");
    // A chunked body with no declared length is read only to the limit.
    let mut s = TcpStream::connect(running.addr).await.unwrap();
    s.write_all(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        .await
        .unwrap();
    let chunk = vec![b' '; 64 * 1024];
    let mut sent = 0usize;
    let mut answered = None;
    let mut buf = [0u8; 4096];
    while sent < 100 * 1024 * 1024 {
        let frame = [format!("{:x}\r\n", chunk.len()).as_bytes(), &chunk, b"\r\n"].concat();
        if s.write_all(&frame).await.is_err() {
            break;
        }
        sent += chunk.len();
        if let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(1), s.read(&mut buf)).await
            && n > 0
        {
            answered = Some(String::from_utf8_lossy(&buf[..n]).into_owned());
            break;
        }
    }
    if answered.is_none() {
        let (rest, _) = tokio::time::timeout(Duration::from_secs(5), async {
            let n = s.read(&mut buf).await.unwrap_or(0);
            (String::from_utf8_lossy(&buf[..n]).into_owned(), ())
        })
        .await
        .unwrap_or_default();
        answered = Some(rest);
    }
    let answered = answered.unwrap_or_default();
    assert_eq!(status_of(&answered), 413, "{answered}");
    assert!(
        sent < 8 * 1024 * 1024,
        "the host kept reading: {sent} bytes sent before the answer"
    );
    eprintln!("chunked body without a length: 413 after {sent} bytes were sent");
    assert_eq!(rt.traps(), 0);
    running.stop().await;
}

/// A body of any method whose length is not declared is left to the
/// component, which answers from the head what it can: the host does not
/// read it first (it read up to 4 MiB of a chunked `GET` or `DELETE`
/// before the component saw the request, so 512 such connections could
/// hold 2 GiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_body_of_any_method_is_not_read_before_the_component_answers() {
    let dir = TempDir::new("exposure-chunked-methods");
    let (rt, running) = host(&dir, &[], Limits::default(), 4).await;
    for method in ["GET", "DELETE", "PUT", "PATCH"] {
        // One chunk of a body that never ends: answered from the head.
        let head = format!(
            "{method} /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n"
        );
        let (resp, _) = answer_to_head(running.addr, &head).await;
        assert_eq!(status_of(&resp), 405, "{method}: {resp}");
        assert!(resp.to_ascii_lowercase().contains("allow: post"), "{resp}");
    }
    assert_eq!(rt.traps(), 0);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_a_huge_body_is_refused_from_its_head() {
    let dir = TempDir::new("exposure-auth");
    let (_rt, running) = host(
        &dir,
        &[
            ("MCP_AUTH", "jwt"),
            (
                "MCP_JWT_HS256_SECRET",
                "exposure-test-hs256-secret-of-32-bytes",
            ),
            ("MCP_JWT_ISSUER", "https://issuer.test"),
            ("MCP_RESOURCE_URL", "http://127.0.0.1:8788/mcp"),
        ],
        Limits::default(),
        8,
    )
    .await;
    let (resp, _) = answer_to_head(
        running.addr,
        "POST /mcp HTTP/1.1\r\nhost: mcp.example\r\ncontent-type: application/json\r\ncontent-length: 900000\r\n\r\n",
    )
    .await;
    assert_eq!(status_of(&resp), 401, "{resp}");
    assert!(
        resp.to_ascii_lowercase().contains("www-authenticate"),
        "{resp}"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insecure_local_answers_loopback_hosts_only() {
    let dir = TempDir::new("exposure-host");
    let (_rt, running) = host(&dir, &[], Limits::default(), 8).await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    for (host, status) in [
        ("127.0.0.1:1234", 200),
        ("localhost", 200),
        ("evil.example", 403),
        ("192.168.1.20:8788", 403),
    ] {
        let head = mcp_request(host, "server/discover", "connection: close\r\n", body);
        let (resp, _) = answer_to_head(running.addr, &head).await;
        assert_eq!(status_of(&resp), status, "{host}: {resp}");
    }
    running.stop().await;
}

/// HTTP/1.1 takes a request's host from a target in absolute form and
/// ignores its `Host` header then (RFC 9112, 3.2.2), and refuses a request
/// with no `Host` or with several (3.2): the same on the `exchange` path
/// and through `wasi:http`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absolute_target_names_the_host_on_both_paths() {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    for mode in [Mode::Component, Mode::WasiHttp] {
        let dir = TempDir::new("exposure-absolute");
        let (_rt, running) = host_in(mode, &dir, &[], Limits::default(), 8).await;
        let head = |target: &str, hosts: &[&str]| {
            let lines: String = hosts.iter().map(|h| format!("host: {h}\r\n")).collect();
            mcp_request(
                "127.0.0.1",
                "server/discover",
                "connection: close\r\n",
                body,
            )
            .replacen("POST /mcp", &format!("POST {target}"), 1)
            .replacen("host: 127.0.0.1\r\n", &lines, 1)
        };
        for (target, hosts, status) in [
            ("http://evil.example/mcp", &["127.0.0.1"][..], 403),
            ("http://evil.example:8788/mcp", &["localhost:8788"][..], 403),
            ("http://localhost:1234/mcp", &["evil.example"][..], 200),
            ("http://127.0.0.1/mcp", &["127.0.0.1"][..], 200),
            ("/mcp", &["127.0.0.1", "evil.example"][..], 400),
            ("/mcp", &["127.0.0.1", "127.0.0.1"][..], 400),
            ("http://127.0.0.1/mcp", &[][..], 400),
            ("/mcp", &[][..], 400),
        ] {
            let (resp, _) = answer_to_head(running.addr, &head(target, hosts)).await;
            assert_eq!(
                status_of(&resp),
                status,
                "{mode:?} {target} {hosts:?}: {resp}"
            );
            if status != 200 {
                assert!(
                    resp.contains("-32600"),
                    "{mode:?} {target} {hosts:?}: {resp}"
                );
            }
        }
        running.stop().await;
    }
    // The component itself, handed the request as wasmtime hands it: the
    // authority (here from the absolute target) is the request's host,
    // whatever the Host header said (wasmtime keeps that header from the
    // guest; the component also prefers the authority where a host does
    // not).
    let dir = TempDir::new("exposure-authority");
    let (rt, running) = host(&dir, &[], Limits::default(), 8).await;
    for (uri, host, status) in [
        ("http://evil.example/mcp", "127.0.0.1", 403),
        ("http://localhost:1234/mcp", "evil.example", 200),
    ] {
        let req = hyper::Request::post(uri)
            .header("host", host)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "server/discover")
            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
            .unwrap();
        let resp = rt.handle(req).await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{uri} with host {host}");
    }
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caps_answer_503_with_retry_after_and_slow_heads_are_cut() {
    let dir = TempDir::new("exposure-caps");
    let limits = Limits {
        max_connections: 2,
        header_read_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    // Listen streams end after 2 s here, releasing their instance (a
    // client that goes away is noticed at the next keep-alive).
    let (rt, running) = host(&dir, &[("MCP_LISTEN_MAX_MS", "2000")], limits, 1).await;
    // Two connections that send nothing hold both slots.
    let idle_a = TcpStream::connect(running.addr).await.unwrap();
    let mut idle_b = TcpStream::connect(running.addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (resp, _) =
        answer_to_head(running.addr, "GET /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n").await;
    assert_eq!(status_of(&resp), 503, "{resp}");
    assert!(
        resp.to_ascii_lowercase().contains("retry-after: 1"),
        "{resp}"
    );
    // The header-read timeout closes a connection that never sends a head.
    let mut buf = [0u8; 256];
    let closed = tokio::time::timeout(Duration::from_secs(3), idle_b.read(&mut buf)).await;
    assert!(
        matches!(closed, Ok(Ok(_)) | Ok(Err(_))),
        "a silent connection was not closed"
    );
    drop(idle_a);
    drop(idle_b);
    tokio::time::sleep(Duration::from_millis(400)).await;

    // One instance: a held listen stream uses it, so a second request is
    // answered 503 with Retry-After; once the stream ends, requests work.
    let task = start_slow_task(running.addr).await;
    let listen = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": [task]}, "_meta": crate::support::meta(crate::support::caps())},
    })
    .to_string();
    let mut stream = TcpStream::connect(running.addr).await.unwrap();
    stream
        .write_all(mcp_request("127.0.0.1", "subscriptions/listen", "", &listen).as_bytes())
        .await
        .unwrap();
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(rt.live_instances(), 1);
    let discover = r#"{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let head = mcp_request(
        "127.0.0.1",
        "server/discover",
        "connection: close\r\n",
        discover,
    );
    let (resp, _) = answer_to_head(running.addr, &head).await;
    assert_eq!(status_of(&resp), 503, "{resp}");
    assert!(
        resp.to_ascii_lowercase().contains("retry-after: 1"),
        "{resp}"
    );
    // A JSON-RPC error whose request the host did not read: no id.
    assert!(
        resp.contains("-32603") && !resp.contains(r#""id""#),
        "{resp}"
    );
    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(10);
    while rt.live_instances() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (resp, _) = answer_to_head(running.addr, &head).await;
    assert_eq!(status_of(&resp), 200, "{resp}");
    assert_eq!(rt.traps(), 0);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_streams_beyond_the_cap_are_refused_and_the_others_keep_working() {
    let dir = TempDir::new("exposure-streams");
    let (rt, running) = host(
        &dir,
        &[("MCP_MAX_LISTEN_STREAMS", "2")],
        Limits::default(),
        8,
    )
    .await;
    // Streams that follow a running task (a stream with nothing to follow
    // ends at once).
    let task = start_slow_task(running.addr).await;
    let listen = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": [task]}, "_meta": crate::support::meta(crate::support::caps())},
    })
    .to_string();
    let head = mcp_request("127.0.0.1", "subscriptions/listen", "", &listen);
    let mut open = Vec::new();
    let mut buf = [0u8; 4096];
    for _ in 0..2 {
        let mut s = TcpStream::connect(running.addr).await.unwrap();
        s.write_all(head.as_bytes()).await.unwrap();
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        let got = String::from_utf8_lossy(&buf[..n]).into_owned();
        assert!(got.starts_with("HTTP/1.1 200"), "{got}");
        open.push(s);
    }
    // A third is refused with 429, and says why.
    let (resp, _) = answer_to_head(
        running.addr,
        &head.replace("\r\n\r\n", "\r\nconnection: close\r\n\r\n"),
    )
    .await;
    assert_eq!(status_of(&resp), 429, "{resp}");
    assert!(resp.contains("\"reason\":\"streams\""), "{resp}");
    // The open ones keep working: each still carries its stream (a
    // keep-alive or an event arrives, or it is simply still open).
    for s in &mut open {
        let r = tokio::time::timeout(Duration::from_millis(300), s.read(&mut buf)).await;
        assert!(!matches!(r, Ok(Ok(0))), "an open stream was closed");
    }
    drop(open);
    assert_eq!(rt.traps(), 0);
    running.stop().await;
}

/// Starts `slow_compute` for 60 s through the host; its task id.
async fn start_slow_task(addr: std::net::SocketAddr) -> String {
    let call = serde_json::json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "slow_compute", "arguments": {"seconds": 60}, "_meta": crate::support::meta(crate::support::caps())},
    })
    .to_string();
    let (resp, _) = answer_to_head(
        addr,
        &mcp_request(
            "127.0.0.1",
            "tools/call",
            "mcp-name: slow_compute\r\nconnection: close\r\n",
            &call,
        ),
    )
    .await;
    resp.split("\"taskId\":\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("{resp}"))
        .to_owned()
}

/// A 2026-07-28 `server/discover` body.
const DISCOVER: &str = r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

/// The head of a chunked `server/discover` (its body goes through
/// `wasi:http`, read by the component).
fn chunked_head() -> String {
    "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: server/discover\r\ntransfer-encoding: chunked\r\n\r\n".to_owned()
}

fn chunk(data: &str) -> String {
    format!("{:x}\r\n{data}\r\n", data.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_is_answered_408_and_frees_its_instance() {
    let dir = TempDir::new("exposure-stalled-body");
    let limits = Limits {
        body_read_timeout: Duration::from_millis(400),
        ..Limits::default()
    };
    // One instance: the stalled chunked body holds it while it waits.
    let (_rt, running) = host(&dir, &[], limits, 1).await;
    // A declared length, half of the body sent (read by the host).
    let whole = mcp_request("127.0.0.1", "server/discover", "", DISCOVER);
    let (resp, _) = answer_to_head(running.addr, &whole[..whole.len() - DISCOVER.len() / 2]).await;
    assert_eq!(status_of(&resp), 408, "declared length: {resp}");
    assert!(resp.contains("-32600"), "{resp}");
    assert!(!resp.contains(r#""id""#), "{resp}");
    // Chunked, one chunk and then nothing (read by the component).
    let head = chunked_head() + &chunk(&DISCOVER[..20]);
    let (resp, _) = answer_to_head(running.addr, &head).await;
    assert_eq!(status_of(&resp), 408, "chunked: {resp}");
    assert!(resp.contains("-32600"), "{resp}");
    assert!(!resp.contains(r#""id""#), "{resp}");
    // The one instance serves the next request.
    let head = mcp_request(
        "127.0.0.1",
        "server/discover",
        "connection: close\r\n",
        DISCOVER,
    );
    let (resp, _) = answer_to_head(running.addr, &head).await;
    assert_eq!(status_of(&resp), 200, "{resp}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_still_arriving_outlasts_the_call_deadline() {
    let dir = TempDir::new("exposure-trickle");
    let mut settings = Settings::new(env(&[]));
    settings.clock = Clock::System;
    settings.guest_stderr = false;
    settings.call_deadline = Duration::from_millis(300);
    let rt = runtime(dir.path(), settings);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let running = start_limited(rt, listener, false, Mode::Component, Limits::default()).unwrap();
    // The body arrives in pieces over about 1.2 s, four times the call
    // deadline: the component waits on it without being interrupted.
    let mut s = TcpStream::connect(running.addr).await.unwrap();
    s.write_all(chunked_head().as_bytes()).await.unwrap();
    for piece in DISCOVER.as_bytes().chunks(DISCOVER.len() / 12 + 1) {
        let piece = std::str::from_utf8(piece).unwrap();
        s.write_all(chunk(piece).as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    s.write_all(b"0\r\n\r\n").await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("\r\n\r\n{") {
        match tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    let resp = String::from_utf8_lossy(&got);
    assert_eq!(status_of(&resp), 200, "{resp}");
    assert!(resp.contains("\"result\""), "{resp}");
    running.stop().await;
}

/// A client that stops reading (here: asks for many answers on one
/// connection and reads none) has its connection closed once a write has
/// waited the write timeout, which frees the connection's slot; it held
/// the slot for as long as the client stayed connected before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_cut_at_the_write_timeout() {
    let dir = TempDir::new("exposure-unread");
    let limits = Limits {
        max_connections: 1,
        write_timeout: Duration::from_secs(3),
        ..Limits::default()
    };
    let (_rt, running) = host(&dir, &[], limits, 2).await;
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let one = mcp_request("127.0.0.1", "tools/list", "", list);
    // Megabytes of answers, and a receive buffer that takes a few of them.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(running.addr).await.unwrap();
    let (_unread, mut writer) = stream.into_split();
    let requests = one.repeat(2_000);
    let sending = tokio::spawn(async move {
        let _ = writer.write_all(requests.as_bytes()).await;
        writer
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let discover = r#"{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let head = mcp_request(
        "127.0.0.1",
        "server/discover",
        "connection: close\r\n",
        discover,
    );
    let (resp, _) = answer_to_head(running.addr, &head).await;
    assert_eq!(
        status_of(&resp),
        503,
        "the reader holds the one slot: {resp}"
    );
    // The write timeout, not the 10 s idle header timeout, frees it.
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut status = 0;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let (resp, _) = answer_to_head(running.addr, &head).await;
        status = status_of(&resp);
        if status == 200 {
            break;
        }
    }
    assert_eq!(
        status, 200,
        "the connection that stopped reading still holds its slot"
    );
    sending.abort();
    running.stop().await;
}
