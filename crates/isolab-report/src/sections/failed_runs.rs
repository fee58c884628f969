//! The first failed runs, and runs that did not report (DNR), with their errors.

use std::fmt::Write as _;

use super::{item, Report, Section};
use crate::table::Style;

/// Failed runs shown, at most.
pub const SHOWN: usize = 10;

/// The first [`SHOWN`] failed runs.
pub struct FailedRuns;

impl Section for FailedRuns {
    fn title(&self) -> &'static str {
        "Failed runs"
    }

    fn applies(&self, r: &Report) -> bool {
        r.data.runs.iter().any(|run| run.error.is_some())
    }

    fn text(&self, r: &Report, style: Style) -> String {
        let mut out = String::new();
        for run in r.data.runs.iter().filter(|r| r.error.is_some()).take(SHOWN) {
            let _ = writeln!(
                out,
                "{}{} run {} (cell {} repetition {}): {}",
                item(style),
                if run.status == isolab_store::RunStatus::DidNotReport {
                    "did-not-report"
                } else {
                    "failed"
                },
                run.id,
                run.cell,
                run.repetition,
                run.error.as_deref().unwrap_or("")
            );
        }
        out
    }
}
