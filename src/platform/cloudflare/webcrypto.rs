//! Token signatures checked with the platform's WebCrypto (`crypto.subtle`):
//! HMAC-SHA-256, Ed25519 and ECDSA P-256 run natively in the runtime, so
//! the Worker's wasm carries no curve arithmetic. Each key is imported once
//! per isolate and kept.

use std::cell::RefCell;

use js_sys::{Array, Object, Promise, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::auth::{KeyKind, KeyUnusable, SignatureVerifier, VerifyingKey};
use crate::outbound::LocalFuture;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(catch, js_namespace = ["crypto", "subtle"], js_name = importKey)]
    fn import_key(
        format: &str,
        key: &Uint8Array,
        algorithm: &Object,
        extractable: bool,
        usages: &Array,
    ) -> Result<Promise, JsValue>;

    #[wasm_bindgen(catch, js_namespace = ["crypto", "subtle"], js_name = verify)]
    fn subtle_verify(
        algorithm: &Object,
        key: &JsValue,
        signature: &Uint8Array,
        data: &Uint8Array,
    ) -> Result<Promise, JsValue>;
}

/// Keys imported so far, by algorithm tag and key bytes. A deployment has a
/// handful; past this many, keys are imported per use and not kept.
const MAX_KEPT: usize = 32;

thread_local! {
    static KEYS: RefCell<Vec<(Vec<u8>, JsValue)>> = const { RefCell::new(Vec::new()) };
}

/// The Worker's [`SignatureVerifier`].
#[derive(Clone, Copy, Debug, Default)]
pub struct WebCrypto;

fn object(members: &[(&str, &str)]) -> Object {
    let o = Object::new();
    for (name, value) in members {
        // Setting a member on a fresh plain object cannot fail.
        let _ = Reflect::set(&o, &JsValue::from_str(name), &JsValue::from_str(value));
    }
    o
}

/// What to import: the cache identity (an algorithm tag, then the raw
/// bytes, so that no secret can pose as a public key), the raw bytes, the
/// import algorithm and the verify algorithm.
fn describe(key: VerifyingKey<'_>) -> (Vec<u8>, Vec<u8>, Object, Object) {
    let (tag, raw, import_as, verify_as) = match key {
        VerifyingKey::Hs256(secret) => (
            0,
            secret.to_vec(),
            object(&[("name", "HMAC"), ("hash", "SHA-256")]),
            object(&[("name", "HMAC")]),
        ),
        VerifyingKey::Public(KeyKind::Ed25519(x)) => (
            1,
            x.to_vec(),
            object(&[("name", "Ed25519")]),
            object(&[("name", "Ed25519")]),
        ),
        VerifyingKey::Public(KeyKind::P256 { x, y }) => (
            2,
            KeyKind::sec1(x, y).to_vec(),
            object(&[("name", "ECDSA"), ("namedCurve", "P-256")]),
            object(&[("name", "ECDSA"), ("hash", "SHA-256")]),
        ),
    };
    let mut id = Vec::with_capacity(raw.len() + 1);
    id.push(tag);
    id.extend_from_slice(&raw);
    (id, raw, import_as, verify_as)
}

async fn imported(key: VerifyingKey<'_>) -> Result<(JsValue, Object), KeyUnusable> {
    let (id, raw, import_as, verify_as) = describe(key);
    let kept = KEYS.with(|k| {
        k.borrow()
            .iter()
            .find(|(kid, _)| *kid == id)
            .map(|(_, key)| key.clone())
    });
    if let Some(key) = kept {
        return Ok((key, verify_as));
    }
    let usages = Array::of1(&JsValue::from_str("verify"));
    let bytes = Uint8Array::from(raw.as_slice());
    let promise = import_key("raw", &bytes, &import_as, false, &usages).map_err(|_| KeyUnusable)?;
    let crypto_key = JsFuture::from(promise).await.map_err(|e| {
        worker::console_error!(
            "{}",
            serde_json::json!({"event": "auth", "error": "key import failed", "detail": super::js::describe(e)})
        );
        KeyUnusable
    })?;
    // Requests that missed the cache together import together; keep one.
    KEYS.with(|k| {
        let mut k = k.borrow_mut();
        if k.len() < MAX_KEPT && !k.iter().any(|(kid, _)| *kid == id) {
            k.push((id, crypto_key.clone()));
        }
    });
    Ok((crypto_key, verify_as))
}

impl SignatureVerifier for WebCrypto {
    fn verify<'a>(
        &'a self,
        key: VerifyingKey<'a>,
        signed: &'a [u8],
        signature: &'a [u8],
    ) -> LocalFuture<'a, Result<bool, KeyUnusable>> {
        Box::pin(async move {
            let (crypto_key, algorithm) = imported(key).await?;
            let signature = Uint8Array::from(signature);
            let data = Uint8Array::from(signed);
            // A rejected check (a malformed signature, say) is a refusal.
            let Ok(promise) = subtle_verify(&algorithm, &crypto_key, &signature, &data) else {
                return Ok(false);
            };
            Ok(JsFuture::from(promise)
                .await
                .ok()
                .and_then(|v| v.as_bool())
                .unwrap_or(false))
        })
    }
}
