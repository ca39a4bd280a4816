//! Shared pieces of the benchmark and fault tools: a minimal keep-alive
//! MCP client over HTTP/1.1.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use mcp_tasks_edge::testing;
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

pub struct Conn {
    sender: http1::SendRequest<Full<Bytes>>,
    host: String,
    path: String,
    extra: Vec<(String, String)>,
    next_id: u64,
    /// A 2025-11-25 client's session: requests go through the legacy
    /// adapter (no `_meta`, the session and version headers).
    legacy_session: Option<String>,
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

    async fn send(
        &mut self,
        msg: &Value,
        headers: Vec<(String, String)>,
    ) -> Result<(u16, hyper::HeaderMap, Bytes), String> {
        let body = serde_json::to_vec(msg).map_err(|e| e.to_string())?;
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
        let headers = resp.headers().clone();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, headers, bytes))
    }
}
