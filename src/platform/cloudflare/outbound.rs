//! Outbound HTTP for task steps through the Workers `fetch` API, with the
//! timeout enforced by an `AbortController` and the response body read as a
//! stream up to the cap.

use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::{Either, select};
use worker::{AbortController, Delay, Fetch, Headers, ResponseBody};

use super::js::request;
use crate::outbound::{LocalFuture, Outbound, OutboundError, OutboundRequest, OutboundResponse};

/// The Worker's outbound client.
pub struct FetchOutbound;

impl Outbound for FetchOutbound {
    fn send<'a>(
        &'a self,
        request: OutboundRequest,
        max_body: usize,
    ) -> LocalFuture<'a, Result<OutboundResponse, OutboundError>> {
        Box::pin(send(request, max_body))
    }
}

fn failed(e: impl std::fmt::Display) -> OutboundError {
    OutboundError::Failed(e.to_string())
}

async fn send(r: OutboundRequest, max_body: usize) -> Result<OutboundResponse, OutboundError> {
    let headers = Headers::new();
    for (name, value) in &r.headers {
        headers.append(name, value).map_err(failed)?;
    }
    let body: Option<worker::wasm_bindgen::JsValue> =
        (!r.body.is_empty()).then(|| worker::js_sys::Uint8Array::from(r.body.as_slice()).into());
    let request = request(
        &r.url,
        &r.method.to_ascii_uppercase(),
        Some(&headers),
        body.as_ref(),
    )
    .map_err(failed)?;
    let controller = AbortController::default();
    let signal = controller.signal();
    let mut timeout = Delay::from(Duration::from_millis(r.timeout_ms));
    let fetch = Fetch::Request(request);
    let sending = Box::pin(fetch.send_with_signal(&signal));
    let mut response = match select(sending, &mut timeout).await {
        Either::Left((response, _)) => response.map_err(failed)?,
        Either::Right(_) => {
            controller.abort();
            return Err(OutboundError::Timeout);
        }
    };
    let status = response.status_code();
    let headers = response.headers().entries().collect();
    // No body at all (a 204, 304, or the answer to a HEAD): an empty one,
    // not a failure.
    if matches!(response.body(), ResponseBody::Empty) {
        return Ok(OutboundResponse {
            status,
            headers,
            body: Vec::new(),
        });
    }
    let mut stream = response.stream().map_err(failed)?;
    let reading = Box::pin(async move {
        let mut body = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(failed)?;
            if body.len().saturating_add(chunk.len()) > max_body {
                return Err(OutboundError::TooLarge { limit: max_body });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    });
    let body = match select(reading, timeout).await {
        Either::Left((body, _)) => body?,
        Either::Right(_) => {
            controller.abort();
            return Err(OutboundError::Timeout);
        }
    };
    Ok(OutboundResponse {
        status,
        headers,
        body,
    })
}
