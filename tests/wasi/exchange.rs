//! The `exchange` export answers exactly like `wasi:http/incoming-handler`:
//! the same status, content type and bytes for the same request (normal and
//! hostile ones that change nothing), and `none` for a stream.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use wasmtime::component::Component;

use crate::runtime::{Clock, Runtime};
use crate::sqlite::SqliteStore;
use crate::support::{
    HostProcess, T0, TempDir, caps, exchange_raw, meta, raw, runtime, settings, standard_headers,
};

/// (method, path, headers, body)
type Case<'a> = (&'a str, &'a str, Vec<(String, String)>, Vec<u8>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchange_and_wasi_http_answer_alike() {
    let dir = TempDir::new("exchange");
    let rt = runtime(dir.path(), settings(&Clock::manual(T0)));
    let msg = |id: i64, method: &str, mut params: serde_json::Value| {
        params["_meta"] = meta(caps());
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    };
    // A task to read.
    let create = msg(
        1,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 60}}),
    );
    let created = raw(
        &rt,
        "POST",
        "/mcp",
        &standard_headers(&create),
        serde_json::to_vec(&create).unwrap(),
    )
    .await;
    let task = created.json()["result"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();

    let good = |m: &serde_json::Value| (standard_headers(m), serde_json::to_vec(m).unwrap());
    let mut cases: Vec<Case<'_>> = Vec::new();
    for m in [
        msg(2, "server/discover", json!({})),
        msg(3, "tools/list", json!({})),
        msg(4, "tasks/get", json!({"taskId": task})),
        msg(
            5,
            "tasks/get",
            json!({"taskId": "tsk_unknownAAAAAAAAAAAAAAA"}),
        ),
        msg(
            6,
            "tools/call",
            json!({"name": "greet", "arguments": {"name": "x"}}),
        ),
        msg(8, "no/such/method", json!({})),
        msg(9, "tools/call", json!({"name": "greet", "arguments": {}})),
    ] {
        let (h, b) = good(&m);
        cases.push(("POST", "/mcp", h, b));
    }
    let (h, _) = good(&msg(10, "tools/list", json!({})));
    cases.push(("POST", "/mcp", h.clone(), b"{".to_vec()));
    cases.push(("POST", "/mcp", h.clone(), b"\xff\xfe".to_vec()));
    cases.push(("POST", "/mcp", h.clone(), b"[1,2]".to_vec()));
    cases.push(("POST", "/mcp", h.clone(), vec![b' '; 1024 * 1024 + 1]));
    cases.push(("GET", "/mcp", h.clone(), Vec::new()));
    cases.push(("POST", "/elsewhere", h.clone(), Vec::new()));
    let mut wrong = h.clone();
    wrong.retain(|(k, _)| k != "mcp-method");
    cases.push((
        "POST",
        "/mcp",
        wrong,
        serde_json::to_vec(&msg(11, "tools/list", json!({}))).unwrap(),
    ));
    // Header fields as the host passes them in one string: a repeated
    // header with two values (refused), and values with colons and inner
    // spaces (an allowed Origin with a port; a user agent).
    let mut twice = h.clone();
    twice.push(("Mcp-Method".into(), "tools/call".into()));
    cases.push((
        "POST",
        "/mcp",
        twice,
        serde_json::to_vec(&msg(14, "tools/list", json!({}))).unwrap(),
    ));
    let mut colons = h.clone();
    colons.push(("origin".into(), "http://127.0.0.1:8788".into()));
    colons.push(("user-agent".into(), "probe/1.0 (a: b)".into()));
    cases.push((
        "POST",
        "/mcp",
        colons,
        serde_json::to_vec(&msg(15, "tools/list", json!({}))).unwrap(),
    ));
    let mut evil = h;
    evil.push(("origin".into(), "http://evil.example.com".into()));
    cases.push((
        "POST",
        "/mcp",
        evil,
        serde_json::to_vec(&msg(12, "tools/list", json!({}))).unwrap(),
    ));

    for (method, path, headers, body) in cases {
        let a = raw(&rt, method, path, &headers, body.clone()).await;
        let (status, out_headers, out_body) = exchange_raw(&rt, method, path, &headers, body)
            .await
            .expect("not a stream");
        let ct = |hs: &[(String, String)]| {
            hs.iter()
                .find(|(k, _)| k == "content-type")
                .map(|(_, v)| v.clone())
        };
        assert_eq!(status, a.status, "{method} {path}");
        assert_eq!(
            ct(&out_headers).as_deref(),
            a.header("content-type"),
            "{method} {path}"
        );
        assert_eq!(
            out_body,
            a.body.to_vec(),
            "{method} {path}: {}",
            String::from_utf8_lossy(&out_body)
        );
    }

    // A stream: the exchange declines, with no effect.
    let listen = msg(
        13,
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [task]}}),
    );
    let got = exchange_raw(
        &rt,
        "POST",
        "/mcp",
        &standard_headers(&listen),
        serde_json::to_vec(&listen).unwrap(),
    )
    .await;
    assert!(got.is_none());
    // Also with its `Mcp-Method` header in the `=?base64?…?=` form, which
    // the header check accepts (once run here, its stream had nowhere to
    // go: a 500, and the listen's slot held for a lease).
    let mut encoded = standard_headers(&listen);
    for (k, v) in encoded.iter_mut() {
        if k.eq_ignore_ascii_case("mcp-method") {
            *v = "=?base64?c3Vic2NyaXB0aW9ucy9saXN0ZW4=?=".to_owned();
        }
    }
    let got = exchange_raw(
        &rt,
        "POST",
        "/mcp",
        &encoded,
        serde_json::to_vec(&listen).unwrap(),
    )
    .await;
    assert!(got.is_none(), "{got:?}");
    assert_eq!(rt.traps(), 0);
}

/// A request whose answer may be a stream is declined before anything runs
/// (the host then serves it through `wasi:http`, once); frames all known by
/// the end of the call come back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_may_stream_is_declined_before_it_runs() {
    let dir = TempDir::new("exchange-declines");
    let rt = runtime(dir.path(), settings(&Clock::manual(T0)));
    let tasks = || {
        rt.store()
            .due(i64::MAX, 1_000)
            .unwrap()
            .into_iter()
            .filter(|k| k.starts_with("tsk_"))
            .count()
    };
    let legacy = |session: Option<&str>| {
        let mut h = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            (
                "accept".to_owned(),
                "application/json, text/event-stream".to_owned(),
            ),
            ("mcp-protocol-version".to_owned(), "2025-11-25".to_owned()),
        ];
        if let Some(s) = session {
            h.push(("mcp-session-id".to_owned(), s.to_owned()));
        }
        h
    };
    let body = |v: serde_json::Value| serde_json::to_vec(&v).unwrap();

    // 2025-11-25: initialize answers at once.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "legacy", "version": "1"}}});
    let (status, headers, _) = exchange_raw(&rt, "POST", "/mcp", &legacy(None), body(init))
        .await
        .expect("initialize answers at once");
    assert_eq!(status, 200);
    let session = headers
        .iter()
        .find(|(k, _)| k == "mcp-session-id")
        .map(|(_, v)| v.clone())
        .unwrap();
    let h = legacy(Some(&session));

    // A task tool's call held open until the task ends: declined, and
    // nothing was created.
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "slow_compute", "arguments": {"seconds": 1, "label": "once"}}});
    assert!(
        exchange_raw(&rt, "POST", "/mcp", &h, body(call.clone()))
            .await
            .is_none()
    );
    assert_eq!(tasks(), 0, "the declined call ran");
    // Through wasi:http (as a task, answered at once): one task.
    let mut as_task = call.clone();
    as_task["params"]["task"] = json!({});
    let a = raw(&rt, "POST", "/mcp", &h, body(as_task)).await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(tasks(), 1);
    // An escaped method name is still that method.
    let escaped = br#"{"jsonrpc":"2.0","id":3,"method":"tools\/call","params":{"name":"slow_compute","arguments":{"seconds":1}}}"#;
    assert!(
        exchange_raw(&rt, "POST", "/mcp", &h, escaped.to_vec())
            .await
            .is_none()
    );
    assert_eq!(tasks(), 1);
    // tasks/result may hold too; tasks/list answers at once.
    let result =
        json!({"jsonrpc": "2.0", "id": 4, "method": "tasks/result", "params": {"taskId": "tsk_x"}});
    assert!(
        exchange_raw(&rt, "POST", "/mcp", &h, body(result))
            .await
            .is_none()
    );
    let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/list"});
    let (status, _, out) = exchange_raw(&rt, "POST", "/mcp", &h, body(list))
        .await
        .expect("tasks/list answers at once");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&out));

    // 2026-07-28: a call's progress and result, all known when it returns,
    // come back whole, byte for byte what wasi:http streams.
    let mut params = json!({"name": "test_tool_with_progress", "arguments": {}});
    params["_meta"] = meta(caps());
    params["_meta"]["progressToken"] = json!("p1");
    let progress = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": params});
    let (status, headers, out) = exchange_raw(
        &rt,
        "POST",
        "/mcp",
        &standard_headers(&progress),
        body(progress.clone()),
    )
    .await
    .expect("frames known at once");
    assert_eq!(status, 200);
    assert!(
        headers
            .iter()
            .any(|(k, v)| k == "content-type" && v == "text/event-stream")
    );
    let text = String::from_utf8(out.clone()).unwrap();
    assert!(
        text.starts_with("data: ") && text.contains("notifications/progress"),
        "{text}"
    );
    let a = raw(
        &rt,
        "POST",
        "/mcp",
        &standard_headers(&progress),
        body(progress),
    )
    .await;
    assert_eq!(out, a.body.to_vec());
    assert_eq!(rt.traps(), 0);
}

/// The host's start-up check instantiates the component once and keeps the
/// instance: the first request does not instantiate again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_start_up_check_keeps_its_instance() {
    let dir = TempDir::new("exchange-check");
    let rt = runtime(dir.path(), settings(&Clock::manual(T0)));
    assert_eq!(rt.instantiations(), 0);
    rt.check()
        .await
        .expect("this tree's component runs in this host");
    assert_eq!(rt.instantiations(), 1);
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta(caps())}});
    let answer = exchange_raw(
        &rt,
        "POST",
        "/mcp",
        &standard_headers(&ping),
        serde_json::to_vec(&ping).unwrap(),
    )
    .await
    .expect("answered at once");
    assert_eq!(answer.0, 200, "{}", String::from_utf8_lossy(&answer.2));
    assert_eq!(rt.instantiations(), 1, "the checked instance served it");
}

/// A component of the world whose functions do nothing
/// (`tests/fixtures/world-stub.wat`).
const STUB: &str = include_str!("../fixtures/world-stub.wat");

/// Changes to the stub's types as a component built from another version
/// of `wit/world.wit` would have them, one export each: (the export, each
/// text the stub writes and what it writes instead).
type Change = (&'static str, &'static [(&'static str, &'static str)]);

const CHANGES: [Change; 4] = [
    (
        "mcp:tasks-edge/runner@0.1.0",
        &[(r#"(field "fenced" u32) "#, "")],
    ),
    (
        "mcp:tasks-edge/exchange@0.1.0",
        &[(r#"(field "status" u16)"#, r#"(field "status" u32)"#)],
    ),
    (
        "mcp:tasks-edge/diagnostics@0.1.0",
        &[("(result u32 (error string))", "(result u64 (error string))")],
    ),
    // The handler's two resources swapped (a borrowed request instead of
    // an owned one passes: wasmtime accepts either for a resource).
    (
        "wasi:http/incoming-handler@0.2.12",
        &[
            (
                r#"(param "request" 14) (param "response-out" 15)"#,
                r#"(param "request" 15) (param "response-out" 14)"#,
            ),
            (
                r#"(param "request" 3) (param "response-out" 5)"#,
                r#"(param "request" 5) (param "response-out" 3)"#,
            ),
            (
                r#"(param "request" 9) (param "response-out" 10)"#,
                r#"(param "request" 10) (param "response-out" 9)"#,
            ),
        ],
    ),
];

/// The stub with one of [`CHANGES`] made wherever the type is written: the
/// component's own definition, the interface's import of it and its export.
fn changed((_, edits): Change) -> String {
    let written: usize = edits
        .iter()
        .map(|(from, _)| STUB.matches(from).count())
        .sum();
    assert_eq!(written, 3, "{edits:?}");
    edits
        .iter()
        .fold(STUB.to_owned(), |text, (from, to)| text.replace(from, to))
}

/// The start-up check refuses a component whose exports have the world's
/// names but not its types (which linking does not see), with the reason
/// and the export; the stub with the world's types passes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_start_up_check_refuses_a_component_of_another_world() {
    let engine = Runtime::engine().unwrap();
    let cases = std::iter::once((None, STUB.to_owned()))
        .chain(CHANGES.map(|change| (Some(change.0), changed(change))));
    for (mismatched, text) in cases {
        let dir = TempDir::new("exchange-stub");
        let component = Component::new(&engine, &text).unwrap();
        let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
        let rt = Runtime::from_component(&engine, &component, store, settings(&Clock::manual(T0)))
            .expect("linked: every export is there by name");
        match (rt.check().await, mismatched) {
            (Ok(()), None) => {}
            (Ok(()), Some(export)) => panic!("{export} of another world passed the check"),
            (Err(e), None) => panic!("the world's own types were refused: {e:#}"),
            (Err(e), Some(export)) => {
                let reason = format!("{e:#}");
                assert!(
                    reason.contains("does not run in this host")
                        && reason.contains(&format!("its export {export} "))
                        && reason.contains("wit/world.wit")
                        && reason.contains("type mismatch"),
                    "{reason}"
                );
            }
        }
        assert_eq!(rt.instantiations(), 1);
    }
}

/// The host process does not start serving with such a component: it
/// exits at once with the check's reason, before it listens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_does_not_start_with_a_component_of_another_world() {
    let dir = TempDir::new("exchange-stub-host");
    let wat = dir.path().join("older.wat");
    std::fs::write(&wat, changed(CHANGES[0])).unwrap();
    let wat_path = wat.to_string_lossy();
    let mut host = HostProcess::spawn(
        &dir.path().join("data"),
        &["--component", &wat_path],
        &[
            ("MCP_AUTH", "insecure-local"),
            ("MCP_STATE_SECRET", "stub-test-state-secret-of-32-bytes!"),
        ],
        &[],
    );
    let Some(status) = host.exit_within(Duration::from_secs(60)).await else {
        panic!("the host ran with a component of another world");
    };
    let stderr = host.stderr();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("does not run in this host: its export mcp:tasks-edge/runner@0.1.0")
            && stderr.contains("older.wat"),
        "{stderr}"
    );
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", host.port)).is_err(),
        "nothing listens on its port"
    );
}

/// An instance whose memory grew past the pool's bound (a call that read a
/// large body) is dropped when released, not pooled at its peak: the next
/// request instantiates anew. Ordinary requests keep reusing one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_grown_past_the_pool_bound_is_not_pooled() {
    let dir = TempDir::new("exchange-pool-memory");
    let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta(caps())}});
    let small = serde_json::to_vec(&discover).unwrap();
    // The same request padded to 900 KB of JSON whitespace.
    let mut large = small.clone();
    large.resize(900_000, b' ');
    let headers = standard_headers(&discover);
    let send = |rt: Arc<Runtime>, body: Vec<u8>| {
        let headers = headers.clone();
        async move {
            let answer = raw(&rt, "POST", "/mcp", &headers, body).await;
            assert_eq!(answer.status, 200);
        }
    };
    // What ordinary requests grow an instance to.
    let rt = runtime(dir.path(), settings(&Clock::manual(T0)));
    send(rt.clone(), small.clone()).await;
    send(rt.clone(), small.clone()).await;
    assert_eq!(rt.instantiations(), 1);
    let ordinary = rt
        .limit_stats()
        .peak_memory
        .load(std::sync::atomic::Ordering::SeqCst);
    let mut s = settings(&Clock::manual(T0));
    s.pool_memory_max = ordinary + 256 * 1024;
    let rt = runtime(dir.path(), s);
    send(rt.clone(), small.clone()).await;
    send(rt.clone(), small.clone()).await;
    assert_eq!(rt.instantiations(), 1, "an ordinary instance is pooled");
    send(rt.clone(), large).await;
    assert_eq!(rt.instantiations(), 1);
    send(rt.clone(), small).await;
    assert_eq!(
        rt.instantiations(),
        2,
        "the grown instance was dropped, not pooled"
    );
}
