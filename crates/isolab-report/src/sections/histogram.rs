//! Seed 000's regression histogram of every baseline comparison.

use std::fmt::Write as _;

use super::{Report, Section};
use crate::compare::Comparison;
use crate::plots::{self, HistogramBin, HistogramChart, Percentile, Size};

/// The regression histograms of the HTML report.
pub struct Histogram;

impl Section for Histogram {
    fn title(&self) -> &'static str {
        "Regression histograms"
    }

    fn applies(&self, r: &Report) -> bool {
        !with_histogram(&r.analysis.comparisons).is_empty()
    }

    fn html(&self, r: &Report) -> String {
        let mut out = String::new();
        histogram_section(&mut out, &r.analysis.comparisons);
        out
    }
}

/// The comparisons that have a regression histogram.
fn with_histogram(comparisons: &[Comparison]) -> Vec<&Comparison> {
    comparisons
        .iter()
        .filter(|c| c.histogram.is_some())
        .collect()
}

fn histogram_section(out: &mut String, comparisons: &[Comparison]) {
    out.push_str("<h2>Regression histograms</h2>\n<p class=note>Seed 000's measure per point: regression = 100·(B − A)/min(A, B) of the means, sign flipped for higher-is-better metrics, so positive = B worse.</p>\n<div class=charts>\n");
    for c in with_histogram(comparisons) {
        let Some(h) = &c.histogram else { continue };
        let chart = HistogramChart {
            title: format!("{} against {}: {} points", c.b, c.a, h.n),
            bins: h
                .bins
                .iter()
                .map(|b| HistogramBin {
                    low: b.low,
                    high: b.high,
                    count: b.count as u64,
                })
                .collect(),
            values: c.points.iter().filter_map(|p| p.regression_pct).collect(),
            mean: Some(h.mean),
            percentiles: h
                .percentiles
                .iter()
                .map(|&(p, value)| Percentile { p, value })
                .collect(),
            size: Size {
                width: 640,
                height: 360,
            },
            ..HistogramChart::default()
        };
        let _ = writeln!(
            out,
            "<figure>{}<figcaption>{} worse, {} better, {} ≈, {} ? ({} above 0, {} below)</figcaption></figure>",
            plots::histogram(&chart),
            c.worse,
            c.better,
            c.equivalent,
            c.inconclusive,
            h.above_zero,
            h.below_zero
        );
    }
    out.push_str("</div>\n");
}
