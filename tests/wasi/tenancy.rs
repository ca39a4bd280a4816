//! Tenancy through the component: bearer JWTs verified inside the guest,
//! and a cross-tenant probe matrix over every task method. A foreign task
//! must answer exactly like one that never existed, and no probe may change
//! anyone's task in the host store.

use mcp_tasks_edge::auth::sign_hs256;
use mcp_tasks_edge::block_on;
use mcp_tasks_edge::store::Store;
use serde_json::{Value, json};

use crate::runtime::{Clock, Collected};
use crate::support::{T0, TempDir, caps, env, meta, post_raw, runtime, settings, standard_headers};

const SECRET: &str = "wasi-tenancy-hs256-secret-32-bytes!!";
const RESOURCE: &str = "http://127.0.0.1:8788/mcp";
const ISSUER: &str = "https://issuer.test";

fn token(sub: &str, tenant: &str, exp_ms: i64) -> String {
    let claims =
        json!({"iss": ISSUER, "aud": RESOURCE, "sub": sub, "tenant": tenant, "exp": exp_ms / 1000});
    sign_hs256(SECRET.as_bytes(), &claims)
}

async fn call(
    rt: &std::sync::Arc<crate::runtime::Runtime>,
    token: Option<&str>,
    method: &str,
    mut params: Value,
) -> (u16, bytes::Bytes) {
    params["_meta"] = meta(caps());
    let msg = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
    let mut h = standard_headers(&msg);
    if let Some(t) = token {
        h.push(("authorization".into(), format!("Bearer {t}")));
    }
    let r = post_raw(rt, &h, serde_json::to_vec(&msg).unwrap()).await;
    (r.status, r.body)
}

/// A runtime verifying HS256 tokens, its clock at [`T0`], its store in
/// `dir`; `extra` settings added.
fn jwt_runtime(
    dir: &TempDir,
    extra: &[(&str, &str)],
) -> (Clock, std::sync::Arc<crate::runtime::Runtime>) {
    let clock = Clock::manual(T0);
    let mut s = settings(&clock);
    let mut vars = vec![
        ("MCP_AUTH", "jwt"),
        ("MCP_JWT_HS256_SECRET", SECRET),
        ("MCP_JWT_ISSUER", ISSUER),
        ("MCP_RESOURCE_URL", RESOURCE),
    ];
    vars.extend_from_slice(extra);
    s.env = env(&vars);
    let rt = runtime(dir.path(), s);
    (clock, rt)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_tenant_probes_find_nothing_through_the_component() {
    let dir = TempDir::new("tenancy");
    let (clock, rt) = jwt_runtime(&dir, &[]);
    let exp = T0 + 3_600_000;
    let people = [("acme", "alice"), ("acme", "bob"), ("globex", "alice")];
    let tokens: Vec<String> = people.iter().map(|(t, p)| token(p, t, exp)).collect();

    // Each person owns a task waiting for input.
    let mut owned = Vec::new();
    for t in &tokens {
        let (status, body) = call(
            &rt,
            Some(t),
            "tools/call",
            json!({"name": "confirm_delete", "arguments": {"filename": "f"}}),
        )
        .await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let v: Value = serde_json::from_slice(&body).unwrap();
        owned.push(v["result"]["taskId"].as_str().unwrap().to_owned());
    }
    rt.tick(clock.now_ms()).await.unwrap();
    let versions = |ids: &[String]| -> Vec<Option<u64>> {
        ids.iter()
            .map(|id| block_on(rt.store().get(id)).unwrap().map(|e| e.version))
            .collect()
    };
    let before = versions(&owned);

    let params = |method: &str, id: &str| match method {
        "tasks/update" => {
            json!({"taskId": id, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}})
        }
        "subscriptions/listen" => json!({"notifications": {"taskIds": [id]}}),
        _ => json!({"taskId": id}),
    };
    let mut probes = 0;
    for (me, t) in tokens.iter().enumerate() {
        for method in [
            "tasks/get",
            "tasks/update",
            "tasks/cancel",
            "subscriptions/listen",
        ] {
            let unknown = call(
                &rt,
                Some(t),
                method,
                params(method, "tsk_AAAAAAAAAAAAAAAAAAAAAA"),
            )
            .await;
            assert!(unknown.0 == 200, "{method}");
            for (other, id) in owned.iter().enumerate() {
                if other == me {
                    continue;
                }
                probes += 1;
                let got = call(&rt, Some(t), method, params(method, id)).await;
                assert_eq!(
                    got, unknown,
                    "{} {method} on {}'s task",
                    people[me].1, people[other].1
                );
            }
        }
    }
    assert_eq!(versions(&owned), before, "a probe changed someone's task");
    // The owners still see their tasks waiting.
    for (t, id) in tokens.iter().zip(&owned) {
        let (_, body) = call(&rt, Some(t), "tasks/get", json!({"taskId": id})).await;
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["result"]["status"], "input_required");
    }
    eprintln!("cross-tenant probes through the component: {probes}, leaks: 0");

    // A malformed id is refused as such, the same for everyone.
    for t in &tokens {
        for bad in ["garbage!!", "", "tsk_short"] {
            let (status, body) = call(&rt, Some(t), "tasks/get", json!({"taskId": bad})).await;
            let v: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!((status, v["error"]["code"].as_i64()), (200, Some(-32602)));
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("Invalid taskId"),
                "{v}"
            );
        }
    }
    // Past the TTL (before the sweep purges): the owner learns the task
    // expired; a foreign expired task still reads like an unknown one.
    clock.advance(3_600_000);
    let later: Vec<String> = people
        .iter()
        .map(|(t, p)| token(p, t, clock.now_ms() + 600_000))
        .collect();
    let unknown = call(
        &rt,
        Some(&later[1]),
        "tasks/get",
        json!({"taskId": "tsk_AAAAAAAAAAAAAAAAAAAAAA"}),
    )
    .await;
    let foreign = call(
        &rt,
        Some(&later[1]),
        "tasks/get",
        json!({"taskId": owned[0]}),
    )
    .await;
    assert_eq!(foreign, unknown, "a foreign expired task");
    let (_, own) = call(
        &rt,
        Some(&later[0]),
        "tasks/get",
        json!({"taskId": owned[0]}),
    )
    .await;
    let v: Value = serde_json::from_slice(&own).unwrap();
    assert_eq!(
        v["error"]["message"], "Failed to retrieve task: Task has expired",
        "{v}"
    );

    // Token defects are refused inside the guest too.
    let defects = [
        ("expired", token("alice", "acme", T0 - 120_000)),
        (
            "other audience",
            sign_hs256(
                SECRET.as_bytes(),
                &json!({"iss": ISSUER, "aud": "https://elsewhere/mcp", "sub": "alice", "exp": exp / 1000}),
            ),
        ),
        (
            "other secret",
            sign_hs256(
                b"another-secret-of-32-bytes-or-more!!",
                &json!({"iss": ISSUER, "aud": RESOURCE, "sub": "alice", "exp": exp / 1000}),
            ),
        ),
        ("garbage", "not.a.token".to_owned()),
    ];
    for (why, t) in &defects {
        let (status, _) = call(&rt, Some(t), "tools/list", json!({})).await;
        assert_eq!(status, 401, "{why}");
    }
    let (status, _) = call(&rt, None, "tools/list", json!({})).await;
    assert_eq!(status, 401, "no token");
    assert_eq!(rt.traps(), 0);
}

/// The component keeps the tokens it accepted (no second signature check
/// for a client's next request), and a kept token is still refused from
/// its expiry on, to the millisecond, as if it had never been seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_the_component_kept_is_refused_from_its_expiry_on() {
    let dir = TempDir::new("token-expiry");
    let (clock, rt) = jwt_runtime(&dir, &[("MCP_JWT_LEEWAY_MS", "0")]);
    let exp = T0 + 60_000;
    let alice = token("alice", "acme", exp);
    for at in [T0, T0 + 30_000, exp - 1] {
        clock.set(at);
        let (status, body) = call(&rt, Some(&alice), "tools/list", json!({})).await;
        assert_eq!(status, 200, "at {at}: {}", String::from_utf8_lossy(&body));
    }
    clock.set(exp);
    let (status, _) = call(&rt, Some(&alice), "tools/list", json!({})).await;
    assert_eq!(status, 401, "expired, though accepted a moment before");
    clock.set(exp + 3_600_000);
    let (status, _) = call(&rt, Some(&alice), "tools/list", json!({})).await;
    assert_eq!(status, 401, "still expired");
    let renewed = token("alice", "acme", exp + 7_200_000);
    let (status, _) = call(&rt, Some(&renewed), "tools/list", json!({})).await;
    assert_eq!(status, 200, "a new token for the same person");
    assert_eq!(rt.traps(), 0);
}

/// A 2025-11-25 request from `token`'s holder, with `session` if given.
async fn legacy_call(
    rt: &std::sync::Arc<crate::runtime::Runtime>,
    token: &str,
    session: Option<&str>,
    msg: &Value,
) -> Collected {
    let mut h = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("authorization".to_owned(), format!("Bearer {token}")),
    ];
    if let Some(s) = session {
        h.push(("mcp-protocol-version".to_owned(), "2025-11-25".to_owned()));
        h.push(("mcp-session-id".to_owned(), s.to_owned()));
    }
    post_raw(rt, &h, serde_json::to_vec(msg).unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_the_component_kept_answers_only_its_owner() {
    let dir = TempDir::new("session-kept");
    let (_clock, rt) = jwt_runtime(&dir, &[]);
    let exp = T0 + 3_600_000;
    let (alice, bob) = (token("alice", "acme", exp), token("bob", "acme", exp));
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "session-kept", "version": "1"}}});
    let r = legacy_call(&rt, &alice, None, &init).await;
    assert_eq!(r.status, 200);
    let session = r.headers["mcp-session-id"].to_str().unwrap().to_owned();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    // Verified, then answered from what the component kept.
    for _ in 0..3 {
        let r = legacy_call(&rt, &alice, Some(&session), &list).await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    // The same session presented by someone else is unknown.
    let r = legacy_call(&rt, &bob, Some(&session), &list).await;
    assert_eq!(r.status, 404, "another principal's session");
    // As is the session with its tag altered.
    let mut forged = session.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == 'A' { 'B' } else { 'A' });
    let r = legacy_call(&rt, &alice, Some(&forged), &list).await;
    assert_eq!(r.status, 404, "an altered tag");
    let r = legacy_call(&rt, &alice, Some(&session), &list).await;
    assert_eq!(r.status, 200, "the owner's session still");
    assert_eq!(rt.traps(), 0);
}

/// The bearer challenge through the component: another scheme is answered
/// as no token is (no error code, RFC 6750 §3.1), a refused token names
/// `invalid_token`, and two `Authorization` headers are a malformed
/// request (400, `invalid_request`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_challenges_follow_rfc_6750_through_the_component() {
    let dir = TempDir::new("tenancy-challenges");
    let (_clock, rt) = jwt_runtime(&dir, &[]);
    let good = format!("Bearer {}", token("alice", "acme", T0 + 3_600_000));
    let send = |authorization: Vec<String>| {
        let rt = rt.clone();
        async move {
            let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                "params": {"_meta": meta(caps())}});
            let mut h = standard_headers(&msg);
            for a in authorization {
                h.push(("authorization".into(), a));
            }
            let r = post_raw(&rt, &h, serde_json::to_vec(&msg).unwrap()).await;
            let challenge = r.header("www-authenticate").unwrap_or_default().to_owned();
            (r.status, challenge)
        }
    };
    let (status, challenge) = send(vec!["Basic YWxpY2U6cHc=".into()]).await;
    assert_eq!(status, 401);
    assert!(
        challenge.starts_with("Bearer ") && !challenge.contains("error="),
        "{challenge}"
    );
    let (status, challenge) = send(vec!["Bearer not.a.token".into()]).await;
    assert_eq!(status, 401);
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    let (status, challenge) = send(vec![good.clone(), good.clone()]).await;
    assert_eq!(status, 400);
    assert!(
        challenge.contains("error=\"invalid_request\""),
        "{challenge}"
    );
    assert_eq!(send(vec![good]).await.0, 200);
}
