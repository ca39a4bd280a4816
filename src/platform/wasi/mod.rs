//! The WASI Preview 2 component (world `server` in `wit/world.wit`).
//!
//! - `wasi:http/incoming-handler`: the MCP endpoint, through [`crate::http`].
//! - `exchange.handle`: the same endpoint as one function call, for hosts
//!   that embed the component (no streams).
//! - `runner.tick(now-ms)`: advances due work ([`crate::server::Server::tick`]).
//! - `diagnostics.run-store-contract`: the core's store contract suite run
//!   against the host store, through the component boundary.
//! - The host's `store` import backs the core [`crate::store::Store`] trait.
//! - Task steps reach the network through `wasi:http/outgoing-handler`
//!   (`outbound`), and read tool settings from the environment.
//!
//! Nothing here is exported by this crate: a user's crate exports the
//! component with [`crate::wasi_component!`], naming its tool factory.
//! Each instance builds its [`Server`] once, on first use, from the
//! environment the host gives it (`MCP_*` variables, tool settings). If the
//! settings are invalid, every request is answered 503 with a JSON-RPC
//! error and the reason goes to stderr. Only this module names generated
//! types.

mod exchange;
mod handler;
mod outbound;
mod store;

use std::cell::OnceCell;
use std::marker::PhantomData;

use crate::config::Config;
use crate::ids::SystemRandom;
use crate::server::Server;
use crate::store::contract;
use crate::tasks::runner::{Slice, TickReport};
use crate::time::Millis;
use crate::tools::ToolFactory;
use store::HostStore;

/// The generated bindings of world `server`; [`crate::wasi_component!`]
/// uses their `export!` macro.
#[doc(hidden)]
#[allow(clippy::all, clippy::unwrap_used, clippy::expect_used, clippy::panic)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "server",
        path: "wit",
        pub_export_macro: true,
        with: {
            "wasi:http/types@0.2.12": wasip2::http::types,
            "wasi:io/streams@0.2.12": wasip2::io::streams,
            "wasi:io/error@0.2.12": wasip2::io::error,
            "wasi:io/poll@0.2.12": wasip2::io::poll,
            "wasi:clocks/monotonic-clock@0.2.12": wasip2::clocks::monotonic_clock,
            "wasi:http/outgoing-handler@0.2.12": wasip2::http::outgoing_handler,
        },
    });
}

use bindings::exports::mcp::tasks_edge::{diagnostics, runner};

/// What one instance serves with: the server, or why it could not be built.
type Instance = Result<Server<HostStore>, String>;

thread_local! {
    static INSTANCE: OnceCell<Instance> = const { OnceCell::new() };
}

/// A user's server: the tools the component serves.
pub trait App: 'static {
    const TOOLS: ToolFactory;
}

fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn build(tools: ToolFactory) -> Instance {
    let config = Config::from_env(|k| std::env::var(k).ok()).map_err(|e| {
        eprintln!("mcp-tasks-edge: invalid configuration: {e}");
        e.0
    })?;
    if config.auth.is_insecure() {
        eprintln!(
            "mcp-tasks-edge: WARNING: MCP_AUTH=insecure-local: every request is served as one \
             fixed identity with no credentials checked. Never expose this server beyond localhost."
        );
    }
    let tools = tools(&crate::tools::factory_settings(&env_lookup)).map_err(|e| {
        eprintln!("mcp-tasks-edge: invalid tool configuration: {e}");
        e
    })?;
    let server = Server::new(HostStore, config, tools, Box::new(SystemRandom)).map_err(|e| {
        eprintln!("mcp-tasks-edge: the server could not start: {}", e.message);
        e.message
    })?;
    Ok(server
        .with_outbound(Box::new(outbound::WasiOutbound))
        .with_tool_settings(Box::new(env_lookup))
        .with_clock(now_ms)
        .with_log(|line| eprintln!("{line}")))
}

/// Runs `f` with this instance's server (built on first use from `tools`).
fn with_server<R>(tools: ToolFactory, f: impl FnOnce(Result<&Server<HostStore>, &str>) -> R) -> R {
    INSTANCE.with(|cell| match cell.get_or_init(|| build(tools)) {
        Ok(server) => f(Ok(server)),
        Err(why) => f(Err(why.as_str())),
    })
}

/// Writes a request's operator-only detail (a store failure's message) to
/// stderr; the client saw a generic error.
fn log_detail(response: &crate::http::HttpResponse) {
    if let Some(detail) = &response.trace.detail {
        let line = serde_json::json!({
            "event": "request-error", "method": response.trace.method,
            "error": response.trace.error, "detail": detail,
        });
        eprintln!("{line}");
    }
}

/// The answer to every request when the settings are invalid.
fn misconfigured() -> crate::http::HttpResponse {
    let error = crate::error::RpcError::internal(
        "The server is not configured correctly, so it serves no requests; see its log.",
    );
    crate::http::HttpResponse::rpc_error(503, None, &error)
}

/// The wall clock in milliseconds since the epoch.
fn now_ms() -> Millis {
    let t = wasip2::clocks::wall_clock::now();
    let ms = i128::from(t.seconds) * 1000 + i128::from(t.nanoseconds / 1_000_000);
    Millis::try_from(ms).unwrap_or(Millis::MAX)
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The component of the user's server `A`.
///
/// Each export is one line that hands `A::TOOLS` to a function of this
/// crate that is neither generic nor inlined (`#[inline(never)]`). Code
/// that is generic over `A` is compiled in the user's crate, and so is
/// every `async fn` it awaits and every generic function those reach: when
/// the exports awaited the core from here, the component carried two
/// copies of the request path, the legacy adapter and the runner, one
/// compiled in each crate (287,358 B of code in copies, by twiggy on a
/// v0-mangled build; 30,889 B after, std and serde generics that several
/// crates instantiate). The release component went from 1,743,636 to
/// 1,374,654 B (593,996 to 473,857 B gzip).
#[doc(hidden)]
pub struct Component<A: App>(PhantomData<A>);

impl<A: App> runner::Guest for Component<A> {
    fn tick(now_ms: i64) -> runner::TickReport {
        tick(A::TOOLS, now_ms, None)
    }

    fn tick_slice(now_ms: i64, slice: u32, slices: u32) -> runner::TickReport {
        tick(A::TOOLS, now_ms, Some((slice, slices)))
    }
}

impl<A: App> diagnostics::Guest for Component<A> {
    fn run_store_contract(prefix: String) -> Result<u32, String> {
        run_store_contract(&prefix)
    }
}

/// `runner.tick` (`slice: None`) and `runner.tick-slice`.
#[inline(never)]
fn tick(tools: ToolFactory, now_ms: Millis, slice: Option<(u32, u32)>) -> runner::TickReport {
    tick_report(with_server(tools, |server| {
        let slice = slice.map(|(slice, slices)| Slice::new(slice, slices));
        match (server, slice) {
            (Ok(server), None) => crate::block_on(server.tick(now_ms)),
            (Ok(server), Some(Some(slice))) => crate::block_on(server.tick_slice(now_ms, slice)),
            _ => TickReport {
                errors: 1,
                ..TickReport::default()
            },
        }
    }))
}

fn tick_report(report: TickReport) -> runner::TickReport {
    runner::TickReport {
        due: count(report.due),
        stepped: count(report.stepped),
        finished: count(report.finished),
        cancelled: count(report.cancelled),
        purged: count(report.purged),
        skipped: count(report.skipped),
        fenced: count(report.fenced),
        errors: count(report.errors),
        next_due: report.next_due,
    }
}

/// `diagnostics.run-store-contract`.
#[inline(never)]
fn run_store_contract(prefix: &str) -> Result<u32, String> {
    let report = crate::block_on(contract::run(&HostStore, prefix));
    if report.failures.is_empty() {
        Ok(count(report.passed))
    } else {
        Err(report.to_string())
    }
}
