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
    let headers = http::header_block(&request.headers);
    let req = HttpRequest {
        method: &request.method,
        path: &request.path,
        headers: &headers,
        body: &request.body,
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

fn into_response(response: HttpResponse) -> Response {
    let body = match response.body {
        HttpBody::Events(events) => match events.complete() {
            Ok(bytes) => bytes,
            // Not reached: such a request is declined before it runs.
            // Failing loudly beats running it again through wasi:http.
            Err(_) => {
                let e = crate::error::RpcError::internal("Internal error.");
                let r = HttpResponse::json(500, crate::protocol::jsonrpc::error_bytes(None, &e));
                return into_response(r);
            }
        },
        HttpBody::Bytes(bytes) => bytes,
        HttpBody::Empty => Vec::new(),
    };
    Response {
        status: response.status,
        headers: response
            .headers
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect(),
        body,
    }
}
