//! Outbound HTTP for task steps: the seam ([`Outbound`]) each runtime
//! implements (the Worker with `fetch`, the WASI component with
//! `wasi:http/outgoing-handler`, host tests with [`FakeOutbound`]), and the
//! operator's policy ([`OutboundPolicy`]) that every request passes first.
//!
//! A step reaches it through [`crate::tools::StepContext::fetch`], which
//! checks the allow-list, bounds the timeout by the step's deadline and caps
//! the response body before the tool sees anything.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;

/// A future that may hold platform handles (not `Send`: Workers and WASI
/// guests are single-threaded).
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// An outbound HTTP request.
///
/// ```
/// use mcp_tasks_edge::outbound::OutboundRequest;
/// let req = OutboundRequest::post("http://127.0.0.1:9000/jobs", br#"{"n":1}"#.to_vec())
///     .header("content-type", "application/json")
///     .timeout_ms(2_000);
/// assert_eq!(req.method, "POST");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboundRequest {
    pub method: String,
    /// An absolute `http://` or `https://` URL.
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Longest wait for the whole exchange; the step's deadline bounds it too.
    pub timeout_ms: u64,
}

/// The timeout of a request that sets none.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

impl OutboundRequest {
    /// A request with no headers and no body.
    pub fn new(method: &str, url: &str) -> Self {
        OutboundRequest {
            method: method.to_owned(),
            url: url.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
            timeout_ms: DEFAULT_TIMEOUT_MS,
        }
    }

    pub fn get(url: &str) -> Self {
        Self::new("GET", url)
    }

    pub fn post(url: &str, body: Vec<u8>) -> Self {
        let mut r = Self::new("POST", url);
        r.body = body;
        r
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = ms;
        self
    }
}

/// An outbound HTTP response, its body already read (and capped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboundResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl OutboundResponse {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON. A struct is read from a JSON object only (not from
    /// an array of its fields, which `serde_json` alone would also take).
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, OutboundError> {
        crate::json::from_slice(&self.body).map_err(|e| {
            OutboundError::Failed(format!("the response is not the expected JSON: {e}"))
        })
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// Why an outbound request produced no response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutboundError {
    /// The origin is not on the operator's allow-list (or the URL is not an
    /// absolute http(s) URL).
    NotAllowed(String),
    /// No answer within the timeout (or the step's deadline).
    Timeout,
    /// The response body exceeds the cap.
    TooLarge { limit: usize },
    /// The connection or the exchange failed.
    Failed(String),
}

impl std::fmt::Display for OutboundError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OutboundError::NotAllowed(origin) => write!(
                f,
                "outbound request refused: {origin} is not on the allow-list (MCP_OUTBOUND_ALLOW)"
            ),
            OutboundError::Timeout => f.write_str("outbound request timed out"),
            OutboundError::TooLarge { limit } => {
                write!(f, "outbound response larger than {limit} bytes")
            }
            OutboundError::Failed(why) => write!(f, "outbound request failed: {why}"),
        }
    }
}

impl std::error::Error for OutboundError {}

/// A runtime's outbound HTTP client. Implementations read at most
/// `max_body` bytes of the response body (more is [`OutboundError::TooLarge`])
/// and give up after `request.timeout_ms`.
pub trait Outbound {
    fn send<'a>(
        &'a self,
        request: OutboundRequest,
        max_body: usize,
    ) -> LocalFuture<'a, Result<OutboundResponse, OutboundError>>;

    /// Requests this client may still send, where it is bounded (a
    /// [`Budgeted`] client: a platform that caps the subrequests of one
    /// invocation); `None` where it is not. A tick claims no more tasks
    /// once fewer are left than one of its steps has used.
    fn remaining(&self) -> Option<usize> {
        None
    }
}

impl<T: Outbound + ?Sized> Outbound for std::rc::Rc<T> {
    fn send<'a>(
        &'a self,
        request: OutboundRequest,
        max_body: usize,
    ) -> LocalFuture<'a, Result<OutboundResponse, OutboundError>> {
        (**self).send(request, max_body)
    }

    fn remaining(&self) -> Option<usize> {
        (**self).remaining()
    }
}

/// A client that sends at most `budget` requests through `inner` and
/// refuses the rest: a Worker invocation's subrequest cap, met by the tick
/// claiming no task it may not have room for, rather than by the
/// platform's own error in the middle of a step.
///
/// ```
/// use mcp_tasks_edge::outbound::{Budgeted, NoOutbound, Outbound};
/// let client = Budgeted::new(NoOutbound, 900);
/// assert_eq!(client.remaining(), Some(900));
/// ```
pub struct Budgeted<O> {
    inner: O,
    budget: usize,
    sent: std::cell::Cell<usize>,
}

impl<O: Outbound> Budgeted<O> {
    pub fn new(inner: O, budget: usize) -> Self {
        Budgeted {
            inner,
            budget,
            sent: std::cell::Cell::new(0),
        }
    }
}

impl<O: Outbound> Outbound for Budgeted<O> {
    fn send<'a>(
        &'a self,
        request: OutboundRequest,
        max_body: usize,
    ) -> LocalFuture<'a, Result<OutboundResponse, OutboundError>> {
        let sent = self.sent.get();
        if sent >= self.budget {
            return Box::pin(std::future::ready(Err(OutboundError::Failed(format!(
                "this invocation has sent its {} outbound requests",
                self.budget
            )))));
        }
        self.sent.set(sent + 1);
        self.inner.send(request, max_body)
    }

    fn remaining(&self) -> Option<usize> {
        let left = self.budget.saturating_sub(self.sent.get());
        Some(self.inner.remaining().map_or(left, |inner| inner.min(left)))
    }
}

/// Refuses every request: the runtime offers no outbound HTTP.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoOutbound;

impl Outbound for NoOutbound {
    fn send<'a>(
        &'a self,
        _request: OutboundRequest,
        _max_body: usize,
    ) -> LocalFuture<'a, Result<OutboundResponse, OutboundError>> {
        Box::pin(std::future::ready(Err(OutboundError::Failed(
            "this runtime has no outbound HTTP".to_owned(),
        ))))
    }
}

/// The origin (`scheme://host[:port]`, lower case, default port omitted) of
/// an absolute http(s) URL.
pub fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => "80",
        "https" => "443",
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    let authority = authority.to_ascii_lowercase();
    let (host, port) = if authority.starts_with('[') {
        let (host, rest) = authority.split_at(authority.find(']')? + 1);
        match rest.strip_prefix(':') {
            Some(p) => (host, p),
            None if rest.is_empty() => (host, default_port),
            None => return None,
        }
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h, p),
            None => (authority.as_str(), default_port),
        }
    };
    if host.is_empty() || port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if port == default_port {
        Some(format!("{scheme}://{host}"))
    } else {
        Some(format!("{scheme}://{host}:{port}"))
    }
}

/// The parts of an absolute http(s) URL that a request line needs: the
/// scheme (`http` or `https`), the authority, and the path with its query
/// (at least `/`; a fragment is dropped).
pub fn url_parts(url: &str) -> Option<(String, String, String)> {
    origin_of(url)?;
    let (scheme, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let tail = tail.split('#').next().unwrap_or_default();
    let path = if tail.starts_with('/') {
        tail.to_owned()
    } else {
        format!("/{tail}")
    };
    Some((scheme.to_ascii_lowercase(), authority.to_owned(), path))
}

/// The operator's outbound rules: which origins steps may call, and the
/// largest response body read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboundPolicy {
    /// Allowed origins, normalised by [`origin_of`]. Empty: nothing allowed.
    pub allow: Vec<String>,
    pub max_response_bytes: usize,
}

impl Default for OutboundPolicy {
    fn default() -> Self {
        OutboundPolicy {
            allow: Vec::new(),
            max_response_bytes: 1024 * 1024,
        }
    }
}

impl OutboundPolicy {
    /// A policy allowing `origins` (each an absolute URL or origin; entries
    /// that are not are returned as the error).
    pub fn allowing(origins: &[String], max_response_bytes: usize) -> Result<Self, String> {
        let mut allow = Vec::with_capacity(origins.len());
        for o in origins {
            match origin_of(o) {
                Some(n) => allow.push(n),
                None => return Err(o.clone()),
            }
        }
        Ok(OutboundPolicy {
            allow,
            max_response_bytes,
        })
    }

    /// `Ok` with the URL's origin if it may be called.
    pub fn check(&self, url: &str) -> Result<String, OutboundError> {
        let origin = origin_of(url).ok_or_else(|| {
            OutboundError::NotAllowed(format!(
                "{:?} (not an absolute http(s) URL)",
                crate::error::truncate(url, 80)
            ))
        })?;
        if self.allow.contains(&origin) {
            Ok(origin)
        } else {
            Err(OutboundError::NotAllowed(origin))
        }
    }
}

/// One request a [`FakeOutbound`] received.
pub type Recorded = OutboundRequest;

type Responder = dyn Fn(&OutboundRequest) -> Result<OutboundResponse, OutboundError>;

/// An in-process outbound client for host tests: answers with a closure and
/// records every request it was sent.
///
/// ```
/// use mcp_tasks_edge::outbound::{FakeOutbound, Outbound, OutboundRequest, OutboundResponse};
/// let fake = FakeOutbound::new(|_req| Ok(OutboundResponse { status: 200, headers: vec![], body: b"ok".to_vec() }));
/// let resp = mcp_tasks_edge::block_on(fake.send(OutboundRequest::get("http://api.test/x"), 1024)).unwrap();
/// assert_eq!(resp.body, b"ok");
/// assert_eq!(fake.requests().len(), 1);
/// ```
pub struct FakeOutbound {
    respond: Box<Responder>,
    seen: RefCell<Vec<Recorded>>,
}

impl FakeOutbound {
    pub fn new(
        respond: impl Fn(&OutboundRequest) -> Result<OutboundResponse, OutboundError> + 'static,
    ) -> Self {
        FakeOutbound {
            respond: Box::new(respond),
            seen: RefCell::new(Vec::new()),
        }
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.seen.borrow().clone()
    }
}

impl Outbound for FakeOutbound {
    fn send<'a>(
        &'a self,
        request: OutboundRequest,
        max_body: usize,
    ) -> LocalFuture<'a, Result<OutboundResponse, OutboundError>> {
        let answer = (self.respond)(&request);
        self.seen.borrow_mut().push(request);
        let answer = match answer {
            Ok(r) if r.body.len() > max_body => Err(OutboundError::TooLarge { limit: max_body }),
            other => other,
        };
        Box::pin(std::future::ready(answer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_normalised() {
        assert_eq!(
            origin_of("HTTP://Example.COM:80/a?b").as_deref(),
            Some("http://example.com")
        );
        assert_eq!(
            origin_of("https://api.test:8443").as_deref(),
            Some("https://api.test:8443")
        );
        assert_eq!(
            origin_of("http://127.0.0.1:9000/jobs/1").as_deref(),
            Some("http://127.0.0.1:9000")
        );
        assert_eq!(
            origin_of("http://[::1]:9000/x").as_deref(),
            Some("http://[::1]:9000")
        );
        assert_eq!(origin_of("http://[::1]/x").as_deref(), Some("http://[::1]"));
        for bad in [
            "ftp://x",
            "http://",
            "//x",
            "x",
            "http://user@host/",
            "http://h:abc/",
            "http://:80/",
        ] {
            assert_eq!(origin_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn urls_split_into_request_parts() {
        let parts = |u| url_parts(u).map(|(s, a, p)| format!("{s} {a} {p}"));
        assert_eq!(
            parts("HTTP://127.0.0.1:9000/jobs/1?x=2#frag").as_deref(),
            Some("http 127.0.0.1:9000 /jobs/1?x=2")
        );
        assert_eq!(
            parts("https://api.test").as_deref(),
            Some("https api.test /")
        );
        assert_eq!(
            parts("https://api.test?q=1").as_deref(),
            Some("https api.test /?q=1")
        );
        assert_eq!(parts("ftp://api.test/"), None);
    }

    #[test]
    fn the_policy_allows_listed_origins_only() {
        let p = OutboundPolicy::allowing(&["http://127.0.0.1:9000".to_owned()], 10).unwrap();
        assert!(p.check("http://127.0.0.1:9000/jobs").is_ok());
        assert_eq!(
            p.check("http://127.0.0.1:9001/jobs"),
            Err(OutboundError::NotAllowed("http://127.0.0.1:9001".into()))
        );
        assert!(matches!(
            p.check("http://127.0.0.1:9000@evil.test/"),
            Err(OutboundError::NotAllowed(_))
        ));
        assert!(p.check("file:///etc/passwd").is_err());
        assert!(
            OutboundPolicy::default()
                .check("http://127.0.0.1:9000")
                .is_err()
        );
        assert_eq!(
            OutboundPolicy::allowing(&["not a url".to_owned()], 1),
            Err("not a url".to_owned())
        );
    }
}
