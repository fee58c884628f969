//! The experiment's spec over time ([`crate::trend`]): each point's median in the stored
//! experiments of the same spec, with change points and fingerprint changes.

use super::{Report, Section};
use crate::escape::esc;
use crate::table::Style;

/// The trend, when the store holds earlier experiments of the same spec.
pub struct Trend;

/// What the section's charts show.
const LEGEND: &str = "Each point's median and 95% CI in every stored experiment of this spec (cells by levels, workloads by definition), in time order, one line per host. A change point is an experiment the gate's rule calls worse or better than the up to 10 experiments before it since the previous change point (α shared over the line's tests), when the next experiment is too; one that the next does not follow is an outlier. A fingerprint change is an experiment whose host fingerprint differs from the one before (the keys are in the table)";

impl Section for Trend {
    fn title(&self) -> &'static str {
        "Trend over the stored experiments"
    }

    fn applies(&self, r: &Report) -> bool {
        r.analysis.trend.has_history()
    }

    fn text(&self, r: &Report, style: Style) -> String {
        format!(
            "\n{}{}",
            crate::table::text_lines(&format!("{}:\n", self.title()), style),
            crate::trend::trend_table(&r.analysis.trend, style)
        )
    }

    fn html(&self, r: &Report) -> String {
        format!(
            "<h2>{}</h2>\n<p class=note>{}.</p>\n{}",
            self.title(),
            esc(LEGEND),
            crate::trend::trend_html(&r.analysis.trend)
        )
    }

    fn json(&self, r: &Report) -> Vec<(&'static str, serde_json::Value)> {
        vec![("trend", serde_json::json!(r.analysis.trend))]
    }
}
