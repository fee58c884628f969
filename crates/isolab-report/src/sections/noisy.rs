//! Why a `? (noisy)` in the summary is not a matter of more runs, and which metric of the
//! same workload could decide instead: a high percentile (`latency_p99`) where the
//! noisy metric is an extreme (`latency_max`).

use std::fmt::Write as _;

use isolab_stats::Sample;

use super::{level, Reach, Report, Section};
use crate::escape::esc;
use crate::summary::{MetricRow, HOPELESS_FACTOR};
use crate::table::{text_lines, Style};

/// One line per metric marked [`MetricRow::too_noisy`], under the summary table.
pub struct Noisy;

impl Section for Noisy {
    fn title(&self) -> &'static str {
        "Too noisy to decide"
    }

    fn reach(&self) -> Reach {
        Reach::Host
    }

    fn applies(&self, r: &Report) -> bool {
        r.analysis.rows.iter().any(|row| row.too_noisy)
    }

    fn text(&self, r: &Report, style: Style) -> String {
        text_lines(&lines(r).concat(), style)
    }

    fn html(&self, r: &Report) -> String {
        lines(r)
            .iter()
            .map(|l| format!("<p class=note>{}</p>\n", esc(l.trim_end())))
            .collect()
    }
}

/// One line per workload and metric with a noisy `?`, ending in a newline.
fn lines(r: &Report) -> Vec<String> {
    let rows: Vec<&MetricRow> = r.analysis.rows.iter().filter(|x| x.too_noisy).collect();
    let mut seen: Vec<(&str, &str)> = Vec::new();
    let noise = r.analysis.comparisons.first().map_or(0.02, |c| c.rule.noise);
    let runs = match r.analysis.options.max_repetitions {
        Some(max) => format!("the spec's max of {max} runs"),
        None => "the most runs a cell got".to_owned(),
    };
    let mut out = Vec::new();
    for row in &rows {
        let workload = level(&row.levels, "workload");
        if seen.contains(&(workload, row.metric.as_str())) {
            continue;
        }
        seen.push((workload, row.metric.as_str()));
        let same: Vec<&&MetricRow> = rows
            .iter()
            .filter(|x| level(&x.levels, "workload") == workload && x.metric == row.metric)
            .collect();
        let cv = same
            .iter()
            .filter_map(|x| x.summary.map(|s| s.cv))
            .fold(0.0, f64::max);
        let of = if workload.is_empty() {
            String::new()
        } else {
            format!(" of {workload}")
        };
        let mut line = format!(
            "? (noisy): {}{of} varies too much to decide (CV up to {:.0}%): even a {:.0}% change would take more than {HOPELESS_FACTOR} × {runs} to tell",
            row.metric,
            cv * 100.0,
            noise * 100.0,
        );
        let cells: Vec<u32> = same.iter().map(|x| x.cell).collect();
        match steadier(r, row, &cells, cv) {
            Some((name, cv)) => {
                let _ = write!(line, "; compare {name} instead (CV {:.1}%)", cv * 100.0);
            }
            None => line.push_str("; more runs will not help, a steadier metric would"),
        }
        line.push('\n');
        out.push(line);
    }
    out
}

/// The highest percentile `PREFIX_pN` of the noisy metric's `PREFIX_…` that the runs of
/// `cells` recorded, with its largest CV over those cells, when that is below `cv`.
fn steadier(r: &Report, row: &MetricRow, cells: &[u32], cv: f64) -> Option<(String, f64)> {
    let prefix = row.metric.rsplit_once('_').map_or("", |(p, _)| p);
    let ids: Vec<i64> = r
        .data
        .cells
        .iter()
        .filter(|c| cells.contains(&c.index))
        .map(|c| c.id)
        .collect();
    let runs: Vec<_> = r
        .data
        .runs
        .iter()
        .filter(|run| ids.contains(&run.cell) && run.is_counted())
        .collect();
    let percentile = |name: &str| -> Option<f64> {
        let (p, n) = name.rsplit_once("_p")?;
        (p == prefix).then_some(())?;
        n.parse::<f64>().ok().filter(|n| *n < 100.0)
    };
    let mut best: Option<(f64, &str)> = None;
    for m in runs.iter().flat_map(|run| &run.metrics) {
        if m.direction != row.direction || m.name == row.metric {
            continue;
        }
        match (percentile(&m.name), best) {
            (Some(p), Some((b, _))) if p <= b => {}
            (Some(p), _) => best = Some((p, m.name.as_str())),
            (None, _) => {}
        }
    }
    let (_, name) = best?;
    let worst_cv = ids
        .iter()
        .filter_map(|id| {
            let values: Vec<f64> = runs
                .iter()
                .filter(|run| run.cell == *id)
                .flat_map(|run| run.metrics.iter().filter(|m| m.name == name))
                .map(|m| m.value)
                .collect();
            Sample::new(values).ok().map(|s| s.summary().cv)
        })
        .fold(0.0, f64::max);
    (worst_cv < cv).then(|| (name.to_owned(), worst_cv))
}
