//! Seed 000's regression histogram of every baseline comparison, and one per neighbour
//! level when the points vary the neighbour.

use std::fmt::Write as _;

use super::{Report, Section};
use crate::compare::Comparison;
use crate::escape::esc;
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
        let values: Vec<f64> = c.points.iter().filter_map(|p| p.regression_pct).collect();
        let _ = writeln!(
            out,
            "<figure>{}<figcaption>{} worse, {} better, {} ≈, {} ? ({} above 0, {} below)</figcaption></figure>",
            plots::histogram(&chart(format!("{} against {}: {} points", c.b, c.a, h.n), h, values)),
            c.worse,
            c.better,
            c.equivalent,
            c.inconclusive,
            h.above_zero,
            h.below_zero
        );
        // Seed 000 draws one per neighbour condition: without and with the neighbour.
        for by in c.histograms_by(crate::data::NEIGHBOUR) {
            let h = &by.histogram;
            let title = format!("{} against {}, neighbour={}: {} points", c.b, c.a, by.level, h.n);
            let _ = writeln!(
                out,
                "<figure>{}<figcaption>neighbour={}: mean {:+.1}%, {} above 0, {} below</figcaption></figure>",
                plots::histogram(&chart(title, h, by.regressions.clone())),
                esc(&by.level),
                h.mean,
                h.above_zero,
                h.below_zero
            );
        }
    }
    out.push_str("</div>\n");
    for c in with_histogram(comparisons) {
        steadiness_and_movers(out, c);
    }
}

/// The chart of histogram `h` of `values`, titled `title`.
fn chart(title: String, h: &isolab_stats::Histogram, values: Vec<f64>) -> HistogramChart {
    HistogramChart {
        title,
        bins: h
            .bins
            .iter()
            .map(|b| HistogramBin {
                low: b.low,
                high: b.high,
                count: b.count as u64,
            })
            .collect(),
        values,
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
    }
}

/// Seed 000's steadiness share and, over many points, those that moved most.
fn steadiness_and_movers(out: &mut String, c: &Comparison) {
    let moved = crate::compare::moved_most(&c.points, crate::table::MOVED_MOST);
    let many = c.points.len() > crate::table::MOVED_MOST;
    if c.steady.line().is_none() && !many {
        return;
    }
    let _ = writeln!(out, "<h3>{} against {}</h3>", esc(&c.b), esc(&c.a));
    if let Some(line) = c.steady.line() {
        let _ = writeln!(out, "<p class=note>{}</p>", esc(&line));
    }
    if !many {
        return;
    }
    let _ = writeln!(
        out,
        "<table class=sortable><caption>The {} points of {} that moved most</caption><thead><tr><th>levels</th><th>metric</th><th>regression</th><th>verdict</th></tr></thead><tbody>",
        moved.len(),
        c.points.len()
    );
    for p in moved {
        let levels: Vec<String> = p.levels.iter().map(|(f, l)| format!("{f}={l}")).collect();
        let r = p.regression_pct.unwrap_or(f64::NAN);
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=n data-v=\"{r}\">{r:+.1}%</td><td>{}</td></tr>",
            esc(&levels.join(" ")),
            esc(&p.metric),
            p.verdict
        );
    }
    out.push_str("</tbody></table>\n");
}
