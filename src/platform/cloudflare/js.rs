//! The two platform calls the Worker makes with options, written against
//! the JavaScript objects directly: a `Request` with a method, headers and
//! a body, and the KV cache's `get`, `put` and `delete`.
//!
//! `worker`'s own builders pass their options through `serde_wasm_bindgen`
//! (every `RequestInit` serializes its Cloudflare `cf` properties, image
//! resizing included, and every KV call its options object); none of those
//! options is used here, and setting the few that are as plain properties
//! keeps that serializer out of the wasm.

use js_sys::{Function, Object, Promise, Reflect};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use worker::{Env, Headers, Request, web_sys};

/// A `Request` for `url`: `method` (upper case, as `fetch` sends it),
/// `headers` if any, `body` if any. Redirects are not followed
/// (`redirect: "manual"`): a 3xx answer comes back as it is, as on the
/// component, so that a task step's request never reaches an origin off
/// the operator's allow-list through one (and its headers, an API key
/// among them, never go there). An error is the platform's message (a
/// method workerd does not know, a body on a `GET`, a malformed URL).
pub fn request(
    url: &str,
    method: &str,
    headers: Option<&Headers>,
    body: Option<&JsValue>,
) -> Result<Request, String> {
    let init = web_sys::RequestInit::new();
    init.set_method(method);
    init.set_redirect(web_sys::RequestRedirect::Manual);
    if let Some(headers) = headers {
        init.set_headers(headers.0.as_ref());
    }
    if let Some(body) = body {
        init.set_body(body);
    }
    web_sys::Request::new_with_str_and_init(url, &init)
        .map(Request::from)
        .map_err(describe)
}

/// A KV namespace binding, called through its own `get`, `put` and
/// `delete` functions.
#[derive(Clone)]
pub struct Kv {
    this: Object,
    get: Function,
    put: Function,
    delete: Function,
}

/// What a failed platform call says: an `Error`'s message, or the value.
pub(super) fn describe(e: JsValue) -> String {
    match e.dyn_ref::<js_sys::Error>() {
        Some(error) => String::from(error.message()),
        None => e.as_string().unwrap_or_else(|| format!("{e:?}")),
    }
}

fn method(this: &Object, name: &str) -> Result<Function, String> {
    Reflect::get(this, &JsValue::from_str(name))
        .map_err(describe)?
        .dyn_into::<Function>()
        .map_err(|_| format!("the KV binding has no {name} function"))
}

async fn settle(call: Result<JsValue, JsValue>) -> Result<JsValue, String> {
    let promise: Promise = call.map_err(describe)?.unchecked_into();
    JsFuture::from(promise).await.map_err(describe)
}

impl Kv {
    /// The KV namespace bound as `binding`.
    pub fn from_env(env: &Env, binding: &str) -> Result<Kv, String> {
        let this: Object = Reflect::get(env, &JsValue::from_str(binding))
            .map_err(describe)?
            .dyn_into()
            .map_err(|_| format!("no KV namespace is bound as {binding}"))?;
        Ok(Kv {
            get: method(&this, "get")?,
            put: method(&this, "put")?,
            delete: method(&this, "delete")?,
            this,
        })
    }

    /// The text stored under `key`, if any.
    pub async fn get_text(&self, key: &str) -> Result<Option<String>, String> {
        let call = self.get.call2(
            &self.this,
            &JsValue::from_str(key),
            &JsValue::from_str("text"),
        );
        Ok(settle(call).await?.as_string())
    }

    /// Stores `value` under `key` until `expiration` (seconds since the
    /// epoch).
    pub async fn put(&self, key: &str, value: &str, expiration: u64) -> Result<(), String> {
        let options = Object::new();
        Reflect::set(
            &options,
            &JsValue::from_str("expiration"),
            &JsValue::from_f64(expiration as f64),
        )
        .map_err(describe)?;
        let call = self.put.call3(
            &self.this,
            &JsValue::from_str(key),
            &JsValue::from_str(value),
            &options,
        );
        settle(call).await.map(drop)
    }

    /// Deletes `key` (nothing if it is absent).
    pub async fn delete(&self, key: &str) -> Result<(), String> {
        let call = self.delete.call1(&self.this, &JsValue::from_str(key));
        settle(call).await.map(drop)
    }
}
