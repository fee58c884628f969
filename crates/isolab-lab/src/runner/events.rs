//! What the runner reports while it works ([`Event`]), for progress display and
//! `--json` event streams, and who receives it ([`Observer`]).

use isolab_store::ExperimentId;

/// Something that happened, for progress display and `--json` event streams.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The experiment (re)started.
    Started {
        /// Its id in the store.
        experiment: ExperimentId,
        /// Its name.
        name: String,
        /// Number of cells.
        cells: usize,
        /// Runs to do at least (warm-ups included), from now.
        runs_at_least: u64,
        /// Runs to do at most, from now.
        runs_at_most: u64,
        /// The shuffle seed.
        seed: u64,
        /// Runs already in the store (resume).
        runs_stored: u64,
    },
    /// A run starts.
    RunStarted {
        /// Cell key.
        cell: String,
        /// Cell index.
        index: u32,
        /// 1-based repetition (counted) or warm-up number.
        repetition: u32,
        /// Whether it is a warm-up.
        warmup: bool,
    },
    /// A run ended and was stored.
    RunFinished {
        /// Cell key.
        cell: String,
        /// Cell index.
        index: u32,
        /// 1-based repetition.
        repetition: u32,
        /// Whether it was a warm-up.
        warmup: bool,
        /// Whether it succeeded.
        ok: bool,
        /// Wall time of the measured command, seconds.
        wall_s: f64,
        /// Primary metric of this run.
        primary: Option<f64>,
        /// Counted runs of the cell so far.
        n: usize,
        /// CV of the primary metric so far.
        cv: Option<f64>,
        /// Why it failed.
        error: Option<String>,
    },
    /// A cell needs no more runs.
    CellStopped {
        /// Cell key.
        cell: String,
        /// Cell index.
        index: u32,
        /// Why.
        reason: String,
    },
}

/// Receives [`Event`]s.
pub trait Observer {
    /// Called for every event, in order.
    fn event(&mut self, event: &Event);
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct Silent;

impl Observer for Silent {
    fn event(&mut self, _: &Event) {}
}
