//! Seed 001's isolation table and chart: degradation with a neighbour against the same
//! cell without one ([`crate::isolation`]).

use std::fmt::Write as _;

use super::{verdict_class, Reach, Report, Section};
use crate::escape::esc;
use crate::isolation::{self, IsolationTable};
use crate::plots::{self, Bar, BarChart, Marker, ReferenceLine, Size};
use crate::table::Style;

/// The isolation table, when the factor `neighbour` is varied.
pub struct Isolation;

impl Section for Isolation {
    fn title(&self) -> &'static str {
        "Isolation"
    }

    fn reach(&self) -> Reach {
        Reach::Run
    }

    fn applies(&self, r: &Report) -> bool {
        r.analysis.isolation.is_some()
    }

    fn text(&self, r: &Report, style: Style) -> String {
        r.analysis
            .isolation
            .as_ref()
            .map_or(String::new(), |t| format!("\n{}", t.render(style)))
    }

    fn html(&self, r: &Report) -> String {
        let mut out = String::new();
        if let Some(t) = &r.analysis.isolation {
            isolation_section(&mut out, t);
        }
        out
    }

    fn json(&self, r: &Report) -> Vec<(&'static str, serde_json::Value)> {
        vec![("isolation", serde_json::json!(r.analysis.isolation))]
    }
}

/// Seed 001's isolation table (scenarios × workload · platform) and its chart.
fn isolation_section(out: &mut String, t: &IsolationTable) {
    let _ = write!(
        out,
        "<h2>Isolation</h2>\n<p class=note>{}. {}. Metrics: {}. Click a column to sort.</p>\n<table class=sortable><thead><tr><th>scenario</th>",
        esc(isolation::TITLE),
        esc(isolation::LEGEND),
        esc(&t.metrics_line()),
    );
    for c in &t.columns {
        let _ = write!(out, "<th>{}</th>", esc(&c.label));
    }
    out.push_str("</tr></thead><tbody>\n");
    for (i, row) in t.rows.iter().enumerate() {
        let _ = write!(
            out,
            "<tr><td title=\"neighbour={} reservation={}\">{}</td>",
            esc(&row.neighbour),
            esc(&row.reservation),
            esc(&row.label)
        );
        for j in 0..t.columns.len() {
            match t.entry(i, j) {
                Some(e) => {
                    let _ = write!(
                        out,
                        "<td class=\"n {}\" data-v=\"{}\" title=\"n = {} with the neighbour, {} without\">{}</td>",
                        verdict_class(e.verdict),
                        e.degradation.unwrap_or(0.0),
                        e.n_with,
                        e.n_without,
                        esc(&isolation::entry_text(e))
                    );
                }
                None => out.push_str("<td class=n>-</td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
    let _ = writeln!(
        out,
        "<div class=charts><figure>{}<figcaption>Bars: degradation from the means; whiskers: its 95% CI; a bar without a marker was not tested (fewer than two runs on a side).</figcaption></figure></div>",
        plots::grouped_bars(&isolation_chart(t))
    );
}

/// Grouped bars of degradation per scenario, one group per column, CI whiskers and
/// verdict markers.
pub fn isolation_chart(t: &IsolationTable) -> BarChart {
    let mut bars = Vec::new();
    for (i, _) in t.rows.iter().enumerate() {
        for j in 0..t.columns.len() {
            let Some(e) = t.entry(i, j) else { continue };
            let Some(d) = e.degradation else { continue };
            bars.push(Bar {
                category: i,
                group: j,
                value: d,
                low: e.ci.map(|c| c.low),
                high: e.ci.map(|c| c.high),
                marker: e.verdict.map(Marker::from),
            });
        }
    }
    // Room for the scenario labels under their groups of bars.
    let per_category = (t.columns.len() as u32 * 26).max(200);
    BarChart {
        title: "Isolation degradation by scenario (seed 001)".into(),
        y_label: "degradation (%, positive = worse)".into(),
        x_label: "scenario".into(),
        categories: t.rows.iter().map(|r| r.label.clone()).collect(),
        groups: t.columns.iter().map(|c| c.label.clone()).collect(),
        bars,
        reference: Some(ReferenceLine {
            value: 0.0,
            label: "0 = no degradation".into(),
        }),
        size: Size {
            width: (160 + per_category * t.rows.len() as u32).clamp(640, 1400),
            height: 420,
        },
    }
}
