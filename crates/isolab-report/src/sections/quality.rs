//! Data quality ([`crate::quality`]): stable points, cells out of repetitions, outliers,
//! unexpected throttling.

use std::fmt::Write as _;

use super::{Reach, Report, Section};
use crate::escape::esc;
use crate::quality::OutlierLines;
use crate::table::Style;

/// The data-quality lines.
pub struct Quality;

impl Section for Quality {
    fn title(&self) -> &'static str {
        "Data quality"
    }

    fn reach(&self) -> Reach {
        Reach::Run
    }

    fn text(&self, r: &Report, style: Style) -> String {
        let markdown = style.is_markdown();
        let mut out = String::from(if markdown { "\n" } else { "" });
        let outliers = if r.outliers {
            OutlierLines::Each
        } else {
            OutlierLines::Count {
                experiment: r.data.record.id,
            }
        };
        for line in crate::quality::quality_lines(&r.analysis.quality, outliers) {
            let _ = writeln!(out, "{}{line}", if markdown { "- " } else { "" });
        }
        out
    }

    fn html(&self, r: &Report) -> String {
        let mut out = String::from("<h2>Data quality</h2>\n<ul class=quality>");
        for line in crate::quality::quality_lines(&r.analysis.quality, OutlierLines::Each) {
            let _ = write!(out, "<li>{}</li>", esc(&line));
        }
        out.push_str("</ul>\n");
        out
    }

    fn json(&self, r: &Report) -> Vec<(&'static str, serde_json::Value)> {
        vec![("quality", serde_json::json!(r.analysis.quality))]
    }
}
