//! The summary: one row per cell and metric (n, mean, CI, CV, the overhead ratio against
//! the baseline with its verdict, throttling, migrations, limits, stop reason), with the
//! experiment's status and the count of verdicts above it in the HTML report.

use std::fmt::Write as _;

use super::{level, verdict_class, Reach, Report, Section};
use crate::analysis::Analysis;
use crate::data::ExperimentData;
use crate::escape::esc;
use crate::summary::MetricRow;
use crate::table::{num, summary_table, vs_baseline, Style};

/// The summary table.
pub struct Summary;

impl Section for Summary {
    fn title(&self) -> &'static str {
        "Summary"
    }

    fn reach(&self) -> Reach {
        Reach::Host
    }

    fn text(&self, r: &Report, style: Style) -> String {
        summary_table(&r.analysis.rows, &r.analysis.factors, style)
    }

    fn html(&self, r: &Report) -> String {
        let mut out = String::new();
        summary_section(&mut out, r.data, r.analysis);
        out
    }

    fn json(&self, r: &Report) -> Vec<(&'static str, serde_json::Value)> {
        vec![("rows", serde_json::json!(r.analysis.rows))]
    }
}

fn summary_section(out: &mut String, data: &ExperimentData, a: &Analysis) {
    let r = &data.record;
    let counted = data.runs.iter().filter(|r| r.is_counted()).count();
    let (worse, better, equivalent, inconclusive) =
        a.comparisons.iter().fold((0, 0, 0, 0), |(w, b, e, i), c| {
            (
                w + c.worse,
                b + c.better,
                e + c.equivalent,
                i + c.inconclusive,
            )
        });
    let baseline = a
        .options
        .baseline
        .iter()
        .map(|(f, l)| format!("{f}={l}"))
        .collect::<Vec<_>>()
        .join(" ");
    let _ = write!(
        out,
        "<h2>Summary</h2>\n<p>Status <b>{status}</b>; {cells} cells; {counted} counted runs ({all} stored, warm-ups and failures included); seed {seed}; isolab {ver}. Baseline: <b>{base}</b>. Against it: <span class=worse>{worse} worse</span>, <span class=better>{better} better</span>, <span class=same>{equivalent} ≈ (equivalent)</span>, <span class=undecided>{inconclusive} ? (inconclusive)</span>.</p>\n",
        status = r.status.as_str(),
        cells = data.cells.len(),
        all = data.runs.len(),
        seed = r.seed,
        ver = esc(&r.isolab_version),
        base = if baseline.is_empty() { "none".to_owned() } else { esc(&baseline) },
    );
    out.push_str("<p class=note>Mean with the half-width of its 95% Student-t interval. “vs baseline”: overhead ratio of the means (1 = none, above 1 = worse, oriented by the metric's direction) with its 95% bootstrap interval and the verdict: worse or better when the test (Wilcoxon signed-rank on runs paired by round, Mann-Whitney otherwise), after Benjamini-Hochberg control over the comparison, is significant and the estimated change lies beyond the noise threshold; ≈ when the change's 90% interval lies within ±the threshold (equivalent); ? when the data cannot tell yet, with the runs per cell that would decide. Click a column to sort.</p>\n<table class=sortable><thead><tr>");
    for f in &a.factors {
        let _ = write!(out, "<th>{}</th>", esc(f));
    }
    let explained = a.rows.iter().any(|r| r.attribution.is_some());
    out.push_str("<th>metric</th><th>n</th><th>mean</th><th>±95% CI</th><th>CV</th><th>vs baseline</th><th>throttled periods</th><th>cpu migrations</th>");
    if explained {
        out.push_str("<th title=\"the counters that moved with a worse or better verdict (same test, Benjamini-Hochberg across counters), ranked by |ln ratio|, and the mechanism the first points to\">why</th>");
    }
    out.push_str("<th>limits (read back)</th><th>stop reason</th></tr></thead><tbody>\n");
    for row in &a.rows {
        summary_row(out, row, &a.factors, explained);
    }
    out.push_str("</tbody></table>\n");
}

/// The stop reason's first word, with the whole reason on hover.
fn stop_cell(reason: Option<&str>) -> String {
    match reason {
        None => "running".into(),
        Some(r) => format!(
            "<span title=\"{}\">{}</span>",
            esc(r),
            esc(r.split(':').next().unwrap_or(r))
        ),
    }
}

/// The `why` cell: the short attribution, expanding to every moved counter.
fn why_cell(row: &MetricRow) -> String {
    let Some(a) = &row.attribution else {
        return "<td>-</td>".into();
    };
    let mut out = format!(
        "<td><details><summary>{}</summary><p>{}</p>",
        esc(&crate::table::attribution_short(a)),
        esc(&crate::table::attribution_line(a))
    );
    if !a.moved.is_empty() {
        out.push_str("<table><thead><tr><th>counter</th><th>A</th><th>B</th><th>change [95% CI]</th><th>q</th><th>mechanism</th></tr></thead><tbody>");
        for m in &a.moved {
            let change = match (m.change, m.change_ci) {
                (Some(c), Some(ci)) => format!(
                    "{}% [{}, {}]",
                    crate::table::signed_pct(c * 100.0),
                    crate::table::signed_pct(ci.low * 100.0),
                    crate::table::signed_pct(ci.high * 100.0)
                ),
                (Some(c), None) => format!("{}%", crate::table::signed_pct(c * 100.0)),
                _ => "from 0".into(),
            };
            let _ = write!(
                out,
                "<tr><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{:.3}</td><td>{}</td></tr>",
                esc(&m.counter),
                num(m.mean_a),
                num(m.mean_b),
                esc(&change),
                m.q,
                esc(m.mechanism.name())
            );
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("</details></td>");
    out
}

fn summary_row(out: &mut String, row: &MetricRow, factors: &[String], explained: bool) {
    out.push_str("<tr>");
    for f in factors {
        let _ = write!(out, "<td>{}</td>", esc(level(&row.levels, f)));
    }
    let mean = row.mean();
    let _ = writeln!(
        out,
        "<td>{} ({})</td><td class=n>{}</td><td class=n data-v=\"{}\">{}</td><td class=n>{}</td><td class=n>{}</td><td class=\"n {}\" data-v=\"{}\">{}</td><td class=n>{}</td><td class=n>{}</td>{}<td>{}</td><td>{}</td></tr>",
        esc(&row.metric),
        esc(&row.unit),
        row.n,
        mean.unwrap_or(f64::NAN),
        mean.map(num).unwrap_or_else(|| "-".into()),
        row.summary.map(|s| num((s.mean_ci95.high - s.mean_ci95.low) / 2.0)).unwrap_or_else(|| "-".into()),
        row.summary.map(|s| format!("{:.1}%", s.cv * 100.0)).unwrap_or_else(|| "-".into()),
        verdict_class(row.verdict),
        row.overhead.unwrap_or(1.0),
        esc(&vs_baseline(row)),
        row.throttled_periods.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into()),
        row.migrations.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into()),
        if explained { why_cell(row) } else { String::new() },
        esc(row.limits.as_deref().unwrap_or("-")),
        stop_cell(row.stop_reason.as_deref()),
    );
}
