//! The local HTTP host: hyper on 127.0.0.1 in front of the component, and a
//! ticker that calls `runner.tick` every 100 ms, or sooner when the store's
//! next due time says so.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;

use crate::runtime::Runtime;

/// Longest pause between ticks.
pub const MAX_TICK_MS: u64 = 100;
/// Shortest pause between ticks, even when work is overdue (another host
/// may hold its lease).
pub const MIN_TICK_MS: u64 = 10;

/// A running host; dropping it (or calling [`Running::stop`]) stops the
/// listener and the ticker.
pub struct Running {
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Stops accepting connections and ticking, and waits for both loops.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Serves `runtime` on `listener` and ticks it. Must run inside a tokio
/// runtime.
pub fn start(runtime: Arc<Runtime>, listener: TcpListener, tick: bool) -> std::io::Result<Running> {
    let addr = listener.local_addr()?;
    let (stop, stopped) = watch::channel(false);
    let mut tasks = vec![tokio::spawn(accept_loop(
        runtime.clone(),
        listener,
        stopped.clone(),
    ))];
    if tick {
        tasks.push(tokio::spawn(tick_loop(runtime, stopped)));
    }
    Ok(Running { addr, stop, tasks })
}

async fn accept_loop(
    runtime: Arc<Runtime>,
    listener: TcpListener,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        let (stream, _) = tokio::select! {
            _ = stopped.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    eprintln!("host: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let runtime = runtime.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| serve_one(runtime.clone(), req));
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
                && !e.is_incomplete_message()
            {
                eprintln!("host: connection error: {e}");
            }
        });
    }
}

fn json_error(status: u16, code: i64, message: &str) -> Response<HyperOutgoingBody> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "error": {"code": code, "message": message},
    })
    .to_string();
    let mut resp = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|e: Infallible| -> wasmtime_wasi_http::Error { match e {} })
            .boxed_unsync(),
    );
    *resp.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::BAD_REQUEST);
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

async fn serve_one(
    runtime: Arc<Runtime>,
    req: Request<Incoming>,
) -> Result<Response<HyperOutgoingBody>, Infallible> {
    // wasi:http needs the request's authority; without a usable Host header
    // the request cannot be passed to the component.
    let host_ok = req
        .headers()
        .get(hyper::header::HOST)
        .is_some_and(|h| h.to_str().is_ok());
    if !host_ok {
        return Ok(json_error(
            400,
            -32600,
            "Invalid Request: a valid Host header is required.",
        ));
    }
    match runtime.handle(req).await {
        Ok(resp) => Ok(resp),
        Err(e) => {
            eprintln!("host: the component failed a request: {e:#}");
            Ok(json_error(500, -32603, "Internal error."))
        }
    }
}

async fn tick_loop(runtime: Arc<Runtime>, mut stopped: watch::Receiver<bool>) {
    loop {
        let now = runtime.clock().now_ms();
        let wait = match runtime.tick(now).await {
            Ok(report) => {
                if report.errors > 0 {
                    eprintln!("host: tick: {report}");
                }
                report.next_due.map_or(MAX_TICK_MS, |due| {
                    u64::try_from(due.saturating_sub(now))
                        .unwrap_or(0)
                        .clamp(MIN_TICK_MS, MAX_TICK_MS)
                })
            }
            Err(e) => {
                eprintln!("host: tick failed: {e:#}");
                MAX_TICK_MS
            }
        };
        tokio::select! {
            _ = stopped.changed() => return,
            _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
        }
    }
}
