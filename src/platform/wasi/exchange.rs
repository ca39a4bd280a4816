//! `exchange.handle`: the MCP endpoint as one function call. Same core
//! function as the `wasi:http` handler, without streams: a request whose
//! answer would be a stream returns `none` (the host then uses `wasi:http`).

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
    let response = with_server(tools, |server| match server {
        Ok(server) => {
            let headers = http::header_block(&request.headers);
            let req = HttpRequest {
                method: &request.method,
                path: &request.path,
                headers: &headers,
                body: &request.body,
            };
            let response = crate::block_on(http::handle(server, &req, now_ms()));
            super::log_detail(&response);
            response
        }
        Err(_) => misconfigured(),
    });
    into_response(response)
}

fn into_response(response: HttpResponse) -> Option<Response> {
    let body = match response.body {
        HttpBody::Events(_) => return None,
        HttpBody::Bytes(bytes) => bytes,
        HttpBody::Empty => Vec::new(),
    };
    Some(Response {
        status: response.status,
        headers: response
            .headers
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect(),
        body,
    })
}
