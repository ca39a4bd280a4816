//! A durable MCP server of your own. One task tool, `wait_for_url`, checks
//! a URL until it answers 2xx (a deployment still starting, an export being
//! prepared), backing off between checks. Beside it: a synchronous tool that
//! reports progress (`check_urls`), a resource (`starter://about`) and a
//! prompt whose argument completes (`watch_deploy`). Then the glue that
//! deploys it as a Cloudflare Worker and as a WASI component.
//!
//! Rename the tools, change their arguments, state and steps: that is the
//! whole server.

use mcp_tasks_edge::outbound::{OutboundRequest, origin_of};
use mcp_tasks_edge::prompts::{PromptMessage, TypedPrompt, typed_prompt};
use mcp_tasks_edge::protocol::content::Content;
use mcp_tasks_edge::resources::{Vars, complete_from, text_resource};
use mcp_tasks_edge::tools::{
    Start, Step, StepContext, SyncTool, TaskTool, ToolCall, ToolSet, ToolSettings, sync_tool,
    task_tool,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub struct WaitForUrl;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// The URL to check. Its origin must be in MCP_OUTBOUND_ALLOW.
    url: String,
    /// How many checks before giving up (default 10).
    max_checks: Option<u32>,
}

/// Checks made so far.
#[derive(Serialize, Deserialize)]
pub struct Checks(u32);

#[derive(Serialize, JsonSchema)]
pub struct Ready {
    url: String,
    status: u16,
    checks: u32,
}

impl TaskTool for WaitForUrl {
    type Args = Args;
    type State = Checks;
    type Output = Ready;
    const NAME: &'static str = "wait_for_url";
    const DESCRIPTION: &'static str =
        "Checks a URL until it answers with a 2xx status, backing off between checks.";

    fn start(&self, _args: &Args) -> Start<Checks> {
        Start::now(Checks(0)).message("Checking the URL.")
    }

    async fn step(
        &self,
        args: Args,
        Checks(done): Checks,
        cx: &StepContext<'_>,
    ) -> Step<Checks, Ready> {
        let checks = done + 1;
        let request = OutboundRequest::get(&args.url).timeout_ms(5_000);
        match cx.fetch(request).await {
            Ok(r) if r.is_success() => {
                return Step::Done(Ready {
                    url: args.url,
                    status: r.status,
                    checks,
                });
            }
            // Not allowed or not a URL: checking again will not help.
            Err(e @ mcp_tasks_edge::outbound::OutboundError::NotAllowed(_)) => {
                return Step::Fail(e.to_string());
            }
            _ => {}
        }
        if checks >= args.max_checks.unwrap_or(10) {
            return Step::Fail(format!("{} was not ready after {checks} checks.", args.url));
        }
        Step::Continue {
            state: Checks(checks),
            wake_in_ms: (500u64 << checks.min(5)).min(10_000),
            message: Some(format!("Not ready after {checks} checks.")),
        }
    }
}

/// `check_urls`: which URLs `wait_for_url` could check, answered at once,
/// reporting progress URL by URL.
pub struct CheckUrls;

#[derive(Deserialize, JsonSchema)]
pub struct UrlList {
    /// The URLs to look at.
    urls: Vec<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct Checked {
    /// The URLs with an http(s) origin.
    usable: Vec<String>,
    /// The others.
    unusable: Vec<String>,
}

impl CheckUrls {
    fn check(&self, args: UrlList, call: Option<&ToolCall<'_>>) -> Checked {
        let total = args.urls.len() as f64;
        let mut out = Checked {
            usable: Vec::new(),
            unusable: Vec::new(),
        };
        for (i, url) in args.urls.into_iter().enumerate() {
            if let Some(call) = call {
                call.report_progress(i as f64, Some(total), Some(&url));
            }
            match origin_of(&url) {
                Some(_) => out.usable.push(url),
                None => out.unusable.push(url),
            }
        }
        if let Some(call) = call {
            call.report_progress(total, Some(total), Some("done"));
        }
        out
    }
}

impl SyncTool for CheckUrls {
    type Args = UrlList;
    type Output = Checked;
    const NAME: &'static str = "check_urls";
    const DESCRIPTION: &'static str = "Says which URLs wait_for_url could check.";

    fn run(&self, args: UrlList) -> Result<Checked, String> {
        Ok(self.check(args, None))
    }

    fn run_with(&self, args: UrlList, call: &ToolCall<'_>) -> Result<Checked, String> {
        Ok(self.check(args, Some(call)))
    }
}

/// `watch_deploy {url}`: a prompt that asks the model to wait for a
/// deployment; `url` completes from the usual health endpoints.
pub struct WatchDeploy;

#[derive(Deserialize, JsonSchema)]
pub struct DeployArgs {
    /// The deployment's health URL.
    url: String,
}

impl TypedPrompt for WatchDeploy {
    type Args = DeployArgs;
    const NAME: &'static str = "watch_deploy";
    const DESCRIPTION: &'static str = "Waits for a deployment to answer, then reports.";

    fn messages(&self, args: DeployArgs) -> Result<Vec<PromptMessage>, String> {
        Ok(vec![PromptMessage::user(Content::text(format!(
            "Use wait_for_url on {}, then tell me how many checks it took.",
            args.url
        )))])
    }

    fn complete(&self, _argument: &str, prefix: &str, _context: &Vars) -> Vec<String> {
        let urls = [
            "https://",
            "https://localhost:8443/health",
            "http://127.0.0.1:8080/health",
        ];
        complete_from(&urls, prefix)
    }
}

/// The server's tools, resources and prompts. The settings are the
/// deployment's environment (Worker variables and secrets, the component's
/// environment variables).
pub fn tools(_settings: &dyn ToolSettings) -> Result<ToolSet, String> {
    Ok(
        ToolSet::from_tools(vec![task_tool(WaitForUrl), sync_tool(CheckUrls)])
            .with_resource(text_resource(
                "starter://about",
                "about",
                "text/markdown",
                "# Starter\n\n`wait_for_url` waits for a URL to answer 2xx; `check_urls` says which URLs it could check.",
            ))
            .with_prompt(typed_prompt(WatchDeploy)),
    )
}

// Both wasm builds allocate with Talc rather than Rust's default wasm
// allocator (faster per request, and a smaller Worker), with the small
// blocks a request allocates and frees kept for the next one.
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
#[global_allocator]
static ALLOCATOR: mcp_tasks_edge::alloc::SmallCache<talc::wasm::WasmDynamicTalc> =
    mcp_tasks_edge::alloc::SmallCache::new(talc::wasm::new_wasm_dynamic_allocator());

// The deployment: a Cloudflare Worker (with its Durable Object class and
// cron handler) and a WASI component, both serving `tools`.
mcp_tasks_edge::cloudflare_worker!(tools);
mcp_tasks_edge::wasi_component!(tools);
