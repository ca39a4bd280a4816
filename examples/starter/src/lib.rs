//! A durable MCP server of your own. One task tool, `wait_for_url`, checks
//! a URL until it answers 2xx (a deployment still starting, an export being
//! prepared), backing off between checks; then the glue that deploys it as
//! a Cloudflare Worker and as a WASI component.
//!
//! Rename the tool, change its arguments, state and step: that is the whole
//! server.

use mcp_tasks_edge::outbound::OutboundRequest;
use mcp_tasks_edge::tools::{Start, Step, StepContext, TaskTool, ToolSet, ToolSettings, task_tool};
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

/// The server's tools. The settings are the deployment's environment
/// (Worker variables and secrets, the component's environment variables).
pub fn tools(_settings: &dyn ToolSettings) -> Result<ToolSet, String> {
    Ok(ToolSet::from_tools(vec![task_tool(WaitForUrl)]))
}

// The deployment: a Cloudflare Worker (with its Durable Object class and
// cron handler) and a WASI component, both serving `tools`.
mcp_tasks_edge::cloudflare_worker!(tools);
mcp_tasks_edge::wasi_component!(tools);
