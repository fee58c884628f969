//! Scalability (issue 5, seed 001 chapter 6): throughput against the number of
//! `threads` in one instance, of concurrent `instances`, or of `copies` of the workload
//! in one instance, with Amdahl's law and the
//! Universal Scalability Law fitted to every run.
//!
//! For each of the factors [`FACTORS`] that is varied, the cells are grouped by all
//! their other levels; each group and primary metric gives one [`ScalingCurve`]. Its
//! points are the levels N of the factor, each with the runs' mean throughput and 95%
//! Student-t CI, the speedup X̄(N)/X̄(1) and the efficiency speedup/N. With 3 or more
//! levels, both models are fitted by least squares to every counted run (not the means;
//! [`isolab_stats::scalability`] cites the formulas), the one with the lower AIC is
//! preferred, and its parameters get percentile-bootstrap intervals ([`RESAMPLES`]
//! resamples within each level, seeded by the experiment's seed) and a pointwise band
//! on a grid from N = 1 to the largest N. With fewer levels the curve says why it has
//! no fit ([`ScalingCurve::note`]).
//!
//! The models describe a throughput (higher is better). A lower-is-better metric (a
//! runtime t) is turned into one ([`Throughput`]): over `threads` the work is fixed and
//! split between the threads, so throughput = 1/t; over `instances` each instance does
//! the work once and the stored t is the mean over instances, so the aggregate
//! throughput is N/t; the same over `copies` (N copies of the work in one instance, t
//! their mean). Labels say which. Higher-is-better metrics of an `instances` cell are
//! stored as the sum over instances, which is the aggregate throughput already; those of
//! a `copies` cell as the mean over the copies, so the aggregate is N times it.
//! Metrics named `<metric>_per_instance` are never fitted; their means are shown next
//! to the aggregate.

use std::fmt::Write as _;

use isolab_stats::{
    BandPoint, BootstrapFit, Direction, Interval, ModelComparison, Sample, ScalingData,
    ScalingModel,
};

use crate::data::ExperimentData;
use crate::plots::{BandSample, Fit, LinePoint, ScalingChart, Size, XScale};
use crate::summary::{MetricRow, SummaryOptions};
use crate::table::{num, text_lines, Style, Table};

/// The factors whose levels are a concurrency N.
pub const FACTORS: [&str; 3] = ["threads", "instances", "copies"];
/// Bootstrap resamples of the preferred model.
pub const RESAMPLES: usize = 2000;
/// Confidence level of the bootstrap intervals and band.
pub const LEVEL: f64 = 0.95;
/// Suffix of the per-instance metrics the lab stores next to the aggregate ones.
pub const PER_INSTANCE_SUFFIX: &str = "_per_instance";
/// Points of the grid the band and the fitted curves are evaluated on.
const GRID_POINTS: usize = 64;
/// From this largest N on, N is shown on a log₂ axis.
const LOG2_FROM: f64 = 16.0;

/// How the fitted throughput is derived from the stored metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Throughput {
    /// The metric itself (higher is better).
    Metric,
    /// 1/value, for a lower-is-better metric over `threads` (fixed work split between
    /// the threads).
    Reciprocal,
    /// N/value, for a lower-is-better metric over `instances` (each instance does the
    /// work once; the value is the mean over instances), or over `copies` (each copy
    /// does the work once; the value is the mean over the copies).
    InstancesOverValue,
    /// N·value, for a higher-is-better metric over `copies` (the value is the mean rate
    /// of a copy; the copies together do N times its work).
    CopiesTimesValue,
}

impl Throughput {
    fn of(direction: Direction, factor: &str) -> Throughput {
        match (direction, factor) {
            (Direction::Higher, "copies") => Throughput::CopiesTimesValue,
            (Direction::Higher, _) => Throughput::Metric,
            (Direction::Lower, "instances" | "copies") => Throughput::InstancesOverValue,
            (Direction::Lower, _) => Throughput::Reciprocal,
        }
    }

    /// The throughput of one observation `v` at concurrency `n`; `None` unless finite
    /// and positive.
    fn apply(self, v: f64, n: f64) -> Option<f64> {
        let x = match self {
            Throughput::Metric => v,
            Throughput::Reciprocal => 1.0 / v,
            Throughput::InstancesOverValue => n / v,
            Throughput::CopiesTimesValue => n * v,
        };
        (x.is_finite() && x > 0.0 && v > 0.0).then_some(x)
    }
}

/// One level N of a [`ScalingCurve`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ScalingPoint {
    /// Concurrency N (the level of the factor).
    pub n: f64,
    /// The cell measured at this N.
    pub cell: u32,
    /// Counted runs with a usable throughput.
    pub runs: usize,
    /// Mean throughput of those runs.
    pub mean: f64,
    /// 95% Student-t CI of the mean (two or more runs).
    pub ci: Option<Interval>,
    /// mean X(N) / mean X(1), when N = 1 was measured.
    pub speedup: Option<f64>,
    /// speedup / N (1 = linear scaling).
    pub efficiency: Option<f64>,
    /// Mean of the stored `<metric>_per_instance` over the counted runs, in the
    /// metric's own unit (cells with several instances).
    pub per_instance: Option<f64>,
}

/// Throughput against one concurrency factor, for one group of otherwise equal cells
/// and one metric, with both models fitted (see the [module docs](self)).
///
/// Serialized for `--json`: the bootstrap replicates are left out, and infinite numbers
/// (the upper end of a peak interval, the AIC of an exact fit) become `null`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ScalingCurve {
    /// `threads` or `instances`.
    pub factor: String,
    /// The other levels of the group's cells.
    pub group: Vec<(String, String)>,
    /// The levels of `group` that vary between groups, as `factor=level` (`all cells`
    /// when none does).
    pub group_label: String,
    /// The stored metric.
    pub metric: String,
    /// Its unit.
    pub unit: String,
    /// Which way it is better.
    pub direction: Direction,
    /// How the fitted throughput is derived from it.
    pub throughput: Throughput,
    /// What is fitted, e.g. `events_per_second` or `instances/total_time`.
    pub throughput_label: String,
    /// The throughput's unit, e.g. `events/s` or `1/s`.
    pub throughput_unit: String,
    /// The levels, by increasing N.
    pub points: Vec<ScalingPoint>,
    /// Both fits and the preferred one, with 3 or more levels.
    pub comparison: Option<ModelComparison>,
    /// Bootstrap intervals of the preferred model.
    pub bootstrap: Option<BootstrapFit>,
    /// Pointwise band of the preferred fit on a grid from 1 to the largest N.
    pub band: Vec<BandPoint>,
    /// Why there is no fit or no bootstrap, or what limits them.
    pub note: Option<String>,
}

fn level<'a>(levels: &'a [(String, String)], factor: &str) -> Option<&'a str> {
    levels
        .iter()
        .find(|(f, _)| f == factor)
        .map(|(_, l)| l.as_str())
}

/// A level as a concurrency: a whole number ≥ 1 (`-` and other words are not).
fn concurrency(level: &str) -> Option<f64> {
    level
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|n| *n >= 1)
        .map(f64::from)
}

/// The scalability curves of an experiment (see the [module docs](self)): for each
/// factor of [`FACTORS`] with at least two numeric levels, one curve per group of cells
/// equal in every other level and per primary metric (`options.is_primary`) that has
/// at least two levels of the factor. `rows` are
/// the summary rows of `data` (their `values` are the runs' observations).
pub fn scalability(
    data: &ExperimentData,
    rows: &[MetricRow],
    options: &SummaryOptions,
) -> Vec<ScalingCurve> {
    curves(data, rows, options, RESAMPLES)
}

fn curves(
    data: &ExperimentData,
    rows: &[MetricRow],
    options: &SummaryOptions,
    resamples: usize,
) -> Vec<ScalingCurve> {
    let primary: Vec<&MetricRow> = rows
        .iter()
        .filter(|r| options.is_primary(r) && !r.metric.ends_with(PER_INSTANCE_SUFFIX))
        .collect();
    let mut out = Vec::new();
    for factor in FACTORS {
        let with: Vec<(&MetricRow, f64)> = primary
            .iter()
            .filter_map(|r| Some((*r, concurrency(level(&r.levels, factor)?)?)))
            .collect();
        let mut distinct: Vec<f64> = with.iter().map(|(_, n)| *n).collect();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        if distinct.len() < 2 {
            continue;
        }
        // Groups: the other levels and the metric, in matrix order.
        type Group<'a> = (
            Vec<(String, String)>,
            &'a MetricRow,
            Vec<(&'a MetricRow, f64)>,
        );
        let mut groups: Vec<Group<'_>> = Vec::new();
        for (r, n) in &with {
            let others: Vec<(String, String)> = r
                .levels
                .iter()
                .filter(|(f, _)| f != factor)
                .cloned()
                .collect();
            match groups
                .iter_mut()
                .find(|(o, first, _)| *o == others && first.metric == r.metric)
            {
                Some((_, _, members)) => members.push((*r, *n)),
                None => groups.push((others, *r, vec![(*r, *n)])),
            }
        }
        // A group with one level of the factor is no curve (in seed 001's design
        // the threads curve has instances = 1 only, and vice versa): left out.
        groups.retain(|(_, _, members)| {
            members
                .iter()
                .any(|(_, n)| members.first().is_some_and(|(_, n0)| n0 != n))
        });
        let varied = varied_factors(groups.iter().map(|(o, _, _)| o.as_slice()));
        for (others, first, members) in groups {
            let label: Vec<String> = others
                .iter()
                .filter(|(f, _)| varied.contains(f))
                .map(|(f, l)| format!("{f}={l}"))
                .collect();
            let group_label = if label.is_empty() {
                "all cells".to_owned()
            } else {
                label.join(" ")
            };
            out.push(curve(
                data,
                factor,
                others,
                group_label,
                first,
                &members,
                resamples,
            ));
        }
    }
    out
}

/// Factors whose level differs between some of the groups, in first-seen order.
fn varied_factors<'a>(groups: impl Iterator<Item = &'a [(String, String)]> + Clone) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut first: Vec<(&str, &str)> = Vec::new();
    for g in groups {
        for (f, l) in g {
            match first.iter().find(|(ff, _)| ff == f) {
                Some((_, fl)) if fl != l && !out.contains(f) => out.push(f.clone()),
                Some(_) => {}
                None => first.push((f, l)),
            }
        }
    }
    out
}

fn curve(
    data: &ExperimentData,
    factor: &str,
    group: Vec<(String, String)>,
    group_label: String,
    first: &MetricRow,
    members: &[(&MetricRow, f64)],
    resamples: usize,
) -> ScalingCurve {
    let throughput = Throughput::of(first.direction, factor);
    let (throughput_label, throughput_unit) = match throughput {
        Throughput::Metric => (first.metric.clone(), first.unit.clone()),
        Throughput::Reciprocal => (format!("1/{}", first.metric), reciprocal_unit(&first.unit)),
        Throughput::InstancesOverValue => (
            format!("{factor}/{}", first.metric),
            reciprocal_unit(&first.unit),
        ),
        Throughput::CopiesTimesValue => (format!("copies·{}", first.metric), first.unit.clone()),
    };
    let mut members: Vec<(&MetricRow, f64)> = members.to_vec();
    members.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut notes: Vec<String> = Vec::new();
    let mut observations: Vec<(f64, f64)> = Vec::new();
    let mut points: Vec<ScalingPoint> = Vec::new();
    let mut unusable = 0;
    let mut without_runs: Vec<String> = Vec::new();
    for (row, n) in &members {
        let xs: Vec<f64> = row
            .values
            .iter()
            .filter_map(|&v| throughput.apply(v, *n))
            .collect();
        unusable += row.values.len() - xs.len();
        if xs.is_empty() {
            without_runs.push(n.to_string());
            continue;
        }
        observations.extend(xs.iter().map(|&x| (*n, x)));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        points.push(ScalingPoint {
            n: *n,
            cell: row.cell,
            runs: xs.len(),
            mean,
            ci: Sample::new(xs).ok().map(|s| s.summary().mean_ci95),
            speedup: None,
            efficiency: None,
            per_instance: per_instance(data, row),
        });
    }
    if let Some(base) = points.iter().find(|p| p.n == 1.0).map(|p| p.mean) {
        for p in &mut points {
            p.speedup = Some(p.mean / base);
            p.efficiency = Some(p.mean / base / p.n);
        }
    }
    if !without_runs.is_empty() {
        notes.push(format!(
            "no counted run at {factor} = {}",
            without_runs.join(", ")
        ));
    }
    if unusable > 0 {
        notes.push(format!(
            "{unusable} observations left out (not finite or not positive)"
        ));
    }
    let (comparison, bootstrap, band) = if points.len() < isolab_stats::scalability::MIN_LEVELS {
        notes.push(format!(
            "no fit: {} level{} of {factor} with counted runs ({}); Amdahl and USL fits need 3 or more (e.g. 1, 2, 4, 8)",
            points.len(),
            if points.len() == 1 { "" } else { "s" },
            points.iter().map(|p| p.n.to_string()).collect::<Vec<_>>().join(", ")
        ));
        (None, None, Vec::new())
    } else {
        match ScalingData::new(observations) {
            Err(e) => {
                notes.push(format!("no fit: {e}"));
                (None, None, Vec::new())
            }
            Ok(d) => {
                let comparison = d.compare();
                let max_n = points.last().map_or(1.0, |p| p.n);
                match d.bootstrap(comparison.preferred, LEVEL, resamples, data.record.seed) {
                    Ok(b) => {
                        if b.single_run_levels > 0 {
                            notes.push(format!(
                                "{} levels measured by a single run: the intervals understate the noise",
                                b.single_run_levels
                            ));
                        }
                        let band = b.band(&grid(max_n));
                        (Some(comparison), Some(b), band)
                    }
                    Err(e) => {
                        notes.push(format!("no bootstrap: {e}"));
                        (Some(comparison), None, Vec::new())
                    }
                }
            }
        }
    };
    ScalingCurve {
        factor: factor.to_owned(),
        group,
        group_label,
        metric: first.metric.clone(),
        unit: first.unit.clone(),
        direction: first.direction,
        throughput,
        throughput_label,
        throughput_unit,
        points,
        comparison,
        bootstrap,
        band,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    }
}

/// `1/s` for `s`, `1/(ms/op)` for a compound unit, `1/value` without a unit.
fn reciprocal_unit(unit: &str) -> String {
    if unit.is_empty() {
        "1/value".to_owned()
    } else if unit.contains(['/', ' ', '·']) {
        format!("1/({unit})")
    } else {
        format!("1/{unit}")
    }
}

/// Mean of `<metric>_per_instance` over the cell's counted runs.
fn per_instance(data: &ExperimentData, row: &MetricRow) -> Option<f64> {
    let name = format!("{}{PER_INSTANCE_SUFFIX}", row.metric);
    let cell_id = data.cells.iter().find(|c| c.index == row.cell)?.id;
    let values: Vec<f64> = data
        .runs
        .iter()
        .filter(|r| r.cell == cell_id && r.is_counted())
        .filter_map(|r| r.metrics.iter().find(|m| m.name == name).map(|m| m.value))
        .filter(|v| v.is_finite())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The grid of N the curves are drawn on: [`GRID_POINTS`] from 1 to `max_n`, evenly
/// spaced in log₂ N from [`LOG2_FROM`] on, in N below; the ends are exact.
pub fn grid(max_n: f64) -> Vec<f64> {
    let max_n = if max_n.is_finite() {
        max_n.max(1.0)
    } else {
        1.0
    };
    if max_n == 1.0 {
        return vec![1.0];
    }
    let last = (GRID_POINTS - 1) as f64;
    let mut g: Vec<f64> = (0..GRID_POINTS)
        .map(|i| {
            let t = i as f64 / last;
            if max_n >= LOG2_FROM {
                (t * max_n.log2()).exp2()
            } else {
                1.0 + t * (max_n - 1.0)
            }
        })
        .collect();
    g[0] = 1.0;
    g[GRID_POINTS - 1] = max_n;
    g
}

impl ScalingCurve {
    /// The largest N measured.
    pub fn max_n(&self) -> f64 {
        self.points.last().map_or(1.0, |p| p.n)
    }

    /// What is fitted, with its unit and, for a derived throughput, how it is derived:
    /// `events_per_second (events/s)`, `1/total_time (1/s; total_time is lower-is-better)`.
    pub fn label(&self) -> String {
        let unit = &self.throughput_unit;
        match (self.throughput, unit.is_empty()) {
            (Throughput::Metric, true) => self.throughput_label.clone(),
            (Throughput::Metric, false) => format!("{} ({unit})", self.throughput_label),
            (Throughput::CopiesTimesValue, _) => format!(
                "{} ({unit}; the copies' mean {} times their number)",
                self.throughput_label, self.metric
            ),
            (_, true) => format!(
                "{} (throughput from {}, which is lower-is-better)",
                self.throughput_label, self.metric
            ),
            (_, false) => format!(
                "{} ({unit}; throughput from {}, which is lower-is-better)",
                self.throughput_label, self.metric
            ),
        }
    }

    /// One line with both fits, the bootstrap CIs of the preferred one and the choice:
    /// `USL λ=98.7 [95.1, 102.0] σ=0.0481 [...] κ=0.00201 [...] peak N*=21.6 [...]; Amdahl
    /// λ=… σ=…; preferred: USL (ΔAIC 12.3)`, or why there is no fit.
    pub fn fit_line(&self) -> String {
        let Some(c) = &self.comparison else {
            return self.note.clone().unwrap_or_else(|| "no fit".to_owned());
        };
        let boot = self.bootstrap.as_ref();
        let ci = |model: ScalingModel, pick: fn(&BootstrapFit) -> Interval| {
            boot.filter(|_| model == c.preferred)
                .map_or(String::new(), |b| interval_text(pick(b)))
        };
        let mut out = String::new();
        let u = &c.usl;
        let _ = write!(
            out,
            "USL λ={}{} σ={}{} κ={}{}",
            num(u.lambda),
            ci(ScalingModel::Usl, |b| b.lambda),
            num(u.sigma),
            ci(ScalingModel::Usl, |b| b.sigma),
            num(u.kappa),
            ci(ScalingModel::Usl, |b| b.kappa),
        );
        match u.peak {
            Some(p) => {
                let pci = boot
                    .filter(|_| c.preferred == ScalingModel::Usl)
                    .and_then(|b| b.peak)
                    .map_or(String::new(), interval_text);
                let _ = write!(out, " peak N*={}{pci}", num(p));
            }
            None => out.push_str(" no peak (κ=0)"),
        }
        let a = &c.amdahl;
        let _ = write!(
            out,
            "; Amdahl λ={}{} σ={}{}",
            num(a.lambda),
            ci(ScalingModel::Amdahl, |b| b.lambda),
            num(a.sigma),
            ci(ScalingModel::Amdahl, |b| b.sigma),
        );
        let delta = c.aic_difference().abs();
        let preferred = match c.preferred {
            ScalingModel::Usl => "USL",
            ScalingModel::Amdahl => "Amdahl",
        };
        if delta.is_finite() {
            let weak = if delta < 2.0 { ", weak" } else { "" };
            let _ = write!(out, "; preferred: {preferred} (ΔAIC {delta:.1}{weak})");
        } else {
            let _ = write!(out, "; preferred: {preferred} (exact fit)");
        }
        let _ = write!(
            out,
            "; R² {:.3}",
            match c.preferred {
                ScalingModel::Usl => u.r_squared,
                ScalingModel::Amdahl => a.r_squared,
            }
        );
        if let (Some(note), true) = (&self.note, self.comparison.is_some()) {
            let _ = write!(out, " ({note})");
        }
        out
    }
}

/// ` [low, high]`, an infinite end as `∞` (a peak interval whose replicates have no
/// coherency).
fn interval_text(i: Interval) -> String {
    let end = |v: f64| {
        if v == f64::INFINITY {
            "∞".to_owned()
        } else {
            num(v)
        }
    };
    format!(" [{}, {}]", end(i.low), end(i.high))
}

/// What the numbers are, before each table.
pub fn title(factor: &str) -> String {
    format!(
        "scalability over {factor}: throughput X(N) per level (mean ± 95% Student-t CI of the runs), speedup X̄(N)/X̄(1), efficiency speedup/N; fits over every run: Amdahl X = λN/(1 + σ(N−1)), USL X = λN/(1 + σ(N−1) + κN(N−1)), peak N* = √((1−σ)/κ); [95% bootstrap CI, {RESAMPLES} resamples] on the preferred model (lower AIC; ΔAIC < 2 is weak)"
    )
}

/// The terminal rendering: per factor, a title, a table (group, throughput, N, runs,
/// mean ± CI, speedup, efficiency, and per instance where stored) and one fit line per
/// curve. Empty when there is no curve. In [`Style::Markdown`] (a `bool` is text with
/// or without colour) the tables are pipe tables.
pub fn render(curves: &[ScalingCurve], style: impl Into<Style>) -> String {
    let style = style.into();
    let mut out = String::new();
    for factor in FACTORS {
        let of: Vec<&ScalingCurve> = curves.iter().filter(|c| c.factor == factor).collect();
        if of.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        let per_instance = of
            .iter()
            .any(|c| c.points.iter().any(|p| p.per_instance.is_some()));
        let mut header: Vec<String> = [
            "group",
            "throughput",
            "N",
            "n",
            "mean",
            "±95% CI",
            "speedup",
            "efficiency",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let mut right = vec![false, false, true, true, true, true, true, true];
        if per_instance {
            header.push("per instance".to_owned());
            right.push(true);
        }
        let mut t = Table::new(header, right);
        for c in &of {
            for (i, p) in c.points.iter().enumerate() {
                let mut row = if i == 0 {
                    vec![c.group_label.clone(), c.label()]
                } else {
                    vec![String::new(), String::new()]
                };
                row.push(p.n.to_string());
                row.push(p.runs.to_string());
                row.push(num(p.mean));
                row.push(p.ci.map_or_else(|| "-".to_owned(), |ci| num((ci.high - ci.low) / 2.0)));
                row.push(
                    p.speedup
                        .map_or_else(|| "-".to_owned(), |s| format!("{s:.2}×")),
                );
                row.push(
                    p.efficiency
                        .map_or_else(|| "-".to_owned(), |e| format!("{:.0}%", e * 100.0)),
                );
                if per_instance {
                    row.push(p.per_instance.map_or_else(|| "-".to_owned(), num));
                }
                t.push(row);
            }
        }
        out.push_str(&text_lines(&format!("{}\n", title(factor)), style));
        out.push_str(&t.render(style));
        let mut fits = String::new();
        for c in &of {
            let _ = writeln!(fits, "  {} · {}: {}", c.group_label, c.metric, c.fit_line());
        }
        out.push_str(&text_lines(&fits, style));
    }
    out
}

/// The chart of one curve: measured means with CI whiskers, the preferred fit with its
/// bootstrap band, the other model dashed and linear scaling X(1)·N dotted; N on a log₂
/// axis from a largest N of 16 on.
pub fn chart(curve: &ScalingCurve) -> ScalingChart {
    let max_n = curve.max_n();
    let g = grid(max_n);
    let model_name = |m: ScalingModel| match m {
        ScalingModel::Usl => "USL",
        ScalingModel::Amdahl => "Amdahl",
    };
    let describe = |f: &isolab_stats::Fit| match f.model {
        ScalingModel::Usl => format!(
            "σ={} κ={}{}",
            num(f.sigma),
            num(f.kappa),
            f.peak.map_or(String::new(), |p| format!(" N*={}", num(p)))
        ),
        ScalingModel::Amdahl => format!("σ={}", num(f.sigma)),
    };
    let sample = |f: &isolab_stats::Fit| -> Vec<(f64, f64)> {
        g.iter().map(|&n| (n, f.throughput(n))).collect()
    };
    let (fit, other) = match &curve.comparison {
        Some(c) => {
            let (best, other) = match c.preferred {
                ScalingModel::Usl => (&c.usl, &c.amdahl),
                ScalingModel::Amdahl => (&c.amdahl, &c.usl),
            };
            (
                Some(Fit {
                    label: format!(
                        "{} fit (preferred): {}",
                        model_name(best.model),
                        describe(best)
                    ),
                    points: sample(best),
                }),
                Some(Fit {
                    label: format!("{} fit: {}", model_name(other.model), describe(other)),
                    points: sample(other),
                }),
            )
        }
        None => (None, None),
    };
    let x1 = curve
        .points
        .iter()
        .find(|p| p.n == 1.0)
        .map(|p| p.mean)
        .or_else(|| curve.comparison.map(|c| c.best().lambda));
    let linear = x1.filter(|_| max_n > 1.0).map(|x1| Fit {
        label: "linear scaling X(1)·N".to_owned(),
        points: vec![(1.0, x1), (max_n, x1 * max_n)],
    });
    let unit = if curve.throughput_unit.is_empty() {
        String::new()
    } else {
        format!(" ({})", curve.throughput_unit)
    };
    ScalingChart {
        title: format!(
            "{}: {} over {}",
            curve.group_label, curve.throughput_label, curve.factor
        ),
        x_label: format!("{} (count)", curve.factor),
        // The metric and its unit: short enough to show whole beside the plot.
        y_label: format!("{}{unit}", curve.throughput_label),
        x_scale: if max_n >= LOG2_FROM {
            XScale::Log2
        } else {
            XScale::Linear
        },
        points_label: "mean of runs, 95% CI".to_owned(),
        points: curve
            .points
            .iter()
            .map(|p| LinePoint {
                x: p.n,
                y: p.mean,
                y_low: p.ci.map(|c| c.low),
                y_high: p.ci.map(|c| c.high),
            })
            .collect(),
        fit,
        band: curve
            .band
            .iter()
            .map(|b| BandSample {
                x: b.n,
                low: b.low,
                high: b.high,
            })
            .collect(),
        band_label: curve.bootstrap.as_ref().map_or(String::new(), |b| {
            format!(
                "{:.0}% bootstrap band ({} resamples)",
                b.lambda.level * 100.0,
                b.resamples
            )
        }),
        other,
        linear,
        size: Size {
            width: 640,
            height: 400,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isolab_store::{ExperimentRecord, ExperimentStatus};

    fn data() -> ExperimentData {
        ExperimentData {
            record: ExperimentRecord {
                id: 1,
                name: "scaling".into(),
                spec_toml: String::new(),
                spec_path: None,
                seed: 42,
                isolab_version: "test".into(),
                created_at: std::time::UNIX_EPOCH,
                finished_at: None,
                status: ExperimentStatus::Complete,
            },
            cells: Vec::new(),
            runs: Vec::new(),
            environment: Vec::new(),
            interruptions: Vec::new(),
            series: Vec::new(),
            intervals: Default::default(),
        }
    }

    fn usl(lambda: f64, sigma: f64, kappa: f64, n: f64) -> f64 {
        lambda * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
    }

    /// Deterministic noise in [−amplitude, amplitude] (a small LCG, no dependency).
    fn noise(seed: &mut u64, amplitude: f64) -> f64 {
        *seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let u = (*seed >> 11) as f64 / (1u64 << 53) as f64;
        amplitude * (2.0 * u - 1.0)
    }

    fn row(
        cell: u32,
        levels: &[(&str, &str)],
        metric: &str,
        d: Direction,
        values: Vec<f64>,
    ) -> MetricRow {
        let levels = levels
            .iter()
            .map(|(f, l)| ((*f).to_owned(), (*l).to_owned()))
            .collect();
        let unit = if d == Direction::Higher {
            "events/s"
        } else {
            "s"
        };
        let mut r = MetricRow::for_test(levels, metric, unit, d, values);
        r.cell = cell;
        r
    }

    fn rows(levels: &[u32], sigma: f64, kappa: f64) -> Vec<MetricRow> {
        let mut seed = 7;
        let mut out = Vec::new();
        for platform in ["host", "isolab"] {
            for &t in levels {
                let n = f64::from(t);
                let values = (0..5)
                    .map(|_| usl(1000.0, sigma, kappa, n) * (1.0 + noise(&mut seed, 0.03)))
                    .collect();
                let t = t.to_string();
                out.push(row(
                    out.len() as u32,
                    &[
                        ("platform", platform),
                        ("workload", "sysbench-cpu"),
                        ("threads", &t),
                    ],
                    "events_per_second",
                    Direction::Higher,
                    values,
                ));
            }
        }
        out
    }

    fn fitted(rows: &[MetricRow]) -> Vec<ScalingCurve> {
        curves(&data(), rows, &SummaryOptions::default(), 200)
    }

    #[test]
    fn usl_shaped_data_recover_the_parameters() {
        let c = fitted(&rows(&[1, 2, 4, 8, 16], 0.05, 0.002));
        assert_eq!(c.len(), 2, "one curve per platform");
        assert_eq!(c[0].group_label, "platform=host");
        assert_eq!(c[1].group_label, "platform=isolab");
        let curve = &c[0];
        assert_eq!(curve.factor, "threads");
        assert_eq!(curve.throughput, Throughput::Metric);
        assert_eq!(curve.points.len(), 5);
        assert!(curve.points.iter().all(|p| p.runs == 5 && p.ci.is_some()));
        let comparison = curve.comparison.unwrap();
        let usl_fit = comparison.usl;
        assert!((usl_fit.lambda - 1000.0).abs() < 50.0, "{usl_fit:?}");
        assert!((usl_fit.sigma - 0.05).abs() < 0.03, "{usl_fit:?}");
        assert!((usl_fit.kappa - 0.002).abs() < 0.0015, "{usl_fit:?}");
        let b = curve.bootstrap.as_ref().unwrap();
        assert_eq!(b.resamples, 200);
        assert_eq!(b.fit.model, comparison.preferred);
        assert!(
            b.lambda.low <= 1000.0 && 1000.0 <= b.lambda.high,
            "{:?}",
            b.lambda
        );
        // The band runs from 1 to the largest N and contains the fit.
        assert_eq!(curve.band.first().unwrap().n, 1.0);
        assert_eq!(curve.band.last().unwrap().n, 16.0);
        assert!(curve.band.iter().all(|p| p.low <= p.fit && p.fit <= p.high));
        // Observed speedup and efficiency.
        let p16 = curve.points.last().unwrap();
        let want = usl(1.0, 0.05, 0.002, 16.0);
        assert!(
            (p16.speedup.unwrap() - want).abs() / want < 0.08,
            "{p16:?} vs {want}"
        );
        assert!((p16.efficiency.unwrap() - want / 16.0).abs() < 0.05);
        assert_eq!(curve.points[0].speedup, Some(1.0));
        assert!(
            curve.fit_line().starts_with("USL λ="),
            "{}",
            curve.fit_line()
        );
        assert!(curve.fit_line().contains("; Amdahl λ="));
        assert!(curve.fit_line().contains("; preferred: "));
    }

    #[test]
    fn retrograde_data_give_a_peak() {
        // Peak at √((1 − 0.02)/0.01) ≈ 9.9 threads, then throughput falls.
        let c = fitted(&rows(&[1, 2, 4, 8, 16, 32], 0.02, 0.01));
        let curve = &c[0];
        let comparison = curve.comparison.unwrap();
        assert_eq!(comparison.preferred, ScalingModel::Usl, "{comparison:?}");
        let peak = comparison.usl.peak.unwrap();
        assert!((peak - 9.9).abs() < 2.5, "peak {peak}");
        let b = curve.bootstrap.as_ref().unwrap();
        assert!(b.peak.is_some());
        assert!(b.kappa.low > 0.0, "{:?}", b.kappa);
        let line = curve.fit_line();
        assert!(line.contains("peak N*="), "{line}");
        assert!(line.contains("preferred: USL (ΔAIC "), "{line}");
        // log₂ axis from 16 on.
        assert_eq!(chart(curve).x_scale, XScale::Log2);
    }

    #[test]
    fn fewer_than_three_levels_give_no_fit_but_say_why() {
        let c = fitted(&rows(&[1, 4], 0.05, 0.0));
        assert_eq!(c.len(), 2);
        let curve = &c[0];
        assert!(curve.comparison.is_none() && curve.bootstrap.is_none());
        assert!(curve.band.is_empty());
        assert_eq!(curve.points.len(), 2, "the points are still shown");
        let line = curve.fit_line();
        assert!(
            line.starts_with("no fit: 2 levels of threads with counted runs (1, 4)"),
            "{line}"
        );
        assert!(render(&c, false).contains("need 3 or more"));
        // A single level is not a varied factor: no curve at all.
        assert!(fitted(&rows(&[4], 0.0, 0.0)).is_empty());
        // Neither is a factor whose level is not a number (threads = "-").
        let mut r = rows(&[1, 2, 4], 0.0, 0.0);
        for x in &mut r {
            x.levels[2].1 = "-".into();
        }
        assert!(fitted(&r).is_empty());
    }

    #[test]
    fn a_level_without_runs_is_left_out_and_said() {
        let mut r = rows(&[1, 2, 4, 8], 0.05, 0.0);
        r[1].values.clear();
        let c = fitted(&r);
        assert_eq!(c[0].points.len(), 3);
        assert!(c[0].comparison.is_some());
        assert!(c[0]
            .note
            .as_deref()
            .unwrap()
            .contains("no counted run at threads = 2"));
    }

    #[test]
    fn lower_is_better_metrics_become_throughputs() {
        // A runtime: over threads X = 1/t, over instances X = N/t.
        let t = |n: f64| 10.0 / usl(1.0, 0.1, 0.0, n);
        let mut rs = Vec::new();
        for (factor, n) in [("threads", 1.0), ("threads", 2.0), ("threads", 4.0)] {
            let l = format!("{n}");
            rs.push(row(
                rs.len() as u32,
                &[(factor, &l), ("instances", "1")],
                "total_time",
                Direction::Lower,
                vec![t(n), t(n) * 1.01],
            ));
        }
        for n in [2.0, 4.0] {
            let l = format!("{n}");
            // Each instance runs the same work: the mean runtime stays 10 s.
            rs.push(row(
                rs.len() as u32,
                &[("threads", "1"), ("instances", &l)],
                "total_time",
                Direction::Lower,
                vec![10.0, 10.1],
            ));
        }
        let c = fitted(&rs);
        // The cells at instances = 2 and 4 have one level of threads each: no curve
        // over threads (and the threads = 2, 4 cells none over instances).
        assert_eq!(c.iter().filter(|c| c.factor == "threads").count(), 1);
        assert_eq!(c.iter().filter(|c| c.factor == "instances").count(), 1);
        let threads = c.iter().find(|c| c.factor == "threads").unwrap();
        assert_eq!(threads.group_label, "all cells");
        assert_eq!(threads.throughput, Throughput::Reciprocal);
        assert_eq!(threads.throughput_label, "1/total_time");
        assert_eq!(threads.throughput_unit, "1/s");
        assert!(
            threads.label().contains("lower-is-better"),
            "{}",
            threads.label()
        );
        let fit = threads.comparison.unwrap().amdahl;
        assert!((fit.sigma - 0.1).abs() < 0.02, "{fit:?}");
        let instances = c.iter().find(|c| c.factor == "instances").unwrap();
        assert_eq!(instances.throughput, Throughput::InstancesOverValue);
        assert_eq!(instances.throughput_label, "instances/total_time");
        // 1, 2, 4 instances at ~10 s each: aggregate throughput ~ N/10, linear.
        let speedups: Vec<f64> = instances
            .points
            .iter()
            .map(|p| p.speedup.unwrap())
            .collect();
        assert!((speedups[2] - 4.0).abs() < 0.1, "{speedups:?}");
        assert!(instances.comparison.unwrap().best().sigma < 0.01);
    }

    #[test]
    fn per_instance_metrics_are_not_fitted() {
        let mut r = rows(&[1, 2, 4], 0.0, 0.0);
        let mut per = r.clone();
        for x in &mut per {
            x.metric = "events_per_second_per_instance".into();
        }
        r.extend(per);
        let c = fitted(&r);
        assert!(c.iter().all(|c| c.metric == "events_per_second"));
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn grid_spans_one_to_the_largest_n() {
        let g = grid(8.0);
        assert_eq!((g[0], g[g.len() - 1], g.len()), (1.0, 8.0, GRID_POINTS));
        assert!((g[1] - g[0] - 7.0 / 63.0).abs() < 1e-12, "linear below 16");
        let g = grid(64.0);
        assert_eq!(g[g.len() - 1], 64.0);
        assert!(
            (g[1] / g[0] - g[2] / g[1]).abs() < 1e-9,
            "log-spaced from 16"
        );
        assert_eq!(grid(f64::NAN), [1.0]);
        assert_eq!(grid(0.5), [1.0]);
    }

    #[test]
    fn the_chart_has_every_layer() {
        let c = fitted(&rows(&[1, 2, 4, 8, 16], 0.05, 0.002));
        let ch = chart(&c[0]);
        assert_eq!(ch.points.len(), 5);
        assert!(ch.points.iter().all(|p| p.y_low.is_some()));
        assert!(ch.fit.as_ref().unwrap().label.contains("(preferred)"));
        assert!(ch.other.is_some());
        assert_eq!(ch.band.len(), GRID_POINTS);
        assert!(ch
            .band_label
            .starts_with("95% bootstrap band (200 resamples)"));
        let linear = ch.linear.unwrap();
        assert_eq!(linear.points[0].0, 1.0);
        assert_eq!(linear.points[1].0, 16.0);
        assert_eq!(ch.x_scale, XScale::Log2);
        assert_eq!(ch.x_label, "threads (count)");
        let svg = crate::plots::scaling(&chart(&c[0]));
        assert!(svg.contains("class=\"plot-band\""));
        // Without a fit: the points alone.
        let c = fitted(&rows(&[1, 2], 0.05, 0.0));
        let ch = chart(&c[0]);
        assert!(ch.fit.is_none() && ch.other.is_none() && ch.band.is_empty());
        assert_eq!(ch.x_scale, XScale::Linear);
    }

    #[test]
    fn an_infinite_interval_end_reads_as_infinity() {
        let i = Interval {
            low: 1.5,
            high: f64::INFINITY,
            level: 0.95,
        };
        assert_eq!(interval_text(i), " [1.500, ∞]");
    }

    #[test]
    fn reciprocal_units() {
        assert_eq!(reciprocal_unit("s"), "1/s");
        assert_eq!(reciprocal_unit("ms/op"), "1/(ms/op)");
        assert_eq!(reciprocal_unit(""), "1/value");
    }
}
