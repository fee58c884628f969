//! A/B comparisons of measurement points: within one experiment (`--a placement=quota
//! --b placement=pinned`, the other factors matched) or across two experiments (cells
//! matched by their levels).
//!
//! For every matched point (cell × metric) it computes the medians with their
//! order-statistic CIs, the overhead ratio of the means with a bootstrap CI, the test
//! of [`isolab_stats::test_point`] — paired by round (Wilcoxon signed-rank, paired
//! Hodges-Lehmann) when both sides are cells of one experiment that shared at least
//! [`isolab_stats::MIN_PAIRS`] rounds, else Mann-Whitney with the two-sample shift —
//! the relative change with its CI (and the unpaired CI, to show what pairing gained),
//! the seed-000 regression %, and — after Benjamini-Hochberg across all points — one
//! of four verdicts: worse, better, ≈ or ? (with the runs that would decide). The
//! regression % of all points is binned into the seed-000 histogram.

use std::collections::BTreeMap;

use isolab_stats::{
    benjamini_hochberg, degradation_pct, median_ci, overhead_ratio, pairs_by_round,
    regression_histogram, regression_pct, runs_to_decide, test_point, Center, Direction, Histogram,
    Interval, Method, PointData, Resamples, Sample, Verdict, VerdictRule,
};
use isolab_store::RunRecord;

use crate::data::ExperimentData;

/// How to compare.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// Significance level and noise threshold of verdicts.
    pub rule: VerdictRule,
    /// Confidence level of every interval.
    pub level: f64,
    /// Bootstrap resamples for ratio CIs.
    pub resamples: usize,
    /// Bootstrap seed (fixed, so that reports are reproducible).
    pub seed: u64,
    /// Width of the regression histogram's bins, in percent.
    pub bin_width: f64,
    /// Compare every metric, not only each workload's primary one.
    pub all_metrics: bool,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            rule: VerdictRule::default(),
            level: 0.95,
            resamples: 2000,
            seed: 0x1501_ab00,
            bin_width: 5.0,
            all_metrics: false,
        }
    }
}

/// One side of a comparison: an experiment and the levels that select its cells.
#[derive(Debug, Clone)]
pub struct Side<'a> {
    /// The experiment.
    pub data: &'a ExperimentData,
    /// Levels a cell must have to be on this side (empty: every cell).
    pub select: Vec<(String, String)>,
    /// Primary metric of each cell index.
    pub primary: BTreeMap<u32, String>,
    /// How the side is named in output, e.g. `placement=quota` or `experiment 3`.
    pub label: String,
}

/// Why a comparison cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompareError {
    /// A selector matches no cell.
    #[error("no cell of experiment {experiment} has {select}: its cells are {cells}")]
    NoCells {
        /// The experiment.
        experiment: i64,
        /// The selector, as `factor=level …`.
        select: String,
        /// What its cells are.
        cells: String,
    },
    /// Both sides select the same cells of one experiment.
    #[error("{a} and {b} select the same cells of experiment {experiment}: a comparison of them with themselves says nothing; choose another level on one side")]
    SameSelection {
        /// The experiment.
        experiment: i64,
        /// Side A's label.
        a: String,
        /// Side B's label.
        b: String,
    },
    /// The two sides share no point.
    #[error("no point of {a} matches a point of {b}: the cells' other levels differ ({a_keys} vs {b_keys})")]
    NoMatches {
        /// Side A's label.
        a: String,
        /// Side B's label.
        b: String,
        /// A's keys.
        a_keys: String,
        /// B's keys.
        b_keys: String,
    },
}

/// One compared measurement point.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Point {
    /// The levels the two sides share (the match key).
    pub levels: Vec<(String, String)>,
    /// Metric name.
    pub metric: String,
    /// Unit.
    pub unit: String,
    /// Which way is better.
    pub direction: Direction,
    /// Observations of A and B.
    pub n_a: usize,
    /// Observations of B.
    pub n_b: usize,
    /// Median of A.
    pub median_a: f64,
    /// Median of B.
    pub median_b: f64,
    /// CI of A's median.
    pub median_a_ci: Option<Interval>,
    /// CI of B's median.
    pub median_b_ci: Option<Interval>,
    /// Coefficient of variation of A and B.
    pub cv_a: Option<f64>,
    /// CV of B.
    pub cv_b: Option<f64>,
    /// Overhead ratio of the means (above 1 = B worse).
    pub ratio: Option<f64>,
    /// Its bootstrap CI.
    pub ratio_ci: Option<Interval>,
    /// Relative change of B against A from the Hodges-Lehmann shift, as a fraction;
    /// positive = worse.
    pub change: Option<f64>,
    /// Its CI.
    pub change_ci: Option<Interval>,
    /// Seed 000's regression %.
    pub regression_pct: Option<f64>,
    /// Seed 001's degradation %.
    pub degradation_pct: Option<f64>,
    /// Its interval at level 1 − 2α, for the equivalence test (≈).
    pub equivalence_ci: Option<Interval>,
    /// The unpaired (two-sample) interval of the change, beside `change_ci` when the
    /// point was paired: what pairing gained.
    pub unpaired_change_ci: Option<Interval>,
    /// Paired by round or unpaired.
    pub method: Option<Method>,
    /// Rounds in which both sides ran.
    pub pairs: usize,
    /// Two-sided p-value of the test used (signed-rank when paired, else
    /// Mann-Whitney).
    pub p: Option<f64>,
    /// Mann-Whitney's two-sided p-value on all runs (benchstat's), whichever test
    /// decided.
    pub p_unpaired: Option<f64>,
    /// Benjamini-Hochberg adjusted p-value across all points.
    pub q: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
    /// For a `?` point: about how many runs per side would decide it, from the
    /// observed spread (`None`: no affordable number, or decided).
    pub runs_to_decide: Option<u64>,
}

impl Point {
    /// The point's test as the statistics crate states it, when it was tested.
    pub fn test(&self) -> Option<isolab_stats::PointTest> {
        Some(isolab_stats::PointTest {
            method: self.method?,
            pairs: self.pairs,
            p: self.p.unwrap_or(f64::NAN),
            p_unpaired: self.p_unpaired.unwrap_or(f64::NAN),
            change: self.change,
            change_ci: self.change_ci,
            equivalence_ci: self.equivalence_ci,
            unpaired_change_ci: self.unpaired_change_ci,
        })
    }

    /// The CI width of the change, paired against unpaired (below 1: pairing
    /// narrowed it); `None` unless the point was paired.
    pub fn pairing_gain(&self) -> Option<f64> {
        if self.method != Some(Method::Paired) {
            return None;
        }
        let (p, u) = (self.change_ci?, self.unpaired_change_ci?);
        let (wp, wu) = (p.high - p.low, u.high - u.low);
        (wu > 0.0).then(|| wp / wu)
    }
}

/// All compared points with the regression histogram.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Comparison {
    /// Side A's label.
    pub a: String,
    /// Side B's label.
    pub b: String,
    /// The levels that selected B's cells (empty across experiments without `--b`).
    pub b_select: Vec<(String, String)>,
    /// Matched points, in A's cell order.
    pub points: Vec<Point>,
    /// Histogram of the points' regression %.
    pub histogram: Option<Histogram>,
    /// Points judged worse.
    pub worse: usize,
    /// Points judged better.
    pub better: usize,
    /// Points judged equivalent within the noise threshold.
    pub equivalent: usize,
    /// Points the data cannot decide yet.
    pub inconclusive: usize,
    /// Keys present on one side only.
    pub unmatched: Vec<String>,
    /// The rule used.
    pub rule: VerdictRule,
    /// Geometric mean of the points' overhead ratios, as benchstat's `geomean` row;
    /// `None` when no point has a positive ratio.
    pub geomean: Option<GeoMean>,
    /// How many points were measured steadily enough: seed 000 asks that 95% of
    /// them have a CV below 5%.
    pub steady: Steady,
    /// For each cell pair with a decided point (worse or better), the counters that
    /// moved with it ([`crate::attribution`]).
    pub attributions: Vec<crate::attribution::Attribution>,
}

impl Comparison {
    /// The attribution of the cell pair whose shared levels are `levels`, when one of
    /// its points was decided.
    pub fn attribution(
        &self,
        levels: &[(String, String)],
    ) -> Option<&crate::attribution::Attribution> {
        self.attributions.iter().find(|a| a.levels == levels)
    }

    /// Seed 000's regression histogram once per level of `factor` (the slides draw one
    /// without and one with the noisy neighbour), `none` first and the others in the
    /// order the points meet them, each with its points' regressions and the pooled histogram's bin width;
    /// empty unless the points have two or more levels of `factor`.
    pub fn histograms_by(&self, factor: &str) -> Vec<LevelHistogram> {
        let Some(pooled) = &self.histogram else {
            return Vec::new();
        };
        let width = pooled.bin_width;
        let mut groups: Vec<(String, Vec<f64>)> = Vec::new();
        for p in &self.points {
            let (Some(level), Some(r)) = (
                p.levels.iter().find(|(f, _)| f == factor).map(|(_, l)| l),
                p.regression_pct,
            ) else {
                continue;
            };
            match groups.iter_mut().find(|(l, _)| l == level) {
                Some((_, v)) => v.push(r),
                None => groups.push((level.clone(), vec![r])),
            }
        }
        if groups.len() < 2 {
            return Vec::new();
        }
        // Without (the `none` level) before with.
        groups.sort_by_key(|(level, _)| level != crate::data::NONE);
        groups
            .into_iter()
            .filter_map(|(level, regressions)| {
                regression_histogram(&regressions, width).map(|histogram| LevelHistogram {
                    level,
                    histogram,
                    regressions,
                })
            })
            .collect()
    }
}

/// The regression histogram of the points at one level of a factor
/// ([`Comparison::histograms_by`]).
#[derive(Debug, Clone)]
pub struct LevelHistogram {
    /// The level.
    pub level: String,
    /// Its points' histogram.
    pub histogram: Histogram,
    /// Its points' regressions, in point order.
    pub regressions: Vec<f64>,
}

/// Seed 000's acceptance of a measurement: the share of points whose coefficient of
/// variation is below [`Steady::CV`] on both sides, against the seed's [`Steady::SHARE`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Steady {
    /// Points with a CV below [`Steady::CV`] on both sides.
    pub below: usize,
    /// Points with a CV on both sides.
    pub of: usize,
}

impl Steady {
    /// The CV a steady point stays below.
    pub const CV: f64 = 0.05;
    /// The share of steady points seed 000 asks for.
    pub const SHARE: f64 = 0.95;

    /// Counts the steady points of `points`.
    pub fn of(points: &[Point]) -> Steady {
        let both: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|p| Some((p.cv_a?, p.cv_b?)))
            .collect();
        Steady {
            below: both
                .iter()
                .filter(|(a, b)| *a < Self::CV && *b < Self::CV)
                .count(),
            of: both.len(),
        }
    }

    /// Their share, `None` without points.
    pub fn share(&self) -> Option<f64> {
        (self.of > 0).then(|| self.below as f64 / self.of as f64)
    }

    /// One line: `672 of 700 points (96.0%) have a CV below 5% on both sides: seed 000 asks 95%, met`.
    pub fn line(&self) -> Option<String> {
        let share = self.share()?;
        Some(format!(
            "{} of {} points ({:.1}%) have a CV below {:.0}% on both sides: seed 000 asks {:.0}%, {}",
            self.below,
            self.of,
            share * 100.0,
            Self::CV * 100.0,
            Self::SHARE * 100.0,
            if share >= Self::SHARE { "met" } else { "not met" }
        ))
    }
}

/// The `k` points of `points` whose regression moved furthest from 0, furthest first.
pub fn moved_most(points: &[Point], k: usize) -> Vec<&Point> {
    let mut moved: Vec<&Point> = points
        .iter()
        .filter(|p| p.regression_pct.is_some_and(f64::is_finite))
        .collect();
    moved.sort_by(|a, b| {
        let r = |p: &Point| p.regression_pct.unwrap_or(0.0).abs();
        r(b).total_cmp(&r(a))
    });
    moved.truncate(k);
    moved
}

/// The geometric mean of the overhead ratios of a comparison's points
/// ([`isolab_stats::geometric_mean`]): B against A, above 1 = worse.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GeoMean {
    /// The geometric mean.
    pub ratio: f64,
    /// How many points it covers: those with a positive, finite ratio.
    pub points: usize,
}

/// A metric's unit, direction, and observations with the round of each.
type Values = (String, Direction, Vec<(u32, f64)>);
/// A side's cells by match key: the shared levels, each metric's unit, direction and
/// observations, and the cell's counted runs (for attribution).
type Collected<'a> = BTreeMap<
    String,
    (
        Vec<(String, String)>,
        BTreeMap<String, Values>,
        Vec<&'a RunRecord>,
    ),
>;

/// Counted observations of each selected cell's metrics, keyed by the cell's levels
/// without the selector factors, then by metric.
fn collect<'a>(
    side: &Side<'a>,
    by_cell: &std::collections::HashMap<i64, Vec<&'a RunRecord>>,
    drop: &[String],
    all_metrics: bool,
) -> Result<Collected<'a>, CompareError> {
    let mut out = BTreeMap::new();
    let mut any = false;
    for cell in &side.data.cells {
        if !side.select.iter().all(|pair| cell.levels.contains(pair)) {
            continue;
        }
        any = true;
        let shared: Vec<(String, String)> = cell
            .levels
            .iter()
            .filter(|(f, _)| !drop.contains(f))
            .cloned()
            .collect();
        let key = shared
            .iter()
            .map(|(f, l)| format!("{f}={l}"))
            .collect::<Vec<_>>()
            .join(" ");
        let runs: Vec<&RunRecord> = by_cell
            .get(&cell.id)
            .map(|rs| rs.iter().copied().filter(|r| r.is_counted()).collect())
            .unwrap_or_default();
        let mut metrics: BTreeMap<String, Values> = BTreeMap::new();
        for r in &runs {
            for m in &r.metrics {
                if !all_metrics && side.primary.get(&cell.index).is_some_and(|p| *p != m.name) {
                    continue;
                }
                // The name is copied once a cell, not once a run.
                match metrics.get_mut(&m.name) {
                    Some(values) => values.2.push((r.round, m.value)),
                    None => {
                        let mut values = Vec::with_capacity(runs.len());
                        values.push((r.round, m.value));
                        metrics.insert(m.name.clone(), (m.unit.clone(), m.direction, values));
                    }
                }
            }
        }
        out.insert(key, (shared, metrics, runs));
    }
    if !any {
        return Err(CompareError::NoCells {
            experiment: side.data.record.id,
            select: side
                .select
                .iter()
                .map(|(f, l)| format!("{f}={l}"))
                .collect::<Vec<_>>()
                .join(" "),
            cells: side
                .data
                .cells
                .iter()
                .map(|c| c.key.clone())
                .take(6)
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    Ok(out)
}

/// Compares side B against side A.
///
/// Two sides that select the same cells of the same experiment (the same pairs in any
/// order) are refused with [`CompareError::SameSelection`].
pub fn compare(a: &Side, b: &Side, options: &CompareOptions) -> Result<Comparison, CompareError> {
    let same_pairs =
        a.select.len() == b.select.len() && a.select.iter().all(|pair| b.select.contains(pair));
    if same_pairs && a.data.record.id == b.data.record.id {
        return Err(CompareError::SameSelection {
            experiment: a.data.record.id,
            a: a.label.clone(),
            b: b.label.clone(),
        });
    }
    let mut drop: Vec<String> = a
        .select
        .iter()
        .chain(&b.select)
        .map(|(f, _)| f.clone())
        .collect();
    drop.sort();
    drop.dedup();
    // Both sides' runs by cell, grouped once when they are of one experiment.
    let by_cell_a = a.data.runs_by_cell();
    let by_cell_b = (!std::ptr::eq(a.data, b.data)).then(|| b.data.runs_by_cell());
    let side_a = collect(a, &by_cell_a, &drop, options.all_metrics)?;
    let side_b = collect(
        b,
        by_cell_b.as_ref().unwrap_or(&by_cell_a),
        &drop,
        options.all_metrics,
    )?;
    // Runs of one experiment that shared a round shared the machine's state.
    let pairable = a.data.record.id == b.data.record.id;
    let mut jobs = Vec::new();
    let mut unmatched: Vec<String> = side_b
        .keys()
        .filter(|k| !side_a.contains_key(*k))
        .cloned()
        .collect();
    for (key, (levels, metrics_a, _)) in &side_a {
        let Some((_, metrics_b, _)) = side_b.get(key) else {
            unmatched.push(key.clone());
            continue;
        };
        for (metric, (unit, direction, va)) in metrics_a {
            let Some((_, _, vb)) = metrics_b.get(metric) else {
                continue;
            };
            jobs.push((levels, metric, unit, *direction, va, vb));
        }
    }
    // Points are independent: spread them over the cpus (the bootstrap and the
    // pairwise differences of large cells dominate a big report), each thread keeping
    // the bootstrap's draws for the sizes it met.
    let mut points: Vec<Point> = crate::parallel::map_in_order_with(
        &jobs,
        Draws::default,
        |draws, (levels, metric, unit, direction, va, vb)| {
            let values = PointValues { a: va, b: vb };
            point(
                levels, metric, unit, *direction, values, pairable, options, draws,
            )
        },
    );
    if points.is_empty() {
        return Err(CompareError::NoMatches {
            a: a.label.clone(),
            b: b.label.clone(),
            a_keys: side_a
                .keys()
                .take(4)
                .cloned()
                .collect::<Vec<_>>()
                .join("; "),
            b_keys: side_b
                .keys()
                .take(4)
                .cloned()
                .collect::<Vec<_>>()
                .join("; "),
        });
    }

    // False-discovery control across every point of this comparison.
    let with_p: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].p.is_some())
        .collect();
    let ps: Vec<f64> = with_p
        .iter()
        .map(|&i| points[i].p.unwrap_or(f64::NAN))
        .collect();
    let mut qs = vec![f64::NAN; points.len()];
    for (&i, q) in with_p.iter().zip(benjamini_hochberg(&ps)) {
        points[i].q = Some(q);
        qs[i] = q;
    }
    for (p, q) in points.iter_mut().zip(qs) {
        p.verdict = isolab_stats::verdict(&options.rule, q, p.change, p.equivalence_ci);
        if p.verdict == Verdict::Inconclusive {
            p.runs_to_decide = p
                .test()
                .and_then(|t| runs_to_decide(&options.rule, &t, p.n_a.min(p.n_b)));
        }
    }
    // What moved with each decided effect: once per cell pair, the pairs spread over
    // the cpus like the points.
    // Each cell pair's decided verdicts, in point order.
    let mut decided: std::collections::HashMap<&[(String, String)], Vec<Verdict>> =
        std::collections::HashMap::new();
    for p in &points {
        if matches!(p.verdict, Verdict::Worse | Verdict::Better) {
            decided.entry(&p.levels[..]).or_default().push(p.verdict);
        }
    }
    let pairs: Vec<_> = side_a
        .iter()
        .filter_map(|(key, (levels, _, runs_a))| {
            let verdicts = decided.get(&levels[..])?;
            side_b.get(key).map(|(_, _, runs_b)| {
                let effect = crate::attribution::Effect {
                    worse: worse_side(verdicts),
                    limits: (limits_summary(runs_a), limits_summary(runs_b)),
                    varied: match (stored_limits(runs_a), stored_limits(runs_b)) {
                        (Some(la), Some(lb)) => crate::attribution::varied(la, lb),
                        _ => Vec::new(),
                    },
                };
                (levels, runs_a, runs_b, effect)
            })
        })
        .collect();
    let attributions: Vec<crate::attribution::Attribution> =
        crate::parallel::map_in_order(&pairs, |(levels, runs_a, runs_b, effect)| {
            crate::attribution::attribute(
                levels,
                &crate::attribution::counters(runs_a.iter().copied()),
                &crate::attribution::counters(runs_b.iter().copied()),
                pairable,
                &options.rule,
                options.level,
                effect,
            )
        });
    let regressions: Vec<f64> = points.iter().filter_map(|p| p.regression_pct).collect();
    let count = |v: Verdict| points.iter().filter(|p| p.verdict == v).count();
    let ratios: Vec<f64> = points
        .iter()
        .filter_map(|p| p.ratio)
        .filter(|r| r.is_finite() && *r > 0.0)
        .collect();
    let geomean = isolab_stats::geometric_mean(&ratios).map(|ratio| GeoMean {
        ratio,
        points: ratios.len(),
    });
    let steady = Steady::of(&points);
    Ok(Comparison {
        a: a.label.clone(),
        b: b.label.clone(),
        b_select: b.select.clone(),
        histogram: regression_histogram(&regressions, options.bin_width),
        worse: count(Verdict::Worse),
        better: count(Verdict::Better),
        equivalent: count(Verdict::Equivalent),
        inconclusive: count(Verdict::Inconclusive),
        points,
        unmatched,
        rule: options.rule.clone(),
        geomean,
        steady,
        attributions,
    })
}

/// The median (the 50th percentile with linear interpolation); NaN when empty.
fn median_of(v: &[f64]) -> f64 {
    isolab_stats::percentile(v, 50.0).unwrap_or(f64::NAN)
}

fn mean_of(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Compares one point: `vb` (side B) against `va` (side A), each observation with
/// its round, before the FDR control and the verdict, which need every point of the
/// comparison. Runs of the same round are paired when `pairable`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn point(
    levels: &[(String, String)],
    metric: &str,
    unit: &str,
    direction: Direction,
    PointValues { a: va, b: vb }: PointValues<'_>,
    pairable: bool,
    o: &CompareOptions,
    draws: &mut Draws,
) -> Point {
    let pairs = if pairable {
        pairs_by_round(va, vb)
    } else {
        Vec::new()
    };
    let values = |v: &[(u32, f64)]| v.iter().map(|(_, x)| *x).collect::<Vec<f64>>();
    let (va_values, vb_values) = (values(va), values(vb));
    let (va, vb) = (&va_values[..], &vb_values[..]);
    let (sa, sb) = (Sample::new(va.to_vec()).ok(), Sample::new(vb.to_vec()).ok());
    let (median_a, median_b) = (median_of(va), median_of(vb));
    let (mean_a, mean_b) = (mean_of(va), mean_of(vb));
    let mut p = Point {
        levels: levels.to_vec(),
        metric: metric.to_owned(),
        unit: unit.to_owned(),
        direction,
        n_a: va.len(),
        n_b: vb.len(),
        median_a,
        median_b,
        median_a_ci: sa.as_ref().and_then(|s| median_ci(s, o.level)),
        median_b_ci: sb.as_ref().and_then(|s| median_ci(s, o.level)),
        cv_a: sa.as_ref().map(Sample::cv),
        cv_b: sb.as_ref().map(Sample::cv),
        ratio: overhead_ratio(mean_a, mean_b, direction),
        ratio_ci: None,
        change: None,
        change_ci: None,
        equivalence_ci: None,
        unpaired_change_ci: None,
        method: None,
        pairs: 0,
        regression_pct: regression_pct(mean_a, mean_b, direction),
        degradation_pct: degradation_pct(mean_a, mean_b, direction),
        p: None,
        p_unpaired: None,
        q: None,
        verdict: Verdict::Inconclusive,
        runs_to_decide: None,
    };
    if let (Some(sa), Some(sb)) = (&sa, &sb) {
        p.ratio_ci =
            draws
                .of(sa.len(), sb.len(), o)
                .ratio_ci(sa, sb, Center::Mean, direction, o.level);
    }
    let data = PointData {
        a: va,
        b: vb,
        pairs: &pairs,
        direction,
    };
    if let Some(t) = test_point(data, o.level, &o.rule) {
        p.method = Some(t.method);
        p.pairs = t.pairs;
        p.p = Some(t.p).filter(|v| v.is_finite());
        p.p_unpaired = Some(t.p_unpaired).filter(|v| v.is_finite());
        p.change = t.change;
        p.change_ci = t.change_ci;
        p.equivalence_ci = t.equivalence_ci;
        p.unpaired_change_ci = t.unpaired_change_ci;
    }
    p
}

/// The observations of one point, each with its round: side A's and side B's.
#[derive(Clone, Copy)]
pub(crate) struct PointValues<'a> {
    /// Side A's.
    pub(crate) a: &'a [(u32, f64)],
    /// Side B's.
    pub(crate) b: &'a [(u32, f64)],
}

/// The bootstrap's draws ([`Resamples`]) for the sample sizes one thread's points met,
/// the latest first: the points of cells that ran as many repetitions draw the same
/// indices (one seed), so that each pair of sizes is drawn once a thread. At most
/// [`Draws::KEPT`] indices are kept (4 bytes each), the oldest dropped first.
#[derive(Default)]
pub(crate) struct Draws(Vec<Resamples>);

impl Draws {
    /// Indices kept at most: 32 MiB, 80 pairs of 25-run cells with 2 000 replicates.
    const KEPT: usize = 8 << 20;

    /// The draws of `o`'s bootstrap for samples of `a_len` and `b_len` values.
    fn of(&mut self, a_len: usize, b_len: usize, o: &CompareOptions) -> &Resamples {
        let fits = |r: &Resamples| {
            r.sizes() == (a_len, b_len) && r.replicates() == o.resamples && r.seed() == o.seed
        };
        match self.0.iter().position(fits) {
            Some(i) => {
                let found = self.0.remove(i);
                self.0.insert(0, found);
            }
            None => {
                self.0
                    .insert(0, Resamples::new(a_len, b_len, o.resamples, o.seed));
                // The new draws always, then the latest that fit.
                let mut kept = 0;
                let keep = self.0.iter().take_while(|r| {
                    let (a, b) = r.sizes();
                    kept += r.replicates() * (a + b);
                    kept <= Self::KEPT
                });
                let keep = keep.count().max(1);
                self.0.truncate(keep);
            }
        }
        &self.0[0]
    }
}

/// Which side of a cell pair did worse, from its decided points' verdicts (worse or
/// better): B when they are all worse, A when they are all better, `None` when they go
/// both ways.
fn worse_side(decided: &[Verdict]) -> Option<crate::attribution::WorseSide> {
    if decided.iter().all(|v| *v == Verdict::Worse) {
        Some(crate::attribution::WorseSide::B)
    } else if decided.iter().all(|v| *v == Verdict::Better) {
        Some(crate::attribution::WorseSide::A)
    } else {
        None
    }
}

/// The limits the first of `runs` read back (`limits.summary`).
fn limits_summary(runs: &[&isolab_store::RunRecord]) -> Option<String> {
    stored_limits(runs)?
        .get("summary")?
        .as_str()
        .map(str::to_owned)
}

/// The limits the first of `runs` that stored some read back: its `limits`.
fn stored_limits<'r>(runs: &[&'r isolab_store::RunRecord]) -> Option<&'r serde_json::Value> {
    runs.iter()
        .map(|r| -> &'r serde_json::Value { &r.limits })
        .find(|l| l.get("summary").is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use isolab_store::{CellRecord, MetricValue, RunStatus};
    use std::time::{Duration, SystemTime};

    fn run(id: i64, cell: i64, value: f64) -> RunRecord {
        RunRecord {
            id,
            cell,
            repetition: id as u32,
            warmup: false,
            round: 0,
            status: RunStatus::Ok,
            exit_code: Some(0),
            started_at: SystemTime::UNIX_EPOCH,
            wall: Duration::from_secs(1),
            error: None,
            limits: serde_json::Value::Null.into(),
            metrics: vec![MetricValue {
                name: "t".into(),
                unit: "s".into(),
                direction: Direction::Lower,
                value,
            }],
            telemetry: isolab_store::TelemetrySet::new(),
            notes: vec![],
        }
    }

    fn data(cells: &[(&str, &str, &[f64])]) -> ExperimentData {
        let mut runs = Vec::new();
        let mut records = Vec::new();
        let mut id = 0;
        for (i, (placement, workload, values)) in cells.iter().enumerate() {
            let levels = vec![
                ("placement".to_string(), placement.to_string()),
                ("workload".to_string(), workload.to_string()),
            ];
            records.push(CellRecord {
                id: i as i64,
                index: i as u32,
                key: format!("placement={placement} workload={workload}"),
                levels,
                stop_reason: None,
            });
            for v in values.iter() {
                id += 1;
                runs.push(run(id, i as i64, *v));
            }
        }
        ExperimentData::of("x", records, runs)
    }

    fn side<'a>(d: &'a ExperimentData, placement: &str) -> Side<'a> {
        Side {
            data: d,
            select: vec![("placement".into(), placement.into())],
            primary: BTreeMap::new(),
            label: placement.into(),
        }
    }

    #[test]
    fn a_clear_slowdown_is_worse_and_noise_is_same() {
        let slow: Vec<f64> = (0..10).map(|i| 12.0 + 0.01 * i as f64).collect();
        let base: Vec<f64> = (0..10).map(|i| 10.0 + 0.01 * i as f64).collect();
        let same: Vec<f64> = (0..10)
            .map(|i| 10.0 + 0.01 * ((i * 7) % 10) as f64)
            .collect();
        let d = data(&[
            ("shared", "w1", &base),
            ("shared", "w2", &base),
            ("quota", "w1", &slow),
            ("quota", "w2", &same),
        ]);
        let c = compare(
            &side(&d, "shared"),
            &side(&d, "quota"),
            &CompareOptions::default(),
        )
        .unwrap();
        assert_eq!(c.points.len(), 2);
        assert_eq!(c.points[0].verdict, Verdict::Worse, "{:?}", c.points[0]);
        assert!((c.points[0].change.unwrap() - 0.2).abs() < 0.01);
        assert_eq!(
            c.points[1].verdict,
            Verdict::Equivalent,
            "{:?}",
            c.points[1]
        );
        assert_eq!(
            (c.worse, c.better, c.equivalent, c.inconclusive),
            (1, 0, 1, 0)
        );
        assert_eq!(c.histogram.as_ref().unwrap().n, 2);
        let g = c.geomean.as_ref().unwrap();
        let ratios = [c.points[0].ratio.unwrap(), c.points[1].ratio.unwrap()];
        assert_eq!(g.points, 2);
        assert!(
            (g.ratio - (ratios[0] * ratios[1]).sqrt()).abs() < 1e-12,
            "{g:?}"
        );
    }

    #[test]
    fn selectors_that_match_nothing_say_what_exists() {
        let d = data(&[("shared", "w1", &[1.0, 2.0])]);
        let err = compare(
            &side(&d, "shared"),
            &side(&d, "pinned"),
            &CompareOptions::default(),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("no cell of experiment 1 has placement=pinned"),
            "{err}"
        );
    }
}
