//! Streamable HTTP as a transport-agnostic function: (method, path, headers,
//! body) in, (status, headers, body or an event stream) out. Adapters only
//! translate their platform's request and response types.
//!
//! Rules: POST only (405 otherwise), `Origin` checked against an allow-list
//! (403), bodies bounded (413), JSON only (415), the standard MCP headers
//! must mirror the body (400 with -32020), notifications get 202 with no
//! body, and `subscriptions/listen` answers with an SSE stream.

use std::collections::VecDeque;

use crate::auth::AuthError;
use crate::error::RpcError;
use crate::limits::trim_ows;
use crate::protocol::jsonrpc::{Id, error_bytes};
use crate::server::{Mirror, Reply, RequestContext, Server, Trace};
use crate::store::Store;
use crate::tasks::subscription::Subscription;
use crate::time::Millis;

/// An HTTP request as the adapter received it.
#[derive(Clone, Copy, Debug)]
pub struct HttpRequest<'a> {
    pub method: &'a str,
    /// The path, without the query string.
    pub path: &'a str,
    /// Header names in any case; repeated headers as repeated pairs (see
    /// [`header_refs`] for headers held as owned strings).
    pub headers: &'a [(&'a str, &'a str)],
    pub body: &'a [u8],
}

impl<'a> HttpRequest<'a> {
    /// Every value of a header, by case-insensitive name.
    pub fn header_values<'n>(&self, name: &'n str) -> impl Iterator<Item = &'a str> + use<'a, 'n> {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }

    /// The first value of a header.
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.header_values(name).next()
    }
}

/// What goes back to the client.
#[derive(Debug)]
pub enum HttpBody {
    Empty,
    Bytes(Vec<u8>),
    /// A `text/event-stream`; drive it with [`EventStream::next`].
    Events(EventStream),
}

#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: HttpBody,
    /// What the request was, for the adapter's log line.
    pub trace: Trace,
}

impl HttpResponse {
    /// A JSON body with `status`.
    pub fn json(status: u16, body: Vec<u8>) -> Self {
        HttpResponse {
            status,
            headers: vec![("content-type", "application/json".to_owned())],
            body: HttpBody::Bytes(body),
            trace: Trace::default(),
        }
    }

    /// A `text/event-stream` response driven by `events`.
    pub fn event_stream(events: EventStream) -> Self {
        HttpResponse {
            status: 200,
            headers: vec![
                ("content-type", "text/event-stream".to_owned()),
                ("cache-control", "no-cache".to_owned()),
                ("x-accel-buffering", "no".to_owned()),
            ],
            body: HttpBody::Events(events),
            trace: Trace::default(),
        }
    }

    /// The JSON-RPC error `error` as a JSON body with `status`, answering
    /// `id` (`None` when the request's id is unknown: it was not read, or
    /// could not be).
    pub(crate) fn rpc_error(status: u16, id: Option<&Id>, error: &RpcError) -> Self {
        HttpResponse::json(status, error_bytes(id, error))
    }

    /// The body as bytes (empty for streams), for tests and simple hosts.
    pub fn body_bytes(&self) -> &[u8] {
        match &self.body {
            HttpBody::Bytes(b) => b,
            _ => &[],
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Borrows headers held as owned strings, for [`HttpRequest::headers`].
///
/// ```
/// use mcp_tasks_edge::http::header_refs;
///
/// let owned = vec![("Mcp-Method".to_owned(), "tasks/get".to_owned())];
/// assert_eq!(header_refs(&owned), [("Mcp-Method", "tasks/get")]);
/// ```
pub fn header_refs(headers: &[(String, String)]) -> Vec<(&str, &str)> {
    headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect()
}

/// The header fields of a block of `name:value` lines, each ended by a
/// line feed (the form the component's `exchange` export receives): a line
/// without a `:` is not a field and is left out, and the value is the rest
/// of the line after the first `:`. The colons and line feeds are looked
/// for eight bytes at a time: on wasm, splitting by lines and then by
/// colons (a `memchr` started for every few bytes) or a byte loop cost
/// several times as much.
#[cfg(any(test, target_os = "wasi"))]
pub(crate) fn header_block(block: &str) -> Vec<(&str, &str)> {
    let bytes = block.as_bytes();
    let mut pairs = Vec::with_capacity(16);
    let (mut start, mut colon, mut i) = (0, None, 0);
    while let Some(j) = crate::limits::first_of(bytes, i, b':', b'\n') {
        if bytes.get(j) == Some(&b'\n') {
            if let Some(pair) = colon.and_then(|c| field(block, start, c, j)) {
                pairs.push(pair);
            }
            (start, colon) = (j + 1, None);
        } else if colon.is_none() {
            colon = Some(j);
        }
        i = j + 1;
    }
    if let Some(pair) = colon.and_then(|c| field(block, start, c, block.len())) {
        pairs.push(pair);
    }
    pairs
}

/// The parts of the component's `exchange` request, one buffer (see the
/// WIT `exchange.request`): the method, the path, the header block and
/// the body. `None` when `body_len` is past the end, or what follows the
/// body is not UTF-8 or does not start with a method, a space, a path and
/// a line feed.
#[cfg(any(test, target_os = "wasi"))]
pub(crate) fn exchange_parts(data: &[u8], body_len: usize) -> Option<(&str, &str, &str, &[u8])> {
    let body = data.get(..body_len)?;
    let head = core::str::from_utf8(data.get(body_len..)?).ok()?;
    let eol = crate::limits::first_byte(head.as_bytes(), 0, b'\n')?;
    let (line, block) = (head.get(..eol)?, head.get(eol + 1..)?);
    let (method, path) = line.split_once(' ')?;
    Some((method, path, block, body))
}

/// Appends the header fields to `out` as the component's `exchange`
/// response carries them (see the WIT `exchange.response`): each as
/// `name:value` and a line feed. A field that cannot be written so (a line
/// feed in it, a `:` in its name), which HTTP does not allow either, is
/// left out.
#[cfg(any(test, target_os = "wasi"))]
pub(crate) fn append_header_lines(out: &mut Vec<u8>, headers: &[(&str, String)]) {
    let room: usize = headers.iter().map(|(n, v)| n.len() + v.len() + 2).sum();
    out.reserve(room);
    for (name, value) in headers {
        let (n, v) = (name.as_bytes(), value.as_bytes());
        if crate::limits::first_of(n, 0, b':', b'\n').is_some()
            || crate::limits::first_byte(v, 0, b'\n').is_some()
        {
            continue;
        }
        out.extend_from_slice(n);
        out.push(b':');
        out.extend_from_slice(v);
        out.push(b'\n');
    }
}

/// The field of the line `start..end` whose first `:` is at `colon`.
#[cfg(any(test, target_os = "wasi"))]
fn field(block: &str, start: usize, colon: usize, end: usize) -> Option<(&str, &str)> {
    Some((block.get(start..colon)?, block.get(colon + 1..end)?))
}

/// Whether `origin` is on the allow-list (`scheme://host:port`, or
/// `scheme://host:*` for any port).
pub fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    allowed.iter().any(|a| match a.strip_suffix(":*") {
        Some(prefix) => {
            origin == prefix
                || origin.strip_prefix(prefix).is_some_and(|rest| {
                    rest.strip_prefix(':').is_some_and(|port| {
                        !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit())
                    })
                })
        }
        None => origin == a,
    })
}

/// Handles one HTTP request: routes it, checks `Origin` and the method,
/// authenticates the caller with the configured [`crate::auth::Auth`], then
/// serves it. This is what adapters call.
pub async fn handle<S: Store>(
    server: &Server<S>,
    req: &HttpRequest<'_>,
    now: Millis,
) -> HttpResponse {
    handle_routed(server, req, now, None).await
}

/// [`handle`], with the request's [`Route`] when the caller has judged it
/// already (see [`route_and_at_once`]).
pub(crate) async fn handle_routed<S: Store>(
    server: &Server<S>,
    req: &HttpRequest<'_>,
    now: Millis,
    route: Option<Route>,
) -> HttpResponse {
    let config = server.config();
    if let Some(jwt) = config.auth.jwt()
        && is_metadata_path(req.path, &config.endpoint_path)
    {
        return match req.method {
            "GET" | "HEAD" => {
                HttpResponse::json(200, serde_json::to_vec(&jwt.metadata()).unwrap_or_default())
            }
            _ => method_not_allowed("GET"),
        };
    }
    if let Some(refused) = check_head(config, req.method, req.path, req.headers) {
        return refused;
    }
    match config
        .auth
        .authenticate_cached(
            req.header_values("authorization"),
            now,
            server.verifier(),
            &server.verifications().tokens,
        )
        .await
    {
        Ok(owner) => serve_checked(server, req, &RequestContext { owner, now }, route).await,
        Err(AuthError::NotConfigured) => HttpResponse::rpc_error(
            503,
            None,
            &RpcError::internal(
                "Authentication is not configured on this server, so it serves no requests.",
            ),
        ),
        Err(e) => unauthorized(config, e),
    }
}

fn is_metadata_path(path: &str, endpoint: &str) -> bool {
    path.strip_prefix("/.well-known/oauth-protected-resource")
        .is_some_and(|rest| rest.is_empty() || rest == endpoint)
}

/// 401 (400 for a malformed request) with the RFC 9728 pointer to this
/// resource's metadata, and the error code RFC 6750 §3.1 gives it.
fn unauthorized(config: &crate::config::Config, e: AuthError) -> HttpResponse {
    let metadata = config
        .auth
        .jwt()
        .map(|j| j.metadata_url())
        .unwrap_or_default();
    let (status, challenge, message, reason) = match e {
        AuthError::InvalidToken(reason) => (
            401,
            format!("Bearer resource_metadata=\"{metadata}\", error=\"invalid_token\""),
            "Unauthorized: the bearer token is not valid for this server.",
            reason,
        ),
        AuthError::Malformed(reason) => (
            400,
            format!("Bearer resource_metadata=\"{metadata}\", error=\"invalid_request\""),
            "Bad request: send one Authorization header with one bearer token.",
            reason,
        ),
        AuthError::NotBearer => (
            401,
            format!("Bearer resource_metadata=\"{metadata}\""),
            "Unauthorized: a bearer token is required.",
            "not a Bearer credential",
        ),
        AuthError::MissingToken | AuthError::NotConfigured => (
            401,
            format!("Bearer resource_metadata=\"{metadata}\""),
            "Unauthorized: a bearer token is required.",
            "missing token",
        ),
    };
    let mut r = HttpResponse::rpc_error(status, None, &RpcError::invalid_request(message));
    r.headers.push(("www-authenticate", challenge));
    r.trace.auth = Some(reason);
    r
}

fn not_found() -> HttpResponse {
    HttpResponse {
        status: 404,
        headers: Vec::new(),
        body: HttpBody::Empty,
        trace: Trace::default(),
    }
}

fn method_not_allowed(allow: &str) -> HttpResponse {
    HttpResponse {
        status: 405,
        headers: vec![("allow", allow.to_owned())],
        body: HttpBody::Empty,
        trace: Trace::default(),
    }
}

/// The refusals an adapter can decide from a request's head alone, before
/// it reads a byte of the body: a wrong path (404), a disallowed `Origin`
/// (403), a method other than POST (405), a `Content-Length` over the limit
/// (413), a non-loopback `Host` under `insecure-local` (403), and no
/// `Authorization` header when tokens are required (401). [`handle`]
/// applies the same rules again with the body; the token itself is
/// verified there.
///
/// ```
/// use mcp_tasks_edge::config::Config;
/// use mcp_tasks_edge::http::check_head;
/// let config = Config::default();
/// let headers = [("content-length", "104857600")];
/// let refused = check_head(&config, "POST", "/mcp", &headers).unwrap();
/// assert_eq!(refused.status, 413);
/// assert_eq!(check_head(&config, "POST", "/elsewhere", &[]).unwrap().status, 404);
/// ```
pub fn check_head(
    config: &crate::config::Config,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Option<HttpResponse> {
    if config.auth.jwt().is_some() && is_metadata_path(path, &config.endpoint_path) {
        return None;
    }
    let req = HttpRequest {
        method,
        path,
        headers,
        body: &[],
    };
    if let Some(refused) = preflight(config, &req) {
        return Some(refused);
    }
    if let Some(refused) = loopback_only(config, headers) {
        return Some(refused);
    }
    let declared = req
        .header("content-length")
        .and_then(|v| trim_ows(v).parse::<u64>().ok());
    if declared.is_some_and(|n| n > config.max_body_bytes as u64) {
        return Some(too_large());
    }
    if config.auth.jwt().is_some() && req.header("authorization").is_none() {
        return Some(unauthorized(config, AuthError::MissingToken));
    }
    None
}

fn too_large() -> HttpResponse {
    HttpResponse::rpc_error(
        413,
        None,
        &RpcError::invalid_request("The request body is too large."),
    )
}

/// Under `insecure-local`, a request whose `Host` is not a loopback name or
/// address is refused (403): a server without credentials never answers a
/// name that reaches it from elsewhere.
fn loopback_only(config: &crate::config::Config, headers: &[(&str, &str)]) -> Option<HttpResponse> {
    if !config.auth.is_insecure() {
        return None;
    }
    let mut hosts = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map(|(_, v)| *v);
    let ok = match (hosts.next(), hosts.next()) {
        (Some(host), None) => is_loopback_host(host),
        _ => false,
    };
    (!ok).then(|| {
        let why =
            "MCP_AUTH=insecure-local serves loopback hosts only (localhost, 127.0.0.0/8, [::1]).";
        HttpResponse::rpc_error(403, None, &RpcError::invalid_request(why))
    })
}

/// Whether a `Host` header names a loopback host: `localhost` (or a name
/// under `.localhost`), an address in 127.0.0.0/8, or `[::1]`, with an
/// optional port.
pub fn is_loopback_host(host: &str) -> bool {
    let host = trim_ows(host);
    if let Some(rest) = host.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((addr, port)) if port.is_empty() || valid_port(port) => addr == "::1",
            _ => false,
        };
    }
    let Some(name) = without_port(host) else {
        return false;
    };
    const SUFFIX: &[u8] = b".localhost";
    let bytes = name.as_bytes();
    let under_localhost = bytes
        .len()
        .checked_sub(SUFFIX.len())
        .and_then(|start| bytes.get(start..))
        .is_some_and(|tail| tail.eq_ignore_ascii_case(SUFFIX));
    if under_localhost || name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    is_loopback_ipv4(bytes)
}

/// Whether `name` is an address in 127.0.0.0/8 in dotted-decimal form:
/// four parts of one to three digits, each at most 255, the first `127`.
fn is_loopback_ipv4(name: &[u8]) -> bool {
    let mut octets = 0;
    for o in name.split(|&b| b == b'.') {
        let octet = (1..=3).contains(&o.len())
            && o.iter().all(u8::is_ascii_digit)
            && o.iter().fold(0u16, |v, &d| v * 10 + u16::from(d - b'0')) <= 255;
        if !octet || (octets == 0 && o != b"127") {
            return false;
        }
        octets += 1;
    }
    octets == 4
}

/// `host` without its `:port`; `None` if what follows its last `:` is not
/// a port. The `:` is found by bytes (`str::rsplit_once` searches from the
/// end through `memrchr`, which costs more than a host name's few bytes);
/// it is ASCII, so both sides of it are character boundaries.
fn without_port(host: &str) -> Option<&str> {
    match host.bytes().rposition(|b| b == b':') {
        Some(colon) => {
            let (name, port) = (host.get(..colon)?, host.get(colon + 1..)?);
            port_digits(port).then_some(name)
        }
        None => Some(host),
    }
}

fn valid_port(colon_port: &str) -> bool {
    colon_port.strip_prefix(':').is_some_and(port_digits)
}

fn port_digits(p: &str) -> bool {
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

/// Checks that need neither the caller nor the body: path, `Origin`
/// (403 for a present, disallowed origin) and method (POST only).
fn preflight(config: &crate::config::Config, req: &HttpRequest<'_>) -> Option<HttpResponse> {
    if req.path != config.endpoint_path {
        return Some(not_found());
    }
    if let Some(origin) = req.header("origin")
        && !origin_allowed(trim_ows(origin), &config.allowed_origins)
    {
        return Some(HttpResponse::rpc_error(
            403,
            None,
            &RpcError::invalid_request("The request's Origin is not allowed."),
        ));
    }
    if req.method != "POST" {
        return Some(method_not_allowed("POST"));
    }
    None
}

/// Serves one HTTP request for an already authenticated caller.
pub async fn serve<S: Store>(
    server: &Server<S>,
    req: &HttpRequest<'_>,
    ctx: &RequestContext,
) -> HttpResponse {
    match preflight(server.config(), req) {
        Some(refused) => refused,
        None => serve_checked(server, req, ctx, None).await,
    }
}

async fn serve_checked<S: Store>(
    server: &Server<S>,
    req: &HttpRequest<'_>,
    ctx: &RequestContext,
    route: Option<Route>,
) -> HttpResponse {
    let config = server.config();
    if req.body.len() > config.max_body_bytes {
        return too_large();
    }
    if let Some(ct) = req.header("content-type") {
        let media = match crate::limits::first_byte(ct.as_bytes(), 0, b';') {
            // Before an ASCII byte: a character boundary.
            Some(semicolon) => ct.get(..semicolon).unwrap_or(ct),
            None => ct,
        };
        let media = trim_ows(media);
        if !media.eq_ignore_ascii_case("application/json") {
            // The id is echoed if the body has one to read.
            let id = crate::protocol::jsonrpc::id_of(req.body);
            return HttpResponse::rpc_error(
                415,
                id.as_ref(),
                &RpcError::invalid_request("The body must be application/json."),
            );
        }
    }
    // One pass reads the envelope and checks the shape for nearly every
    // message; the shape check and serde's reading take the rest.
    let scanned = std::str::from_utf8(req.body)
        .ok()
        .and_then(|text| crate::protocol::scan::members_within(text, &config.limits));
    if scanned.is_none()
        && let Err(why) = crate::limits::check_shape(req.body, &config.limits)
    {
        // Past a limit, but the id is still the client's to match.
        let id = crate::protocol::jsonrpc::id_of(req.body);
        let error = RpcError::invalid_request(&why);
        return HttpResponse::rpc_error(400, id.as_ref(), &error);
    }
    if route.unwrap_or_else(|| Route::of(req)) == Route::Legacy {
        #[cfg(feature = "legacy")]
        return crate::legacy::serve_scanned(server, req, ctx, scanned).await;
    }
    let mirror = Mirror::of_headers(req.headers);
    let mut trace = Trace::default();
    let parsed = match scanned {
        Some(members) => crate::protocol::jsonrpc::message_of(members),
        None => crate::protocol::jsonrpc::parse_message(req.body),
    };
    let reply = server.handle_parsed(parsed, &mirror, ctx, &mut trace).await;
    let mut response = match reply {
        Reply::Accepted => HttpResponse {
            status: 202,
            headers: Vec::new(),
            body: HttpBody::Empty,
            trace: Trace::default(),
        },
        Reply::Json { status, body } => {
            let mut r = HttpResponse::json(status, body);
            if status == 429 {
                let ms = retry_after_ms(&r).unwrap_or(config.poll_interval_ms);
                let secs = ms.div_ceil(1000).max(1);
                r.headers.push(("retry-after", secs.to_string()));
            }
            r
        }
        Reply::Listen(sub) => HttpResponse::event_stream(EventStream::new(sub)),
        Reply::Frames(frames) => HttpResponse::event_stream(EventStream::frames(frames)),
    };
    response.trace = trace;
    response
}

/// Whether the answer to `req` is complete when [`handle`] returns (JSON,
/// or SSE frames all known by then), judged before running it: by its
/// headers, and for a 2025-11-25 request by its method. A host may then
/// take it through a one-call export (the component's `exchange`) and is
/// sure never to run it twice; `false` only says it may stream (a
/// `subscriptions/listen`, or a legacy call held open).
pub fn answers_at_once(req: &HttpRequest<'_>) -> bool {
    route_and_at_once(req).1
}

/// [`answers_at_once`] for a request the core answers: all but a
/// `subscriptions/listen`, by its `Mcp-Method` header.
pub(crate) fn core_answers_at_once(req: &HttpRequest<'_>) -> bool {
    // A body that says otherwise fails the header check, at once. The
    // header is read as that check reads it: `=?base64?…?=` decoded.
    req.header("mcp-method")
        .map(trim_ows)
        .and_then(crate::server::decode_sentinel)
        .is_none_or(|m| m != crate::protocol::methods::SUBSCRIPTIONS_LISTEN)
}

/// The request's [`Route`], and [`answers_at_once`] for it, from one
/// reading of a 2025-11-25 request's body instead of two (the component's
/// `exchange` asks both of every request, then passes the route on to
/// [`handle_routed`]).
pub(crate) fn route_and_at_once(req: &HttpRequest<'_>) -> (Route, bool) {
    #[cfg(feature = "legacy")]
    if let Some(at_once) = crate::legacy::judge(req) {
        return (Route::Legacy, at_once);
    }
    (Route::Core, core_answers_at_once(req))
}

/// Which side of the server answers a request: the 2026-07-28 core, or the
/// 2025-11-25 adapter ([`crate::legacy::claims`] says which, from the
/// headers and the body; without the `legacy` feature, always the core).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    Core,
    Legacy,
}

impl Route {
    pub(crate) fn of(req: &HttpRequest<'_>) -> Route {
        #[cfg(feature = "legacy")]
        if crate::legacy::claims(req) {
            return Route::Legacy;
        }
        #[cfg(not(feature = "legacy"))]
        let _ = req;
        Route::Core
    }
}

/// The wait a 429's error names (`error.data.retryAfterMs`, the creation
/// rate's), if any.
fn retry_after_ms(r: &HttpResponse) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Body {
        error: Error,
    }
    #[derive(serde::Deserialize)]
    struct Error {
        data: Data,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Data {
        retry_after_ms: u64,
    }
    crate::json::from_slice::<Body>(r.body_bytes())
        .ok()
        .map(|b| b.error.data.retry_after_ms)
}

/// One SSE event carrying a JSON-RPC message on a single `data:` line.
pub fn sse_event(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(json);
    out.extend_from_slice(b"\n\n");
    out
}

/// An SSE comment that keeps idle connections open; clients ignore it.
pub const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";
const KEEP_ALIVE_MS: i64 = 15_000;

/// What the adapter does next with a listen stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Write these bytes to the response.
    Send(Vec<u8>),
    /// Sleep this long, then ask again.
    Wait(u64),
    /// Close the response.
    End,
}

#[derive(Debug, PartialEq, Eq)]
enum StreamState {
    Acknowledge,
    Polling,
    Closing,
    Done,
}

/// A streamed response, pulled by the adapter: a `subscriptions/listen`
/// stream, or a 2025-11-25 client's response stream (see
/// [`crate::legacy`]). The adapter loops on [`EventStream::next`] until
/// [`Next::End`] or until the client disconnects (which ends the stream).
#[derive(Debug)]
pub struct EventStream {
    source: Source,
    last_sent: Option<Millis>,
    /// The wait a keep-alive was sent in place of: the next call returns
    /// it, so that the stream still waits (and an adapter still checks its
    /// budget) before it polls again.
    owed_wait: Option<u64>,
}

#[derive(Debug)]
enum Source {
    Listen(ListenStream),
    /// Messages all known in advance.
    Frames(VecDeque<Vec<u8>>),
    #[cfg(feature = "legacy")]
    Legacy(Box<crate::legacy::Stream>),
    /// A 2025-03-26 batch's answers: those known now, then each stream's
    /// in turn.
    #[cfg(feature = "legacy")]
    Batch(VecDeque<Vec<u8>>, VecDeque<crate::legacy::Stream>),
}

impl EventStream {
    /// The stream of a `subscriptions/listen` subscription.
    pub fn new(sub: Subscription) -> Self {
        EventStream {
            source: Source::Listen(ListenStream {
                sub: Box::new(sub),
                state: StreamState::Acknowledge,
                pending: VecDeque::new(),
                poll_now: true,
            }),
            last_sent: None,
            owed_wait: None,
        }
    }

    /// A stream of messages all known in advance (one SSE event each).
    pub fn frames(frames: Vec<Vec<u8>>) -> Self {
        EventStream {
            source: Source::Frames(frames.iter().map(|f| sse_event(f)).collect()),
            last_sent: None,
            owed_wait: None,
        }
    }

    /// The whole stream as one body, if every frame is known already (a
    /// call's progress and result); otherwise the stream as it was.
    pub fn complete(self) -> Result<Vec<u8>, EventStream> {
        match self.source {
            Source::Frames(frames) => Ok(frames.into_iter().flatten().collect()),
            source => Err(EventStream { source, ..self }),
        }
    }

    #[cfg(feature = "legacy")]
    pub(crate) fn batch(frames: Vec<Vec<u8>>, streams: Vec<crate::legacy::Stream>) -> Self {
        EventStream {
            source: Source::Batch(
                frames.iter().map(|f| sse_event(f)).collect(),
                streams.into(),
            ),
            last_sent: None,
            owed_wait: None,
        }
    }

    #[cfg(feature = "legacy")]
    pub(crate) fn legacy(stream: crate::legacy::Stream) -> Self {
        EventStream {
            source: Source::Legacy(Box::new(stream)),
            last_sent: None,
            owed_wait: None,
        }
    }

    /// Makes the stream end gracefully by `at` at the latest: once `at` has
    /// passed, the next poll is the last one and the stream's closing
    /// message follows. Adapters use it to bound what one stream costs (for
    /// example the subrequests a Worker may make per request).
    pub fn end_by(&mut self, at: Millis) {
        match &mut self.source {
            Source::Listen(l) => l.sub.ends_at = l.sub.ends_at.min(at),
            Source::Frames(_) => {}
            #[cfg(feature = "legacy")]
            Source::Legacy(l) => l.end_by(at),
            #[cfg(feature = "legacy")]
            Source::Batch(_, streams) => streams.iter_mut().for_each(|l| l.end_by(at)),
        }
    }

    /// Store operations the stream makes after its last poll, to give back
    /// its slot in the caller's open-stream quota (a read and a write), so
    /// an adapter with a budget can leave room for them.
    pub fn closing_cost(&self) -> u32 {
        match &self.source {
            Source::Listen(l) if l.sub.slot.is_some() => 2,
            _ => 0,
        }
    }

    /// Polls the stream makes once it is told to end ([`Self::end_by`]):
    /// one, or one per stream still open in a 2025-03-26 batch, which end
    /// in turn, so an adapter with a budget can leave room for them.
    pub fn last_polls(&self) -> u32 {
        match &self.source {
            #[cfg(feature = "legacy")]
            Source::Batch(_, streams) => u32::try_from(streams.len()).unwrap_or(u32::MAX).max(1),
            _ => 1,
        }
    }

    /// The next thing to do: send a frame, wait, or end.
    pub async fn next<S: Store>(&mut self, server: &Server<S>, now: Millis) -> Next {
        if let Some(ms) = self.owed_wait.take() {
            return Next::Wait(ms);
        }
        let next = match &mut self.source {
            Source::Listen(l) => l.advance(server.store(), now).await,
            Source::Frames(f) => f.pop_front().map_or(Next::End, Next::Send),
            #[cfg(feature = "legacy")]
            Source::Legacy(l) => l.advance(server, now).await,
            #[cfg(feature = "legacy")]
            Source::Batch(frames, streams) => loop {
                if let Some(f) = frames.pop_front() {
                    break Next::Send(f);
                }
                let Some(l) = streams.front_mut() else {
                    break Next::End;
                };
                match l.advance(server, now).await {
                    Next::End => {
                        streams.pop_front();
                    }
                    next => break next,
                }
            },
        };
        match next {
            Next::Send(_) => self.last_sent = Some(now),
            Next::Wait(ms) => {
                // A stream that has sent nothing yet (a held call waiting
                // for its task) counts from its first wait: it is kept
                // alive as long as one that has.
                let since = *self.last_sent.get_or_insert(now);
                if now - since >= KEEP_ALIVE_MS {
                    self.last_sent = Some(now);
                    self.owed_wait = Some(ms);
                    return Next::Send(KEEP_ALIVE.to_vec());
                }
            }
            Next::End => {}
        }
        next
    }
}

/// The `subscriptions/listen` response as a pull-based sequence: the
/// acknowledgement, then task snapshots as they change, then the closing
/// result.
#[derive(Debug)]
struct ListenStream {
    /// Boxed: a response that is not a stream stays small.
    sub: Box<Subscription>,
    state: StreamState,
    pending: VecDeque<Vec<u8>>,
    poll_now: bool,
}

impl ListenStream {
    /// [`Self::step`], keeping the stream's slot in the caller's
    /// open-stream quota: renewed while it runs, given back at the end.
    async fn advance<S: Store>(&mut self, store: &S, now: Millis) -> Next {
        if let Some(slot) = self.sub.slot.as_mut()
            && now >= slot.renew_at
            && !crate::tasks::streams::renew(store, slot, now).await
        {
            // Its lease ran out and other streams took the room: this one
            // ends (with its result, after a last poll), so the caller never
            // holds more streams than its cap.
            self.sub.slot = None;
            self.sub.ends_at = self.sub.ends_at.min(now);
        }
        let next = self.step(store, now).await;
        if next == Next::End
            && let Some(slot) = self.sub.slot.take()
        {
            crate::tasks::streams::close(store, &slot, now).await;
        }
        next
    }

    async fn step<S: Store>(&mut self, store: &S, now: Millis) -> Next {
        loop {
            if let Some(frame) = self.pending.pop_front() {
                return Next::Send(frame);
            }
            match self.state {
                StreamState::Acknowledge => {
                    self.state = StreamState::Polling;
                    return Next::Send(sse_event(&self.sub.acknowledgement()));
                }
                StreamState::Polling if self.poll_now => {
                    self.poll_now = false;
                    match self.sub.poll(store, now).await {
                        Ok(events) => self.pending.extend(events.iter().map(|e| sse_event(e))),
                        Err(_) => {
                            // The store is unavailable: end abruptly so the
                            // client reconnects and resumes by task id.
                            self.state = StreamState::Done;
                            return Next::End;
                        }
                    }
                    if self.sub.finished(now) {
                        self.state = StreamState::Closing;
                    }
                }
                StreamState::Polling => {
                    self.poll_now = true;
                    return Next::Wait(self.sub.poll_interval_ms);
                }
                StreamState::Closing => {
                    self.state = StreamState::Done;
                    return Next::Send(sse_event(&self.sub.closing()));
                }
                StreamState::Done => return Next::End,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::{HeaderValue, mirrored};

    /// What [`header_block`] must agree with: lines, then the first colon.
    fn header_block_by_splits(block: &str) -> Vec<(&str, &str)> {
        block
            .split_terminator('\n')
            .filter_map(|line| line.split_once(':'))
            .collect()
    }

    #[test]
    fn header_blocks() {
        let cases: [(&str, &[(&str, &str)]); 9] = [
            ("", &[]),
            ("\n\n", &[]),
            ("host:a\n", &[("host", "a")]),
            ("host:a", &[("host", "a")]),
            (
                "host:127.0.0.1:8080\nmcp-method:tasks/get\n",
                &[("host", "127.0.0.1:8080"), ("mcp-method", "tasks/get")],
            ),
            ("no colon\nx:\n:y\n", &[("x", ""), ("", "y")]),
            ("a:1\n\nb:2", &[("a", "1"), ("b", "2")]),
            ("é:ü:ß\n", &[("é", "ü:ß")]),
            ("a:1\r\n", &[("a", "1\r")]),
        ];
        for (block, want) in cases {
            assert_eq!(header_block(block), want, "{block:?}");
            assert_eq!(header_block_by_splits(block), want, "{block:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn header_block_agrees_with_splitting(block in "[a:\n é]{0,40}") {
            proptest::prop_assert_eq!(header_block(&block), header_block_by_splits(&block));
        }
    }

    #[test]
    fn an_exchange_request_is_split_at_its_body_and_first_line() {
        let data = b"{\"a\":1}POST /mcp\nhost:x\nmcp-method:tasks/get\n";
        assert_eq!(
            exchange_parts(data, 7),
            Some((
                "POST",
                "/mcp",
                "host:x\nmcp-method:tasks/get\n",
                &b"{\"a\":1}"[..]
            ))
        );
        // No body, no headers.
        assert_eq!(
            exchange_parts(b"GET /\n", 0),
            Some(("GET", "/", "", &b""[..]))
        );
        // A body with line feeds, spaces and bytes that are not UTF-8.
        let mut data = b"a b\n\xff".to_vec();
        data.extend_from_slice(b"POST /p q\nh:v\n");
        assert_eq!(
            exchange_parts(&data, 5),
            Some(("POST", "/p q", "h:v\n", &b"a b\n\xff"[..]))
        );
        for (data, body_len, why) in [
            (&b"POST /mcp\n"[..], 11, "body past the end"),
            (&b"POST /mcp\n"[..], usize::MAX, "body past the end"),
            (&b"POST /mcp"[..], 0, "no line feed"),
            (&b"POST\n"[..], 0, "no space"),
            (&b"POST /\xff\n"[..], 0, "not UTF-8"),
            (&b"\xe2\x82POST /\n"[..], 1, "splits a character"),
        ] {
            assert_eq!(exchange_parts(data, body_len), None, "{why}");
        }
    }

    #[test]
    fn response_headers_are_lines_after_the_body() {
        let mut out = b"body".to_vec();
        append_header_lines(
            &mut out,
            &[
                ("content-type", "application/json".into()),
                ("bad\nname", "v".into()),
                ("bad:name", "v".into()),
                ("x-bad-value", "a\nb".into()),
                ("x-empty", String::new()),
                ("x-colon", "a:b".into()),
            ],
        );
        assert_eq!(
            String::from_utf8_lossy(&out),
            "bodycontent-type:application/json\nx-empty:\nx-colon:a:b\n"
        );
        // What the guest writes, the host's block reader reads back.
        let fields = header_block(std::str::from_utf8(&out[4..]).unwrap());
        assert_eq!(
            fields,
            [
                ("content-type", "application/json"),
                ("x-empty", ""),
                ("x-colon", "a:b")
            ]
        );
    }

    #[test]
    fn loopback_hosts() {
        for host in [
            "localhost",
            "LocalHost:1",
            " 127.0.0.1 ",
            "127.255.0.9:65535",
            "[::1]",
            "[::1]:80",
            "a.b.LOCALHOST",
            ".localhost",
            "127.000.0.1",
        ] {
            assert!(is_loopback_host(host), "{host:?}");
        }
        for host in [
            "",
            ":80",
            "127.0.0",
            "127.0.0.1.1",
            "127.0.0.256",
            "127..0.1",
            "128.0.0.1",
            "127.0.0.1:",
            "127.0.0.1:123456",
            "127.0.0.1:8o",
            "[::1]x",
            "[::1]:",
            "[::2]",
            "localhost.",
            "xlocalhost",
            "::1",
            "127.0.0.1\u{e9}",
            "\u{a0}localhost",
            "localhost\u{b}",
            "\u{2003}127.0.0.1",
            "127.0.0.0001",
            "127.+1.0.1",
            "127.0.0.-1",
            "localhost:80:80",
            "a:127.0.0.1",
            "\u{e9}:80",
            "localhost:\u{e9}",
        ] {
            assert!(!is_loopback_host(host), "{host:?}");
        }
    }

    proptest::proptest! {
        /// The port split by bytes, as `rsplit_once` splits it.
        #[test]
        fn a_port_is_split_as_rsplit_once_splits(
            host in "(localhost|127\\.0\\.0\\.1|[a-z\u{e9}.:0-9]{0,6})(:[0-9\u{e9}a]{0,6}){0,2}"
        ) {
            let by_rsplit = match host.rsplit_once(':') {
                Some((name, port)) if port_digits(port) => Some(name),
                Some(_) => None,
                None => Some(host.as_str()),
            };
            proptest::prop_assert_eq!(without_port(&host), by_rsplit, "{}", host);
        }
    }

    #[test]
    fn origins() {
        let allowed = vec![
            "http://localhost:*".to_owned(),
            "https://app.example".to_owned(),
        ];
        assert!(origin_allowed("http://localhost:8787", &allowed));
        assert!(origin_allowed("http://localhost", &allowed));
        assert!(origin_allowed("https://app.example", &allowed));
        assert!(!origin_allowed("http://localhost.evil.com", &allowed));
        assert!(!origin_allowed("http://localhost:80x", &allowed));
        assert!(!origin_allowed("http://localhost:", &allowed));
        assert!(!origin_allowed("https://app.example.evil", &allowed));
        assert!(!origin_allowed("http://evil.example.com", &allowed));
        assert!(!origin_allowed("null", &allowed));
    }

    #[test]
    fn mirrored_headers() {
        let h = |pairs: &[(&'static str, &'static str)]| pairs.to_vec();
        let headers = h(&[
            ("MCP-METHOD", "  tools/list "),
            ("mcp-name", "a"),
            ("Mcp-Name", "b"),
            ("x", "é"),
        ]);
        let m = Mirror::of_headers(&headers);
        assert_eq!(m.method, HeaderValue::Present("tools/list"));
        assert_eq!(m.name, HeaderValue::Invalid);
        assert_eq!(m.protocol_version, HeaderValue::Absent);
        assert_eq!(mirrored(&headers, "x"), HeaderValue::Invalid);
        // Only spaces and tabs are optional whitespace: other white space
        // (a vertical tab, a no-break space) is part of the value.
        let ows = h(&[("mcp-method", " \ttools/list\t ")]);
        assert_eq!(
            mirrored(&ows, "mcp-method"),
            HeaderValue::Present("tools/list")
        );
        for v in ["\u{b}tools/list", "tools/list\u{a0}", "\u{2003}tools/list"] {
            let headers = vec![("mcp-method", v)];
            assert_eq!(
                mirrored(&headers, "mcp-method"),
                HeaderValue::Invalid,
                "{v:?}"
            );
        }
        // The one pass reads each header as `mirrored` reads it alone.
        let cases = [
            h(&[]),
            h(&[("Mcp-Method", "a"), ("mcp-method", " a\t")]),
            h(&[("mcp-method", "a"), ("mcp-method", "b")]),
            h(&[("mcp-method", "é"), ("mcp-method", "é")]),
            h(&[("mcp-name", "a\u{7f}"), ("mcp-nam3", "x")]),
            h(&[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("mcp-protocol-versio", "x"),
            ]),
            h(&[("mcp-protocol-version", "1"), ("Mcp-Protocol-Version", "2")]),
            h(&[("mcp-methods", "a"), ("xcp-method", "b"), ("mcp-name", "")]),
        ];
        for headers in &cases {
            let m = Mirror::of_headers(headers);
            assert!(m.enforce);
            assert_eq!(m.method, mirrored(headers, "mcp-method"), "{headers:?}");
            assert_eq!(m.name, mirrored(headers, "mcp-name"), "{headers:?}");
            assert_eq!(
                m.protocol_version,
                mirrored(headers, "mcp-protocol-version"),
                "{headers:?}"
            );
        }
    }
}
