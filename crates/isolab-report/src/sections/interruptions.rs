//! Interrupted attempts: recorded, never counted as runs.

use super::{Report, Section};
use crate::table::Style;

/// How many attempts were interrupted.
pub struct Interruptions;

impl Section for Interruptions {
    fn title(&self) -> &'static str {
        "Interruptions"
    }

    fn applies(&self, r: &Report) -> bool {
        !r.data.interruptions.is_empty()
    }

    fn text(&self, r: &Report, style: Style) -> String {
        format!(
            "{}{} interrupted attempts recorded (not counted as runs)\n",
            if style.is_markdown() { "\n" } else { "" },
            r.data.interruptions.len()
        )
    }

    fn json(&self, r: &Report) -> Vec<(&'static str, serde_json::Value)> {
        vec![("interruptions", r.data.interruptions.len().into())]
    }
}
