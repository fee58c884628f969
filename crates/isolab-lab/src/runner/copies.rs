//! Copies of a workload in one instance (the factor `copies`): seed 001's threads curve,
//! "each thread ran an instance of Apache HTTP Server compilation. All … started at
//! the same time", N independent copies of the workload inside ONE instance of the
//! cell's shape (one cgroup, one container, one guest).
//!
//! Copy `k` has a working directory of its own, `<workdir>/c<k>`, with the workload's
//! inputs placed and its templates rendered there, as an instance would. One shell in
//! the instance starts every copy at once, each with its stdout and stderr in its own
//! directory and its own start and end times; the instance ends when the last copy
//! does. The run's metrics are each metric's mean over the copies (the thesis's
//! "average runtime of all"), with their spread as `<name>_copies_sd`,
//! `<name>_copies_min` and `<name>_copies_max`.

use std::path::Path;
use std::time::Duration;

use isolab_cgroups::Limits;
use isolab_store::MetricValue;
use isolab_tools::shell_quote;
use isolab_workloads::WorkloadDef;

use super::job::parse_metrics;
use super::workdir::DiskFacts;
use super::{tail_chars, Runner};
use crate::platform::{Execution, ExitKind, Job, PlatformError};
use crate::spec::{Cell, ExperimentSpec};

/// The files copy `k` leaves in its directory: its stdout, stderr and
/// `exit start_ns end_ns`.
const OUT: &str = "isolab-copy.out";
const ERR: &str = "isolab-copy.err";
const STATUS: &str = "isolab-copy.status";

impl Runner<'_> {
    /// The one job that starts `cell`'s copies together in `workdir`, and each copy's
    /// own job (its templates rendered for `<workdir>/c<k>`, where its inputs are placed),
    /// which the copy's output is parsed against.
    pub(super) fn copies_job(
        &self,
        spec: &ExperimentSpec,
        cell: &Cell,
        name: &str,
        workdir: &Path,
        disk: &DiskFacts,
        limits: &Limits,
    ) -> Result<(Job, Vec<Job>), PlatformError> {
        let copies: Vec<Job> = (0..cell.copies)
            .map(|k| {
                let dir = workdir.join(format!("c{k}"));
                self.job(
                    spec,
                    cell,
                    format!("{name}-c{k}"),
                    &dir,
                    disk,
                    limits.clone(),
                )
            })
            .collect::<Result<_, _>>()?;
        let mut job = copies[0].clone();
        job.name = name.to_owned();
        job.workdir = workdir.to_path_buf();
        job.argv = shell(&start_together(&copies));
        job.prepare = each(&copies, |c| c.prepare.as_deref()).map(|s| shell(&s));
        job.cleanup = each(&copies, |c| c.cleanup.as_deref()).map(|s| shell(&s));
        Ok((job, copies))
    }
}

/// `sh -c script`.
fn shell(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.to_owned()]
}

/// A command line, quoted for the shell.
fn quoted(argv: &[String]) -> String {
    argv.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The script that runs every copy's `argv` at once, each in its directory with its
/// output, error and `exit start end` there; it exits with the first failed copy's status.
fn start_together(copies: &[Job]) -> String {
    let mut s = format!(
        "copy() {{ d=$1; shift; cd \"$d\" || exit 1; s=$(date +%s%N); \"$@\" > \"$d/{OUT}\" 2> \"$d/{ERR}\"; c=$?; echo \"$c $s $(date +%s%N)\" > \"$d/{STATUS}\"; }}\n"
    );
    for c in copies {
        s.push_str(&format!(
            "copy {} {} &\n",
            shell_quote(&c.workdir.to_string_lossy()),
            quoted(&c.argv)
        ));
    }
    s.push_str("wait\nrc=0\n");
    for c in copies {
        s.push_str(&format!(
            "read c rest < {} || c=1; [ \"$rc\" != 0 ] || rc=$c\n",
            shell_quote(&c.workdir.join(STATUS).to_string_lossy())
        ));
    }
    s.push_str("exit $rc\n");
    s
}

/// The script that runs each copy's command of `what` (its prepare or cleanup) in turn,
/// stopping at the first that fails; `None` when the workload has none.
fn each(copies: &[Job], what: impl Fn(&Job) -> Option<&[String]>) -> Option<String> {
    let lines: Vec<String> = copies
        .iter()
        .filter_map(|c| {
            what(c).map(|argv| {
                format!(
                    "(cd {} && {}) || exit $?",
                    shell_quote(&c.workdir.to_string_lossy()),
                    quoted(argv)
                )
            })
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// Copy `job`'s execution, from what it left in its directory: its output, error, exit
/// status and wall time (the rest, telemetry and limits, are the instance's).
fn copy_execution(instance: &Execution, job: &Job) -> Result<Execution, String> {
    let read = |name: &str| std::fs::read_to_string(job.workdir.join(name));
    let status = read(STATUS).map_err(|e| {
        format!(
            "copy {} left no status in {} ({e}): it did not start or was killed",
            job.name,
            job.workdir.display()
        )
    })?;
    let fields: Vec<i64> = status
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    let [code, start, end] = fields[..] else {
        return Err(format!(
            "copy {}'s status {:?} in {} is not `exit start_ns end_ns` (does the image's `date` print %N?)",
            job.name,
            status.trim(),
            job.workdir.display()
        ));
    };
    let mut e = instance.clone();
    e.exit = ExitKind::Code(code as i32);
    e.stdout = read(OUT).unwrap_or_default();
    e.stderr = read(ERR).unwrap_or_default();
    e.wall = Duration::from_nanos(end.saturating_sub(start).max(0) as u64);
    e.notes = Vec::new();
    Ok(e)
}

/// The instance's execution and the run's metrics from `copies`, its copies: each copy's
/// metrics by `w`'s parser, aggregated by [`aggregate_copies`]. A copy that failed makes
/// the instance's exit its own and says so in a note.
pub(super) fn copies_result(
    w: &WorkloadDef,
    mut instance: Execution,
    copies: &[Job],
) -> (Execution, Result<Vec<MetricValue>, String>) {
    let executions: Result<Vec<Execution>, String> = copies
        .iter()
        .map(|c| copy_execution(&instance, c))
        .collect();
    let executions = match executions {
        Ok(e) => e,
        Err(e) => return (instance, Err(e)),
    };
    if let Some((c, bad)) = copies
        .iter()
        .zip(&executions)
        .find(|(_, e)| !e.exit.success())
    {
        instance.exit = bad.exit;
        instance.notes.push(format!(
            "copy {} ended with {}: {}",
            c.name,
            bad.exit,
            tail_chars(&bad.stderr, 500)
        ));
    }
    instance.notes.push(format!(
        "{} copies of the workload started together in one instance; each metric is the mean over the copies (`_copies_sd`, `_copies_min`, `_copies_max`: their spread)",
        copies.len()
    ));
    let metrics = executions
        .iter()
        .zip(copies)
        .map(|(e, job)| parse_metrics(w, e, job))
        .collect::<Result<Vec<_>, String>>()
        .map(|per_copy| aggregate_copies(&per_copy));
    (instance, metrics)
}

/// Each metric every copy reported: its mean over the copies (whichever way is better:
/// the average copy), and its spread as `<name>_copies_sd` (sample standard deviation,
/// lower is better), `<name>_copies_min` and `<name>_copies_max`.
pub fn aggregate_copies(per_copy: &[Vec<MetricValue>]) -> Vec<MetricValue> {
    let Some(first) = per_copy.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut spread = Vec::new();
    for m in first {
        let values: Vec<f64> = per_copy
            .iter()
            .filter_map(|ms| ms.iter().find(|x| x.name == m.name).map(|x| x.value))
            .collect();
        if values.len() != per_copy.len() {
            continue; // not every copy reported it
        }
        // Copies are at least two (a cell of one runs as an instance).
        let Ok(sample) = isolab_stats::Sample::new(values) else {
            continue;
        };
        let summary = sample.summary();
        out.push(MetricValue {
            value: summary.mean,
            ..m.clone()
        });
        let named = |suffix: &str, value: f64| MetricValue {
            name: format!("{}_copies_{suffix}", m.name),
            value,
            ..m.clone()
        };
        spread.push(MetricValue {
            direction: isolab_stats::Direction::Lower,
            ..named("sd", summary.stdev)
        });
        spread.push(named("min", summary.min));
        spread.push(named("max", summary.max));
    }
    out.extend(spread);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str, value: f64) -> MetricValue {
        MetricValue {
            name: name.into(),
            unit: "s".into(),
            direction: isolab_stats::Direction::Lower,
            value,
        }
    }

    #[test]
    fn copies_average_every_metric_they_all_report_and_keep_the_spread() {
        let per_copy = vec![
            vec![m("execution_time", 10.0), m("units", 32.0)],
            vec![m("execution_time", 12.0), m("units", 32.0)],
            vec![m("execution_time", 14.0)],
        ];
        let out = aggregate_copies(&per_copy);
        let get = |n: &str| out.iter().find(|x| x.name == n).map(|x| x.value);
        assert_eq!(get("execution_time"), Some(12.0));
        assert_eq!(get("execution_time_copies_sd"), Some(2.0));
        assert_eq!(get("execution_time_copies_min"), Some(10.0));
        assert_eq!(get("execution_time_copies_max"), Some(14.0));
        assert_eq!(get("units"), None, "not every copy reported it");
        assert_eq!(out[0].name, "execution_time", "the means first");
    }

    #[test]
    fn the_script_starts_every_copy_in_its_directory_and_fails_with_the_first() {
        let job = |k: u32| Job {
            platform: crate::platform::PlatformDef::new(crate::platform::PlatformKind::HOST),
            image: None,
            name: format!("copy-c{k}"),
            argv: vec!["echo".into(), format!("it's {k}")],
            prepare: None,
            cleanup: None,
            server: None,
            workdir: format!("/w/c{k}").into(),
            limits: Limits::default(),
            timeout: Duration::from_secs(60),
            neighbours: None,
            uses_disk: false,
            stack: None,
        };
        let s = start_together(&[job(0), job(1)]);
        assert!(
            s.contains(
                "copy '/w/c0' 'echo' 'it'\\''s 0' &\ncopy '/w/c1' 'echo' 'it'\\''s 1' &\nwait\n"
            ),
            "{s}"
        );
        assert!(
            s.contains("read c rest < '/w/c1/isolab-copy.status' || c=1"),
            "{s}"
        );
        assert!(s.ends_with("exit $rc\n"));
        assert_eq!(each(&[job(0)], |c| c.prepare.as_deref()), None);
    }
}
