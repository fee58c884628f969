//! Per-cell, per-metric summaries of a stored experiment, with the overhead ratio
//! against the baseline cell.

use std::collections::{BTreeMap, HashMap};

use isolab_stats::{overhead_ratio, runs_to_decide, welch_t_test, Direction, Sample, Summary};

/// Significance level below which a difference from the baseline is shown as a number.
pub const SIGNIFICANCE: f64 = 0.05;
use isolab_store::{RunRecord, RunStatus, Telemetry};

pub use crate::data::{ExperimentData, SERIES_CELLS};

/// A `?` verdict is hopeless when a change of the noise threshold would take more than
/// this many times the runs a cell may get (the spec's `max`) to tell: ten times `max`
/// is √10 ≈ 3× the spread a decision at `max` allows, beyond what repeating helps.
pub const HOPELESS_FACTOR: u64 = 10;

/// What to summarise.
#[derive(Debug, Clone, Default)]
pub struct SummaryOptions {
    /// Levels that identify the baseline cells; other factors are matched.
    pub baseline: Vec<(String, String)>,
    /// Primary metric of each cell index; only these are summarised unless `all_metrics`.
    pub primary: BTreeMap<u32, String>,
    /// Summarise every metric, not just the primary ones.
    pub all_metrics: bool,
    /// The most counted runs a cell may get (the spec's `max` repetitions), when known.
    pub max_repetitions: Option<u32>,
}

impl SummaryOptions {
    /// Whether `row` holds its cell's primary metric (every metric of a cell without a
    /// known primary one counts as primary).
    pub fn is_primary(&self, row: &MetricRow) -> bool {
        // (`Option::is_none_or` is newer than the workspace's rust-version.)
        !matches!(self.primary.get(&row.cell), Some(p) if *p != row.metric)
    }
}

/// One metric of one cell.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MetricRow {
    /// Cell index.
    pub cell: u32,
    /// The cell's levels.
    pub levels: Vec<(String, String)>,
    /// Metric name.
    pub metric: String,
    /// Unit.
    pub unit: String,
    /// Which way is better.
    pub direction: Direction,
    /// Counted observations.
    pub n: usize,
    /// Statistics, when there are at least two observations.
    pub summary: Option<Summary>,
    /// The single value, when there is exactly one observation.
    pub single: Option<f64>,
    /// Overhead ratio against the baseline cell's mean (1.0 = none; above = worse).
    pub overhead: Option<f64>,
    /// Two-sided p-value of Welch's t-test against the baseline cell; a ratio whose
    /// p is at least [`SIGNIFICANCE`] is not shown as a number.
    pub p_value: Option<f64>,
    /// The counted observations.
    #[serde(skip)]
    pub values: Vec<f64>,
    /// Whether this cell is the baseline itself.
    pub is_baseline: bool,
    /// Bootstrap CI of the overhead ratio against the baseline.
    pub ratio_ci: Option<isolab_stats::Interval>,
    /// Verdict against the baseline (signed-rank by round or Mann-Whitney, BH across
    /// the comparison, noise threshold), when the cell is compared with one.
    pub verdict: Option<isolab_stats::Verdict>,
    /// For a `?` verdict: about how many runs per cell would decide it.
    pub runs_to_decide: Option<u64>,
    /// Whether that `?` is hopeless: the metric is too noisy to tell even a change of
    /// the noise threshold within [`HOPELESS_FACTOR`] × the runs a cell may get
    /// ([`mark_too_noisy`]).
    #[serde(skip)]
    pub too_noisy: bool,
    /// Limits read back, as stored with the first counted run.
    pub limits: Option<String>,
    /// Mean number of throttled CFS periods per run ([`Telemetry::NrThrottled`]).
    pub throttled_periods: Option<f64>,
    /// Mean cpu migrations per run ([`Telemetry::CpuMigrations`]).
    pub migrations: Option<f64>,
    /// For a row judged worse or better: the counters that moved with it and the
    /// mechanism they point to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attribution: Option<crate::attribution::Attribution>,
    /// Why the cell stopped.
    pub stop_reason: Option<String>,
    /// Failed runs of the cell.
    pub failed: usize,
    /// Runs of the cell that did not report (seed 001's DNR: beside a neighbour, the
    /// subject ran past its timeout).
    pub did_not_report: usize,
}

impl MetricRow {
    /// Whether the cell did not report (DNR) and has no counted run to show instead.
    pub fn is_dnr(&self) -> bool {
        self.did_not_report > 0 && self.n == 0
    }

    /// The mean (or the single value).
    pub fn mean(&self) -> Option<f64> {
        self.summary.map(|s| s.mean).or(self.single)
    }
}

fn mean_of(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Summarises every cell's metrics.
pub fn summarize(data: &ExperimentData, options: &SummaryOptions) -> Vec<MetricRow> {
    let mut rows = Vec::new();
    let by_cell = data.runs_by_cell();
    for cell in &data.cells {
        let runs: Vec<&RunRecord> = by_cell.get(&cell.id).cloned().unwrap_or_default();
        let counted: Vec<&&RunRecord> = runs.iter().filter(|r| r.is_counted()).collect();
        let failed = runs
            .iter()
            .filter(|r| r.status == RunStatus::Failed)
            .count();
        let did_not_report = runs
            .iter()
            .filter(|r| r.status == RunStatus::DidNotReport)
            .count();
        let limits = counted
            .first()
            .and_then(|r| r.limits.get("summary"))
            .and_then(|s| s.as_str())
            .map(str::to_owned);
        let telemetry_mean = |key: Telemetry| {
            let v: Vec<f64> = counted
                .iter()
                .filter_map(|r| r.telemetry.get(key.clone()))
                .collect();
            mean_of(&v)
        };
        let throttled_periods = telemetry_mean(Telemetry::NrThrottled);
        let migrations = telemetry_mean(Telemetry::CpuMigrations);

        // Metric names in the order the parser gave them.
        let mut names: Vec<(String, String, Direction)> = Vec::new();
        for r in &counted {
            for m in &r.metrics {
                if !names.iter().any(|(n, _, _)| *n == m.name) {
                    names.push((m.name.clone(), m.unit.clone(), m.direction));
                }
            }
        }
        let primary = options.primary.get(&cell.index);
        if !options.all_metrics {
            if let Some(p) = primary {
                names.retain(|(n, _, _)| n == p);
            }
        }
        if names.is_empty() {
            // No counted run: still show the cell, so that failures are visible, with
            // the metric's unit and direction from the cells that have it.
            let name = primary.cloned().unwrap_or_else(|| "-".into());
            let known = data
                .runs
                .iter()
                .flat_map(|r| &r.metrics)
                .find(|m| m.name == name);
            names.push((
                name,
                known.map(|m| m.unit.clone()).unwrap_or_default(),
                known.map_or(Direction::Lower, |m| m.direction),
            ));
        }
        for (name, unit, direction) in names {
            let values: Vec<f64> = counted
                .iter()
                .filter_map(|r| r.metrics.iter().find(|m| m.name == name).map(|m| m.value))
                .collect();
            let summary = Sample::new(values.clone()).ok().map(|s| s.summary());
            let single = (values.len() == 1).then(|| values[0]);
            rows.push(MetricRow {
                cell: cell.index,
                levels: cell.levels.clone(),
                metric: name,
                unit,
                direction,
                n: values.len(),
                summary,
                single,
                overhead: None,
                p_value: None,
                ratio_ci: None,
                verdict: None,
                runs_to_decide: None,
                too_noisy: false,
                values,
                is_baseline: false,
                limits: limits.clone(),
                throttled_periods,
                migrations,
                attribution: None,
                stop_reason: cell.stop_reason.clone(),
                failed,
                did_not_report,
            });
        }
    }
    attach_overheads(&mut rows, &options.baseline);
    rows
}

/// The levels of the baseline cell for a cell with `levels`: the baseline pairs
/// replace the cell's levels of those factors.
pub fn baseline_levels(
    levels: &[(String, String)],
    baseline: &[(String, String)],
) -> Vec<(String, String)> {
    levels
        .iter()
        .map(|(f, l)| match baseline.iter().find(|(bf, _)| bf == f) {
            Some((_, bl)) => (f.clone(), bl.clone()),
            None => (f.clone(), l.clone()),
        })
        .collect()
}

/// Compares every non-baseline level combination of the baseline factors against
/// the baseline (other factors matched), one comparison per combination.
pub fn baseline_comparisons(
    data: &ExperimentData,
    options: &SummaryOptions,
    compare: &crate::compare::CompareOptions,
) -> Vec<crate::compare::Comparison> {
    if options.baseline.is_empty() {
        return Vec::new();
    }
    let factors: Vec<&String> = options.baseline.iter().map(|(f, _)| f).collect();
    let mut others: Vec<Vec<(String, String)>> = Vec::new();
    for cell in &data.cells {
        let combo: Vec<(String, String)> = cell
            .levels
            .iter()
            .filter(|(f, _)| factors.contains(&f))
            .cloned()
            .collect();
        // The cells list their levels in matrix order, the baseline in the spec's
        // (sorted) order: the baseline cells are those that have all its pairs.
        let is_baseline = options.baseline.iter().all(|pair| combo.contains(pair));
        if !is_baseline && combo.len() == options.baseline.len() && !others.contains(&combo) {
            others.push(combo);
        }
    }
    let side = |select: Vec<(String, String)>| crate::compare::Side {
        data,
        label: select
            .iter()
            .map(|(f, l)| format!("{f}={l}"))
            .collect::<Vec<_>>()
            .join(" "),
        select,
        primary: options.primary.clone(),
    };
    // The configurations at once, each on its share of the cpus: one's serial steps
    // (collecting its cells) overlap another's points.
    crate::parallel::map_in_order(&others, |combo| {
        crate::compare::compare(
            &side(options.baseline.clone()),
            &side(combo.clone()),
            compare,
        )
        .ok()
    })
    .into_iter()
    .flatten()
    .collect()
}

/// `levels` sorted and written `factor=level …`: the same cell's key whatever order its
/// levels come in (rows and comparison points; the cells of a fleet's hosts).
pub fn levels_key(levels: &[(String, String)]) -> String {
    let mut levels = levels.to_vec();
    levels.sort();
    levels
        .iter()
        .map(|(f, l)| format!("{f}={l}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Rows by (sorted levels, metric): a large report has thousands of rows and points.
fn row_index(rows: &[MetricRow]) -> std::collections::HashMap<(String, String), usize> {
    rows.iter()
        .enumerate()
        .map(|(i, r)| ((levels_key(&r.levels), r.metric.clone()), i))
        .collect()
}

/// The key of `p`'s row in [`row_index`]: its levels with B's selection.
fn point_key(c: &crate::compare::Comparison, p: &crate::compare::Point) -> (String, String) {
    let levels: Vec<(String, String)> = p.levels.iter().chain(&c.b_select).cloned().collect();
    (levels_key(&levels), p.metric.clone())
}

/// Sets each row's ratio CI and verdict from the baseline comparisons, and the
/// attribution of a row judged worse or better.
pub fn attach_verdicts(rows: &mut [MetricRow], comparisons: &[crate::compare::Comparison]) {
    let index = row_index(rows);
    for c in comparisons {
        // `Comparison::attribution` by levels, without a walk over all of them per row
        // (the first of equal levels, as it finds).
        let mut attributions: HashMap<&[(String, String)], &crate::attribution::Attribution> =
            HashMap::new();
        for a in &c.attributions {
            attributions.entry(&a.levels[..]).or_insert(a);
        }
        for p in &c.points {
            if let Some(&i) = index.get(&point_key(c, p)) {
                rows[i].ratio_ci = p.ratio_ci;
                rows[i].verdict = Some(p.verdict);
                rows[i].runs_to_decide = p.runs_to_decide;
                if matches!(
                    p.verdict,
                    isolab_stats::Verdict::Worse | isolab_stats::Verdict::Better
                ) {
                    rows[i].attribution = attributions.get(&p.levels[..]).map(|a| (*a).clone());
                }
            }
        }
    }
}

/// Seed 001's DNR as the worst outcome: a row of a cell that did not report and has
/// no counted run is `worse` than its baseline (it was not measured because it did not
/// finish), unless it is a baseline itself.
pub fn mark_did_not_report(rows: &mut [MetricRow]) {
    for r in rows.iter_mut().filter(|r| r.is_dnr() && !r.is_baseline) {
        r.verdict = Some(isolab_stats::Verdict::Worse);
        r.overhead = None;
        r.ratio_ci = None;
        r.runs_to_decide = None;
    }
}

/// Marks the `?` rows whose metric is too noisy for any affordable number of runs as
/// [`MetricRow::too_noisy`]: those where even a change as large as the noise threshold
/// Δ would take more than [`HOPELESS_FACTOR`] × the most runs a cell may get
/// (`max_repetitions`, the spec's `max`; when unknown, the most counted runs any row
/// has) to tell from no change.
///
/// Those runs are [`isolab_stats::runs_to_decide`]'s significance case with the
/// observed change replaced by Δ: n·(z₁₋α/₂·s/Δ)², s = (width of the change interval)
/// / (2·z of its level). Unlike the runs to decide the point itself, they do not grow
/// when the observed change merely sits near Δ: they measure the metric's spread, so
/// more runs of it will not help and a steadier metric will.
pub fn mark_too_noisy(
    rows: &mut [MetricRow],
    comparisons: &[crate::compare::Comparison],
    max_repetitions: Option<u32>,
) {
    let runs = max_repetitions
        .map(u64::from)
        .or_else(|| rows.iter().map(|r| r.n as u64).max())
        .unwrap_or(0);
    let bound = HOPELESS_FACTOR * runs.max(1);
    let index = row_index(rows);
    for c in comparisons {
        // Δ against no change: the significance case of `runs_to_decide`.
        let rule = isolab_stats::VerdictRule {
            noise: 0.0,
            ..c.rule.clone()
        };
        for p in &c.points {
            let Some(test) = p.test() else { continue };
            if p.verdict != isolab_stats::Verdict::Inconclusive || test.change_ci.is_none() {
                continue;
            }
            let at_threshold = isolab_stats::PointTest {
                change: Some(c.rule.noise),
                ..test
            };
            // `None`: more than any number of runs `runs_to_decide` considers.
            let hopeless = !matches!(
                runs_to_decide(&rule, &at_threshold, p.n_a.min(p.n_b)),
                Some(n) if n <= bound
            );
            if let Some(&i) = index.get(&point_key(c, p)) {
                rows[i].too_noisy = hopeless;
            }
        }
    }
}

fn attach_overheads(rows: &mut [MetricRow], baseline: &[(String, String)]) {
    if baseline.is_empty() {
        return;
    }
    // Each row's baseline row by (levels, metric): the first row with them, as a
    // search in row order would find it (a large report has thousands of rows).
    type Key = (Vec<(String, String)>, String);
    let mut bases: std::collections::HashMap<Key, (Option<f64>, Vec<f64>)> =
        std::collections::HashMap::new();
    for r in rows.iter() {
        bases
            .entry((r.levels.clone(), r.metric.clone()))
            .or_insert_with(|| (r.mean(), r.values.clone()));
    }
    for row in rows.iter_mut() {
        let target = baseline_levels(&row.levels, baseline);
        row.is_baseline = target == row.levels;
        let Some((base_mean, base_values)) = bases.get(&(target, row.metric.clone())) else {
            continue;
        };
        if let (Some(a), Some(b)) = (*base_mean, row.mean()) {
            row.overhead = overhead_ratio(a, b, row.direction);
        }
        if let (Ok(a), Ok(b)) = (
            Sample::new(base_values.clone()),
            Sample::new(row.values.clone()),
        ) {
            row.p_value = Some(welch_t_test(&a, &b).p);
        }
    }
}

/// Rows for unit tests: every field but the observations and their summary empty.
#[cfg(test)]
impl MetricRow {
    pub(crate) fn for_test(
        levels: Vec<(String, String)>,
        metric: &str,
        unit: &str,
        direction: Direction,
        values: Vec<f64>,
    ) -> MetricRow {
        MetricRow {
            cell: 0,
            levels,
            metric: metric.into(),
            unit: unit.into(),
            direction,
            n: values.len(),
            summary: Sample::new(values.clone()).ok().map(|s| s.summary()),
            single: (values.len() == 1).then(|| values[0]),
            overhead: None,
            p_value: None,
            values,
            is_baseline: false,
            ratio_ci: None,
            verdict: None,
            runs_to_decide: None,
            too_noisy: false,
            limits: None,
            throttled_periods: None,
            migrations: None,
            attribution: None,
            stop_reason: None,
            failed: 0,
            did_not_report: 0,
        }
    }

    /// This row as the summary leaves it once compared with its baseline.
    pub(crate) fn compared_for_test(
        mut self,
        ratio: f64,
        ci: (f64, f64),
        verdict: isolab_stats::Verdict,
    ) -> MetricRow {
        self.overhead = Some(ratio);
        self.ratio_ci = Some(isolab_stats::Interval {
            low: ci.0,
            high: ci.1,
            level: 0.95,
        });
        self.verdict = Some(verdict);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lv(p: &str) -> Vec<(String, String)> {
        vec![
            ("placement".into(), p.into()),
            ("workload".into(), "w".into()),
        ]
    }

    #[test]
    fn baseline_levels_substitute_only_baseline_factors() {
        let b = vec![("placement".to_string(), "shared".to_string())];
        assert_eq!(baseline_levels(&lv("quota"), &b), lv("shared"));
    }

    #[test]
    fn overhead_is_oriented_by_direction() {
        let row = |p: &str, mean: f64, d: Direction| MetricRow {
            cell: 0,
            levels: lv(p),
            metric: "m".into(),
            unit: "u".into(),
            direction: d,
            n: 1,
            summary: None,
            single: Some(mean),
            overhead: None,
            p_value: None,
            ratio_ci: None,
            verdict: None,
            runs_to_decide: None,
            too_noisy: false,
            values: vec![mean, mean * 1.01],
            is_baseline: false,
            limits: None,
            throttled_periods: None,
            migrations: None,
            attribution: None,
            stop_reason: None,
            failed: 0,
            did_not_report: 0,
        };
        let mut rows = vec![
            row("shared", 100.0, Direction::Higher),
            row("quota", 50.0, Direction::Higher),
        ];
        attach_overheads(&mut rows, &[("placement".into(), "shared".into())]);
        assert_eq!(rows[0].overhead, Some(1.0));
        assert!(rows[0].is_baseline);
        assert_eq!(rows[1].overhead, Some(2.0));
        assert!(!rows[1].is_baseline);
        assert!(
            rows[1].p_value.unwrap() < SIGNIFICANCE,
            "{:?}",
            rows[1].p_value
        );
    }
}
