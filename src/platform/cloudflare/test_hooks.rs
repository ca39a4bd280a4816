//! Test-only routes for the workerd end-to-end tests (feature `test-hooks`,
//! never in the deployed build):
//!
//! - `POST /__test/contract {"prefix"}`: the core's store contract suite
//!   against the Worker's store (the shards, behind KV in cache mode);
//! - `POST /__test/alarm {"taskId", "action": "get"|"delete"}`: read or
//!   delete the alarm of the shard that owns a task (a lost alarm);
//! - `POST /__test/shard {op}`: one raw operation on the shard that owns
//!   `key`, bypassing the KV cache (`exec` among them: one SQL statement,
//!   to plant a fault);
//! - `POST /__test/var {"name"}`: a variable as the settings read it;
//! - `POST /__test/class {"binding"}`: a read on the first shard of
//!   another Durable Object binding (a class declared without SQLite
//!   storage, to see how a shard of it fails);
//! - `POST /__test/floor {"shard"}`: that shard's version floor (keys
//!   created there now start above it);
//! - `POST /__test/kv {"action": "get"|"put", "key", "value"}`: the cache
//!   namespace itself (`get` also reports the key's expiration);
//! - `POST /__test/memory`: this isolate's wasm linear memory, in bytes;
//! - `POST /__test/outbound {"method", "url", "headers", "body"}`: one
//!   request through the Worker's outbound client (no allow-list), answered
//!   with its status and body, or the error;
//! - `POST /__test/jwt` (the vectors file): the shared JWS vectors run with
//!   the Worker's WebCrypto verifier.

use serde::Deserialize;
use serde_json::{Value, json};
use worker::{Env, Request, Response};

use super::env::{json_response, misconfigured, open_store};
use super::outbound::FetchOutbound;
use super::store::{CACHE_BINDING, WorkerStore};
use super::wire::Op;
use crate::outbound::{Outbound, OutboundRequest};
use crate::store::contract;

fn json(status: u16, v: &Value) -> Response {
    json_response(status, v.to_string().into_bytes())
}

/// Sends `op` to the shard that owns `key` and answers with its reply.
async fn on_shard(store: &WorkerStore, key: &str, op: &Op) -> Response {
    let Some(shard) = store.inner().shard_for(key) else {
        return json(400, &json!({"error": "no shard owns this key"}));
    };
    match store.inner().call(shard, op).await {
        Ok(reply) => json(200, &json!({"shard": shard, "reply": reply})),
        Err(e) => json(503, &json!({"error": e.to_string()})),
    }
}

fn bad(why: impl std::fmt::Display) -> Response {
    json(400, &json!({"error": why.to_string()}))
}

#[derive(Deserialize)]
struct ContractArgs {
    prefix: String,
}

#[derive(Deserialize)]
struct VarArgs {
    name: String,
}

#[derive(Deserialize)]
struct ClassArgs {
    binding: String,
}

#[derive(Deserialize)]
struct FloorArgs {
    shard: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AlarmArgs {
    task_id: String,
    action: String,
}

#[derive(Deserialize)]
struct OutboundArgs {
    method: String,
    url: String,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default)]
    body: String,
}

#[derive(Deserialize)]
struct KvArgs {
    action: String,
    key: String,
    #[serde(default)]
    value: Option<String>,
}

pub async fn route(hook: &str, mut req: Request, env: &Env) -> Response {
    let settings = match super::env::settings(env) {
        Ok(s) => s,
        Err(e) => return misconfigured("settings", &e),
    };
    let body = match req.text().await {
        Ok(b) => b,
        Err(e) => return bad(e),
    };
    let store = match open_store(env, &settings) {
        Ok(s) => s,
        Err(e) => return misconfigured("bindings", &e.to_string()),
    };
    match hook {
        "memory" => {
            #[cfg(target_arch = "wasm32")]
            let bytes = core::arch::wasm32::memory_size(0) * 65_536;
            #[cfg(not(target_arch = "wasm32"))]
            let bytes = 0usize;
            json(200, &json!({"bytes": bytes}))
        }
        // How many bearer tokens and sessions the isolate keeps verified.
        "kept" => {
            let kept = super::env::verifications();
            #[cfg(feature = "legacy")]
            let sessions = kept.sessions.len();
            #[cfg(not(feature = "legacy"))]
            let sessions = 0;
            json(
                200,
                &json!({"tokens": kept.tokens.len(), "sessions": sessions}),
            )
        }
        // Through the isolate's cache of verified tokens, which the
        // Worker's requests share: a second run finds the first's tokens.
        "jwt" => match crate::auth::vectors::run_with(
            &body,
            &super::webcrypto::WebCrypto,
            &super::env::verifications().tokens,
        )
        .await
        {
            Ok(report) => {
                let failures: Vec<Value> = report
                    .failures
                    .iter()
                    .map(|(name, why)| json!({"case": name, "why": why}))
                    .collect();
                json(
                    200,
                    &json!({"passed": report.passed, "failures": failures,
                        "cachedAlready": report.cached_already}),
                )
            }
            Err(e) => bad(e),
        },
        "class" => {
            let args: ClassArgs = match serde_json::from_str(&body) {
                Ok(a) => a,
                Err(e) => return bad(e),
            };
            let layout = super::wire::Layout {
                base: 1,
                capacity: 1,
            };
            let other = match super::store::DoStore::on_binding(env, &args.binding, layout) {
                Ok(s) => s,
                Err(e) => return bad(e),
            };
            let op = Op::Get {
                key: "probe".to_owned(),
            };
            match other.call(0, &op).await {
                Ok(reply) => json(200, &json!({"reply": reply})),
                Err(e) => json(503, &json!({"error": e.to_string()})),
            }
        }
        "contract" => {
            let args: ContractArgs = match serde_json::from_str(&body) {
                Ok(a) => a,
                Err(e) => return bad(e),
            };
            let report = contract::run(&store, &args.prefix).await;
            let failures: Vec<Value> = report
                .failures
                .iter()
                .map(|(name, why)| json!({"check": name, "why": why}))
                .collect();
            json(
                200,
                &json!({
                    "passed": report.passed,
                    "failed": report.failures.len(),
                    "failures": failures,
                    "summary": report.to_string(),
                    "store": settings.store.as_str(),
                }),
            )
        }
        "alarm" => {
            let args: AlarmArgs = match serde_json::from_str(&body) {
                Ok(a) => a,
                Err(e) => return bad(e),
            };
            let op = match args.action.as_str() {
                "get" => Op::AlarmGet,
                "delete" => Op::AlarmDelete,
                other => return bad(format!("unknown action {other}")),
            };
            on_shard(&store, &args.task_id, &op).await
        }
        "var" => {
            let args: VarArgs = match serde_json::from_str(&body) {
                Ok(a) => a,
                Err(e) => return bad(e),
            };
            let value = super::env::env_lookup(env)(&args.name);
            json(200, &json!({ "value": value }))
        }
        "floor" => {
            let args: FloorArgs = match serde_json::from_str(&body) {
                Ok(a) => a,
                Err(e) => return bad(e),
            };
            match store.inner().call(args.shard, &Op::Floor).await {
                Ok(reply) => json(200, &json!({"shard": args.shard, "reply": reply})),
                Err(e) => json(503, &json!({"error": e.to_string()})),
            }
        }
        "shard" => {
            let op: Op = match serde_json::from_str(&body) {
                Ok(o) => o,
                Err(e) => return bad(e),
            };
            let key = match &op {
                Op::Get { key }
                | Op::Put { key, .. }
                | Op::Delete { key, .. }
                | Op::Exec { key, .. } => key.clone(),
                _ => return bad("only get, put, delete and exec name a key"),
            };
            on_shard(&store, &key, &op).await
        }
        "outbound" => {
            let args: OutboundArgs = match serde_json::from_str(&body) {
                Ok(a) => a,
                Err(e) => return bad(e),
            };
            let mut request = OutboundRequest::new(&args.method, &args.url);
            request.headers = args.headers;
            request.body = args.body.into_bytes();
            match FetchOutbound.send(request, 1 << 20).await {
                Ok(r) => json(
                    200,
                    &json!({"status": r.status, "body": String::from_utf8_lossy(&r.body)}),
                ),
                Err(e) => json(200, &json!({"error": e.to_string()})),
            }
        }
        "kv" => {
            let args: KvArgs = match serde_json::from_str(&body) {
                Ok(a) => a,
                Err(e) => return bad(e),
            };
            let kv = match env.kv(CACHE_BINDING) {
                Ok(kv) => kv,
                Err(e) => return misconfigured("kv", &e.to_string()),
            };
            match (args.action.as_str(), args.value) {
                ("get", _) => {
                    let value = kv.get(&args.key).text().await;
                    let listed = kv.list().prefix(args.key.clone()).execute().await;
                    match (value, listed) {
                        (Ok(v), Ok(list)) => {
                            let expiration = list
                                .keys
                                .iter()
                                .find(|k| k.name == args.key)
                                .and_then(|k| k.expiration);
                            json(200, &json!({"value": v, "expiration": expiration}))
                        }
                        (Err(e), _) | (_, Err(e)) => json(503, &json!({"error": e.to_string()})),
                    }
                }
                ("put", Some(value)) => {
                    let put = match kv.put(&args.key, value) {
                        Ok(p) => p.execute().await,
                        Err(e) => Err(e),
                    };
                    match put {
                        Ok(()) => json(200, &json!({"ok": true})),
                        Err(e) => json(503, &json!({"error": e.to_string()})),
                    }
                }
                _ => bad("action must be get, or put with a value"),
            }
        }
        _ => json(404, &json!({"error": "no such test hook"})),
    }
}
