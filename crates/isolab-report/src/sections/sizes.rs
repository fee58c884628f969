//! Seed 002's platform-type and platform-size overhead ([`crate::sizes`]).

use super::{Report, Section};
use crate::escape::esc;
use crate::sizes;
use crate::table::Style;

/// PTO and PSO, when cells ran at two or more shapes against a baseline.
pub struct Sizes;

impl Section for Sizes {
    fn title(&self) -> &'static str {
        "Platform-type and platform-size overhead"
    }

    fn applies(&self, r: &Report) -> bool {
        !r.analysis.sizes.is_empty()
    }

    fn text(&self, r: &Report, style: Style) -> String {
        format!("\n{}", sizes::render(&r.analysis.sizes, style))
    }

    fn html(&self, r: &Report) -> String {
        format!(
            "<h2>{}</h2>\n<p class=note>{}. {}.</p>\n{}",
            self.title(),
            esc(sizes::TITLE),
            esc(sizes::LEGEND),
            sizes::table(&r.analysis.sizes).render_html()
        )
    }

    fn json(&self, r: &Report) -> Vec<(&'static str, serde_json::Value)> {
        vec![("size_overheads", serde_json::json!(r.analysis.sizes))]
    }
}
