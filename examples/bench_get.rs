//! Loopback load on `tasks/get` for one task: creates a task on a running
//! server, then polls it from `--connections` keep-alive HTTP/1.1
//! connections for `--seconds`, and prints requests per second and latency
//! percentiles. A benchmark, not a test.
//!
//! ```sh
//! cargo run --example bench_get -- --url http://127.0.0.1:8788/mcp --connections 4 --seconds 10
//! ```

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const VERSION: &str = "2026-07-28";

struct Args {
    url: String,
    connections: usize,
    seconds: u64,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        url: "http://127.0.0.1:8788/mcp".to_owned(),
        connections: 4,
        seconds: 10,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().context("missing value");
        match a.as_str() {
            "--url" => args.url = value()?,
            "--connections" => args.connections = value()?.parse()?,
            "--seconds" => args.seconds = value()?.parse()?,
            other => bail!("unknown argument {other:?}"),
        }
    }
    Ok(args)
}

/// One keep-alive connection that sends JSON-RPC requests.
struct Conn {
    stream: BufReader<TcpStream>,
    host: String,
    path: String,
}

impl Conn {
    async fn open(url: &str) -> Result<Conn> {
        let rest = url.strip_prefix("http://").context("http:// only")?;
        let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let stream = TcpStream::connect(host).await?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream: BufReader::new(stream),
            host: host.to_owned(),
            path: if path.is_empty() { "/" } else { path }.to_owned(),
        })
    }

    async fn call(&mut self, method: &str, name: Option<&str>, params: Value) -> Result<Value> {
        let mut params = params;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        });
        let body =
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let name = name.map_or(String::new(), |n| format!("mcp-name: {n}\r\n"));
        let head = format!(
            "POST {} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\nmcp-protocol-version: {VERSION}\r\n\
             mcp-method: {method}\r\n{name}content-length: {}\r\n\r\n",
            self.path,
            self.host,
            body.len()
        );
        self.stream.get_mut().write_all(head.as_bytes()).await?;
        self.stream.get_mut().write_all(body.as_bytes()).await?;
        let mut line = String::new();
        self.stream.read_line(&mut line).await?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .context("no status line")?
            .parse()?;
        let mut length = None;
        loop {
            line.clear();
            self.stream.read_line(&mut line).await?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = Some(v.trim().parse::<usize>()?);
            }
        }
        let mut buf = vec![0; length.context("no content-length")?];
        self.stream.read_exact(&mut buf).await?;
        if status != 200 {
            bail!("HTTP {status}: {}", String::from_utf8_lossy(&buf));
        }
        Ok(serde_json::from_slice(&buf)?)
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = parse_args()?;
    let mut setup = Conn::open(&args.url).await?;
    let created = setup
        .call(
            "tools/call",
            Some("slow_compute"),
            json!({"name": "slow_compute", "arguments": {"seconds": 3600, "label": "bench"}}),
        )
        .await?;
    let task = created["result"]["taskId"]
        .as_str()
        .with_context(|| format!("no task created: {created}"))?
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let mut workers = Vec::new();
    for _ in 0..args.connections {
        let (url, task) = (args.url.clone(), task.clone());
        workers.push(tokio::spawn(async move {
            let mut conn = Conn::open(&url).await?;
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                let got = conn
                    .call("tasks/get", Some(&task), json!({"taskId": task}))
                    .await?;
                if got["result"]["taskId"] != task.as_str() {
                    bail!("unexpected answer: {got}");
                }
                latencies.push(t.elapsed());
            }
            anyhow::Ok(latencies)
        }));
    }
    let started = Instant::now();
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort();
    let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)];
    println!(
        "tasks/get: {} requests in {elapsed:.1} s over {} connections: {:.0} req/s; latency p50 {:.2?} p99 {:.2?}",
        all.len(),
        args.connections,
        all.len() as f64 / elapsed,
        pct(0.50),
        pct(0.99)
    );
    setup
        .call("tasks/cancel", Some(&task), json!({"taskId": task}))
        .await?;
    Ok(())
}
