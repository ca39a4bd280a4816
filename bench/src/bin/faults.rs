//! Fault tolerance of the local WASI host under load.
//!
//! `faults kill --host PATH --runs 100`: start the host over a data
//! directory, run clients that create tasks, answer their input and cancel
//! some, SIGKILL the host at a random moment, restart it over the same
//! directory, and check that every acknowledged task, update and cancel is
//! still there and intact. Repeats `--runs` times on the same directory.
//!
//! `faults replicas --host PATH --tasks 1000 --hosts 4`: run several host
//! processes over one directory, all ticking, create tasks through all of
//! them, and check that every task completes, exactly once, and none is
//! stranded (the stored `steps` counter of each task equals the steps its
//! tool takes).
//!
//! Prints one summary line per mode; exits non-zero on any loss.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_tasks_edge::protocol::tasks::TaskStatus;
use mcp_tasks_edge::tasks::{decode, record::TaskRecord};
use mcp_tasks_edge_bench::Conn;
use serde_json::json;
use tokio::sync::Mutex;

struct Opts {
    mode: String,
    host: PathBuf,
    data: PathBuf,
    runs: usize,
    tasks: usize,
    hosts: usize,
    clients: usize,
    port: u16,
}

fn opts() -> Opts {
    let mut o = Opts {
        mode: std::env::args().nth(1).unwrap_or_default(),
        host: PathBuf::from("target/release/host"),
        data: std::env::temp_dir().join(format!("mcp-faults-{}", std::process::id())),
        runs: 100,
        tasks: 1000,
        hosts: 4,
        clients: 8,
        port: 18_900,
    };
    let mut it = std::env::args().skip(2);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_default();
        match k.as_str() {
            "--host" => o.host = v.into(),
            "--data" => o.data = v.into(),
            "--runs" => o.runs = v.parse().unwrap_or(o.runs),
            "--tasks" => o.tasks = v.parse().unwrap_or(o.tasks),
            "--hosts" => o.hosts = v.parse().unwrap_or(o.hosts),
            "--clients" => o.clients = v.parse().unwrap_or(o.clients),
            "--port" => o.port = v.parse().unwrap_or(o.port),
            other => {
                eprintln!("faults: unknown option {other}");
                std::process::exit(2);
            }
        }
    }
    o
}

/// A host process (its own process group, killed by id).
struct Host {
    child: Child,
    url: String,
}

impl Host {
    fn start(bin: &Path, data: &Path, port: u16, tick: bool) -> Host {
        let mut cmd = Command::new(bin);
        cmd.args(["--port", &port.to_string(), "--data"])
            .arg(data)
            .env("MCP_STATE_SECRET", "faults-state-secret-0123456789-abcdef")
            .env("MCP_AUTH", "insecure-local")
            .env("MCP_INSECURE_PRINCIPAL", "faults/client")
            .env("MCP_TOOLS", "all")
            .env("MCP_MAX_OUTSTANDING_TASKS", "0")
            .env("MCP_MAX_STORED_BYTES", "0")
            .env("MCP_MAX_TASKS_PER_MINUTE", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if !tick {
            cmd.arg("--no-tick");
        }
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("faults: cannot start {}: {e}", bin.display());
                std::process::exit(1);
            }
        };
        Host {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }

    async fn ready(&self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(mut c) = Conn::open(&self.url, &[]).await
                && let Ok((200, _)) = c.call("server/discover", json!({})).await
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What the clients were told happened (acknowledged by the server).
#[derive(Default)]
struct Acks {
    /// Task id -> what was acknowledged last: "created", "updated" or "cancelled".
    tasks: HashMap<String, &'static str>,
    updates: usize,
    cancels: usize,
}

async fn client_loop(url: String, acks: Arc<Mutex<Acks>>, n: usize) {
    let Ok(mut c) = Conn::open(&url, &[]).await else {
        return;
    };
    loop {
        // Create a task that asks for confirmation at its first step.
        let Ok((200, v)) = c
            .call(
                "tools/call",
                json!({"name": "confirm_delete", "arguments": {"filename": format!("f{n}")}}),
            )
            .await
        else {
            return;
        };
        let Some(id) = v["result"]["taskId"].as_str().map(str::to_owned) else {
            return;
        };
        acks.lock().await.tasks.insert(id.clone(), "created");
        // Wait for the question, then approve it (or cancel every third).
        let mut waiting = false;
        for _ in 0..400 {
            match c.call("tasks/get", json!({"taskId": id})).await {
                Ok((200, g)) if g["result"]["status"] == "input_required" => {
                    waiting = true;
                    break;
                }
                Ok(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                Err(_) => return,
            }
        }
        if !waiting {
            continue;
        }
        if n.is_multiple_of(3) {
            if let Ok((200, a)) = c.call("tasks/cancel", json!({"taskId": id})).await
                && a["result"]["resultType"] == "complete"
            {
                let mut a = acks.lock().await;
                a.tasks.insert(id, "cancelled");
                a.cancels += 1;
            } else {
                return;
            }
        } else {
            let answer = json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
            if let Ok((200, a)) = c
                .call(
                    "tasks/update",
                    json!({"taskId": id, "inputResponses": answer}),
                )
                .await
                && a["result"]["resultType"] == "complete"
            {
                let mut a = acks.lock().await;
                a.tasks.insert(id, "updated");
                a.updates += 1;
            } else {
                return;
            }
        }
    }
}

/// Checks every acknowledged fact against the restarted host.
async fn verify(url: &str, acks: &Acks) -> (usize, Vec<String>) {
    let mut losses = Vec::new();
    let Ok(mut c) = Conn::open(url, &[]).await else {
        return (0, vec!["cannot connect to the restarted host".into()]);
    };
    let mut checked = 0;
    for (id, what) in &acks.tasks {
        checked += 1;
        let (status, v) = match c.call("tasks/get", json!({"taskId": id})).await {
            Ok(x) => x,
            Err(e) => {
                losses.push(format!("{id}: {e}"));
                continue;
            }
        };
        let st = v["result"]["status"].as_str().unwrap_or("");
        let ok = status == 200
            && match *what {
                "created" => matches!(st, "working" | "input_required" | "completed" | "cancelled"),
                // The approval was acknowledged: it must never be asked for again.
                "updated" => matches!(st, "working" | "completed"),
                "cancelled" => st == "cancelled",
                _ => false,
            };
        if !ok {
            losses.push(format!("{id} ({what}): {status} {v}"));
        }
    }
    (checked, losses)
}

async fn kill_mode(o: &Opts) -> i32 {
    let _ = std::fs::remove_dir_all(&o.data);
    let acks = Arc::new(Mutex::new(Acks::default()));
    let mut all_losses = Vec::new();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(std::process::id());
    let started = Instant::now();
    for run in 0..o.runs {
        let mut host = Host::start(&o.host, &o.data, o.port, true);
        if !host.ready().await {
            eprintln!("faults: the host did not come up (run {run})");
            return 1;
        }
        // After a restart, everything acknowledged so far must be intact.
        let (_, losses) = verify(&host.url, &*acks.lock().await).await;
        all_losses.extend(losses);
        let mut clients = Vec::new();
        for n in 0..o.clients {
            clients.push(tokio::spawn(client_loop(
                host.url.clone(),
                acks.clone(),
                run * o.clients + n,
            )));
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let delay = 50 + rng % 1_500;
        tokio::time::sleep(Duration::from_millis(delay)).await;
        host.kill();
        for c in clients {
            c.abort();
        }
    }
    // One last restart and a full check.
    let host = Host::start(&o.host, &o.data, o.port, true);
    if !host.ready().await {
        eprintln!("faults: the host did not come up for the final check");
        return 1;
    }
    let acks = acks.lock().await;
    let (checked, losses) = verify(&host.url, &acks).await;
    all_losses.extend(losses);
    for l in all_losses.iter().take(20) {
        eprintln!("LOSS: {l}");
    }
    println!(
        "faults kill: {} kills, {} tasks checked ({} acknowledged updates, {} acknowledged cancels), {} losses, {:.0} s",
        o.runs,
        checked,
        acks.updates,
        acks.cancels,
        all_losses.len(),
        started.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&o.data);
    i32::from(!all_losses.is_empty())
}

/// The stored record of every task, read straight from the SQLite file.
fn stored(data: &Path) -> Result<HashMap<String, TaskRecord>, String> {
    let db = rusqlite::Connection::open(data.join("tasks.sqlite3")).map_err(|e| e.to_string())?;
    let mut stmt = db
        .prepare("SELECT key, body FROM entries WHERE key LIKE 'tsk_%'")
        .map_err(|e| e.to_string())?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .map_err(|e| e.to_string())?;
    let mut out = HashMap::new();
    for row in rows {
        let (k, body) = row.map_err(|e| e.to_string())?;
        out.insert(k, decode(&body).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

async fn replicas_mode(o: &Opts) -> i32 {
    let _ = std::fs::remove_dir_all(&o.data);
    let mut hosts: Vec<Host> = (0..o.hosts)
        .map(|i| Host::start(&o.host, &o.data, o.port + i as u16, true))
        .collect();
    for h in &hosts {
        if !h.ready().await {
            eprintln!("faults: a host did not come up");
            return 1;
        }
    }
    let started = Instant::now();
    // Create tasks round-robin through every host: half one-step timers,
    // half two-step reports that also need an answer.
    let mut conns = Vec::new();
    for h in &hosts {
        match Conn::open(&h.url, &[]).await {
            Ok(c) => conns.push(c),
            Err(e) => {
                eprintln!("faults: {e}");
                return 1;
            }
        }
    }
    let mut ids: Vec<(String, u64)> = Vec::new();
    for i in 0..o.tasks {
        let c = &mut conns[i % o.hosts];
        let (tool, args, steps) = if i % 2 == 0 {
            (
                "slow_compute",
                json!({"seconds": 1, "label": format!("t{i}")}),
                1,
            )
        } else {
            ("generate_report", json!({"size": "small"}), 2)
        };
        match c
            .call("tools/call", json!({"name": tool, "arguments": args}))
            .await
        {
            Ok((200, v)) if v["result"]["taskId"].is_string() => {
                ids.push((
                    v["result"]["taskId"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    steps,
                ));
            }
            other => {
                eprintln!("faults: create failed: {other:?}");
                return 1;
            }
        }
    }
    let created_in = started.elapsed();
    // Answer every report's question as soon as it is asked, through any host.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut pending: Vec<(String, u64)> = ids.clone();
    let mut round = 0usize;
    while !pending.is_empty() && Instant::now() < deadline {
        let mut still = Vec::new();
        for (id, steps) in pending {
            round += 1;
            let c = &mut conns[round % o.hosts];
            let Ok((200, v)) = c.call("tasks/get", json!({"taskId": id})).await else {
                still.push((id, steps));
                continue;
            };
            match v["result"]["status"].as_str() {
                Some("completed") => {}
                Some("input_required") => {
                    let answer = json!({"approve_outline": {"action": "accept", "content": {"approved": true}}});
                    let _ = c
                        .call(
                            "tasks/update",
                            json!({"taskId": id, "inputResponses": answer}),
                        )
                        .await;
                    still.push((id, steps));
                }
                _ => still.push((id, steps)),
            }
        }
        pending = still;
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let settled_in = started.elapsed();
    for h in &mut hosts {
        h.kill();
    }
    let records = match stored(&o.data) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("faults: reading the store: {e}");
            return 1;
        }
    };
    let mut twice = 0;
    let mut stranded = 0;
    let mut wrong = 0;
    for (id, steps) in &ids {
        match records.get(id) {
            Some(r) => {
                if r.status() != TaskStatus::Completed {
                    stranded += 1;
                    eprintln!("STRANDED: {id}: {:?}", r.status());
                } else if r.steps != *steps {
                    twice += 1;
                    eprintln!("STEPS: {id}: {} committed steps, expected {steps}", r.steps);
                }
            }
            None => {
                wrong += 1;
                eprintln!("MISSING: {id}");
            }
        }
    }
    println!(
        "faults replicas: {} hosts, {} tasks created in {:.1} s, settled in {:.1} s; {} completed twice, {} stranded, {} missing",
        o.hosts,
        ids.len(),
        created_in.as_secs_f64(),
        settled_in.as_secs_f64(),
        twice,
        stranded,
        wrong
    );
    let _ = std::fs::remove_dir_all(&o.data);
    i32::from(twice + stranded + wrong > 0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let o = opts();
    let code = match o.mode.as_str() {
        "kill" => kill_mode(&o).await,
        "replicas" => replicas_mode(&o).await,
        _ => {
            eprintln!(
                "usage: faults kill|replicas [--host PATH] [--runs N] [--tasks N] [--hosts N]"
            );
            2
        }
    };
    std::process::exit(code);
}
