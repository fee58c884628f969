//! pgbench 15 `--log --log-prefix={workdir}/pgbench/log`: its per-transaction log,
//! one file per thread (`log.PID`, `log.PID.N`), one line per transaction:
//! `client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]`,
//! `time` being the transaction's latency in µs (or `failed`, `skipped`) and
//! `time_epoch.time_us` its end. The scripts' names, in the order of pgbench's
//! options (`script_no` 0, 1, …), are the lines of `{workdir}/pgbench/scripts`.
//! pgbench's `--report-per-command` latencies and its summary are prose only and
//! not read.
//!
//! | name | unit | direction | source |
//! |---|---|---|---|
//! | `tps` | transactions/s | higher | completed transactions ÷ (last end − first start) |
//! | `latency_mean`, `latency_p50`, `latency_p95`, `latency_p99` | ms | lower | over all completed transactions ([`isolab_stats::percentile`]) |
//! | `errors` | count | lower | transactions logged `failed` |
//! | `SCRIPT_tps`, `SCRIPT_latency_mean`, …, `SCRIPT_errors` | as above | as above | the same over script `SCRIPT`'s transactions: one measurement point per statement type |
//!
//! A client that pgbench aborted (an SQL error, a lost connection) or a start that
//! failed makes the run fail with pgbench's own `pgbench: error:` lines, which quote
//! the database's message: a point measured with fewer clients than asked for is
//! not that point.

use std::path::Path;

use super::{excerpt, finite, latency_metrics, tail, ParseError};
use crate::{Metric, ParserKind, RunOutput};
use isolab_stats::Direction::{Higher, Lower};

const TOOL: ParserKind = ParserKind::Pgbench;

/// The directory of the log files and the scripts' names, in the working directory.
pub const PGBENCH_DIR: &str = "pgbench";

/// The transactions of one script: latencies (µs) and failures.
#[derive(Default)]
struct Script {
    latencies: Vec<f64>,
    failed: u64,
}

pub(super) fn parse(out: &RunOutput) -> Result<Vec<Metric>, ParseError> {
    // pgbench's own errors: a client it aborted (an SQL error, a lost connection) or
    // a start that failed, each quoting the database's message.
    let aborted: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("pgbench: error:"))
        .take(3)
        .collect();
    if !aborted.is_empty() {
        return Err(ParseError::ToolError {
            tool: TOOL,
            message: aborted.join(" | "),
        });
    }
    let dir = out.workdir.join(PGBENCH_DIR);
    let names =
        std::fs::read_to_string(dir.join("scripts")).map_err(|source| ParseError::OutputFile {
            tool: TOOL,
            path: dir.join("scripts"),
            source,
            hint: "write the scripts' names, one a line, to {workdir}/pgbench/scripts",
            output: tail(&format!("{}\n{}", out.stdout, out.stderr)),
        })?;
    let names: Vec<&str> = names
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mut scripts: Vec<Script> = names.iter().map(|_| Script::default()).collect();
    let (mut first, mut last) = (f64::INFINITY, f64::NEG_INFINITY);
    for path in log_files(&dir, out)? {
        let text = std::fs::read_to_string(&path).map_err(|source| ParseError::OutputFile {
            tool: TOOL,
            path: path.clone(),
            source,
            hint: "pass --log --log-prefix={workdir}/pgbench/log",
            output: tail(out.stderr),
        })?;
        for line in text.lines() {
            let f: Vec<&str> = line.split_ascii_whitespace().collect();
            if f.len() < 6 {
                return Err(ParseError::MissingField {
                    tool: TOOL,
                    field: format!("the six columns of a log line in {}", path.display()),
                    excerpt: excerpt(line),
                });
            }
            let no = finite(TOOL, "script_no", f[3])? as usize;
            let script = scripts
                .get_mut(no)
                .ok_or_else(|| ParseError::MissingField {
                    tool: TOOL,
                    field: format!("the name of script {no} in {PGBENCH_DIR}/scripts"),
                    excerpt: excerpt(&names.join(" ")),
                })?;
            match f[2] {
                "failed" => script.failed += 1,
                "skipped" => {}
                time => {
                    let us = finite(TOOL, "time", time)?;
                    let end =
                        finite(TOOL, "time_epoch", f[4])? + finite(TOOL, "time_us", f[5])? / 1e6;
                    first = first.min(end - us / 1e6);
                    last = last.max(end);
                    script.latencies.push(us);
                }
            }
        }
    }
    let span = last - first;
    if span.is_nan() || span <= 0.0 {
        return Err(ParseError::MissingField {
            tool: TOOL,
            field: "a completed transaction in the log".into(),
            excerpt: tail(&format!("{}\n{}", out.stdout, out.stderr)),
        });
    }
    let all = Script {
        latencies: scripts
            .iter()
            .flat_map(|s| s.latencies.iter().copied())
            .collect(),
        failed: scripts.iter().map(|s| s.failed).sum(),
    };
    let mut metrics = point("", &all, span);
    for (name, script) in names.iter().zip(&scripts) {
        metrics.extend(point(&format!("{name}_"), script, span));
    }
    Ok(metrics)
}

/// The metrics of `s` over `span` seconds, named with `prefix`.
fn point(prefix: &str, s: &Script, span: f64) -> Vec<Metric> {
    let ms: Vec<f64> = s.latencies.iter().map(|us| us / 1000.0).collect();
    let mut m = vec![Metric::new(
        format!("{prefix}tps"),
        "transactions/s",
        Higher,
        ms.len() as f64 / span,
    )];
    m.extend(latency_metrics(prefix, &ms));
    m.push(Metric::new(
        format!("{prefix}errors"),
        "count",
        Lower,
        s.failed as f64,
    ));
    m
}

/// The log files under `dir`, sorted; an error quoting pgbench when there are none.
fn log_files(dir: &Path, out: &RunOutput) -> Result<Vec<std::path::PathBuf>, ParseError> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|source| ParseError::OutputFile {
            tool: TOOL,
            path: dir.to_path_buf(),
            source,
            hint: "pass --log --log-prefix={workdir}/pgbench/log",
            output: tail(&format!("{}\n{}", out.stdout, out.stderr)),
        })?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("log."))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(ParseError::Empty {
            tool: TOOL,
            stderr: tail(out.stderr),
        });
    }
    Ok(files)
}
