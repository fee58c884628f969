//! One line of plain language per significant effect against the baseline: what
//! changed, by how much, and what the run's telemetry says about why.

use std::collections::HashMap;

use isolab_stats::Verdict;

use crate::summary::MetricRow;

/// A row's metric and levels.
type RowKey<'a> = (&'a str, &'a [(String, String)]);

/// A finding per row called worse or better against the baseline, with its
/// [attribution](crate::attribution): the counters that moved with it, ranked, and the
/// mechanism the first points to, or that no recorded counter explains it.
///
/// A row is named by its levels without the workload, then the workload; when the
/// workload is itself a baseline factor (`baseline = { workload = "a" }`), by its
/// levels with it, so that neither side's name is empty.
pub fn findings(rows: &[MetricRow], baseline: &[(String, String)]) -> Vec<String> {
    let workload_is_compared = baseline.iter().any(|(f, _)| f == "workload");
    let label = |levels: &[(String, String)]| {
        levels
            .iter()
            .filter(|(f, _)| workload_is_compared || f != "workload")
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let baseline_label = || {
        baseline
            .iter()
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    // The baseline rows by metric and levels: the first of each, as a search in row
    // order finds it (a large report has tens of thousands of rows).
    let mut bases: HashMap<RowKey<'_>, &MetricRow> = HashMap::new();
    for b in rows.iter().filter(|b| b.is_baseline) {
        bases.entry((b.metric.as_str(), &b.levels[..])).or_insert(b);
    }
    let mut out = Vec::new();
    for r in rows {
        let (Some(v @ (Verdict::Worse | Verdict::Better)), Some(ratio)) = (r.verdict, r.overhead)
        else {
            continue;
        };
        // The baseline row of the same workload and metric: the other levels equal
        // once the baseline's levels are put in.
        let base_levels = crate::summary::baseline_levels(&r.levels, baseline);
        let base = bases.get(&(r.metric.as_str(), &base_levels[..])).copied();
        let workload = r
            .levels
            .iter()
            .find(|(f, _)| f == "workload" && !workload_is_compared)
            .map_or("", |(_, l)| l.as_str());
        let subject = [label(&r.levels).as_str(), workload]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let times = if ratio >= 1.0 {
            format!("{ratio:.2}× worse")
        } else {
            format!("{:.2}× better", 1.0 / ratio)
        };
        let means = match (r.mean(), base.and_then(MetricRow::mean)) {
            (Some(m), Some(b)) => format!(
                ": mean {} against {} {}",
                crate::table::num(m),
                crate::table::num(b),
                r.unit
            ),
            _ => String::new(),
        };
        let against = base.map_or_else(baseline_label, |b| label(&b.levels));
        let mut line = format!(
            "{subject}: {} {times} than {against} ({v}{means})",
            r.metric,
        );
        if let Some(a) = &r.attribution {
            line.push_str("; ");
            line.push_str(&crate::table::attribution_line(a));
        }
        out.push(line);
    }
    out
}
