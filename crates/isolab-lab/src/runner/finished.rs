//! What a finished run produced: the platform's execution with its parsed metrics
//! ([`Done`]), then the run with its status decided ([`FinishedRun`]), and the one
//! conversion into the run the store keeps ([`FinishedRun::into_new_run`]).

use std::time::{Duration, SystemTime};

use isolab_store::{CellId, LoadInterval, MetricValue, NewRun, RunStatus, Series, TelemetrySet};

use isolab_workloads::{load, Measure};

use crate::platform::{Execution, PlatformError};
use crate::spec::Cell;

/// What executing a run's jobs gave: the execution standing for the run, the
/// metrics parsed from it (or why there are none), the limits asked for and read
/// back, and a load generator's result.
pub(super) struct Done {
    pub(super) execution: Execution,
    pub(super) metrics: Result<Vec<MetricValue>, String>,
    pub(super) limits: serde_json::Value,
    /// A load generator's totals and intervals (service stacks measured by a load).
    pub(super) load: Option<isolab_workloads::load::LoadResult>,
}

/// How the error of a run that did not report begins.
pub(super) const DNR_PREFIX: &str = "did not report (DNR): ";

/// A finished run: whether it succeeded and why not, what it measured and what it
/// left to read, as the store keeps it.
#[derive(Debug)]
pub(super) struct FinishedRun {
    pub(super) status: RunStatus,
    /// How the measured command ended; `None` when it never ran.
    pub(super) exit_code: Option<i32>,
    pub(super) wall: Duration,
    pub(super) stdout: String,
    pub(super) stderr: String,
    /// Why it failed.
    pub(super) error: Option<String>,
    /// The limits asked for and read back.
    pub(super) limits: serde_json::Value,
    pub(super) metrics: Vec<MetricValue>,
    pub(super) telemetry: TelemetrySet,
    pub(super) series: Vec<Series>,
    /// A load generator's intervals.
    pub(super) intervals: Vec<LoadInterval>,
    /// Remarks: the disk's, then the execution's.
    pub(super) notes: Vec<String>,
}

impl FinishedRun {
    /// A run whose jobs could not produce an execution (`error`), with `notes`.
    pub(super) fn failed(error: &PlatformError, notes: Vec<String>) -> FinishedRun {
        FinishedRun {
            status: RunStatus::Failed,
            exit_code: None,
            wall: Duration::ZERO,
            stdout: String::new(),
            stderr: String::new(),
            error: Some(error.to_string()),
            limits: serde_json::Value::Null,
            metrics: Vec::new(),
            telemetry: TelemetrySet::new(),
            series: Vec::new(),
            intervals: Vec::new(),
            notes,
        }
    }

    /// A run whose subject ran past its `timeout` beside `neighbour` and was killed:
    /// did not report (seed 001's DNR), an outcome of its cell rather than an error.
    pub(super) fn did_not_report(
        timeout: Duration,
        neighbour: &str,
        notes: Vec<String>,
    ) -> FinishedRun {
        let mut run = FinishedRun::failed(&PlatformError::TimedOut(timeout), notes);
        run.status = RunStatus::DidNotReport;
        // It ran for its whole timeout before it was killed.
        run.wall = timeout;
        run.error = Some(format!(
            "{DNR_PREFIX}beside neighbour `{neighbour}` the subject ran longer than its \
             timeout of {} and was killed",
            humantime::format_duration(timeout)
        ));
        run
    }

    /// The run of `cell` that executed as `done`, with `notes` before the
    /// execution's: failed when its command failed, its output could not be parsed
    /// or has no primary metric.
    pub(super) fn executed(done: Done, cell: &Cell, mut notes: Vec<String>) -> FinishedRun {
        let execution = done.execution;
        notes.extend(execution.notes);
        let (status, error) = match (&done.metrics, execution.exit.success()) {
            // The parser's error quotes the tool's own message (a database's).
            (Err(e), false) => (
                RunStatus::Failed,
                Some(format!("the command ended with {}: {e}", execution.exit)),
            ),
            (Ok(_), false) => (
                RunStatus::Failed,
                Some(format!(
                    "the command ended with {}; see the run's stderr",
                    execution.exit
                )),
            ),
            (Err(e), true) => (RunStatus::Failed, Some(e.clone())),
            (Ok(_), true) => (RunStatus::Ok, None),
        };
        FinishedRun {
            status,
            exit_code: Some(execution.exit.status()),
            wall: execution.wall,
            stdout: execution.stdout,
            stderr: execution.stderr,
            error,
            limits: done.limits,
            metrics: done.metrics.unwrap_or_default(),
            telemetry: execution.telemetry,
            series: execution.series,
            intervals: done
                .load
                .as_ref()
                .map(|r| intervals(r, cell))
                .unwrap_or_default(),
            notes,
        }
        .with_primary(&cell.workload.primary)
    }

    /// The run, failed if it succeeded without its primary metric `primary`.
    fn with_primary(mut self, primary: &str) -> FinishedRun {
        if self.status == RunStatus::Ok && !self.metrics.iter().any(|m| m.name == primary) {
            self.status = RunStatus::Failed;
            self.error = Some(format!(
                "the output has no primary metric `{primary}` (it has: {})",
                self.metrics
                    .iter()
                    .map(|m| m.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        self
    }

    /// The run as the store keeps it: repetition `repetition` (a `warmup` or
    /// counted) of cell `cell` in round `round`, started at `started_at`.
    pub(super) fn into_new_run(
        self,
        cell: CellId,
        repetition: u32,
        warmup: bool,
        round: u32,
        started_at: SystemTime,
    ) -> NewRun {
        NewRun {
            cell,
            repetition,
            warmup,
            round,
            status: self.status,
            exit_code: self.exit_code,
            started_at,
            wall: self.wall,
            stdout: self.stdout,
            stderr: self.stderr,
            error: self.error,
            limits: self.limits,
            metrics: self.metrics,
            telemetry: self.telemetry,
            series: self.series,
            intervals: self.intervals,
            notes: self.notes,
        }
    }
}

/// The load's intervals as the store keeps them: the users of a closed-loop profile
/// where the generator did not report them, the target rate of an open loop.
fn intervals(r: &load::LoadResult, cell: &Cell) -> Vec<isolab_store::LoadInterval> {
    let profile = cell.workload.stack.as_ref().and_then(|s| match &s.measure {
        Measure::Load(l) => Some(&l.spec.profile),
        Measure::Command | Measure::Client => None,
    });
    r.intervals
        .iter()
        .map(|i| {
            let at = Duration::from_secs_f64(i.start_s.max(0.0));
            let lat = i.latency_ms.as_ref();
            isolab_store::LoadInterval {
                request: i.request.clone(),
                start_s: i.start_s,
                users: i.users.or_else(|| profile.and_then(|p| p.users_at(at))),
                target_rate: profile.and_then(|p| p.rate_at(at)),
                requests: i.requests,
                failures: i.failures,
                latency_mean_ms: lat.map(|l| l.mean),
                latency_p50_ms: lat.map(|l| l.p50),
                latency_p90_ms: lat.map(|l| l.p90),
                latency_p99_ms: lat.map(|l| l.p99),
                latency_max_ms: lat.map(|l| l.max),
            }
        })
        .collect()
}
