//! A self-contained HTML report: no network, inline CSS and SVG, opens from disk.

use std::fmt::Write as _;

use crate::summary::{ExperimentData, MetricRow};
use crate::table::num;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2rem;color:#222;max-width:80rem}\
table{border-collapse:collapse;margin:1rem 0}th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:left}\
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f3f3f3}\
.worse{color:#b00}.better{color:#070}pre{background:#f7f7f7;padding:1rem;overflow:auto}\
.bar{fill:#4a78b5}.base{fill:#999}.whisker{stroke:#222;stroke-width:1.5}text{font-size:12px}";

/// Renders the report of one experiment.
pub fn html(data: &ExperimentData, rows: &[MetricRow], factors: &[String]) -> String {
    let r = &data.record;
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>isolab: {name}</title><style>{STYLE}</style></head><body>\n\
         <h1>isolab experiment {id}: {name}</h1>\n<p>Status <b>{status}</b>, seed {seed}, isolab {ver}, {cells} cells, {runs} stored runs.</p>\n",
        name = esc(&r.name),
        id = r.id,
        status = r.status.as_str(),
        seed = r.seed,
        ver = esc(&r.isolab_version),
        cells = data.cells.len(),
        runs = data.runs.len(),
    );

    out.push_str("<h2>Summary</h2>\n<p>Mean with the half-width of its 95% Student-t confidence interval; overhead ratio against the baseline cell (1.0 = none, above 1 = worse, oriented by the metric's direction), shown only where Welch's t-test finds the difference significant (p &lt; 0.05); otherwise ~.</p>\n<table><tr>");
    for f in factors {
        let _ = write!(out, "<th>{}</th>", esc(f));
    }
    out.push_str("<th>metric</th><th>n</th><th>mean</th><th>±95% CI</th><th>CV</th><th>vs baseline</th><th>throttled periods</th><th>cpu migrations</th><th>limits (read back)</th><th>stop reason</th></tr>\n");
    for row in rows {
        out.push_str("<tr>");
        for f in factors {
            let l = row
                .levels
                .iter()
                .find(|(ff, _)| ff == f)
                .map(|(_, l)| l.as_str())
                .unwrap_or("");
            let _ = write!(out, "<td>{}</td>", esc(l));
        }
        let text = crate::table::vs_baseline(row);
        let ratio = match (row.overhead, row.p_value) {
            (Some(o), Some(p)) if !row.is_baseline && p < crate::summary::SIGNIFICANCE => {
                let class = if o > 1.0 { "worse" } else { "better" };
                format!("<span class=\"{class}\">{}</span>", esc(&text))
            }
            _ => esc(&text),
        };
        let _ = writeln!(
            out,
            "<td>{} ({})</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&row.metric),
            esc(&row.unit),
            row.n,
            row.mean().map(num).unwrap_or_else(|| "-".into()),
            row.summary.map(|s| num((s.mean_ci95.high - s.mean_ci95.low) / 2.0)).unwrap_or_else(|| "-".into()),
            row.summary.map(|s| format!("{:.1}%", s.cv * 100.0)).unwrap_or_else(|| "-".into()),
            ratio,
            row.throttled_periods.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into()),
            row.migrations.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into()),
            esc(row.limits.as_deref().unwrap_or("-")),
            esc(row.stop_reason.as_deref().unwrap_or("running")),
        );
    }
    out.push_str("</table>\n");

    // One bar chart per metric: means with CI whiskers.
    let mut metrics: Vec<&str> = rows.iter().map(|r| r.metric.as_str()).collect();
    metrics.dedup();
    let mut seen = Vec::new();
    for m in metrics {
        if seen.contains(&m) {
            continue;
        }
        seen.push(m);
        let group: Vec<&MetricRow> = rows
            .iter()
            .filter(|r| r.metric == m && r.mean().is_some())
            .collect();
        if group.is_empty() {
            continue;
        }
        let _ = write!(
            out,
            "<h3>{} ({})</h3>\n{}",
            esc(m),
            esc(&group[0].unit),
            bar_chart(&group, factors)
        );
    }

    out.push_str("<h2>Environment</h2>\n<table>");
    for (k, v) in &data.environment {
        let _ = write!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
    }
    out.push_str("</table>\n");
    if !data.interruptions.is_empty() {
        let _ = write!(
            out,
            "<h2>Interruptions</h2>\n<p>{} interrupted attempts (not counted as runs).</p>\n",
            data.interruptions.len()
        );
    }
    let _ = write!(
        out,
        "<h2>Spec</h2>\n<pre>{}</pre>\n</body></html>\n",
        esc(&r.spec_toml)
    );
    out
}

/// Horizontal bars of the mean with 95% CI whiskers, labelled by the varied levels.
fn bar_chart(rows: &[&MetricRow], factors: &[String]) -> String {
    let label = |r: &MetricRow| -> String {
        factors
            .iter()
            .filter(|f| f.as_str() != "workload")
            .filter_map(|f| {
                r.levels
                    .iter()
                    .find(|(ff, _)| ff == f)
                    .map(|(_, l)| l.clone())
            })
            .collect::<Vec<_>>()
            .join(" · ")
    };
    let max = rows
        .iter()
        .map(|r| {
            r.summary
                .map(|s| s.mean_ci95.high)
                .or(r.single)
                .unwrap_or(0.0)
        })
        .fold(0.0_f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let (left, width, bar_h, gap) = (220.0, 460.0, 18.0, 8.0);
    let height = rows.len() as f64 * (bar_h + gap) + 30.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" role=\"img\">",
        left + width + 80.0
    );
    for (i, r) in rows.iter().enumerate() {
        let y = i as f64 * (bar_h + gap) + 5.0;
        let mean = r.mean().unwrap_or(0.0);
        let w = (mean / max * width).max(0.0);
        let class = if r.is_baseline { "base" } else { "bar" };
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text><rect class=\"{class}\" x=\"{left}\" y=\"{y}\" width=\"{w:.1}\" height=\"{bar_h}\"><title>{}</title></rect>",
            left - 6.0,
            y + bar_h * 0.7,
            esc(&label(r)),
            num(mean)
        );
        if let Some(s) = r.summary {
            let (x1, x2) = (
                left + s.mean_ci95.low.max(0.0) / max * width,
                left + s.mean_ci95.high / max * width,
            );
            let ym = y + bar_h / 2.0;
            let _ = write!(
                svg,
                "<line class=\"whisker\" x1=\"{x1:.1}\" x2=\"{x2:.1}\" y1=\"{ym}\" y2=\"{ym}\"/>"
            );
        }
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\">{}</text>",
            left + w + 6.0,
            y + bar_h * 0.7,
            num(mean)
        );
    }
    let axis_y = height - 18.0;
    let _ = writeln!(
        svg,
        "<line stroke=\"#888\" x1=\"{left}\" x2=\"{}\" y1=\"{axis_y}\" y2=\"{axis_y}\"/><text x=\"{left}\" y=\"{}\">0</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{} {}</text></svg>",
        left + width,
        axis_y + 14.0,
        left + width,
        axis_y + 14.0,
        num(max),
        esc(&rows[0].unit)
    );
    svg
}
