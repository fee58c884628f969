//! Load over time of service workloads (seed 003): [`crate::load`].

use std::fmt::Write as _;

use super::{Reach, Report, Section};
use crate::escape::esc;
use crate::load::{self, LoadGroup};
use crate::plots;
use crate::table::{num, Style};

/// Load over time, when counted runs recorded load intervals.
pub struct Load;

impl Section for Load {
    fn title(&self) -> &'static str {
        "Load over time"
    }

    fn reach(&self) -> Reach {
        Reach::Run
    }

    fn applies(&self, r: &Report) -> bool {
        !r.analysis.load.is_empty()
    }

    fn text(&self, r: &Report, style: Style) -> String {
        format!("\n{}", load::render(&r.analysis.load, style))
    }

    fn html(&self, r: &Report) -> String {
        let mut out = String::new();
        load_section(&mut out, &r.analysis.load);
        out
    }

    fn json(&self, r: &Report) -> Vec<(&'static str, serde_json::Value)> {
        vec![("load", serde_json::json!(r.analysis.load))]
    }
}

/// Seed 003's Fig 4.10 per workload and request (response time, and requests per second
/// with the users on a second axis), the totals per cell, and Table 2.2: successful
/// requests per run (rows) and cell (columns).
fn load_section(out: &mut String, groups: &[LoadGroup]) {
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
