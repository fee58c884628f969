//! The instances of a run: their jobs executed together, each one's measurement
//! window, how much they overlapped, and their metrics, logs and telemetry taken
//! together as the run's.

use std::time::{Duration, Instant};

use isolab_store::{MetricValue, Telemetry};
use isolab_workloads::WorkloadDef;

use super::job::{output, parse_metrics};
use super::{tail_chars, Runner};
use crate::platform::{Execution, Job, PlatformError};

impl Runner<'_> {
    /// Executes `jobs`, one per instance, together; the first interruption, else
    /// the first failure, is the error.
    pub(super) fn execute_jobs(&self, jobs: &[Job]) -> Result<Vec<Execution>, PlatformError> {
        let mut executions = if jobs.len() == 1 {
            vec![self.platform.execute(&jobs[0], self.interrupt)]
        } else {
            self.platform.execute_all(jobs, self.interrupt)
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
        executions.into_iter().collect()
    }
}

/// Each instance's measurement window: the span its tool measured its rates over,
/// which ends when the instance exits (its start-up, seconds for a container among
/// 128 starting at once, is not part of it). None for a single instance, whose
/// metrics are taken as they are (so its output is parsed once).
pub(super) fn measurement_windows(
    w: &WorkloadDef,
    executions: &[Execution],
    jobs: &[Job],
) -> Vec<(Instant, Duration)> {
    if executions.len() <= 1 {
        return Vec::new();
    }
    executions
        .iter()
        .zip(jobs)
        .map(|(e, job)| {
            let measured = isolab_workloads::measured_time(w.parser, &output(e, job));
            measurement_window(e.started, e.wall, measured)
        })
        .collect()
}

/// The run's metrics: each instance's by `w`'s parser, aggregated over their
/// measurement `windows` ([`aggregate_instances`]); the first that cannot be
/// parsed says why there are none.
pub(super) fn instances_metrics(
    w: &WorkloadDef,
    executions: &[Execution],
    jobs: &[Job],
    windows: &[(Instant, Duration)],
) -> Result<Vec<MetricValue>, String> {
    executions
        .iter()
        .zip(jobs)
        .map(|(e, job)| parse_metrics(w, e, job))
        .collect::<Result<Vec<Vec<MetricValue>>, String>>()
        .map(|per_instance| aggregate_instances(&per_instance, windows))
}

/// The instances' executions as the run's: the first instance's logs and telemetry
/// stand for the run, with the instance count, how much their measurement
/// `windows` overlapped, the longest wall time and every failure and note.
pub(super) fn merge_instances(
    executions: Vec<Execution>,
    windows: &[(Instant, Duration)],
) -> Result<Execution, PlatformError> {
    let mut executions = executions.into_iter();
    let mut execution = executions.next().ok_or(PlatformError::Interrupted)?;
    let rest: Vec<Execution> = executions.collect();
    if rest.is_empty() {
        return Ok(execution);
    }
    let n = rest.len() + 1;
    execution.telemetry.push(Telemetry::Instances, n as f64);
    let overlap = instances_overlap(windows);
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
    Ok(execution)
}

/// The window over which an instance that started at `started` and ran for `wall`
/// measured its rates: the last `measured` of its run (the whole run when its tool
/// does not say, or says more).
pub fn measurement_window(
    started: Instant,
    wall: Duration,
    measured: Option<Duration>,
) -> (Instant, Duration) {
    let len = measured.map_or(wall, |m| m.min(wall));
    (started + (wall - len), len)
}

/// How much concurrent instances overlapped: their mean wall time over the span
/// from the first start to the last exit (1 = side by side all the time).
pub fn instances_overlap(spans: &[(Instant, Duration)]) -> f64 {
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
    spans: &[(Instant, Duration)],
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

/// From the first start to the last exit of `spans` (start, wall).
fn span(spans: &[(Instant, Duration)]) -> Duration {
    let (Some(first), Some(last)) = (
        spans.iter().map(|(s, _)| *s).min(),
        spans.iter().map(|(s, w)| *s + *w).max(),
    ) else {
        return Duration::ZERO;
    };
    last.saturating_duration_since(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_is_better_metrics_of_instances_are_averaged() {
        let m = |v: f64| MetricValue {
            name: "total_time".into(),
            unit: "s".into(),
            direction: isolab_stats::Direction::Lower,
            value: v,
        };
        let at = std::time::Instant::now();
        let spans = [(at, Duration::from_secs(3)), (at, Duration::from_secs(3))];
        let agg = aggregate_instances(&[vec![m(1.0)], vec![m(3.0)]], &spans);
        assert_eq!(agg[0].value, 2.0);
        assert_eq!(agg[1].name, "total_time_per_instance");
        assert_eq!(
            aggregate_instances(&[vec![m(5.0)]], &spans[..1]),
            vec![m(5.0)]
        );
    }

    /// An `events_per_second` metric of `v`.
    fn events_per_second(v: f64) -> MetricValue {
        MetricValue {
            name: "events_per_second".into(),
            unit: "events/s".into(),
            direction: isolab_stats::Direction::Higher,
            value: v,
        }
    }

    #[test]
    fn throughputs_of_instances_that_did_not_overlap_are_not_simply_summed() {
        let m = events_per_second;
        let at = std::time::Instant::now();
        let s3 = Duration::from_secs(3);
        // Side by side: the rates add up.
        let together =
            aggregate_instances(&[vec![m(100.0)], vec![m(100.0)]], &[(at, s3), (at, s3)]);
        assert_eq!(together[0].value, 200.0);
        // One after the other (6 s for 2 × 3 s of work at 100/s): 100/s, not 200/s.
        let apart = aggregate_instances(
            &[vec![m(100.0)], vec![m(100.0)]],
            &[(at, s3), (at + s3, s3)],
        );
        assert!((apart[0].value - 100.0).abs() < 1e-9, "{apart:?}");
        assert_eq!(apart[1].value, 100.0, "per instance is still their mean");
        assert!((instances_overlap(&[(at, s3), (at + s3, s3)]) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn instances_add_up_over_their_measurements_not_their_start_up() {
        let m = events_per_second;
        let at = std::time::Instant::now();
        let s = Duration::from_secs;
        // Two containers started together; the second took 6 s to start (128 others
        // were starting too), then both measured 3 s at 1000/s on their own cpu.
        let runs = [(at, s(4)), (at, s(9))];
        let windows: Vec<_> = runs
            .iter()
            .map(|(start, wall)| measurement_window(*start, *wall, Some(s(3))))
            .collect();
        assert_eq!(windows[1], (at + s(6), s(3)));
        // 6000 events over the 8 s from the first measurement's start (1 s) to the
        // last one's end (9 s): 750/s. Rates times wall times would claim 13000
        // events over 9 s, 1444/s, more than two cpus at 1000/s could do in the span.
        let agg = aggregate_instances(&[vec![m(1000.0)], vec![m(1000.0)]], &windows);
        assert!((agg[0].value - 750.0).abs() < 1e-9, "{agg:?}");
        // A tool that does not say how long it measured: its whole run.
        assert_eq!(measurement_window(at, s(4), None), (at, s(4)));
        // Nor can it measure longer than it ran.
        assert_eq!(measurement_window(at, s(4), Some(s(5))), (at, s(4)));
    }
}
