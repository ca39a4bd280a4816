//! The local HTTP host: hyper on 127.0.0.1 in front of the component, and a
//! ticker that calls `runner.tick` every 100 ms, sooner when the store's
//! next due time says so, and at once after a request whose writes made
//! work due before the ticker's next planned tick (a request that made
//! nothing due, such as a create whose step ran inline, wakes nothing).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::runtime::Handle;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;

use crate::repeats::{Failure, RepeatLog};
use crate::runtime::{AtCapacity, ExchangeRequest, ExchangeResponse, Runtime};

/// Longest pause between ticks.
pub const MAX_TICK_MS: u64 = 100;
/// Shortest pause between ticks, even when work is overdue (another host
/// may hold its lease).
pub const MIN_TICK_MS: u64 = 10;

/// The ticker's wake-up: when it plans to tick next, and how a request
/// that made work due sooner wakes it.
struct Ticker {
    wake: Notify,
    /// The time (ms) of the next planned tick; `i64::MIN` before the first.
    planned: AtomicI64,
}

impl Ticker {
    fn new() -> Self {
        Ticker {
            wake: Notify::new(),
            planned: AtomicI64::new(i64::MIN),
        }
    }

    /// Whether work due at `written` (the earliest due time the host's
    /// writes stored since the ticker last looked) comes before the
    /// planned tick.
    fn due_before_planned(&self, written: Option<i64>) -> bool {
        written.is_some_and(|due| due < self.planned.load(Ordering::SeqCst))
    }

    /// Wakes the ticker if a request's writes made work due before its
    /// next planned tick.
    fn poke(&self, runtime: &Runtime) {
        if self.due_before_planned(runtime.written_due()) {
            self.wake.notify_one();
        }
    }
}

/// The pause (ms) before work due at `due` is ticked, at `now`: at least
/// [`MIN_TICK_MS`] (another host may hold overdue work's lease), at most
/// [`MAX_TICK_MS`].
fn pause(due: i64, now: i64) -> u64 {
    u64::try_from(due.saturating_sub(now))
        .unwrap_or(0)
        .clamp(MIN_TICK_MS, MAX_TICK_MS)
}

/// What one host serves at once, and how long it waits for a request's
/// head and body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Open connections; one beyond it is answered 503 with `Retry-After`
    /// and closed.
    pub max_connections: usize,
    /// How long a connection may take to send a request's head; a slower
    /// one is closed.
    pub header_read_timeout: Duration,
    /// How long a request's body may take to arrive once its head has: a
    /// client trickling its body is answered 408 (a JSON-RPC error) and
    /// holds neither the connection nor an instance past it.
    pub body_read_timeout: Duration,
    /// How long a write to a client may wait for it to take bytes: a client
    /// that stops reading (a stream, a large answer) has its connection
    /// closed then, which frees the connection's slot and ends whatever
    /// the answer held (an instance, a listen stream).
    pub write_timeout: Duration,
    /// How long [`Running::stop`] waits for the connections' requests in
    /// progress to be answered, and a tick in progress to end, before it
    /// returns (and a process exiting then cuts what is left, such as a
    /// listen stream or a step, which runs again once its lease runs out).
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 512,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// A request body that fails with `connection-read-timeout` once its
/// deadline passes before it has ended, and says so in `fired` (the
/// component sees only a failed read, and answers 400; the host then
/// answers 408 in its place).
struct Deadlined<B> {
    inner: B,
    deadline: Pin<Box<tokio::time::Sleep>>,
    fired: Arc<AtomicBool>,
}

impl<B> Deadlined<B> {
    fn new(inner: B, timeout: Duration, fired: Arc<AtomicBool>) -> Self {
        Deadlined {
            inner,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            fired,
        }
    }
}

impl<B> Body for Deadlined<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<wasmtime_wasi_http::Error>,
{
    type Data = Bytes;
    type Error = wasmtime_wasi_http::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.fired.store(true, Ordering::SeqCst);
                Poll::Ready(Some(Err(wasmtime_wasi_http::Error::ConnectionReadTimeout)))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A running host; dropping it (or calling [`Running::stop`]) stops the
/// listener and the ticker, and each connection once its request in
/// progress is answered.
pub struct Running {
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// A permit per open connection.
    connections: Arc<Semaphore>,
    limits: Limits,
}

impl Running {
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Stops accepting connections and ticking, and asks every connection
    /// to close once its request in progress is answered (an idle one
    /// closes at once); waits for the loops and the connections up to
    /// [`Limits::shutdown_grace`] in all. A tick still stepping then is
    /// dropped: what it committed is stored, and a step in progress runs
    /// again once its lease runs out. Returns how many connections were
    /// still open at the end.
    pub async fn stop(mut self) -> usize {
        let _ = self.stop.send(true);
        // A grace too long to add to the clock (a caller's `Duration::MAX`)
        // waits a year.
        let grace = self
            .limits
            .shutdown_grace
            .min(Duration::from_secs(86_400 * 365));
        let deadline = tokio::time::Instant::now() + grace;
        for mut t in self.tasks.drain(..) {
            if tokio::time::timeout_at(deadline, &mut t).await.is_err() {
                // Dropped at its next await: waited for briefly, so that a
                // caller's store outlives it.
                t.abort();
                let _ = tokio::time::timeout(Duration::from_secs(1), t).await;
            }
        }
        let all = self.limits.max_connections;
        let n = u32::try_from(all).unwrap_or(u32::MAX);
        let drained = tokio::time::timeout_at(deadline, self.connections.acquire_many(n)).await;
        match drained {
            Ok(_) => 0,
            Err(_) => all.saturating_sub(self.connections.available_permits()),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// What the listener answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The component: requests through its `exchange` export (one call,
    /// the whole body), streams through `wasi:http/incoming-handler`.
    Component,
    /// The component, every request through `wasi:http/incoming-handler`.
    WasiHttp,
    /// A fixed JSON-RPC result, without the component or the store: the
    /// cost of the HTTP stack alone, for benchmarks.
    Constant,
}

/// Serves `runtime` on `listener` and ticks it. Must run inside a tokio
/// runtime.
pub fn start(runtime: Arc<Runtime>, listener: TcpListener, tick: bool) -> std::io::Result<Running> {
    start_with(runtime, listener, tick, Mode::Component)
}

pub fn start_with(
    runtime: Arc<Runtime>,
    listener: TcpListener,
    tick: bool,
    mode: Mode,
) -> std::io::Result<Running> {
    start_limited(runtime, listener, tick, mode, Limits::default())
}

/// [`start_with`], with explicit [`Limits`].
pub fn start_limited(
    runtime: Arc<Runtime>,
    listener: TcpListener,
    tick: bool,
    mode: Mode,
    limits: Limits,
) -> std::io::Result<Running> {
    start_on(runtime, listener, tick, mode, limits, Vec::new())
}

/// `n` threads, each running a single-threaded runtime until the process
/// ends: the `workers` for [`start_on`].
pub fn worker_threads(n: usize) -> std::io::Result<Vec<Handle>> {
    (0..n)
        .map(|i| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let handle = rt.handle().clone();
            std::thread::Builder::new()
                .name(format!("host-worker-{i}"))
                .spawn(move || rt.block_on(std::future::pending::<()>()))?;
            Ok(handle)
        })
        .collect()
}

/// [`start_limited`], serving each accepted connection on the next of
/// `workers` in turn (each typically a current-thread runtime on its own
/// thread), or on the calling runtime if `workers` is empty. The accept
/// loop and the ticker stay on the calling runtime.
///
/// A connection then lives on one thread from its first request to its
/// last: no work stealing, no wake-ups across threads between a socket
/// becoming readable and its request being served, which is most of what
/// a multi-threaded scheduler spends on a request-response connection.
pub fn start_on(
    runtime: Arc<Runtime>,
    listener: TcpListener,
    tick: bool,
    mode: Mode,
    limits: Limits,
    workers: Vec<Handle>,
) -> std::io::Result<Running> {
    let addr = listener.local_addr()?;
    let (stop, stopped) = watch::channel(false);
    let ticker = Arc::new(Ticker::new());
    let connections = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let gate = Gate {
        connections: connections.clone(),
        stopped: stopped.clone(),
    };
    let mut tasks = vec![tokio::spawn(accept_loop(
        runtime.clone(),
        listener,
        gate,
        ticker.clone(),
        mode,
        limits,
        workers,
    ))];
    if tick {
        tasks.push(tokio::spawn(tick_loop(runtime, stopped, ticker)));
    }
    Ok(Running {
        addr,
        stop,
        tasks,
        connections,
        limits: Limits {
            max_connections: limits.max_connections.max(1),
            ..limits
        },
    })
}

/// The open connections' slots, and the host's stop signal.
struct Gate {
    connections: Arc<Semaphore>,
    stopped: watch::Receiver<bool>,
}

/// What a connection holds while it is open: its slot, and the host's stop
/// signal.
struct Slot {
    _permit: OwnedSemaphorePermit,
    stopped: watch::Receiver<bool>,
}

async fn accept_loop(
    runtime: Arc<Runtime>,
    listener: TcpListener,
    gate: Gate,
    ticker: Arc<Ticker>,
    mode: Mode,
    limits: Limits,
    workers: Vec<Handle>,
) {
    let Gate {
        connections,
        mut stopped,
    } = gate;
    let mut next_worker = 0usize;
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
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            tokio::spawn(refuse_connection(stream));
            continue;
        };
        // Requests and responses are small and each is written whole: no
        // reason to hold a segment back.
        let _ = stream.set_nodelay(true);
        let runtime = runtime.clone();
        let ticker = ticker.clone();
        let slot = Slot {
            _permit: permit,
            stopped: stopped.clone(),
        };
        let Some(worker) = workers.get(next_worker % workers.len().max(1)) else {
            tokio::spawn(connection(runtime, ticker, stream, mode, limits, slot));
            continue;
        };
        next_worker = next_worker.wrapping_add(1);
        // The stream moves to the worker's own reactor.
        match stream.into_std() {
            Ok(std) => {
                worker.spawn(async move {
                    match tokio::net::TcpStream::from_std(std) {
                        Ok(stream) => connection(runtime, ticker, stream, mode, limits, slot).await,
                        Err(e) => eprintln!("host: a connection could not move to its worker: {e}"),
                    }
                });
            }
            Err(e) => eprintln!("host: a connection could not move to its worker: {e}"),
        }
    }
}

/// Serves one connection's requests until it closes.
async fn connection(
    runtime: Arc<Runtime>,
    ticker: Arc<Ticker>,
    stream: tokio::net::TcpStream,
    mode: Mode,
    limits: Limits,
    slot: Slot,
) {
    let Slot {
        _permit,
        mut stopped,
    } = slot;
    // One per connection: the clone each request takes writes to this
    // count only, not to the runtime's, which every serving thread shares.
    let served = Arc::new((runtime, ticker));
    let service = service_fn(move |req| {
        let served = served.clone();
        async move {
            let (runtime, ticker) = &*served;
            match mode {
                Mode::Component => serve_one(runtime, ticker, req, true, limits).await,
                Mode::WasiHttp => serve_one(runtime, ticker, req, false, limits).await,
                Mode::Constant => Ok(constant(req).await),
            }
        }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .serve_connection(
            TokioIo::new(WriteDeadline::new(stream, limits.write_timeout)),
            service,
        );
    let mut conn = std::pin::pin!(conn);
    let served = tokio::select! {
        done = conn.as_mut() => done,
        // The host stops (or the sender is gone): answer the request in
        // progress, if any, with `connection: close`, then close.
        () = async { drop(stopped.wait_for(|stop| *stop).await) } => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = served
        && !e.is_incomplete_message()
    {
        eprintln!("host: connection error: {e}");
    }
}

/// A connection whose writes fail once one has waited `timeout` for the
/// peer to take a byte (see [`Limits::write_timeout`]); any progress
/// starts the wait again.
struct WriteDeadline<S> {
    inner: S,
    timeout: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteDeadline<S> {
    fn new(inner: S, timeout: Duration) -> Self {
        WriteDeadline {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// A write that is pending: an error once it has waited `timeout`.
    fn stall<T>(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<T>> {
        let timeout = self.timeout;
        let wait = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match wait.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client took no bytes within the write timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progressed<T>(&mut self, done: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        match done {
            Poll::Ready(r) => {
                self.stalled = None;
                Poll::Ready(r)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_write(cx, buf) {
            Poll::Pending => this.stall(cx),
            done => this.progressed(done),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_write_vectored(cx, bufs) {
            Poll::Pending => this.stall(cx),
            done => this.progressed(done),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_flush(cx) {
            Poll::Pending => this.stall(cx),
            done => this.progressed(done),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The answer to a connection beyond [`Limits::max_connections`]: 503 with
/// `Retry-After`, written without reading the request, then closed.
async fn refuse_connection(mut stream: tokio::net::TcpStream) {
    let body = br#"{"jsonrpc":"2.0","error":{"code":-32603,"message":"The server is at its connection limit; retry shortly."}}"#;
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body).await?;
        stream.shutdown().await
    })
    .await;
}

/// 503 with `Retry-After` when every component instance is in use; the
/// generic 500 otherwise.
fn component_failed(e: anyhow::Error) -> Response<HyperOutgoingBody> {
    if e.is::<AtCapacity>() {
        return with_header(
            json_error(
                503,
                -32603,
                "The server is at its instance limit; retry shortly.",
            ),
            hyper::header::RETRY_AFTER,
            "1",
        );
    }
    eprintln!("host: the component failed a request: {e:#}");
    json_error(500, -32603, "Internal error.")
}

/// The answer to a request whose body did not arrive in time (the
/// connection is closed after it).
fn body_timed_out() -> Response<HyperOutgoingBody> {
    with_header(
        json_error(
            408,
            -32600,
            "Invalid Request: the request body was not received in time.",
        ),
        hyper::header::CONNECTION,
        "close",
    )
}

fn with_header(
    mut resp: Response<HyperOutgoingBody>,
    name: hyper::header::HeaderName,
    value: &'static str,
) -> Response<HyperOutgoingBody> {
    resp.headers_mut()
        .insert(name, hyper::header::HeaderValue::from_static(value));
    resp
}

/// An error the host answers itself, before or without the component: its
/// request's id is not known here, so it is left out, as MCP's schema
/// allows for an id that could not be read.
fn json_error(status: u16, code: i64, message: &str) -> Response<HyperOutgoingBody> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "error": {"code": code, "message": message},
    })
    .to_string();
    json_response(status, Bytes::from(body))
}

fn json_response(status: u16, body: Bytes) -> Response<HyperOutgoingBody> {
    with_header(
        full(
            hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::BAD_REQUEST),
            body,
        ),
        hyper::header::CONTENT_TYPE,
        "application/json",
    )
}

/// A response with a body that is all there.
fn full(status: hyper::StatusCode, body: Bytes) -> Response<HyperOutgoingBody> {
    let mut resp = Response::new(
        Full::new(body)
            .map_err(|e: Infallible| -> wasmtime_wasi_http::Error { match e {} })
            .boxed_unsync(),
    );
    *resp.status_mut() = status;
    resp
}

/// The constant answer: the request body is read (as the component would)
/// and a fixed result returned.
async fn constant(req: Request<Incoming>) -> Response<HyperOutgoingBody> {
    let _ = req.into_body().collect().await;
    json_response(
        200,
        Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}"#),
    )
}

/// `req` with the one `Host` the component sees on both paths (the
/// `exchange` export reads the header, `wasi:http` the authority), or
/// `None` when HTTP/1.1 says to refuse it (RFC 9112, section 3.2): no
/// `Host`, more than one, or one that is not text. A target in absolute
/// form (`POST http://name/mcp`) names the authority itself, and the
/// `Host` header is then replaced by it (section 3.2.2).
fn with_one_host(mut req: Request<Incoming>) -> Option<Request<Incoming>> {
    let mut hosts = req.headers().get_all(hyper::header::HOST).iter();
    let one = matches!((hosts.next(), hosts.next()), (Some(h), None) if h.to_str().is_ok());
    if !one {
        return None;
    }
    if let Some(authority) = req.uri().authority() {
        let host = hyper::header::HeaderValue::from_str(authority.as_str()).ok()?;
        req.headers_mut().insert(hyper::header::HOST, host);
    }
    Some(req)
}

/// The request's `Mcp-Method` header, trimmed (empty without one).
fn mcp_method(req: &Request<Incoming>) -> &[u8] {
    req.headers()
        .get("mcp-method")
        .map_or(&[][..], |m| m.as_bytes().trim_ascii())
}

/// The most request body the host reads for an `exchange` call. Beyond the
/// component's own limit (1 MiB by default) the component answers 413, so
/// reading more than this serves no purpose.
pub const MAX_EXCHANGE_BODY: usize = 4 * 1024 * 1024;

/// The largest declared body the host reads whole before the component
/// sees the request (an `exchange` call): what nearly every MCP request
/// fits in. A larger one goes through `wasi:http`, where the component
/// refuses it from its head (path, method, Origin, length, Host,
/// credentials) before reading it with its own bound.
pub const EXCHANGE_INLINE_MAX: usize = 64 * 1024;

/// Reads at most `cap` bytes of `body` (and at least one byte more than
/// `cap` if there is that much, so the component can tell).
async fn read_capped(
    mut body: Deadlined<Incoming>,
    cap: usize,
) -> Result<Vec<u8>, wasmtime_wasi_http::Error> {
    let mut buf = Vec::new();
    while buf.len() <= cap {
        match body.frame().await {
            None => break,
            Some(frame) => {
                if let Ok(data) = frame?.into_data() {
                    buf.extend_from_slice(&data);
                }
            }
        }
    }
    Ok(buf)
}

/// The HTTP response of an `exchange` answer. A field hyper refuses (not
/// a token name, a control character in the value) is left out.
fn exchanged(resp: ExchangeResponse) -> Response<HyperOutgoingBody> {
    let status = hyper::StatusCode::from_u16(resp.status)
        .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let mut headers = hyper::HeaderMap::with_capacity(8);
    for (name, value) in resp.fields() {
        if let (Ok(n), Ok(v)) = (
            hyper::header::HeaderName::from_bytes(name),
            hyper::header::HeaderValue::from_bytes(value),
        ) {
            headers.append(n, v);
        }
    }
    let mut out = full(status, Bytes::from(resp.into_body()));
    *out.headers_mut() = headers;
    out
}

async fn serve_one(
    runtime: &Arc<Runtime>,
    ticker: &Ticker,
    req: Request<Incoming>,
    exchange: bool,
    limits: Limits,
) -> Result<Response<HyperOutgoingBody>, Infallible> {
    let listen = mcp_method(&req) == b"subscriptions/listen";
    let Some(req) = with_one_host(req) else {
        return Ok(json_error(
            400,
            -32600,
            "Invalid Request: exactly one valid Host header is required.",
        ));
    };
    // Streams (`subscriptions/listen`) go through wasi:http; so does a body
    // whose length is not declared or is over the exchange bound, which the
    // component then refuses from its head (or reads with its own bound)
    // without the host buffering it. Everything else is one `exchange`
    // call.
    let declared = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let small = match declared {
        Some(n) => n <= EXCHANGE_INLINE_MAX as u64,
        // No declared length: only a request without a body (no
        // `Transfer-Encoding` either) is sent whole, whatever its method.
        None => req.body().is_end_stream(),
    };
    let timed_out = Arc::new(AtomicBool::new(false));
    let req = req.map(|body| Deadlined::new(body, limits.body_read_timeout, timed_out.clone()));
    let req = if exchange && !listen && small {
        let (parts, body) = req.into_parts();
        let body = match read_capped(body, MAX_EXCHANGE_BODY).await {
            Ok(b) => b,
            Err(_) if timed_out.load(Ordering::SeqCst) => return Ok(body_timed_out()),
            Err(_) => {
                return Ok(json_error(
                    400,
                    -32600,
                    "Invalid Request: the body could not be read.",
                ));
            }
        };
        let fields = parts
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_bytes()));
        let Some(request) =
            ExchangeRequest::new(parts.method.as_str(), parts.uri.path(), fields, body)
        else {
            return Ok(json_error(
                400,
                -32600,
                "Invalid Request: the request could not be read.",
            ));
        };
        match runtime.exchange(&request).await {
            Ok(Some(resp)) => {
                ticker.poke(runtime);
                return Ok(exchanged(resp));
            }
            // Its answer may stream: declined before anything ran, so it
            // is served through wasi:http (once).
            Ok(None) => Request::from_parts(
                parts,
                Full::new(Bytes::from(request.into_body()))
                    .map_err(|e: Infallible| match e {})
                    .boxed_unsync(),
            ),
            Err(e) => return Ok(component_failed(e)),
        }
    } else {
        req.map(|b| b.boxed_unsync())
    };
    match runtime.handle(req).await {
        // The component answered a body it could not read.
        Ok(_) if timed_out.load(Ordering::SeqCst) => Ok(body_timed_out()),
        Ok(resp) => {
            // The component has answered, so whatever it stored is committed.
            ticker.poke(runtime);
            Ok(resp)
        }
        Err(e) => Ok(component_failed(e)),
    }
}

async fn tick_loop(runtime: Arc<Runtime>, mut stopped: watch::Receiver<bool>, ticker: Arc<Ticker>) {
    let mut failures = RepeatLog::new();
    loop {
        let now = runtime.clock().now_ms();
        let (mut wait, line) = match runtime.tick(now).await {
            Ok(report) => (
                report.next_due.map_or(MAX_TICK_MS, |due| pause(due, now)),
                if report.errors > 0 {
                    failures.failed(Failure::Errors, &format!("host: tick: {report}"), now)
                } else {
                    failures.recovered()
                },
            ),
            Err(e) => {
                let why = format!("{e:#}");
                let line = format!("host: tick failed: {why}");
                (
                    MAX_TICK_MS,
                    failures.failed(Failure::Failed(why), &line, now),
                )
            }
        };
        if let Some(line) = line {
            eprintln!("{line}");
        }
        // Publish the plan before taking the writes' due times: a request
        // that reads the old plan wrote before the take, and is seen here.
        let plan = |wait: u64| now.saturating_add(wait as i64);
        ticker.planned.store(plan(wait), Ordering::SeqCst);
        if let Some(due) = runtime.take_written_due() {
            wait = wait.min(pause(due, now));
            ticker.planned.store(plan(wait), Ordering::SeqCst);
        }
        tokio::select! {
            _ = stopped.changed() => return,
            _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
            _ = ticker.wake.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exchange_answer_becomes_the_http_response() {
        let resp = exchanged(ExchangeResponse {
            status: 202,
            body_len: 2,
            data: b"{}content-type:application/json\nbad name:x\nx-cr:a\rb\nvary:a\nvary:b\n"
                .to_vec(),
        });
        assert_eq!(resp.status(), 202);
        let fields: Vec<(&str, &[u8])> = resp
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_bytes()))
            .collect();
        assert_eq!(
            fields,
            [
                ("content-type", &b"application/json"[..]),
                ("vary", b"a"),
                ("vary", b"b")
            ]
        );
        assert_eq!(resp.body().size_hint().exact(), Some(2));
        let odd = exchanged(ExchangeResponse {
            status: 1000,
            body_len: 0,
            data: Vec::new(),
        });
        assert_eq!(odd.status(), 500, "not an HTTP status");
    }

    #[test]
    fn a_pause_is_clamped_to_the_tick_bounds() {
        assert_eq!(pause(1_000, 1_000), MIN_TICK_MS, "due now");
        assert_eq!(pause(500, 1_000), MIN_TICK_MS, "overdue");
        assert_eq!(pause(1_042, 1_000), 42);
        assert_eq!(pause(i64::MAX, 1_000), MAX_TICK_MS);
        assert_eq!(pause(i64::MIN, i64::MAX), MIN_TICK_MS);
    }

    #[test]
    fn only_work_due_before_the_planned_tick_wakes_the_ticker() {
        let t = Ticker::new();
        assert!(
            !t.due_before_planned(Some(0)),
            "no plan yet: the first tick is coming"
        );
        t.planned.store(1_100, Ordering::SeqCst);
        assert!(t.due_before_planned(Some(1_000)));
        assert!(t.due_before_planned(Some(1_099)));
        assert!(
            !t.due_before_planned(Some(1_100)),
            "the planned tick takes it"
        );
        assert!(!t.due_before_planned(Some(3_600_000)), "due at its expiry");
        assert!(!t.due_before_planned(None), "nothing written");
    }
}
