//! The spec as written: serde structures that keep the span of every value, so that
//! validation can point at the offending line and column.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSpec {
    pub experiment: Spanned<RawExperiment>,
    #[serde(default)]
    pub matrix: Option<Spanned<RawMatrix>>,
    #[serde(default)]
    pub shape: BTreeMap<String, Spanned<RawShape>>,
    #[serde(default)]
    pub workload: BTreeMap<String, Spanned<RawWorkload>>,
    #[serde(default)]
    pub platform: BTreeMap<String, Spanned<RawPlatform>>,
    #[serde(default)]
    pub image: Option<Spanned<RawImage>>,
    #[serde(default)]
    pub storage: Option<Spanned<RawStorage>>,
}

/// `[storage]`: the backing directories, size and stripes of the lab's block devices.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStorage {
    #[serde(default)]
    pub backing: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub size: Option<Spanned<String>>,
    #[serde(default)]
    pub stripes: Option<Spanned<i64>>,
    #[serde(default)]
    pub striping: Option<Spanned<String>>,
}

/// `[image]`: what the experiment's image recipe adds to its workloads' packages.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawImage {
    #[serde(default)]
    pub packages: Vec<Spanned<String>>,
}

/// `[platform.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPlatform {
    pub engine: Spanned<String>,
    #[serde(default)]
    pub network: Option<Spanned<String>>,
    #[serde(default)]
    pub accel: Option<Spanned<String>>,
    #[serde(default)]
    pub stack_guests: Option<Spanned<String>>,
    #[serde(default)]
    pub guest_shape: Option<Spanned<String>>,
    #[serde(default)]
    pub disk_cache: Option<Spanned<String>>,
}

/// `[experiment]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawExperiment {
    pub name: Spanned<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub baseline: Option<Spanned<BTreeMap<String, Spanned<RawLevel>>>>,
    #[serde(default)]
    pub repetitions: Option<Spanned<RawRepetitions>>,
    #[serde(default)]
    pub order: Option<Spanned<String>>,
    #[serde(default)]
    pub seed: Option<Spanned<i64>>,
    #[serde(default)]
    pub duration: Option<Spanned<String>>,
    #[serde(default)]
    pub timeout: Option<Spanned<String>>,
    #[serde(default)]
    pub probe_threshold: Option<Spanned<String>>,
    #[serde(default)]
    pub impossible: Option<Spanned<String>>,
    #[serde(default)]
    pub image: Option<Spanned<String>>,
    #[serde(default)]
    pub noise: Option<Spanned<f64>>,
}

/// `repetitions = { warmup, min, max, target_cv }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRepetitions {
    #[serde(default)]
    pub warmup: Option<Spanned<i64>>,
    #[serde(default)]
    pub min: Option<Spanned<i64>>,
    #[serde(default)]
    pub max: Option<Spanned<i64>>,
    #[serde(default)]
    pub target_cv: Option<Spanned<f64>>,
}

/// `[matrix]`: one list of levels per factor, and `exclude`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMatrix {
    #[serde(default)]
    pub platform: Option<Spanned<Vec<Spanned<RawLevel>>>>,
    #[serde(default)]
    pub shape: Option<Spanned<Vec<Spanned<RawLevel>>>>,
    #[serde(default)]
    pub placement: Option<Spanned<Vec<Spanned<RawLevel>>>>,
    #[serde(default)]
    pub workload: Option<Spanned<Vec<Spanned<RawLevel>>>>,
    #[serde(default)]
    pub neighbour: Option<Spanned<Vec<Spanned<RawLevel>>>>,
    #[serde(default)]
    pub reservation: Option<Spanned<Vec<Spanned<RawLevel>>>>,
    #[serde(default)]
    pub host_cpus: Option<Spanned<Vec<Spanned<RawLevel>>>>,
    #[serde(default)]
    pub threads: Option<Spanned<Vec<Spanned<RawLevel>>>>,
    #[serde(default)]
    pub instances: Option<Spanned<Vec<Spanned<RawLevel>>>>,
    /// Copies of the workload started together in one instance.
    #[serde(default)]
    pub copies: Option<Spanned<Vec<Spanned<RawLevel>>>>,
    /// Labels of repeated copies of the same configuration (A/A designs).
    #[serde(default)]
    pub replica: Option<Spanned<Vec<Spanned<RawLevel>>>>,
    /// Where the working directory lives (`bind`, `layer`, `image`, …).
    #[serde(default)]
    pub storage: Option<Spanned<Vec<Spanned<RawLevel>>>>,
    /// The guest OS of VM platforms (`bookworm`, `bookworm-backports`, `trixie`).
    #[serde(default)]
    pub guest: Option<Spanned<Vec<Spanned<RawLevel>>>>,
    #[serde(default)]
    pub exclude: Vec<Spanned<BTreeMap<String, Spanned<RawLevel>>>>,
}

/// A level as written: a string, or a whole number (for numeric factors).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawLevel {
    Text(String),
    Number(i64),
}

impl RawLevel {
    /// The level's canonical text.
    pub fn text(&self) -> String {
        match self {
            RawLevel::Text(s) => s.clone(),
            RawLevel::Number(n) => n.to_string(),
        }
    }
}

/// A shape's `cpus` as written: `2`, `0.5` or `"1500m"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawCpus {
    Whole(i64),
    Fraction(f64),
    Text(String),
}

/// `[shape.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawShape {
    pub cpus: Spanned<RawCpus>,
    #[serde(default)]
    pub cpu_period: Option<Spanned<String>>,
    #[serde(default)]
    pub memory: Option<Spanned<String>>,
    #[serde(default)]
    pub pids: Option<Spanned<i64>>,
    #[serde(default)]
    pub io_read_bps: Option<Spanned<String>>,
    #[serde(default)]
    pub io_write_bps: Option<Spanned<String>>,
}

/// `[workload.NAME]`: a command, or a service stack (`[[workload.NAME.component]]`,
/// measured by `[workload.NAME.load]` or by the command).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWorkload {
    #[serde(default)]
    pub command: Option<Spanned<String>>,
    #[serde(default)]
    pub parser: Option<Spanned<String>>,
    #[serde(default)]
    pub primary: Option<Spanned<String>>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub prepare: Option<Spanned<String>>,
    #[serde(default)]
    pub cleanup: Option<Spanned<String>>,
    #[serde(default)]
    pub server: Option<Spanned<String>>,
    #[serde(default)]
    pub uses_disk: bool,
    #[serde(default)]
    pub tools: Vec<String>,
    /// A built-in stack whose components and data load this workload takes.
    #[serde(default)]
    pub stack: Option<Spanned<String>>,
    /// The stack's components, in start order.
    #[serde(default)]
    pub component: Vec<Spanned<RawComponent>>,
    /// `component` (each component gets the shape, the default) or `stack`.
    #[serde(default)]
    pub shape_applies: Option<Spanned<String>>,
    #[serde(default)]
    pub data_load: Option<Spanned<String>>,
    /// What the data load makes, under the working directory: made once per
    /// platform, workload and shape and copied into each run.
    #[serde(default)]
    pub data_paths: Option<Spanned<Vec<String>>>,
    /// A tuned built-in database workload: load its data once per platform, workload
    /// and shape instead of in every run.
    #[serde(default)]
    pub keep_data: Option<Spanned<bool>>,
    #[serde(default)]
    pub load: Option<Spanned<RawLoad>>,
    /// Where a stack's measured `command` runs: `"platform"` (the default) or
    /// `"host"` (outside the platform's limits, as a load generator).
    #[serde(default)]
    pub client: Option<Spanned<String>>,
    /// Debian packages the workload needs in the image.
    #[serde(default)]
    pub packages: Vec<Spanned<String>>,
    /// Relative path → contents (with `@NAME@` placeholders), written into the
    /// run's working directory before `prepare`.
    #[serde(default)]
    pub files: BTreeMap<String, Spanned<String>>,
    /// The built-in this table tunes (its own name when that is a built-in's).
    #[serde(default)]
    pub from: Option<Spanned<String>>,
    /// The amount of fixed work (`{work}`).
    #[serde(default)]
    pub work: Option<Spanned<i64>>,
}

/// `[[workload.NAME.component]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawComponent {
    pub name: Spanned<String>,
    pub command: Spanned<String>,
    #[serde(default)]
    pub prepare: Option<Spanned<String>>,
    /// Relative path → contents (with `@NAME@` placeholders).
    #[serde(default)]
    pub files: BTreeMap<String, Spanned<String>>,
    /// `"tcp"`, `{ http = "/path", status = 200 }` or `{ command = "..." }`.
    #[serde(default)]
    pub ready: Option<Spanned<RawReady>>,
    #[serde(default)]
    pub ready_timeout: Option<Spanned<String>>,
}

/// A readiness check as written.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawReady {
    Word(String),
    Check(RawReadyCheck),
}

/// `{ http = "/path", status = 200 }` or `{ command = "..." }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawReadyCheck {
    #[serde(default)]
    pub http: Option<String>,
    #[serde(default)]
    pub status: Option<i64>,
    #[serde(default)]
    pub command: Option<String>,
}

/// `[workload.NAME.load]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLoad {
    pub generator: Spanned<String>,
    pub target: Spanned<String>,
    #[serde(default)]
    pub requests: Vec<Spanned<RawRequest>>,
    pub profile: Spanned<RawProfile>,
    #[serde(default)]
    pub timeout: Option<Spanned<String>>,
}

/// `{ name = "home", path = "/" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRequest {
    pub name: String,
    pub path: String,
    #[serde(default)]
    pub method: Option<String>,
}

/// A load profile: exactly one of `users`, `ramp`, `rate`, `steps`, `simultaneous`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProfile {
    #[serde(default)]
    pub users: Option<i64>,
    #[serde(default)]
    pub duration: Option<String>,
    /// `[from, to]` users.
    #[serde(default)]
    pub ramp: Option<Vec<i64>>,
    #[serde(default)]
    pub over: Option<String>,
    #[serde(default)]
    pub hold: Option<String>,
    #[serde(default)]
    pub rate: Option<f64>,
    /// `[[rate, "duration"], ...]`.
    #[serde(default)]
    pub steps: Option<Vec<(f64, String)>>,
    #[serde(default)]
    pub simultaneous: Option<i64>,
}
