//! Seed 002's figure: overhead ratio per shape, one bar per configuration.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::{level, Report, Section};
use crate::analysis::Analysis;
use crate::compare::Point;
use crate::plots::{self, Bar, BarChart, Marker, ReferenceLine, Size};

/// The seed-002 grid of grouped bars.
pub struct Grid;

impl Section for Grid {
    fn title(&self) -> &'static str {
        "Overhead by configuration"
    }

    fn applies(&self, r: &Report) -> bool {
        !r.analysis.comparisons.is_empty()
    }

    fn html(&self, r: &Report) -> String {
        let mut out = String::new();
        grid_section(&mut out, r.analysis);
        out
    }
}

/// A chart's workload and metric.
type ChartKey<'a> = (&'a str, &'a str);

/// Seed 002's figure: overhead ratio per shape (or, without shapes, per placement), one
/// bar per configuration, CI whiskers and verdict markers; one chart per workload and
/// metric, as wide as its bars need up to the page's width.
fn grid_section(out: &mut String, a: &Analysis) {
    let points = || a.comparisons.iter().flat_map(|c| &c.points);
    let along = if a.factors.iter().any(|f| f == "shape") {
        Some("shape")
    } else if points().any(|p| !level(&p.levels, "placement").is_empty()) {
        // Placements matched against the baseline: bars side by side, not on each other.
        Some("placement")
    } else {
        None
    };
    // One chart per workload and metric, in the order first met, with its points in
    // comparison order (each with its comparison's index).
    let mut charts: Vec<(ChartKey<'_>, Vec<(usize, &Point)>)> = Vec::new();
    let mut chart_of: HashMap<ChartKey<'_>, usize> = HashMap::new();
    for (g, c) in a.comparisons.iter().enumerate() {
        for p in &c.points {
            let k = (level(&p.levels, "workload"), p.metric.as_str());
            let i = *chart_of.entry(k).or_insert_with(|| {
                charts.push((k, Vec::new()));
                charts.len() - 1
            });
            charts[i].1.push((g, p));
        }
    }
    out.push_str("<h2>Overhead by configuration</h2>\n<div class=charts>\n");
    // Drawn side by side: an experiment of many workloads has thousands of charts.
    let drawn = crate::parallel::map_in_order(&charts, |((workload, metric), points)| {
        let mut categories: Vec<String> = Vec::new();
        let groups: Vec<String> = a.comparisons.iter().map(|c| c.b.clone()).collect();
        let mut bars = Vec::new();
        for &(g, p) in points {
            let Some(ratio) = p.ratio else { continue };
            let category = along.map_or("all", |f| level(&p.levels, f)).to_owned();
            let ci = match categories.iter().position(|x| *x == category) {
                Some(i) => i,
                None => {
                    categories.push(category);
                    categories.len() - 1
                }
            };
            bars.push(Bar {
                category: ci,
                group: g,
                value: ratio,
                low: p.ratio_ci.map(|c| c.low),
                high: p.ratio_ci.map(|c| c.high),
                marker: Some(Marker::from(p.verdict)),
            });
        }
        let bars_wide = (groups.len() * categories.len()) as u32;
        let chart = BarChart {
            title: format!("{workload}: overhead ratio of {metric}"),
            y_label: "overhead ratio (× baseline)".into(),
            x_label: along.unwrap_or_default().into(),
            categories,
            groups,
            bars,
            reference: Some(ReferenceLine {
                value: 1.0,
                label: "1.0 = baseline, above = worse".into(),
            }),
            size: Size {
                width: (200 + 36 * bars_wide).clamp(640, 1400),
                height: 380,
            },
        };
        plots::grouped_bars(&chart)
    });
    for svg in drawn {
        let _ = writeln!(out, "<figure>{svg}</figure>");
    }
    out.push_str("</div>\n");
}
