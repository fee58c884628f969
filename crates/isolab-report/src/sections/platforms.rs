//! Seed 001's Table 4.1: degradation of each platform against the host, per benchmark
//! and measured operation ([`crate::platforms`]).

use std::fmt::Write as _;

use super::{verdict_class, Reach, Report, Section};
use crate::degradation::entry_text;
use crate::escape::esc;
use crate::platforms::{self, PlatformTable};
use crate::table::Style;

/// Table 4.1, when the factor `platform` is varied with a reference platform.
pub struct Platforms;

impl Section for Platforms {
    fn title(&self) -> &'static str {
        "Degradation against the host (Table 4.1)"
    }

    fn reach(&self) -> Reach {
        Reach::Run
    }

    fn applies(&self, r: &Report) -> bool {
        r.analysis.platforms.is_some()
    }

    fn text(&self, r: &Report, style: Style) -> String {
        r.analysis
            .platforms
            .as_ref()
            .map_or(String::new(), |t| format!("\n{}", t.render(style)))
    }

    fn html(&self, r: &Report) -> String {
        let mut out = String::new();
        if let Some(t) = &r.analysis.platforms {
            platforms_section(&mut out, t);
        }
        out
    }

    fn json(&self, r: &Report) -> Vec<(&'static str, serde_json::Value)> {
        vec![("platforms", serde_json::json!(r.analysis.platforms))]
    }
}

/// Table 4.1: benchmark and operation × platform.
fn platforms_section(out: &mut String, t: &PlatformTable) {
    let _ = write!(
        out,
        "<h2>Degradation against {} (Table 4.1)</h2>\n<p class=note>{}. {}. Click a column to sort.</p>\n<table class=sortable><thead><tr><th>benchmark</th><th>operation</th>",
        if t.reference == platforms::HOST {
            "the host".to_owned()
        } else {
            esc(&t.reference)
        },
        esc(platforms::TITLE),
        esc(platforms::LEGEND),
    );
    for c in &t.columns {
        let _ = write!(out, "<th>{}</th>", esc(c));
    }
    out.push_str("</tr></thead><tbody>\n");
    for (i, row) in t.rows.iter().enumerate() {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td>",
            esc(&row.benchmark()),
            esc(&row.operation())
        );
        for j in 0..t.columns.len() {
            match t.entry(i, j) {
                Some(e) => {
                    let _ = write!(
                        out,
                        "<td class=\"n {}\" data-v=\"{}\" title=\"n = {} on the platform, {} on {}\">{}</td>",
                        verdict_class(e.verdict),
                        e.degradation.unwrap_or(0.0),
                        e.n_with,
                        e.n_without,
                        esc(&t.reference),
                        esc(&entry_text(e))
                    );
                }
                None => out.push_str("<td class=n>-</td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
}
