//! Data quality of an experiment: how many points are stable, which cells ran out of
//! repetitions, which runs are outliers, which were throttled unexpectedly.

use std::collections::BTreeMap;

use isolab_stats::{outliers_mad, Sample};
use isolab_store::Telemetry;

use crate::data::ExperimentData;

/// Modified z-score above which a run is flagged (Iglewicz & Hoaglin's 3.5).
pub const OUTLIER_Z: f64 = 3.5;

/// Fewest counted runs of a cell for its outliers to be flagged.
pub const OUTLIER_MIN_RUNS: usize = 5;

/// A run whose primary metric is far from its cell's median. Flagged, never dropped.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OutlierRun {
    /// The cell.
    pub cell: String,
    /// The run's id.
    pub run: i64,
    /// Its value.
    pub value: f64,
    /// Its modified z-score.
    pub score: f64,
}

/// The data-quality section of every report.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Quality {
    /// Measurement points (cells × primary metric) with at least two observations.
    pub points: usize,
    /// Of those, points with CV below 5%.
    pub stable_points: usize,
    /// `stable_points / points` (seed 000 reports 95%).
    pub share_stable: Option<f64>,
    /// Cells that stopped at `max` without reaching the target CV.
    pub max_without_target: Vec<String>,
    /// Compared cells that stopped at `max` with a comparison still undecided.
    pub max_undecided: Vec<String>,
    /// Cells that failed.
    pub failed_cells: Vec<String>,
    /// Flagged outlier runs.
    pub outliers: Vec<OutlierRun>,
    /// Cells without a cpu quota whose runs were nevertheless throttled.
    pub unexpected_throttling: Vec<String>,
    /// Interrupted attempts.
    pub interruptions: usize,
}

/// Assesses `data`, looking at each cell's primary metric (`primary` by cell index;
/// the first metric of a run when absent).
pub fn quality(data: &ExperimentData, primary: &BTreeMap<u32, String>) -> Quality {
    let mut q = Quality {
        points: 0,
        stable_points: 0,
        share_stable: None,
        max_without_target: Vec::new(),
        max_undecided: Vec::new(),
        failed_cells: Vec::new(),
        outliers: Vec::new(),
        unexpected_throttling: Vec::new(),
        interruptions: data.interruptions.len(),
    };
    let by_cell = data.runs_by_cell();
    for cell in &data.cells {
        match cell.stop_reason.as_deref() {
            Some(r) if r.starts_with("max") && r.contains("comparison") => {
                q.max_undecided.push(cell.key.clone())
            }
            Some(r) if r.starts_with("max") => q.max_without_target.push(cell.key.clone()),
            Some(r) if r.starts_with("failed") => q.failed_cells.push(cell.key.clone()),
            _ => {}
        }
        let runs: Vec<_> = by_cell
            .get(&cell.id)
            .map(|rs| rs.iter().copied().filter(|r| r.is_counted()).collect())
            .unwrap_or_default();
        let observed: Vec<(i64, f64)> = runs
            .iter()
            .filter_map(|r| {
                let m = match primary.get(&cell.index) {
                    Some(p) => r.metrics.iter().find(|m| &m.name == p),
                    None => r.metrics.first(),
                };
                m.map(|m| (r.id, m.value))
            })
            .collect();
        if let Ok(sample) = Sample::new(observed.iter().map(|(_, v)| *v).collect()) {
            q.points += 1;
            if sample.cv() < 0.05 {
                q.stable_points += 1;
            }
            // With fewer than OUTLIER_MIN_RUNS observations the MAD is too unstable for
            // the modified z-score to mean much: no flags.
            let flagged = if sample.len() >= OUTLIER_MIN_RUNS {
                outliers_mad(&sample, OUTLIER_Z)
            } else {
                isolab_stats::Outliers {
                    indices: Vec::new(),
                    scores: Vec::new(),
                }
            };
            // `scores` holds every observation's score; `indices` the flagged ones.
            for &i in &flagged.indices {
                q.outliers.push(OutlierRun {
                    cell: cell.key.clone(),
                    run: observed[i].0,
                    value: observed[i].1,
                    score: flagged.scores[i],
                });
            }
        }
        let unlimited = runs
            .first()
            .and_then(|r| r.limits.get("applied"))
            .is_some_and(|a| a.get("cpu").is_some_and(|c| c.is_null()));
        let throttled = runs.iter().any(|r| {
            r.telemetry
                .get(Telemetry::NrThrottled)
                .is_some_and(|v| v > 0.0)
        });
        if unlimited && throttled {
            q.unexpected_throttling.push(cell.key.clone());
        }
    }
    q.share_stable = (q.points > 0).then(|| q.stable_points as f64 / q.points as f64);
    q
}

/// How [`quality_lines`] shows outlier runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutlierLines {
    /// One line per outlier run.
    Each,
    /// One line that counts them and names the command that lists those of this
    /// experiment.
    Count {
        /// The experiment's id, for `isolab show ID --outliers`.
        experiment: i64,
    },
}

/// The quality section as text lines, outlier runs as `outliers` says.
pub fn quality_lines(q: &Quality, outliers: OutlierLines) -> Vec<String> {
    let mut out = Vec::new();
    match q.share_stable {
        Some(s) => out.push(format!(
            "{:.0}% of points have CV < 5% ({} of {}; seed 000 reports 95%)",
            s * 100.0,
            q.stable_points,
            q.points
        )),
        None => out.push("no point has two observations yet".into()),
    }
    if !q.max_without_target.is_empty() {
        out.push(format!(
            "{} cells reached max runs without the target CV: {}",
            q.max_without_target.len(),
            q.max_without_target.join("; ")
        ));
    }
    if !q.max_undecided.is_empty() {
        out.push(format!(
            "{} cells reached max runs before every comparison was decided (see `?` and its n≈): {}",
            q.max_undecided.len(),
            q.max_undecided.join("; ")
        ));
    }
    if !q.failed_cells.is_empty() {
        out.push(format!(
            "{} cells failed: {}",
            q.failed_cells.len(),
            q.failed_cells.join("; ")
        ));
    }
    if outliers == OutlierLines::Each {
        for o in &q.outliers {
            out.push(format!(
                "outlier: run {} of {} = {} (modified z {:.1}); kept, not dropped",
                o.run, o.cell, o.value, o.score
            ));
        }
    } else if let (OutlierLines::Count { experiment }, false) = (outliers, q.outliers.is_empty()) {
        let mut cells: Vec<&str> = q.outliers.iter().map(|o| o.cell.as_str()).collect();
        cells.sort_unstable();
        cells.dedup();
        out.push(format!(
            "{} outlier run{} in {} cell{} (modified z beyond ±{OUTLIER_Z}), kept, not dropped: `isolab show {experiment} --outliers` or the HTML report lists them",
            q.outliers.len(),
            if q.outliers.len() == 1 { "" } else { "s" },
            cells.len(),
            if cells.len() == 1 { "" } else { "s" },
        ));
    }
    if !q.unexpected_throttling.is_empty() {
        out.push(format!(
            "throttled without a quota: {}",
            q.unexpected_throttling.join("; ")
        ));
    }
    if q.interruptions > 0 {
        out.push(format!(
            "{} interrupted attempts (not counted)",
            q.interruptions
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use isolab_stats::Direction;
    use isolab_store::{
        CellRecord, ExperimentRecord, ExperimentStatus, MetricValue, RunRecord, RunStatus,
    };
    use std::time::{Duration, SystemTime};

    #[test]
    fn flags_the_outlier_with_its_own_score() {
        let values = [100.0, 101.0, 99.0, 100.5, 99.5, 180.0];
        let runs = values
            .iter()
            .enumerate()
            .map(|(i, &v)| RunRecord {
                id: 10 + i as i64,
                cell: 1,
                repetition: i as u32 + 1,
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
                    value: v,
                }],
                telemetry: isolab_store::TelemetrySet::new(),
                notes: vec![],
            })
            .collect();
        let data = ExperimentData {
            record: ExperimentRecord {
                id: 1,
                name: "q".into(),
                spec_toml: String::new(),
                spec_path: None,
                seed: 0,
                isolab_version: "0".into(),
                created_at: SystemTime::UNIX_EPOCH,
                finished_at: None,
                status: ExperimentStatus::Complete,
            },
            cells: vec![CellRecord {
                id: 1,
                index: 0,
                key: "c".into(),
                levels: vec![],
                stop_reason: None,
            }],
            runs,
            environment: vec![],
            interruptions: vec![],
            series: vec![],
            intervals: Default::default(),
        };
        let q = quality(&data, &BTreeMap::new());
        assert_eq!(q.outliers.len(), 1, "{:?}", q.outliers);
        assert_eq!(q.outliers[0].run, 15);
        assert!(q.outliers[0].score > OUTLIER_Z, "{:?}", q.outliers[0]);
    }
}
