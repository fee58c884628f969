//! Overhead against the baseline: rows are the matched levels and metric, columns the
//! non-baseline configurations.

use std::fmt::Write as _;

use super::{verdict_class, Report, Section};
use crate::analysis::Analysis;
use crate::escape::esc;

/// The overhead table of the HTML report; in JSON, every comparison with the baseline.
pub struct Overhead;

impl Section for Overhead {
    fn title(&self) -> &'static str {
        "Overhead against the baseline"
    }

    fn applies(&self, r: &Report) -> bool {
        !r.analysis.comparisons.is_empty()
    }

    fn html(&self, r: &Report) -> String {
        let mut out = String::new();
        overhead_section(&mut out, r.analysis);
        out
    }

    fn json(&self, r: &Report) -> Vec<(&'static str, serde_json::Value)> {
        vec![("comparisons", serde_json::json!(r.analysis.comparisons))]
    }
}

/// Overhead against the baseline: rows are the matched levels and metric, columns the
/// non-baseline configurations.
fn overhead_section(out: &mut String, a: &Analysis) {
    let mut keys: Vec<(Vec<(String, String)>, String)> = Vec::new();
    for c in &a.comparisons {
        for p in &c.points {
            let k = (p.levels.clone(), p.metric.clone());
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    out.push_str("<h2>Overhead against the baseline</h2>\n<p class=note>Overhead ratio [95% bootstrap CI] and verdict of each configuration against the baseline, the other factors matched.</p>\n<table class=sortable><thead><tr><th>configuration</th><th>metric</th>");
    for c in &a.comparisons {
        let _ = write!(out, "<th>{}</th>", esc(&c.b));
    }
    out.push_str("</tr></thead><tbody>\n");
    for (levels, metric) in &keys {
        let label = levels
            .iter()
            .map(|(f, l)| format!("{f}={l}"))
            .collect::<Vec<_>>()
            .join(" ");
        let _ = write!(out, "<tr><td>{}</td><td>{}</td>", esc(&label), esc(metric));
        for c in &a.comparisons {
            match c
                .points
                .iter()
                .find(|p| &p.levels == levels && &p.metric == metric)
            {
                Some(p) => {
                    let ci = p.ratio_ci.map_or(String::new(), |ci| {
                        format!(" [{:.3}, {:.3}]", ci.low, ci.high)
                    });
                    let text = match p.ratio {
                        Some(r) => format!("{r:.3}×{ci} {}", p.verdict),
                        None => p.verdict.to_string(),
                    };
                    let _ = write!(
                        out,
                        "<td class=\"n {}\" data-v=\"{}\">{}</td>",
                        verdict_class(Some(p.verdict)),
                        p.ratio.unwrap_or(1.0),
                        esc(&text)
                    );
                }
                None => out.push_str("<td class=n>-</td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
}
