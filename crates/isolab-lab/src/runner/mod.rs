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
//!   significant ([`comparisons`], [`decide_comparisons`]); a cell without
//!   comparisons stops after `min` counted runs as soon as the CV of its primary
//!   metric is at most `target_cv`; every cell stops at `max`; the stop reason is
//!   stored;
//! - each run is committed in its own transaction; an interrupted run is recorded as
//!   an interruption, never as a run; `resume` continues where the store says the
//!   experiment stopped, so no completed run is lost or repeated.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use isolab_cgroups::{DeviceNumber, IdSet};
use isolab_stats::Sample;
use isolab_store::{
    CellId, ExperimentId, ExperimentStatus, Interruption, MetricValue, NewCell, NewExperiment,
    NewRun, RunStatus, Store, Telemetry,
};
use isolab_workloads::{Params, RunOutput};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::neighbour::{
    self, Calibrations, Capacity, CommandContext, Intensity, NeighbourKind, NeighbourLevel,
    SoloProfile,
};
use crate::platform::{Execution, Interrupt, Job, NeighbourJobs, Platform, PlatformError};
use crate::reservation::{reserve, DiskShare, NetShare, ReserveRequest};
use crate::shape::limits_for;
use crate::spec::{Cell, ExperimentSpec, Order};

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
    /// The workloads' assets, built before the runs
    /// ([`crate::assets::PreparedAssets::prepare`]); each run gets them in its
    /// working directory.
    pub assets: crate::assets::PreparedAssets,
}

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

#[derive(Debug, Default)]
struct CellState {
    id: CellId,
    warmups: u32,
    counted: u32,
    /// The primary metric of each successful counted run, with its round.
    values: Vec<(u32, f64)>,
    /// The primary metric's direction, once a run reported it.
    direction: Option<isolab_stats::Direction>,
    stopped: Option<String>,
}

impl CellState {
    fn primary_values(&self) -> Vec<f64> {
        self.values.iter().map(|(_, v)| *v).collect()
    }
}

/// One comparison the runner decides: cell `other` against baseline cell `base`, as
/// the report compares them.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Index of the baseline cell.
    pub base: usize,
    /// Index of the compared cell.
    pub other: usize,
    /// Points in its comparison (cells of the same baseline-factor levels), for the
    /// multiplicity of the interim test.
    pub points: usize,
    /// Its verdict once decided (decisions are kept).
    pub decided: Option<isolab_stats::Verdict>,
}

/// The comparisons of an experiment: every cell whose baseline-factor levels differ
/// from the baseline against the baseline cell with the same other levels.
pub fn comparisons(spec: &ExperimentSpec) -> Vec<Comparison> {
    if spec.baseline.is_empty() {
        return Vec::new();
    }
    let factors: Vec<&String> = spec.baseline.iter().map(|(f, _)| f).collect();
    let split = |cell: &Cell| {
        let (mut own, mut rest): (Vec<_>, Vec<_>) = cell
            .levels
            .iter()
            .cloned()
            .partition(|(f, _)| factors.contains(&f));
        own.sort();
        rest.sort();
        (own, rest)
    };
    let mut baseline = spec.baseline.clone();
    baseline.sort();
    let mut out = Vec::new();
    for (i, cell) in spec.cells.iter().enumerate() {
        let (own, rest) = split(cell);
        if own == baseline || own.len() != baseline.len() {
            continue;
        }
        let base = spec.cells.iter().position(|c| {
            let (o, r) = split(c);
            o == baseline && r == rest
        });
        if let Some(base) = base {
            out.push(Comparison {
                base,
                other: i,
                points: 0,
                decided: None,
            });
        }
    }
    let own_of = |i: usize| split(&spec.cells[i]).0;
    let combos: Vec<_> = out.iter().map(|c| own_of(c.other)).collect();
    for (k, c) in out.iter_mut().enumerate() {
        c.points = combos.iter().filter(|o| **o == combos[k]).count();
    }
    out
}

/// Runs experiments on one platform into one store.
pub struct Runner<'a> {
    platform: &'a dyn Platform,
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
        platform: &'a dyn Platform,
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

    fn run(
        &mut self,
        id: ExperimentId,
        spec: &ExperimentSpec,
        seed: u64,
    ) -> Result<Outcome, RunError> {
        let (mut states, mut round) = self.load_states(id, spec)?;
        let reps = spec.repetitions;
        let mut comparisons = comparisons(spec);
        let stored: u64 = states
            .iter()
            .map(|s| u64::from(s.warmups + s.counted))
            .sum();
        let remaining = |s: &CellState, upto: u32| -> u64 {
            if s.stopped.is_some() {
                0
            } else {
                u64::from(reps.warmup.saturating_sub(s.warmups) + upto.saturating_sub(s.counted))
            }
        };
        self.observer.event(&Event::Started {
            experiment: id,
            name: spec.name.clone(),
            cells: spec.cells.len(),
            runs_at_least: states.iter().map(|s| remaining(s, reps.min)).sum(),
            runs_at_most: states.iter().map(|s| remaining(s, reps.max)).sum(),
            seed,
            runs_stored: stored,
        });

        let base = &self.config.workdir_base;
        // A base this run makes goes again with the run if it is left empty (every
        // run removes its own directory unless asked to keep it).
        let _made = (!base.exists()).then(|| EmptyDirGuard(base.clone()));
        std::fs::create_dir_all(base).map_err(|source| RunError::Workdir {
            path: base.clone(),
            source,
        })?;
        let disk = DiskFacts::probe(base);

        let mut runs = 0;
        loop {
            let mut batch: Vec<usize> = (0..states.len())
                .filter(|&i| states[i].stopped.is_none())
                .collect();
            if batch.is_empty() {
                break;
            }
            match spec.order {
                Order::Interleaved => {
                    let mut rng = ChaCha8Rng::seed_from_u64(
                        seed ^ u64::from(round).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    );
                    batch.shuffle(&mut rng);
                }
                Order::Sequential => batch.truncate(1),
            }
            for i in batch {
                if self.interrupt.is_triggered() {
                    return self.interrupted(id, &spec.cells[i], &states[i], reps.warmup, runs);
                }
                let compared = compared_live(&comparisons, &states, i);
                match self.one_run(
                    id,
                    spec,
                    &spec.cells[i],
                    &mut states[i],
                    round,
                    &disk,
                    compared,
                )? {
                    Some(()) => runs += 1,
                    None => {
                        return self.interrupted(id, &spec.cells[i], &states[i], reps.warmup, runs)
                    }
                }
            }
            self.decide_round(spec, &mut comparisons, &mut states)?;
            round += 1;
        }
        let failed_cells = states
            .iter()
            .filter(|s| {
                s.stopped
                    .as_deref()
                    .is_some_and(|r| r.starts_with("failed"))
            })
            .count();
        let status = ExperimentStatus::Complete;
        self.store.set_status(id, status, SystemTime::now())?;
        Ok(Outcome {
            experiment: id,
            status,
            runs,
            failed_cells,
        })
    }

    fn interrupted(
        &mut self,
        id: ExperimentId,
        cell: &Cell,
        state: &CellState,
        warmup_total: u32,
        runs: u64,
    ) -> Result<Outcome, RunError> {
        let warmup = state.warmups < warmup_total;
        self.store.record_interruption(&Interruption {
            experiment: id,
            cell: state.id,
            repetition: if warmup {
                state.warmups + 1
            } else {
                state.counted + 1
            },
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
            let state = &mut states[i];
            if run.warmup {
                state.warmups = state.warmups.max(run.repetition);
                continue;
            }
            state.counted = state.counted.max(run.repetition);
            if run.status == RunStatus::Ok {
                let primary = &spec.cells[i].workload.primary;
                if let Some(m) = run.metrics.iter().find(|m| &m.name == primary) {
                    state.values.push((run.round, m.value));
                    state.direction = Some(m.direction);
                }
            }
        }
        Ok((states, next_round))
    }

    /// Executes and stores one run; `None` when it was interrupted. A `compared` cell
    /// is not stopped for a low CV: its comparisons decide (see [`Self::decide_round`]).
    #[allow(clippy::too_many_arguments)]
    fn one_run(
        &mut self,
        id: ExperimentId,
        spec: &ExperimentSpec,
        cell: &Cell,
        state: &mut CellState,
        round: u32,
        disk: &DiskFacts,
        compared: bool,
    ) -> Result<Option<()>, RunError> {
        let reps = spec.repetitions;
        let warmup = state.warmups < reps.warmup;
        let repetition = if warmup {
            state.warmups + 1
        } else {
            state.counted + 1
        };
        let tag = format!(
            "c{}-{}{}",
            cell.index,
            if warmup { "w" } else { "r" },
            repetition
        );
        self.observer.event(&Event::RunStarted {
            cell: cell.key(),
            index: cell.index,
            repetition,
            warmup,
        });

        let workdir = self
            .config
            .workdir_base
            .join(format!("exp{id}-pid{}-{tag}", std::process::id()));
        let started_at = SystemTime::now();
        let result = self.execute(id, spec, cell, &tag, &workdir, disk);
        if !self.config.keep_workdirs {
            let _ = std::fs::remove_dir_all(&workdir);
        }
        let (
            status,
            exit_code,
            wall,
            stdout,
            stderr,
            error,
            limits,
            metrics,
            telemetry,
            series,
            intervals,
            notes,
        ) = match result {
            Err(PlatformError::Interrupted) => return Ok(None),
            Err(e) => (
                RunStatus::Failed,
                None,
                Duration::ZERO,
                String::new(),
                String::new(),
                Some(e.to_string()),
                serde_json::Value::Null,
                Vec::new(),
                isolab_store::TelemetrySet::new(),
                Vec::new(),
                Vec::new(),
                disk.notes.clone(),
            ),
            Ok(done) => {
                let mut notes = disk.notes.clone();
                notes.extend(done.execution.notes);
                let (status, error) = match (&done.metrics, done.execution.exit.success()) {
                    (_, false) => (
                        RunStatus::Failed,
                        Some(format!(
                            "the command ended with {}; see the run's stderr",
                            done.execution.exit
                        )),
                    ),
                    (Err(e), true) => (RunStatus::Failed, Some(e.clone())),
                    (Ok(_), true) => (RunStatus::Ok, None),
                };
                (
                    status,
                    Some(done.execution.exit.status()),
                    done.execution.wall,
                    done.execution.stdout,
                    done.execution.stderr,
                    error,
                    done.limits,
                    done.metrics.unwrap_or_default(),
                    done.execution.telemetry,
                    done.execution.series,
                    done.load
                        .as_ref()
                        .map(|r| stack::intervals(r, cell))
                        .unwrap_or_default(),
                    notes,
                )
            }
        };
        let primary_metric = metrics.iter().find(|m| m.name == cell.workload.primary);
        let primary = primary_metric.map(|m| m.value);
        let primary_direction = primary_metric.map(|m| m.direction);
        let (status, error) = match (status, primary, error) {
            (RunStatus::Ok, None, _) => (
                RunStatus::Failed,
                Some(format!(
                    "the output has no primary metric `{}` (it has: {})",
                    cell.workload.primary,
                    metrics
                        .iter()
                        .map(|m| m.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            ),
            other => (other.0, other.2),
        };
        self.store.insert_run_patiently(
            &NewRun {
                cell: state.id,
                repetition,
                warmup,
                round,
                status,
                exit_code,
                started_at,
                wall,
                stdout,
                stderr,
                error: error.clone(),
                limits,
                metrics,
                telemetry,
                series,
                intervals,
                notes,
            },
            STORE_PATIENCE,
        )?;

        if warmup {
            state.warmups = repetition;
        } else {
            state.counted = repetition;
            if let (RunStatus::Ok, Some(v)) = (status, primary) {
                state.values.push((round, v));
                state.direction = primary_direction;
            }
        }
        let cv = Sample::new(state.primary_values()).ok().map(|s| s.cv());
        self.observer.event(&Event::RunFinished {
            cell: cell.key(),
            index: cell.index,
            repetition,
            warmup,
            ok: status == RunStatus::Ok,
            wall_s: wall.as_secs_f64(),
            primary,
            n: state.values.len(),
            cv,
            error: error.clone(),
        });

        let reason = if status == RunStatus::Failed {
            Some(format!(
                "failed: {} run {repetition}: {}",
                if warmup { "warm-up" } else { "counted" },
                error.unwrap_or_default()
            ))
        } else if warmup {
            None
        } else {
            stop_reason(
                state.counted,
                cv,
                reps.min,
                reps.max,
                (!compared).then_some(reps.target_cv),
                &cell.workload.primary,
            )
        };
        if let Some(reason) = reason {
            self.store.set_stop_reason(state.id, &reason)?;
            self.observer.event(&Event::CellStopped {
                cell: cell.key(),
                index: cell.index,
                reason: reason.clone(),
            });
            state.stopped = Some(reason);
        }
        Ok(Some(()))
    }

    /// After a round: decides the comparisons that the data now decide (worse or
    /// better only at [`isolab_stats::INTERIM_ALPHA`]), and stops every compared cell
    /// whose live comparisons are all decided, once it has at least `min` and
    /// [`isolab_stats::MIN_PAIRS`] counted runs.
    fn decide_round(
        &mut self,
        spec: &ExperimentSpec,
        comparisons: &mut [Comparison],
        states: &mut [CellState],
    ) -> Result<(), RunError> {
        decide_comparisons(comparisons, states);
        let floor = spec.repetitions.min.max(isolab_stats::MIN_PAIRS as u32);
        for i in 0..states.len() {
            if states[i].stopped.is_some()
                || states[i].counted < floor
                || !compared_live(comparisons, states, i)
            {
                continue;
            }
            let mine: Vec<&Comparison> = comparisons
                .iter()
                .filter(|c| (c.base == i || c.other == i) && !partner_failed(c, states, i))
                .collect();
            if mine.iter().any(|c| c.decided.is_none()) {
                continue;
            }
            let count =
                |v: isolab_stats::Verdict| mine.iter().filter(|c| c.decided == Some(v)).count();
            let reason = if mine.len() == 1 && mine[0].other == i {
                format!(
                    "decided: {} against the baseline after {} runs",
                    mine[0].decided.map_or("?", |v| v.as_str()),
                    states[i].counted
                )
            } else {
                format!(
                    "decided: all {} comparisons ({} worse, {} better, {} ≈) after {} runs",
                    mine.len(),
                    count(isolab_stats::Verdict::Worse),
                    count(isolab_stats::Verdict::Better),
                    count(isolab_stats::Verdict::Equivalent),
                    states[i].counted
                )
            };
            self.store.set_stop_reason(states[i].id, &reason)?;
            self.observer.event(&Event::CellStopped {
                cell: spec.cells[i].key(),
                index: spec.cells[i].index,
                reason: reason.clone(),
            });
            states[i].stopped = Some(reason);
        }
        Ok(())
    }

    fn execute(
        &self,
        id: ExperimentId,
        spec: &ExperimentSpec,
        cell: &Cell,
        tag: &str,
        workdir: &Path,
        disk: &DiskFacts,
    ) -> Result<Done, PlatformError> {
        let w = &cell.workload;
        let limits = limits_for(&cell.shape, cell.placement, &self.config.cpus, disk.device)
            .ok_or_else(|| PlatformError::LimitMismatch {
                cgroup: tag.to_owned(),
                detail: format!(
                    "shape `{}` needs {} cpus but only {} are available",
                    cell.shape.name, cell.shape.cpus, self.config.cpus
                ),
            })?;
        let name = format!("exp{id}-pid{}/{tag}", std::process::id());
        if cell.workload.stack.is_some() {
            if cell.neighbour.is_some()
                || cell.instances > 1
                || cell.reservation != crate::reservation::Reservation::None
            {
                return Err(PlatformError::NoServices {
                    platform: cell.platform.name.clone(),
                    why: "a service stack runs one instance, without neighbours or reservations, in this version".into(),
                });
            }
            return self.execute_stack(spec, cell, &name, workdir, &limits, disk.direct);
        }
        // One job per instance of the subject: instance k works in `<workdir>/i<k>`
        // (a single instance in the working directory itself).
        let mut jobs = Vec::new();
        for k in 0..cell.instances {
            let (name, workdir) = if cell.instances == 1 {
                (name.clone(), workdir.to_path_buf())
            } else {
                (format!("{name}-i{k}"), workdir.join(format!("i{k}")))
            };
            jobs.push(self.job(spec, cell, name, &workdir, disk, limits.clone())?);
        }
        let mut calibration_note = None;
        if let Some(level) = &cell.neighbour {
            let (neighbours, subject, note) = self.neighbours(cell, level, &jobs[0], disk)?;
            for job in &mut jobs {
                job.limits = subject.clone();
            }
            jobs[0].neighbours = Some(neighbours);
            calibration_note = note;
        } else if cell.reservation != crate::reservation::Reservation::None {
            // The same configuration without neighbour: the subject is bound (or
            // limited) exactly as it is when they are there. Only cpuset changes the
            // subject's side, so no capacity is measured here.
            let subject = reserve(&ReserveRequest {
                reservation: cell.reservation,
                subject: &limits,
                subject_cpus: cell.shape.cpus,
                host_cpus: &self.config.cpus,
                host_memory: host_memory(),
                neighbours: 0,
                kind: None,
                disk: disk.device.map(|device| DiskShare {
                    device,
                    capacity_iops: 1.0,
                    solo_iops: 0.0,
                }),
                net: Some(NetShare {
                    capacity_mbps: 1.0,
                    solo_mbps: 0.0,
                }),
            })
            .map_err(|source| PlatformError::Reservation {
                job: name.clone(),
                source,
            })?
            .subject;
            for job in &mut jobs {
                job.limits = subject.clone();
            }
        }
        let mut executions = if jobs.len() == 1 {
            vec![self.platform.execute(&jobs[0], self.interrupt)]
        } else {
            self.platform.execute_all(&jobs, self.interrupt)
        };
        if let Some(i) = executions
            .iter()
            .position(|e| matches!(e, Err(PlatformError::Interrupted)))
        {
            return Err(executions
                .swap_remove(i)
                .err()
                .unwrap_or(PlatformError::Interrupted));
        }
        let executions: Vec<Execution> = executions.into_iter().collect::<Result<_, _>>()?;
        let parse = |e: &Execution, job: &Job| parse_metrics(w, e, job);
        // Each instance's measurement window: the span its tool measured its rates
        // over, which ends when the instance exits (its start-up, seconds for a
        // container among 128 starting at once, is not part of it). A single
        // instance's metrics are taken as they are, so its output is parsed once.
        let windows: Vec<(std::time::Instant, Duration)> = if executions.len() > 1 {
            executions
                .iter()
                .zip(&jobs)
                .map(|(e, job)| {
                    let measured = isolab_workloads::measured_time(w.parser, &output(e, job));
                    measurement_window(e.started, e.wall, measured)
                })
                .collect()
        } else {
            Vec::new()
        };
        let metrics = executions
            .iter()
            .zip(&jobs)
            .map(|(e, j)| parse(e, j))
            .collect::<Result<Vec<Vec<MetricValue>>, String>>()
            .map(|per_instance| aggregate_instances(&per_instance, &windows));
        let mut executions = executions.into_iter();
        let mut execution = executions.next().ok_or(PlatformError::Interrupted)?;
        let rest: Vec<Execution> = executions.collect();
        if !rest.is_empty() {
            // The first instance's logs and telemetry stand for the run, with the
            // instance count, the longest wall time and every failure.
            let n = rest.len() + 1;
            execution.telemetry.push(Telemetry::Instances, n as f64);
            let overlap = instances_overlap(&windows);
            execution
                .telemetry
                .push(Telemetry::InstancesOverlap, 100.0 * overlap);
            if overlap < 0.9 {
                execution.notes.push(format!(
                    "the {n} instances' measurements overlapped {:.0}% (their starts were staggered): throughputs are the work done over the span from the first measurement's start to the last one's end, not the sum of the instances' rates",
                    100.0 * overlap
                ));
            }
            let slowest = rest.iter().map(|e| e.wall).max().unwrap_or_default();
            execution.wall = execution.wall.max(slowest);
            if let Some(bad) = rest.iter().find(|e| !e.exit.success()) {
                if execution.exit.success() {
                    execution.exit = bad.exit;
                    execution.notes.push(format!(
                        "another instance ended with {}: {}",
                        bad.exit,
                        tail_chars(&bad.stderr, 500)
                    ));
                }
            }
            for e in rest {
                execution.notes.extend(e.notes);
            }
        }
        execution.notes.extend(calibration_note);
        let limits = serde_json::json!({
            "requested": jobs[0].limits,
            "applied": execution.limits_applied,
            "summary": crate::shape::describe_limits(&execution.limits_applied),
        });
        Ok(Done {
            execution,
            metrics,
            limits,
            load: None,
        })
    }

    /// The job of one instance of `cell`'s subject, its templates rendered for
    /// `workdir` (created here) and a free port of its own.
    fn job(
        &self,
        spec: &ExperimentSpec,
        cell: &Cell,
        name: String,
        workdir: &Path,
        disk: &DiskFacts,
        limits: isolab_cgroups::Limits,
    ) -> Result<Job, PlatformError> {
        create_dir(workdir)?;
        let w = &cell.workload;
        let port = if w.server.is_some() { free_port()? } else { 0 };
        let params = Params {
            cpus: cell.shape.cpus,
            threads: cell.thread_count(),
            duration: spec.duration,
            workdir: workdir.to_path_buf(),
            port,
            server: self.platform.server_address(&cell.platform),
            direct: disk.direct,
            memory: limits.memory_max.unwrap_or_else(host_memory).0,
            work: w.work.as_ref().map_or(0, |w| w.amount),
            components: Vec::new(),
        };
        for a in &w.assets {
            let built = self
                .config
                .assets
                .get(&a.name, params.work)
                .ok_or_else(|| PlatformError::AssetMissing {
                    path: workdir.join(&a.name),
                    asset: a.name.clone(),
                    workload: w.name.clone(),
                })?;
            crate::assets::place(built, workdir).map_err(|source| PlatformError::Asset {
                path: workdir.join(&a.name),
                source,
            })?;
        }
        for f in &w.files {
            let text = isolab_workloads::render_text(&f.contents, &params).map_err(|source| {
                PlatformError::Template {
                    action: "cannot render the file",
                    path: workdir.join(&f.path),
                    source,
                }
            })?;
            write_file(workdir, f, &text)?;
        }
        let render = |t: &str| render(t, &params);
        Ok(Job {
            platform: cell.platform.clone(),
            image: cell.platform.kind.needs_image().then(|| spec.image.clone()),
            name,
            argv: render(&w.command)?,
            prepare: w.prepare.as_deref().map(render).transpose()?,
            cleanup: w.cleanup.as_deref().map(render).transpose()?,
            server: w
                .server
                .as_deref()
                .map(render)
                .transpose()?
                .map(|argv| crate::platform::Server { argv, port }),
            workdir: workdir.to_path_buf(),
            limits,
            timeout: spec.timeout,
            neighbours: None,
            uses_disk: w.uses_disk,
        })
    }
}

/// Removes its directory when dropped, if the directory is empty by then.
struct EmptyDirGuard(PathBuf);

impl Drop for EmptyDirGuard {
    fn drop(&mut self) {
        // Fails, harmlessly, when something is left in it (kept workdirs).
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Creates a run's working directory.
fn create_dir(dir: &Path) -> Result<(), PlatformError> {
    std::fs::create_dir_all(dir).map_err(|source| PlatformError::Io {
        action: "cannot create working directory",
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes `text`, file `f` of a workload or component rendered, into `workdir`.
fn write_file(
    workdir: &Path,
    f: &isolab_workloads::FileTemplate,
    text: &str,
) -> Result<(), PlatformError> {
    let path = workdir.join(&f.path);
    if let Some(dir) = path.parent() {
        create_dir(dir)?;
    }
    std::fs::write(&path, text).map_err(|source| PlatformError::Io {
        action: "cannot write the file",
        path,
        source,
    })
}

/// A free TCP port on loopback for a job's server or a stack's component.
fn free_port() -> Result<u16, PlatformError> {
    crate::platform::free_port().map_err(|source| PlatformError::Io {
        action: "cannot find a free port on",
        path: "127.0.0.1".into(),
        source,
    })
}

/// Template `t` rendered into an argv with `params`.
fn render(t: &str, params: &Params) -> Result<Vec<String>, PlatformError> {
    isolab_workloads::render(t, params).map_err(|source| PlatformError::Template {
        action: "cannot render the command template for",
        path: params.workdir.clone(),
        source,
    })
}

/// The metrics of `w`'s parser from what `job` left in execution `e`.
fn parse_metrics(
    w: &isolab_workloads::WorkloadDef,
    e: &Execution,
    job: &Job,
) -> Result<Vec<MetricValue>, String> {
    isolab_workloads::parse(w.parser, &output(e, job))
        .map(|ms| ms.into_iter().map(metric_value).collect())
        .map_err(|e| format!("cannot parse the output of {}: {e}", w.name))
}

/// A workload's metric as the store keeps it.
fn metric_value(m: isolab_workloads::Metric) -> MetricValue {
    MetricValue {
        name: m.name,
        unit: m.unit,
        direction: m.direction,
        value: m.value,
    }
}

/// From the first start to the last exit of `spans` (start, wall).
fn span(spans: &[(std::time::Instant, Duration)]) -> Duration {
    let (Some(first), Some(last)) = (
        spans.iter().map(|(s, _)| *s).min(),
        spans.iter().map(|(s, w)| *s + *w).max(),
    ) else {
        return Duration::ZERO;
    };
    last.saturating_duration_since(first)
}

/// What the parsers read of an instance's execution.
fn output<'a>(e: &'a Execution, job: &'a Job) -> RunOutput<'a> {
    RunOutput {
        stdout: &e.stdout,
        stderr: &e.stderr,
        workdir: &job.workdir,
        wall: e.wall,
    }
}

/// The window over which an instance that started at `started` and ran for `wall`
/// measured its rates: the last `measured` of its run (the whole run when its tool
/// does not say, or says more).
pub fn measurement_window(
    started: std::time::Instant,
    wall: Duration,
    measured: Option<Duration>,
) -> (std::time::Instant, Duration) {
    let len = measured.map_or(wall, |m| m.min(wall));
    (started + (wall - len), len)
}

/// How much concurrent instances overlapped: their mean wall time over the span
/// from the first start to the last exit (1 = side by side all the time).
pub fn instances_overlap(spans: &[(std::time::Instant, Duration)]) -> f64 {
    let total = span(spans).as_secs_f64();
    if spans.is_empty() || total <= 0.0 {
        return 1.0;
    }
    spans.iter().map(|(_, w)| w.as_secs_f64()).sum::<f64>() / spans.len() as f64 / total
}

/// The metrics of a run of several instances: when higher is better (a rate:
/// events/s, MiB/s, IOPS), the aggregate throughput, which is the work all instances
/// did over the span from the first start to the last end of their measurements
/// (`Σ rateᵢ·lenᵢ / span`; the plain sum of rates when they ran side by side, less
/// when their starts were staggered, as when 128 containers start at once); when
/// lower is better (time or latency), the mean. Each metric's mean per instance is
/// kept as `<name>_per_instance`. `spans` are each instance's measurement window
/// (start and length: the span its tool measured its rate over, see
/// [`isolab_workloads::measured_time`]). One instance's metrics are returned as
/// they are.
pub fn aggregate_instances(
    per_instance: &[Vec<MetricValue>],
    spans: &[(std::time::Instant, Duration)],
) -> Vec<MetricValue> {
    let Some(first) = per_instance.first() else {
        return Vec::new();
    };
    if per_instance.len() == 1 {
        return first.clone();
    }
    let n = per_instance.len() as f64;
    let mut out = Vec::new();
    let mut per = Vec::new();
    for m in first {
        let values: Vec<f64> = per_instance
            .iter()
            .filter_map(|ms| ms.iter().find(|x| x.name == m.name).map(|x| x.value))
            .collect();
        if values.len() != per_instance.len() {
            continue; // not every instance reported it
        }
        let sum: f64 = values.iter().sum();
        let mean = sum / n;
        let span = span(spans).as_secs_f64();
        let work: f64 = values
            .iter()
            .zip(spans)
            .map(|(v, (_, wall))| v * wall.as_secs_f64())
            .sum();
        out.push(MetricValue {
            value: match m.direction {
                isolab_stats::Direction::Higher if span > 0.0 && spans.len() == values.len() => {
                    work / span
                }
                isolab_stats::Direction::Higher => sum,
                isolab_stats::Direction::Lower => mean,
            },
            ..m.clone()
        });
        per.push(MetricValue {
            name: format!("{}_per_instance", m.name),
            value: mean,
            ..m.clone()
        });
    }
    out.extend(per);
    out
}

impl Runner<'_> {
    /// The neighbour instances of a run of `cell` and the subject's limits under the
    /// cell's reservation; with a note when the subject's solo profile was measured
    /// for this run.
    fn neighbours(
        &self,
        cell: &Cell,
        level: &NeighbourLevel,
        job: &Job,
        disk: &DiskFacts,
    ) -> Result<(NeighbourJobs, isolab_cgroups::Limits, Option<String>), PlatformError> {
        let memory = host_memory();
        let utilisation = matches!(level.intensity, Intensity::Utilisation(_));
        let disk_name = disk.device.and_then(disk_name);
        let refuse = |source| PlatformError::Reservation {
            job: job.name.clone(),
            source,
        };
        let mut notes = Vec::new();
        let wants_disk = utilisation && level.kind == NeighbourKind::Disk;
        let network = level.kind == NeighbourKind::Network;
        // The `net` reservation rates the network neighbours' interface: other kinds
        // send nothing, so it changes nothing for them.
        let wants_net = network && (utilisation || cell.reservation.needs_net_capacity());
        let disk_iops = if wants_disk || cell.reservation.needs_disk_capacity() {
            let (iops, note) =
                self.calibrations
                    .disk_capacity(self.platform, self.interrupt, job, disk.direct)?;
            notes.extend(note);
            Some(iops)
        } else {
            None
        };
        let net_mbps = if wants_net {
            let (mbps, note) =
                self.calibrations
                    .net_capacity(self.platform, self.interrupt, job)?;
            notes.extend(note);
            Some(mbps)
        } else {
            None
        };
        let solo = if utilisation || cell.reservation.needs_disk_capacity() || wants_net {
            let (solo, note) = self.calibrations.solo_profile(
                self.platform,
                self.interrupt,
                cell,
                job,
                disk_name.as_deref(),
            )?;
            notes.extend(note);
            solo
        } else {
            SoloProfile::default()
        };
        let request = |neighbours: u32| ReserveRequest {
            reservation: cell.reservation,
            subject: &job.limits,
            subject_cpus: cell.shape.cpus,
            host_cpus: &self.config.cpus,
            host_memory: memory,
            neighbours,
            kind: Some(level.kind),
            disk: match (disk.device, disk_iops) {
                (Some(device), Some(capacity_iops)) => Some(DiskShare {
                    device,
                    capacity_iops,
                    solo_iops: solo.disk_iops,
                }),
                _ => None,
            },
            net: net_mbps.map(|capacity_mbps| NetShare {
                capacity_mbps,
                solo_mbps: solo.net_gbps * 1000.0,
            }),
        };
        // What the reservation leaves the neighbours bounds what the plan can add;
        // then the limits are shared among the instances planned.
        let bound = reserve(&request(1)).map_err(refuse)?;
        let capacity = Capacity {
            cpus: self.config.cpus.len() as f64,
            disk_iops,
            net_gbps: net_mbps.map(|m| m / 1000.0),
            memory_bytes: memory.0,
            neighbour_cpus: Some(bound.neighbour_cpus),
        };
        let plan = neighbour::plan(level, &capacity, &solo).map_err(|source| {
            PlatformError::NeighbourPlan {
                job: job.name.clone(),
                source,
            }
        })?;
        if let (Some(target), Some(reachable)) = (plan.target, plan.reachable) {
            notes.push(format!(
                "reservation `{}` leaves the neighbours {} cpus: with the subject's {:.2} they reach at most {reachable:.1}% of the target {target:.1}%, and runs are checked against that",
                cell.reservation, bound.neighbour_cpus, solo.cpus_used
            ));
        }
        let reserved = reserve(&request(plan.instances)).map_err(refuse)?;
        let limits = reserved.neighbour.clone();
        let instances = neighbour::commands(
            &plan,
            &CommandContext {
                workdir: job.workdir.clone(),
                direct: disk.direct,
                memory_limit: limits.memory_max.map(|b| b.0),
                index: 0,
            },
        );
        let target = match level.intensity {
            Intensity::Utilisation(u) => Some(100.0 * u),
            Intensity::Count(_) => None,
        };
        let note = (!notes.is_empty()).then(|| notes.join("; "));
        Ok((
            NeighbourJobs {
                level: level.to_string(),
                instances,
                limits,
                target_util_pct: target.filter(|_| level.kind == NeighbourKind::Cpu),
                reachable_util_pct: plan.reachable,
                disk_target: match (level.kind, target, disk_name, disk_iops) {
                    (NeighbourKind::Disk, Some(t), Some(name), Some(cap)) => {
                        Some(crate::platform::DiskTarget {
                            device: name,
                            capacity_iops: cap,
                            target_pct: t,
                        })
                    }
                    _ => None,
                },
                net_target: match (network, target, net_mbps) {
                    (true, Some(t), Some(cap)) => Some(crate::platform::NetTarget {
                        capacity_mbps: cap,
                        target_pct: t,
                    }),
                    _ => None,
                },
                net_rate_mbps: reserved.neighbour_net_mbps.filter(|_| network),
                settle: NEIGHBOUR_SETTLE,
                network_servers: if network { plan.instances } else { 0 },
            },
            reserved.subject,
            note,
        ))
    }
}

/// The kernel's name of a whole disk (`vda` for 254:0), from /sys/dev/block.
fn disk_name(device: DeviceNumber) -> Option<String> {
    let uevent = std::fs::read_to_string(format!("/sys/dev/block/{device}/uevent")).ok()?;
    uevent
        .lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .map(str::to_owned)
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

/// How long neighbours run before the subject's command starts.
pub const NEIGHBOUR_SETTLE: Duration = Duration::from_secs(1);

/// The last `n` characters of `s`.
fn tail_chars(s: &str, n: usize) -> &str {
    let start = s
        .char_indices()
        .rev()
        .nth(n.saturating_sub(1))
        .map_or(0, |(i, _)| i);
    &s[start..]
}

/// The host's memory (`MemTotal`), or 1 GiB when /proc/meminfo cannot be read.
pub(crate) fn host_memory() -> isolab_cgroups::Bytes {
    crate::environment::memory_total(Path::new("/proc"))
        .map_or(isolab_cgroups::Bytes::gib(1), isolab_cgroups::Bytes)
}

struct Done {
    execution: crate::platform::Execution,
    metrics: Result<Vec<MetricValue>, String>,
    limits: serde_json::Value,
    /// A load generator's totals and intervals (service stacks measured by a load).
    load: Option<isolab_workloads::load::LoadResult>,
}

/// Decides every undecided comparison that its cells' primary values now decide,
/// paired by round as the report pairs them ([`isolab_stats::interim_verdict`] under
/// the default rule). Decisions are kept once made.
fn decide_comparisons(comparisons: &mut [Comparison], states: &[CellState]) {
    let rule = isolab_stats::VerdictRule::default();
    for c in comparisons.iter_mut().filter(|c| c.decided.is_none()) {
        let (a, b) = (&states[c.base], &states[c.other]);
        let Some(direction) = a.direction.or(b.direction) else {
            continue;
        };
        let pairs = isolab_stats::pairs_by_round(&a.values, &b.values);
        let (va, vb) = (a.primary_values(), b.primary_values());
        let data = isolab_stats::PointData {
            a: &va,
            b: &vb,
            pairs: &pairs,
            direction,
        };
        if let Some(t) = isolab_stats::test_point(data, 0.95, &rule) {
            c.decided = isolab_stats::interim_verdict(&rule, &t, c.points);
        }
    }
}

/// Whether the partner of cell `i` in `c` stopped because a run failed (the
/// comparison can then never be decided and does not hold `i` back).
fn partner_failed(c: &Comparison, states: &[CellState], i: usize) -> bool {
    let partner = if c.base == i { c.other } else { c.base };
    states[partner]
        .stopped
        .as_deref()
        .is_some_and(|r| r.starts_with("failed"))
}

/// Whether cell `i` takes part in a comparison whose partner has not failed.
fn compared_live(comparisons: &[Comparison], states: &[CellState], i: usize) -> bool {
    comparisons
        .iter()
        .any(|c| (c.base == i || c.other == i) && !partner_failed(c, states, i))
}

/// Why a cell with `n` counted runs and coefficient of variation `cv` needs no more
/// runs, or `None` if it does. `target_cv` is `None` for a cell whose comparisons
/// decide when it stops (then only `max` stops it here).
pub fn stop_reason(
    n: u32,
    cv: Option<f64>,
    min: u32,
    max: u32,
    target_cv: Option<f64>,
    primary: &str,
) -> Option<String> {
    if n < min {
        return None;
    }
    let Some(target_cv) = target_cv else {
        return (n >= max).then(|| {
            format!(
                "max: {n} runs reached before every comparison was decided (see `isolab compare`)"
            )
        });
    };
    match cv {
        Some(cv) if cv <= target_cv => Some(format!(
            "stable: CV of {primary} {:.2}% ≤ target {:.2}% after {n} runs",
            cv * 100.0,
            target_cv * 100.0
        )),
        _ if n >= max => Some(format!(
            "max: {n} runs reached with CV of {primary} {} > target {:.2}%",
            cv.map_or("unknown".into(), |c| format!("{:.2}%", c * 100.0)),
            target_cv * 100.0
        )),
        _ => None,
    }
}

/// Removes run working directories under `base` whose isolab process is gone
/// (named `exp<ID>-pid<PID>-…`). Returns what was removed.
pub fn gc_workdirs(base: &Path) -> Result<Vec<String>, RunError> {
    let entries = match std::fs::read_dir(base) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(RunError::Workdir {
                path: base.to_path_buf(),
                source,
            })
        }
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = workdir_owner(&name) else {
            continue;
        };
        let alive =
            pid != std::process::id() && crate::platform::isolab_running(Path::new("/proc"), pid);
        if alive {
            continue;
        }
        std::fs::remove_dir_all(entry.path()).map_err(|source| RunError::Workdir {
            path: entry.path(),
            source,
        })?;
        removed.push(format!("working directory {}", entry.path().display()));
    }
    Ok(removed)
}

/// The owner pid in a working directory name `exp<ID>-pid<PID>-<tag>`.
fn workdir_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("exp")?;
    let (_, after) = rest.split_once("-pid")?;
    after.split('-').next()?.parse().ok()
}

/// What the disk under the working directories offers.
#[derive(Debug, Clone, Default)]
struct DiskFacts {
    /// Whether O_DIRECT opens succeed there.
    direct: bool,
    /// The whole-disk device behind it, for io throttling.
    device: Option<DeviceNumber>,
    /// Remarks stored with every run.
    notes: Vec<String>,
}

impl DiskFacts {
    fn probe(dir: &Path) -> DiskFacts {
        let mut notes = Vec::new();
        let direct = direct_io_supported(dir);
        if !direct {
            notes.push(format!(
                "direct I/O is not supported by the file system at {} (tmpfs or overlay?): I/O workloads run buffered; pass --workdir on a disk-backed file system to measure the device",
                dir.display()
            ));
        }
        DiskFacts {
            direct,
            device: DeviceNumber::backing_disk(dir, Path::new("/sys"))
                .ok()
                .flatten(),
            notes,
        }
    }
}

/// Whether a file can be opened with O_DIRECT in `dir`.
pub fn direct_io_supported(dir: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(".isolab-direct-probe");
    let ok = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .is_ok();
    let _ = std::fs::remove_file(&path);
    ok
}

#[cfg(test)]
mod tests;

mod stack;

pub use stack::generator_missing;
