//! Every error this server emits, from the request that causes it, with its
//! HTTP status.

use serde_json::{Value, json};

use crate::support::{Harness, TASKS, caps, meta, standard_headers};

fn code(body: &Value) -> i64 {
    body["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {body}"))
}

/// Sends `msg` with the standard headers, with `edit` applied to them.
fn post_edited(
    h: &Harness,
    msg: &Value,
    edit: impl FnOnce(&mut Vec<(String, String)>),
) -> (u16, Value) {
    let mut headers = standard_headers(msg);
    edit(&mut headers);
    let refs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let resp = h.post_raw(&refs, &serde_json::to_vec(msg).unwrap());
    (resp.status, crate::support::body_json(&resp))
}

fn request(id: i64, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta(caps());
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn set(headers: &mut Vec<(String, String)>, name: &'static str, value: &str) {
    headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    headers.push((name.to_owned(), value.to_owned()));
}

fn remove(headers: &mut Vec<(String, String)>, name: &str) {
    headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
}

#[test]
fn parse_error_is_400_without_an_id() {
    let h = Harness::new();
    for body in [&b"not json"[..], b"{\"jsonrpc\":", b"\xff\xfe", b""] {
        let resp = h.post_raw(&[("content-type", "application/json")], body);
        let v = crate::support::body_json(&resp);
        assert_eq!((resp.status, code(&v)), (400, -32700));
        assert!(v.get("id").is_none(), "{v}");
    }
}

#[test]
fn invalid_request_is_400_and_keeps_the_id() {
    let h = Harness::new();
    let cases = [
        (
            json!([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]),
            Value::Null,
        ),
        (
            json!({"jsonrpc": "1.0", "id": 5, "method": "tools/list"}),
            json!(5),
        ),
        (
            json!({"jsonrpc": "2.0", "id": "s", "method": 7}),
            json!("s"),
        ),
        (json!({"jsonrpc": "2.0", "id": 6}), json!(6)),
        (
            json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": "x"}),
            json!(8),
        ),
        (
            json!({"jsonrpc": "2.0", "id": null, "method": "tools/list"}),
            Value::Null,
        ),
        (json!("just a string"), Value::Null),
    ];
    for (msg, id) in cases {
        let resp = h.post_raw(&[], &serde_json::to_vec(&msg).unwrap());
        let v = crate::support::body_json(&resp);
        assert_eq!((resp.status, code(&v)), (400, -32600), "{msg}");
        assert_eq!(v["id"], id, "{msg}");
    }
}

#[test]
fn notifications_get_202_and_no_body() {
    let h = Harness::new();
    for msg in [
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
        json!({"jsonrpc": "2.0", "method": "notifications/unknown"}),
    ] {
        let resp = h.post_raw(&[], &serde_json::to_vec(&msg).unwrap());
        assert_eq!(resp.status, 202);
        assert!(resp.body_bytes().is_empty());
    }
}

/// A notification sent in a protocol version this server does not speak
/// is not accepted: 400 with -32022 and no id. In a version it speaks (the
/// 2025-11-25 adapter's included), 202.
#[test]
fn a_notification_in_an_unsupported_version_is_400() {
    let h = Harness::new();
    let msg = serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    )
    .unwrap();
    let with = |version: &'static str| {
        h.post_raw(
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", version),
            ],
            &msg,
        )
    };
    let resp = with("2099-01-01");
    let v = crate::support::body_json(&resp);
    assert_eq!((resp.status, code(&v)), (400, -32022), "{v}");
    assert!(v.get("id").is_none(), "{v}");
    // 2025-11-25 through the adapter, where the build has it.
    let spoken: &[&'static str] = if cfg!(feature = "legacy") {
        &["2026-07-28", "2025-11-25"]
    } else {
        &["2026-07-28"]
    };
    for &version in spoken {
        let resp = with(version);
        assert_eq!(resp.status, 202, "{version}");
        assert!(resp.body_bytes().is_empty(), "{version}");
    }
}

#[test]
fn unknown_and_removed_methods_are_404() {
    let h = Harness::new();
    for m in [
        "unknown/method",
        "tasks/result",
        "tasks/list",
        "tasks/status",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
    ] {
        let (status, v) = h.post(&request(3, m, json!({"taskId": "x"})));
        assert_eq!((status, code(&v)), (404, -32601), "{m}");
        assert_eq!(v["id"], 3);
    }
    // `initialize` from a 2026-07-28 client (its _meta and header): still
    // -32601, naming the versions. (Without them it is a 2025-11-25
    // client's, which the legacy adapter serves.)
    let modern = request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}),
    );
    let (status, v) = h.post(&modern);
    assert_eq!((status, code(&v)), (404, -32601));
    assert_eq!(v["error"]["data"]["supported"], json!(["2026-07-28"]));
}

#[test]
fn missing_or_malformed_meta_is_32602_with_400() {
    let h = Harness::new();
    let v = "io.modelcontextprotocol/protocolVersion";
    let c = "io.modelcontextprotocol/clientCapabilities";
    let cases = [
        json!({}),
        json!({"_meta": 5}),
        json!({"_meta": {c: {}}}),
        json!({"_meta": {v: 20260728, c: {}}}),
        json!({"_meta": {v: "2026-07-28"}}),
        json!({"_meta": {v: "2026-07-28", c: {"elicitation": 5}}}),
    ];
    for params in cases {
        let msg = json!({"jsonrpc": "2.0", "id": 9, "method": "server/discover", "params": params});
        let (status, body) =
            post_edited(&h, &msg, |hs| set(hs, "MCP-Protocol-Version", "2026-07-28"));
        assert_eq!((status, code(&body)), (400, -32602), "{params}");
        assert_eq!(body["id"], 9);
    }
    // No params at all.
    let msg = json!({"jsonrpc": "2.0", "id": 9, "method": "server/discover"});
    let (status, body) = post_edited(&h, &msg, |hs| set(hs, "MCP-Protocol-Version", "2026-07-28"));
    assert_eq!((status, code(&body)), (400, -32602));
}

#[test]
fn unsupported_version_is_32022_with_data() {
    let h = Harness::new();
    let mut msg = request(4, "server/discover", json!({}));
    msg["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    let (status, body) = h.post(&msg);
    assert_eq!((status, code(&body)), (400, -32022));
    assert_eq!(
        body["error"]["data"],
        json!({"supported": ["2026-07-28"], "requested": "v999.0.0"})
    );
}

/// A header naming a revision nobody here speaks is -32022 also when the
/// body has no version to judge: an unknown method (a 2024-11-05 `ping`)
/// or a request without `_meta`.
#[test]
fn an_unsupported_version_header_is_32022_without_a_body_version() {
    let h = Harness::new();
    let ping = json!({"jsonrpc": "2.0", "id": 5, "method": "ping"});
    let bare = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {}});
    for msg in [&ping, &bare] {
        let (status, body) = post_edited(&h, msg, |hs| {
            set(hs, "MCP-Protocol-Version", " 2024-11-05");
            remove(hs, "Mcp-Method");
        });
        assert_eq!((status, code(&body)), (400, -32022), "{msg}: {body}");
        assert_eq!(body["error"]["data"]["requested"], "2024-11-05");
        assert_eq!(body["id"], msg["id"]);
    }
    // With the version this server speaks, as before.
    let (status, body) = post_edited(&h, &ping, |hs| {
        set(hs, "MCP-Protocol-Version", "2026-07-28");
        remove(hs, "Mcp-Method");
    });
    assert_eq!((status, code(&body)), (404, -32601), "{body}");
    let (status, body) = post_edited(&h, &bare, |hs| {
        set(hs, "MCP-Protocol-Version", "2026-07-28");
        set(hs, "Mcp-Method", "tools/list");
    });
    assert_eq!((status, code(&body)), (400, -32602), "{body}");
}

#[test]
fn header_mismatches_are_32020_with_400() {
    let h = Harness::new();
    let task = h.start("slow_compute", json!({"seconds": 60}));
    let list = request(1, "tools/list", json!({}));
    let call = request(
        2,
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "x"}}),
    );
    let get = request(3, "tasks/get", json!({"taskId": task}));
    type Edit = Box<dyn FnOnce(&mut Vec<(String, String)>)>;
    let cases: Vec<(&str, &Value, Edit)> = vec![
        (
            "version header differs from _meta",
            &list,
            Box::new(|hs| set(hs, "MCP-Protocol-Version", "2025-11-25")),
        ),
        (
            "version header missing",
            &list,
            Box::new(|hs| remove(hs, "MCP-Protocol-Version")),
        ),
        (
            "method header differs",
            &list,
            Box::new(|hs| set(hs, "Mcp-Method", "prompts/list")),
        ),
        (
            "method header missing",
            &list,
            Box::new(|hs| remove(hs, "Mcp-Method")),
        ),
        (
            "method value case differs",
            &list,
            Box::new(|hs| set(hs, "Mcp-Method", "TOOLS/LIST")),
        ),
        (
            "method header repeated",
            &list,
            Box::new(|hs| hs.push(("mcp-method".into(), "tools/call".into()))),
        ),
        (
            "name header differs on tools/call",
            &call,
            Box::new(|hs| set(hs, "Mcp-Name", "wrong_tool")),
        ),
        (
            "name header missing on tools/call",
            &call,
            Box::new(|hs| remove(hs, "Mcp-Name")),
        ),
        (
            "name header has control characters",
            &call,
            Box::new(|hs| set(hs, "Mcp-Name", "gr\u{1}eet")),
        ),
        (
            "name header differs on tasks/get",
            &get,
            Box::new(|hs| set(hs, "Mcp-Name", "tsk_someone_else")),
        ),
        (
            "malformed base64 name",
            &call,
            Box::new(|hs| set(hs, "Mcp-Name", "=?base64?Z3J!!!?=")),
        ),
    ];
    for (why, msg, edit) in cases {
        let (status, body) = post_edited(&h, msg, edit);
        assert_eq!((status, code(&body)), (400, -32020), "{why}: {body}");
        assert_eq!(body["id"], msg["id"], "{why}");
    }
}

#[test]
fn header_forms_that_are_accepted() {
    let h = Harness::new();
    let task = h.start("slow_compute", json!({"seconds": 60}));
    let call = request(
        2,
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "x"}}),
    );
    let get = request(3, "tasks/get", json!({"taskId": task}));
    type Edit = Box<dyn FnOnce(&mut Vec<(String, String)>)>;
    let cases: Vec<(&str, &Value, Edit)> = vec![
        (
            "upper-case header names",
            &call,
            Box::new(|hs| {
                for (n, _) in hs.iter_mut() {
                    n.make_ascii_uppercase();
                }
            }),
        ),
        (
            "whitespace around the value",
            &call,
            Box::new(|hs| set(hs, "Mcp-Name", "  greet  ")),
        ),
        (
            "base64 sentinel",
            &call,
            Box::new(|hs| set(hs, "Mcp-Name", "=?base64?Z3JlZXQ=?=")),
        ),
        (
            "no Mcp-Name on tasks/get",
            &get,
            Box::new(|hs| remove(hs, "Mcp-Name")),
        ),
    ];
    for (why, msg, edit) in cases {
        let (status, body) = post_edited(&h, msg, edit);
        assert_eq!(status, 200, "{why}: {body}");
        assert!(body.get("result").is_some(), "{why}: {body}");
    }
}

#[test]
fn missing_capabilities_are_32021_with_400() {
    let h = Harness::new();
    let no_tasks = json!({"elicitation": {}});
    let tasks_ext = json!({"extensions": {TASKS: {}}});
    let cases = [
        (
            "tasks/get",
            json!({"taskId": "x"}),
            no_tasks.clone(),
            json!({"extensions": {TASKS: {}}}),
        ),
        (
            "tasks/update",
            json!({"taskId": "x", "inputResponses": {}}),
            no_tasks.clone(),
            json!({"extensions": {TASKS: {}}}),
        ),
        (
            "tasks/cancel",
            json!({"taskId": "x"}),
            json!({}),
            json!({"extensions": {TASKS: {}}}),
        ),
        (
            "subscriptions/listen",
            json!({"notifications": {"taskIds": ["x"]}}),
            json!({}),
            json!({"extensions": {TASKS: {}}}),
        ),
        (
            "tools/call",
            json!({"name": "failing_job", "arguments": {}}),
            json!({}),
            json!({"extensions": {TASKS: {}}}),
        ),
        (
            "tools/call",
            json!({"name": "generate_report", "arguments": {"size": "small"}}),
            tasks_ext,
            json!({"elicitation": {"form": {}}}),
        ),
        (
            "tools/call",
            json!({"name": "generate_report", "arguments": {"size": "small"}}),
            json!({"elicitation": {"url": {}}}),
            json!({"extensions": {TASKS: {}}, "elicitation": {"form": {}}}),
        ),
        (
            "tools/call",
            json!({"name": "test_missing_capability", "arguments": {}}),
            json!({}),
            json!({"sampling": {}}),
        ),
    ];
    for (method, params, caps, required) in cases {
        let (status, body) = h.send_with(method, params, caps);
        assert_eq!((status, code(&body)), (400, -32021), "{method}: {body}");
        assert_eq!(
            body["error"]["data"]["requiredCapabilities"], required,
            "{method}"
        );
    }
}

#[test]
fn other_invalid_params_are_32602() {
    let h = Harness::new();
    let cases = [
        ("tools/call", json!({"name": "no_such_tool"})),
        ("tools/call", json!({"arguments": {}})),
        ("tasks/get", json!({"taskId": "tsk_never_issued"})),
        ("tasks/get", json!({"taskId": 5})),
        ("tasks/update", json!({"taskId": "tsk_never_issued"})),
        ("tools/list", json!({"cursor": "abc"})),
        ("subscriptions/listen", json!({})),
        ("prompts/get", json!({"name": "nope"})),
        ("resources/read", json!({"uri": "file:///nope"})),
        // A member that is an object is read from an object only, never
        // from an array of its fields in order.
        (
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                   "argument": ["arg1", "test"]}),
        ),
        (
            "completion/complete",
            json!({"ref": ["ref/prompt", "test_prompt_with_arguments"],
                   "argument": {"name": "arg1", "value": "test"}}),
        ),
    ];
    for (method, params) in cases {
        let (status, body) = h.send(method, params.clone());
        assert_eq!(code(&body), -32602, "{method} {params}: {body}");
        assert_eq!(status, 200, "{method} {params}");
    }
}

#[test]
fn tool_argument_errors_are_tool_results() {
    let h = Harness::new();
    for (tool, args) in [
        ("greet", json!({})),
        ("slow_compute", json!({"seconds": -1})),
        ("generate_report", json!({"size": "huge"})),
    ] {
        let r = h.ok("tools/call", json!({"name": tool, "arguments": args}));
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["isError"], true, "{tool}: {r}");
        assert!(
            r["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("Invalid arguments"),
            "{r}"
        );
    }
}

#[test]
fn http_level_refusals() {
    let h = Harness::new();
    let body = serde_json::to_vec(&request(1, "tools/list", json!({}))).unwrap();
    let hs = standard_headers(&request(1, "tools/list", json!({})));
    let mut refs: Vec<(&str, &str)> = hs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    for m in ["GET", "DELETE", "PUT"] {
        let r = h.request(m, "/mcp", &refs, b"");
        assert_eq!((r.status, r.header("allow")), (405, Some("POST")), "{m}");
    }
    assert_eq!(h.request("POST", "/other", &refs, &body).status, 404);
    let mut evil = refs.clone();
    evil.push(("Origin", "http://evil.example.com"));
    let r = h.post_raw(&evil, &body);
    assert_eq!(r.status, 403);
    assert_eq!(crate::support::body_json(&r)["error"]["code"], -32600);
    let mut local = refs.clone();
    local.push(("Origin", "http://localhost:8787"));
    assert_eq!(h.post_raw(&local, &body).status, 200);
    let big = vec![b' '; 1024 * 1024 + 1];
    assert_eq!(h.post_raw(&refs, &big).status, 413);
    refs.retain(|(n, _)| *n != "content-type");
    refs.push(("content-type", "text/plain"));
    let r = h.post_raw(&refs, &body);
    assert_eq!(r.status, 415);
    // The request's id is echoed: the body could be read.
    assert_eq!(crate::support::body_json(&r)["id"], 1);
    assert_eq!(
        crate::support::body_json(&h.post_raw(&refs, b"id=1")).get("id"),
        None,
        "no id to read: none"
    );
    // Optional whitespace around a value is spaces and tabs only; other
    // white space stays part of the value and is judged with it.
    refs.retain(|(n, _)| *n != "content-type");
    refs.push(("content-type", "application/json"));
    let with = |name: &'static str, value: &'static str| {
        let mut r = refs.clone();
        r.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        r.push((name, value));
        h.post_raw(&r, &body).status
    };
    assert_eq!(
        with("content-type", " application/json\t; charset=utf-8"),
        200
    );
    assert_eq!(with("content-type", "application/json\u{b}"), 415);
    assert_eq!(with("origin", "\thttp://localhost:8787 "), 200);
    assert_eq!(with("origin", "http://localhost:8787\u{a0}"), 403);
}

#[test]
fn a_server_without_auth_serves_nothing() {
    use mcp_tasks_edge::auth::Auth;
    use mcp_tasks_edge::http::{HttpRequest, handle};
    let msg = request(1, "tools/list", json!({}));
    let headers: Vec<(String, String)> = standard_headers(&msg)
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b))
        .collect();
    let body = serde_json::to_vec(&msg).unwrap();
    let refs = mcp_tasks_edge::http::header_refs(&headers);
    let req = HttpRequest {
        method: "POST",
        path: "/mcp",
        headers: &refs,
        body: &body,
    };
    let mut cfg = crate::support::config();
    cfg.auth = Auth::Unconfigured;
    let h = Harness::with_config(
        std::sync::Arc::new(mcp_tasks_edge::store::MemoryStore::new()),
        1,
        cfg.clone(),
    );
    let r = mcp_tasks_edge::block_on(handle(&h.server, &req, 0));
    assert_eq!(r.status, 503);
    assert_eq!(crate::support::body_json(&r)["error"]["code"], -32603);
    cfg.auth = Auth::InsecureLocal(crate::support::owner("local", "dev"));
    let h = Harness::with_config(
        std::sync::Arc::new(mcp_tasks_edge::store::MemoryStore::new()),
        1,
        cfg,
    );
    // Insecure-local answers loopback hosts only, and needs a Host.
    let r = mcp_tasks_edge::block_on(handle(&h.server, &req, 0));
    assert_eq!(r.status, 403, "no Host");
    for (host, status) in [
        ("127.0.0.1:8788", 200),
        ("localhost", 200),
        ("LOCALHOST:3000", 200),
        ("mcp.localhost:80", 200),
        ("127.1.2.3", 200),
        ("[::1]:8788", 200),
        ("evil.example", 403),
        ("localhost.evil.example", 403),
        ("127.0.0.1.evil.example:80", 403),
        ("10.0.0.1:8788", 403),
        ("[::2]:8788", 403),
        ("127.0.0.1:port", 403),
        ("", 403),
    ] {
        let mut with_host = headers.clone();
        with_host.push(("Host".into(), host.into()));
        let with_host = mcp_tasks_edge::http::header_refs(&with_host);
        let req = HttpRequest {
            headers: &with_host,
            ..req
        };
        let r = mcp_tasks_edge::block_on(handle(&h.server, &req, 0));
        assert_eq!(r.status, status, "{host:?}");
        if status == 403 {
            assert_eq!(crate::support::body_json(&r)["error"]["code"], -32600);
        }
    }
    // Two Host headers are refused.
    let mut twice = headers.clone();
    twice.push(("Host".into(), "localhost".into()));
    twice.push(("Host".into(), "evil.example".into()));
    let twice = mcp_tasks_edge::http::header_refs(&twice);
    let req = HttpRequest {
        headers: &twice,
        ..req
    };
    assert_eq!(
        mcp_tasks_edge::block_on(handle(&h.server, &req, 0)).status,
        403
    );
}

#[test]
fn the_head_alone_refuses_what_it_can() {
    use mcp_tasks_edge::auth::Auth;
    use mcp_tasks_edge::http::check_head;
    let h = |pairs: &[(&'static str, &'static str)]| pairs.to_vec();
    let mut cfg = crate::support::config();
    cfg.auth = Auth::InsecureLocal(crate::support::owner("local", "dev"));
    let local = h(&[("host", "127.0.0.1:8788")]);
    let status = |cfg: &mcp_tasks_edge::config::Config, m: &str, p: &str, hs: &[(&str, &str)]| {
        check_head(cfg, m, p, hs).map(|r| r.status)
    };
    assert_eq!(status(&cfg, "POST", "/mcp", &local), None);
    assert_eq!(status(&cfg, "POST", "/other", &local), Some(404));
    assert_eq!(status(&cfg, "PUT", "/mcp", &local), Some(405));
    let mut big = local.clone();
    big.push(("content-length", "104857600"));
    assert_eq!(status(&cfg, "POST", "/mcp", &big), Some(413));
    let mut at_limit = local.clone();
    let limit = cfg.max_body_bytes.to_string();
    at_limit.push(("content-length", &limit));
    assert_eq!(status(&cfg, "POST", "/mcp", &at_limit), None);
    let mut browser = local.clone();
    browser.push(("origin", "https://evil.example"));
    assert_eq!(status(&cfg, "POST", "/mcp", &browser), Some(403));
    assert_eq!(
        status(&cfg, "POST", "/mcp", &h(&[("host", "evil.example")])),
        Some(403)
    );
    // With tokens required, no Authorization header is 401 from the head.
    let mut jwt = cfg.clone();
    jwt.auth = Auth::Jwt(Box::new(mcp_tasks_edge::auth::JwtAuth {
        issuer: "https://issuer.test".into(),
        resource: "http://127.0.0.1:8787/mcp".into(),
        hs256_secret: Some(vec![7; 32]),
        keys: Vec::new(),
        tenant_claim: "tenant".into(),
        tenant_required: false,
        types: Vec::new(),
        leeway_ms: 0,
        authorization_servers: Vec::new(),
    }));
    let r = check_head(&jwt, "POST", "/mcp", &big).unwrap();
    assert_eq!(r.status, 413);
    let r = check_head(&jwt, "POST", "/mcp", &h(&[("host", "mcp.example")])).unwrap();
    assert_eq!(r.status, 401);
    assert!(r.header("www-authenticate").is_some());
    let with_token = h(&[("host", "mcp.example"), ("authorization", "Bearer x")]);
    assert_eq!(
        status(&jwt, "POST", "/mcp", &with_token),
        None,
        "verified later"
    );
    assert_eq!(
        status(
            &jwt,
            "GET",
            "/.well-known/oauth-protected-resource/mcp",
            &[]
        ),
        None,
        "the metadata is served"
    );
}

#[test]
fn the_trace_names_known_things_only() {
    let h = Harness::new();
    let task = h.start("slow_compute", json!({"seconds": 60}));
    let msg = request(1, "tasks/get", json!({"taskId": task}));
    let hs = standard_headers(&msg);
    let refs: Vec<(&str, &str)> = hs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let r = h.post_raw(&refs, &serde_json::to_vec(&msg).unwrap());
    assert_eq!(r.trace.method, Some("tasks/get"));
    assert_eq!(r.trace.task_id.as_deref(), Some(task.as_str()));
    assert_eq!(r.trace.error, None);
    let msg = request(2, "tasks/get", json!({"taskId": "attacker-controlled"}));
    let hs = standard_headers(&msg);
    let refs: Vec<(&str, &str)> = hs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let r = h.post_raw(&refs, &serde_json::to_vec(&msg).unwrap());
    assert_eq!((r.trace.task_id, r.trace.error), (None, Some(-32602)));
    let msg = request(3, "no/such\nmethod", json!({}));
    let r = h.post_raw(&[], &serde_json::to_vec(&msg).unwrap());
    assert_eq!((r.trace.method, r.trace.error), (None, Some(-32601)));
    let msg = request(
        4,
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "x"}}),
    );
    let hs = standard_headers(&msg);
    let refs: Vec<(&str, &str)> = hs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let r = h.post_raw(&refs, &serde_json::to_vec(&msg).unwrap());
    assert_eq!(
        (r.trace.method, r.trace.tool),
        (Some("tools/call"), Some("greet"))
    );
}

/// A store whose reads fail with a backend message.
struct BrokenStore;

impl mcp_tasks_edge::store::Store for BrokenStore {
    async fn get(
        &self,
        _key: &str,
    ) -> Result<Option<mcp_tasks_edge::store::Entry>, mcp_tasks_edge::store::StoreError> {
        Err(mcp_tasks_edge::store::StoreError::Unavailable(
            "disk I/O error on shard-7".into(),
        ))
    }
    async fn put(
        &self,
        _key: &str,
        _expected: Option<u64>,
        _body: &str,
        _due_at: Option<i64>,
    ) -> Result<u64, mcp_tasks_edge::store::StoreError> {
        Ok(1)
    }
    async fn delete(
        &self,
        _key: &str,
        _expected: u64,
    ) -> Result<(), mcp_tasks_edge::store::StoreError> {
        Ok(())
    }
    async fn due(
        &self,
        _now: i64,
        _limit: usize,
    ) -> Result<Vec<String>, mcp_tasks_edge::store::StoreError> {
        Ok(vec![])
    }
    async fn next_due(&self) -> Result<Option<i64>, mcp_tasks_edge::store::StoreError> {
        Ok(None)
    }
}

#[test]
fn a_store_failure_is_503_for_the_client_and_its_message_is_for_the_log() {
    use mcp_tasks_edge::server::{Mirror, Reply, RequestContext, Server, Trace};
    let server = Server::new(
        BrokenStore,
        crate::support::config(),
        crate::support::all_tools(),
        Box::new(mcp_tasks_edge::ids::SequentialIds::starting_at(1)),
    )
    .unwrap();
    let msg = request(
        1,
        "tasks/get",
        json!({"taskId": "tsk_AAAAAAAAAAAAAAAAAAAAAA"}),
    );
    let ctx = RequestContext {
        owner: crate::support::owner("acme", "alice"),
        now: crate::support::T0,
    };
    let mut trace = Trace::default();
    let reply = mcp_tasks_edge::block_on(server.handle(
        &serde_json::to_vec(&msg).unwrap(),
        &Mirror::none(),
        &ctx,
        &mut trace,
    ));
    let Reply::Json { status, body } = reply else {
        panic!("not JSON")
    };
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, code(&body)), (503, -32603), "{body}");
    assert!(!body.to_string().contains("shard-7"), "{body}");
    assert_eq!(trace.detail.as_deref(), Some("disk I/O error on shard-7"));
}

/// A `Config` filled in by hand without its state key, or with a key
/// shorter than 32 bytes, current or previous, is refused when the server
/// is built: with such a key, anyone could make request states, session
/// tokens and input request ids.
#[test]
fn a_server_without_a_state_key_is_refused() {
    use std::sync::Arc;

    use mcp_tasks_edge::config::Config;
    use mcp_tasks_edge::crypto::Keyring;
    use mcp_tasks_edge::ids::SequentialIds;
    use mcp_tasks_edge::server::Server;
    use mcp_tasks_edge::store::MemoryStore;
    use mcp_tasks_edge::tools::ToolSet;
    let built = Server::new(
        Arc::new(MemoryStore::new()),
        Config::default(),
        ToolSet::empty(),
        Box::new(SequentialIds::starting_at(1)),
    );
    let Err(e) = built else {
        panic!("a server with an empty state key")
    };
    assert!(e.message.contains("state key"), "{}", e.message);
    // An empty or short previous key (`unwrap_or_default()` of an unset
    // variable, say) would let anyone sign with it: refused too, as a
    // short current key is.
    let strong = b"a state key of at least thirty-two bytes".to_vec();
    for keys in [
        Keyring::new(strong.clone()).with_previous(Vec::new()),
        Keyring::new(strong.clone()).with_previous(b"short".to_vec()),
        Keyring::new(b"only-31-bytes-long-state-key!!!".to_vec()),
    ] {
        let built = Server::new(
            Arc::new(MemoryStore::new()),
            Config {
                state_keys: keys.clone(),
                ..Config::default()
            },
            ToolSet::empty(),
            Box::new(SequentialIds::starting_at(1)),
        );
        let Err(e) = built else {
            panic!("a server with a weak key: {keys:?}")
        };
        assert!(e.message.contains("32 bytes"), "{}", e.message);
    }
    assert!(
        Server::new(
            Arc::new(MemoryStore::new()),
            crate::support::config(),
            ToolSet::empty(),
            Box::new(SequentialIds::starting_at(1)),
        )
        .is_ok()
    );
}

/// A tool set that registers a tool, prompt or resource twice is refused,
/// naming it, instead of serving the first and dropping the second.
#[test]
fn a_tool_set_with_a_name_twice_is_refused() {
    use std::sync::Arc;

    use mcp_tasks_edge::ids::SequentialIds;
    use mcp_tasks_edge::resources::text_resource;
    use mcp_tasks_edge::server::Server;
    use mcp_tasks_edge::store::MemoryStore;
    use mcp_tasks_edge::tools::ToolSet;
    let server = |tools: ToolSet| {
        Server::new(
            Arc::new(MemoryStore::new()),
            crate::support::config(),
            tools,
            Box::new(SequentialIds::starting_at(1)),
        )
    };
    let demo = || mcp_tasks_edge::demo::tools(0);
    let doc = || text_resource("docs://a", "a", "text/plain", "A");
    for (set, named) in [
        (demo().and(demo()), "the tool generate_report"),
        (
            ToolSet::empty().with_resource(doc()).with_resource(doc()),
            "the resource docs://a",
        ),
    ] {
        let Err(e) = server(set) else {
            panic!("{named} twice was served")
        };
        assert!(e.message.contains(named), "{}", e.message);
    }
    assert!(server(demo().with_resource(doc())).is_ok());
}

/// `server/discover` advertises `prompts` only where a prompt is
/// registered, `resources` only where a resource or a template is, and
/// `completions` only where either can be completed; each method behind a
/// capability it does not advertise is -32601 with 404, as a method this
/// server does not have.
#[test]
fn catalog_methods_only_behind_the_capabilities_advertised() {
    use mcp_tasks_edge::resources::text_resource;
    let with = Harness::with_tools;
    let calls = [
        ("prompts", "prompts/list", json!({})),
        ("prompts", "prompts/get", json!({"name": "x"})),
        ("resources", "resources/list", json!({})),
        ("resources", "resources/templates/list", json!({})),
        ("resources", "resources/read", json!({"uri": "docs://a"})),
        (
            "completions",
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": ""}}),
        ),
    ];
    let doc = || text_resource("docs://a", "a", "text/plain", "A");
    for (h, offered) in [
        (with(mcp_tasks_edge::demo::tools(0)), &[][..]),
        (
            with(mcp_tasks_edge::demo::tools(0).with_resource(doc())),
            &["resources"][..],
        ),
        (Harness::new(), &["prompts", "resources", "completions"][..]),
    ] {
        let d = h.ok("server/discover", json!({}));
        let caps = &d["capabilities"];
        assert!(caps["tools"].is_object(), "{d}");
        for (capability, method, params) in &calls {
            let on = offered.contains(capability);
            assert_eq!(caps.get(*capability).is_some(), on, "{capability}: {d}");
            let (status, v) = h.send(method, params.clone());
            if on {
                assert_ne!(v["error"]["code"], -32601, "{method}: {v}");
            } else {
                assert_eq!((status, code(&v)), (404, -32601), "{method}: {v}");
            }
        }
    }
}
