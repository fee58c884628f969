//! The input of every report: [`ExperimentData`], everything stored about one
//! experiment (its record, cells, runs, environment, interruptions, time series and load
//! intervals), read from the store in one call ([`ExperimentData::load`]).

use std::collections::HashMap;

use isolab_store::{
    CellRecord, ExperimentId, ExperimentRecord, Interruption, LoadInterval, RunId, RunRecord, Store,
};

/// The factor that names the neighbour.
pub const NEIGHBOUR: &str = "neighbour";
/// The factor that names the reservation.
pub const RESERVATION: &str = "reservation";
/// The level of [`NEIGHBOUR`] without neighbour (and of [`RESERVATION`] without one).
pub const NONE: &str = "none";

/// Everything stored about one experiment that reports use.
#[derive(Debug, Clone)]
pub struct ExperimentData {
    /// The experiment.
    pub record: ExperimentRecord,
    /// Its cells, by index.
    pub cells: Vec<CellRecord>,
    /// All runs (warm-ups and failures included).
    pub runs: Vec<RunRecord>,
    /// Captured environment.
    pub environment: Vec<(String, String)>,
    /// Interrupted attempts.
    pub interruptions: Vec<Interruption>,
    /// Time series of one representative run per cell (the first counted one), for
    /// at most [`SERIES_CELLS`] cells: `(cell index, run id, series)`.
    pub series: Vec<(u32, i64, Vec<isolab_store::Series>)>,
    /// The load intervals of every counted run that recorded some (service workloads),
    /// by run, ordered by request then start.
    pub intervals: IntervalsByRun,
}

impl ExperimentData {
    /// Runs grouped by cell id, in stored order.
    ///
    /// Cell ids are the store's row ids, one experiment's consecutive: where they span
    /// at most four ids a run, the runs are counted and placed by their cell's offset
    /// from the lowest id, each cell's list allocated once at its size, and only the
    /// cells are hashed, not every run.
    pub fn runs_by_cell(&self) -> HashMap<i64, Vec<&RunRecord>> {
        let ids = || self.runs.iter().map(|r| r.cell);
        let (Some(low), Some(high)) = (ids().min(), ids().max()) else {
            return HashMap::new();
        };
        let span = usize::try_from(high.abs_diff(low))
            .ok()
            .and_then(|d| d.checked_add(1))
            .unwrap_or(usize::MAX);
        if span / 4 > self.runs.len() {
            let mut out: HashMap<i64, Vec<&RunRecord>> = HashMap::new();
            for r in &self.runs {
                out.entry(r.cell).or_default().push(r);
            }
            return out;
        }
        let offset = |cell: i64| (cell - low) as usize;
        let mut counts = vec![0usize; span];
        for cell in ids() {
            counts[offset(cell)] += 1;
        }
        let mut lists: Vec<Vec<&RunRecord>> =
            counts.iter().map(|&n| Vec::with_capacity(n)).collect();
        for r in &self.runs {
            lists[offset(r.cell)].push(r);
        }
        (low..=high)
            .zip(lists)
            .filter(|(_, runs)| !runs.is_empty())
            .collect()
    }

    /// The values of `metric` in the counted, successful runs of the cell keyed `key`,
    /// with the metric's unit and direction; `None` when no such run recorded it.
    pub fn counted_values(
        &self,
        key: &str,
        metric: &str,
    ) -> Option<(Vec<f64>, String, isolab_stats::Direction)> {
        let cell = self.cells.iter().find(|c| c.key == key)?;
        let mut values = Vec::new();
        let mut unit = None;
        for r in self
            .runs
            .iter()
            .filter(|r| r.cell == cell.id && r.is_counted())
        {
            if let Some(m) = r
                .metrics
                .iter()
                .find(|m| m.name == metric && m.value.is_finite())
            {
                values.push(m.value);
                unit.get_or_insert((m.unit.clone(), m.direction));
            }
        }
        let (unit, direction) = unit?;
        Some((values, unit, direction))
    }
}

/// Cells whose time series a report shows.
pub const SERIES_CELLS: usize = 12;

impl ExperimentData {
    /// Loads experiment `id`.
    pub fn load(store: &Store, id: ExperimentId) -> Result<Self, isolab_store::Error> {
        let cells = store.cells(id)?;
        let runs = store.runs(id)?;
        let mut intervals = IntervalsByRun::new();
        for row in store.interval_observations(id)? {
            intervals.entry(row.run).or_default().push(row.interval);
        }
        let mut series = Vec::new();
        for cell in cells.iter().take(SERIES_CELLS) {
            if let Some(run) = runs.iter().find(|r| r.cell == cell.id && r.is_counted()) {
                series.push((cell.index, run.id, store.series(run.id)?));
            }
        }
        Ok(ExperimentData {
            record: store.experiment(id)?,
            cells,
            runs,
            environment: store.environment(id)?,
            interruptions: store.interruptions(id)?,
            series,
            intervals,
        })
    }
}

#[cfg(test)]
impl ExperimentData {
    /// Experiment 1, `name`, complete, of `cells` and `runs` and nothing else: the
    /// input the reports' tests build.
    pub(crate) fn of(name: &str, cells: Vec<CellRecord>, runs: Vec<RunRecord>) -> ExperimentData {
        ExperimentData {
            record: ExperimentRecord {
                id: 1,
                name: name.into(),
                spec_toml: String::new(),
                spec_path: None,
                seed: 1,
                isolab_version: "0".into(),
                created_at: std::time::SystemTime::UNIX_EPOCH,
                finished_at: None,
                status: isolab_store::ExperimentStatus::Complete,
            },
            cells,
            runs,
            environment: vec![],
            interruptions: vec![],
            series: vec![],
            intervals: Default::default(),
        }
    }
}

/// Load intervals by run, for [`ExperimentData`].
pub type IntervalsByRun = HashMap<RunId, Vec<LoadInterval>>;

#[cfg(test)]
mod tests {
    use super::*;
    use isolab_store::RunRecord;
    use std::time::{Duration, SystemTime};

    fn data(cells_of_runs: &[i64]) -> ExperimentData {
        let run = |id: usize, cell: i64| RunRecord {
            id: id as i64,
            cell,
            repetition: 1,
            warmup: false,
            round: 0,
            status: isolab_store::RunStatus::Ok,
            exit_code: Some(0),
            started_at: SystemTime::UNIX_EPOCH,
            wall: Duration::from_secs(1),
            error: None,
            limits: serde_json::Value::Null.into(),
            metrics: vec![],
            telemetry: Default::default(),
            notes: vec![],
        };
        let runs = cells_of_runs
            .iter()
            .enumerate()
            .map(|(i, &cell)| run(i, cell))
            .collect();
        ExperimentData::of("x", vec![], runs)
    }

    /// Each cell's run ids, by cell.
    fn grouped(d: &ExperimentData) -> Vec<(i64, Vec<i64>)> {
        let mut out: Vec<(i64, Vec<i64>)> = d
            .runs_by_cell()
            .into_iter()
            .map(|(cell, runs)| (cell, runs.iter().map(|r| r.id).collect()))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn runs_are_grouped_by_cell_in_stored_order_whatever_the_ids_span() {
        // Consecutive ids (placed by offset), a gap, and ids far apart (hashed).
        let dense = data(&[7, 8, 9, 7, 9, 8, 11, 7]);
        assert_eq!(
            grouped(&dense),
            [
                (7, vec![0, 3, 7]),
                (8, vec![1, 5]),
                (9, vec![2, 4]),
                (11, vec![6])
            ]
        );
        let sparse = data(&[i64::MIN, 5, i64::MAX, 5, -3]);
        assert_eq!(
            grouped(&sparse),
            [
                (i64::MIN, vec![0]),
                (-3, vec![4]),
                (5, vec![1, 3]),
                (i64::MAX, vec![2])
            ]
        );
        assert!(data(&[]).runs_by_cell().is_empty());
    }
}
