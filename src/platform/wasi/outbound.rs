//! Outbound HTTP for task steps through `wasi:http/outgoing-handler`. The
//! host decides what may leave (the local host enforces the same
//! `MCP_OUTBOUND_ALLOW` list as the core).

use wasip2::clocks::monotonic_clock;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
};
use wasip2::io::poll::{Pollable, poll};
use wasip2::io::streams::{OutputStream, StreamError};

use crate::outbound::{
    LocalFuture, Outbound, OutboundError, OutboundRequest, OutboundResponse, url_parts,
};

/// The component's outbound client.
pub struct WasiOutbound;

impl Outbound for WasiOutbound {
    fn send<'a>(
        &'a self,
        request: OutboundRequest,
        max_body: usize,
    ) -> LocalFuture<'a, Result<OutboundResponse, OutboundError>> {
        // The calls below block on the host's pollables, so the future is
        // ready when it is first polled.
        Box::pin(std::future::ready(send(request, max_body)))
    }
}

fn failed(what: &str) -> OutboundError {
    OutboundError::Failed(what.to_owned())
}

fn error_of(e: ErrorCode) -> OutboundError {
    match e {
        ErrorCode::ConnectionTimeout
        | ErrorCode::ConnectionReadTimeout
        | ErrorCode::ConnectionWriteTimeout
        | ErrorCode::HttpResponseTimeout => OutboundError::Timeout,
        ErrorCode::HttpRequestDenied => {
            OutboundError::NotAllowed("the host refused the request".to_owned())
        }
        other => OutboundError::Failed(format!("{other:?}")),
    }
}

fn method_of(m: &str) -> Method {
    match m.to_ascii_uppercase().as_str() {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "OPTIONS" => Method::Options,
        "PATCH" => Method::Patch,
        other => Method::Other(other.to_owned()),
    }
}

fn send(r: OutboundRequest, max_body: usize) -> Result<OutboundResponse, OutboundError> {
    let (scheme, authority, path) =
        url_parts(&r.url).ok_or_else(|| failed("not an absolute http(s) URL"))?;
    let entries: Vec<(String, Vec<u8>)> = r
        .headers
        .iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v.as_bytes().to_vec()))
        .collect();
    let headers = Fields::from_list(&entries).map_err(|_| failed("a header is not valid"))?;
    let req = OutgoingRequest::new(headers);
    let scheme = if scheme == "https" {
        Scheme::Https
    } else {
        Scheme::Http
    };
    req.set_method(&method_of(&r.method))
        .and_then(|()| req.set_scheme(Some(&scheme)))
        .and_then(|()| req.set_authority(Some(&authority)))
        .and_then(|()| req.set_path_with_query(Some(&path)))
        .map_err(|()| failed("the request line is not valid"))?;
    let options = RequestOptions::new();
    let ns = r.timeout_ms.saturating_mul(1_000_000);
    // The whole exchange ends by then: the host's timeouts below bound each
    // wait, not their sum (a body arriving a byte at a time would not end).
    let deadline = monotonic_clock::now().saturating_add(ns);
    // A host may not support every timeout; what it supports applies.
    let _ = options.set_connect_timeout(Some(ns));
    let _ = options.set_first_byte_timeout(Some(ns));
    let _ = options.set_between_bytes_timeout(Some(ns));
    let body = req.body().map_err(|()| failed("no request body"))?;
    let pending = outgoing_handler::handle(req, Some(options)).map_err(error_of)?;
    if !r.body.is_empty() {
        let out = body
            .write()
            .map_err(|()| failed("no request body stream"))?;
        write_by(&out, &r.body, deadline)?;
        drop(out);
    }
    // A body cut short (the upstream answered early, or the exchange
    // failed) is reported by the response or its error, not as the body's.
    let finished = OutgoingBody::finish(body, None);
    if !ready_by(&pending.subscribe(), deadline) {
        return Err(OutboundError::Timeout);
    }
    let response = match (pending.get(), finished) {
        (Some(Ok(Ok(response))), _) => response,
        (Some(Ok(Err(e))), _) => return Err(error_of(e)),
        (_, Err(e)) => return Err(error_of(e)),
        _ => return Err(failed("no response")),
    };
    let status = response.status();
    let headers = response
        .headers()
        .entries()
        .into_iter()
        .map(|(n, v)| (n, String::from_utf8_lossy(&v).into_owned()))
        .collect();
    let incoming = response
        .consume()
        .map_err(|()| failed("no response body"))?;
    let body = read_capped(&incoming, max_body, deadline);
    drop(IncomingBody::finish(incoming));
    Ok(OutboundResponse {
        status,
        headers,
        body: body?,
    })
}

/// Writes `bytes` to `out` and flushes them by `deadline` (ns, monotonic):
/// an upstream that stops reading the body (or a connection that never
/// opens) times the exchange out instead of holding the step in a
/// blocking write, where no call deadline can reach it. A stream closed
/// before the body is all written ends the writing; the exchange's
/// response or error then says why.
fn write_by(out: &OutputStream, mut bytes: &[u8], deadline: u64) -> Result<(), OutboundError> {
    // Readiness without room, again and again, is a stream that will not
    // take the body (a host may wake a writer early; this one does not).
    const EMPTY_WAKES: u32 = 1_000;
    let mut empty = 0;
    let writable = out.subscribe();
    let room = |out: &OutputStream| match out.check_write() {
        Ok(n) => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
        Err(StreamError::Closed) => Ok(None),
        Err(_) => Err(failed("the request body could not be sent")),
    };
    while !bytes.is_empty() {
        if !ready_by(&writable, deadline) {
            return Err(OutboundError::Timeout);
        }
        let Some(n) = room(out)? else { return Ok(()) };
        if n == 0 {
            empty += 1;
            if empty > EMPTY_WAKES {
                return Err(failed("the request body could not be sent"));
            }
            continue;
        }
        let (now, rest) = bytes.split_at(n.min(bytes.len()));
        match out.write(now) {
            Ok(()) => {}
            Err(StreamError::Closed) => return Ok(()),
            Err(_) => return Err(failed("the request body could not be sent")),
        }
        bytes = rest;
    }
    match out.flush() {
        Ok(()) => {}
        Err(StreamError::Closed) => return Ok(()),
        Err(_) => return Err(failed("the request body could not be sent")),
    }
    // A flush is done when the stream takes writes again.
    loop {
        if !ready_by(&writable, deadline) {
            return Err(OutboundError::Timeout);
        }
        match room(out)? {
            None => return Ok(()),
            Some(0) => {}
            Some(_) => return Ok(()),
        }
    }
}

/// Waits until `pollable` is ready or the monotonic clock reaches
/// `deadline` (ns); whether it was ready in time.
fn ready_by(pollable: &Pollable, deadline: u64) -> bool {
    if pollable.ready() {
        return true;
    }
    let timer = monotonic_clock::subscribe_instant(deadline);
    poll(&[pollable, &timer]).contains(&0)
}

/// Reads a response body by `deadline` (ns, monotonic), refusing more than
/// `max` bytes.
fn read_capped(
    incoming: &IncomingBody,
    max: usize,
    deadline: u64,
) -> Result<Vec<u8>, OutboundError> {
    let stream = incoming
        .stream()
        .map_err(|()| failed("no response body stream"))?;
    let readable = stream.subscribe();
    let mut body = Vec::new();
    loop {
        if !ready_by(&readable, deadline) {
            return Err(OutboundError::Timeout);
        }
        match stream.read(64 * 1024) {
            Ok(chunk) => {
                if body.len().saturating_add(chunk.len()) > max {
                    return Err(OutboundError::TooLarge { limit: max });
                }
                body.extend_from_slice(&chunk);
            }
            Err(StreamError::Closed) => return Ok(body),
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(match wasip2::http::types::http_error_code(&e) {
                    Some(code) => error_of(code),
                    None => OutboundError::Failed(e.to_debug_string()),
                });
            }
        }
    }
}
