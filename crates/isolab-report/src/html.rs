//! The self-contained HTML report: one file, inline CSS and SVG, a few lines of
//! inline JavaScript to sort tables; no network, opens from disk.
//!
//! Sections appear when the data has them: summary, overhead against the baseline
//! (table and, with shapes or placements, the seed-002 grid of grouped bars), the
//! seed-001 isolation table and chart (degradation with a neighbour against without,
//! when the factor `neighbour` is varied), scalability over `threads` or `instances`
//! (tables, Amdahl and USL fits, charts with bootstrap bands), the seed-000 regression
//! histogram of every baseline comparison, load over time of service workloads (seed
//! 003's response time and requests per second with the active users, the totals per
//! cell and the successful requests of every run), time series of host utilisation, data
//! quality, environment and the spec.

use std::fmt::Write as _;
use std::time::Duration;

use isolab_stats::Verdict;

use crate::compare::Comparison;
use crate::isolation::{self, IsolationTable};
use crate::load::{self, LoadGroup};
use crate::plots::{
    self, Bar, BarChart, HistogramBin, HistogramChart, Marker, Percentile, ReferenceLine, Size,
    TimeSample, TimeSeries, TimeSeriesChart,
};
use crate::summary::{ExperimentData, MetricRow};
use crate::table::{num, vs_baseline};
use crate::Analysis;

pub use crate::escape::esc;

const STYLE: &str = "body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;color:#222;max-width:100rem;padding:0 1rem}\
h1{font-size:1.6rem}h2{margin-top:2.2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}\
table{border-collapse:collapse;margin:1rem 0;font-size:.85rem;display:block;max-width:100%;overflow-x:auto}th,td{border:1px solid #d4d4d4;padding:.25rem .4rem;text-align:left;vertical-align:top}\
th{background:#f3f3f3;cursor:pointer;user-select:none}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
.worse{color:#b31b1b;font-weight:600}.better{color:#11661e;font-weight:600}.same{color:#666}.undecided{color:#8a5a00}\
pre{background:#f7f7f7;padding:1rem;overflow:auto;font-size:.85rem}.note{color:#555;font-size:.9rem}\
.charts{display:flex;flex-wrap:wrap;gap:1rem}.charts>figure{margin:0}figcaption{font-size:.85rem;color:#555}\
ul.quality li{margin:.2rem 0}svg{max-width:100%;height:auto}";

/// Sorts a table by the clicked column (numbers numerically, text otherwise).
const SCRIPT: &str = "document.querySelectorAll('table.sortable th').forEach(function(th,i){th.title='sort';th.addEventListener('click',function(){\
var t=th.closest('table'),b=t.tBodies[0],rows=Array.from(b.rows),asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';\
rows.sort(function(x,y){var a=x.cells[i].dataset.v||x.cells[i].textContent,c=y.cells[i].dataset.v||y.cells[i].textContent,p=parseFloat(a),q=parseFloat(c);\
var r=(!isNaN(p)&&!isNaN(q))?p-q:a.localeCompare(c);return asc?r:-r});rows.forEach(function(r){b.appendChild(r)})})});console.log('isolab-report: ready');";

fn verdict_class(v: Option<Verdict>) -> &'static str {
    match v {
        Some(Verdict::Worse) => "worse",
        Some(Verdict::Better) => "better",
        Some(Verdict::Equivalent) => "same",
        _ => "undecided",
    }
}

fn level<'a>(levels: &'a [(String, String)], factor: &str) -> &'a str {
    levels
        .iter()
        .find(|(f, _)| f == factor)
        .map_or("", |(_, l)| l.as_str())
}

/// Renders the report of one experiment.
pub fn html(data: &ExperimentData, analysis: &Analysis) -> String {
    let r = &data.record;
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>isolab: {name}</title><style>{STYLE}</style></head><body>\n<h1>isolab experiment {id}: {name}</h1>\n",
        name = esc(&r.name),
        id = r.id,
    );
    summary_section(&mut out, data, analysis);
    stand_in_note(&mut out, &data.environment);
    overhead_section(&mut out, analysis);
    grid_section(&mut out, analysis);
    if let Some(t) = &analysis.isolation {
        isolation_section(&mut out, t);
    }
    scalability_section(&mut out, &analysis.scalability);
    histogram_section(&mut out, &analysis.comparisons);
    load_section(&mut out, &analysis.load);
    time_series_section(&mut out, data);
    quality_section(&mut out, analysis);
    out.push_str("<h2>Environment</h2>\n<table>");
    for (k, v) in &data.environment {
        let _ = write!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
    }
    out.push_str("</table>\n");
    let _ = write!(
        out,
        "<h2>Spec</h2>\n<p class=note>{}</p><pre>{}</pre>\n<script>{SCRIPT}</script>\n</body></html>\n",
        esc(r.spec_path.as_deref().unwrap_or("")),
        esc(&r.spec_toml)
    );
    out
}

/// Says, near the top, which inputs of the experiment stand in for the seed's own (an
/// asset's `asset.NAME.stand_in` in the environment), so that no reader takes a
/// generated video for the paper's.
fn stand_in_note(out: &mut String, environment: &[(String, String)]) {
    let stand_ins: Vec<String> = environment
        .iter()
        .filter_map(|(k, v)| {
            let name = k.strip_prefix("asset.")?.strip_suffix(".stand_in")?;
            Some(format!("<b>{}</b>: {}", esc(name), esc(v)))
        })
        .collect();
    if !stand_ins.is_empty() {
        let _ = writeln!(
            out,
            "<p class=note>Stand-in inputs (not the seed's own): {}.</p>",
            stand_ins.join("; ")
        );
    }
}

/// Renders the report of fleet `id` (`name`, asked of Slurm as `request`): every
/// configuration against its baseline within each host, pooled over hosts with the host
/// as a block ([`crate::fleet::pooled`]), configurations whose effect differs between
/// hosts flagged; then each host's own summary and environment.
pub fn fleet_html(
    id: i64,
    name: &str,
    request: &str,
    design: crate::fleet::Design,
    points: &[crate::fleet::PooledPoint],
    hosts: &[crate::fleet::HostData],
    analyses: &[Analysis],
) -> String {
    let warning = match design {
        crate::fleet::Design::Split => format!(
            "<p class=worse><b>Warning:</b> {}.</p>\n",
            esc(crate::fleet::SPLIT_WARNING)
        ),
        crate::fleet::Design::Blocked => String::new(),
    };
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>isolab fleet: {name}</title><style>{STYLE}</style></head><body>\n<h1>isolab fleet {id}: {name}</h1>\n<p>{n} ({list}); asked of Slurm as <code>{request}</code>. Each host ran {cells} in its own shuffled rounds, as an experiment of its own.</p>\n",
        name = esc(name),
        n = crate::fleet::hosts(hosts.len()),
        cells = match design {
            crate::fleet::Design::Blocked => "every cell",
            crate::fleet::Design::Split => "its share of the cells",
        },
        list = esc(&hosts.iter().map(|h| format!("{} (experiment {})", h.host, h.data.record.id)).collect::<Vec<_>>().join(", ")),
        request = esc(request),
    );
    out.push_str("<h2>Pooled over hosts</h2>\n<p class=note>Each configuration against its baseline within each host (the log ratio of the means and its variance), pooled with equal weight per host: a randomised complete block design with the host as the block, so no comparison confounds a configuration with a machine. Ratio above 1 = worse, oriented by the metric's direction; 95% Welch–Satterthwaite Student-t interval. “Differs by host”: Cochran's Q test of a configuration × host interaction (p &lt; 0.05), with I²; such a pooled ratio describes no single host. “Ignoring hosts”: the ratio of the plain means over all hosts' runs, which measures the hosts whenever they contributed unequal shares.</p>\n");
    if points.is_empty() {
        out.push_str(
            "<p>No configuration could be compared with its baseline on any host yet.</p>\n",
        );
    } else {
        out.push_str(&warning);
        out.push_str(&crate::fleet::pooled_table(points, design).render_html());
        let differing: Vec<String> = points
            .iter()
            .filter(|p| p.comparison.heterogeneity.is_some_and(|h| h.differs()))
            .map(|p| format!("{} ({})", crate::summary::levels_key(&p.levels), p.metric))
            .collect();
        if !differing.is_empty() {
            let _ = writeln!(
                out,
                "<p class=worse>Effect differs between hosts: {}. Read the per-host ratios.</p>",
                esc(&differing.join("; "))
            );
        }
    }
    for (h, analysis) in hosts.iter().zip(analyses) {
        let _ = writeln!(
            out,
            "<section><h2>Host {} (experiment {})</h2>",
            esc(&h.host),
            h.data.record.id
        );
        if design == crate::fleet::Design::Split {
            out.push_str("<p class=note>This host ran only its share of the cells; its own comparisons are within the host.</p>\n");
        }
        summary_section(&mut out, &h.data, analysis);
        out.push_str("<details><summary>Environment</summary><table>");
        for (k, v) in &h.data.environment {
            let _ = write!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
        }
        out.push_str("</table></details></section>\n");
    }
    if let Some(first) = hosts.first() {
        let r = &first.data.record;
        let _ = write!(
            out,
            "<h2>Spec</h2>\n<p class=note>{}</p><pre>{}</pre>\n",
            esc(r.spec_path.as_deref().unwrap_or("")),
            esc(&r.spec_toml)
        );
    }
    let _ = write!(out, "<script>{SCRIPT}</script>\n</body></html>\n");
    out
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
    out.push_str("<th>metric</th><th>n</th><th>mean</th><th>±95% CI</th><th>CV</th><th>vs baseline</th><th>throttled periods</th><th>cpu migrations</th><th>limits (read back)</th><th>stop reason</th></tr></thead><tbody>\n");
    for row in &a.rows {
        summary_row(out, row, &a.factors);
    }
    out.push_str("</tbody></table>\n");
    let findings = crate::findings::findings(&a.rows, &a.options.baseline);
    if !findings.is_empty() {
        out.push_str("<h3>Findings</h3>\n<ul class=findings>\n");
        for f in findings {
            let _ = writeln!(out, "<li>{}</li>", esc(&f));
        }
        out.push_str("</ul>\n");
    }
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

fn summary_row(out: &mut String, row: &MetricRow, factors: &[String]) {
    out.push_str("<tr>");
    for f in factors {
        let _ = write!(out, "<td>{}</td>", esc(level(&row.levels, f)));
    }
    let mean = row.mean();
    let _ = writeln!(
        out,
        "<td>{} ({})</td><td class=n>{}</td><td class=n data-v=\"{}\">{}</td><td class=n>{}</td><td class=n>{}</td><td class=\"n {}\" data-v=\"{}\">{}</td><td class=n>{}</td><td class=n>{}</td><td>{}</td><td>{}</td></tr>",
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
        esc(row.limits.as_deref().unwrap_or("-")),
        stop_cell(row.stop_reason.as_deref()),
    );
}

/// Overhead against the baseline: rows are the matched levels and metric, columns the
/// non-baseline configurations.
fn overhead_section(out: &mut String, a: &Analysis) {
    if a.comparisons.is_empty() {
        return;
    }
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

/// Seed 002's figure: overhead ratio per shape, one bar per configuration, CI
/// whiskers and verdict markers; one chart per workload and metric.
fn grid_section(out: &mut String, a: &Analysis) {
    if a.comparisons.is_empty() {
        return;
    }
    let has_shape = a.factors.iter().any(|f| f == "shape");
    let mut charts: Vec<(String, String)> = Vec::new();
    for p in a.comparisons.iter().flat_map(|c| &c.points) {
        let k = (level(&p.levels, "workload").to_owned(), p.metric.clone());
        if !charts.contains(&k) {
            charts.push(k);
        }
    }
    out.push_str("<h2>Overhead by configuration</h2>\n<div class=charts>\n");
    for (workload, metric) in &charts {
        let mut categories: Vec<String> = Vec::new();
        let groups: Vec<String> = a.comparisons.iter().map(|c| c.b.clone()).collect();
        let mut bars = Vec::new();
        for (g, c) in a.comparisons.iter().enumerate() {
            for p in c
                .points
                .iter()
                .filter(|p| level(&p.levels, "workload") == workload && &p.metric == metric)
            {
                let Some(ratio) = p.ratio else { continue };
                let category = if has_shape {
                    level(&p.levels, "shape").to_owned()
                } else {
                    "all".to_owned()
                };
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
        }
        let chart = BarChart {
            title: format!("{workload}: overhead ratio of {metric}"),
            y_label: "overhead ratio (× baseline)".into(),
            x_label: if has_shape {
                "shape".into()
            } else {
                String::new()
            },
            categories,
            groups,
            bars,
            reference: Some(ReferenceLine {
                value: 1.0,
                label: "1.0 = baseline, above = worse".into(),
            }),
            size: Size {
                width: 640,
                height: 380,
            },
        };
        let _ = writeln!(out, "<figure>{}</figure>", plots::grouped_bars(&chart));
    }
    out.push_str("</div>\n");
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

/// Throughput over `threads` and `instances`: per factor, the table of levels, one line
/// per curve with both fits, and one chart per curve.
fn scalability_section(out: &mut String, curves: &[crate::ScalingCurve]) {
    if curves.is_empty() {
        return;
    }
    out.push_str("<h2>Scalability</h2>\n");
    for factor in crate::scalability::FACTORS {
        let of: Vec<&crate::ScalingCurve> = curves.iter().filter(|c| c.factor == factor).collect();
        if of.is_empty() {
            continue;
        }
        let per_instance = of
            .iter()
            .any(|c| c.points.iter().any(|p| p.per_instance.is_some()));
        let _ = write!(
            out,
            "<h3>Over {f}</h3>\n<p class=note>{}. Click a column to sort.</p>\n<table class=sortable><thead><tr><th>group</th><th>throughput</th><th>{f}</th><th>n</th><th>mean</th><th>±95% CI</th><th>speedup</th><th>efficiency</th>{}</tr></thead><tbody>\n",
            esc(&crate::scalability::title(factor)),
            if per_instance { "<th>per instance</th>" } else { "" },
            f = esc(factor),
        );
        for c in &of {
            for p in &c.points {
                let dash = || "-".to_owned();
                let _ = writeln!(
                    out,
                    "<tr><td>{}</td><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n data-v=\"{}\">{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td>{}</tr>",
                    esc(&c.group_label),
                    esc(&c.label()),
                    p.n,
                    p.runs,
                    p.mean,
                    num(p.mean),
                    p.ci.map_or_else(dash, |ci| num((ci.high - ci.low) / 2.0)),
                    p.speedup.map_or_else(dash, |s| format!("{s:.2}×")),
                    p.efficiency.map_or_else(dash, |e| format!("{:.0}%", e * 100.0)),
                    if per_instance {
                        format!("<td class=n>{}</td>", p.per_instance.map_or_else(dash, num))
                    } else {
                        String::new()
                    },
                );
            }
        }
        out.push_str("</tbody></table>\n<ul class=fits>");
        for c in &of {
            let _ = write!(
                out,
                "<li><b>{} · {}</b>: {}</li>",
                esc(&c.group_label),
                esc(&c.metric),
                esc(&c.fit_line())
            );
        }
        out.push_str("</ul>\n<p class=note>Charts: points are the mean throughput of the runs with its 95% CI; the solid line is the preferred model (lower AIC) over its shaded bootstrap band, the dashed line the other model, the dotted line linear scaling from X(1).</p>\n<div class=charts>\n");
        for c in &of {
            let _ = writeln!(
                out,
                "<figure>{}</figure>",
                plots::scaling(&crate::scalability::chart(c))
            );
        }
        out.push_str("</div>\n");
    }
}

fn histogram_section(out: &mut String, comparisons: &[Comparison]) {
    let with: Vec<&Comparison> = comparisons
        .iter()
        .filter(|c| c.histogram.is_some())
        .collect();
    if with.is_empty() {
        return;
    }
    out.push_str("<h2>Regression histograms</h2>\n<p class=note>Seed 000's measure per point: regression = 100·(B − A)/min(A, B) of the means, sign flipped for higher-is-better metrics, so positive = B worse.</p>\n<div class=charts>\n");
    for c in with {
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

/// Seed 003's Fig 4.10 per workload and request (response time, and requests per second
/// with the users on a second axis), the totals per cell, and Table 2.2: successful
/// requests per run (rows) and cell (columns).
fn load_section(out: &mut String, groups: &[LoadGroup]) {
    if groups.is_empty() {
        return;
    }
    out.push_str("<h2>Load over time</h2>\n<p class=note>Per workload and named request, as the load generator reported it second by second during the counted runs. Totals: mean ± the half-width of the 95% Student-t interval over repetitions; requests/s counts successful requests over the load's duration; p99/s is the request-weighted mean of the per-second p99 (per-second percentiles cannot give a whole run's). Click a column to sort.</p>\n");
    for g in groups {
        let _ = write!(
            out,
            "<h3 class=load>{}</h3>\n<div class=charts>",
            esc(&g.title())
        );
        if let Some(chart) = load::latency_chart(g) {
            let _ = write!(out, "<figure>{}</figure>", plots::time_series(&chart));
        }
        let _ = writeln!(
            out,
            "<figure>{}</figure></div>\n<p class=note>{}</p>",
            plots::time_series(&load::rate_chart(g)),
            esc(&load::caption(g))
        );
        out.push_str("<table class=sortable><thead><tr><th>cell</th><th>runs</th><th>successful</th><th>failed</th><th>requests/s</th><th>mean (ms)</th><th>p99/s (ms)</th></tr></thead><tbody>\n");
        for l in &g.lines {
            let t = &l.totals;
            let estimate = |e: Option<load::Estimate>| match e {
                Some(e) => format!("<td class=n data-v=\"{}\">{}</td>", e.mean, esc(&e.text())),
                None => "<td class=n>-</td>".to_owned(),
            };
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td class=n>{}</td>{}{}{}{}{}</tr>",
                esc(&l.label),
                t.runs.len(),
                estimate(Some(t.successful)),
                estimate(Some(t.failed)),
                estimate(Some(t.rate)),
                estimate(t.latency_mean_ms),
                estimate(t.latency_p99_ms),
            );
        }
        out.push_str(
            "</tbody></table>\n<table class=per-run><thead><tr><th>successful requests, run</th>",
        );
        for l in &g.lines {
            let _ = write!(out, "<th>{}</th>", esc(&l.label));
        }
        out.push_str("</tr></thead><tbody>\n");
        let repetitions: std::collections::BTreeSet<u32> = g
            .lines
            .iter()
            .flat_map(|l| l.totals.runs.iter().map(|r| r.repetition))
            .collect();
        for rep in repetitions {
            let _ = write!(out, "<tr><td>{rep}</td>");
            for l in &g.lines {
                match l.totals.runs.iter().find(|r| r.repetition == rep) {
                    Some(r) => {
                        let _ = write!(
                            out,
                            "<td class=n title=\"run {}, {} failed\">{}</td>",
                            r.run, r.failed, r.successful
                        );
                    }
                    None => out.push_str("<td class=n>-</td>"),
                }
            }
            out.push_str("</tr>\n");
        }
        out.push_str("<tr><th>mean</th>");
        for l in &g.lines {
            let _ = write!(out, "<th class=n>{}</th>", num(l.totals.successful.mean));
        }
        out.push_str("</tr>\n</tbody></table>\n");
    }
}

fn time_series_section(out: &mut String, data: &ExperimentData) {
    let with: Vec<_> = data
        .series
        .iter()
        .filter(|(_, _, s)| s.iter().any(|x| !x.points.is_empty()))
        .collect();
    if with.is_empty() {
        return;
    }
    out.push_str("<h2>Host utilisation during a run</h2>\n<p class=note>Per-core utilisation sampled at 10 Hz during the first counted run of each cell.</p>\n<div class=charts>\n");
    for (cell_index, run, series) in with {
        let label = data
            .cells
            .iter()
            .find(|c| c.index == *cell_index)
            .map_or(String::new(), |c| short_label(data, &c.levels));
        let chart = TimeSeriesChart {
            title: format!("run {run}: {label}"),
            y_label: "cpu utilisation (%)".into(),
            y_range: Some((0.0, 100.0)),
            series: series
                .iter()
                .map(|s| TimeSeries {
                    name: s.name.trim_end_matches("_util").to_owned(),
                    samples: s
                        .points
                        .iter()
                        .filter(|(t, v)| t.is_finite() && *t >= 0.0 && v.is_finite())
                        .map(|&(t, value)| TimeSample {
                            t: Duration::from_secs_f64(t),
                            value,
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            size: Size {
                width: 520,
                height: 260,
            },
            ..Default::default()
        };
        let _ = writeln!(out, "<figure>{}</figure>", plots::time_series(&chart));
    }
    out.push_str("</div>\n");
}

/// The levels of the factors that vary between cells, joined with " · ".
fn short_label(data: &ExperimentData, levels: &[(String, String)]) -> String {
    levels
        .iter()
        .filter(|(f, l)| data.cells.iter().any(|c| level(&c.levels, f) != l))
        .map(|(_, l)| l.as_str())
        .collect::<Vec<_>>()
        .join(" · ")
}

fn quality_section(out: &mut String, a: &Analysis) {
    out.push_str("<h2>Data quality</h2>\n<ul class=quality>");
    for line in crate::quality::quality_lines(&a.quality) {
        let _ = write!(out, "<li>{}</li>", esc(&line));
    }
    out.push_str("</ul>\n");
}
