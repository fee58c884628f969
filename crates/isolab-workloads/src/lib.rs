//! The isolab workload catalog: what a benchmark run executes and how its output
//! becomes metrics.
//!
//! This crate is pure code: it never spawns a process. The lab renders a
//! workload's command templates into argv vectors, runs them, and hands what a
//! finished command left back to [`parse`].
//!
//! - [`WorkloadDef`] describes a workload: its command template and optional
//!   `prepare`, `cleanup` and background `server` templates, the [`ParserKind`]
//!   that reads its output, its primary metric (whose CV decides when a cell is
//!   stable), whether it needs a real disk, which tools it needs and which
//!   Debian packages provide them inside the image (`packages`).
//!   [`catalog()`] lists the built-ins (sysbench, fio, stress-ng, iperf3) and
//!   [`builtin`] finds one by name; a spec's `[workload.NAME]` tables build
//!   their own [`WorkloadDef`]s.
//! - [`render`] turns a template into an argv **without a shell**: the template
//!   is split into words with shell quoting rules, then `{placeholders}`
//!   ([`PLACEHOLDERS`]) are replaced per word with values from [`Params`].
//!   [`validate`] checks a template without values.
//! - [`parse`] turns a [`RunOutput`] (stdout, stderr, working directory, wall
//!   time) into [`Metric`]s, each with a unit and a
//!   [`Direction`]. Parsers read the tools'
//!   machine-readable output wherever it exists (fio's JSON, stress-ng's YAML
//!   report, iperf3's JSON); sysbench 1.0 has only text, whose fixed report
//!   sections are read defensively. A [`ParseError`] names the tool, what was
//!   missing or unparsable and quotes a short excerpt of the output.
//!
//! Every command, including `prepare` and `cleanup`, is meant to run with its
//! current directory set to `{workdir}`; the built-ins do not rely on it (they
//! pass `{workdir}` explicitly, through `env --chdir` for sysbench fileio,
//! which has no directory option).
//!
//! Service workloads are driven by a real load generator: [`load`] turns a
//! [`load::LoadSpec`] (generator, named requests, [`load::LoadProfile`]) into the
//! files and commands to run ([`load::invocation`]) and reads what the generator wrote
//! into totals and per-second intervals ([`load::parse_load`]).
//!
//! The modules document the details: [`template`] the template language,
//! [`builtins`] every built-in, and [`parsers`]' submodules the metrics each
//! tool's parser yields (names, units, directions, sources).

pub mod asset;
pub mod builtins;
mod definition;
pub mod load;
pub mod metrics;
pub mod nosql;
pub mod olap;
pub mod oltp;
pub mod parsers;
pub mod stack;
pub mod stacks;
pub mod template;

pub use asset::{AssetDef, RenderedAsset};
pub use builtins::{builtin, catalog};
pub use definition::{RenderedWorkload, Work, WorkloadDef};
pub use metrics::{declared_metrics, MetricInfo};
pub use parsers::{measured_time, parse, ParseError, UnknownParser, STRESS_NG_REPORT};
pub use stack::{ComponentDef, FileTemplate, LoadDef, Measure, Ready, ShapeScope, StackDef};
pub use template::{
    endpoint_placeholder, endpoints_used, render, render_text, validate, Endpoint, Params,
    TemplateError, PLACEHOLDERS,
};

use isolab_stats::Direction;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

/// One measured value of a run: name, unit, direction and value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// snake_case name, unique within one run's metrics (e.g. `events_per_second`).
    pub name: String,
    /// Unit string (e.g. `events/s`, `MiB/s`, `ms`, `s`, `IOPS`, `KiB/s`, `Gbit/s`, `bogo-ops/s`).
    pub unit: String,
    /// Whether lower or higher values are better.
    pub direction: Direction,
    /// The value, in `unit`.
    pub value: f64,
}

impl Metric {
    /// A metric from its parts.
    pub fn new(
        name: impl Into<String>,
        unit: impl Into<String>,
        direction: Direction,
        value: f64,
    ) -> Self {
        Metric {
            name: name.into(),
            unit: unit.into(),
            direction,
            value,
        }
    }
}

/// Which parser reads a workload's output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ParserKind {
    /// sysbench 1.0 text report (any test: cpu, memory, threads, mutex, fileio).
    Sysbench,
    /// fio `--output-format=json` on stdout.
    Fio,
    /// stress-ng `--metrics --yaml {workdir}/stress-ng.yaml` report file.
    StressNg,
    /// iperf3 client `-J` on stdout.
    Iperf3,
    /// HPC Challenge's summary in `{workdir}/hpccoutf.txt` (HPL, STREAM, …).
    Hpcc,
    /// ioping `-J` on stdout.
    Ioping,
    /// sockperf ping-pong's full log in `{workdir}/sockperf.csv`.
    Sockperf,
    /// ffmpeg `-benchmark` on stderr and `-progress {workdir}/ffmpeg-progress.txt`.
    Ffmpeg,
    /// pgbench `--log` per-transaction logs in `{workdir}/pgbench/` (per-script metrics).
    Pgbench,
    /// sysbench OLTP through isolab's wrapper: JSON on stdout, latencies in `{workdir}/sysbench/`.
    SysbenchOltp,
    /// redis-benchmark `--csv` on stdout (per-command metrics).
    RedisBenchmark,
    /// latte's JSON report in `{workdir}/cassandra-latte/latte.json` (per-function metrics).
    Latte,
    /// A `{"metrics": [...]}` object on stdout (see [`parsers::json`]).
    Json,
    /// A service stack's load generator (see [`load::parse_load`]): no command output.
    Load,
    /// No parsing: the wall-clock time of the command (`wall_time`, s, lower).
    Time,
}

impl ParserKind {
    /// Every parser kind, in declaration order.
    pub const ALL: [ParserKind; 15] = [
        ParserKind::Sysbench,
        ParserKind::Fio,
        ParserKind::StressNg,
        ParserKind::Iperf3,
        ParserKind::Hpcc,
        ParserKind::Ioping,
        ParserKind::Sockperf,
        ParserKind::Ffmpeg,
        ParserKind::Pgbench,
        ParserKind::SysbenchOltp,
        ParserKind::RedisBenchmark,
        ParserKind::Latte,
        ParserKind::Json,
        ParserKind::Load,
        ParserKind::Time,
    ];

    /// The word used in specs and the store: `sysbench`, `fio`, `stress-ng`, `iperf3`,
    /// `hpcc`, `ioping`, `sockperf`, `ffmpeg`, `pgbench`, `sysbench-oltp`, `redis-benchmark`, `latte`, `json`, `load` or `time`.
    pub fn as_str(self) -> &'static str {
        match self {
            ParserKind::Sysbench => "sysbench",
            ParserKind::Fio => "fio",
            ParserKind::StressNg => "stress-ng",
            ParserKind::Iperf3 => "iperf3",
            ParserKind::Hpcc => "hpcc",
            ParserKind::Ioping => "ioping",
            ParserKind::Sockperf => "sockperf",
            ParserKind::Ffmpeg => "ffmpeg",
            ParserKind::Pgbench => "pgbench",
            ParserKind::SysbenchOltp => "sysbench-oltp",
            ParserKind::RedisBenchmark => "redis-benchmark",
            ParserKind::Latte => "latte",
            ParserKind::Json => "json",
            ParserKind::Load => "load",
            ParserKind::Time => "time",
        }
    }
}

impl fmt::Display for ParserKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ParserKind {
    type Err = UnknownParser;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ParserKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownParser(s.to_owned()))
    }
}

/// What a finished command left: its output and its per-run working directory
/// (for tools that write a report file).
#[derive(Clone, Copy, Debug)]
pub struct RunOutput<'a> {
    /// Everything the command printed on stdout.
    pub stdout: &'a str,
    /// Everything the command printed on stderr.
    pub stderr: &'a str,
    /// The run's working directory (`{workdir}` of its templates).
    pub workdir: &'a Path,
    /// Wall-clock time of the measured command.
    pub wall: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parser_kind_round_trips_through_its_word() {
        for k in ParserKind::ALL {
            assert_eq!(k.as_str().parse::<ParserKind>().unwrap(), k);
            assert_eq!(k.to_string(), k.as_str());
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
            assert_eq!(serde_json::from_str::<ParserKind>(&json).unwrap(), k);
        }
        let err = "stressng".parse::<ParserKind>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown parser `stressng`: expected one of sysbench, fio, stress-ng, iperf3, hpcc, ioping, sockperf, ffmpeg, pgbench, sysbench-oltp, redis-benchmark, latte, json, load, time"
        );
    }

    #[test]
    fn time_parser_gives_wall_time_only() {
        let out = RunOutput {
            stdout: "anything",
            stderr: "",
            workdir: Path::new("/nonexistent"),
            wall: Duration::from_millis(1500),
        };
        assert_eq!(
            parse(ParserKind::Time, &out).unwrap(),
            [Metric::new("wall_time", "s", Direction::Lower, 1.5)]
        );
    }
}
