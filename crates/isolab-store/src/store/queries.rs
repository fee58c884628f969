//! The queries reports are made of: the pace of past runs and the observations
//! (metric values and load intervals) of an experiment's counted runs, with their cells.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::backend::args;
use crate::encoding::sql_to_real;
use crate::error::Error;
use crate::model::{
    CellId, CellRecord, ExperimentId, IntervalObservation, Observation, Pace, RunId, RunStatus,
};

use super::experiments::{ensure_experiment, read_cells};
use super::runs::{RunInterval, INTERVAL_COLUMNS};
use super::{At, Store};

impl Store {
    /// How long runs took here before, per platform and workload (the levels of
    /// their cells): the time from each run's start to the start of the next run of
    /// the same experiment, its median over every stored experiment. A gap longer
    /// than [`Store::PACE_GAP`] beyond the run's own wall time (an interruption, a
    /// resume the next day) is left out, and so is each experiment's last run. Sorted
    /// by platform, then workload.
    pub fn run_pace(&self) -> Result<Vec<Pace>, Error> {
        // (experiment, started at in ms, wall in ns, platform, workload)
        type Started = (i64, i64, i64, Option<String>, Option<String>);
        let rows: Vec<Started> = self.db().query_rows(
            "SELECT r.experiment_id, r.started_at_ms, r.wall_ns, \
             (SELECT l.level FROM cell_levels l WHERE l.cell_id = r.cell_id AND l.factor = 'platform'), \
             (SELECT l.level FROM cell_levels l WHERE l.cell_id = r.cell_id AND l.factor = 'workload') \
             FROM runs r ORDER BY r.experiment_id, r.started_at_ms, r.id",
            &args![],
            || "reading when the stored runs started".to_owned(),
        )?;
        let mut gaps: BTreeMap<(String, String), Vec<i64>> = BTreeMap::new();
        for pair in rows.windows(2) {
            let (experiment, start, wall_ns, platform, workload) = &pair[0];
            let (next_experiment, next_start, ..) = &pair[1];
            let Some(workload) = workload else { continue };
            let gap = next_start - start;
            let limit = wall_ns / 1_000_000 + Self::PACE_GAP.as_millis() as i64;
            if next_experiment != experiment || gap < 0 || gap > limit {
                continue;
            }
            let platform = platform.clone().unwrap_or_else(|| "host".to_owned());
            gaps.entry((platform, workload.clone()))
                .or_default()
                .push(gap);
        }
        Ok(gaps
            .into_iter()
            .map(|((platform, workload), mut ms)| {
                ms.sort_unstable();
                let mid = ms.len() / 2;
                let median = if ms.len() % 2 == 1 {
                    ms[mid]
                } else {
                    (ms[mid - 1] + ms[mid]) / 2
                };
                Pace {
                    platform,
                    workload,
                    per_run: Duration::from_millis(median.max(0) as u64),
                    runs: ms.len(),
                }
            })
            .collect())
    }

    /// The longest pause between two runs that [`Store::run_pace`] counts as setup.
    pub const PACE_GAP: Duration = Duration::from_secs(300);

    /// One row per load interval of the experiment's counted runs (not warm-ups, status
    /// `ok`), with the cell's levels: what `isolab export --series` writes. Ordered by cell
    /// index, repetition, request, then start.
    pub fn interval_observations(
        &self,
        id: ExperimentId,
    ) -> Result<Vec<IntervalObservation>, Error> {
        let tx = self.read()?;
        let db = tx.db();
        ensure_experiment(db, id)?;
        // Most experiments have no load intervals: say so without reading every run.
        let any: Option<i64> = db.query_optional(
            "SELECT 1 FROM runs r JOIN load_intervals l ON l.run_id = r.id \
             WHERE r.experiment_id = ?1 LIMIT 1",
            &args![id],
            || format!("looking for load intervals of experiment {id}"),
            |r| r.get(0),
        )?;
        if any.is_none() {
            return Ok(Vec::new());
        }
        let cells: HashMap<CellId, CellRecord> =
            read_cells(db, id)?.into_iter().map(|c| (c.id, c)).collect();
        let runs: Vec<(RunId, CellId, i64)> = db.query_rows(
            "SELECT id, cell_id, repetition FROM runs \
             WHERE experiment_id = ?1 AND warmup = 0 AND status = ?2",
            &args![id, RunStatus::Ok.as_str()],
            || format!("reading the counted runs of experiment {id}"),
        )?;
        let runs: HashMap<RunId, (&CellRecord, u32)> = runs
            .into_iter()
            .filter_map(|(run, cell, repetition)| {
                let repetition = At::new("runs", format!("id {run}")).u32("repetition", repetition);
                cells.get(&cell).map(|c| repetition.map(|r| (run, (c, r))))
            })
            .collect::<Result<_, _>>()?;
        let rows = db.decode_rows(
            &format!(
                "SELECT l.run_id, {} FROM load_intervals l \
                 JOIN runs r ON r.id = l.run_id JOIN cells c ON c.id = r.cell_id \
                 WHERE r.experiment_id = ?1 AND r.warmup = 0 AND r.status = ?2 \
                 ORDER BY c.idx, r.repetition, r.id, l.request, l.start_s",
                qualified("l", INTERVAL_COLUMNS)
            ),
            &args![id, RunStatus::Ok.as_str()],
            || format!("reading the load intervals of experiment {id}"),
            |RunInterval(run, raw)| {
                let Some((cell, repetition)) = runs.get(&run) else {
                    // The join guarantees the run is a counted run of this experiment.
                    return Ok(None);
                };
                Ok(Some(IntervalObservation {
                    experiment: id,
                    run,
                    cell_index: cell.index,
                    levels: cell.levels.clone(),
                    repetition: *repetition,
                    interval: raw.decode(run)?,
                }))
            },
        )?;
        Ok(rows.into_iter().flatten().collect())
    }

    /// One row per metric value of the experiment's counted runs (not warm-ups, status
    /// `ok`), with the cell's levels: what `isolab export` writes. Ordered by cell index,
    /// repetition, then the metric's position in its run.
    pub fn observations(&self, id: ExperimentId) -> Result<Vec<Observation>, Error> {
        let tx = self.read()?;
        let db = tx.db();
        ensure_experiment(db, id)?;
        let cells: HashMap<CellId, CellRecord> =
            read_cells(db, id)?.into_iter().map(|c| (c.id, c)).collect();
        let rows = db.decode_rows(
            "SELECT r.id, r.cell_id, r.repetition, m.position, m.name, m.unit, \
             m.direction, m.value \
             FROM runs r JOIN cells c ON c.id = r.cell_id \
             JOIN metrics m ON m.run_id = r.id \
             WHERE r.experiment_id = ?1 AND r.warmup = 0 AND r.status = ?2 \
             ORDER BY c.idx, r.repetition, r.id, m.position",
            &args![id, RunStatus::Ok.as_str()],
            || format!("reading the observations of experiment {id}"),
            |row: (RunId, CellId, i64, i64, String, String, String, Option<f64>)| {
                let (run, cell, repetition, position, metric, unit, direction, value) = row;
                let Some(cell) = cells.get(&cell) else {
                    // The join guarantees the cell exists and belongs to this experiment.
                    return Ok(None);
                };
                let metric_at = At::new("metrics", format!("run_id {run}, position {position}"));
                Ok(Some(Observation {
                    experiment: id,
                    run,
                    cell_index: cell.index,
                    levels: cell.levels.clone(),
                    repetition: At::new("runs", format!("id {run}"))
                        .u32("repetition", repetition)?,
                    metric,
                    unit,
                    direction: metric_at.parse("direction", &direction)?,
                    value: sql_to_real(value),
                }))
            },
        )?;
        Ok(rows.into_iter().flatten().collect())
    }
}

/// `columns` (comma-separated) each prefixed with `table.`.
fn qualified(table: &str, columns: &str) -> String {
    columns
        .split(',')
        .map(|c| format!("{table}.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}
