//! The repository's own MCP server, built exactly the way a user builds
//! theirs: one tool factory, and one line of glue per runtime.
//!
//! - `cargo build --release --target wasm32-wasip2 -p mcp-tasks-edge-server`
//!   builds the WASI component;
//! - `worker-build server` (what `wrangler.toml` runs) builds the Worker.
//!
//! `MCP_TOOLS` chooses the tools: `demo` (default: `generate_report` and
//! `run_job`), and with the `conformance` feature `conformance` (the
//! conformance suite's fixtures) or `all`. `MCP_REPORT_OUTLINE_MS` sets how
//! long `generate_report` drafts its outline (default 1000).

use mcp_tasks_edge::demo;
use mcp_tasks_edge::tools::{ToolSet, ToolSettings};

/// The server's tools, from the deployment's settings.
pub fn tools(settings: &dyn ToolSettings) -> Result<ToolSet, String> {
    // The test builds (the conformance fixtures) hold the library to its
    // promise on both runtimes: a tool factory never sees the server's
    // secrets, so every test of these builds would fail to start here.
    #[cfg(feature = "conformance")]
    if let Some(name) = mcp_tasks_edge::tools::SERVER_SECRETS
        .iter()
        .find(|name| settings.get(name).is_some())
    {
        return Err(format!(
            "the tool factory was given the server's secret {name}"
        ));
    }
    let outline_ms = match settings.get("MCP_REPORT_OUTLINE_MS") {
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| "MCP_REPORT_OUTLINE_MS must be a whole number of milliseconds")?,
        None => demo::DEFAULT_OUTLINE_MS,
    };
    let selection = settings.get("MCP_TOOLS").unwrap_or_default();
    match selection.trim() {
        "" | "demo" => Ok(demo::tools(outline_ms)),
        #[cfg(feature = "conformance")]
        "conformance" => Ok(mcp_tasks_edge::conformance::tools()),
        #[cfg(feature = "conformance")]
        "all" => Ok(mcp_tasks_edge::conformance::tools().and(demo::tools(outline_ms))),
        _ if cfg!(feature = "conformance") => {
            Err("MCP_TOOLS must be demo, conformance or all".to_owned())
        }
        _ => Err("MCP_TOOLS must be demo (this build has no conformance tools)".to_owned()),
    }
}

// Both wasm builds allocate with Talc rather than Rust's default wasm
// allocator (on the component, wasi-libc's dlmalloc, which spent about
// 17,000 of a `tasks/get`'s 80,000 guest instructions on its 37
// allocations; on the Worker, the `dlmalloc` crate): faster, and a smaller
// Worker.
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
#[global_allocator]
static ALLOCATOR: mcp_tasks_edge::alloc::SmallCache<talc::wasm::WasmDynamicTalc> =
    mcp_tasks_edge::alloc::SmallCache::new(talc::wasm::new_wasm_dynamic_allocator());

mcp_tasks_edge::cloudflare_worker!(tools);
mcp_tasks_edge::wasi_component!(tools);

/// The shard class again, declared without SQLite storage in the workerd
/// end-to-end tests' wrangler.toml (`new_classes`): a misconfigured
/// deployment, whose shards must fail with a clear error. Test builds only.
#[cfg(all(target_arch = "wasm32", target_os = "unknown", feature = "test-hooks"))]
mod misconfigured_shard {
    use worker::wasm_bindgen;

    #[worker::durable_object(alarm)]
    pub struct TaskShardWithoutSql(mcp_tasks_edge::platform::cloudflare::Shard);

    impl worker::DurableObject for TaskShardWithoutSql {
        fn new(state: worker::State, env: worker::Env) -> Self {
            TaskShardWithoutSql(mcp_tasks_edge::platform::cloudflare::Shard::new(
                state,
                env,
                super::tools,
            ))
        }

        async fn fetch(&self, req: worker::Request) -> worker::Result<worker::Response> {
            Ok(self.0.fetch(req).await)
        }

        async fn alarm(&self) -> worker::Result<worker::Response> {
            self.0.alarm().await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(env: &[(&str, &str)]) -> Result<Vec<&'static str>, String> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let lookup = move |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        tools(&lookup).map(|set| set.descriptors().iter().map(|d| d.name).collect())
    }

    #[test]
    fn mcp_tools_chooses_the_tools() {
        assert_eq!(
            names(&[]).unwrap(),
            ["generate_report", "run_job", "report_sizes"]
        );
        assert_eq!(
            names(&[("MCP_TOOLS", " demo ")]).unwrap(),
            ["generate_report", "run_job", "report_sizes"]
        );
        assert!(names(&[("MCP_TOOLS", "everything")]).is_err());
        assert!(names(&[("MCP_REPORT_OUTLINE_MS", "soon")]).is_err());
        if cfg!(feature = "conformance") {
            let all = names(&[("MCP_TOOLS", "all")]).unwrap();
            assert_eq!(all.first(), Some(&"greet"));
            assert_eq!(all.last(), Some(&"report_sizes"));
            assert!(
                !names(&[("MCP_TOOLS", "conformance")])
                    .unwrap()
                    .contains(&"run_job")
            );
        } else {
            assert!(names(&[("MCP_TOOLS", "all")]).is_err());
        }
    }
}
