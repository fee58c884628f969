//! The values the store writes and reads: experiments, cells, runs, interruptions and
//! observations. Plain data, free of any database type, so that every backend shares them.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use isolab_stats::Direction;

/// Identifier of an experiment; shown to users (`isolab report 12`) and never reused.
pub type ExperimentId = i64;
/// Identifier of a cell, unique across the whole store.
pub type CellId = i64;
/// Identifier of a run, unique across the whole store and never reused.
pub type RunId = i64;
/// Identifier of a fleet.
pub type FleetId = i64;

/// Gives a status enum its words: `as_str`, `Display` and a `FromStr` that refuses any
/// other word with [`UnknownStatus`] naming `kind` and listing the words, in order.
macro_rules! status_words {
    (
        $(#[$doc:meta])*
        $status:ident, $kind:literal,
        $first:ident => $first_word:literal
        $(, $variant:ident => $word:literal)* $(,)?
    ) => {
        impl $status {
            $(#[$doc])*
            pub fn as_str(self) -> &'static str {
                match self {
                    $status::$first => $first_word,
                    $($status::$variant => $word,)*
                }
            }
        }

        impl fmt::Display for $status {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $status {
            type Err = UnknownStatus;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $first_word => Ok($status::$first),
                    $($word => Ok($status::$variant),)*
                    other => Err(UnknownStatus {
                        kind: $kind,
                        word: other.to_owned(),
                        expected: concat!("`", $first_word, "`" $(, ", `", $word, "`")*),
                    }),
                }
            }
        }
    };
}

/// A word that is not one of the words of a status enum.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} status `{word}`: expected one of {expected}")]
pub struct UnknownStatus {
    /// Which status: `experiment` or `run`.
    pub kind: &'static str,
    /// The word that was read.
    pub word: String,
    /// The accepted words, for the message.
    pub expected: &'static str,
}

/// Where an experiment stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExperimentStatus {
    /// Runs are being executed (or the process died without saying otherwise).
    Running,
    /// Every cell reached its stopping rule.
    Complete,
    /// Stopped by the user (Ctrl-C, SIGTERM); `isolab run --resume` continues it.
    Interrupted,
    /// Stopped by an error the runner could not get past.
    Failed,
}

status_words! {
    /// The word stored and shown: `running`, `complete`, `interrupted` or `failed`.
    ExperimentStatus, "experiment",
    Running => "running",
    Complete => "complete",
    Interrupted => "interrupted",
    Failed => "failed",
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// The workload succeeded and its output was parsed into metrics.
    Ok,
    /// The workload or its parser failed; the run is kept for the record but not counted.
    Failed,
    /// Did not report (seed 001's DNR): beside a neighbour, the subject ran past its
    /// timeout and was killed. An outcome of its cell, not an error; not counted.
    #[serde(rename = "dnr")]
    DidNotReport,
}

status_words! {
    /// The word stored and shown: `ok`, `failed` or `dnr`.
    RunStatus, "run",
    Ok => "ok",
    Failed => "failed",
    DidNotReport => "dnr",
}

/// An experiment to create, with its cells and the captured environment.
#[derive(Debug, Clone, PartialEq)]
pub struct NewExperiment {
    /// The experiment's name from its spec (several experiments may share it).
    pub name: String,
    /// The spec exactly as read, so the experiment can be reproduced.
    pub spec_toml: String,
    /// Where the spec was read from; `None` for the built-in quick-start.
    pub spec_path: Option<String>,
    /// The seed of the run order shuffle.
    pub seed: u64,
    /// The version of isolab that ran the experiment.
    pub isolab_version: String,
    /// When the experiment was created (stored to the millisecond).
    pub created_at: SystemTime,
    /// The cells of the expanded matrix.
    pub cells: Vec<NewCell>,
    /// The captured host environment, in capture order.
    pub environment: Vec<(String, String)>,
}

/// A cell of a new experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct NewCell {
    /// Position of the cell in the expanded matrix; unique within the experiment.
    pub index: u32,
    /// Canonical key, e.g. `platform=host placement=quota workload=sysbench-cpu`;
    /// unique within the experiment.
    pub key: String,
    /// `(factor, level)` pairs in spec order.
    pub levels: Vec<(String, String)>,
}

/// A stored experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct ExperimentRecord {
    /// Its identifier.
    pub id: ExperimentId,
    /// Its name.
    pub name: String,
    /// The spec exactly as read.
    pub spec_toml: String,
    /// Where the spec was read from.
    pub spec_path: Option<String>,
    /// The seed of the run order shuffle.
    pub seed: u64,
    /// The version of isolab that created it.
    pub isolab_version: String,
    /// When it was created (millisecond precision).
    pub created_at: SystemTime,
    /// When it last left the `running` status (millisecond precision).
    pub finished_at: Option<SystemTime>,
    /// Where it stands.
    pub status: ExperimentStatus,
}

/// One line of `isolab list`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExperimentSummary {
    /// Its identifier.
    pub id: ExperimentId,
    /// Its name.
    pub name: String,
    /// Where it stands.
    pub status: ExperimentStatus,
    /// When it was created.
    pub created_at: SystemTime,
    /// Number of cells.
    pub cells: u32,
    /// Number of counted runs: not warm-ups, status `ok`.
    pub runs: u32,
}

/// A stored cell.
#[derive(Debug, Clone, PartialEq)]
pub struct CellRecord {
    /// Its identifier.
    pub id: CellId,
    /// Position in the expanded matrix.
    pub index: u32,
    /// Canonical key.
    pub key: String,
    /// `(factor, level)` pairs in spec order.
    pub levels: Vec<(String, String)>,
    /// Why the runner stopped repeating this cell, once it did.
    pub stop_reason: Option<String>,
}

/// One metric of one run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MetricValue {
    /// Metric name, e.g. `events_per_s`.
    pub name: String,
    /// Unit, e.g. `1/s`.
    pub unit: String,
    /// Whether lower or higher is better.
    pub direction: Direction,
    /// The observed value (NaN and infinities are kept as they are).
    pub value: f64,
}

/// A time series sampled during a run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Series {
    /// Series name, e.g. `host_cpu_util`.
    pub name: String,
    /// Unit of the values.
    pub unit: String,
    /// `(seconds since run start, value)` points, in sampling order.
    pub points: Vec<(f64, f64)>,
}

/// One second (or interval) of a run's load, for one named request.
///
/// A load generator reports these per named request (a JMeter sampler, a Locust task, a
/// wrk or vegeta target); the store keeps one row per `(run, request, start_s)`. Counts
/// are what completed in the interval; latencies are of the requests that completed in
/// it, `None` when the generator did not report them (or no request completed). A NaN
/// in an optional field is stored, and read back, as `None`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoadInterval {
    /// The named request, e.g. `"home"`.
    pub request: String,
    /// Seconds since the load started (0, 1, 2, …): where the interval begins.
    pub start_s: f64,
    /// Active users (closed-loop profiles) when known.
    pub users: Option<f64>,
    /// Target requests per second (open-loop profiles) when known.
    pub target_rate: Option<f64>,
    /// Requests completed in the interval.
    pub requests: u64,
    /// Of which failed.
    pub failures: u64,
    /// Mean latency (ms) of the requests completed in the interval.
    pub latency_mean_ms: Option<f64>,
    /// Median latency (ms).
    pub latency_p50_ms: Option<f64>,
    /// 90th percentile latency (ms).
    pub latency_p90_ms: Option<f64>,
    /// 99th percentile latency (ms).
    pub latency_p99_ms: Option<f64>,
    /// Largest latency (ms).
    pub latency_max_ms: Option<f64>,
}

impl LoadInterval {
    /// The interval of `request` starting at `start_s` with nothing completed and nothing
    /// measured, to fill in (`LoadInterval { requests: 12, ..LoadInterval::new("home",
    /// 3.0) }`).
    pub fn new(request: impl Into<String>, start_s: f64) -> LoadInterval {
        LoadInterval {
            request: request.into(),
            start_s,
            users: None,
            target_rate: None,
            requests: 0,
            failures: 0,
            latency_mean_ms: None,
            latency_p50_ms: None,
            latency_p90_ms: None,
            latency_p99_ms: None,
            latency_max_ms: None,
        }
    }
}

/// A run to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    /// The cell it executed.
    pub cell: CellId,
    /// Repetition number within the cell (counted separately for warm-ups).
    pub repetition: u32,
    /// Whether it is a warm-up run (stored, never counted).
    pub warmup: bool,
    /// The round of the interleaved order it belongs to.
    pub round: u32,
    /// How it ended.
    pub status: RunStatus,
    /// The workload's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// When it started (stored to the millisecond).
    pub started_at: SystemTime,
    /// Wall-clock duration (stored to the nanosecond).
    pub wall: Duration,
    /// Captured standard output.
    pub stdout: String,
    /// Captured standard error.
    pub stderr: String,
    /// What went wrong, for failed runs.
    pub error: Option<String>,
    /// The limits applied, as read back from the platform.
    pub limits: serde_json::Value,
    /// Parsed metrics, in parser order.
    pub metrics: Vec<MetricValue>,
    /// Scalar telemetry, e.g. [`crate::Telemetry::CpuUsage`] = 1.93, in recorded order.
    pub telemetry: crate::TelemetrySet,
    /// Sampled time series.
    pub series: Vec<Series>,
    /// Per-second (or per-interval) load of a service workload, per named request; empty
    /// for command workloads. `(request, start_s)` must be unique within a run.
    pub intervals: Vec<LoadInterval>,
    /// Free-form notes (e.g. "KVM unavailable, TCG used").
    pub notes: Vec<String>,
}

/// A stored run, without its logs, series and load intervals (see
/// [`crate::Store::run_logs`], [`crate::Store::series`] and [`crate::Store::intervals`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// Its identifier.
    pub id: RunId,
    /// The cell it executed.
    pub cell: CellId,
    /// Repetition number within the cell.
    pub repetition: u32,
    /// Whether it is a warm-up run.
    pub warmup: bool,
    /// The round it belongs to.
    pub round: u32,
    /// How it ended.
    pub status: RunStatus,
    /// The workload's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// When it started (millisecond precision).
    pub started_at: SystemTime,
    /// Wall-clock duration.
    pub wall: Duration,
    /// What went wrong, for failed runs.
    pub error: Option<String>,
    /// The limits applied, shared by the runs read with the same stored limits (the runs
    /// of a cell store the same).
    pub limits: std::sync::Arc<serde_json::Value>,
    /// Parsed metrics, in parser order.
    pub metrics: Vec<MetricValue>,
    /// Scalar telemetry, in recorded order, with the stored names as written (names this
    /// version does not know included).
    pub telemetry: crate::TelemetrySet,
    /// Notes, in recorded order.
    pub notes: Vec<String>,
}

impl RunRecord {
    /// Whether the run counts towards its cell's statistics: not a warm-up and status `ok`.
    pub fn is_counted(&self) -> bool {
        !self.warmup && self.status == RunStatus::Ok
    }
}

/// An interrupted or killed attempt at a run, kept for the record; it is not a run and
/// does not occupy its `(cell, warmup, repetition)` slot.
#[derive(Debug, Clone, PartialEq)]
pub struct Interruption {
    /// The experiment.
    pub experiment: ExperimentId,
    /// The cell whose run was interrupted.
    pub cell: CellId,
    /// The repetition that was attempted.
    pub repetition: u32,
    /// Whether the attempt was a warm-up.
    pub warmup: bool,
    /// When it was interrupted (millisecond precision).
    pub at: SystemTime,
    /// Why, e.g. `SIGINT` or `timeout after 600 s`.
    pub reason: String,
}

/// One metric value of one counted run, with its cell's levels: a row of `isolab export`.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// The experiment.
    pub experiment: ExperimentId,
    /// The run.
    pub run: RunId,
    /// The cell's position in the matrix.
    pub cell_index: u32,
    /// The cell's `(factor, level)` pairs in spec order.
    pub levels: Vec<(String, String)>,
    /// The run's repetition number.
    pub repetition: u32,
    /// Metric name.
    pub metric: String,
    /// Metric unit.
    pub unit: String,
    /// Whether lower or higher is better.
    pub direction: Direction,
    /// The value.
    pub value: f64,
}

/// How long runs of one platform and workload took on this store's host, for
/// estimates ([`crate::Store::run_pace`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Pace {
    /// The `platform` level of their cells (`host` when the matrix did not vary it).
    pub platform: String,
    /// The `workload` level of their cells.
    pub workload: String,
    /// The median time from one run's start to the next run's start in the same
    /// experiment: the run with its setup and teardown.
    pub per_run: std::time::Duration,
    /// How many runs it is the median of.
    pub runs: usize,
}

/// One load interval of one counted run, with its cell's levels: a row of `isolab export
/// --series`.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalObservation {
    /// The experiment.
    pub experiment: ExperimentId,
    /// The run.
    pub run: RunId,
    /// The cell's position in the matrix.
    pub cell_index: u32,
    /// The cell's `(factor, level)` pairs in spec order.
    pub levels: Vec<(String, String)>,
    /// The run's repetition number.
    pub repetition: u32,
    /// The interval.
    pub interval: LoadInterval,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn experiment_status_round_trips_through_its_word() {
        for s in [
            ExperimentStatus::Running,
            ExperimentStatus::Complete,
            ExperimentStatus::Interrupted,
            ExperimentStatus::Failed,
        ] {
            assert_eq!(s.as_str().parse::<ExperimentStatus>().unwrap(), s);
        }
        let err = "done".parse::<ExperimentStatus>().unwrap_err();
        assert!(err.to_string().contains("`done`"), "{err}");
        assert!(err.to_string().contains("`complete`"), "{err}");
    }

    #[test]
    fn run_status_round_trips_through_its_word() {
        for s in [RunStatus::Ok, RunStatus::Failed, RunStatus::DidNotReport] {
            assert_eq!(s.as_str().parse::<RunStatus>().unwrap(), s);
        }
        assert!("OK".parse::<RunStatus>().is_err());
    }

    #[test]
    fn unknown_words_list_the_known_ones() {
        assert_eq!(
            "done".parse::<ExperimentStatus>().unwrap_err().to_string(),
            "unknown experiment status `done`: expected one of \
             `running`, `complete`, `interrupted`, `failed`"
        );
        assert_eq!(
            "OK".parse::<RunStatus>().unwrap_err(),
            UnknownStatus {
                kind: "run",
                word: "OK".into(),
                expected: "`ok`, `failed`, `dnr`",
            }
        );
        assert_eq!(ExperimentStatus::Interrupted.to_string(), "interrupted");
    }

    #[test]
    fn statuses_serialize_as_their_words() {
        assert_eq!(
            serde_json::to_string(&ExperimentStatus::Interrupted).unwrap(),
            "\"interrupted\""
        );
        assert_eq!(serde_json::to_string(&RunStatus::Ok).unwrap(), "\"ok\"");
        assert_eq!(
            serde_json::to_string(&RunStatus::DidNotReport).unwrap(),
            "\"dnr\""
        );
    }
}
