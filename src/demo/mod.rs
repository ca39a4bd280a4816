//! The demo tools, written with the public API the way a user writes theirs:
//!
//! - [`GenerateReport`] (`generate_report`): draft an outline, ask the user
//!   to approve it, render the report;
//! - [`RunJob`] (`run_job`): submit a job to an HTTP API, poll it with
//!   backoff, ask the user to confirm, return the result;
//! - [`ReportSizes`] (`report_sizes`): a synchronous tool, answered at once.

mod job;
mod report;
mod sizes;

pub use job::RunJob;
pub use report::GenerateReport;
pub use sizes::ReportSizes;

use crate::tools::{ToolSet, sync_tool, task_tool};

/// How long `generate_report` drafts its outline, unless configured.
pub const DEFAULT_OUTLINE_MS: u64 = 1_000;

/// The demo tools, `generate_report` drafting its outline in `outline_ms`
/// (benchmarks set it to 0 to measure the server, not the simulated work).
pub fn tools(outline_ms: u64) -> ToolSet {
    ToolSet::from_tools(vec![
        task_tool(GenerateReport { outline_ms }),
        task_tool(RunJob),
        sync_tool(ReportSizes),
    ])
}
