//! A local HTTP host for the WASI component:
//!
//! ```sh
//! cargo build --release --target wasm32-wasip2 -p mcp-tasks-edge-server --features conformance
//! MCP_STATE_SECRET=... MCP_AUTH=insecure-local MCP_TOOLS=all \
//!   cargo run -p mcp-tasks-edge-host -- --port 8788 --data .data
//! ```
//!
//! Serves the component on `http://127.0.0.1:PORT/mcp`, keeps tasks in
//! SQLite under `--data` (several host processes may share it), and ticks
//! the runner. Every `MCP_*` variable of this process is passed to the
//! component, and each variable named by `--env NAME` (a tool's settings
//! and secrets, such as `JOB_API_URL`). Outbound requests reach only the
//! origins in `MCP_OUTBOUND_ALLOW`. Options: `--component PATH` (default: the release build, or
//! `$COMPONENT_WASM`), `--instances pooled|fresh` (default pooled),
//! `--no-tick` (serve only; another host ticks), `--http exchange|wasi`
//! (default exchange: requests are one call to the component's `exchange`
//! export and streams go through `wasi:http/incoming-handler`; wasi sends
//! everything through `wasi:http`), `--constant` (answer every
//! request with a fixed result, without the component: the HTTP stack's own
//! cost, for benchmarks), `--sync full|normal` (default full: every commit
//! is fsynced; normal survives the process being killed but not a power
//! loss), `--max-connections N` (default 512), `--max-instances N`
//! (component instances in use at once, default 128) and
//! `--header-timeout-ms MS` (default 10000): beyond a cap the host answers
//! 503 with `Retry-After`, and a connection slower to send its request head
//! is closed. `--tick-slices N` (default 8, at most 64) lets a tick run as up
//! to N component calls at once, each over its own slice of the due tasks,
//! so their commits share syncs (one call when at most one task is due).
//! `--threads N` (default: one per CPU) serves connections on N threads,
//! each running its own single-threaded runtime and keeping a connection
//! from its first request to its last (0: one multi-threaded runtime for
//! everything, as before).
//! The data directory is created 0700 and its files 0600.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};

use mcp_tasks_edge_host::runtime::{self, Runtime, Settings, Strategy};
use mcp_tasks_edge_host::serve;
use mcp_tasks_edge_host::sqlite::{self, SqliteStore};

struct Args {
    port: u16,
    data: PathBuf,
    component: PathBuf,
    strategy: Strategy,
    tick: bool,
    mode: serve::Mode,
    sync: sqlite::Sync,
    /// Variables passed to the component besides `MCP_*` (tool settings
    /// and secrets).
    pass_env: Vec<String>,
    limits: serve::Limits,
    max_instances: usize,
    tick_slices: u32,
    /// Threads serving connections (0: one multi-threaded runtime for
    /// everything).
    threads: usize,
}

/// The most connections `--max-connections` may allow.
const MOST_CONNECTIONS: usize = 1 << 20;
/// The most live instances `--max-instances` may allow.
const MOST_INSTANCES: usize = 1 << 16;
/// The longest `--header-timeout-ms` or `--body-timeout-ms`: a day.
const MAX_TIMEOUT_MS: usize = 86_400_000;

/// `text` as a count from 1 to `max`, or why not.
fn bounded(name: &str, text: &str, max: usize) -> Result<usize> {
    match text.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => bail!("{name} must be a whole number from 1 to {max}, not {text:?}"),
    }
}

/// `text` as a timeout of 1 ms to a day, or why not.
fn millis(name: &str, text: &str) -> Result<std::time::Duration> {
    let ms = bounded(name, text, MAX_TIMEOUT_MS)?;
    Ok(std::time::Duration::from_millis(ms as u64))
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        port: 8788,
        data: PathBuf::from(".data"),
        component: runtime::component_path(),
        strategy: Strategy::Pooled(64),
        tick: true,
        mode: serve::Mode::Component,
        sync: sqlite::Sync::Full,
        pass_env: Vec::new(),
        limits: serve::Limits::default(),
        max_instances: runtime::MAX_INSTANCES,
        tick_slices: runtime::TICK_SLICES,
        threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().with_context(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--port" => args.port = value("--port")?.parse().context("--port")?,
            "--data" => args.data = value("--data")?.into(),
            "--component" => args.component = value("--component")?.into(),
            "--instances" => {
                args.strategy = value("--instances")?.parse().map_err(anyhow::Error::msg)?
            }
            "--no-tick" => args.tick = false,
            "--constant" => args.mode = serve::Mode::Constant,
            "--http" => {
                args.mode = match value("--http")?.as_str() {
                    "exchange" => serve::Mode::Component,
                    "wasi" => serve::Mode::WasiHttp,
                    other => bail!("--http takes exchange or wasi, not {other:?}"),
                }
            }
            "--sync" => args.sync = value("--sync")?.parse().map_err(anyhow::Error::msg)?,
            "--env" => args.pass_env.push(value("--env")?),
            "--max-connections" => {
                args.limits.max_connections = bounded(
                    "--max-connections",
                    &value("--max-connections")?,
                    MOST_CONNECTIONS,
                )?
            }
            "--max-instances" => {
                args.max_instances = bounded(
                    "--max-instances",
                    &value("--max-instances")?,
                    MOST_INSTANCES,
                )?
            }
            "--tick-slices" => {
                args.tick_slices = value("--tick-slices")?.parse().context("--tick-slices")?;
                if !(1..=runtime::MAX_TICK_SLICES).contains(&args.tick_slices) {
                    bail!(
                        "--tick-slices must be between 1 and {}",
                        runtime::MAX_TICK_SLICES
                    );
                }
            }
            "--threads" => {
                args.threads = value("--threads")?.parse().context("--threads")?;
                if args.threads > 256 {
                    bail!("--threads must be at most 256");
                }
            }
            "--header-timeout-ms" => {
                args.limits.header_read_timeout =
                    millis("--header-timeout-ms", &value("--header-timeout-ms")?)?
            }
            "--body-timeout-ms" => {
                args.limits.body_read_timeout =
                    millis("--body-timeout-ms", &value("--body-timeout-ms")?)?
            }
            "--write-timeout-ms" => {
                args.limits.write_timeout =
                    millis("--write-timeout-ms", &value("--write-timeout-ms")?)?
            }
            "--shutdown-grace-ms" => {
                let text = value("--shutdown-grace-ms")?;
                args.limits.shutdown_grace = match text.as_str() {
                    "0" => std::time::Duration::ZERO,
                    _ => millis("--shutdown-grace-ms", &text)?,
                }
            }
            "-h" | "--help" => {
                println!(
                    "usage: host [--port N] [--data DIR] [--component PATH] \
                     [--instances pooled|fresh] [--no-tick] [--constant] [--sync full|normal] \
                     [--http exchange|wasi] [--env NAME]... [--max-connections N (512)] \
                     [--max-instances N (128)] [--header-timeout-ms MS (10000)] \
                     [--body-timeout-ms MS (30000)] [--write-timeout-ms MS (30000)] [--shutdown-grace-ms MS (10000)] \
                     [--tick-slices N (8)] [--threads N (CPUs; 0: one shared runtime)]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    Ok(args)
}

fn main() -> Result<()> {
    let args = parse_args()?;
    // `vars_os`: `vars` panics on any variable that is not UTF-8, even one
    // this host never reads. One it passes on must be UTF-8.
    let mut env: Vec<(String, String)> = Vec::new();
    for (k, v) in std::env::vars_os() {
        let Some(k) = k.to_str() else { continue };
        if !(k.starts_with("MCP_") || args.pass_env.iter().any(|p| p == k)) {
            continue;
        }
        match v.into_string() {
            Ok(v) => env.push((k.to_owned(), v)),
            Err(_) => bail!("{k} is not valid UTF-8"),
        }
    }
    if env
        .iter()
        .any(|(k, v)| k == "MCP_AUTH" && v.trim() == "insecure-local")
    {
        eprintln!(
            "host: WARNING: MCP_AUTH=insecure-local serves every request as one identity \
             without credentials. Local development only."
        );
    }
    let mut settings = Settings::new(env);
    settings.strategy = args.strategy;
    settings.max_instances = args.max_instances;
    settings.tick_slices = args.tick_slices;
    let store = Arc::new(SqliteStore::open_with(&args.data, args.sync)?);
    let runtime = Runtime::new(&args.component, store.clone(), settings)?;

    // With --threads N, each of N threads runs its own single-threaded
    // runtime and serves the connections handed to it; this thread accepts
    // and ticks. With 0, one multi-threaded runtime does everything.
    let (rt, workers) = if args.threads == 0 {
        (tokio::runtime::Runtime::new()?, Vec::new())
    } else {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        (rt, serve::worker_threads(args.threads)?)
    };
    rt.block_on(async move {
        runtime
            .check()
            .await
            .with_context(|| format!("starting {}", args.component.display()))?;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
            .await
            .with_context(|| format!("binding 127.0.0.1:{}", args.port))?;
        let running = serve::start_on(
            runtime,
            listener,
            args.tick,
            args.mode,
            args.limits,
            workers,
        )?;
        println!(
            "host: serving {} (store {}, instances {:?}, ticker {})",
            running.url(),
            store.path().display(),
            args.strategy,
            if args.tick { "on" } else { "off" }
        );
        shutdown_signal().await;
        eprintln!("host: shutting down: answering the requests in progress");
        // A second signal exits at once: every acknowledged write is
        // durable already, only the answers in progress are lost.
        let cut = tokio::select! {
            cut = running.stop() => cut,
            _ = shutdown_signal() => {
                eprintln!("host: a second signal: exiting without waiting for the requests in progress");
                std::process::exit(130);
            }
        };
        if cut > 0 {
            eprintln!("host: {cut} connections still open after the grace period are cut");
        }
        Ok(())
    })
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
