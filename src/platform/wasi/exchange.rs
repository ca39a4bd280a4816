//! `exchange.handle`: the MCP endpoint as one function call. Same core
//! function as the `wasi:http` handler, without streams: a request whose
//! answer may be a stream ([`http::answers_at_once`]) returns `none` before
//! anything runs (the host then uses `wasi:http`), so no request ever runs
//! twice. SSE frames all known at the end of the call (a call's progress
//! and its result) come back as one `text/event-stream` body.

use super::bindings::exports::mcp::tasks_edge::exchange::{Guest, Request, Response};
use super::{App, Component, misconfigured, now_ms, with_server};
use crate::http::{self, HttpBody, HttpRequest, HttpResponse};
use crate::tools::ToolFactory;

impl<A: App> Guest for Component<A> {
    fn handle(request: Request) -> Option<Response> {
        handle(A::TOOLS, request)
    }
}

/// `exchange.handle` (not generic: see [`Component`]).
#[inline(never)]
fn handle(tools: ToolFactory, request: Request) -> Option<Response> {
    let body_len = usize::try_from(request.body_len).unwrap_or(usize::MAX);
    let Some((method, path, block, body)) = http::exchange_parts(&request.data, body_len) else {
        // Not what a host that follows the interface sends.
        let e = crate::error::RpcError::invalid_request("The request could not be read.");
        let r = HttpResponse::rpc_error(400, None, &e);
        return Some(into_response(r));
    };
    let headers = http::header_block(block);
    let req = HttpRequest {
        method,
        path,
        headers: &headers,
        body,
    };
    // Judged once: which side answers, and whether at once.
    let (route, at_once) = http::route_and_at_once(&req);
    if !at_once {
        return None;
    }
    let response = with_server(tools, |server| match server {
        Ok(server) => {
            let response =
                crate::block_on(http::handle_routed(server, &req, now_ms(), Some(route)));
            super::log_detail(&response);
            response
        }
        Err(_) => misconfigured(),
    });
    Some(into_response(response))
}

/// The response in one buffer: the body, then its header lines.
fn into_response(response: HttpResponse) -> Response {
    let mut data = match response.body {
        HttpBody::Events(events) => match events.complete() {
            Ok(bytes) => bytes,
            // Not reached: such a request is declined before it runs.
            // Failing loudly beats running it again through wasi:http.
            Err(_) => return internal_error(),
        },
        HttpBody::Bytes(bytes) => bytes,
        HttpBody::Empty => Vec::new(),
    };
    let Ok(body_len) = u32::try_from(data.len()) else {
        return internal_error();
    };
    http::append_header_lines(&mut data, &response.headers);
    Response {
        status: response.status,
        body_len,
        data,
    }
}

fn internal_error() -> Response {
    let e = crate::error::RpcError::internal("Internal error.");
    into_response(HttpResponse::rpc_error(500, None, &e))
}
