//! `wasi:http/incoming-handler`: translates the WASI request into a core
//! [`HttpRequest`], and the core [`HttpResponse`] (bytes or an SSE stream)
//! back. The body is read with a bound, and nothing here can trap: every
//! failure becomes a status and a JSON-RPC error, or ends the response.

use std::io::Write;

use wasip2::clocks::monotonic_clock;
use wasip2::http::types::{
    Fields, IncomingRequest, Method, OutgoingBody, OutgoingResponse, ResponseOutparam,
};
use wasip2::io::streams::{OutputStream, StreamError};

use super::bindings::exports::wasi::http::incoming_handler::Guest;
use super::store::HostStore;
use super::{App, Component, misconfigured, now_ms, with_server};
use crate::error::RpcError;
use crate::http::{self, HttpBody, HttpRequest, HttpResponse, Next};
use crate::server::Server;
use crate::tools::ToolFactory;

/// Largest chunk read from the request body at once.
const READ_CHUNK: usize = 64 * 1024;

impl<A: App> Guest for Component<A> {
    fn handle(request: IncomingRequest, response_out: ResponseOutparam) {
        handle(A::TOOLS, request, response_out);
    }
}

/// `wasi:http/incoming-handler.handle` (not generic: see [`Component`]).
#[inline(never)]
fn handle(tools: ToolFactory, request: IncomingRequest, response_out: ResponseOutparam) {
    with_server(tools, |server| match server {
        Ok(server) => serve(server, request, response_out),
        Err(_) => {
            drop(request);
            respond(response_out, misconfigured(), None);
        }
    });
}

fn serve(server: &Server<HostStore>, request: IncomingRequest, out: ResponseOutparam) {
    let method = match request.method() {
        Method::Get => "GET".to_owned(),
        Method::Head => "HEAD".to_owned(),
        Method::Post => "POST".to_owned(),
        Method::Put => "PUT".to_owned(),
        Method::Delete => "DELETE".to_owned(),
        Method::Connect => "CONNECT".to_owned(),
        Method::Options => "OPTIONS".to_owned(),
        Method::Trace => "TRACE".to_owned(),
        Method::Patch => "PATCH".to_owned(),
        Method::Other(m) => m,
    };
    let target = request.path_with_query().unwrap_or_default();
    let path = target.split('?').next().unwrap_or_default().to_owned();
    // Header values that are not UTF-8 become U+FFFD, which the core
    // rejects wherever it reads a value.
    let mut headers: Vec<(String, String)> = request
        .headers()
        .entries()
        .into_iter()
        .map(|(name, value)| (name, String::from_utf8_lossy(&value).into_owned()))
        .collect();
    // The request's authority is its Host: a wasi:http host takes it from
    // a target in absolute form (where HTTP/1.1 ignores the Host header,
    // RFC 9112 section 3.2.2) or else from the Host header. Several Host
    // headers are passed on as they are (insecure-local refuses them).
    let hosts = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("host"))
        .count();
    if hosts <= 1
        && let Some(authority) = request.authority()
    {
        headers.retain(|(n, _)| !n.eq_ignore_ascii_case("host"));
        headers.push(("host".to_owned(), authority));
    }
    // Refusals the head decides (path, method, Origin, Content-Length,
    // Host, credentials) come before a byte of the body is read.
    let headers = http::header_refs(&headers);
    if let Some(refused) = http::check_head(server.config(), &method, &path, &headers) {
        drop(request);
        super::log_detail(&refused);
        return respond(out, refused, None);
    }
    // One byte past the limit is enough for the core to answer 413.
    let limit = server.config().max_body_bytes.saturating_add(1);
    let body = match read_body(&request, limit) {
        Ok(body) => body,
        Err(()) => {
            drop(request);
            let error = RpcError::invalid_request("The request body could not be read.");
            return respond(out, HttpResponse::rpc_error(400, None, &error), None);
        }
    };
    drop(request);
    let req = HttpRequest {
        method: &method,
        path: &path,
        headers: &headers,
        body: &body,
    };
    let response = crate::block_on(http::handle(server, &req, now_ms()));
    super::log_detail(&response);
    respond(out, response, Some(server));
}

/// Reads at most `limit` bytes of the request body.
fn read_body(request: &IncomingRequest, limit: usize) -> Result<Vec<u8>, ()> {
    let body = request.consume()?;
    let stream = body.stream()?;
    let mut buf = Vec::new();
    while buf.len() < limit {
        let want = (limit - buf.len()).min(READ_CHUNK);
        match stream.blocking_read(want as u64) {
            Ok(chunk) => buf.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(_)) => return Err(()),
        }
    }
    drop(stream);
    drop(body);
    Ok(buf)
}

/// Sends `response`. An event stream is written event by event, each one
/// flushed, until it ends or the client goes away.
fn respond(out: ResponseOutparam, response: HttpResponse, server: Option<&Server<HostStore>>) {
    let fields = Fields::new();
    for (name, value) in &response.headers {
        if fields.append(name, value.as_bytes()).is_err() {
            eprintln!("mcp-tasks-edge: dropped response header {name}");
        }
    }
    let length = match &response.body {
        HttpBody::Empty => Some(0),
        HttpBody::Bytes(bytes) => Some(bytes.len()),
        HttpBody::Events(_) => None,
    };
    if let Some(length) = length {
        let _ = fields.set("content-length", &[length.to_string().into_bytes()]);
    }
    let outgoing = OutgoingResponse::new(fields);
    if outgoing.set_status_code(response.status).is_err() {
        // Not a valid status: the core never produces one, but never trap.
        let _ = outgoing.set_status_code(500);
    }
    let Ok(body) = outgoing.body() else {
        return;
    };
    ResponseOutparam::set(out, Ok(outgoing));
    let Ok(mut stream) = body.write() else {
        return;
    };
    match response.body {
        HttpBody::Empty => {}
        HttpBody::Bytes(bytes) => {
            let _ = send(&mut stream, &bytes);
        }
        HttpBody::Events(mut events) => {
            if let Some(server) = server {
                loop {
                    match crate::block_on(events.next(server, now_ms())) {
                        Next::Send(bytes) => {
                            if send(&mut stream, &bytes).is_err() {
                                break;
                            }
                        }
                        Next::Wait(ms) => {
                            monotonic_clock::subscribe_duration(ms.saturating_mul(1_000_000))
                                .block();
                        }
                        Next::End => break,
                    }
                }
            }
        }
    }
    drop(stream);
    let _ = OutgoingBody::finish(body, None);
}

fn send(stream: &mut OutputStream, bytes: &[u8]) -> std::io::Result<()> {
    stream.write_all(bytes)?;
    stream.flush()
}
