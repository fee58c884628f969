//! The runner: executes an experiment's cells in shuffled rounds, repeats each cell
//! until its primary metric is stable, and commits every run to the store on its own.
//!
//! Promises (DESIGN.md, "Runner semantics"):
//! - rounds over all active cells, each round shuffled with a recorded seed, so that
//!   drift of the machine spreads over all cells;
//! - warm-up runs are stored but not counted; a cell compared with a baseline cell
//!   (or a baseline cell with its partners) stops once every comparison it takes part
//!   in is decided — worse or better at the Haybittle-Peto level
//!   [`isolab_stats::INTERIM_ALPHA`], or ≈ — and never before `min` nor before
//!   [`isolab_stats::MIN_PAIRS`] rounds, at which the paired test can first be
//!   significant ([`comparisons`]; `stopping` decides them); a cell without
//!   comparisons stops after `min` counted runs as soon as the CV of its primary
//!   metric is at most `target_cv`; every cell stops at `max`; the stop reason is
//!   stored;
//! - each run is committed in its own transaction; an interrupted run is recorded as
//!   an interruption, never as a run; `resume` continues where the store says the
//!   experiment stopped, so no completed run is lost or repeated;
//! - `until_decided` continues a finished experiment with two of its cells only, in
//!   further rounds, until the comparison between them is decided or they reach
//!   `max` ([`UntilDecided`]); stored runs are only added to.
//!
//! Where each concern lives: this module holds the [`Runner`], its settings and
//! errors, the rounds and resuming; `events` what it reports ([`Event`]);
//! `stopping` when a cell needs no more runs; `run` one run of a cell, from its
//! jobs to the stored run, which `finished` converts; `job` building a run's jobs
//! (limits, templates, working directory, assets, files); `neighbours` the
//! neighbours and the reservation; `instances` running and aggregating several
//! instances of the subject; `stack` service stacks and their load; `workdir` the
//! working directories, their disk and their `gc`.

mod copies;
mod error;
mod events;
mod finished;
mod instances;
mod job;
mod neighbours;
mod run;
mod stack;
mod stopping;
#[cfg(test)]
mod tests;
mod workdir;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use isolab_cgroups::IdSet;
use isolab_store::{
    CellId, ExperimentId, ExperimentStatus, Interruption, NewCell, NewExperiment, RunStatus, Store,
};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::neighbour::Calibrations;
use crate::platform::{Executor, Interrupt};
use crate::spec::{Cell, ExperimentSpec, Order};

pub use error::RunError;
pub use events::{Event, Observer, Silent};
pub use instances::{aggregate_instances, instances_overlap, measurement_window};
pub use neighbours::NEIGHBOUR_SETTLE;
pub use stack::generator_missing;
pub use stopping::{comparisons, stop_reason, Comparison, UntilDecided};
pub use workdir::{direct_io_supported, gc_workdirs};

use stopping::{compared_live, decide_round, CellState};
use workdir::prepare_base;

/// Settings of a runner that are not part of the experiment.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// Directory under which each run gets a fresh working directory (on a real disk
    /// for I/O workloads; `/var/tmp/isolab` by default).
    pub workdir_base: PathBuf,
    /// Keep the per-run working directories (for debugging a workload).
    pub keep_workdirs: bool,
    /// The cpus instances may use.
    pub cpus: IdSet,
    /// Where those cpus sit (packages, nodes, cores), for the pinned placements and
    /// the host cpu pools ([`crate::topology::Topology::read`], or
    /// [`crate::topology::Topology::flat`] where it does not matter).
    pub topology: crate::topology::Topology,
    /// The workloads' assets, built before the runs
    /// ([`crate::assets::PreparedAssets::prepare`]); each run gets them in its
    /// working directory.
    pub assets: crate::assets::PreparedAssets,
    /// What makes the `storage` factor's mounts and devices
    /// ([`crate::storage::SystemStorageHost`] on a real host).
    pub storage_host: std::sync::Arc<dyn crate::storage::StorageHost>,
}

/// How a call to the runner ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The experiment.
    pub experiment: ExperimentId,
    /// Its status now.
    pub status: ExperimentStatus,
    /// Runs executed by this call.
    pub runs: u64,
    /// Cells that stopped because a run failed.
    pub failed_cells: usize,
}

/// Runs experiments on one platform into one store.
pub struct Runner<'a> {
    platform: &'a dyn Executor,
    store: &'a mut Store,
    observer: &'a mut dyn Observer,
    interrupt: &'a Interrupt,
    config: RunnerConfig,
    /// What neighbours are sized against, measured once per process.
    calibrations: Calibrations,
}

impl<'a> Runner<'a> {
    /// A runner.
    pub fn new(
        platform: &'a dyn Executor,
        store: &'a mut Store,
        observer: &'a mut dyn Observer,
        interrupt: &'a Interrupt,
        config: RunnerConfig,
    ) -> Self {
        Runner {
            platform,
            store,
            observer,
            interrupt,
            config,
            calibrations: Calibrations::new(PathBuf::from("/proc")),
        }
    }

    /// Stores a new experiment for `spec` with its environment and runs it.
    pub fn start(
        &mut self,
        spec: &ExperimentSpec,
        environment: Vec<(String, String)>,
    ) -> Result<Outcome, RunError> {
        let seed = spec.seed.unwrap_or_else(rand::random);
        let id = self
            .store
            .create_experiment(&new_experiment(spec, seed, environment))?;
        self.run(id, spec, seed)
    }

    /// Stores `host`'s experiment of `fleet` (shuffled with `seed`) and runs it: what
    /// each host of a fleet does. A host that already has one is refused by the store
    /// ([`isolab_store::Error::FleetHostTaken`]): resume that one instead.
    pub fn start_in_fleet(
        &mut self,
        spec: &ExperimentSpec,
        environment: Vec<(String, String)>,
        fleet: isolab_store::FleetId,
        host: &str,
        seed: u64,
    ) -> Result<Outcome, RunError> {
        let id = self.store.create_fleet_experiment(
            &new_experiment(spec, seed, environment),
            fleet,
            host,
        )?;
        self.run(id, spec, seed)
    }

    /// Continues experiment `id`, whose stored spec was parsed into `spec`.
    pub fn resume(&mut self, id: ExperimentId, spec: &ExperimentSpec) -> Result<Outcome, RunError> {
        let record = self.store.experiment(id)?;
        self.store
            .set_status(id, ExperimentStatus::Running, SystemTime::now())?;
        self.run(id, spec, record.seed)
    }

    /// Continues finished experiment `id` (whose stored spec was parsed into `spec`)
    /// with cells `until.a` and `until.b` only, until the comparison between them is
    /// decided or they reach `max` ([`UntilDecided`]). Stored runs that decide it
    /// already stop the cells before any run.
    pub fn until_decided(
        &mut self,
        id: ExperimentId,
        spec: &ExperimentSpec,
        until: UntilDecided,
    ) -> Result<Outcome, RunError> {
        let record = self.store.experiment(id)?;
        let (mut states, round) = self.load_states(id, spec)?;
        let mut comparisons = until.focus(id, spec, &mut states)?;
        for (i, reason) in decide_round(
            spec.repetitions.min,
            &spec.verdict_rule(),
            &mut comparisons,
            &states,
        ) {
            self.stop_cell(&spec.cells[i], &mut states[i], reason)?;
        }
        self.store
            .set_status(id, ExperimentStatus::Running, SystemTime::now())?;
        self.rounds(id, spec, record.seed, (states, round), comparisons)
    }

    fn run(
        &mut self,
        id: ExperimentId,
        spec: &ExperimentSpec,
        seed: u64,
    ) -> Result<Outcome, RunError> {
        let loaded = self.load_states(id, spec)?;
        self.rounds(id, spec, seed, loaded, comparisons(spec))
    }

    /// Runs rounds of the cells not stopped in `states` from round `round`, deciding
    /// `comparisons` after each, until every cell stopped.
    fn rounds(
        &mut self,
        id: ExperimentId,
        spec: &ExperimentSpec,
        seed: u64,
        (mut states, mut round): (Vec<CellState>, u32),
        mut comparisons: Vec<Comparison>,
    ) -> Result<Outcome, RunError> {
        self.observer.event(&started(id, spec, seed, &states));
        // Absolute: a command runs in its working directory and may name it (`{workdir}`,
        // e.g. `mpirun --wdir {workdir}`), which a relative base would name twice.
        self.config.workdir_base =
            std::path::absolute(&self.config.workdir_base).map_err(|source| RunError::Workdir {
                path: self.config.workdir_base.clone(),
                source,
            })?;
        let (_made, disk) = prepare_base(&self.config.workdir_base)?;
        // Dropped before `_made`, which removes the base when it is left empty.
        let _kept = stack::KeptDataGuard {
            base: self.config.workdir_base.clone(),
            id,
        };
        let mut runs = 0;
        let mut synced = std::time::Instant::now();
        loop {
            let batch = round_order(spec, &states, seed, round);
            if batch.is_empty() {
                break;
            }
            // Committed runs survive the process's death at once; a power cut loses at
            // most about a second of them (and `--resume` runs them again).
            if synced.elapsed() >= SYNC_EVERY {
                self.store.sync()?;
                synced = std::time::Instant::now();
            }
            for i in batch {
                let cell = &spec.cells[i];
                if self.interrupt.is_triggered() {
                    return self.interrupted(id, spec, cell, &states[i], runs);
                }
                let compared = compared_live(&comparisons, &states, i);
                match self.one_run(id, spec, cell, &mut states[i], round, &disk, compared)? {
                    Some(()) => runs += 1,
                    None => return self.interrupted(id, spec, cell, &states[i], runs),
                }
            }
            for (i, reason) in decide_round(
                spec.repetitions.min,
                &spec.verdict_rule(),
                &mut comparisons,
                &states,
            ) {
                self.stop_cell(&spec.cells[i], &mut states[i], reason)?;
            }
            round += 1;
        }
        let failed_cells = states.iter().filter(|s| s.failed()).count();
        let status = ExperimentStatus::Complete;
        self.store.set_status(id, status, SystemTime::now())?;
        self.store.sync()?;
        Ok(Outcome {
            experiment: id,
            status,
            runs,
            failed_cells,
        })
    }

    /// Stops `cell` for `reason`: stored, reported and kept in its `state`.
    fn stop_cell(
        &mut self,
        cell: &Cell,
        state: &mut CellState,
        reason: String,
    ) -> Result<(), RunError> {
        self.store.set_stop_reason(state.id, &reason)?;
        self.observer.event(&Event::CellStopped {
            cell: cell.key(),
            index: cell.index,
            reason: reason.clone(),
        });
        state.stopped = Some(reason);
        Ok(())
    }

    /// Records that a signal interrupted the experiment before the next run of
    /// `cell`, after `runs` runs in this call.
    fn interrupted(
        &mut self,
        id: ExperimentId,
        spec: &ExperimentSpec,
        cell: &Cell,
        state: &CellState,
        runs: u64,
    ) -> Result<Outcome, RunError> {
        let (repetition, warmup) = state.next_run(spec.repetitions.warmup);
        self.store.record_interruption(&Interruption {
            experiment: id,
            cell: state.id,
            repetition,
            warmup,
            at: SystemTime::now(),
            reason: format!("interrupted by a signal during cell {}", cell.key()),
        })?;
        self.store
            .set_status(id, ExperimentStatus::Interrupted, SystemTime::now())?;
        Ok(Outcome {
            experiment: id,
            status: ExperimentStatus::Interrupted,
            runs,
            failed_cells: 0,
        })
    }

    /// The state of every cell from the store, and the round to continue with.
    fn load_states(
        &self,
        id: ExperimentId,
        spec: &ExperimentSpec,
    ) -> Result<(Vec<CellState>, u32), RunError> {
        let cells = self.store.cells(id)?;
        if cells.len() != spec.cells.len() {
            return Err(RunError::Mismatch {
                experiment: id,
                why: format!(
                    "the store holds {} cells but the spec expands to {}",
                    cells.len(),
                    spec.cells.len()
                ),
            });
        }
        let mut states: Vec<CellState> = Vec::new();
        for (stored, cell) in cells.iter().zip(&spec.cells) {
            if stored.key != cell.key() || stored.index != cell.index {
                return Err(RunError::Mismatch {
                    experiment: id,
                    why: format!(
                        "cell {} is `{}` in the store but `{}` in the spec",
                        stored.index,
                        stored.key,
                        cell.key()
                    ),
                });
            }
            states.push(CellState {
                id: stored.id,
                stopped: stored.stop_reason.clone(),
                ..CellState::default()
            });
        }
        let by_id: BTreeMap<CellId, usize> =
            states.iter().enumerate().map(|(i, s)| (s.id, i)).collect();
        let mut next_round = 0;
        for run in self.store.runs(id)? {
            next_round = next_round.max(run.round + 1);
            let Some(&i) = by_id.get(&run.cell) else {
                continue;
            };
            let primary = &spec.cells[i].workload.primary;
            let primary = run
                .metrics
                .iter()
                .find(|m| &m.name == primary)
                .filter(|_| run.status == RunStatus::Ok);
            states[i].record(run.warmup, run.repetition, primary.map(|m| (run.round, m)));
        }
        Ok((states, next_round))
    }
}

/// The event of experiment `id` (re)starting with its cells in `states`: how many
/// runs are left at least and at most.
fn started(id: ExperimentId, spec: &ExperimentSpec, seed: u64, states: &[CellState]) -> Event {
    let reps = spec.repetitions;
    let remaining = |s: &CellState, upto: u32| -> u64 {
        if s.stopped.is_some() {
            0
        } else {
            u64::from(reps.warmup.saturating_sub(s.warmups) + upto.saturating_sub(s.counted))
        }
    };
    Event::Started {
        experiment: id,
        name: spec.name.clone(),
        cells: spec.cells.len(),
        runs_at_least: states.iter().map(|s| remaining(s, reps.min)).sum(),
        runs_at_most: states.iter().map(|s| remaining(s, reps.max)).sum(),
        seed,
        runs_stored: states
            .iter()
            .map(|s| u64::from(s.warmups + s.counted))
            .sum(),
    }
}

/// How often the runner makes the stored runs durable against a power cut
/// ([`isolab_store::Store::sync`]), at the start of a round.
const SYNC_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The cells that run in round `round`, in order: every cell not stopped, shuffled
/// with `seed` and the round when runs are interleaved, the first only when the
/// cells run one after the other; empty when every cell stopped.
fn round_order(spec: &ExperimentSpec, states: &[CellState], seed: u64, round: u32) -> Vec<usize> {
    let mut batch: Vec<usize> = (0..states.len())
        .filter(|&i| states[i].stopped.is_none())
        .collect();
    match spec.order {
        Order::Interleaved => {
            let mut rng = ChaCha8Rng::seed_from_u64(
                seed ^ u64::from(round).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            );
            batch.shuffle(&mut rng);
        }
        Order::Sequential => batch.truncate(1),
    }
    batch
}

/// The experiment record of a new run of `spec`.
fn new_experiment(
    spec: &ExperimentSpec,
    seed: u64,
    environment: Vec<(String, String)>,
) -> NewExperiment {
    NewExperiment {
        name: spec.name.clone(),
        spec_toml: spec.source.text.clone(),
        spec_path: Some(spec.source.name.clone()),
        seed,
        isolab_version: env!("CARGO_PKG_VERSION").to_owned(),
        created_at: SystemTime::now(),
        cells: spec
            .cells
            .iter()
            .map(|c| NewCell {
                index: c.index,
                key: c.key(),
                levels: c.levels.clone(),
            })
            .collect(),
        environment,
    }
}

/// How long a measured run waits for a lost connection to a PostgreSQL store to come
/// back before the experiment stops (it can then be resumed with `--resume`).
pub const STORE_PATIENCE: Duration = Duration::from_secs(300);

/// The last `n` characters of `s`.
fn tail_chars(s: &str, n: usize) -> &str {
    let start = s
        .char_indices()
        .rev()
        .nth(n.saturating_sub(1))
        .map_or(0, |(i, _)| i);
    &s[start..]
}

/// The host's memory (`MemTotal`), or 1 GiB when /proc/meminfo cannot be read; read
/// once per process (every run asked for it before, 20 µs of each).
pub(crate) fn host_memory() -> isolab_cgroups::Bytes {
    static TOTAL: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    TOTAL
        .get_or_init(|| crate::environment::memory_total(Path::new("/proc")))
        .map_or(isolab_cgroups::Bytes::gib(1), isolab_cgroups::Bytes)
}
