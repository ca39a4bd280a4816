//! A small loopback load client for MCP servers speaking 2026-07-28 with the
//! tasks extension. Each connection is one keep-alive HTTP/1.1 client that
//! sends requests back to back for the run's duration.
//!
//!   load --url http://127.0.0.1:8788/mcp --workload get --concurrency 16 --seconds 10
//!
//! Workloads:
//! - `get`: `tasks/get` on one existing task (the hot path);
//! - `legacy-get`: the same through the 2025-11-25 adapter (each
//!   connection initializes once, then sends its session);
//! - `discover`: `server/discover` (no store access; the cost of the stack);
//! - `flow`: create a `generate_report` task, poll until `input_required`,
//!   answer it, poll until `completed`; counts flows and every request;
//! - `create`: `tools/call slow_compute {seconds: 3600}` (a new stored task
//!   per request), after `--prefill N` tasks were created.
//!
//! `--threads N` (default 2): the connections are spread over N threads,
//! each with its own single-threaded runtime, so that a request and its
//! connection stay on one thread. Each timed request reads only the fields
//! the workloads look at ([`Reply`]), so the client's own cost per request
//! stays small beside the server's.
//!
//! `--cpu-of PGID`: also report the CPU time (user and system) that the
//! processes of that process group used during the timed phase, per
//! request (`server_cpu_us_per_req`): the server's own cost, which on two
//! shared cores throughput mixes with the client's. The client's own
//! (`client_cpu_us_per_req`) is always reported. Both from
//! `/proc` (Linux), in clock ticks (10 ms), so they are figures of runs of
//! a few seconds.
//!
//! Prints one JSON line with requests/s, latency percentiles and CPU per
//! request.

use std::time::{Duration, Instant};

use mcp_tasks_edge_bench::{Conn, Reply, ReplyResult};
use serde_json::{Value, json};

struct Args {
    url: String,
    workload: String,
    concurrency: usize,
    seconds: f64,
    prefill: usize,
    /// How many tasks the server holds (informational, echoed in the output).
    stored: usize,
    label: String,
    headers: Vec<(String, String)>,
    /// Threads of the load client, each driving its share of the
    /// connections on its own single-threaded runtime.
    threads: usize,
    /// The server's process group, whose CPU time is reported.
    cpu_of: Option<i32>,
}

fn parse_args() -> Args {
    let mut a = Args {
        url: "http://127.0.0.1:8788/mcp".into(),
        workload: "get".into(),
        concurrency: 1,
        seconds: 5.0,
        prefill: 0,
        stored: 0,
        label: String::new(),
        headers: Vec::new(),
        threads: 2,
        cpu_of: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_default();
        match k.as_str() {
            "--url" => a.url = v,
            "--workload" => a.workload = v,
            "--concurrency" => a.concurrency = v.parse().unwrap_or(1),
            "--seconds" => a.seconds = v.parse().unwrap_or(5.0),
            "--prefill" => a.prefill = v.parse().unwrap_or(0),
            "--label" => a.label = v,
            "--stored" => a.stored = v.parse().unwrap_or(0),
            "--threads" => a.threads = v.parse().unwrap_or(2).max(1),
            "--cpu-of" => a.cpu_of = v.parse().ok(),
            "--header" => {
                if let Some((n, val)) = v.split_once(':') {
                    a.headers.push((n.trim().to_owned(), val.trim().to_owned()));
                }
            }
            other => {
                eprintln!("unknown option {other}");
                std::process::exit(2);
            }
        }
    }
    a
}

fn ok_result(status: u16, v: &Value) -> Option<&Value> {
    if status == 200 { v.get("result") } else { None }
}

async fn create_report(c: &mut Conn) -> Result<String, String> {
    let (s, v) = c
        .call(
            "tools/call",
            json!({"name": "generate_report", "arguments": {"size": "large"}}),
        )
        .await?;
    ok_result(s, &v)
        .and_then(|r| r.get("taskId"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("no task from generate_report: {s} {v}"))
}

#[derive(Default)]
struct Tally {
    latencies_us: Vec<u32>,
    errors: u64,
    flows: u64,
}

async fn timed(c: &mut Conn, t: &mut Tally, method: &str, params: &Value) -> Option<ReplyResult> {
    let start = Instant::now();
    let r = c.call_reply(method, params).await;
    t.latencies_us
        .push(start.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
    match r {
        Ok((
            200,
            Reply {
                result: Some(result),
                error: None,
                ..
            },
        )) => Some(result),
        _ => {
            t.errors += 1;
            None
        }
    }
}

async fn worker(
    args: &Args,
    shared_task: Option<String>,
    deadline: Instant,
) -> Result<Tally, String> {
    let mut c = if args.workload == "legacy-get" {
        Conn::open_legacy(&args.url, &args.headers).await?
    } else {
        Conn::open(&args.url, &args.headers).await?
    };
    let mut t = Tally::default();
    let get = json!({"taskId": shared_task.unwrap_or_default()});
    let discover = json!({});
    let create = json!({"name": "slow_compute", "arguments": {"seconds": 3600, "label": "load"}});
    let report = json!({"name": "generate_report", "arguments": {"size": "small"}});
    while Instant::now() < deadline {
        match args.workload.as_str() {
            "get" | "legacy-get" => {
                timed(&mut c, &mut t, "tasks/get", &get).await;
            }
            "discover" => {
                timed(&mut c, &mut t, "server/discover", &discover).await;
            }
            "create" => {
                timed(&mut c, &mut t, "tools/call", &create).await;
            }
            "flow" => {
                let Some(created) = timed(&mut c, &mut t, "tools/call", &report).await else {
                    continue;
                };
                let Some(id) = created.task_id else {
                    t.errors += 1;
                    continue;
                };
                let poll = json!({"taskId": id});
                let mut key = None;
                while Instant::now() < deadline + Duration::from_secs(30) {
                    let Some(g) = timed(&mut c, &mut t, "tasks/get", &poll).await else {
                        break;
                    };
                    if g.status.as_deref() == Some("input_required") {
                        key = g.input_requests.and_then(|m| m.into_keys().next());
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                let Some(key) = key else {
                    t.errors += 1;
                    continue;
                };
                let answer = json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"approved": true}}}});
                timed(&mut c, &mut t, "tasks/update", &answer).await;
                while Instant::now() < deadline + Duration::from_secs(30) {
                    let Some(g) = timed(&mut c, &mut t, "tasks/get", &poll).await else {
                        break;
                    };
                    if g.status.as_deref() == Some("completed") {
                        t.flows += 1;
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
            other => return Err(format!("unknown workload {other}")),
        }
    }
    Ok(t)
}

fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The task a `get` run reads, and the prefill: before the clock starts.
async fn prepare(args: Args) -> (Args, Option<String>) {
    let mut setup = match Conn::open(&args.url, &args.headers).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("load: cannot connect to {}: {e}", args.url);
            std::process::exit(1);
        }
    };
    let shared_task = if args.workload == "get" || args.workload == "legacy-get" {
        match create_report(&mut setup).await {
            Ok(id) => Some(id),
            Err(e) => {
                eprintln!("load: setup failed: {e}");
                std::process::exit(1);
            }
        }
    } else {
        None
    };
    let mut args = args;
    if args.prefill > 0 {
        // Servers whose cost grows with the number of stored tasks may never
        // get there: prefill stops after PREFILL_LIMIT_S seconds (default
        // 240) and the run reports how many tasks were stored.
        let limit = Duration::from_secs(
            std::env::var("PREFILL_LIMIT_S")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(240),
        );
        let started = Instant::now();
        let conns = args.concurrency.max(1);
        let per = args.prefill.div_ceil(conns);
        let mut handles = Vec::new();
        for _ in 0..conns {
            let url = args.url.clone();
            let extra = args.headers.clone();
            handles.push(tokio::spawn(async move {
                let mut c = Conn::open(&url, &extra).await?;
                let mut made = 0usize;
                for _ in 0..per {
                    if started.elapsed() > limit {
                        break;
                    }
                    c.call("tools/call", json!({"name": "slow_compute", "arguments": {"seconds": 3600, "label": "prefill"}})).await?;
                    made += 1;
                }
                Ok::<usize, String>(made)
            }));
        }
        let mut made = 0;
        for h in handles {
            match h.await {
                Ok(Ok(n)) => made += n,
                Ok(Err(e)) => {
                    eprintln!("load: prefill failed: {e}");
                    std::process::exit(1);
                }
                Err(e) => {
                    eprintln!("load: prefill failed: {e}");
                    std::process::exit(1);
                }
            }
        }
        eprintln!(
            "load: prefilled {made} tasks in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        if made < per * conns {
            // Report what the store really holds.
            args.stored = args.stored.saturating_sub(per * conns - made);
        }
        args.prefill = made;
    }
    (args, shared_task)
}

/// A process's CPU time from its `/proc/PID/stat` line: its process
/// group, and user plus system time in clock ticks (all its threads).
fn stat_cpu(stat: &str) -> Option<(i32, u64)> {
    // The command name (field 2) may hold spaces and parentheses; the
    // fields after its closing parenthesis start with field 3 (`state`).
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| f.get(n - 3).copied();
    let pgrp = field(5)?.parse().ok()?;
    let utime: u64 = field(14)?.parse().ok()?;
    let stime: u64 = field(15)?.parse().ok()?;
    Some((pgrp, utime + stime))
}

fn ticks_to_us(ticks: u64) -> Option<u64> {
    // SAFETY: sysconf only reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| ticks * 1_000_000 / hz as u64)
}

/// The CPU time (µs) this process has used so far.
fn own_cpu_us() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    ticks_to_us(stat_cpu(&stat)?.1)
}

/// The CPU time (µs) the live processes of process group `pgid` have used
/// so far.
fn group_cpu_us(pgid: i32) -> Option<u64> {
    let mut ticks = 0;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        if !entry
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some((pgrp, t)) = stat_cpu(&stat)
            && pgrp == pgid
        {
            ticks += t;
        }
    }
    ticks_to_us(ticks)
}

/// CPU time per request over the timed phase, from readings at its start
/// and end.
fn per_request(start: Option<u64>, end: Option<u64>, requests: usize) -> Option<f64> {
    let used = end?.checked_sub(start?)?;
    (requests > 0).then(|| used as f64 / requests as f64)
}

fn main() {
    let setup = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let (args, shared_task) = setup.block_on(prepare(parse_args()));
    drop(setup);
    let args = std::sync::Arc::new(args);
    let server_cpu_start = args.cpu_of.and_then(group_cpu_us);
    let client_cpu_start = own_cpu_us();
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(args.seconds);
    // Each thread drives its share of the connections on a runtime of its
    // own, so a request and its connection never cross threads.
    let threads = args.threads.min(args.concurrency.max(1));
    let spawned: Vec<_> = (0..threads)
        .map(|thread| {
            let args = args.clone();
            let task = shared_task.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?;
                rt.block_on(async {
                    let mine = (0..args.concurrency.max(1)).filter(|c| c % threads == thread);
                    let handles: Vec<_> = mine
                        .map(|_| {
                            let args = args.clone();
                            let task = task.clone();
                            tokio::spawn(async move { worker(&args, task, deadline).await })
                        })
                        .collect();
                    let mut tallies = Vec::new();
                    for h in handles {
                        tallies.push(h.await.map_err(|e| format!("worker panicked: {e}"))?);
                    }
                    Ok::<_, String>(tallies)
                })
            })
        })
        .collect();
    let mut all = Tally::default();
    for thread in spawned {
        let tallies = match thread.join() {
            Ok(Ok(tallies)) => tallies,
            Ok(Err(e)) => {
                eprintln!("load: {e}");
                all.errors += 1;
                continue;
            }
            Err(_) => {
                eprintln!("load: a load thread panicked");
                all.errors += 1;
                continue;
            }
        };
        for t in tallies {
            match t {
                Ok(t) => {
                    all.latencies_us.extend(t.latencies_us);
                    all.errors += t.errors;
                    all.flows += t.flows;
                }
                Err(e) => {
                    eprintln!("load: worker failed: {e}");
                    all.errors += 1;
                }
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let server_cpu_end = args.cpu_of.and_then(group_cpu_us);
    let client_cpu_end = own_cpu_us();
    all.latencies_us.sort_unstable();
    let n = all.latencies_us.len();
    let out = json!({
        "label": args.label,
        "workload": args.workload,
        "concurrency": args.concurrency,
        "threads": threads,
        "prefill": args.prefill,
        "stored": if args.stored > 0 { args.stored } else { args.prefill },
        "seconds": elapsed,
        "requests": n,
        "errors": all.errors,
        "flows": all.flows,
        "rps": n as f64 / elapsed,
        "flows_per_s": all.flows as f64 / elapsed,
        "p50_us": percentile(&all.latencies_us, 0.50),
        "p99_us": percentile(&all.latencies_us, 0.99),
        "server_cpu_us_per_req": per_request(server_cpu_start, server_cpu_end, n),
        "client_cpu_us_per_req": per_request(client_cpu_start, client_cpu_end, n),
    });
    println!("{out}");
}
