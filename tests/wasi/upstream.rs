//! A job API on 127.0.0.1 for the `run_job` tests: `POST /jobs` (by
//! idempotency key: the same key, the same job) and `GET /jobs/{id}`. The
//! test scripts how the next submits answer (a status code, or a hang
//! after the request was received) and reads what the API saw.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

/// How the next submit answers.
#[derive(Clone, Copy, Debug)]
pub enum Behave {
    /// This status, no job created.
    Status(u16),
    /// Received (and logged), then no answer for this long.
    Hang(Duration),
    /// A 307 to the same path on `localhost` at the same port: another
    /// origin (off an allow-list naming `127.0.0.1`), the same API.
    RedirectElsewhere,
}

/// One request the API received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub key: Option<String>,
    pub authorization: Option<String>,
}

#[derive(Default)]
struct State {
    submits: VecDeque<Behave>,
    /// How the next `GET /health` answer (then 200).
    health: VecDeque<u16>,
    polls: u32,
    jobs: BTreeMap<String, (String, u32)>,
    seen: Vec<Seen>,
}

pub struct Upstream {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn json_response(status: u16, v: Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(v.to_string())));
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    r
}

async fn answer(
    state: Arc<Mutex<State>>,
    req: Request<hyper::body::Incoming>,
) -> Response<Full<Bytes>> {
    let method = req.method().to_string();
    let path = req.uri().path().to_owned();
    let header = |n: &str| {
        req.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let key = header("idempotency-key");
    let port = req.uri().port_u16().or_else(|| {
        header("host").and_then(|h| h.rsplit_once(':').and_then(|(_, p)| p.parse().ok()))
    });
    let seen = Seen {
        method: method.clone(),
        path: path.clone(),
        key: key.clone(),
        authorization: header("authorization"),
    };
    let _ = req.into_body().collect().await;
    let behave = {
        let mut s = state.lock().unwrap();
        s.seen.push(seen);
        if method == "POST" {
            s.submits.pop_front()
        } else {
            None
        }
    };
    match behave {
        Some(Behave::Status(code)) => {
            let mut r = json_response(code, json!({"error": "scripted"}));
            if code == 429 {
                r.headers_mut().insert("retry-after", "1".parse().unwrap());
            }
            return r;
        }
        Some(Behave::Hang(d)) => tokio::time::sleep(d).await,
        Some(Behave::RedirectElsewhere) => {
            let mut r = json_response(307, json!({"moved": true}));
            let to = format!("http://localhost:{}{path}", port.unwrap_or(80));
            r.headers_mut().insert("location", to.parse().unwrap());
            return r;
        }
        None => {}
    }
    let mut s = state.lock().unwrap();
    match (method.as_str(), path.as_str()) {
        ("GET", "/health") => {
            let code = s.health.pop_front().unwrap_or(200);
            json_response(code, json!({"healthy": code == 200}))
        }
        ("POST", "/api/jobs") => {
            let n = s.jobs.len();
            let polls = s.polls;
            let (id, _) = s
                .jobs
                .entry(key.unwrap_or_default())
                .or_insert_with(|| (format!("job-{}", n + 1), polls));
            json_response(202, json!({"id": id}))
        }
        ("GET", p) if p.starts_with("/api/jobs/") => {
            let id = &p["/api/jobs/".len()..];
            match s.jobs.values_mut().find(|(j, _)| j == id) {
                Some((_, left)) if *left > 0 => {
                    *left -= 1;
                    json_response(200, json!({"status": "running"}))
                }
                Some(_) => {
                    json_response(200, json!({"status": "succeeded", "result": {"rows": 3}}))
                }
                None => json_response(404, json!({"error": "no such job"})),
            }
        }
        _ => json_response(404, json!({"error": "not found"})),
    }
}

impl Upstream {
    /// Starts the API on an ephemeral port of 127.0.0.1.
    pub async fn start() -> Upstream {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(answer(state, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Upstream { addr, state, task }
    }

    /// The API's base URL (what `JOB_API_URL` is set to).
    pub fn url(&self) -> String {
        format!("http://{}/api", self.addr)
    }

    /// The origin to allow (`MCP_OUTBOUND_ALLOW`).
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Scripts the next submits.
    pub fn then(&self, behaviours: &[Behave]) {
        self.state.lock().unwrap().submits.extend(behaviours);
    }

    /// The next `GET /health` answers.
    pub fn health(&self, codes: &[u16]) {
        self.state.lock().unwrap().health.extend(codes);
    }

    /// New jobs run for this many polls.
    pub fn polls(&self, n: u32) {
        self.state.lock().unwrap().polls = n;
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    /// Jobs created so far.
    pub fn jobs(&self) -> usize {
        self.state.lock().unwrap().jobs.len()
    }

    /// The idempotency keys of the submits received.
    pub fn submit_keys(&self) -> Vec<String> {
        self.seen()
            .into_iter()
            .filter(|s| s.method == "POST")
            .map(|s| s.key.unwrap_or_default())
            .collect()
    }
}
