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
    pub fn runs_by_cell(&self) -> std::collections::HashMap<i64, Vec<&RunRecord>> {
        let mut out: std::collections::HashMap<i64, Vec<&RunRecord>> =
            std::collections::HashMap::new();
        for r in &self.runs {
            out.entry(r.cell).or_default().push(r);
        }
        out
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

/// Load intervals by run, for [`ExperimentData`].
pub type IntervalsByRun = HashMap<RunId, Vec<LoadInterval>>;
