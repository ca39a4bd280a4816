//! Hostile input through `wasi:http`: every case must come back as the right
//! HTTP status and JSON-RPC error, never as a guest trap or a 500. The
//! component runs with the production limits (128 MiB, a call deadline).
//!
//! Statuses follow the core's mapping (`RpcError::http_status`): parse and
//! envelope errors, header mismatches and missing `_meta` are 400, unknown
//! methods 404, other invalid params (-32602) travel with 200.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::runtime::{Clock, Collected, Runtime};
use crate::support::{TempDir, caps, meta, post_raw, raw, runtime, settings, standard_headers};

fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn request(id: Value, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta(caps());
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Asserts a JSON-RPC error response with this status and code.
fn assert_error(what: &str, resp: &Collected, status: u16, code: i64) {
    let v = resp.json();
    assert_eq!(
        (resp.status, v["error"]["code"].as_i64()),
        (status, Some(code)),
        "{what}: {} {}",
        resp.status,
        String::from_utf8_lossy(&resp.body[..resp.body.len().min(400)])
    );
    assert_eq!(v["jsonrpc"], "2.0", "{what}");
    assert!(v["error"]["message"].is_string(), "{what}");
    assert_eq!(
        resp.header("content-type"),
        Some("application/json"),
        "{what}"
    );
}

/// A header value for `v`: as it is when it is visible ASCII, else in the
/// `=?base64?...?=` form the standard headers allow.
fn header_value(v: &str) -> String {
    use base64::Engine;
    if v.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        v.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(v)
        )
    }
}

type Headers = Vec<(String, String)>;

fn json_headers() -> Vec<(String, String)> {
    headers(&[
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ])
}

/// A well-formed request with its standard headers, as bytes.
fn good(msg: &Value) -> (Vec<(String, String)>, Vec<u8>) {
    (standard_headers(msg), serde_json::to_vec(msg).unwrap())
}

fn rt() -> (TempDir, Arc<Runtime>) {
    let dir = TempDir::new("hostile");
    let rt = runtime(dir.path(), settings(&Clock::System));
    (dir, rt)
}

/// `prefix`, then `open` n times, `inner`, `close` n times, then `suffix`.
fn nested(prefix: &[u8], open: &[u8], inner: &[u8], close: &[u8], n: usize) -> Vec<u8> {
    let mut b = prefix.to_vec();
    for _ in 0..n {
        b.extend_from_slice(open);
    }
    b.extend_from_slice(inner);
    for _ in 0..n {
        b.extend_from_slice(close);
    }
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_nesting_anywhere_is_an_error_not_a_stack_overflow() {
    let (_dir, rt) = rt();
    let env = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"#;
    let meta = br#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"greet","arguments":{"name":"#;
    let cases: Vec<(&str, Vec<u8>, u16, i64)> = vec![
        (
            "body: 100k nested arrays",
            nested(b"", b"[", b"1", b"]", 100_000),
            400,
            -32600,
        ),
        (
            "body: 50k nested objects",
            nested(b"", b"{\"a\":", b"1", b"}", 50_000),
            400,
            -32600,
        ),
        (
            "params: 100k nested arrays",
            {
                let mut b = nested(env, b"[", b"1", b"]", 100_000);
                b.push(b'}');
                b
            },
            400,
            -32600,
        ),
        (
            "arguments: 100k nested arrays",
            {
                let mut b = env.to_vec();
                b.extend(nested(meta, b"[", b"1", b"]", 100_000));
                b.extend_from_slice(b"}}}");
                b
            },
            400,
            -32600,
        ),
        (
            "arguments: 50k nested objects",
            {
                let mut b = env.to_vec();
                b.extend(nested(meta, b"{\"a\":", b"1", b"}", 50_000));
                b.extend_from_slice(b"}}}");
                b
            },
            400,
            -32600,
        ),
        (
            "_meta: 100k nested arrays",
            {
                let mut b = env.to_vec();
                b.extend(nested(b"{\"_meta\":", b"[", b"1", b"]", 100_000));
                b.extend_from_slice(b"}}");
                b
            },
            400,
            -32600,
        ),
    ];
    let mut h = json_headers();
    h.push(("mcp-protocol-version".into(), "2026-07-28".into()));
    h.push(("mcp-method".into(), "tools/call".into()));
    h.push(("mcp-name".into(), "greet".into()));
    // (what, body, status, code): a body that is an array is not a request;
    // nesting past serde_json's recursion limit fails the typed parse.
    for (what, body, status, code) in cases {
        let resp = post_raw(&rt, &h, body).await;
        assert_error(what, &resp, status, code);
    }
    assert_eq!(rt.traps(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_and_invalid_utf8_are_parse_errors() {
    let (_dir, rt) = rt();
    let bodies: Vec<(&str, Vec<u8>)> = vec![
        ("not json", b"not json".to_vec()),
        ("truncated", b"{\"jsonrpc\":".to_vec()),
        ("empty", Vec::new()),
        ("invalid utf-8", b"\xff\xfe\xfd".to_vec()),
        (
            "invalid utf-8 inside a string",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"x\":\"\xc3\x28\"}}"
                .to_vec(),
        ),
        (
            "unterminated object",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"".to_vec(),
        ),
        ("trailing garbage", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"} x".to_vec()),
        ("NUL bytes", vec![0u8; 64]),
    ];
    for (what, body) in bodies {
        let resp = post_raw(&rt, &json_headers(), body).await;
        assert_error(what, &resp, 400, -32700);
        assert!(resp.json().get("id").is_none(), "{what}");
    }
    assert_eq!(rt.traps(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_types_and_huge_numbers_are_invalid_requests_or_params() {
    let (_dir, rt) = rt();
    // (what, body, status, code, echoed id)
    let cases: Vec<(&str, Value, u16, i64, Value)> = vec![
        (
            "method is a number",
            json!({"jsonrpc": "2.0", "id": 1, "method": 7}),
            400,
            -32600,
            json!(1),
        ),
        (
            "params is a string",
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": "x"}),
            400,
            -32600,
            json!(2),
        ),
        (
            "jsonrpc 1.0",
            json!({"jsonrpc": "1.0", "id": 3, "method": "tools/list"}),
            400,
            -32600,
            json!(3),
        ),
        (
            "batch",
            json!([request(json!(4), "tools/list", json!({}))]),
            400,
            -32600,
            Value::Null,
        ),
        (
            "id is an object",
            json!({"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}),
            400,
            -32600,
            Value::Null,
        ),
        (
            "id is a float",
            json!({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}),
            400,
            -32600,
            Value::Null,
        ),
        (
            "tool name is a number",
            request(json!(5), "tools/call", json!({"name": 5})),
            200,
            -32602,
            json!(5),
        ),
        (
            "arguments is an array",
            request(
                json!(6),
                "tools/call",
                json!({"name": "greet", "arguments": []}),
            ),
            200,
            -32602,
            json!(6),
        ),
        (
            "taskId is an object",
            request(json!(7), "tasks/get", json!({"taskId": {}})),
            200,
            -32602,
            json!(7),
        ),
        (
            "inputResponses is a string",
            request(
                json!(8),
                "tasks/update",
                json!({"taskId": "t", "inputResponses": "x"}),
            ),
            200,
            -32602,
            json!(8),
        ),
        (
            "malformed task id",
            request(json!(9), "tasks/get", json!({"taskId": "tsk_nope"})),
            200,
            -32602,
            json!(9),
        ),
        (
            "unknown tool with NUL",
            request(
                json!(10),
                "tools/call",
                json!({"name": "gr\u{0}eet", "arguments": {}}),
            ),
            200,
            -32602,
            json!(10),
        ),
        (
            "unknown method",
            request(json!(11), "no/such/method", json!({})),
            404,
            -32601,
            json!(11),
        ),
        (
            "u64::MAX id is an integer",
            request(json!(u64::MAX), "no/such/method", json!({})),
            404,
            -32601,
            json!(u64::MAX),
        ),
        (
            "version is a number",
            json!({"jsonrpc": "2.0", "id": 12, "method": "tools/list", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": 2026, "io.modelcontextprotocol/clientCapabilities": {}}}}),
            400,
            -32602,
            json!(12),
        ),
    ];
    for (what, msg, status, code, id) in cases {
        let mut h = json_headers();
        h.push(("mcp-protocol-version".into(), "2026-07-28".into()));
        if let Some(m) = msg["method"].as_str() {
            h.push(("mcp-method".into(), m.into()));
        }
        if let Some(n) = msg["params"]["name"]
            .as_str()
            .or(msg["params"]["taskId"].as_str())
        {
            h.push(("mcp-name".into(), header_value(n)));
        }
        let resp = post_raw(&rt, &h, serde_json::to_vec(&msg).unwrap()).await;
        assert_error(what, &resp, status, code);
        assert_eq!(resp.json()["id"], id, "{what}");
    }
    // A lone surrogate escape in the method name: the method is not a string
    // serde can decode, so the envelope is invalid (the id is kept).
    let resp = post_raw(
        &rt,
        &json_headers(),
        br#"{"jsonrpc":"2.0","id":1,"method":"\ud800"}"#.to_vec(),
    )
    .await;
    assert_error("lone surrogate", &resp, 400, -32600);
    assert_eq!(resp.json()["id"], 1);
    // Numbers JSON can write but no integer type holds.
    for (what, body) in [
        (
            "id 1e400",
            br#"{"jsonrpc":"2.0","id":1e400,"method":"tools/list"}"#.to_vec(),
        ),
        (
            "id 2^64",
            br#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"tools/list"}"#.to_vec(),
        ),
        (
            "id -2^63-1",
            br#"{"jsonrpc":"2.0","id":-9223372036854775809,"method":"tools/list"}"#.to_vec(),
        ),
    ] {
        let resp = post_raw(&rt, &json_headers(), body).await;
        assert_error(what, &resp, 400, -32600);
        assert!(resp.json().get("id").is_none(), "{what}");
    }
    // Out-of-range tool arguments are the tool's error (isError), not a trap.
    for seconds in [
        json!(1e308),
        json!(-1),
        json!(18446744073709551616u128 as f64),
        json!("1"),
    ] {
        let msg = request(
            json!(20),
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": seconds}}),
        );
        let (h, b) = good(&msg);
        let resp = post_raw(&rt, &h, b).await;
        let v = resp.json();
        assert_eq!(resp.status, 200, "seconds {seconds}: {v}");
        assert_eq!(v["result"]["isError"], true, "seconds {seconds}: {v}");
    }
    assert_eq!(rt.traps(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_are_413_and_the_limit_itself_is_served() {
    let (_dir, rt) = rt();
    const LIMIT: usize = 1024 * 1024;
    let msg = request(json!(1), "tools/list", json!({}));
    let (h, mut body) = good(&msg);
    // Exactly the limit (padded with JSON whitespace): served.
    body.resize(LIMIT, b' ');
    let resp = post_raw(&rt, &h, body.clone()).await;
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
    assert!(resp.json()["result"]["tools"].is_array());
    // One byte more, and much more: 413.
    for size in [LIMIT + 1, 2 * LIMIT, 16 * LIMIT] {
        body.resize(size, b' ');
        let resp = post_raw(&rt, &h, body.clone()).await;
        assert_error(&format!("{size} bytes"), &resp, 413, -32600);
    }
    // A huge string inside a body under the limit is refused before
    // parsing, and the error echoes none of it.
    let name = "x".repeat(900_000);
    let msg = request(
        json!(2),
        "tools/call",
        json!({"name": name, "arguments": {}}),
    );
    let (h, b) = good(&msg);
    let resp = post_raw(&rt, &h, b).await;
    assert_error("900 kB tool name", &resp, 400, -32600);
    assert!(resp.body.len() < 4096, "{} bytes", resp.body.len());
    // Objects and arrays up to the member limit (1,000) are fine...
    let mut args = serde_json::Map::new();
    args.insert("name".into(), json!("World"));
    for i in 0..998 {
        args.insert(format!("k{i}"), json!(i));
    }
    args.insert("list".into(), json!(vec![0u8; 1_000]));
    let msg = request(
        json!(3),
        "tools/call",
        json!({"name": "greet", "arguments": args}),
    );
    let (h, b) = good(&msg);
    let resp = post_raw(&rt, &h, b).await;
    assert_eq!(resp.status, 200);
    // Parsed and checked against the tool's schema: the extra keys are a
    // tool argument error, not a refusal of the body.
    let v = resp.json();
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert!(
        v["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("is not an argument of greet"),
        "{v}"
    );
    // ...and beyond it, a clear error before anything is parsed.
    for extra in [json!(vec![0u8; 1_001]), json!(vec![0u8; 100_000])] {
        args.insert("list".into(), extra);
        let msg = request(
            json!(4),
            "tools/call",
            json!({"name": "greet", "arguments": args}),
        );
        let (h, b) = good(&msg);
        assert!(b.len() < LIMIT);
        let resp = post_raw(&rt, &h, b).await;
        assert_error("too many members", &resp, 400, -32600);
    }
    assert_eq!(rt.traps(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_headers_are_rejected_with_the_right_status() {
    let (_dir, rt) = rt();
    let msg = request(json!(1), "tools/list", json!({}));
    let body = serde_json::to_vec(&msg).unwrap();
    let base = standard_headers(&msg);
    let with = |edit: &dyn Fn(&mut Headers)| {
        let mut h = base.clone();
        edit(&mut h);
        h
    };
    let set = |h: &mut Vec<(String, String)>, k: &str, v: &str| {
        h.retain(|(n, _)| !n.eq_ignore_ascii_case(k));
        h.push((k.to_owned(), v.to_owned()));
    };
    let cases: Vec<(&str, Headers, u16, i64)> = vec![
        (
            "text/plain",
            with(&|h| set(h, "content-type", "text/plain")),
            415,
            -32600,
        ),
        (
            "form content type",
            with(&|h| set(h, "content-type", "application/x-www-form-urlencoded")),
            415,
            -32600,
        ),
        (
            "method header mismatch",
            with(&|h| set(h, "mcp-method", "tools/call")),
            400,
            -32020,
        ),
        (
            "method header missing",
            with(&|h| h.retain(|(n, _)| n != "mcp-method")),
            400,
            -32020,
        ),
        (
            "version header mismatch",
            with(&|h| set(h, "mcp-protocol-version", "2025-11-25")),
            400,
            -32020,
        ),
        (
            "two different method headers",
            with(&|h| h.push(("mcp-method".into(), "tools/call".into()))),
            400,
            -32020,
        ),
        (
            "64 kB method header",
            with(&|h| set(h, "mcp-method", &"m".repeat(65_536))),
            400,
            -32020,
        ),
        (
            "foreign origin",
            with(&|h| set(h, "origin", "http://evil.example.com")),
            403,
            -32600,
        ),
        (
            "null origin",
            with(&|h| set(h, "origin", "null")),
            403,
            -32600,
        ),
    ];
    for (what, h, status, code) in cases {
        let resp = post_raw(&rt, &h, body.clone()).await;
        assert_error(what, &resp, status, code);
    }
    // Header values that are not UTF-8 (or not visible ASCII).
    for value in [
        &b"tools/\xfflist"[..],
        b"tools/list\x01",
        "tööls/list".as_bytes(),
    ] {
        let mut refs: Vec<(&str, &[u8])> = base
            .iter()
            .filter(|(n, _)| n != "mcp-method")
            .map(|(k, v)| (k.as_str(), v.as_bytes()))
            .collect();
        refs.push(("mcp-method", value));
        match rt.request("POST", "/mcp", &refs, body.clone()).await {
            Ok(resp) => assert_error(&format!("method header {value:?}"), &resp, 400, -32020),
            // hyper refuses control characters before the component sees them.
            Err(e) => assert!(value.contains(&1), "{value:?}: {e:#}"),
        }
    }
    // A missing content type is tolerated; a charset parameter too.
    for h in [
        with(&|h| h.retain(|(n, _)| n != "content-type")),
        with(&|h| set(h, "content-type", "application/json; charset=utf-8")),
        with(&|h| set(h, "origin", "http://localhost:8788")),
    ] {
        let resp = post_raw(&rt, &h, body.clone()).await;
        assert_eq!(resp.status, 200, "{h:?}");
    }
    assert_eq!(rt.traps(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_methods_and_paths() {
    let (_dir, rt) = rt();
    let msg = request(json!(1), "tools/list", json!({}));
    let (h, body) = good(&msg);
    for method in ["GET", "DELETE", "PUT", "PATCH", "OPTIONS", "HEAD", "BREW"] {
        let resp = raw(&rt, method, "/mcp", &h, body.clone()).await;
        assert_eq!(resp.status, 405, "{method}");
        assert_eq!(resp.header("allow"), Some("POST"), "{method}");
        assert!(resp.body.is_empty(), "{method}");
    }
    for path in [
        "/",
        "/mcp/",
        "/MCP",
        "/mcp/x",
        "/mcpx",
        "/%6dcp",
        "/mcp/../mcp",
    ] {
        let resp = raw(&rt, "POST", path, &h, body.clone()).await;
        assert_eq!(resp.status, 404, "{path}");
    }
    // A query string does not change the endpoint.
    let resp = raw(&rt, "POST", "/mcp?x=1&y", &h, body.clone()).await;
    assert_eq!(resp.status, 200);
    assert_eq!(rt.traps(), 0);
}

/// JSON-RPC messages are objects: an array whose items would fill the
/// envelope by position (`["2.0", 1, "tools/list", {...}]`) is not a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_positional_array_is_not_a_request() {
    let (_dir, rt) = rt();
    let msg = json!(["2.0", 1, "tools/list", {"_meta": meta(caps())}]);
    let h = headers(&[
        ("content-type", "application/json"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
    ]);
    let resp = post_raw(&rt, &h, serde_json::to_vec(&msg).unwrap()).await;
    assert_error("positional array", &resp, 400, -32600);
}
