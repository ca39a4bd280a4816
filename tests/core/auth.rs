//! Authentication and tenancy through the adapter-facing HTTP function:
//! every token defect is refused with 401, and a cross-tenant probe matrix
//! over every task method finds no difference between a foreign task and
//! one that never existed.

use std::sync::Arc;

use ed25519_dalek::Signer as _;
use mcp_tasks_edge::auth::{Auth, JwtAuth, KeyKind, PublicKey, sign_hs256};
use mcp_tasks_edge::block_on;
use mcp_tasks_edge::crypto::b64url;
use mcp_tasks_edge::http::{HttpBody, HttpRequest, HttpResponse, handle};
use mcp_tasks_edge::ids::SequentialIds;
use mcp_tasks_edge::server::Server;
use mcp_tasks_edge::store::{MemoryStore, Store};
use serde_json::{Value, json};

use crate::support::{T0, caps, config, meta, standard_headers};

const RESOURCE: &str = "http://127.0.0.1:8787/mcp";
const ISSUER: &str = "https://issuer.test";
const HS: &[u8] = b"an-hs256-secret-of-at-least-32-bytes!!";

fn ed_key() -> ed25519_dalek::SigningKey {
    ed25519_dalek::SigningKey::from_bytes(&[7u8; 32])
}

fn p256_key() -> p256::ecdsa::SigningKey {
    p256::ecdsa::SigningKey::from_slice(&[9u8; 32]).unwrap()
}

fn p256_public() -> KeyKind {
    let point = p256_key().verifying_key().to_sec1_point(false);
    let sec1 = point.as_bytes();
    KeyKind::P256 {
        x: sec1[1..33].try_into().unwrap(),
        y: sec1[33..].try_into().unwrap(),
    }
}

fn jwt_auth() -> JwtAuth {
    JwtAuth {
        issuer: ISSUER.into(),
        resource: RESOURCE.into(),
        hs256_secret: Some(HS.to_vec()),
        keys: vec![
            PublicKey {
                kid: Some("ed-1".into()),
                key: KeyKind::Ed25519(ed_key().verifying_key().to_bytes()),
            },
            PublicKey {
                kid: Some("p256-1".into()),
                key: p256_public(),
            },
        ],
        tenant_claim: "tenant".into(),
        tenant_required: false,
        types: Vec::new(),
        leeway_ms: 60_000,
        authorization_servers: vec![ISSUER.into()],
    }
}

fn server() -> Server<Arc<MemoryStore>> {
    let mut c = config();
    c.auth = Auth::Jwt(Box::new(jwt_auth()));
    Server::new(
        Arc::new(MemoryStore::new()),
        c,
        crate::support::all_tools(),
        Box::new(SequentialIds::starting_at(1)),
    )
    .unwrap()
}

fn claims(sub: &str, tenant: &str) -> Value {
    json!({"iss": ISSUER, "aud": RESOURCE, "sub": sub, "tenant": tenant, "exp": T0 / 1000 + 600, "iat": T0 / 1000})
}

fn hs(sub: &str, tenant: &str) -> String {
    sign_hs256(HS, &claims(sub, tenant))
}

/// A compact JWS with any header and claims, signed by `sign` over the input.
fn jws(header: Value, claims: &Value, sign: impl Fn(&[u8]) -> Vec<u8>) -> String {
    let input = format!(
        "{}.{}",
        b64url(header.to_string().as_bytes()),
        b64url(claims.to_string().as_bytes())
    );
    let sig = sign(input.as_bytes());
    format!("{input}.{}", b64url(&sig))
}

fn eddsa(claims: &Value, kid: &str) -> String {
    jws(json!({"alg": "EdDSA", "kid": kid}), claims, |m| {
        ed_key().sign(m).to_bytes().to_vec()
    })
}

fn es256(claims: &Value, kid: &str) -> String {
    jws(json!({"alg": "ES256", "kid": kid}), claims, |m| {
        let s: p256::ecdsa::Signature = p256_key().sign(m);
        s.to_bytes().to_vec()
    })
}

fn call(
    s: &Server<Arc<MemoryStore>>,
    token: Option<&str>,
    id: i64,
    method: &str,
    params: Value,
) -> HttpResponse {
    let mut params = params;
    params["_meta"] = meta(caps());
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut headers: Vec<(String, String)> = standard_headers(&msg)
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b))
        .collect();
    if let Some(t) = token {
        headers.push(("Authorization".into(), format!("Bearer {t}")));
    }
    let body = serde_json::to_vec(&msg).unwrap();
    let req = HttpRequest {
        method: "POST",
        path: "/mcp",
        headers: &mcp_tasks_edge::http::header_refs(&headers),
        body: &body,
    };
    block_on(handle(s, &req, T0 + LATER.with(|l| l.get())))
}

thread_local! {
    /// How far past `T0` [`call`] acts (for tests that let time pass).
    static LATER: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

fn json_of(r: &HttpResponse) -> Value {
    serde_json::from_slice(r.body_bytes()).unwrap_or(Value::Null)
}

#[test]
fn valid_tokens_of_every_algorithm_are_accepted() {
    let s = server();
    let c = claims("alice", "acme");
    for token in [hs("alice", "acme"), eddsa(&c, "ed-1"), es256(&c, "p256-1")] {
        let r = call(&s, Some(&token), 1, "tools/list", json!({}));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(r.body_bytes()));
    }
    // aud as an array, and a token without a tenant claim (tenant = issuer).
    let mut c2 = claims("alice", "acme");
    c2["aud"] = json!(["https://other.example", RESOURCE]);
    c2.as_object_mut().unwrap().remove("tenant");
    assert_eq!(
        call(&s, Some(&sign_hs256(HS, &c2)), 1, "tools/list", json!({})).status,
        200
    );
}

#[test]
fn every_token_defect_is_refused_with_401() {
    let s = server();
    let good = claims("alice", "acme");
    let with = |k: &str, v: Value| {
        let mut c = good.clone();
        c[k] = v;
        c
    };
    let without = |k: &str| {
        let mut c = good.clone();
        c.as_object_mut().unwrap().remove(k);
        c
    };
    let mut flipped = hs("alice", "acme");
    let last = flipped.pop().unwrap();
    flipped.push(if last == 'A' { 'B' } else { 'A' });
    let defects: Vec<(&str, String)> = vec![
        (
            "expired",
            sign_hs256(HS, &with("exp", json!(T0 / 1000 - 61))),
        ),
        (
            "not yet valid",
            sign_hs256(HS, &with("nbf", json!(T0 / 1000 + 61))),
        ),
        (
            "wrong audience",
            sign_hs256(HS, &with("aud", json!("https://other.example/mcp"))),
        ),
        (
            "audience list without us",
            sign_hs256(HS, &with("aud", json!(["https://other.example/mcp"]))),
        ),
        (
            "wrong issuer",
            sign_hs256(HS, &with("iss", json!("https://evil.example"))),
        ),
        ("no exp", sign_hs256(HS, &without("exp"))),
        ("no sub", sign_hs256(HS, &without("sub"))),
        (
            "exp not a number",
            sign_hs256(HS, &with("exp", json!("tomorrow"))),
        ),
        ("bad signature", flipped),
        (
            "other secret",
            sign_hs256(b"another-secret-that-is-32-bytes-long!!", &good),
        ),
        (
            "alg none",
            jws(json!({"alg": "none"}), &good, |_| Vec::new()),
        ),
        (
            "alg none, no signature part",
            format!(
                "{}.{}.",
                b64url(br#"{"alg":"none"}"#),
                b64url(good.to_string().as_bytes())
            ),
        ),
        ("unknown kid", eddsa(&good, "ed-2")),
        ("EdDSA key id on ES256", es256(&good, "ed-1")),
        (
            "HS256 signed with a public key",
            jws(json!({"alg": "HS256"}), &good, |m| {
                mcp_tasks_edge::crypto::hmac_raw(ed_key().verifying_key().as_bytes(), m).to_vec()
            }),
        ),
        (
            "unsupported alg",
            jws(json!({"alg": "RS256"}), &good, |_| vec![0; 256]),
        ),
        (
            "crit header",
            jws(
                json!({"alg": "EdDSA", "kid": "ed-1", "crit": ["exp"]}),
                &good,
                |m| ed_key().sign(m).to_bytes().to_vec(),
            ),
        ),
        ("two parts", "abc.def".into()),
        ("four parts", "a.b.c.d".into()),
        ("not base64", "!!!.???.***".into()),
        (
            "not json",
            format!(
                "{}.{}.{}",
                b64url(b"hello"),
                b64url(b"world"),
                b64url(b"sig")
            ),
        ),
        ("empty", "".into()),
        ("huge", "a".repeat(9_000)),
    ];
    let tried = defects.len();
    for (why, token) in defects {
        let r = call(&s, Some(&token), 1, "tools/list", json!({}));
        assert_eq!(r.status, 401, "{why}");
        let challenge = r.header("www-authenticate").unwrap_or_default();
        assert!(challenge.starts_with("Bearer resource_metadata=\"http://127.0.0.1:8787/.well-known/oauth-protected-resource/mcp\""), "{why}: {challenge}");
        assert!(challenge.contains("error=\"invalid_token\""), "{why}");
        let body = String::from_utf8_lossy(r.body_bytes()).to_string();
        assert!(
            !token.is_empty() && !body.contains(&token[..token.len().min(20)]) || token.len() < 3,
            "{why}: the token is echoed"
        );
        assert!(r.trace.auth.is_some(), "{why}");
    }
    println!("token defects tried: {tried}");
    // No token, and a non-Bearer scheme.
    let r = call(&s, None, 1, "tools/list", json!({}));
    assert_eq!(r.status, 401);
    assert!(
        !r.header("www-authenticate")
            .unwrap()
            .contains("invalid_token")
    );
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta(caps())}});
    let headers: Vec<(String, String)> = standard_headers(&msg)
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b))
        .collect();
    let body = serde_json::to_vec(&msg).unwrap();
    let with = |authorization: &[String]| {
        let mut headers = headers.clone();
        for a in authorization {
            headers.push(("Authorization".into(), a.clone()));
        }
        block_on(handle(
            &s,
            &HttpRequest {
                method: "POST",
                path: "/mcp",
                headers: &mcp_tasks_edge::http::header_refs(&headers),
                body: &body,
            },
            T0,
        ))
    };
    // Another scheme is answered as no token is: no error code (RFC 6750
    // §3.1), so a client does not take it for a token to refresh.
    let r = with(&[format!("Basic {}", b64url(b"alice:pw"))]);
    assert_eq!(r.status, 401);
    let challenge = r.header("www-authenticate").unwrap();
    assert!(
        challenge.starts_with("Bearer ") && !challenge.contains("error="),
        "{challenge}"
    );
    // Two Authorization headers, even both genuine: a malformed request,
    // 400 with invalid_request.
    let good = format!("Bearer {}", hs("alice", "acme"));
    let r = with(&[good.clone(), good.clone()]);
    assert_eq!(r.status, 400);
    assert!(
        r.header("www-authenticate")
            .unwrap()
            .contains("error=\"invalid_request\""),
        "{:?}",
        r.header("www-authenticate")
    );
    assert_eq!(with(&[good]).status, 200);
}

/// A server whose JWT settings are edited by `edit`.
fn server_with(edit: impl FnOnce(&mut JwtAuth)) -> Server<Arc<MemoryStore>> {
    let mut auth = jwt_auth();
    edit(&mut auth);
    let mut c = config();
    c.auth = Auth::Jwt(Box::new(auth));
    Server::new(
        Arc::new(MemoryStore::new()),
        c,
        crate::support::all_tools(),
        Box::new(SequentialIds::starting_at(1)),
    )
    .unwrap()
}

#[test]
fn token_types_keys_and_tenants_are_checked_strictly() {
    let good = claims("alice", "acme");
    let hs_typed = |typ: Option<&str>| {
        let header = match typ {
            Some(t) => json!({"alg": "HS256", "typ": t}),
            None => json!({"alg": "HS256"}),
        };
        jws(header, &good, |m| {
            mcp_tasks_edge::crypto::hmac_raw(HS, m).to_vec()
        })
    };
    // A `typ` allow-list: at+jwt (RFC 9068), with or without `application/`.
    let s = server_with(|a| a.types = vec!["at+jwt".into()]);
    for (typ, status) in [
        (Some("at+jwt"), 200),
        (Some("application/AT+JWT"), 200),
        (Some("JWT"), 401),
        (Some("id_token+jwt"), 401),
        (None, 401),
    ] {
        let r = call(&s, Some(&hs_typed(typ)), 1, "tools/list", json!({}));
        assert_eq!(r.status, status, "typ {typ:?}");
    }
    // Without the list, `typ` is not checked.
    let s = server();
    assert_eq!(
        call(&s, Some(&hs_typed(Some("JWT"))), 1, "tools/list", json!({})).status,
        200
    );
    // A subject or tenant with a control character in it is refused: the
    // owner's records are keyed by the two joined with NUL.
    for (sub, tenant) in [
        ("a\u{0}b", "acme"),
        ("alice", "ac\u{0}me"),
        ("al\nice", "acme"),
    ] {
        let r = call(&s, Some(&hs(sub, tenant)), 1, "tools/list", json!({}));
        assert_eq!(r.status, 401, "{sub:?} of {tenant:?}");
    }

    // Keys published for encryption, for another algorithm or without
    // `verify` never verify a token.
    let x = b64url(ed_key().verifying_key().as_bytes());
    for (jwk, verifies) in [
        (
            json!({"kty": "OKP", "crv": "Ed25519", "kid": "k", "x": x, "use": "sig", "alg": "EdDSA", "key_ops": ["verify"]}),
            true,
        ),
        (
            json!({"kty": "OKP", "crv": "Ed25519", "kid": "k", "x": x, "use": "enc"}),
            false,
        ),
        (
            json!({"kty": "OKP", "crv": "Ed25519", "kid": "k", "x": x, "alg": "ES256"}),
            false,
        ),
        (
            json!({"kty": "OKP", "crv": "Ed25519", "kid": "k", "x": x, "key_ops": ["encrypt"]}),
            false,
        ),
    ] {
        let keys = mcp_tasks_edge::auth::parse_jwks(&json!({"keys": [jwk]}).to_string()).unwrap();
        let s = server_with(|a| a.keys = keys);
        let r = call(&s, Some(&eddsa(&good, "k")), 1, "tools/list", json!({}));
        assert_eq!(r.status, if verifies { 200 } else { 401 }, "{jwk}");
    }

    // A token without the tenant claim: refused when the claim is required;
    // otherwise its tenant is namespaced, and a tenant claim can never take
    // that name.
    let mut no_tenant = good.clone();
    no_tenant.as_object_mut().unwrap().remove("tenant");
    let s = server_with(|a| a.tenant_required = true);
    assert_eq!(
        call(
            &s,
            Some(&sign_hs256(HS, &no_tenant)),
            1,
            "tools/list",
            json!({})
        )
        .status,
        401
    );
    let s = server();
    let start = |token: &str| {
        let r = call(
            &s,
            Some(token),
            1,
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 60}}),
        );
        json_of(&r)["result"]["taskId"].as_str().unwrap().to_owned()
    };
    let issuer_tenant = start(&sign_hs256(HS, &no_tenant));
    // The same principal with a tenant claim equal to the issuer (or to the
    // namespaced form) cannot reach that task.
    let as_issuer = sign_hs256(HS, &claims("alice", ISSUER));
    let r = json_of(&call(
        &s,
        Some(&as_issuer),
        2,
        "tasks/get",
        json!({"taskId": issuer_tenant}),
    ));
    assert_eq!(
        r["error"]["message"], "Failed to retrieve task: Task not found",
        "{r}"
    );
    let spoof = sign_hs256(HS, &claims("alice", &format!("iss:{ISSUER}")));
    assert_eq!(
        call(&s, Some(&spoof), 3, "tools/list", json!({})).status,
        401
    );
    // The tenant-less token still reads its own task.
    let r = json_of(&call(
        &s,
        Some(&sign_hs256(HS, &no_tenant)),
        4,
        "tasks/get",
        json!({"taskId": issuer_tenant}),
    ));
    assert_eq!(r["result"]["taskId"], issuer_tenant.as_str(), "{r}");
}

#[test]
fn protected_resource_metadata_is_published() {
    let s = server();
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let r = block_on(handle(
            &s,
            &HttpRequest {
                method: "GET",
                path,
                headers: &[],
                body: b"",
            },
            T0,
        ));
        assert_eq!(r.status, 200, "{path}");
        let m = json_of(&r);
        assert_eq!(m["resource"], RESOURCE);
        assert_eq!(m["authorization_servers"], json!([ISSUER]));
        assert_eq!(m["bearer_methods_supported"], json!(["header"]));
    }
}

/// Every task method on own, foreign, expired and random ids, for several
/// principals in two tenants. Foreign and unknown answers must be
/// byte-identical, and no probe may change anyone's task.
#[test]
fn cross_tenant_probe_matrix() {
    let s = server();
    let people = [
        ("acme", "alice"),
        ("acme", "bob"),
        ("globex", "alice"),
        ("globex", "carol"),
    ];
    let tokens: Vec<String> = people.iter().map(|(t, p)| hs(p, t)).collect();
    // Each person owns a task waiting for input and a finished one.
    let mut owned: Vec<Vec<String>> = Vec::new();
    for token in &tokens {
        let start = |tool: &str, args: Value| -> String {
            let r = json_of(&call(
                &s,
                Some(token),
                1,
                "tools/call",
                json!({"name": tool, "arguments": args}),
            ));
            r["result"]["taskId"].as_str().unwrap().to_owned()
        };
        owned.push(vec![
            start("confirm_delete", json!({"filename": "f"})),
            start("failing_job", json!({})),
        ]);
    }
    block_on(s.tick(T0 + 1_000));
    let snapshot = |ids: &[Vec<String>]| -> Vec<Option<u64>> {
        ids.iter()
            .flatten()
            .map(|id| block_on(s.store().get(id)).unwrap().map(|e| e.version))
            .collect()
    };
    let before = snapshot(&owned);
    let methods = [
        "tasks/get",
        "tasks/update",
        "tasks/cancel",
        "subscriptions/listen",
    ];
    let params = |method: &str, id: &str| match method {
        "tasks/update" => {
            json!({"taskId": id, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}})
        }
        "subscriptions/listen" => json!({"notifications": {"taskIds": [id]}}),
        _ => json!({"taskId": id}),
    };
    let answer = |token: &str, method: &str, id: &str| -> (u16, Vec<u8>) {
        let r = call(&s, Some(token), 77, method, params(method, id));
        let bytes = match r.body {
            HttpBody::Events(mut stream) => {
                // The acknowledgement names the tasks the caller may follow.
                match block_on(stream.next(&s, T0)) {
                    mcp_tasks_edge::http::Next::Send(b) => b,
                    other => panic!("{other:?}"),
                }
            }
            _ => r.body_bytes().to_vec(),
        };
        (r.status, bytes)
    };
    let mut probes = 0;
    let mut leaks = 0;
    for (me, token) in tokens.iter().enumerate() {
        for method in methods {
            let unknown = answer(token, method, "tsk_AAAAAAAAAAAAAAAAAAAAAA");
            probes += 1;
            if answer(token, method, "tsk_zzzzzzzzzzzzzzzzzzzzzz") != unknown {
                leaks += 1;
            }
            // A malformed id is refused as such, without a read, the same
            // for everyone.
            for malformed in ["not-a-task-id", "own_whatever", "tsk_short", ""] {
                if method == "subscriptions/listen" {
                    continue;
                }
                let (status, body) = answer(token, method, malformed);
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
            for (other, ids) in owned.iter().enumerate() {
                if other == me {
                    continue;
                }
                for id in ids {
                    probes += 1;
                    let got = answer(token, method, id);
                    if got != unknown {
                        leaks += 1;
                        eprintln!(
                            "LEAK: {} {} on {}'s task {id}: {}",
                            people[me].1,
                            method,
                            people[other].1,
                            String::from_utf8_lossy(&got.1)
                        );
                    }
                }
            }
        }
    }
    assert_eq!(snapshot(&owned), before, "a probe changed someone's task");
    // Expired tasks answer like unknown ones too.
    let ttl = s.config().task_ttl_ms as i64;
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let token = {
            let mut c = claims("alice", "acme");
            c["exp"] = json!((T0 + ttl) / 1000 + 600);
            sign_hs256(HS, &c)
        };
        let msg_of = |id: &str| {
            let mut p = params(method, id);
            p["_meta"] = meta(caps());
            json!({"jsonrpc": "2.0", "id": 77, "method": method, "params": p})
        };
        let send = |id: &str| {
            let msg = msg_of(id);
            let mut headers: Vec<(String, String)> = standard_headers(&msg)
                .into_iter()
                .map(|(a, b)| (a.to_owned(), b))
                .collect();
            headers.push(("Authorization".into(), format!("Bearer {token}")));
            let body = serde_json::to_vec(&msg).unwrap();
            let r = block_on(handle(
                &s,
                &HttpRequest {
                    method: "POST",
                    path: "/mcp",
                    headers: &mcp_tasks_edge::http::header_refs(&headers),
                    body: &body,
                },
                T0 + ttl,
            ));
            r.body_bytes().to_vec()
        };
        // Another owner's expired task reads like an unknown one; the
        // caller's own says that it expired.
        probes += 1;
        if send(&owned[1][1]) != send("tsk_AAAAAAAAAAAAAAAAAAAAAA") {
            leaks += 1;
        }
        let own: Value = serde_json::from_slice(&send(&owned[0][1])).unwrap();
        assert_eq!(own["error"]["code"], -32602, "{method}");
        assert_eq!(
            own["error"]["message"], "Failed to retrieve task: Task has expired",
            "{method}"
        );
    }
    // The owners still see their tasks.
    for (token, ids) in tokens.iter().zip(&owned) {
        let r = json_of(&call(
            &s,
            Some(token),
            1,
            "tasks/get",
            json!({"taskId": ids[0]}),
        ));
        assert_eq!(r["result"]["status"], "input_required");
    }
    println!("cross-tenant probes: {probes}, leaks: {leaks}");
    assert_eq!(leaks, 0);
    assert!(probes >= 100, "{probes}");
}

#[test]
fn the_quota_limits_unfinished_tasks_per_principal() {
    let mut c = config();
    c.auth = Auth::Jwt(Box::new(jwt_auth()));
    c.limits.max_outstanding_tasks = 3;
    let s = Server::new(
        Arc::new(MemoryStore::new()),
        c,
        crate::support::all_tools(),
        Box::new(SequentialIds::starting_at(1)),
    )
    .unwrap();
    let alice = hs("alice", "acme");
    let bob = hs("bob", "acme");
    let start = |token: &str| {
        call(
            &s,
            Some(token),
            1,
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 60}}),
        )
    };
    let mut ids = Vec::new();
    for _ in 0..3 {
        let r = start(&alice);
        assert_eq!(r.status, 200);
        ids.push(json_of(&r)["result"]["taskId"].as_str().unwrap().to_owned());
    }
    let refused = start(&alice);
    assert_eq!(refused.status, 429);
    assert!(refused.header("retry-after").is_some());
    let e = json_of(&refused);
    assert_eq!(e["error"]["code"], -32602);
    assert_eq!(e["error"]["data"]["maxOutstandingTasks"], 3);
    // Someone else is not affected.
    assert_eq!(start(&bob).status, 200);
    // Finishing one (here: cancelling it) frees a slot.
    assert_eq!(
        call(
            &s,
            Some(&alice),
            2,
            "tasks/cancel",
            json!({"taskId": ids[0]})
        )
        .status,
        200
    );
    // The record is read back at most once a second for a caller at its
    // limit, so the freed slot shows a second later.
    LATER.with(|l| l.set(1_000));
    assert_eq!(start(&alice).status, 200);
    assert_eq!(start(&alice).status, 429);
    LATER.with(|l| l.set(0));
}

#[test]
fn oversized_and_deep_inputs_get_clear_errors() {
    let s = server();
    let token = hs("alice", "acme");
    let deep = json!({"name": "greet", "arguments": {"name": "x", "extra": serde_json::from_str::<Value>(&format!("{}1{}", "[".repeat(40), "]".repeat(40))).unwrap()}});
    let r = call(&s, Some(&token), 7, "tools/call", deep);
    assert_eq!(
        (r.status, json_of(&r)["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
    assert_eq!(json_of(&r)["id"], 7, "the error names the request");
    let long = json!({"name": "greet", "arguments": {"name": "x".repeat(70_000)}});
    let r = call(&s, Some(&token), 8, "tools/call", long);
    assert_eq!(
        (r.status, json_of(&r)["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
    assert_eq!(json_of(&r)["id"], 8, "the error names the request");
    // Nested far past the limit: the id is still read (what it skips is
    // skipped without recursion).
    let mut nested = json!(1);
    for _ in 0..200 {
        nested = json!([nested]);
    }
    let deeper = json!({"name": "greet", "arguments": {"name": "x", "extra": nested}});
    let r = call(&s, Some(&token), 10, "tools/call", deeper);
    assert_eq!(
        (r.status, json_of(&r)["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
    assert_eq!(json_of(&r)["id"], 10);
    let wide = json!({"name": "greet", "arguments": {"name": "x", "list": vec![0; 1_001]}});
    let r = call(&s, Some(&token), 9, "tools/call", wide);
    assert_eq!(
        (r.status, json_of(&r)["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
    assert_eq!(json_of(&r)["id"], 9, "the error names the request");
    let many: serde_json::Map<String, Value> = (0..33)
        .map(|i| (format!("k{i}"), json!({"action": "decline"})))
        .collect();
    let r = call(
        &s,
        Some(&token),
        1,
        "tasks/update",
        json!({"taskId": "tsk_x", "inputResponses": many}),
    );
    assert_eq!(json_of(&r)["error"]["code"], -32602);
    assert!(
        json_of(&r)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Too many inputResponses")
    );
}

/// The shared vectors (the Worker runs the same file with WebCrypto).
#[test]
fn shared_jwt_vectors_pass_with_rustcrypto() {
    let text = include_str!("../vectors/jwt.json");
    let report = block_on(mcp_tasks_edge::auth::vectors::run(
        text,
        &mcp_tasks_edge::auth::RustCrypto,
    ))
    .unwrap();
    assert!(report.failures.is_empty(), "{:#?}", report.failures);
    assert_eq!(report.passed, 23);
    // The runner notices a verdict that differs from the file's.
    let mut flipped: Value = serde_json::from_str(text).unwrap();
    flipped["cases"][0]["expect"] = json!({"refused": "bad signature"});
    let report = block_on(mcp_tasks_edge::auth::vectors::run(
        &flipped.to_string(),
        &mcp_tasks_edge::auth::RustCrypto,
    ))
    .unwrap();
    assert_eq!((report.passed, report.failures.len()), (22, 1));
}

/// Small-order and non-canonical Ed25519 keys are refused when the key set
/// is read, on every runtime (no cryptography involved), before any
/// verifier could accept a forgery for them.
#[test]
fn weak_ed25519_keys_are_refused_in_the_key_set() {
    let mut p_minus_1 = [0xffu8; 32];
    p_minus_1[0] = 0xec;
    p_minus_1[31] = 0x7f;
    let mut p_plus_3 = p_minus_1;
    p_plus_3[0] = 0xf0;
    let mut identity = [0u8; 32];
    identity[0] = 1;
    let order_8 = hex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05");
    let mut order_8_signed = order_8;
    order_8_signed[31] |= 0x80;
    for (what, key) in [
        ("zero", [0u8; 32]),
        ("identity", identity),
        ("order 8", order_8),
        ("order 8, sign bit set", order_8_signed),
        ("p - 1", p_minus_1),
        ("p + 3 (non-canonical)", p_plus_3),
    ] {
        let jwks = json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": b64url(&key)}]});
        let err = mcp_tasks_edge::auth::parse_jwks(&jwks.to_string()).unwrap_err();
        assert!(err.contains("small order"), "{what}: {err}");
    }
    // An ordinary key is still read.
    let jwks = json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": b64url(ed_key().verifying_key().as_bytes())}]});
    assert_eq!(
        mcp_tasks_edge::auth::parse_jwks(&jwks.to_string())
            .unwrap()
            .len(),
        1
    );
}

/// An identity provider's key set with RSA and P-384 keys beside the one
/// this server verifies with is read for that one key, instead of refused
/// whole; a set with no usable key is refused when the settings are read.
#[test]
fn keys_of_other_types_are_left_out_of_the_key_set() {
    let ed = json!({"kty": "OKP", "crv": "Ed25519", "kid": "ed",
        "x": b64url(ed_key().verifying_key().as_bytes())});
    let rsa = json!({"kty": "RSA", "kid": "rsa", "alg": "RS256", "use": "sig",
        "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1Wl", "e": "AQAB"});
    let p384 = json!({"kty": "EC", "crv": "P-384", "kid": "p384",
        "x": b64url(&[1; 48]), "y": b64url(&[2; 48])});
    let x25519 = json!({"kty": "OKP", "crv": "X25519", "x": b64url(&[9; 32])});
    let jwks = json!({"keys": [rsa, ed, p384, x25519]});
    let keys = mcp_tasks_edge::auth::parse_jwks(&jwks.to_string()).unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].kid.as_deref(), Some("ed"));
    // Only keys this server cannot use: the settings are refused.
    let only_rsa = json!({"keys": [rsa]}).to_string();
    let env = [
        ("MCP_STATE_SECRET", "a state secret of at least 32 bytes!!"),
        ("MCP_AUTH", "jwt"),
        ("MCP_JWT_ISSUER", "https://issuer.example"),
        ("MCP_RESOURCE_URL", "https://mcp.example/mcp"),
        ("MCP_JWT_KEYS", only_rsa.as_str()),
    ];
    let err = mcp_tasks_edge::config::Config::from_env(|k| {
        env.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    })
    .unwrap_err();
    assert!(err.to_string().contains("no key usable"), "{err}");
}

fn hex(s: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}
