//! Runs the component (world `server`) with wasmtime: links WASI 0.2,
//! `wasi:http` and the host `store` (SQLite), and calls its exports.
//!
//! Every call runs under two limits:
//! - a [`ResourceLimiter`] caps the guest's linear memory (128 MiB by
//!   default); a growth beyond it fails, and the guest's allocator traps;
//! - an epoch deadline (wall clock, ticked every 10 ms): a call that runs
//!   guest code past its deadline (10 s by default) is interrupted unless it
//!   made progress since the last check: received request bytes, wrote
//!   response bytes or called the store. A `subscriptions/listen` stream
//!   that polls the store for minutes keeps going; a guest spinning in a
//!   loop is stopped. Epoch checks cost
//!   far less guest time than fuel metering, which was measured at about a
//!   quarter of a `tasks/get` call.
//!
//! A trapped instance is never reused. Instances are either made fresh for
//! each call or kept in a pool ([`Strategy`]).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, anyhow, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Body;
use mcp_tasks_edge::store::StoreError as CoreStoreError;
use mcp_tasks_edge::tasks::runner::TickReport;
use tokio::task::JoinHandle;
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, ResourceLimiter, Store};
use wasmtime_wasi::{HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;
use wasmtime_wasi_http::{WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

use crate::affine::{AffinePool, Counter};
use crate::sqlite::SqliteStore;

mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "server",
        exports: { default: async },
        // Writes await the store's group commit without holding a thread.
        imports: {
            "mcp:tasks-edge/store.put": async,
            "mcp:tasks-edge/store.delete": async,
        },
        require_store_data_send: true,
        with: {
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
        },
    });
}

pub use bindings::exports::mcp::tasks_edge::exchange::{
    Request as ExchangeRequest, Response as ExchangeResponse,
};
use bindings::mcp::tasks_edge::store as wit_store;

impl ExchangeRequest {
    /// A request for [`Runtime::exchange`], in the one buffer the WIT
    /// `exchange.request` describes: `body`, then the method, a space, the
    /// path and a line feed, then each header field as `name:value` and a
    /// line feed. A field whose name has a line feed or a `:`, or whose
    /// value has a line feed (HTTP allows none of them), is left out; a
    /// value that is not UTF-8 has its invalid bytes replaced. `None` when
    /// the method has a space or a line feed, the path a line feed, or the
    /// body is 4 GiB or more.
    ///
    /// ```
    /// use mcp_tasks_edge_host::runtime::ExchangeRequest;
    ///
    /// let fields = [("host", &b"127.0.0.1"[..]), ("bad\nname", &b"x"[..])];
    /// let r = ExchangeRequest::new("POST", "/mcp", fields, b"{}".to_vec()).unwrap();
    /// assert_eq!(r.body_len, 2);
    /// assert_eq!(r.data, b"{}POST /mcp\nhost:127.0.0.1\n");
    /// ```
    pub fn new<'a>(
        method: &str,
        path: &str,
        fields: impl IntoIterator<Item = (&'a str, &'a [u8])>,
        body: Vec<u8>,
    ) -> Option<Self> {
        if method.contains([' ', '\n']) || path.contains('\n') {
            return None;
        }
        let body_len = u32::try_from(body.len()).ok()?;
        let mut data = body;
        data.reserve(method.len() + path.len() + 2 + 256);
        data.extend_from_slice(method.as_bytes());
        data.push(b' ');
        data.extend_from_slice(path.as_bytes());
        data.push(b'\n');
        for (name, value) in fields {
            // Each check one pass without an early exit, which the compiler
            // does eight or more bytes at a time: header names and values
            // are short, and `from_utf8`'s or `memchr`'s setup cost more.
            let name_fits = name
                .bytes()
                .fold(true, |ok, b| ok & (b != b'\n') & (b != b':'));
            let (ascii, no_lf) = value.iter().fold((true, true), |(ascii, no_lf), &b| {
                (ascii & b.is_ascii(), no_lf & (b != b'\n'))
            });
            if !name_fits || !no_lf {
                continue;
            }
            data.extend_from_slice(name.as_bytes());
            data.push(b':');
            if ascii {
                data.extend_from_slice(value);
            } else {
                data.extend_from_slice(String::from_utf8_lossy(value).as_bytes());
            }
            data.push(b'\n');
        }
        Some(ExchangeRequest { body_len, data })
    }

    /// The body, as [`ExchangeRequest::new`] was given it.
    pub fn into_body(self) -> Vec<u8> {
        body_part(self.data, self.body_len)
    }
}

impl ExchangeResponse {
    /// The body. ([`Runtime::exchange`] returns only responses whose
    /// `body_len` is within their data.)
    pub fn body(&self) -> &[u8] {
        self.data.get(..self.body_len as usize).unwrap_or_default()
    }

    /// The header fields, in the order the component wrote them: the lines
    /// after the body, each split at its first `:`.
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let head = self.data.get(self.body_len as usize..).unwrap_or_default();
        head.split(|b| *b == b'\n').filter_map(|line| {
            let colon = line.iter().position(|b| *b == b':')?;
            Some((&line[..colon], &line[colon + 1..]))
        })
    }

    /// The header fields as text (invalid UTF-8 replaced), for tests and
    /// tools.
    pub fn headers(&self) -> Vec<(String, String)> {
        self.fields()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect()
    }

    /// The body, without copying it.
    pub fn into_body(self) -> Vec<u8> {
        body_part(self.data, self.body_len)
    }
}

/// The body at the front of an `exchange` buffer, without copying it: the
/// buffer cut after `body_len` bytes.
fn body_part(mut data: Vec<u8>, body_len: u32) -> Vec<u8> {
    data.truncate(body_len as usize);
    data
}

/// Where the component is, unless `COMPONENT_WASM` says otherwise.
pub const DEFAULT_COMPONENT: &str = "target/wasm32-wasip2/release/mcp_tasks_edge_server.wasm";

/// The component's path: `$COMPONENT_WASM`, or the release build in this
/// checkout.
pub fn component_path() -> std::path::PathBuf {
    match std::env::var_os("COMPONENT_WASM") {
        Some(p) => p.into(),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(DEFAULT_COMPONENT),
    }
}

/// The guest's memory cap.
pub const MEMORY_LIMIT: usize = 128 * 1024 * 1024;

/// The most linear memory a pooled instance keeps, by default: about six
/// times the 1.4 MiB the component grows to serving ordinary requests and
/// ticks (the wasi suite's `limits` test prints it).
pub const POOL_MEMORY_MAX: usize = 8 * 1024 * 1024;

/// How often the engine's epoch advances.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// How long a call may run guest code without progress.
pub const CALL_DEADLINE: Duration = Duration::from_secs(10);

fn ticks(d: Duration) -> u64 {
    u64::try_from(d.as_millis() / EPOCH_TICK.as_millis()).unwrap_or(u64::MAX)
}

/// The wall clock the guest reads and the host ticks with.
#[derive(Clone, Debug)]
pub enum Clock {
    System,
    /// Milliseconds since the epoch, moved by a test.
    Manual(Arc<AtomicI64>),
}

impl Clock {
    pub fn manual(start_ms: i64) -> Self {
        Clock::Manual(Arc::new(AtomicI64::new(start_ms)))
    }

    pub fn now_ms(&self) -> i64 {
        match self {
            Clock::System => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
                .unwrap_or(0),
            Clock::Manual(ms) => ms.load(Ordering::SeqCst),
        }
    }

    /// Sets a manual clock (no effect on the system clock).
    pub fn set(&self, ms: i64) {
        if let Clock::Manual(now) = self {
            now.store(ms, Ordering::SeqCst);
        }
    }

    pub fn advance(&self, ms: i64) {
        if let Clock::Manual(now) = self {
            now.fetch_add(ms, Ordering::SeqCst);
        }
    }
}

struct GuestClock(Clock);

impl HostWallClock for GuestClock {
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }
    fn now(&self) -> Duration {
        Duration::from_millis(u64::try_from(self.0.now_ms()).unwrap_or(0))
    }
}

/// How instances are used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// A new instance for every request and tick.
    Fresh,
    /// Instances are kept after a successful call and reused (at most this
    /// many idle ones per serving thread; each stays with the thread that
    /// used it last).
    Pooled(usize),
}

impl std::str::FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fresh" => Ok(Strategy::Fresh),
            "pooled" => Ok(Strategy::Pooled(64)),
            _ => Err(format!("unknown instance strategy {s:?} (fresh or pooled)")),
        }
    }
}

/// How the host runs the component.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The guest's environment (`MCP_*` settings).
    pub env: Vec<(String, String)>,
    pub memory_limit: usize,
    /// An instance whose linear memory grew past this (a call that read a
    /// large body or task) is dropped when released instead of pooled:
    /// linear memory never shrinks, and the pool would keep it at its
    /// peak for the life of the process.
    pub pool_memory_max: usize,
    /// Guest run time allowed without progress, per call.
    pub call_deadline: Duration,
    pub clock: Clock,
    pub strategy: Strategy,
    /// Pass the guest's stderr through (its logs and warnings).
    pub guest_stderr: bool,
    /// Instances in use at once by requests and streams; a request beyond
    /// it is answered 503 with `Retry-After`. Ticks (one round at a time,
    /// up to [`Settings::tick_slices`] calls) are not counted, so tasks
    /// keep advancing when requests hold every instance.
    pub max_instances: usize,
    /// Ticks run at once (at most [`MAX_TICK_SLICES`], and never more
    /// than there are due tasks), each on its own instance over one slice
    /// of the due work (`runner.tick-slice`), so their commits share syncs.
    pub tick_slices: u32,
}

/// Ticks run at once, by default.
pub const TICK_SLICES: u32 = 8;

/// The most ticks a host runs at once (each holds an instance outside
/// [`Settings::max_instances`]).
pub const MAX_TICK_SLICES: u32 = 64;

/// Instances in use at once, by default.
pub const MAX_INSTANCES: usize = 128;

/// Every instance is in use ([`Settings::max_instances`]): the request
/// should be answered 503 and retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtCapacity;

impl std::fmt::Display for AtCapacity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("every component instance is in use")
    }
}

impl std::error::Error for AtCapacity {}

impl Settings {
    pub fn new(env: Vec<(String, String)>) -> Self {
        Settings {
            env,
            memory_limit: MEMORY_LIMIT,
            pool_memory_max: POOL_MEMORY_MAX,
            call_deadline: CALL_DEADLINE,
            clock: Clock::System,
            strategy: Strategy::Pooled(64),
            guest_stderr: true,
            max_instances: MAX_INSTANCES,
            tick_slices: TICK_SLICES,
        }
    }
}

/// What the limits saw, over every instance of a runtime.
#[derive(Debug, Default)]
pub struct LimitStats {
    /// Memory growths refused by the cap.
    pub memory_denied: AtomicUsize,
    /// The largest linear memory granted to any instance (bytes).
    pub peak_memory: AtomicUsize,
    /// Calls interrupted by their deadline.
    pub interrupts: AtomicU64,
    /// Deadlines extended because the call was making progress.
    pub extensions: AtomicU64,
    /// Host store calls made by the guest, and the time spent in them
    /// (benchmarks subtract it to time the guest alone). Counted per
    /// serving thread: every request adds to them.
    pub store_calls: Counter,
    pub store_ns: Counter,
}

/// Caps linear memory; tables get a generous fixed cap.
pub struct MemoryCap {
    pub max_bytes: usize,
    pub stats: Arc<LimitStats>,
    /// The linear memory granted to this instance so far (bytes).
    pub granted: usize,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.stats.memory_denied.fetch_add(1, Ordering::SeqCst);
            return Ok(false);
        }
        self.stats.peak_memory.fetch_max(desired, Ordering::SeqCst);
        self.granted = self.granted.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// `wasi:http` hooks: outgoing requests reach only the origins in the
/// guest's `MCP_OUTBOUND_ALLOW` (the same list the core checks), and count
/// as progress for the call's deadline while they wait.
struct Outgoing {
    allow: Arc<Vec<String>>,
    progress: Arc<AtomicU64>,
}

/// The normalised origins of a comma-separated allow-list.
fn allowed_origins(env: &[(String, String)]) -> Vec<String> {
    env.iter()
        .filter(|(k, _)| k == "MCP_OUTBOUND_ALLOW")
        .flat_map(|(_, v)| v.split(','))
        .filter_map(|o| mcp_tasks_edge::outbound::origin_of(o.trim()))
        .collect()
}

type IoFuture = Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>;

/// `body`, adding the bytes of each of its frames to `progress` as they
/// pass: bytes moving count as progress for a call's deadline.
fn counting<B: Body<Data = Bytes>>(
    body: B,
    progress: Arc<AtomicU64>,
) -> impl Body<Data = Bytes, Error = B::Error> {
    body.map_frame(move |frame| {
        if let Some(data) = frame.data_ref() {
            progress.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        frame
    })
}

impl WasiHttpHooks for Outgoing {
    fn send_request(
        &mut self,
        request: hyper::Request<WasiBody>,
        options: Option<wasmtime_wasi_http::RequestOptions>,
        _fut: IoFuture,
    ) -> Box<
        dyn Future<
                Output = Result<(hyper::Response<WasiBody>, IoFuture), wasmtime_wasi_http::Error>,
            > + Send,
    > {
        let origin = mcp_tasks_edge::outbound::origin_of(&request.uri().to_string());
        let allowed = origin.as_ref().is_some_and(|o| self.allow.contains(o));
        if !allowed {
            eprintln!(
                "{}",
                serde_json::json!({"event": "outbound-denied", "origin": origin.as_deref().unwrap_or("(invalid)")})
            );
            return Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) });
        }
        let progress = self.progress.clone();
        progress.fetch_add(1, Ordering::Relaxed);
        // Bytes moving either way count too: an upload or a download that
        // is slow but steady keeps the call alive (the step's own deadline
        // and the request's timeouts bound it).
        let request = request.map(|body| counting(body, progress.clone()).boxed_unsync());
        Box::new(async move {
            let (response, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            progress.fetch_add(1, Ordering::Relaxed);
            Ok((
                response.map(|body| counting(body, progress).boxed_unsync()),
                Box::new(io) as IoFuture,
            ))
        })
    }
}

/// The data of one wasmtime store (one instance).
pub struct HostState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    hooks: Outgoing,
    store: Arc<SqliteStore>,
    pub limits: MemoryCap,
    /// Store calls and response bytes so far; the deadline is extended only
    /// while this moves.
    progress: Arc<AtomicU64>,
    progress_seen: u64,
    deadline_ticks: u64,
    /// The runtime's [`Runtime::written_due`].
    written_due: Arc<AtomicI64>,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

fn wit_error(e: CoreStoreError) -> wit_store::StoreError {
    match e {
        CoreStoreError::Conflict { current } => wit_store::StoreError::Conflict(current),
        CoreStoreError::Unavailable(why) => {
            eprintln!("host store: {why}");
            wit_store::StoreError::Unavailable(why)
        }
    }
}

impl HostState {
    /// Counts one store call that began at `started`.
    fn done(&self, started: std::time::Instant) {
        self.progress.fetch_add(1, Ordering::Relaxed);
        let stats = &self.limits.stats;
        stats.store_calls.add(1);
        stats
            .store_ns
            .add(u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX));
    }

    /// Runs one host store call, counting it and its time.
    fn timed<T>(&self, f: impl FnOnce(&SqliteStore) -> T) -> T {
        let started = std::time::Instant::now();
        let out = f(&self.store);
        self.done(started);
        out
    }
}

impl wit_store::Host for HostState {
    fn get(&mut self, key: String) -> Result<Option<wit_store::Entry>, wit_store::StoreError> {
        self.timed(|s| s.get(&key))
            .map(|e| {
                e.map(|e| wit_store::Entry {
                    version: e.version,
                    body: e.body,
                    due_at: e.due_at,
                })
            })
            .map_err(wit_error)
    }

    async fn put(
        &mut self,
        key: String,
        expected: Option<u64>,
        body: String,
        due_at: Option<i64>,
    ) -> Result<u64, wit_store::StoreError> {
        // Only the store is borrowed across the await (the state is not
        // `Sync`), so the call is timed around it.
        let started = std::time::Instant::now();
        let out = self.store.put_async(&key, expected, body, due_at).await;
        self.done(started);
        if out.is_ok()
            && let Some(due) = due_at
        {
            self.written_due.fetch_min(due, Ordering::SeqCst);
        }
        out.map_err(wit_error)
    }

    async fn delete(&mut self, key: String, expected: u64) -> Result<(), wit_store::StoreError> {
        let started = std::time::Instant::now();
        let out = self.store.delete_async(&key, expected).await;
        self.done(started);
        out.map_err(wit_error)
    }

    fn due(&mut self, now_ms: i64, limit: u32) -> Result<Vec<String>, wit_store::StoreError> {
        self.timed(|s| s.due(now_ms, limit)).map_err(wit_error)
    }

    fn next_due(&mut self) -> Result<Option<i64>, wit_store::StoreError> {
        self.timed(|s| s.next_due()).map_err(wit_error)
    }
}

/// The compiled component, its linker, the store backend and the settings.
/// Cheap to share (`Arc`); each call runs on its own instance.
pub struct Runtime {
    engine: Engine,
    pre: bindings::ServerPre<HostState>,
    store: Arc<SqliteStore>,
    settings: Settings,
    outbound_allow: Arc<Vec<String>>,
    /// Idle instances, each kept with the thread that used it last.
    pool: AffinePool<Instance>,
    /// One permit per instance in use.
    live: Arc<tokio::sync::Semaphore>,
    traps: AtomicUsize,
    instantiations: AtomicUsize,
    in_flight: AtomicUsize,
    /// The earliest due time a write has stored since the ticker last
    /// took it (`i64::MAX`: none).
    written_due: Arc<AtomicI64>,
    stats: Arc<LimitStats>,
}

/// One instance of the component in its own wasmtime store.
pub struct Instance {
    store: Store<HostState>,
    server: bindings::Server,
    /// Held while the instance serves a `wasi:http` call (not while it
    /// idles in the pool); an `exchange` call holds a borrowed permit of its
    /// own instead.
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// A response from the component, with its body read to the end.
#[derive(Debug)]
pub struct Collected {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
}

impl Collected {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl Runtime {
    /// Compiles the component at `path` and links it.
    pub fn new(path: &Path, store: Arc<SqliteStore>, settings: Settings) -> Result<Arc<Self>> {
        if !path.exists() {
            bail!(
                "the component {} is missing: build it first with \
                 `cargo build --release --target wasm32-wasip2 -p mcp-tasks-edge-server --features conformance` (or set COMPONENT_WASM)",
                path.display()
            );
        }
        let engine = Self::engine()?;
        let component = Component::from_file(&engine, path)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("loading the component {}", path.display()))?;
        Self::from_component(&engine, &component, store, settings)
    }

    /// The engine configuration every runtime uses: epoch interruption on,
    /// with a thread that advances the epoch every [`EPOCH_TICK`] for as long
    /// as the engine lives.
    pub fn engine() -> Result<Engine> {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        // Guest functions by name in `perf` (needs a host built with
        // `--features wasmtime/profiling`; see bench/README.md).
        if std::env::var_os("HOST_PERFMAP").is_some() {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&config)?;
        let weak = engine.weak();
        std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(EPOCH_TICK);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => return,
                    }
                }
            })?;
        Ok(engine)
    }

    pub fn from_component(
        engine: &Engine,
        component: &Component,
        store: Arc<SqliteStore>,
        settings: Settings,
    ) -> Result<Arc<Self>> {
        let mut linker = Linker::<HostState>::new(engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        wit_store::add_to_linker::<_, HasSelf<HostState>>(&mut linker, |s| s)?;
        let pre = bindings::ServerPre::new(linker.instantiate_pre(component)?)?;
        let max_instances = settings.max_instances.max(1);
        let pool = AffinePool::new(match settings.strategy {
            Strategy::Pooled(max) => max,
            Strategy::Fresh => 0,
        });
        Ok(Arc::new(Runtime {
            engine: engine.clone(),
            pre,
            store,
            outbound_allow: Arc::new(allowed_origins(&settings.env)),
            settings,
            pool,
            live: Arc::new(tokio::sync::Semaphore::new(max_instances)),
            traps: AtomicUsize::new(0),
            instantiations: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            written_due: Arc::new(AtomicI64::new(i64::MAX)),
            stats: Arc::new(LimitStats::default()),
        }))
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn store(&self) -> &Arc<SqliteStore> {
        &self.store
    }

    pub fn clock(&self) -> &Clock {
        &self.settings.clock
    }

    /// Calls that trapped (or failed in the host) so far.
    pub fn traps(&self) -> usize {
        self.traps.load(Ordering::SeqCst)
    }

    /// What the memory cap and the deadline saw so far.
    pub fn limit_stats(&self) -> &LimitStats {
        &self.stats
    }

    /// Requests served through `wasi:http` ([`Runtime::handle`]: event
    /// streams, bodies too large for one `exchange`) whose component call
    /// has not returned yet. [`Runtime::exchange`] calls are not counted:
    /// each returns whole, and counting them would have every serving
    /// thread write one shared counter on every request.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// The earliest due time (ms) that a store write of this runtime's
    /// component has set since [`Runtime::take_written_due`] last ran:
    /// whether a request made work due that the ticker does not know of.
    pub fn written_due(&self) -> Option<i64> {
        Some(self.written_due.load(Ordering::SeqCst)).filter(|d| *d != i64::MAX)
    }

    /// [`Runtime::written_due`], cleared.
    pub fn take_written_due(&self) -> Option<i64> {
        Some(self.written_due.swap(i64::MAX, Ordering::SeqCst)).filter(|d| *d != i64::MAX)
    }

    /// Instances created so far.
    pub fn instantiations(&self) -> usize {
        self.instantiations.load(Ordering::SeqCst)
    }

    /// A new instance, not taken from the pool.
    pub async fn instantiate(&self) -> Result<Instance> {
        let mut store = self.new_store();
        self.instantiations.fetch_add(1, Ordering::SeqCst);
        let server = self.pre.instantiate_async(&mut store).await?;
        Ok(Instance {
            store,
            server,
            permit: None,
        })
    }

    /// A store for one instance: its WASI context, memory cap and epoch
    /// deadline.
    fn new_store(&self) -> Store<HostState> {
        let mut wasi = WasiCtxBuilder::new();
        wasi.envs(&self.settings.env)
            .wall_clock(GuestClock(self.settings.clock.clone()));
        if self.settings.guest_stderr {
            wasi.inherit_stderr();
        }
        let progress = Arc::new(AtomicU64::new(0));
        let state = HostState {
            wasi: wasi.build(),
            http: WasiHttpCtx::new(),
            table: ResourceTable::new(),
            hooks: Outgoing {
                allow: self.outbound_allow.clone(),
                progress: progress.clone(),
            },
            store: self.store.clone(),
            limits: MemoryCap {
                max_bytes: self.settings.memory_limit,
                stats: self.stats.clone(),
                granted: 0,
            },
            progress,
            progress_seen: 0,
            deadline_ticks: ticks(self.settings.call_deadline),
            written_due: self.written_due.clone(),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limits);
        store.epoch_deadline_callback(|mut ctx| {
            let state = ctx.data_mut();
            let now = state.progress.load(Ordering::Relaxed);
            if now != state.progress_seen {
                state.progress_seen = now;
                state
                    .limits
                    .stats
                    .extensions
                    .fetch_add(1, Ordering::Relaxed);
                Ok(wasmtime::UpdateDeadline::Continue(
                    state.deadline_ticks.max(1),
                ))
            } else {
                state
                    .limits
                    .stats
                    .interrupts
                    .fetch_add(1, Ordering::Relaxed);
                Ok(wasmtime::UpdateDeadline::Interrupt)
            }
        });
        // Instantiation runs the guest's initialisers: the default deadline;
        // each call then gets the configured one (`acquire`).
        store.set_epoch_deadline(ticks(CALL_DEADLINE));
        store
    }

    /// Instantiates the component once, so that one built for another
    /// version of `wit/world.wit` (an export whose types differ, which
    /// wasmtime checks only when it instantiates) fails here, with the
    /// reason and the export it concerns, rather than on every request and
    /// tick. The instance is kept in the pool.
    pub async fn check(&self) -> Result<()> {
        match self.instantiate().await {
            Ok(instance) => {
                self.release(instance);
                Ok(())
            }
            Err(e) => {
                let export = self.mismatched_export().await;
                Err(e.context(format!(
                    "the component does not run in this host{} (build the component and \
                     the host from the same tree: wit/world.wit)",
                    export.map_or(String::new(), |name| format!(": its export {name}"))
                )))
            }
        }
    }

    /// Which of the world's exports fails to load from a fresh instance of
    /// the component, when one does: wasmtime's type mismatch does not say.
    async fn mismatched_export(&self) -> Option<&'static str> {
        use bindings::exports::mcp::tasks_edge::{diagnostics, exchange, runner};
        use bindings::exports::wasi::http::incoming_handler;
        let mut store = self.new_store();
        let pre = self.pre.instance_pre();
        let instance = pre.instantiate_async(&mut store).await.ok()?;
        // Each export's functions, looked up and type-checked on their own.
        macro_rules! loads {
            ($($name:literal: $export:ident),*) => {
                [$((
                    $name,
                    $export::GuestIndices::new(pre)
                        .and_then(|i| i.load(&mut store, &instance))
                        .is_ok(),
                )),*]
            };
        }
        let loads = loads!(
            "mcp:tasks-edge/runner@0.1.0": runner,
            "mcp:tasks-edge/exchange@0.1.0": exchange,
            "mcp:tasks-edge/diagnostics@0.1.0": diagnostics,
            "wasi:http/incoming-handler@0.2.12": incoming_handler
        );
        loads.iter().find(|(_, ok)| !ok).map(|(name, _)| *name)
    }

    /// An instance for one request: [`AtCapacity`] when every instance is
    /// in use.
    pub async fn acquire(&self) -> Result<Instance> {
        let permit = self
            .live
            .clone()
            .try_acquire_owned()
            .map_err(|_| anyhow::Error::new(AtCapacity))?;
        self.acquire_with(Some(permit)).await
    }

    /// An instance for background work (ticks): outside the cap, so
    /// requests that hold every instance (slow bodies, long streams) never
    /// stop tasks from advancing. A host runs one tick (or one per slice)
    /// at a time.
    async fn acquire_for_tick(&self) -> Result<Instance> {
        self.acquire_with(None).await
    }

    /// Instances in use now.
    pub fn live_instances(&self) -> usize {
        self.settings.max_instances.max(1) - self.live.available_permits()
    }

    /// An instance for one call: from the pool, or new.
    async fn acquire_with(
        &self,
        permit: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Result<Instance> {
        let pooled = match self.settings.strategy {
            Strategy::Fresh => None,
            Strategy::Pooled(_) => self.pool.take(),
        };
        let mut instance = match pooled {
            Some(i) => i,
            None => self.instantiate().await?,
        };
        instance.permit = permit;
        let state = instance.store.data_mut();
        state.progress_seen = state.progress.load(Ordering::Relaxed);
        instance
            .store
            .set_epoch_deadline(ticks(self.settings.call_deadline));
        Ok(instance)
    }

    /// Returns an instance after a call that did not trap.
    pub fn release(&self, mut instance: Instance) {
        instance.permit = None;
        let large = instance.store.data().limits.granted > self.settings.pool_memory_max;
        if let Strategy::Pooled(_) = self.settings.strategy
            && !large
        {
            self.pool.put(instance);
        }
    }

    fn trapped(&self, e: impl Into<anyhow::Error>) -> anyhow::Error {
        self.traps.fetch_add(1, Ordering::SeqCst);
        e.into()
    }

    /// Advances due work: `runner.tick(now)`, or with several
    /// [`Settings::tick_slices`] one `runner.tick-slice` per slice at once,
    /// each on its own instance, their reports summed. Any slice failing
    /// fails the whole (the others' work stands).
    pub async fn tick(&self, now_ms: i64) -> Result<TickReport> {
        let slices = self.settings.tick_slices.clamp(1, MAX_TICK_SLICES);
        if slices == 1 {
            return self.tick_one(now_ms, None).await;
        }
        // With at most one task due (an idle tick, most of the time) one
        // plain call does it: the component reports its own state (a
        // misconfigured one says so on every tick). Otherwise no more
        // slices run than there are due tasks.
        let due = self
            .store
            .due(now_ms, slices)
            .map_err(|e| anyhow::anyhow!("the store's due index: {e:?}"))?;
        if due.len() <= 1 {
            return self.tick_one(now_ms, None).await;
        }
        let slices = u32::try_from(due.len()).unwrap_or(slices).min(slices);
        let calls: Vec<_> = (0..slices)
            .map(|slice| self.tick_one(now_ms, Some((slice, slices))))
            .collect();
        let mut total = TickReport::default();
        // Polled together in this task: the calls interleave at their
        // store commits.
        for report in futures_util::future::join_all(calls).await {
            total.absorb(&report?);
        }
        Ok(total)
    }

    /// `runner.tick-slice(now, slice, slices)` on one instance.
    pub async fn tick_slice(&self, now_ms: i64, slice: u32, slices: u32) -> Result<TickReport> {
        self.tick_one(now_ms, Some((slice, slices))).await
    }

    async fn tick_one(&self, now_ms: i64, slice: Option<(u32, u32)>) -> Result<TickReport> {
        let mut i = self.acquire_for_tick().await?;
        let runner = i.server.mcp_tasks_edge_runner();
        let result = match slice {
            None => runner.call_tick(&mut i.store, now_ms).await,
            Some((slice, slices)) => {
                runner
                    .call_tick_slice(&mut i.store, now_ms, slice, slices)
                    .await
            }
        };
        match result {
            Ok(r) => {
                self.release(i);
                Ok(TickReport {
                    due: r.due as usize,
                    stepped: r.stepped as usize,
                    finished: r.finished as usize,
                    cancelled: r.cancelled as usize,
                    purged: r.purged as usize,
                    skipped: r.skipped as usize,
                    fenced: r.fenced as usize,
                    errors: r.errors as usize,
                    // The component's outbound requests are not bounded
                    // per tick, so none is held back.
                    held_back: 0,
                    next_due: r.next_due,
                })
            }
            Err(e) => Err(self.trapped(e)),
        }
    }

    /// `diagnostics.run-store-contract(prefix)`.
    pub async fn run_store_contract(&self, prefix: &str) -> Result<Result<u32, String>> {
        let mut i = self.acquire().await?;
        match i
            .server
            .mcp_tasks_edge_diagnostics()
            .call_run_store_contract(&mut i.store, prefix)
            .await
        {
            Ok(r) => {
                self.release(i);
                Ok(r)
            }
            Err(e) => Err(self.trapped(e)),
        }
    }

    /// Serves one request through the `exchange` export: one call, the whole
    /// body in and out. `None` when the answer is a stream (serve it through
    /// [`Runtime::handle`] instead); an error when the component fails, or
    /// answers a `body_len` past the end of its data.
    pub async fn exchange(&self, request: &ExchangeRequest) -> Result<Option<ExchangeResponse>> {
        // A borrowed permit, held for the call: unlike an owned one it takes
        // no clone of the semaphore's `Arc`, whose count every serving
        // thread would write.
        let _permit = self
            .live
            .try_acquire()
            .map_err(|_| anyhow::Error::new(AtCapacity))?;
        let mut i = self.acquire_with(None).await?;
        let result = i
            .server
            .mcp_tasks_edge_exchange()
            .call_handle(&mut i.store, request)
            .await;
        match result {
            Ok(response) => {
                self.release(i);
                match response {
                    Some(r) if r.body_len as usize > r.data.len() => Err(anyhow::anyhow!(
                        "the component's exchange response says its body is {} bytes of {}",
                        r.body_len,
                        r.data.len()
                    )),
                    response => Ok(response),
                }
            }
            Err(e) => Err(self.trapped(e)),
        }
    }

    /// Serves one HTTP request through `wasi:http/incoming-handler`. Returns
    /// once the component has set the response head; the body streams on
    /// while the component keeps writing it.
    pub async fn handle<B>(
        self: &Arc<Self>,
        req: hyper::Request<B>,
    ) -> Result<hyper::Response<HyperOutgoingBody>>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<wasmtime_wasi_http::Error>,
    {
        self.handle_call(req).await.map(|(resp, _call)| resp)
    }

    /// [`Runtime::handle`], plus the component call, which ends after the
    /// body has been written (with the call's error if it trapped).
    pub async fn handle_call<B>(
        self: &Arc<Self>,
        req: hyper::Request<B>,
    ) -> Result<(hyper::Response<HyperOutgoingBody>, JoinHandle<Result<()>>)>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<wasmtime_wasi_http::Error>,
    {
        let mut i = self.acquire().await?;
        let progress = i.store.data().progress.clone();
        // Request bytes arriving count as progress too: a guest waiting on a
        // slow (but moving) body is not interrupted for it. The body's own
        // deadline is the server's (see `serve::Limits`).
        let req = req.map(|body| counting(body, progress.clone()));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let req = i.store.data_mut().http().new_incoming_request(
            wasmtime_wasi_http::p2::bindings::http::types::Scheme::Http,
            req,
        )?;
        let out = i.store.data_mut().http().new_response_outparam(tx)?;
        let rt = self.clone();
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let call = tokio::spawn(async move {
            let result = i
                .server
                .wasi_http_incoming_handler()
                .call_handle(&mut i.store, req, out)
                .await;
            rt.in_flight.fetch_sub(1, Ordering::SeqCst);
            match result {
                Ok(()) => {
                    rt.release(i);
                    Ok(())
                }
                Err(e) => Err(rt.trapped(e)),
            }
        });
        match rx.await {
            Ok(Ok(resp)) => {
                // Bytes reaching the client count as progress for the
                // deadline (a long stream keeps its call alive).
                let resp = resp.map(|body| counting(body, progress).boxed_unsync());
                Ok((resp, call))
            }
            Ok(Err(code)) => Err(anyhow!("the component answered with error code {code:?}")),
            Err(_) => match call.await {
                Ok(Err(e)) => Err(e.context("the component trapped")),
                Ok(Ok(())) => Err(anyhow!("the component returned without a response")),
                Err(e) => Err(anyhow!("the component's task failed: {e}")),
            },
        }
    }

    /// Sends a request with a complete body, reads the whole response and
    /// waits for the component call to end (for tests and simple clients).
    pub async fn request(
        self: &Arc<Self>,
        method: &str,
        path: &str,
        headers: &[(&str, &[u8])],
        body: Vec<u8>,
    ) -> Result<Collected> {
        let (resp, call) = self
            .handle_call(build_request(method, path, headers, body)?)
            .await?;
        let (parts, body) = resp.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| anyhow!("reading the response body: {e}"))?
            .to_bytes();
        call.await
            .map_err(|e| anyhow!("the component's task failed: {e}"))?
            .context("the component trapped after answering")?;
        Ok(Collected {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        })
    }
}

/// A request to the loopback host with a complete body.
pub fn build_request(
    method: &str,
    path: &str,
    headers: &[(&str, &[u8])],
    body: Vec<u8>,
) -> Result<hyper::Request<Full<Bytes>>> {
    let mut builder = hyper::Request::builder()
        .method(method)
        .uri(format!("http://127.0.0.1{path}"))
        .header("host", "127.0.0.1");
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    Ok(builder.body(Full::new(Bytes::from(body)))?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use http_body_util::Empty;

    fn env(allow: &str) -> Vec<(String, String)> {
        vec![
            ("MCP_OUTBOUND_ALLOW".to_owned(), allow.to_owned()),
            ("OTHER".to_owned(), "http://elsewhere.test".to_owned()),
        ]
    }

    #[test]
    fn an_exchange_request_is_one_buffer() {
        let fields = [
            ("host", &b"127.0.0.1:8788"[..]),
            ("bad:name", &b"x"[..]),
            ("bad\nname", &b"x"[..]),
            ("x-lf", &b"a\nb"[..]),
            ("x-latin1", &b"caf\xe9"[..]),
            ("x-utf8", "café".as_bytes()),
            ("x-empty", &b""[..]),
            ("mcp-method", &b"tasks/get"[..]),
        ];
        let r = ExchangeRequest::new("POST", "/mcp", fields, b"{\"a\":\n1}".to_vec()).unwrap();
        assert_eq!(r.body_len, 8);
        assert_eq!(
            String::from_utf8(r.data.clone()).unwrap(),
            "{\"a\":\n1}POST /mcp\nhost:127.0.0.1:8788\nx-latin1:caf\u{fffd}\n\
             x-utf8:café\nx-empty:\nmcp-method:tasks/get\n"
        );
        assert_eq!(r.into_body(), b"{\"a\":\n1}");
        let empty = ExchangeRequest::new("GET", "/", [], Vec::new()).unwrap();
        assert_eq!((empty.body_len, &empty.data[..]), (0, &b"GET /\n"[..]));
        for (method, path) in [("PO ST", "/"), ("POST\n", "/"), ("POST", "/a\nb")] {
            assert!(
                ExchangeRequest::new(method, path, [], Vec::new()).is_none(),
                "{method:?} {path:?}"
            );
        }
    }

    #[test]
    fn an_exchange_response_is_its_body_then_its_fields() {
        let r = ExchangeResponse {
            status: 200,
            body_len: 4,
            data: b"a:b\ncontent-type:application/json\nno colon\nx-empty:\nx:1:2\n".to_vec(),
        };
        assert_eq!(r.body(), b"a:b\n");
        assert_eq!(
            r.headers(),
            [
                ("content-type".to_owned(), "application/json".to_owned()),
                ("x-empty".to_owned(), String::new()),
                ("x".to_owned(), "1:2".to_owned()),
            ]
        );
        assert_eq!(r.into_body(), b"a:b\n");
        let bare = ExchangeResponse {
            status: 204,
            body_len: 0,
            data: Vec::new(),
        };
        assert_eq!((bare.body(), bare.headers().len()), (&b""[..], 0));
    }

    #[test]
    fn the_allow_list_is_read_like_the_core_reads_it() {
        assert_eq!(
            allowed_origins(&env(
                " HTTP://127.0.0.1:9000/x , https://api.test:443, junk"
            )),
            ["http://127.0.0.1:9000", "https://api.test"]
        );
        assert!(allowed_origins(&[]).is_empty());
    }

    #[tokio::test]
    async fn the_host_refuses_origins_off_the_list_before_connecting() {
        let progress = Arc::new(AtomicU64::new(0));
        let mut hooks = Outgoing {
            allow: Arc::new(allowed_origins(&env("http://127.0.0.1:9"))),
            progress: progress.clone(),
        };
        for uri in [
            "http://127.0.0.1:10/x",
            "https://127.0.0.1:9/",
            "http://user@127.0.0.1:9/",
        ] {
            let body: WasiBody = Empty::<Bytes>::new()
                .map_err(|never| match never {})
                .boxed_unsync();
            let request = hyper::Request::get(uri).body(body).unwrap();
            let sent = Box::into_pin(hooks.send_request(request, None, Box::new(async { Ok(()) })));
            assert!(
                matches!(
                    sent.await,
                    Err(wasmtime_wasi_http::Error::HttpRequestDenied)
                ),
                "{uri}"
            );
        }
        assert_eq!(progress.load(Ordering::Relaxed), 0, "nothing was sent");
    }
}
