//! Overhead against the baseline: rows are the matched levels and metric, columns the
//! non-baseline configurations.

use std::fmt::Write as _;

use super::{verdict_class, Report, Section};
use crate::analysis::Analysis;
use crate::compare::Comparison;
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

/// Configurations up to which they are the table's columns; with more, they are its rows
/// (one per configuration, a column per matched levels and metric), so that a table over
/// every platform fits the page instead of scrolling sideways.
pub const MAX_COLUMNS: usize = 8;

/// Overhead against the baseline: rows are the matched levels and metric, columns the
/// non-baseline configurations (the other way round with more than [`MAX_COLUMNS`]
/// configurations).
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
    out.push_str("<h2>Overhead against the baseline</h2>\n<p class=note>Overhead ratio [95% bootstrap CI] and verdict of each configuration against the baseline, the other factors matched.</p>\n<table class=sortable><thead><tr>");
    let label = |levels: &[(String, String)]| {
        levels
            .iter()
            .map(|(f, l)| format!("{f}={l}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    if a.comparisons.len() > MAX_COLUMNS {
        out.push_str("<th>configuration</th>");
        for (levels, metric) in &keys {
            let _ = write!(out, "<th>{} · {}</th>", esc(&label(levels)), esc(metric));
        }
        out.push_str("</tr></thead><tbody>\n");
        for c in &a.comparisons {
            let _ = write!(out, "<tr><td>{}</td>", esc(&c.b));
            for (levels, metric) in &keys {
                out.push_str(&cell(c, levels, metric));
            }
            out.push_str("</tr>\n");
        }
    } else {
        out.push_str("<th>configuration</th><th>metric</th>");
        for c in &a.comparisons {
            let _ = write!(out, "<th>{}</th>", esc(&c.b));
        }
        out.push_str("</tr></thead><tbody>\n");
        for (levels, metric) in &keys {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td>",
                esc(&label(levels)),
                esc(metric)
            );
            for c in &a.comparisons {
                out.push_str(&cell(c, levels, metric));
            }
            out.push_str("</tr>\n");
        }
    }
    out.push_str("</tbody></table>\n");
}

/// The cell of comparison `c` at `levels` and `metric`: ratio [CI] verdict, or `-`.
fn cell(c: &Comparison, levels: &[(String, String)], metric: &str) -> String {
    match c
        .points
        .iter()
        .find(|p| p.levels == levels && p.metric == metric)
    {
        Some(p) => {
            let ci = p.ratio_ci.map_or(String::new(), |ci| {
                format!(" [{:.3}, {:.3}]", ci.low, ci.high)
            });
            let text = match p.ratio {
                Some(r) => format!("{r:.3}×{ci} {}", p.verdict),
                None => p.verdict.to_string(),
            };
            format!(
                "<td class=\"n {}\" data-v=\"{}\">{}</td>",
                verdict_class(Some(p.verdict)),
                p.ratio.unwrap_or(1.0),
                esc(&text)
            )
        }
        None => "<td class=n>-</td>".to_owned(),
    }
}
