//! [`RunError`]: why the runner could not go on. Below every module of the runner, which
//! all return it, and importing none of them.

use std::path::PathBuf;

use isolab_store::ExperimentId;

/// Why the runner could not go on.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The store refused a write or read.
    #[error(transparent)]
    Store(#[from] isolab_store::Error),
    /// The stored experiment does not match its spec (resume).
    #[error("experiment {experiment} cannot be resumed: {why}")]
    Mismatch {
        /// The experiment.
        experiment: ExperimentId,
        /// What differs.
        why: String,
    },
    /// A comparison cannot be continued while other cells of its experiment are
    /// unfinished.
    #[error("experiment {experiment} has cells that have not finished ({cells}): finish it first with `isolab run --resume {experiment}`, then continue the comparison until it is decided")]
    Unfinished {
        /// The experiment.
        experiment: ExperimentId,
        /// The unfinished cells' keys.
        cells: String,
    },
    /// A comparison with a cell that stopped on a failed run, or one that did not
    /// report, cannot be decided.
    #[error("cell `{cell}` of experiment {experiment} stopped because a run failed or did not report ({reason}): a comparison with it cannot be decided; `isolab show {experiment}` shows the run")]
    FailedCell {
        /// The experiment.
        experiment: ExperimentId,
        /// The cell's key.
        cell: String,
        /// Its stop reason.
        reason: String,
    },
    /// The working directory base cannot be used.
    #[error(
        "cannot use working directory {path}: {source}; pass --workdir DIR on a writable disk"
    )]
    Workdir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}
