//! Why each cell stopped (stable, out of repetitions, failed, not finished).

use std::fmt::Write as _;

use super::{item, Report, Section};
use crate::table::Style;

/// Each cell's stop reason, in full.
pub struct StopReasons;

impl Section for StopReasons {
    fn title(&self) -> &'static str {
        "Stop reasons"
    }

    fn text(&self, r: &Report, style: Style) -> String {
        let mut out = format!(
            "{}stop reasons:\n",
            if style.is_markdown() { "\n" } else { "" }
        );
        for c in &r.data.cells {
            let _ = writeln!(
                out,
                "{}[{}] {}: {}",
                item(style),
                c.index,
                c.key,
                c.stop_reason.as_deref().unwrap_or("not finished")
            );
        }
        out
    }

    fn json(&self, r: &Report) -> Vec<(&'static str, serde_json::Value)> {
        let cells: Vec<serde_json::Value> = r
            .data
            .cells
            .iter()
            .map(|c| serde_json::json!({ "index": c.index, "key": c.key, "stop_reason": c.stop_reason }))
            .collect();
        vec![("cells", serde_json::Value::Array(cells))]
    }
}
