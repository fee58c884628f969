//! Load over time: what a service workload's load generator saw, second by second, in
//! every cell (seed 003's Fig 4.10 "Response Time over Time vs. Transactions Per Second"
//! and its Table 2.2 of successful requests per run).
//!
//! [`load`] groups the stored [`LoadInterval`]s of counted runs by workload and named
//! request ([`LoadGroup`]), and within a group by cell ([`LoadLine`]): per second the
//! median over repetitions with the lowest and highest repetition ([`Spread`]), and per
//! cell the totals of each run ([`RunTotals`]) with their mean and 95% Student-t interval
//! over repetitions ([`Estimate`]). [`latency_chart`] and [`rate_chart`] draw a group;
//! [`table`] is the terminal's one line per cell and request.
//!
//! Definitions (one each, used in every output):
//!
//! - an interval's width is the smallest gap between consecutive starts of its run and
//!   request (1 s when there is a single interval);
//! - successful requests = requests − failures; requests per second = successful requests
//!   of an interval ÷ its width, and over a run the successful requests ÷ (last start −
//!   first start + width);
//! - a run's mean latency is the mean of its intervals' means weighted by their requests
//!   (exact when the generator's means are); its p99 is the same weighted mean of the
//!   intervals' p99: the typical per-second p99, not the p99 of the whole run, which
//!   per-second percentiles cannot give;
//! - the line of a cell at a second is the median over the repetitions that reported that
//!   second, the band their minimum to maximum; the response time is the per-second p50
//!   where the generator reports it, else the per-second mean (the chart says which).

use std::collections::BTreeMap;
use std::time::Duration;

use isolab_stats::{percentile, Interval, Sample};
use isolab_store::{CellRecord, LoadInterval, RunId};

use crate::data::ExperimentData;
pub use crate::data::IntervalsByRun;
use crate::plots::{
    LineStyle, SecondaryAxis, Size, TimeBand, TimeSample, TimeSeries, TimeSeriesChart,
};
use crate::table::{num, Style, Table};

/// Which per-second latency the response-time lines show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LatencyStat {
    /// The per-second median (p50).
    P50,
    /// The per-second mean, where the generator reports no median.
    Mean,
}

impl LatencyStat {
    /// How captions name it.
    pub fn describe(self) -> &'static str {
        match self {
            LatencyStat::P50 => "median (p50)",
            LatencyStat::Mean => "mean",
        }
    }

    /// Its short name, for axis titles: `p50` or `mean`.
    pub fn short(self) -> &'static str {
        match self {
            LatencyStat::P50 => "p50",
            LatencyStat::Mean => "mean",
        }
    }
}

/// The load of one named request of one workload, one line per cell.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LoadGroup {
    /// The cells' `workload` level (empty when the matrix has no such factor).
    pub workload: String,
    /// The named request.
    pub request: String,
    /// What the response-time lines show; `None` when no interval reported a latency.
    pub latency: Option<LatencyStat>,
    /// One line per cell that ran this request, in cell order.
    pub lines: Vec<LoadLine>,
}

impl LoadGroup {
    /// `workload · request`, or the request alone.
    pub fn title(&self) -> String {
        if self.workload.is_empty() {
            self.request.clone()
        } else {
            format!("{} · {}", self.workload, self.request)
        }
    }
}

/// One cell's load of one request.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LoadLine {
    /// The cell's index.
    pub cell: u32,
    /// The cell's levels.
    pub levels: Vec<(String, String)>,
    /// The levels that tell this line from the group's others (its legend entry).
    pub label: String,
    /// Per second over the repetitions, in time order.
    pub seconds: Vec<LoadSecond>,
    /// Totals per run and over the repetitions.
    pub totals: LoadTotals,
}

/// The median over repetitions with the lowest and highest one.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Spread {
    /// The median.
    pub median: f64,
    /// The lowest repetition.
    pub low: f64,
    /// The highest repetition.
    pub high: f64,
}

impl Spread {
    /// `None` for no values.
    fn of(values: &[f64]) -> Option<Spread> {
        let median = percentile(values, 50.0)?;
        let low = values.iter().copied().fold(f64::INFINITY, f64::min);
        let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Spread { median, low, high })
    }
}

/// One second of a [`LoadLine`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LoadSecond {
    /// Seconds since the load started.
    pub start_s: f64,
    /// Repetitions that reported this second.
    pub runs: usize,
    /// Response time (ms, the group's [`LatencyStat`]).
    pub latency_ms: Option<Spread>,
    /// The median over repetitions of the per-second p99 (ms).
    pub p99_ms: Option<f64>,
    /// Successful requests per second.
    pub rate: Spread,
    /// The median over repetitions of the active users.
    pub users: Option<f64>,
    /// The median over repetitions of the target rate (requests/s, open loops).
    pub target_rate: Option<f64>,
}

/// What one run did with one request, over the whole load.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunTotals {
    /// The run.
    pub run: RunId,
    /// Its repetition.
    pub repetition: u32,
    /// Successful requests.
    pub successful: u64,
    /// Failed requests.
    pub failed: u64,
    /// Seconds from the first interval's start to the last one's end.
    pub duration_s: f64,
    /// Successful requests per second.
    pub rate: f64,
    /// Mean latency (ms), request-weighted over the intervals.
    pub latency_mean_ms: Option<f64>,
    /// The request-weighted mean of the intervals' p99 (ms).
    pub latency_p99_ms: Option<f64>,
}

/// A mean over repetitions with its 95% Student-t interval (from two repetitions on).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Estimate {
    /// Repetitions.
    pub n: usize,
    /// The mean.
    pub mean: f64,
    /// Its 95% confidence interval.
    pub ci: Option<Interval>,
}

impl Estimate {
    /// `None` for no values. The interval is [`Sample::mean_ci`]'s; a sample it refuses
    /// (one value, a non-finite one) has none.
    fn of(values: &[f64]) -> Option<Estimate> {
        if values.is_empty() {
            return None;
        }
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let ci = Sample::new(values.to_vec()).ok().map(|s| s.mean_ci(0.95));
        Some(Estimate {
            n: values.len(),
            mean,
            ci,
        })
    }

    /// `mean ± half-width` with the half-width to two significant digits and the mean to
    /// the same decimal place (the mean alone without an interval).
    pub fn text(&self) -> String {
        match self.ci {
            Some(ci) => {
                let half = (ci.high - ci.low) / 2.0;
                if !(half.is_finite() && half > 0.0) {
                    return format!("{} ± 0", whole_or_num(self.mean));
                }
                let decimals = (1 - half.log10().floor() as i32).clamp(0, 6) as usize;
                format!("{:.decimals$} ± {half:.decimals$}", self.mean)
            }
            None => whole_or_num(self.mean),
        }
    }
}

/// A whole number without decimals (counts), anything else as [`num`] writes it.
fn whole_or_num(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        num(v)
    }
}

/// A cell's totals of one request.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LoadTotals {
    /// Per run, by repetition.
    pub runs: Vec<RunTotals>,
    /// Successful requests per run.
    pub successful: Estimate,
    /// Failed requests per run.
    pub failed: Estimate,
    /// Successful requests per second.
    pub rate: Estimate,
    /// Mean latency (ms).
    pub latency_mean_ms: Option<Estimate>,
    /// Request-weighted mean of the per-second p99 (ms).
    pub latency_p99_ms: Option<Estimate>,
}

/// The load of every workload and request of `data`, in cell order; empty when no counted
/// run recorded load intervals.
pub fn load(data: &ExperimentData) -> Vec<LoadGroup> {
    let mut groups: Vec<RawGroup<'_>> = Vec::new();
    if data.intervals.is_empty() {
        return Vec::new();
    }
    let by_cell = data.runs_by_cell();
    for cell in &data.cells {
        let mut runs: Vec<(RunId, u32)> = by_cell
            .get(&cell.id)
            .into_iter()
            .flatten()
            .filter(|r| r.is_counted() && data.intervals.contains_key(&r.id))
            .map(|r| (r.id, r.repetition))
            .collect();
        runs.sort_by_key(|(id, repetition)| (*repetition, *id));
        let workload = level(cell, "workload");
        for (run, repetition) in runs {
            let mut by_request: BTreeMap<&str, Vec<&LoadInterval>> = BTreeMap::new();
            for i in data.intervals.get(&run).into_iter().flatten() {
                by_request.entry(i.request.as_str()).or_default().push(i);
            }
            for (request, intervals) in by_request {
                let g = match groups
                    .iter()
                    .position(|g| g.workload == workload && g.request == request)
                {
                    Some(g) => g,
                    None => {
                        groups.push(RawGroup {
                            workload,
                            request,
                            all_cells: &data.cells,
                            cells: Vec::new(),
                        });
                        groups.len() - 1
                    }
                };
                let cells = &mut groups[g].cells;
                if !matches!(cells.last(), Some((c, _)) if c.id == cell.id) {
                    cells.push((cell, Vec::new()));
                }
                if let Some((_, runs)) = cells.last_mut() {
                    runs.push(RawRun {
                        run,
                        repetition,
                        intervals,
                    });
                }
            }
        }
    }
    groups.into_iter().map(RawGroup::finish).collect()
}

/// One run's intervals of one request.
struct RawRun<'a> {
    run: RunId,
    repetition: u32,
    intervals: Vec<&'a LoadInterval>,
}

/// A group's intervals by cell and run, before they are summarised.
struct RawGroup<'a> {
    workload: &'a str,
    request: &'a str,
    /// Every cell of the experiment, for the labels of a lone line.
    all_cells: &'a [CellRecord],
    cells: Vec<(&'a CellRecord, Vec<RawRun<'a>>)>,
}

impl RawGroup<'_> {
    /// Picks the group's latency (p50 when any interval has one, else the mean), builds a
    /// line per cell and labels the lines by the levels that differ between them.
    fn finish(self) -> LoadGroup {
        let intervals = || {
            self.cells
                .iter()
                .flat_map(|(_, runs)| runs.iter().flat_map(|r| r.intervals.iter()))
        };
        let latency = if intervals().any(|i| i.latency_p50_ms.is_some()) {
            Some(LatencyStat::P50)
        } else if intervals().any(|i| i.latency_mean_ms.is_some()) {
            Some(LatencyStat::Mean)
        } else {
            None
        };
        let mut lines: Vec<LoadLine> = self
            .cells
            .iter()
            .map(|(cell, runs)| line(cell, runs, latency))
            .collect();
        let labels = labels(&lines, self.all_cells);
        for (line, label) in lines.iter_mut().zip(labels) {
            line.label = label;
        }
        LoadGroup {
            workload: self.workload.to_owned(),
            request: self.request.to_owned(),
            latency,
            lines,
        }
    }
}

/// Each line's levels of the factors (but `workload`) that tell it from the others: those
/// that differ between the lines, or for a lone line those that differ between the
/// experiment's cells (`all_cells`); all of its levels when none differs, and `cell N`
/// for a cell without other levels.
fn labels(lines: &[LoadLine], all_cells: &[CellRecord]) -> Vec<String> {
    let levels: Vec<&[(String, String)]> = if lines.len() > 1 {
        lines.iter().map(|l| l.levels.as_slice()).collect()
    } else {
        all_cells.iter().map(|c| c.levels.as_slice()).collect()
    };
    let differs = |f: &str| {
        let mut of = levels
            .iter()
            .map(|l| l.iter().find(|(g, _)| g == f).map(|(_, v)| v));
        let first = of.next().flatten();
        of.any(|v| v != first)
    };
    let varying: Vec<&str> = levels
        .iter()
        .flat_map(|l| l.iter().map(|(f, _)| f.as_str()))
        .filter(|f| *f != "workload" && differs(f))
        .collect();
    lines
        .iter()
        .map(|line| {
            let parts: Vec<&str> = line
                .levels
                .iter()
                .filter(|(f, _)| {
                    f != "workload" && (varying.is_empty() || varying.contains(&f.as_str()))
                })
                .map(|(_, l)| l.as_str())
                .collect();
            if parts.is_empty() {
                format!("cell {}", line.cell)
            } else {
                parts.join(" · ")
            }
        })
        .collect()
}

fn level<'a>(cell: &'a CellRecord, factor: &str) -> &'a str {
    cell.levels
        .iter()
        .find(|(f, _)| f == factor)
        .map_or("", |(_, l)| l.as_str())
}

/// The width of a run's intervals: the smallest gap between consecutive starts.
fn width(intervals: &[&LoadInterval]) -> f64 {
    let mut starts: Vec<f64> = intervals.iter().map(|i| i.start_s).collect();
    starts.sort_by(f64::total_cmp);
    starts
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|gap| *gap > 0.0)
        .fold(None, |min: Option<f64>, gap| {
            Some(min.map_or(gap, |m| m.min(gap)))
        })
        .unwrap_or(1.0)
}

/// The request-weighted mean of `value` over the intervals that have it and completed
/// requests.
fn weighted(
    intervals: &[&LoadInterval],
    value: impl Fn(&LoadInterval) -> Option<f64>,
) -> Option<f64> {
    let (sum, weight) = intervals
        .iter()
        .filter_map(|i| Some((value(i)?, i.requests as f64)))
        .filter(|(v, w)| v.is_finite() && *w > 0.0)
        .fold((0.0, 0.0), |(s, n), (v, w)| (s + v * w, n + w));
    (weight > 0.0).then(|| sum / weight)
}

fn successful(i: &LoadInterval) -> u64 {
    i.requests.saturating_sub(i.failures)
}

fn run_totals(run: RunId, repetition: u32, intervals: &[&LoadInterval]) -> RunTotals {
    let width = width(intervals);
    let (first, last) = intervals
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), i| {
            (lo.min(i.start_s), hi.max(i.start_s))
        });
    let duration_s = if first.is_finite() {
        last - first + width
    } else {
        0.0
    };
    let ok: u64 = intervals.iter().map(|i| successful(i)).sum();
    RunTotals {
        run,
        repetition,
        successful: ok,
        failed: intervals.iter().map(|i| i.failures).sum(),
        duration_s,
        rate: if duration_s > 0.0 {
            ok as f64 / duration_s
        } else {
            0.0
        },
        latency_mean_ms: weighted(intervals, |i| i.latency_mean_ms),
        latency_p99_ms: weighted(intervals, |i| i.latency_p99_ms),
    }
}

/// Values of one second, one per repetition that reported it.
#[derive(Default)]
struct SecondValues {
    start_s: f64,
    runs: usize,
    latency: Vec<f64>,
    p99: Vec<f64>,
    rate: Vec<f64>,
    users: Vec<f64>,
    target_rate: Vec<f64>,
}

/// A cell's line, unlabelled: its seconds (the response time as `latency` says) and
/// totals.
fn line(cell: &CellRecord, runs: &[RawRun<'_>], latency: Option<LatencyStat>) -> LoadLine {
    // Seconds keyed by whole milliseconds, so that 0.1 + 0.2 and 0.3 meet.
    let mut seconds: BTreeMap<i64, SecondValues> = BTreeMap::new();
    let mut totals = Vec::new();
    for RawRun {
        run,
        repetition,
        intervals,
    } in runs
    {
        let width = width(intervals);
        for i in intervals.iter().filter(|i| i.start_s.is_finite()) {
            let s = seconds
                .entry((i.start_s * 1000.0).round() as i64)
                .or_default();
            s.start_s = i.start_s;
            s.runs += 1;
            let finite = |v: Option<f64>| v.filter(|v| v.is_finite());
            s.latency.extend(finite(match latency {
                Some(LatencyStat::P50) => i.latency_p50_ms,
                Some(LatencyStat::Mean) => i.latency_mean_ms,
                None => None,
            }));
            s.p99.extend(finite(i.latency_p99_ms));
            s.rate.push(successful(i) as f64 / width);
            s.users.extend(finite(i.users));
            s.target_rate.extend(finite(i.target_rate));
        }
        totals.push(run_totals(*run, *repetition, intervals));
    }
    let column =
        |f: fn(&RunTotals) -> Option<f64>| -> Vec<f64> { totals.iter().filter_map(f).collect() };
    let estimate = |f: fn(&RunTotals) -> Option<f64>| Estimate::of(&column(f));
    let zero = Estimate {
        n: 0,
        mean: 0.0,
        ci: None,
    };
    let totals = LoadTotals {
        successful: estimate(|t| Some(t.successful as f64)).unwrap_or(zero),
        failed: estimate(|t| Some(t.failed as f64)).unwrap_or(zero),
        rate: estimate(|t| Some(t.rate)).unwrap_or(zero),
        latency_mean_ms: estimate(|t| t.latency_mean_ms),
        latency_p99_ms: estimate(|t| t.latency_p99_ms),
        runs: totals,
    };
    LoadLine {
        cell: cell.index,
        levels: cell.levels.clone(),
        label: String::new(),
        seconds: seconds
            .into_values()
            .map(|s| LoadSecond {
                start_s: s.start_s,
                runs: s.runs,
                latency_ms: Spread::of(&s.latency),
                p99_ms: percentile(&s.p99, 50.0),
                rate: Spread::of(&s.rate).unwrap_or(Spread {
                    median: 0.0,
                    low: 0.0,
                    high: 0.0,
                }),
                users: percentile(&s.users, 50.0),
                target_rate: percentile(&s.target_rate, 50.0),
            })
            .collect(),
        totals,
    }
}

/// Seconds since the start as a [`Duration`] (negative and non-finite as zero).
fn at(start_s: f64) -> Duration {
    Duration::try_from_secs_f64(start_s.max(0.0)).unwrap_or(Duration::ZERO)
}

/// One line per cell with its band, as a chart series in the cell's colour.
fn main_series(
    i: usize,
    line: &LoadLine,
    value: impl Fn(&LoadSecond) -> Option<Spread>,
) -> TimeSeries {
    let spreads: Vec<(f64, Spread)> = line
        .seconds
        .iter()
        .filter_map(|s| Some((s.start_s, value(s)?)))
        .collect();
    TimeSeries {
        name: line.label.clone(),
        samples: spreads
            .iter()
            .map(|(t, s)| TimeSample {
                t: at(*t),
                value: s.median,
            })
            .collect(),
        band: spreads
            .iter()
            .map(|(t, s)| TimeBand {
                t: at(*t),
                low: s.low,
                high: s.high,
            })
            .collect(),
        style: LineStyle::Regular,
        colour: Some(i),
    }
}

/// The chart's size: as wide as two fit side by side on a laptop screen.
const CHART: Size = Size {
    width: 640,
    height: 380,
};

/// Response time over time: per cell the median over repetitions of the per-second
/// latency (the group's [`LatencyStat`]) over the band of the lowest to the highest
/// repetition, and the median per-second p99 as a thin dashed line in the same colour.
/// `None` when no interval of the group reported a latency.
pub fn latency_chart(group: &LoadGroup) -> Option<TimeSeriesChart> {
    let stat = group.latency?;
    let mut series = Vec::new();
    for (i, line) in group.lines.iter().enumerate() {
        series.push(main_series(i, line, |s| s.latency_ms));
        let p99: Vec<TimeSample> = line
            .seconds
            .iter()
            .filter_map(|s| {
                Some(TimeSample {
                    t: at(s.start_s),
                    value: s.p99_ms?,
                })
            })
            .collect();
        if !p99.is_empty() {
            series.push(TimeSeries {
                name: format!("{} p99", line.label),
                samples: p99,
                style: LineStyle::Thin,
                colour: Some(i),
                ..TimeSeries::default()
            });
        }
    }
    Some(TimeSeriesChart {
        title: format!("{}: response time over time", group.title()),
        y_label: format!("response time, {} (ms)", stat.short()),
        y_range: None,
        series,
        secondary: None,
        size: CHART,
    })
}

/// Requests per second over time: per cell the median over repetitions of the
/// successful requests per second over the band of the lowest to the highest repetition,
/// with the active users (or, for open loops, the target rate) on the right axis: one
/// dark line when every cell ran the same profile, else one thin line per cell.
pub fn rate_chart(group: &LoadGroup) -> TimeSeriesChart {
    let series = group
        .lines
        .iter()
        .enumerate()
        .map(|(i, line)| main_series(i, line, |s| Some(s.rate)))
        .collect();
    let users = group
        .lines
        .iter()
        .any(|l| l.seconds.iter().any(|s| s.users.is_some()));
    let (label, profile): (&str, fn(&LoadSecond) -> Option<f64>) = if users {
        ("active users", |s| s.users)
    } else {
        ("target rate (requests/s)", |s| s.target_rate)
    };
    let curves: Vec<Vec<(f64, f64)>> = group
        .lines
        .iter()
        .map(|l| {
            l.seconds
                .iter()
                .filter_map(|s| Some((s.start_s, profile(s)?)))
                .collect()
        })
        .collect();
    let samples = |curve: &[(f64, f64)]| -> Vec<TimeSample> {
        curve
            .iter()
            .map(|(t, v)| TimeSample {
                t: at(*t),
                value: *v,
            })
            .collect()
    };
    let profiles: Vec<TimeSeries> = if curves.iter().all(Vec::is_empty) {
        Vec::new()
    } else if curves.windows(2).all(|w| w[0] == w[1]) {
        vec![TimeSeries {
            name: label.to_owned(),
            samples: samples(&curves[0]),
            style: LineStyle::Thin,
            ..TimeSeries::default()
        }]
    } else {
        group
            .lines
            .iter()
            .zip(&curves)
            .enumerate()
            .map(|(i, (line, curve))| TimeSeries {
                name: format!("{}: {label}", line.label),
                samples: samples(curve),
                style: LineStyle::Thin,
                colour: Some(i),
                ..TimeSeries::default()
            })
            .collect()
    };
    TimeSeriesChart {
        title: format!("{}: successful requests per second", group.title()),
        y_label: "successful requests (1/s)".into(),
        y_range: None,
        series,
        secondary: (!profiles.is_empty()).then(|| SecondaryAxis {
            label: label.to_owned(),
            series: profiles,
        }),
        size: CHART,
    }
}

/// The caption both charts of a group share: what the lines and bands are.
pub fn caption(group: &LoadGroup) -> String {
    let reps = group
        .lines
        .iter()
        .map(|l| l.totals.runs.len())
        .max()
        .unwrap_or(0);
    format!(
        "Lines: the median over the repetitions (up to {reps} per cell) at each second; shaded band: the lowest to the highest repetition at that second (min–max). Response time: the per-second {}; thin dashed lines: the median per-second p99. Requests per second: successful requests (failures excluded); the right axis shows the load profile.",
        group.latency.unwrap_or(LatencyStat::Mean).describe()
    )
}

/// The totals of every group, one line per cell and request: repetitions, successful and
/// failed requests, requests per second, mean latency and per-second p99, each as mean ±
/// the half-width of its 95% interval over repetitions, and each run's successful
/// requests (by repetition).
pub fn table(groups: &[LoadGroup]) -> Table {
    let mut t = Table::new(
        [
            "workload",
            "request",
            "cell",
            "runs",
            "successful",
            "failed",
            "requests/s",
            "mean (ms)",
            "p99/s (ms)",
            "successful per run",
        ]
        .map(String::from)
        .to_vec(),
        vec![
            false, false, false, true, true, true, true, true, true, false,
        ],
    );
    let dash = || "-".to_owned();
    for g in groups {
        for l in &g.lines {
            let tot = &l.totals;
            t.push(vec![
                g.workload.clone(),
                g.request.clone(),
                l.label.clone(),
                tot.runs.len().to_string(),
                tot.successful.text(),
                tot.failed.text(),
                tot.rate.text(),
                tot.latency_mean_ms.map_or_else(dash, |e| e.text()),
                tot.latency_p99_ms.map_or_else(dash, |e| e.text()),
                tot.runs
                    .iter()
                    .map(|r| r.successful.to_string())
                    .collect::<Vec<_>>()
                    .join(" "),
            ]);
        }
    }
    t
}

/// The terminal's "Load over time" section: a heading line and [`table`]; empty when
/// there is no load.
pub fn render(groups: &[LoadGroup], style: impl Into<Style>) -> String {
    if groups.is_empty() {
        return String::new();
    }
    let style = style.into();
    let heading = "load over time: per cell, mean ± 95% CI over repetitions; p99/s = request-weighted mean of the per-second p99";
    let heading = if style.is_markdown() {
        format!(
            "**Load over time**: {}\n",
            &heading["load over time: ".len()..]
        )
    } else {
        format!("{heading}\n")
    };
    heading + &table(groups).render(style)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use isolab_store::{ExperimentRecord, ExperimentStatus, RunRecord, RunStatus};

    use super::*;

    fn interval(request: &str, start_s: f64, requests: u64) -> LoadInterval {
        LoadInterval {
            requests,
            ..LoadInterval::new(request, start_s)
        }
    }

    fn cell(id: i64, levels: &[(&str, &str)]) -> CellRecord {
        CellRecord {
            id,
            index: id as u32,
            key: String::new(),
            levels: levels
                .iter()
                .map(|(f, l)| ((*f).to_owned(), (*l).to_owned()))
                .collect(),
            stop_reason: None,
        }
    }

    fn run(id: i64, cell: i64, repetition: u32, warmup: bool) -> RunRecord {
        RunRecord {
            id,
            cell,
            repetition,
            warmup,
            round: repetition,
            status: RunStatus::Ok,
            exit_code: Some(0),
            started_at: UNIX_EPOCH,
            wall: Duration::ZERO,
            error: None,
            limits: serde_json::Value::Null.into(),
            metrics: vec![],
            telemetry: Default::default(),
            notes: vec![],
        }
    }

    fn data(cells: Vec<CellRecord>, runs: Vec<(RunRecord, Vec<LoadInterval>)>) -> ExperimentData {
        ExperimentData {
            record: ExperimentRecord {
                id: 1,
                name: "t".into(),
                spec_toml: String::new(),
                spec_path: None,
                seed: 0,
                isolab_version: "test".into(),
                created_at: UNIX_EPOCH,
                finished_at: None,
                status: ExperimentStatus::Complete,
            },
            cells,
            intervals: runs
                .iter()
                .filter(|(_, i)| !i.is_empty())
                .map(|(r, i)| (r.id, i.clone()))
                .collect(),
            runs: runs.into_iter().map(|(r, _)| r).collect(),
            environment: vec![],
            interruptions: vec![],
            series: vec![],
        }
    }

    #[test]
    fn widths_weights_and_totals() {
        let a = interval("home", 0.0, 10);
        let b = LoadInterval {
            failures: 2,
            latency_mean_ms: Some(30.0),
            latency_p99_ms: Some(90.0),
            ..interval("home", 2.0, 30)
        };
        let c = LoadInterval {
            latency_mean_ms: Some(10.0),
            latency_p99_ms: Some(f64::NAN),
            ..interval("home", 6.0, 10)
        };
        assert_eq!(width(&[&a, &b, &c]), 2.0);
        assert_eq!(width(&[&a]), 1.0);
        let t = run_totals(4, 1, &[&a, &b, &c]);
        assert_eq!((t.successful, t.failed), (48, 2));
        // From 0 to 6 plus one 2 s interval.
        assert_eq!(t.duration_s, 8.0);
        assert_eq!(t.rate, 6.0);
        // (30 × 30 + 10 × 10) / 40; the NaN p99 is left out.
        assert_eq!(t.latency_mean_ms, Some(25.0));
        assert_eq!(t.latency_p99_ms, Some(90.0));
        assert_eq!(run_totals(4, 1, &[&a]).latency_mean_ms, None);
    }

    #[test]
    fn estimates_print_their_interval_to_two_digits() {
        let e = Estimate::of(&[100.0, 102.0, 104.0]).unwrap();
        assert_eq!(e.n, 3);
        assert_eq!(e.text(), "102.0 ± 5.0");
        assert_eq!(Estimate::of(&[7.0, 7.0]).unwrap().text(), "7 ± 0");
        assert_eq!(Estimate::of(&[7.5]).unwrap().text(), "7.500");
        assert!(Estimate::of(&[]).is_none());
    }

    #[test]
    fn groups_by_workload_and_request_with_lines_by_cell() {
        let cells = vec![
            cell(
                0,
                &[("platform", "host"), ("shape", "large"), ("workload", "wp")],
            ),
            cell(
                1,
                &[("platform", "vm"), ("shape", "large"), ("workload", "wp")],
            ),
            cell(
                2,
                &[
                    ("platform", "host"),
                    ("shape", "large"),
                    ("workload", "nginx"),
                ],
            ),
        ];
        let mean_only = |r: &str, s: f64| LoadInterval {
            latency_mean_ms: Some(5.0 + s),
            users: Some(s + 1.0),
            ..interval(r, s, 10)
        };
        let with_p50 = |r: &str, s: f64| LoadInterval {
            latency_p50_ms: Some(4.0 + s),
            ..mean_only(r, s)
        };
        let runs = vec![
            // A warm-up is never shown.
            (run(1, 0, 1, true), vec![with_p50("home", 0.0)]),
            (
                run(2, 0, 1, false),
                vec![
                    with_p50("login", 0.0),
                    with_p50("home", 0.0),
                    with_p50("home", 1.0),
                ],
            ),
            (
                run(3, 0, 2, false),
                vec![with_p50("home", 0.0), with_p50("home", 1.0)],
            ),
            (
                run(4, 1, 1, false),
                vec![mean_only("home", 0.0), mean_only("home", 1.0)],
            ),
            (run(5, 2, 1, false), vec![mean_only("home", 0.0)]),
            // A run without intervals (a command workload's) is no line.
            (run(6, 2, 2, false), vec![]),
        ];
        let groups = load(&data(cells, runs));
        let titles: Vec<String> = groups.iter().map(LoadGroup::title).collect();
        assert_eq!(titles, ["wp · home", "wp · login", "nginx · home"]);
        let home = &groups[0];
        // p50 where any cell of the group has it.
        assert_eq!(home.latency, Some(LatencyStat::P50));
        let labels: Vec<&str> = home.lines.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["host", "vm"]);
        assert_eq!(home.lines[0].totals.runs.len(), 2);
        assert_eq!(home.lines[0].seconds[1].runs, 2);
        assert_eq!(home.lines[0].seconds[1].latency_ms.unwrap().median, 5.0);
        // The vm cell reported means only: it has no p50 line.
        assert_eq!(home.lines[1].seconds[0].latency_ms, None);
        assert_eq!(groups[1].lines.len(), 1);
        // A lone line is labelled by the levels that vary in the experiment.
        assert_eq!(groups[2].lines[0].label, "host");
        assert_eq!(groups[2].latency, Some(LatencyStat::Mean));
        assert_eq!(groups[2].lines[0].totals.runs.len(), 1);
    }

    #[test]
    fn the_profile_is_one_line_when_shared_and_one_per_cell_otherwise() {
        let cells = vec![
            cell(0, &[("platform", "host")]),
            cell(1, &[("platform", "vm")]),
        ];
        let open = |s: f64, rate: f64| LoadInterval {
            target_rate: Some(rate),
            ..interval("get", s, rate as u64)
        };
        let same = data(
            cells.clone(),
            vec![
                (run(1, 0, 1, false), vec![open(0.0, 50.0), open(1.0, 100.0)]),
                (run(2, 1, 1, false), vec![open(0.0, 50.0), open(1.0, 100.0)]),
            ],
        );
        let groups = load(&same);
        assert_eq!(groups[0].latency, None);
        assert!(latency_chart(&groups[0]).is_none());
        let chart = rate_chart(&groups[0]);
        let profile = chart.secondary.unwrap();
        assert_eq!(profile.label, "target rate (requests/s)");
        assert_eq!(profile.series.len(), 1);
        assert_eq!(profile.series[0].colour, None);

        let different = data(
            cells,
            vec![
                (run(1, 0, 1, false), vec![open(0.0, 50.0), open(1.0, 100.0)]),
                (run(2, 1, 1, false), vec![open(0.0, 60.0), open(1.0, 100.0)]),
            ],
        );
        let chart = rate_chart(&load(&different)[0]);
        let profile = chart.secondary.unwrap();
        let names: Vec<&str> = profile.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "host: target rate (requests/s)",
                "vm: target rate (requests/s)"
            ]
        );
        assert_eq!(profile.series[1].colour, Some(1));
    }

    #[test]
    fn no_intervals_no_groups() {
        let d = data(vec![cell(0, &[])], vec![(run(1, 0, 1, false), vec![])]);
        assert!(load(&d).is_empty());
        assert_eq!(render(&[], false), "");
    }
}
