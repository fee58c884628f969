//! Trends: each point's estimate over the stored experiments of one spec in time order,
//! one line per cell, metric and host, with the change points the gate's rule decides
//! and the host-fingerprint changes between consecutive experiments.
//!
//! A change point: walking a line in time order, experiment i is tested against its
//! window, the up to [`WINDOW`] experiments before it since the last change point,
//! outliers left out
//! ([`isolab_stats::test_against_history`], once at least [`isolab_stats::MIN_HISTORY`]
//! are there), at α divided by the number of tests the line makes (Bonferroni: a line
//! of 30 experiments makes up to 27 tests, and an A/A line must not sprout change
//! points). Worse or better, it is a change point when the next experiment is too
//! against the same window (or it is the newest), and starts a new window; otherwise it
//! is an outlier, one experiment's excursion.

use isolab_stats::{
    history_verdict, median_ci, test_against_history, Direction, Interval, MedianEstimate, Verdict,
    VerdictRule,
};
use isolab_store::ExperimentId;

use crate::data::ExperimentData;
use crate::fingerprint::{self, Drift};

/// One experiment on a trend line.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TrendPoint {
    /// The experiment.
    pub experiment: ExperimentId,
    /// When it was created, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// Its counted runs of the cell.
    pub n: usize,
    /// Their median.
    pub median: f64,
    /// The median's 95% CI.
    pub ci: Option<Interval>,
    /// A change point here: worse or better than the segment before.
    pub change: Option<Verdict>,
    /// The change against the window before, positive = worse, when tested.
    pub change_pct: Option<f64>,
    /// Worse or better than the window before, but the next experiment is not: one
    /// experiment's excursion, not a change point.
    pub outlier: bool,
    /// Fingerprint keys that differ from the previous experiment on the line.
    pub drift: Vec<Drift>,
}

/// One cell's metric on one host over time.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TrendLine {
    /// The host (its `hostname`).
    pub host: String,
    /// The cell's key.
    pub cell: String,
    /// The metric.
    pub metric: String,
    /// Its unit.
    pub unit: String,
    /// Which way is better.
    pub direction: Direction,
    /// Its experiments, oldest first.
    pub points: Vec<TrendPoint>,
}

/// The trend of one spec's experiments.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Trend {
    /// The lines, by host, cell and metric.
    pub lines: Vec<TrendLine>,
}

impl Trend {
    /// Whether any line has two or more experiments.
    pub fn has_history(&self) -> bool {
        self.lines.iter().any(|l| l.points.len() >= 2)
    }
}

/// The trend over `experiments` (oldest first) of every cell of the newest one and the
/// metrics `metrics_of(cell index)` names; `same_cell(i, key)` says whether experiment
/// i's cell `key` is the newest one's (same levels, same workload definition).
pub fn trend(
    experiments: &[ExperimentData],
    same_cell: &dyn Fn(usize, &str) -> bool,
    metrics_of: &dyn Fn(u32) -> Vec<String>,
    rule: &VerdictRule,
) -> Trend {
    let Some(newest) = experiments.last() else {
        return Trend::default();
    };
    let host_of = |d: &ExperimentData| {
        d.environment
            .iter()
            .find(|(k, _)| k == "hostname")
            .map_or_else(|| "unknown".to_owned(), |(_, v)| v.clone())
    };
    // Each experiment's host, once.
    let host_at: Vec<String> = experiments.iter().map(host_of).collect();
    let mut hosts = host_at.clone();
    hosts.sort();
    hosts.dedup();
    let mut lines = Vec::new();
    for host in &hosts {
        for cell in &newest.cells {
            for metric in metrics_of(cell.index) {
                let mut points: Vec<TrendPoint> = Vec::new();
                let (mut unit, mut direction) = (String::new(), Direction::Lower);
                let mut previous: Option<&ExperimentData> = None;
                for (i, e) in experiments.iter().enumerate() {
                    if host_at[i] != *host || !same_cell(i, &cell.key) {
                        continue;
                    }
                    let Some((v, u, d)) = e.counted_values(&cell.key, &metric) else {
                        continue;
                    };
                    let Ok(sample) = isolab_stats::Sample::new(v) else {
                        continue;
                    };
                    (unit, direction) = (u, d);
                    let drift = previous.map_or_else(Vec::new, |p| {
                        fingerprint::drift(
                            &fingerprint::fingerprint(&p.environment),
                            &fingerprint::fingerprint(&e.environment),
                        )
                    });
                    previous = Some(e);
                    points.push(TrendPoint {
                        experiment: e.record.id,
                        created_at_ms: e
                            .record
                            .created_at
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_millis() as u64),
                        n: sample.len(),
                        median: sample.median(),
                        ci: median_ci(&sample, 0.95),
                        change: None,
                        change_pct: None,
                        outlier: false,
                        drift,
                    });
                }
                if points.is_empty() {
                    continue;
                }
                change_points(&mut points, direction, rule);
                lines.push(TrendLine {
                    host: host.clone(),
                    cell: cell.key.clone(),
                    metric,
                    unit,
                    direction,
                    points,
                });
            }
        }
    }
    Trend { lines }
}

/// How many experiments before a point its window holds at most (a gate's default
/// history).
pub const WINDOW: usize = 10;

/// Marks the change points and outliers of a line (see the module's rule).
fn change_points(points: &mut [TrendPoint], direction: Direction, rule: &VerdictRule) {
    let tests = points
        .len()
        .saturating_sub(isolab_stats::MIN_HISTORY)
        .max(1);
    let strict = VerdictRule {
        alpha: rule.alpha / tests as f64,
        noise: rule.noise,
    };
    let verdict = |window: &[f64], p: &TrendPoint| {
        test_against_history(
            window,
            MedianEstimate::from_interval(p.median, p.ci),
            direction,
            &strict,
        )
        .map(|t| (history_verdict(&strict, &t, t.p), t.change))
    };
    let mut start = 0;
    for i in 0..points.len() {
        // The window leaves outliers out: one excursion must not widen it.
        let mut window: Vec<f64> = points[start..i]
            .iter()
            .filter(|p| !p.outlier)
            .map(|p| p.median)
            .collect();
        window.drain(..window.len().saturating_sub(WINDOW));
        let Some((v, change)) = verdict(&window, &points[i]) else {
            continue;
        };
        points[i].change_pct = Some(change);
        if !matches!(v, Verdict::Worse | Verdict::Better) {
            continue;
        }
        // A shift the next experiment keeps (or the newest one) is a change point; one
        // the next experiment does not keep is an outlier.
        let kept = points
            .get(i + 1)
            .is_none_or(|next| verdict(&window, next).map(|(w, _)| w) == Some(v));
        if kept {
            points[i].change = Some(v);
            start = i;
        } else {
            points[i].outlier = true;
        }
    }
}

/// One line's table: a row per experiment.
fn line_table(l: &TrendLine) -> crate::table::Table {
    use crate::table::{num, Table};
    let mut t = Table::new(
        [
            "experiment",
            "created (UTC)",
            "n",
            "median",
            "95% CI",
            "vs window",
            "change point",
            "fingerprint change",
        ]
        .map(String::from)
        .to_vec(),
        vec![true, false, true, true, true, true, false, false],
    );
    for p in &l.points {
        t.push(vec![
            p.experiment.to_string(),
            humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + std::time::Duration::from_millis(p.created_at_ms),
            )
            .to_string(),
            p.n.to_string(),
            num(p.median),
            p.ci.map_or("-".into(), |c| format!("[{}, {}]", num(c.low), num(c.high))),
            p.change_pct
                .map_or("-".into(), |c| format!("{:+.1}%", c * 100.0)),
            match (p.change, p.outlier) {
                (Some(v), _) => v.as_str().to_owned(),
                (None, true) => "outlier".to_owned(),
                (None, false) => String::new(),
            },
            fingerprint::describe(&p.drift),
        ]);
    }
    t
}

/// A line's heading: cell, host and metric with its unit.
fn heading(l: &TrendLine) -> String {
    format!(
        "{} on {}: {}{}",
        l.cell,
        l.host,
        l.metric,
        if l.unit.is_empty() {
            String::new()
        } else {
            format!(" ({})", l.unit)
        }
    )
}

/// The trend as text or Markdown: per line, one row per experiment.
pub fn trend_table(trend: &Trend, style: impl Into<crate::table::Style>) -> String {
    let style = style.into();
    let mut out = String::new();
    for l in &trend.lines {
        out.push_str(&crate::table::text_lines(
            &format!("\n{}\n", heading(l)),
            style,
        ));
        out.push_str(&line_table(l).render(style));
    }
    out
}

/// The trend as HTML: per line a chart of the medians with their CIs over the
/// experiments, change points and fingerprint changes as marked series, then its table.
pub fn trend_html(trend: &Trend) -> String {
    use crate::plots::{lines, LineChart, LinePoint, LineSeries};
    let mut out = String::new();
    for l in trend.lines.iter().filter(|l| l.points.len() >= 2) {
        let at = |i: usize, p: &TrendPoint| LinePoint {
            x: (i + 1) as f64,
            y: p.median,
            y_low: p.ci.map(|c| c.low),
            y_high: p.ci.map(|c| c.high),
        };
        let mut series = vec![LineSeries {
            name: format!("median, 95% CI ({})", l.host),
            points: l.points.iter().enumerate().map(|(i, p)| at(i, p)).collect(),
            fit: None,
        }];
        // Each marked experiment is a series of one point (a line through markers of
        // different events would say nothing): its legend names the experiment and what
        // happened there.
        for (i, p) in l.points.iter().enumerate() {
            let mut events = Vec::new();
            if let Some(v) = p.change {
                events.push(format!("change point, {}", v.as_str()));
            }
            if !p.drift.is_empty() {
                let keys: Vec<&str> = p.drift.iter().map(|d| d.key.as_str()).collect();
                events.push(format!("fingerprint changed: {}", keys.join(", ")));
            }
            if !events.is_empty() {
                series.push(LineSeries {
                    name: format!("experiment {}: {}", p.experiment, events.join("; ")),
                    points: vec![LinePoint::new((i + 1) as f64, p.median)],
                    fit: None,
                });
            }
        }
        let chart = LineChart {
            title: heading(l),
            x_label: "experiment (time order)".into(),
            y_label: if l.unit.is_empty() {
                l.metric.clone()
            } else {
                format!("{} ({})", l.metric, l.unit)
            },
            series,
            ..LineChart::default()
        };
        out.push_str(&format!(
            "<h3>{}</h3>\n<figure>{}</figure>\n{}",
            crate::escape::esc(&heading(l)),
            lines(&chart),
            line_table(l).render_html()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(i: usize, median: f64) -> TrendPoint {
        TrendPoint {
            experiment: i as i64 + 1,
            created_at_ms: i as u64,
            n: 8,
            median,
            ci: None,
            change: None,
            change_pct: None,
            outlier: false,
            drift: Vec::new(),
        }
    }

    /// A line of these medians (wall times) with its change points and outliers marked.
    fn decided(medians: &[f64]) -> Vec<TrendPoint> {
        let mut points: Vec<TrendPoint> = medians
            .iter()
            .enumerate()
            .map(|(i, &m)| point(i, m))
            .collect();
        change_points(&mut points, Direction::Lower, &VerdictRule::default());
        points
    }

    #[test]
    fn a_level_shift_is_a_change_point_and_one_excursion_an_outlier() {
        // ±0.2% around 1.0; experiment 11 alone 3% slower; from 16 on, all 3% slower.
        let wiggle = [
            1.0, 1.002, 0.998, 1.001, 0.999, 1.002, 0.998, 1.0, 1.001, 0.999,
        ];
        let mut medians: Vec<f64> = wiggle.to_vec();
        medians.push(1.03);
        medians.extend(&wiggle[..5]);
        medians.extend(wiggle[..5].iter().map(|v| v * 1.03));
        let points = decided(&medians);
        let marks: Vec<(i64, &str)> = points
            .iter()
            .filter_map(|p| match (p.change, p.outlier) {
                (Some(v), _) => Some((p.experiment, v.as_str())),
                (None, true) => Some((p.experiment, "outlier")),
                _ => None,
            })
            .collect();
        assert_eq!(marks, [(11, "outlier"), (17, "worse")]);
        // The shift's change against the window before it.
        let at = points[16].change_pct.unwrap();
        assert!((at - 0.03).abs() < 0.003, "{at}");
    }

    #[test]
    fn an_a_a_line_has_no_change_point() {
        let medians = [
            1.0, 1.004, 0.996, 1.007, 0.994, 1.002, 0.998, 1.005, 0.995, 1.001, 1.003, 0.997, 1.0,
            1.006, 0.995, 1.002, 0.999, 1.004, 0.996, 1.001,
        ];
        let points = decided(&medians);
        assert!(points.iter().all(|p| p.change.is_none() && !p.outlier));
    }
}
