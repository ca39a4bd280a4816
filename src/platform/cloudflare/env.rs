//! What every entry point of the Worker shares: the clock, the settings
//! read once per isolate, the tokens it verified, the store, and the early
//! answers given before the core runs.

use std::cell::OnceCell;
use std::rc::Rc;

use wasm_bindgen::JsValue;
use worker::{Date, Env, Headers, Response, ResponseBuilder, console_error, console_warn};

use super::js::Kv;
use super::settings::{Settings, StoreMode};
use super::store::{CACHE_BINDING, DoStore, KvCached, WorkerStore};
use crate::error::RpcError;
use crate::protocol::jsonrpc::error_bytes;
use crate::server::Verifications;
use crate::time::Millis;

thread_local! {
    /// The tokens this isolate accepted (bearer tokens, sessions): a server
    /// lives for one request here, what it verified for as long as the
    /// isolate.
    static VERIFICATIONS: Rc<Verifications> = Rc::default();
}

/// This isolate's [`Verifications`], shared by every request it serves.
pub(super) fn verifications() -> Rc<Verifications> {
    VERIFICATIONS.with(Rc::clone)
}

/// The platform clock: milliseconds since the epoch.
pub fn now_ms() -> Millis {
    Date::now().as_millis() as Millis
}

/// Reads a variable or secret of the Worker's environment as text: a
/// string as it is, and a number or a boolean as JavaScript writes it. An
/// unquoted value in `[vars]` (`MCP_TASK_SHARDS = 64`) reaches the Worker
/// as a number, and is read as `"64"` would be, not taken as absent.
pub(super) fn env_lookup(env: &Env) -> impl Fn(&str) -> Option<String> + '_ {
    move |name| var_text(env, name)
}

fn var_text(env: &Env, name: &str) -> Option<String> {
    let value = js_sys::Reflect::get(env, &JsValue::from_str(name)).ok()?;
    if let Some(text) = value.as_string() {
        return Some(text);
    }
    (value.as_f64().is_some() || value.as_bool().is_some())
        .then(|| String::from(js_sys::Object::from(value).to_string()))
}

/// `server` with what a tool's step sees on the Worker: its settings (the
/// Worker's variables and secrets), the platform clock and the log. Both
/// places that run steps use it: a shard's sweep, and a request that runs
/// a replayable step inline.
pub(super) fn with_step_env<S: crate::store::Store>(
    server: crate::server::Server<S>,
    env: &Env,
) -> crate::server::Server<S> {
    let env = env.clone();
    server
        .with_tool_settings(Box::new(move |name: &str| var_text(&env, name)))
        .with_clock(now_ms)
        .with_log(|line| console_warn!("{line}"))
}

thread_local! {
    static SETTINGS: OnceCell<Result<Settings, String>> = const { OnceCell::new() };
}

/// The settings, read from the environment once per isolate (variables and
/// secrets are fixed for a deployment; reading them crosses into JavaScript
/// and parses the JWT key set).
pub(super) fn settings(env: &Env) -> Result<Settings, String> {
    SETTINGS.with(|cell| {
        cell.get_or_init(|| {
            let settings = Settings::from_env(env_lookup(env)).map_err(|e| e.0);
            if settings.as_ref().is_ok_and(|s| s.config.auth.is_insecure()) {
                console_warn!(
                    "{}",
                    serde_json::json!({"event": "insecure-auth", "warning": "MCP_AUTH=insecure-local: every request acts as one local principal with no credentials checked. Local development only."})
                );
            }
            settings
        })
        .clone()
    })
}

pub(super) fn json_response(status: u16, body: Vec<u8>) -> Response {
    let headers = Headers::new();
    let _ = headers.set("content-type", "application/json");
    ResponseBuilder::new()
        .with_status(status)
        .with_headers(headers)
        .fixed(body)
}

/// A JSON-RPC error answered before the core could run.
pub(super) fn early_error(status: u16, error: &RpcError) -> Response {
    json_response(status, error_bytes(None, error))
}

/// Builds the request's store: the shards, behind the KV cache in
/// `do+kv-cache` mode.
pub(super) fn open_store(env: &Env, settings: &Settings) -> worker::Result<WorkerStore> {
    let shards = DoStore::new(env, settings.layout)?;
    let kv = match settings.store {
        StoreMode::Do => None,
        StoreMode::DoKvCache => {
            Some(Kv::from_env(env, CACHE_BINDING).map_err(worker::Error::RustError)?)
        }
    };
    Ok(KvCached::new(shards, kv))
}

pub(super) fn misconfigured(what: &str, why: &str) -> Response {
    console_error!(
        "{}",
        serde_json::json!({"event": "misconfigured", "what": what, "error": why})
    );
    early_error(
        503,
        &RpcError::internal("Internal error: the server is not configured correctly."),
    )
}
