//! Overhead against the baseline: rows are the matched levels and metric, columns the
//! non-baseline configurations.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use super::{verdict_class, Report, Section};
use crate::analysis::Analysis;
use crate::compare::Point;
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
    // The rows (or columns) in the order first met, and each comparison's points by
    // them (the first point of each, as a search would find it).
    let mut keys: Vec<Key<'_>> = Vec::new();
    let mut seen: HashSet<Key<'_>> = HashSet::new();
    let mut cells: Vec<HashMap<Key<'_>, &Point>> = Vec::new();
    for c in &a.comparisons {
        let mut points = HashMap::new();
        for p in &c.points {
            let k = (&p.levels[..], p.metric.as_str());
            if seen.insert(k) {
                keys.push(k);
            }
            points.entry(k).or_insert(p);
        }
        cells.push(points);
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
        for (c, points) in a.comparisons.iter().zip(&cells) {
            let _ = write!(out, "<tr><td>{}</td>", esc(&c.b));
            for k in &keys {
                out.push_str(&cell(points.get(k).copied()));
            }
            out.push_str("</tr>\n");
        }
    } else {
        out.push_str("<th>configuration</th><th>metric</th>");
        for c in &a.comparisons {
            let _ = write!(out, "<th>{}</th>", esc(&c.b));
        }
        out.push_str("</tr></thead><tbody>\n");
        for k @ (levels, metric) in &keys {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td>",
                esc(&label(levels)),
                esc(metric)
            );
            for points in &cells {
                out.push_str(&cell(points.get(k).copied()));
            }
            out.push_str("</tr>\n");
        }
    }
    out.push_str("</tbody></table>\n");
}

/// A row or column of the table: matched levels and metric.
type Key<'a> = (&'a [(String, String)], &'a str);

/// The cell of a comparison's point at a row and column: ratio [CI] verdict, or `-`
/// where the comparison has no such point.
fn cell(point: Option<&Point>) -> String {
    match point {
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
