//! Findings: one line of plain language per significant effect against the baseline
//! ([`crate::findings::findings`]).

use std::fmt::Write as _;

use super::{Reach, Report, Section};
use crate::escape::esc;
use crate::table::Style;

/// The findings under the summary.
pub struct Findings;

fn lines(r: &Report) -> Vec<String> {
    crate::findings::findings(&r.analysis.rows, &r.analysis.options.baseline)
}

impl Section for Findings {
    fn title(&self) -> &'static str {
        "Findings"
    }

    fn reach(&self) -> Reach {
        Reach::Host
    }

    fn text(&self, r: &Report, _style: Style) -> String {
        lines(r).iter().map(|l| format!("finding: {l}\n")).collect()
    }

    fn html(&self, r: &Report) -> String {
        let findings = lines(r);
        if findings.is_empty() {
            return String::new();
        }
        let mut out = String::from("<h3>Findings</h3>\n<ul class=findings>\n");
        for f in findings {
            let _ = writeln!(out, "<li>{}</li>", esc(&f));
        }
        out.push_str("</ul>\n");
        out
    }
}
