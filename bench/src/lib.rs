//! Shared pieces of the benchmark and fault tools: a minimal keep-alive
//! MCP client over HTTP/1.1.

use std::collections::BTreeMap;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use mcp_tasks_edge::testing;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use tokio::net::TcpStream;

/// A request with the `_meta` of a client that supports tasks and form
/// elicitation (the library's test support), naming this load client.
pub fn message(id: u64, method: &str, params: Value) -> Value {
    let mut params = params;
    let mut meta = testing::meta(testing::full_capabilities());
    meta["io.modelcontextprotocol/clientInfo"] =
        json!({"name": "mcp-tasks-edge-load", "version": "0.1.0"});
    params["_meta"] = meta;
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// What the load client reads of a JSON-RPC reply; the rest is checked to
/// be JSON and skipped.
#[derive(Deserialize, Default)]
pub struct Reply {
    #[serde(default)]
    pub id: Option<u64>,
    #[serde(default)]
    pub result: Option<ReplyResult>,
    #[serde(default)]
    pub error: Option<IgnoredAny>,
}

/// The fields of a result the load client's workloads look at.
#[derive(Deserialize, Default)]
pub struct ReplyResult {
    #[serde(default, rename = "taskId")]
    pub task_id: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default, rename = "inputRequests")]
    pub input_requests: Option<BTreeMap<String, IgnoredAny>>,
}

/// A request's parameters with the client's `_meta` beside them, written
/// without building a new JSON value.
#[derive(serde::Serialize)]
struct WithMeta<'a> {
    #[serde(flatten)]
    params: &'a Value,
    #[serde(rename = "_meta")]
    meta: &'a Value,
}

#[derive(serde::Serialize)]
struct Outgoing<'a> {
    jsonrpc: &'static str,
    id: u64,
    method: &'a str,
    params: WithMeta<'a>,
}

pub struct Conn {
    sender: http1::SendRequest<Full<Bytes>>,
    host: String,
    path: String,
    extra: Vec<(String, String)>,
    next_id: u64,
    /// A 2025-11-25 client's session: requests go through the legacy
    /// adapter (no `_meta`, the session and version headers).
    legacy_session: Option<String>,
    /// The `_meta` every 2026-07-28 request carries ([`message`]'s).
    meta: Value,
}

impl Conn {
    pub async fn open(url: &str, extra: &[(String, String)]) -> Result<Conn, String> {
        let rest = url.strip_prefix("http://").ok_or("only http:// URLs")?;
        let (host, path) = rest
            .split_once('/')
            .map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
        let stream = TcpStream::connect(host).await.map_err(|e| e.to_string())?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn {
            sender,
            host: host.to_owned(),
            path,
            extra: extra.to_vec(),
            next_id: 1,
            legacy_session: None,
            meta: message(0, "", json!({}))["params"]["_meta"].take(),
        })
    }

    /// A connection that speaks 2025-11-25: `initialize` first, then every
    /// request with the session it issued.
    pub async fn open_legacy(url: &str, extra: &[(String, String)]) -> Result<Conn, String> {
        let mut c = Conn::open(url, extra).await?;
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "mcp-tasks-edge-load", "version": "0.1.0"}}});
        let (status, headers, _) = c
            .send(
                &init,
                vec![("content-type".into(), "application/json".into())],
            )
            .await?;
        let session = headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .ok_or(format!("initialize: {status}, no session"))?;
        c.legacy_session = Some(session.to_owned());
        Ok(c)
    }

    /// Sends one request; returns the JSON-RPC message in the reply (JSON or
    /// the matching SSE event) and the HTTP status.
    pub async fn call(&mut self, method: &str, params: Value) -> Result<(u16, Value), String> {
        let id = self.next_id;
        self.next_id += 1;
        let (msg, headers) = match &self.legacy_session {
            None => {
                let msg = message(id, method, params);
                let headers = testing::standard_headers(&msg);
                (msg, headers)
            }
            Some(session) => (
                json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
                vec![
                    ("content-type".into(), "application/json".into()),
                    (
                        "accept".into(),
                        "application/json, text/event-stream".into(),
                    ),
                    ("mcp-protocol-version".into(), "2025-11-25".into()),
                    ("mcp-session-id".into(), session.clone()),
                ],
            ),
        };
        let (status, resp_headers, bytes) = self.send(&msg, headers).await?;
        let sse = resp_headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let value = if sse {
            let text = String::from_utf8_lossy(&bytes);
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|v| v.get("id") == Some(&json!(id)))
                .unwrap_or(Value::Null)
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        };
        Ok((status, value))
    }

    /// Sends one request, as [`Conn::call`] does (the same message and
    /// headers), and reads only what [`Reply`] holds of the answer: what the load client's timed requests use, so that its own
    /// cost per request stays small beside the server's.
    pub async fn call_reply(
        &mut self,
        method: &str,
        params: &Value,
    ) -> Result<(u16, Reply), String> {
        if self.legacy_session.is_some() {
            let (status, v) = self.call(method, params.clone()).await?;
            let reply = serde_json::from_value(v).unwrap_or_default();
            return Ok((status, reply));
        }
        let id = self.next_id;
        self.next_id += 1;
        let body = serde_json::to_vec(&Outgoing {
            jsonrpc: "2.0",
            id,
            method,
            params: WithMeta {
                params,
                meta: &self.meta,
            },
        })
        .map_err(|e| e.to_string())?;
        // The headers standard_headers derives from the message: its
        // method, name and version.
        let mut named = serde_json::Map::new();
        for key in ["name", "uri", "taskId"] {
            if let Some(v) = params.get(key) {
                named.insert(key.to_owned(), v.clone());
            }
        }
        named.insert(
            "_meta".to_owned(),
            json!({"io.modelcontextprotocol/protocolVersion": self.meta.get("io.modelcontextprotocol/protocolVersion")}),
        );
        let headers =
            testing::standard_headers(&json!({"method": method, "params": Value::Object(named)}));
        let (status, sse, bytes) = self.send_body(body, headers).await?;
        let reply = if sse {
            let text = std::str::from_utf8(&bytes).unwrap_or("");
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Reply>(d.trim()).ok())
                .find(|r| r.id == Some(id))
                .unwrap_or_default()
        } else {
            serde_json::from_slice(&bytes).unwrap_or_default()
        };
        Ok((status, reply))
    }

    /// Posts `body` with `headers`; the status, whether the answer is an
    /// event stream, and its body.
    async fn send_body(
        &mut self,
        body: Vec<u8>,
        headers: Vec<(String, String)>,
    ) -> Result<(u16, bool, Bytes), String> {
        let (status, headers, bytes) = self.post(body, headers, false).await?;
        let sse = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        Ok((status, sse, bytes))
    }

    /// Posts `body` with `headers` (and the connection's extra ones); the
    /// status, the response's headers (only its `content-type` unless
    /// `all_headers`) and its body.
    async fn post(
        &mut self,
        body: Vec<u8>,
        headers: Vec<(String, String)>,
        all_headers: bool,
    ) -> Result<(u16, hyper::HeaderMap, Bytes), String> {
        let mut req = Request::post(&self.path).header("host", &self.host);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        for (k, v) in &self.extra {
            req = req.header(k, v);
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        self.sender.ready().await.map_err(|e| e.to_string())?;
        let resp = self
            .sender
            .send_request(req)
            .await
            .map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let kept = if all_headers {
            resp.headers().clone()
        } else {
            let mut kept = hyper::HeaderMap::new();
            if let Some(v) = resp.headers().get(hyper::header::CONTENT_TYPE) {
                kept.insert(hyper::header::CONTENT_TYPE, v.clone());
            }
            kept
        };
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, kept, bytes))
    }

    async fn send(
        &mut self,
        msg: &Value,
        headers: Vec<(String, String)>,
    ) -> Result<(u16, hyper::HeaderMap, Bytes), String> {
        let body = serde_json::to_vec(msg).map_err(|e| e.to_string())?;
        self.post(body, headers, true).await
    }
}
