//! The self-contained HTML report: one file, inline CSS and SVG, a few lines of
//! inline JavaScript to sort tables; no network, opens from disk.
//!
//! This module writes only the page: its head, style and script around the sections.
//! The sections themselves, in their order ([`crate::sections::SECTIONS`]), appear
//! when the data has them: summary and findings, overhead against the baseline (table
//! and the seed-002 grid of grouped bars), the seed-001 isolation table and chart,
//! scalability over `threads` or `instances`, the seed-000 regression histograms, load
//! over time of service workloads, time series of host utilisation, data quality,
//! environment and the spec. A fleet's report ([`fleet_html`]) pools the hosts, then
//! shows each host's sections of [`Reach::Host`].

use std::fmt::Write as _;

use crate::analysis::Analysis;
use crate::data::ExperimentData;
use crate::sections::{environment, spec, Reach, Report};

pub use crate::escape::esc;
pub use crate::sections::isolation::isolation_chart;

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
    out.push_str(&Report::new(data, analysis).html(Reach::Report));
    let _ = write!(out, "<script>{SCRIPT}</script>\n</body></html>\n");
    out
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
        out.push_str(&Report::new(&h.data, analysis).html(Reach::Host));
        let _ = writeln!(
            out,
            "<details><summary>Environment</summary><table>{}</table></details></section>",
            environment::rows(&h.data.environment)
        );
    }
    if let Some(first) = hosts.first() {
        out.push_str(&spec::html(&first.data.record));
    }
    let _ = write!(out, "<script>{SCRIPT}</script>\n</body></html>\n");
    out
}
