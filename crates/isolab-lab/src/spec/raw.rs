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
    pub probe_threshold: Option<Spanned<String>>,
    #[serde(default)]
    pub impossible: Option<Spanned<String>>,
    #[serde(default)]
    pub image: Option<Spanned<String>>,
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
    pub threads: Option<Spanned<Vec<Spanned<RawLevel>>>>,
    #[serde(default)]
    pub instances: Option<Spanned<Vec<Spanned<RawLevel>>>>,
    /// Labels of repeated copies of the same configuration (A/A designs).
    #[serde(default)]
    pub replica: Option<Spanned<Vec<Spanned<RawLevel>>>>,
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

/// `[shape.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawShape {
    pub cpus: Spanned<i64>,
    #[serde(default)]
    pub memory: Option<Spanned<String>>,
    #[serde(default)]
    pub pids: Option<Spanned<i64>>,
    #[serde(default)]
    pub io_read_bps: Option<Spanned<String>>,
    #[serde(default)]
    pub io_write_bps: Option<Spanned<String>>,
}

/// `[workload.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWorkload {
    pub command: Spanned<String>,
    pub parser: Spanned<String>,
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
}
