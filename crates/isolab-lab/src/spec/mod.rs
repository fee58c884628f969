//! Experiment specs: TOML in, a validated [`ExperimentSpec`] with its expanded cells out.
//!
//! Every problem is a [`SpecError`] naming the file, line and column and saying what
//! was expected; all problems found in one pass are reported together.
//!
//! `raw.rs` reads the TOML with the span of every value; `check.rs` walks the sections,
//! each checked in a module of its own: `experiment.rs`, `image.rs`, `shapes.rs`,
//! `stack/` (`[workload.NAME]` tables, their components and load), `platforms.rs`,
//! `matrix.rs` (with `neighbours.rs` and `reservations.rs`), then `cells.rs` expands the
//! matrix; `storage.rs` checks `[storage]` and the `storage` factor. `calibration.rs` makes the A/A design of `isolab calibrate`.

mod calibration;
mod cells;
mod check;
mod experiment;
mod image;
mod matrix;
mod neighbours;
mod platforms;
mod raw;
mod reservations;
mod shapes;
mod source;
pub mod stack;
mod storage;
mod validator;

use std::path::PathBuf;
use std::time::Duration;

use isolab_cgroups::IdSet;
use isolab_workloads::WorkloadDef;

pub use calibration::aa_design;
pub use source::{Location, Source, SpecError, SpecErrors};
pub use storage::{StorageSpec, Striping, DEFAULT_SIZE as DEFAULT_STORAGE_SIZE};

use crate::neighbour::NeighbourLevel;
use crate::platform::PlatformDef;
use crate::reservation::Reservation;
use crate::shape::{Placement, Shape};
use raw::RawSpec;

/// The built-in quick-start experiment, run by `isolab run` without a spec.
pub const QUICK_START: &str = include_str!("quick-start.toml");

/// The bench image's directory, as `make image` links it (to the bench recipe's image):
/// commands that take an image directory default to it. A spec without `[experiment] image`
/// gets a recipe image instead ([`ExperimentSpec::recipe`]).
pub const DEFAULT_IMAGE: &str = "/var/lib/isolab/images/bench";

/// The verdicts' Δ when a spec does not set `[experiment] noise`: ±2%.
pub const DEFAULT_NOISE: f64 = 0.02;

/// The factors a matrix may vary, in the order cells list them.
pub const FACTORS: [&str; 13] = [
    "platform",
    "shape",
    "placement",
    "workload",
    "neighbour",
    "reservation",
    "threads",
    "instances",
    "copies",
    "replica",
    "host_cpus",
    "storage",
    "guest",
];

/// Most concurrent instances of a subject a cell may ask for.
pub const MAX_INSTANCES: u32 = 512;
/// Most copies of a workload a cell may start in one instance.
pub const MAX_COPIES: u32 = 512;

/// Facts about the host that decide which cells are possible.
#[derive(Debug, Clone)]
pub struct HostFacts {
    /// The cpus this process may run on (its affinity / root cpuset).
    pub cpus: IdSet,
    /// What this host offers the `storage` factor; `None` when a stored spec is read
    /// on any machine (nothing about storage is checked).
    pub storage: Option<StorageSupport>,
}

/// What a host offers the `storage` factor, beyond what its platforms declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageSupport {
    /// Whether the kernel has device-mapper (`shared` stripes with a dm target).
    pub device_mapper: bool,
    /// Whether the kernel has btrfs (`shared` with `striping = "btrfs"`).
    pub btrfs: bool,
}

impl StorageSupport {
    /// What the kernel whose proc file system is at `proc` offers: device-mapper when
    /// `<proc>/misc` lists `device-mapper`, btrfs when `<proc>/filesystems` does.
    pub fn probe(proc: &std::path::Path) -> StorageSupport {
        let misc = std::fs::read_to_string(proc.join("misc")).unwrap_or_default();
        let filesystems = std::fs::read_to_string(proc.join("filesystems")).unwrap_or_default();
        StorageSupport {
            device_mapper: misc
                .lines()
                .any(|l| l.split_whitespace().nth(1) == Some("device-mapper")),
            btrfs: filesystems
                .lines()
                .any(|l| l.split_whitespace().last() == Some("btrfs")),
        }
    }
}

/// How many times each cell runs.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Repetitions {
    /// Runs per cell before counting starts; not counted.
    pub warmup: u32,
    /// Counted runs every cell gets.
    pub min: u32,
    /// Most counted runs a cell gets while its CV is above `target_cv`.
    pub max: u32,
    /// Coefficient of variation of the primary metric at which a cell is stable.
    pub target_cv: f64,
}

impl Default for Repetitions {
    fn default() -> Self {
        Repetitions {
            warmup: 1,
            min: 5,
            max: 30,
            target_cv: 0.05,
        }
    }
}

/// The order in which runs are executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Rounds over all cells, each round shuffled with the recorded seed (default).
    Interleaved,
    /// All runs of one cell, then the next, in matrix order (for debugging; biased by drift).
    Sequential,
}

/// What to do with cells that cannot run on this host (e.g. pinned 4 cpus on 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Impossible {
    /// Refuse the spec, pointing at the level (default).
    Error,
    /// Drop the cells and say which and why.
    Skip,
}

/// One combination of levels, ready to run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Cell {
    /// Position in matrix order, stable for a given spec.
    pub index: u32,
    /// (factor, level) in [`FACTORS`] order, for the factors the matrix varies.
    pub levels: Vec<(String, String)>,
    /// Where it runs.
    pub platform: PlatformDef,
    /// Its size.
    pub shape: Shape,
    /// How cpus are granted.
    pub placement: Placement,
    /// What runs.
    pub workload: WorkloadDef,
    /// The co-located stressor, if any.
    pub neighbour: Option<NeighbourLevel>,
    /// What protects the subject from it.
    pub reservation: Reservation,
    /// Worker threads of the workload (`{threads}`); `None` = the shape's cpus.
    pub threads: Option<u32>,
    /// Concurrent instances of the subject, each in an instance of its own (1 = one).
    pub instances: u32,
    /// Independent copies of the workload started together inside ONE instance (one
    /// cgroup, container or guest) of the shape (1 = one): seed 001's "N instances of
    /// the compilation in one VM"; the run's metrics are the mean over the copies.
    pub copies: u32,
    /// The host cpu pool (`host_cpus`): how many cpus the whole cell (subject,
    /// neighbours, load generators, engine daemons) may use; `None` = every cpu
    /// isolab may use. The container-to-host core ratio (CHR) is the shape's cpus
    /// over it.
    pub host_cpus: Option<u32>,
    /// Where the working directory lives (`bind` unless the matrix varies `storage`).
    pub storage: isolab_engines::StorageLevel,
}

impl Cell {
    /// `{threads}` of the workload: the `threads` level, else the shape's cpus.
    pub fn thread_count(&self) -> u32 {
        self.threads.unwrap_or(self.shape.cpus())
    }
}

impl Cell {
    /// Canonical key: `factor=level` pairs separated by spaces.
    pub fn key(&self) -> String {
        levels_key(&self.levels)
    }

    /// The level of `factor`, if the matrix varies it.
    pub fn level(&self, factor: &str) -> Option<&str> {
        self.levels
            .iter()
            .find(|(f, _)| f == factor)
            .map(|(_, l)| l.as_str())
    }
}

/// `factor=level` pairs separated by spaces.
pub fn levels_key(levels: &[(String, String)]) -> String {
    levels
        .iter()
        .map(|(f, l)| format!("{f}={l}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A cell left out of the experiment, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DroppedCell {
    /// Its key.
    pub key: String,
    /// Why: `excluded by …` or why it is impossible here.
    pub reason: String,
}

/// A validated experiment spec with its expanded matrix.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ExperimentSpec {
    /// Where the spec came from (its text is stored with the experiment).
    #[serde(skip)]
    pub source: Source,
    /// Experiment name.
    pub name: String,
    /// Free text.
    pub description: Option<String>,
    /// Levels that identify baseline cells; other factors are matched.
    pub baseline: Vec<(String, String)>,
    /// Repetition policy.
    pub repetitions: Repetitions,
    /// `[experiment] noise`: the Δ of every verdict on this experiment (the runner's
    /// stopping rule, `show`, `compare`, `--until-decided`, `gate`): the smallest
    /// relative change that matters; [`DEFAULT_NOISE`] when not given.
    pub noise: f64,
    /// Run order.
    pub order: Order,
    /// Seed for shuffling, when the spec fixes one.
    pub seed: Option<u64>,
    /// Length of time-bound workloads (`{duration}`).
    pub duration: Duration,
    /// How long one run's command may take before it is killed and the run fails
    /// (`timeout`): by default four times `duration` plus two minutes, which a
    /// workload of fixed work (HPL, a build, a transcode) may need raised.
    pub timeout: Duration,
    /// The latency probe of every run (`probe_threshold`: a wake-up later than it,
    /// or a p99 above a fifth of it over a second, aborts the run); `None` = off.
    #[serde(skip)]
    pub probe: Option<crate::probe::ProbeConfig>,
    /// Root filesystem (a directory) of container platforms: `[experiment] image`,
    /// relative to the spec's directory, or the directory of [`ExperimentSpec::recipe`]'s image.
    pub image: PathBuf,
    /// `[experiment] image` when it names a container image of one's own
    /// (`docker-archive:FILE`, …): `isolab run` imports it ([`isolab_image::import`]) and
    /// sets [`ExperimentSpec::image`] to its root file system.
    pub image_ref: Option<isolab_image::ImageReference>,
    /// What the imported image of [`ExperimentSpec::image_ref`] asks of its processes (its
    /// environment, and its command for `{entrypoint}`); set by `isolab run` with the import.
    pub image_config: Option<isolab_image::ImageConfig>,
    /// The recipe of the image when the spec names no directory: the bench packages, the
    /// matrix's workloads' packages and `[image] packages` (see the `image` module).
    pub recipe: Option<isolab_image::Recipe>,
    /// The recipes of the `guest` factor's root images: the experiment's packages from
    /// each guest level's Debian suite (one per suite).
    pub guest_recipes: Vec<isolab_image::Recipe>,
    /// `[storage]`: backing directories and sizes of the `storage` factor's devices.
    pub storage: StorageSpec,
    /// Factors varied by the matrix with their levels, in [`FACTORS`] order.
    pub factors: Vec<(String, Vec<String>)>,
    /// The cells to run.
    pub cells: Vec<Cell>,
    /// Cells excluded or impossible, with reasons.
    pub dropped: Vec<DroppedCell>,
    /// Things worth knowing that do not stop the experiment.
    pub warnings: Vec<String>,
}

impl ExperimentSpec {
    /// The root image a cell on `platform` runs from: its guest level's, else the
    /// experiment's.
    pub fn image_of(&self, platform: &crate::platform::PlatformDef) -> PathBuf {
        platform
            .guest
            .as_ref()
            .map_or_else(|| self.image.clone(), |g| g.image.clone())
    }

    /// The image a job on `platform` gets: [`ExperimentSpec::image_of`] on the platforms
    /// that run from an image, none on the host.
    pub fn job_image(&self, platform: &crate::platform::PlatformDef) -> Option<PathBuf> {
        platform.kind.needs_image().then(|| self.image_of(platform))
    }

    /// Parses and validates `source` for a host described by `host`.
    pub fn parse(source: Source, host: &HostFacts) -> Result<Self, SpecErrors> {
        let raw: RawSpec = toml::from_str(&source.text).map_err(|e| {
            let message = e.message().trim().to_owned();
            SpecErrors(vec![source.error(e.span(), message)])
        })?;
        validator::Validator::new(&source, host)
            .validate(raw)
            .map(|mut spec| {
                spec.source = source.clone();
                spec
            })
            .map_err(|mut e| {
                // Report in file order, like a compiler.
                e.0.sort_by_key(|e| e.location.map(|l| (l.line, l.col)));
                e
            })
    }

    /// The verdict rule of this experiment: the default significance level and the
    /// spec's `noise`.
    pub fn verdict_rule(&self) -> isolab_stats::VerdictRule {
        isolab_stats::VerdictRule {
            noise: self.noise,
            ..isolab_stats::VerdictRule::default()
        }
    }

    /// Each cell's key with the SHA-256 of its workload's definition (command, parser,
    /// files, stack, packages…, as JSON): two experiments measure the same point when a
    /// cell of the same key runs a workload of the same digest (`isolab gate`, `trend`).
    pub fn workload_digests(&self) -> std::collections::BTreeMap<String, String> {
        use sha2::{Digest, Sha256};
        self.cells
            .iter()
            .map(|c| {
                let json = serde_json::to_string(&c.workload).unwrap_or_default();
                let digest = Sha256::digest(json.as_bytes());
                let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
                (c.key(), hex)
            })
            .collect()
    }

    /// Counted runs: (at least, at most), warm-ups excluded.
    pub fn run_bounds(&self) -> (u64, u64) {
        let n = self.cells.len() as u64;
        (
            n * u64::from(self.repetitions.min),
            n * u64::from(self.repetitions.max),
        )
    }

    /// Rough time for the whole experiment: (at least, at most). A run takes the
    /// experiment's duration, or its load profile's for a stack measured by a load
    /// (plus a few seconds to start the stack); see [`ExperimentSpec::estimate`].
    pub fn estimated_time(&self) -> (Duration, Duration) {
        let e = self.estimate(|_| None);
        (e.at_least, e.at_most)
    }

    /// Time for the whole experiment, each cell's run taking `known(cell)` where that
    /// is known (how long runs of its platform and workload took on this host before,
    /// setup included), else the rough time of [`ExperimentSpec::estimated_time`].
    pub fn estimate(&self, known: impl Fn(&Cell) -> Option<Duration>) -> Estimate {
        let mut from_history = 0;
        let per_run: Duration = self
            .cells
            .iter()
            .map(|c| {
                if let Some(d) = known(c) {
                    from_history += 1;
                    return d;
                }
                match c.workload.stack.as_ref().map(|s| &s.measure) {
                    Some(isolab_workloads::Measure::Load(l)) => {
                        l.spec.profile.duration() + Duration::from_secs(5)
                    }
                    Some(
                        isolab_workloads::Measure::Command | isolab_workloads::Measure::Client,
                    ) => self.duration + Duration::from_secs(5),
                    None => self.duration + Duration::from_millis(500),
                }
            })
            .sum();
        let warm = per_run * self.repetitions.warmup;
        let (lo, hi) = (self.repetitions.min, self.repetitions.max);
        Estimate {
            at_least: warm + per_run * lo,
            at_most: warm + per_run * hi,
            from_history,
        }
    }
}

/// How long an experiment should take ([`ExperimentSpec::estimate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Estimate {
    /// With every cell at its fewest runs.
    pub at_least: Duration,
    /// With every cell at its most runs.
    pub at_most: Duration,
    /// Cells whose run time came from runs stored before, not from the rough rule.
    pub from_history: usize,
}

#[cfg(test)]
mod tests;
