//! `report_sizes`, the demo's synchronous tool: what `generate_report`
//! accepts, answered at once as structured content.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::report::Size;
use crate::tools::SyncTool;

pub struct ReportSizes;

#[derive(Deserialize, JsonSchema)]
pub struct NoArgs {}

#[derive(Serialize, JsonSchema)]
pub struct SizeInfo {
    size: Size,
    /// About how many pages a report of this size has.
    pages: u32,
}

#[derive(Serialize, JsonSchema)]
pub struct Sizes {
    sizes: Vec<SizeInfo>,
}

impl SyncTool for ReportSizes {
    type Args = NoArgs;
    type Output = Sizes;
    const NAME: &'static str = "report_sizes";
    const TITLE: Option<&'static str> = Some("Report sizes");
    const DESCRIPTION: &'static str = "Lists the sizes generate_report accepts and about how many pages each has. Answers at once.";

    fn run(&self, _args: NoArgs) -> Result<Sizes, String> {
        Ok(Sizes {
            sizes: vec![
                SizeInfo {
                    size: Size::Small,
                    pages: 2,
                },
                SizeInfo {
                    size: Size::Medium,
                    pages: 10,
                },
                SizeInfo {
                    size: Size::Large,
                    pages: 40,
                },
            ],
        })
    }
}
