//! Experiment specs: TOML in, a validated [`ExperimentSpec`] with its expanded cells out.
//!
//! Every problem is a [`SpecError`] naming the file, line and column and saying what
//! was expected; all problems found in one pass are reported together.

mod image;
mod raw;
mod source;
pub mod stack;

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use isolab_cgroups::{Bytes, IdSet};
use isolab_workloads::WorkloadDef;
use toml::Spanned;

pub use source::{Location, Source, SpecError, SpecErrors};

use crate::neighbour::NeighbourLevel;
use crate::platform::{Network, PlatformDef, PlatformKind};
use crate::reservation::Reservation;
use crate::shape::{builtin_shapes, Placement, Shape};
use raw::{RawLevel, RawSpec};

/// The built-in quick-start experiment, run by `isolab run` without a spec.
pub const QUICK_START: &str = include_str!("quick-start.toml");

/// The bench image's directory, as `make image` links it (to the bench recipe's image):
/// commands that take an image directory default to it. A spec without `[experiment] image`
/// gets a recipe image instead ([`ExperimentSpec::recipe`]).
pub const DEFAULT_IMAGE: &str = "/var/lib/isolab/images/bench";

/// The factors a matrix may vary, in the order cells list them.
pub const FACTORS: [&str; 9] = [
    "platform",
    "shape",
    "placement",
    "workload",
    "neighbour",
    "reservation",
    "threads",
    "instances",
    "replica",
];

/// Most concurrent instances of a subject a cell may ask for.
pub const MAX_INSTANCES: u32 = 512;

/// Facts about the host that decide which cells are possible.
#[derive(Debug, Clone)]
pub struct HostFacts {
    /// The cpus this process may run on (its affinity / root cpuset).
    pub cpus: IdSet,
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
}

impl Cell {
    /// `{threads}` of the workload: the `threads` level, else the shape's cpus.
    pub fn thread_count(&self) -> u32 {
        self.threads.unwrap_or(self.shape.cpus)
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
    /// The recipe of the image when the spec names no directory: the bench packages, the
    /// matrix's workloads' packages and `[image] packages` (see the `image` module).
    pub recipe: Option<isolab_image::Recipe>,
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
    /// Parses and validates `source` for a host described by `host`.
    pub fn parse(source: Source, host: &HostFacts) -> Result<Self, SpecErrors> {
        let raw: RawSpec = toml::from_str(&source.text).map_err(|e| {
            let message = e.message().trim().to_owned();
            SpecErrors(vec![source.error(e.span(), message)])
        })?;
        Validator {
            source: &source,
            host,
            errors: Vec::new(),
            broken_workloads: Vec::new(),
        }
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
    /// (plus a few seconds to start the stack).
    pub fn estimated_time(&self) -> (Duration, Duration) {
        let per_run: Duration = self
            .cells
            .iter()
            .map(|c| match c.workload.stack.as_ref().map(|s| &s.measure) {
                Some(isolab_workloads::Measure::Load(l)) => {
                    l.spec.profile.duration() + Duration::from_secs(5)
                }
                Some(isolab_workloads::Measure::Command | isolab_workloads::Measure::Client) => {
                    self.duration + Duration::from_secs(5)
                }
                None => self.duration + Duration::from_millis(500),
            })
            .sum();
        let warm = per_run * self.repetitions.warmup;
        let (lo, hi) = (self.repetitions.min, self.repetitions.max);
        (warm + per_run * lo, warm + per_run * hi)
    }
}

struct Validator<'a> {
    source: &'a Source,
    host: &'a HostFacts,
    errors: Vec<SpecError>,
    /// `[workload.NAME]` tables that had errors: already reported, so the matrix's
    /// reference to them is not reported again as unknown.
    broken_workloads: Vec<String>,
}

type Levels = Option<Spanned<Vec<Spanned<RawLevel>>>>;
/// A validated level: its text, its span, and whether the spec listed it.
type Level = (String, Range<usize>, bool);

impl Validator<'_> {
    fn err(&mut self, span: Range<usize>, message: impl Into<String>) {
        self.errors.push(self.source.error(Some(span), message));
    }

    fn validate(mut self, raw: RawSpec) -> Result<ExperimentSpec, SpecErrors> {
        let host_cpus = self.host.cpus.len() as u32;
        let exp = raw.experiment.into_inner();

        let name = exp.name.get_ref().trim().to_owned();
        if name.is_empty() || name.parse::<i64>().is_ok() {
            self.err(
                exp.name.span(),
                "experiment name must be non-empty and not a number (numbers are experiment ids)",
            );
        }

        let repetitions = self.repetitions(exp.repetitions);
        let order = match exp.order.as_ref().map(|o| (o.get_ref().as_str(), o.span())) {
            None | Some(("interleaved", _)) => Order::Interleaved,
            Some(("sequential", _)) => Order::Sequential,
            Some((other, span)) => {
                self.err(
                    span,
                    format!("unknown order `{other}`: expected `interleaved` or `sequential`"),
                );
                Order::Interleaved
            }
        };
        let impossible = match exp
            .impossible
            .as_ref()
            .map(|o| (o.get_ref().as_str(), o.span()))
        {
            None | Some(("error", _)) => Impossible::Error,
            Some(("skip", _)) => Impossible::Skip,
            Some((other, span)) => {
                self.err(
                    span,
                    format!("unknown value `{other}` for impossible: expected `error` or `skip`"),
                );
                Impossible::Error
            }
        };
        let seed = exp.seed.and_then(|s| match u64::try_from(*s.get_ref()) {
            Ok(v) => Some(v),
            Err(_) => {
                self.err(s.span(), "seed must be a non-negative integer");
                None
            }
        });
        let duration = match exp.duration {
            None => Duration::from_secs(10),
            Some(d) => match humantime::parse_duration(d.get_ref()) {
                Ok(v) if v >= Duration::from_secs(1) => v,
                Ok(_) => {
                    self.err(
                        d.span(),
                        "duration must be at least 1s (tools take whole seconds)",
                    );
                    Duration::from_secs(1)
                }
                Err(e) => {
                    self.err(
                        d.span(),
                        format!(
                            "invalid duration `{}`: {e}; expected e.g. \"10s\" or \"2m\"",
                            d.get_ref()
                        ),
                    );
                    Duration::from_secs(10)
                }
            },
        };
        let timeout = match exp.timeout {
            None => duration * 4 + Duration::from_secs(120),
            Some(t) => match humantime::parse_duration(t.get_ref()) {
                Ok(v) if v >= duration => v,
                Ok(_) => {
                    self.err(
                        t.span(),
                        format!(
                            "timeout must be at least the duration ({})",
                            humantime::format_duration(duration)
                        ),
                    );
                    duration * 4 + Duration::from_secs(120)
                }
                Err(e) => {
                    self.err(
                        t.span(),
                        format!(
                            "invalid timeout `{}`: {e}; expected e.g. \"10m\"",
                            t.get_ref()
                        ),
                    );
                    duration * 4 + Duration::from_secs(120)
                }
            },
        };

        let probe = match &exp.probe_threshold {
            None => Some(crate::probe::ProbeConfig::default()),
            Some(t) if t.get_ref() == "off" => None,
            Some(t) => match humantime::parse_duration(t.get_ref()) {
                Ok(v) if v >= Duration::from_millis(50) => Some(crate::probe::ProbeConfig {
                    threshold: v,
                    ..crate::probe::ProbeConfig::default()
                }),
                _ => {
                    self.err(
                        t.span(),
                        format!(
                            "invalid probe_threshold `{}`: expected a duration of at least 50ms (e.g. \"500ms\", \"2s\") or \"off\"",
                            t.get_ref()
                        ),
                    );
                    None
                }
            },
        };

        let image = match &exp.image {
            None => PathBuf::from(DEFAULT_IMAGE),
            Some(i) if i.get_ref().trim().is_empty() => {
                self.err(
                    i.span(),
                    "image must be a directory path, e.g. \"/var/lib/isolab/images/bench\"",
                );
                PathBuf::from(DEFAULT_IMAGE)
            }
            Some(i) => {
                let path = PathBuf::from(i.get_ref());
                match Path::new(&self.source.name).parent() {
                    Some(dir) if path.is_relative() => dir.join(path),
                    _ => path,
                }
            }
        };

        let image_packages = self.image_packages(exp.image.is_some(), raw.image);

        // Shapes: built-ins, then the spec's own (which may override a built-in name).
        let mut shapes: BTreeMap<String, Shape> = builtin_shapes(host_cpus)
            .into_iter()
            .map(|s| (s.name.clone(), s))
            .collect();
        for (name, shape) in raw.shape {
            if let Some(s) = self.shape(name, shape) {
                shapes.insert(s.name.clone(), s);
            }
        }
        // Workloads: catalog, then the spec's own.
        let mut workloads: BTreeMap<String, WorkloadDef> = isolab_workloads::catalog()
            .into_iter()
            .map(|w| (w.name.clone(), w))
            .collect();
        for (name, w) in raw.workload {
            match self.workload(name.clone(), w) {
                Some(w) => {
                    workloads.insert(w.name.clone(), w);
                }
                None => self.broken_workloads.push(name),
            }
        }
        let broken = self.broken_workloads.clone();

        let (matrix, matrix_span) = match raw.matrix {
            Some(m) => {
                let span = m.span();
                (m.into_inner(), span)
            }
            None => {
                self.errors.push(self.source.error(
                    None,
                    "missing [matrix]: a spec needs at least `workload = [...]` under [matrix]",
                ));
                return Err(SpecErrors(self.errors));
            }
        };

        // Platforms: built-ins, then the spec's own.
        let mut platform_defs: BTreeMap<String, PlatformDef> = PlatformDef::builtins()
            .into_iter()
            .map(|p| (p.name.clone(), p))
            .collect();
        for (name, p) in raw.platform {
            if let Some(p) = self.platform(name, p) {
                platform_defs.insert(p.name.clone(), p);
            }
        }
        let platform_names: Vec<String> = platform_defs.keys().cloned().collect();
        let platforms = self.levels("platform", matrix.platform, &["host"], |l| {
            if platform_defs.contains_key(l) {
                return Ok(());
            }
            if PlatformKind::parse(l).is_ok_and(PlatformKind::is_vm) {
                return Err(format!(
                    "platform `{l}` needs its accelerator in the name: `{}` (KVM) or `{}` (QEMU's software emulation); `isolab env` says which works on this host",
                    l.replacen("vm", "vm(kvm)", 1),
                    l.replacen("vm", "vm(tcg)", 1)
                ));
            }
            Err(format!(
                "unknown platform `{l}`: expected one of {} or a [platform.{l}] table",
                list(&platform_names)
            ))
        });
        let shape_names: Vec<String> = shapes.keys().cloned().collect();
        let shape_levels = self.levels("shape", matrix.shape, &["full"], |l| {
            if shapes.contains_key(l) {
                Ok(())
            } else {
                Err(format!(
                    "unknown shape `{l}`: expected one of {} or a [shape.{l}] table",
                    list(&shape_names)
                ))
            }
        });
        let placements = self.levels("placement", matrix.placement, &["shared"], |l| {
            Placement::parse(l).map(|_| ()).ok_or_else(|| {
                format!("unknown placement `{l}`: expected `shared`, `quota` or `pinned`")
            })
        });
        let workload_names: Vec<String> = workloads.keys().cloned().collect();
        if matrix.workload.is_none() {
            self.err(matrix_span.clone(), "missing `workload` in [matrix]: name at least one workload (see `isolab list --workloads`)");
        }
        let workload_levels = self.levels("workload", matrix.workload, &[], |l| {
            if workloads.contains_key(l) || broken.iter().any(|b| b == l) {
                Ok(())
            } else {
                Err(format!(
                    "unknown workload `{l}`: expected one of {} or a [workload.{l}] table",
                    list(&workload_names)
                ))
            }
        });

        let neighbours = self.levels("neighbour", matrix.neighbour, &["none"], |l| {
            if l == "none" {
                return Ok(());
            }
            l.parse::<NeighbourLevel>()
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
        let reservations = self.levels("reservation", matrix.reservation, &["none"], |l| {
            Reservation::parse(l).map(|_| ()).ok_or_else(|| {
                format!(
                    "unknown reservation `{l}`: expected one of {}",
                    list(&Reservation::ALL.map(|r| r.as_str().to_owned()))
                )
            })
        });
        let count = |what: &str, max: u32, l: &str| match l.parse::<u32>() {
            Ok(n) if (1..=max).contains(&n) => Ok(()),
            _ => Err(format!(
                "{what} must be a whole number from 1 to {max}, got `{l}`"
            )),
        };
        let threads = self.levels("threads", matrix.threads, &["-"], |l| {
            count("threads", 4096, l)
        });
        let instances = self.levels("instances", matrix.instances, &["1"], |l| {
            count("instances", MAX_INSTANCES, l)
        });
        // `replica` only labels repeated copies of the same configuration (an A/A design).
        let replicas = self.levels("replica", matrix.replica, &["1"], |_| Ok(()));

        let all: [(&str, &Vec<Level>); 9] = [
            ("platform", &platforms),
            ("shape", &shape_levels),
            ("placement", &placements),
            ("workload", &workload_levels),
            ("neighbour", &neighbours),
            ("reservation", &reservations),
            ("threads", &threads),
            ("instances", &instances),
            ("replica", &replicas),
        ];
        let factors: Vec<(String, Vec<String>)> = all
            .iter()
            .filter(|(_, ls)| ls.iter().any(|(_, _, explicit)| *explicit))
            .map(|(f, ls)| {
                (
                    f.to_string(),
                    ls.iter().map(|(l, _, _)| l.clone()).collect(),
                )
            })
            .collect();

        // Exclusions: every key a varied factor, every value one of its levels.
        let mut excludes: Vec<(Vec<(String, String)>, Location)> = Vec::new();
        for ex in &matrix.exclude {
            let mut pairs = Vec::new();
            for (k, v) in ex.get_ref() {
                let v_text = v.get_ref().text();
                match factors.iter().find(|(f, _)| f == k) {
                    None => self.err(
                        v.span(),
                        format!("exclude names factor `{k}`, which the matrix does not vary: expected one of {}", list(&factors.iter().map(|f| f.0.clone()).collect::<Vec<_>>())),
                    ),
                    Some((_, levels)) if !levels.contains(&v_text) => self.err(
                        v.span(),
                        format!("exclude names {k} `{v_text}`, which is not a level of the matrix: expected one of {}", list(levels)),
                    ),
                    Some(_) => pairs.push((k.clone(), v_text)),
                }
            }
            excludes.push((pairs, self.source.locate(ex.span().start)));
        }

        let baseline = match exp.baseline {
            None => default_baseline(&factors),
            Some(b) => {
                let mut pairs = Vec::new();
                for (k, v) in b.get_ref() {
                    let v_text = v.get_ref().text();
                    match factors.iter().find(|(f, _)| f == k) {
                        None => self.err(v.span(), format!("baseline names factor `{k}`, which the matrix does not vary: expected one of {}", list(&factors.iter().map(|f| f.0.clone()).collect::<Vec<_>>()))),
                        Some((_, levels)) if !levels.contains(&v_text) => self.err(v.span(), format!("baseline {k} `{v_text}` is not a level of the matrix: expected one of {}", list(levels))),
                        Some(_) => pairs.push((k.clone(), v_text)),
                    }
                }
                pairs
            }
        };

        if !self.errors.is_empty() {
            return Err(SpecErrors(self.errors));
        }

        // Expand in matrix order.
        let mut cells = Vec::new();
        let mut dropped = Vec::new();
        let mut warnings = Vec::new();
        // The cartesian product of all factors, the last factor varying fastest.
        let sizes: Vec<usize> = all.iter().map(|(_, ls)| ls.len()).collect();
        let total: usize = sizes.iter().product();
        for n in 0..total {
            let mut pick = [0usize; 9];
            let mut rest = n;
            for i in (0..sizes.len()).rev() {
                pick[i] = rest % sizes[i];
                rest /= sizes[i];
            }
            let level = |i: usize| &all[i].1[pick[i]];
            let (p, (s, s_span, _), pl, w) = (&level(0).0, level(1), &level(2).0, &level(3).0);
            let levels: Vec<(String, String)> = all
                .iter()
                .enumerate()
                .filter(|(_, (f, _))| factors.iter().any(|(ff, _)| ff == f))
                .map(|(i, (f, _))| (f.to_string(), level(i).0.clone()))
                .collect();
            let key = levels_key(&levels);
            if let Some((_, at)) = excludes
                .iter()
                .find(|(ex, _)| ex.iter().all(|pair| levels.contains(pair)))
            {
                dropped.push(DroppedCell {
                    key,
                    reason: format!("excluded by the exclude entry at line {}", at.line),
                });
                continue;
            }
            let shape = shapes[s.as_str()].clone();
            let placement = Placement::parse(pl).unwrap_or(Placement::Shared);
            if placement == Placement::Pinned && shape.cpus > host_cpus {
                let reason = format!(
                    "pinned shape `{s}` needs {} cpus but this host offers {host_cpus} ({})",
                    shape.cpus, self.host.cpus
                );
                match impossible {
                    Impossible::Skip => {
                        dropped.push(DroppedCell { key, reason });
                        continue;
                    }
                    Impossible::Error => {
                        self.err(s_span.clone(), format!("{reason}: choose a smaller shape, exclude the cell, or set `impossible = \"skip\"` in [experiment]"));
                        continue;
                    }
                }
            }
            let platform = platform_defs[p.as_str()].clone();
            let wl = &workloads[w.as_str()];
            let unreachable = match &wl.stack {
                Some(_) => platform
                    .services_unavailable()
                    .map(|r| format!("workload `{w}` is a service stack: {r}")),
                None => wl
                    .server
                    .as_ref()
                    .and_then(|_| platform.server_unreachable())
                    .map(|r| format!("workload `{w}` needs a server: {r}")),
            };
            if let Some(reason) = unreachable {
                match impossible {
                    Impossible::Skip => {
                        dropped.push(DroppedCell { key, reason });
                        continue;
                    }
                    Impossible::Error => {
                        let span = level(0).1.clone();
                        self.err(span, format!("{reason}; or exclude the cell, or set `impossible = \"skip\"` in [experiment]"));
                        continue;
                    }
                }
            }
            let neighbour = match level(4).0.as_str() {
                "none" => None,
                l => l.parse::<NeighbourLevel>().ok(),
            };
            let reservation = Reservation::parse(&level(5).0).unwrap_or(Reservation::None);
            if matches!(reservation, Reservation::Cpuset | Reservation::Quota)
                && shape.cpus >= host_cpus
            {
                let reason = format!(
                    "reservation `{reservation}` with shape `{s}` ({} cpus) leaves none of this host's {host_cpus} cpus to the neighbours",
                    shape.cpus
                );
                match impossible {
                    Impossible::Skip => {
                        dropped.push(DroppedCell { key, reason });
                        continue;
                    }
                    Impossible::Error => {
                        let span = level(5).1.clone();
                        self.err(span, format!("{reason}: choose a smaller shape, exclude the cell, or set `impossible = \"skip\"` in [experiment]"));
                        continue;
                    }
                }
            }
            let asked = crate::shape::limit_kinds(&shape, placement);
            if let Some(unapplied) = platform.limits_unapplied(asked) {
                let w = format!("{key}: {unapplied}; its runs say so in their notes");
                if !warnings.contains(&w) {
                    warnings.push(w);
                }
            }
            if placement == Placement::Quota && shape.cpus > host_cpus {
                let w = format!(
                    "{key}: a quota of {} cpus on a {host_cpus}-cpu host does not limit anything",
                    shape.cpus
                );
                if !warnings.contains(&w) {
                    warnings.push(w);
                }
            }
            cells.push(Cell {
                index: cells.len() as u32,
                levels,
                platform,
                shape,
                placement,
                workload: workloads[w.as_str()].clone(),
                neighbour,
                reservation,
                threads: level(6).0.parse().ok(),
                instances: level(7).0.parse().unwrap_or(1),
            });
        }
        if !self.errors.is_empty() {
            return Err(SpecErrors(self.errors));
        }
        if cells.is_empty() {
            self.err(
                matrix_span,
                "every cell of the matrix is excluded or impossible: nothing to run",
            );
            return Err(SpecErrors(self.errors));
        }
        let recipe = image_packages.map(|extra| image::recipe(&cells, &extra));
        let image = recipe.as_ref().map_or(image, image::recipe_dir);
        Ok(ExperimentSpec {
            source: self.source.clone(),
            name,
            description: exp.description,
            baseline,
            repetitions,
            order,
            seed,
            duration,
            timeout,
            probe,
            image,
            recipe,
            factors,
            cells,
            dropped,
            warnings,
        })
    }

    fn repetitions(&mut self, raw: Option<Spanned<raw::RawRepetitions>>) -> Repetitions {
        let mut r = Repetitions::default();
        let Some(raw) = raw else { return r };
        let span = raw.span();
        let raw = raw.into_inner();
        let mut count = |v: Option<Spanned<i64>>, name: &str, least: i64| -> Option<u32> {
            let v = v?;
            match u32::try_from(*v.get_ref()) {
                Ok(n) if i64::from(n) >= least => Some(n),
                _ => {
                    self.errors.push(self.source.error(
                        Some(v.span()),
                        format!("repetitions.{name} must be a whole number ≥ {least}"),
                    ));
                    None
                }
            }
        };
        if let Some(w) = count(raw.warmup, "warmup", 0) {
            r.warmup = w;
        }
        if let Some(m) = count(raw.min, "min", 2) {
            r.min = m;
            r.max = r.max.max(m);
        }
        if let Some(m) = count(raw.max, "max", 2) {
            r.max = m;
        }
        if let Some(cv) = raw.target_cv {
            let v = *cv.get_ref();
            if v.is_finite() && v > 0.0 && v < 1.0 {
                r.target_cv = v;
            } else {
                self.err(
                    cv.span(),
                    "repetitions.target_cv must be a fraction between 0 and 1, e.g. 0.05 for 5%",
                );
            }
        }
        if r.max < r.min {
            self.err(
                span,
                format!(
                    "repetitions.max ({}) is below repetitions.min ({})",
                    r.max, r.min
                ),
            );
        }
        r
    }

    /// Levels of a factor with their spans; `explicit` says whether the spec listed them.
    fn levels(
        &mut self,
        factor: &str,
        raw: Levels,
        default: &[&str],
        check: impl Fn(&str) -> Result<(), String>,
    ) -> Vec<Level> {
        let Some(raw) = raw else {
            return default
                .iter()
                .map(|d| (d.to_string(), 0..0, false))
                .collect();
        };
        if raw.get_ref().is_empty() {
            self.err(
                raw.span(),
                format!("matrix.{factor} is empty: list at least one level or leave it out"),
            );
        }
        let mut out: Vec<Level> = Vec::new();
        for level in raw.into_inner() {
            let text = level.get_ref().text();
            if let Err(message) = check(&text) {
                self.err(level.span(), message);
            } else if out.iter().any(|(l, _, _)| *l == text) {
                self.err(level.span(), format!("{factor} `{text}` is listed twice"));
            } else {
                out.push((text, level.span(), true));
            }
        }
        out
    }

    fn platform(&mut self, name: String, raw: Spanned<raw::RawPlatform>) -> Option<PlatformDef> {
        let raw = raw.into_inner();
        let kind = match PlatformKind::parse(raw.engine.get_ref()) {
            Ok(k) => k,
            Err(e) => {
                self.err(raw.engine.span(), format!("platform.{name}.engine: {e}"));
                return None;
            }
        };
        let mut def = PlatformDef::new(kind);
        def.name = name.clone();
        match (&raw.accel, kind.is_vm()) {
            (None, true) => {
                self.err(
                    raw.engine.span(),
                    format!("platform.{name}: a `{kind}` platform needs `accel = \"kvm\"` or `accel = \"tcg\"`, so that its rows say whether they measure virtualisation or emulation (`isolab env` says which works here)"),
                );
                return None;
            }
            (Some(a), true) => match crate::platform::Accel::parse(a.get_ref()) {
                Some(accel) => def.accel = Some(accel),
                None => {
                    self.err(
                        a.span(),
                        format!("unknown accel `{}`: expected `kvm` or `tcg`", a.get_ref()),
                    );
                    return None;
                }
            },
            (Some(a), false) => {
                self.err(
                    a.span(),
                    format!(
                        "platform.{name}: `accel` applies to the vm engines only, not `{kind}`"
                    ),
                );
                return None;
            }
            (None, false) => {}
        }
        if let Some(n) = raw.network {
            match Network::parse(n.get_ref()) {
                Some(net) if !kind.networks().contains(&net) => {
                    let offered: Vec<&str> = kind.networks().iter().map(|n| n.as_str()).collect();
                    self.err(
                        n.span(),
                        format!(
                            "platform.{name}: engine `{kind}` offers network {} only, not `{}`",
                            offered.join(", "),
                            net.as_str()
                        ),
                    );
                    return None;
                }
                Some(net) => def.network = net,
                None => {
                    self.err(
                        n.span(),
                        format!(
                            "unknown network `{}`: expected `none`, `bridge` or `host`",
                            n.get_ref()
                        ),
                    );
                    return None;
                }
            }
        }
        Some(def)
    }

    fn shape(&mut self, name: String, raw: Spanned<raw::RawShape>) -> Option<Shape> {
        let raw = raw.into_inner();
        let before = self.errors.len();
        let cpus = match u32::try_from(*raw.cpus.get_ref()) {
            Ok(c) if c >= 1 => c,
            _ => {
                self.err(
                    raw.cpus.span(),
                    format!("shape.{name}.cpus must be a whole number ≥ 1"),
                );
                1
            }
        };
        let mut bytes = |v: Option<Spanned<String>>, what: &str| -> Option<u64> {
            let v = v?;
            match v.get_ref().parse::<Bytes>() {
                Ok(b) => Some(b.0),
                Err(e) => {
                    self.errors.push(self.source.error(
                        Some(v.span()),
                        format!("shape.{name}.{what}: {e}; expected e.g. \"512MiB\" or \"4GiB\""),
                    ));
                    None
                }
            }
        };
        let memory = bytes(raw.memory, "memory").map(Bytes);
        let io_read_bps = bytes(raw.io_read_bps, "io_read_bps");
        let io_write_bps = bytes(raw.io_write_bps, "io_write_bps");
        let pids = raw.pids.and_then(|p| match u64::try_from(*p.get_ref()) {
            Ok(v) if v >= 1 => Some(v),
            _ => {
                self.err(
                    p.span(),
                    format!("shape.{name}.pids must be a whole number ≥ 1"),
                );
                None
            }
        });
        (self.errors.len() == before).then_some(Shape {
            name,
            cpus,
            memory,
            pids,
            io_read_bps,
            io_write_bps,
        })
    }
}

/// Turns a spec's text into an A/A calibration design: the same matrix with a
/// `replica = ["a", "b"]` factor, so that every configuration runs twice, interleaved,
/// and the name suffixed with `-calibration`. Any A/B difference found between the
/// replicas is noise, by construction.
pub fn aa_design(source: &Source) -> Result<Source, SpecErrors> {
    let mut doc: toml::Table = source.text.parse().map_err(|e: toml::de::Error| {
        SpecErrors(vec![source.error(e.span(), e.message().trim().to_owned())])
    })?;
    let missing = |what: &str| SpecErrors(vec![source.error(None, format!("missing {what}"))]);
    let experiment = doc
        .get_mut("experiment")
        .and_then(|e| e.as_table_mut())
        .ok_or_else(|| missing("[experiment]"))?;
    let name = experiment
        .get("name")
        .and_then(|n| n.as_str())
        .unwrap_or("experiment")
        .to_owned();
    experiment.insert(
        "name".into(),
        toml::Value::String(format!("{name}-calibration")),
    );
    experiment.insert(
        "baseline".into(),
        toml::Value::Table(toml::Table::from_iter([(
            "replica".to_owned(),
            toml::Value::String("a".into()),
        )])),
    );
    let matrix = doc
        .get_mut("matrix")
        .and_then(|m| m.as_table_mut())
        .ok_or_else(|| missing("[matrix]"))?;
    if matrix.contains_key("replica") {
        return Err(SpecErrors(vec![source.error(
            None,
            "the spec already varies `replica`: calibrate adds that factor itself",
        )]));
    }
    matrix.insert(
        "replica".into(),
        toml::Value::Array(vec![
            toml::Value::String("a".into()),
            toml::Value::String("b".into()),
        ]),
    );
    let text = toml::to_string(&doc).map_err(|e| {
        SpecErrors(vec![
            source.error(None, format!("cannot write the calibration spec: {e}"))
        ])
    })?;
    Ok(Source::new(
        format!("A/A calibration of {}", source.name),
        format!(
            "# A/A calibration design generated by `isolab calibrate` from {}\n{text}",
            source.name
        ),
    ))
}

fn default_baseline(factors: &[(String, Vec<String>)]) -> Vec<(String, String)> {
    // Only a factor with more than one level can hold a baseline to compare against.
    let has = |f: &str, l: &str| {
        factors
            .iter()
            .any(|(ff, ls)| ff == f && ls.len() > 1 && ls.iter().any(|x| x == l))
    };
    if has("neighbour", "none") {
        // An isolation experiment: each cell against itself without a neighbour.
        vec![("neighbour".into(), "none".into())]
    } else if has("platform", "host") {
        vec![("platform".into(), "host".into())]
    } else if has("placement", "shared") {
        vec![("placement".into(), "shared".into())]
    } else {
        Vec::new()
    }
}

fn list(items: &[String]) -> String {
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
