//! One line of plain language per significant effect against the baseline: what
//! changed, by how much, and what the run's telemetry says about why.

use isolab_stats::Verdict;

use crate::summary::MetricRow;

/// A finding per row called worse or better against the baseline, with the
/// throttling and migration counters of the row and of its baseline row when they
/// differ enough to explain it: CFS throttling that the baseline did not have points
/// at the quota, cpu migrations at the placement.
pub fn findings(rows: &[MetricRow], baseline: &[(String, String)]) -> Vec<String> {
    let label = |levels: &[(String, String)]| {
        levels
            .iter()
            .filter(|(f, _)| f != "workload")
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
    let mut out = Vec::new();
    for r in rows {
        let (Some(v @ (Verdict::Worse | Verdict::Better)), Some(ratio)) = (r.verdict, r.overhead)
        else {
            continue;
        };
        // The baseline row of the same workload and metric: the other levels equal
        // once the baseline's levels are put in.
        let base_levels = crate::summary::baseline_levels(&r.levels, baseline);
        let base = rows
            .iter()
            .find(|b| b.is_baseline && b.metric == r.metric && b.levels == base_levels);
        let workload = r
            .levels
            .iter()
            .find(|(f, _)| f == "workload")
            .map_or("", |(_, l)| l.as_str());
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
            "{} {workload}: {} {times} than {against} ({v}{means})",
            label(&r.levels),
            r.metric,
        );
        let throttled = r.throttled_periods.unwrap_or(0.0);
        let base_throttled = base.and_then(|b| b.throttled_periods).unwrap_or(0.0);
        if throttled >= 1.0 && throttled > 2.0 * base_throttled {
            line.push_str(&format!(
                "; CFS quota throttled it in {throttled:.0} periods per run (baseline {base_throttled:.0}): its threads wait out each period's rest once the quota is spent"
            ));
        }
        let migrations = r.migrations.unwrap_or(0.0);
        let base_migrations = base.and_then(|b| b.migrations).unwrap_or(0.0);
        if migrations >= 10.0 && migrations > 2.0 * base_migrations.max(1.0) {
            line.push_str(&format!(
                "; {migrations:.0} cpu migrations per run (baseline {base_migrations:.0})"
            ));
        }
        out.push(line);
    }
    out
}
