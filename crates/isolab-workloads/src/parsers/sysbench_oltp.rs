//! sysbench 1.0.20's OLTP scripts through isolab's wrapper (`oltp.lua`, see
//! [`crate::oltp`]): the cumulative report as JSON on stdout
//! (`sysbench.hooks.report_cumulative = sysbench.report_json`: a one-element
//! array after sysbench's banner) and every event's latency in µs, one a line, in
//! `{workdir}/sysbench/latency.THREAD`. sysbench's own prose report is not read.
//!
//! | name | unit | direction | source |
//! |---|---|---|---|
//! | `tps` | transactions/s | higher | JSON `tps` (events/s) |
//! | `qps` | queries/s | higher | JSON `qps.total` |
//! | `latency_mean`, `latency_p50`, `latency_p95`, `latency_p99` | ms | lower | the events' latencies ([`isolab_stats::percentile`]) |
//! | `errors` | count | lower | JSON `errors` (per second) × the events' span (events ÷ tps) |
//! | `reconnects` | count | lower | JSON `reconnects`, likewise |
//!
//! A `FATAL:` line (an SQL error sysbench does not ignore, a lost connection) makes
//! the run fail with sysbench's line, which quotes the database's message.

use super::{excerpt, finite_json, json_get, latency_metrics, tail, ParseError};
use crate::{Metric, ParserKind, RunOutput};
use isolab_stats::Direction::{Higher, Lower};

const TOOL: ParserKind = ParserKind::SysbenchOltp;

/// The directory of the latency files in the working directory.
pub const SYSBENCH_DIR: &str = "sysbench";

pub(super) fn parse(out: &RunOutput) -> Result<Vec<Metric>, ParseError> {
    let fatal: Vec<&str> = out
        .stdout
        .lines()
        .chain(out.stderr.lines())
        .filter(|l| l.contains("FATAL:"))
        .take(3)
        .collect();
    if !fatal.is_empty() {
        return Err(ParseError::ToolError {
            tool: TOOL,
            message: fatal.join(" | "),
        });
    }
    let start = if out.stdout.starts_with('[') {
        Some(0)
    } else {
        out.stdout.find("\n[").map(|i| i + 1)
    };
    let start = start.ok_or_else(|| {
        if out.stdout.trim().is_empty() {
            ParseError::Empty {
                tool: TOOL,
                stderr: tail(out.stderr),
            }
        } else {
            ParseError::MissingField {
                tool: TOOL,
                field: "the JSON report (no line starts with `[`): run the script through isolab's wrapper".into(),
                excerpt: excerpt(out.stdout),
            }
        }
    })?;
    let mut docs = serde_json::Deserializer::from_str(&out.stdout[start..]).into_iter();
    let report: serde_json::Value = match docs.next() {
        Some(Ok(v)) => v,
        Some(Err(source)) => {
            return Err(ParseError::Json {
                tool: TOOL,
                excerpt: excerpt(&out.stdout[start..]),
                source,
            })
        }
        None => unreachable!("the text from `[` is not empty"),
    };
    let last =
        report
            .as_array()
            .and_then(|a| a.last())
            .ok_or_else(|| ParseError::MissingField {
                tool: TOOL,
                field: "a cumulative report in the JSON array".into(),
                excerpt: excerpt(&out.stdout[start..]),
            })?;
    let number = |path: &[&str]| -> Result<f64, ParseError> {
        let name = path.join(".");
        let v = json_get(last, path).ok_or_else(|| ParseError::MissingField {
            tool: TOOL,
            field: format!("`{name}`"),
            excerpt: excerpt(&out.stdout[start..]),
        })?;
        finite_json(TOOL, &name, v)
    };
    let tps = number(&["tps"])?;
    let qps = number(&["qps", "total"])?;
    let latencies = latencies(out)?;
    if tps > 0.0 && latencies.is_empty() {
        return Err(ParseError::MissingField {
            tool: TOOL,
            field: format!(
                "the events' latencies: sysbench reports {tps} transactions/s but no {SYSBENCH_DIR}/latency.THREAD file holds one (run the script through isolab's wrapper, which writes them)"
            ),
            excerpt: excerpt(&out.stdout[start..]),
        });
    }
    // `errors` and `reconnects` are per second: over the events' span, or over the
    // report's time when no event completed.
    let span = if tps > 0.0 {
        latencies.len() as f64 / tps
    } else {
        number(&["time"])?
    };
    let ms: Vec<f64> = latencies.iter().map(|us| us / 1000.0).collect();
    let mut m = vec![
        Metric::new("tps", "transactions/s", Higher, tps),
        Metric::new("qps", "queries/s", Higher, qps),
    ];
    m.extend(latency_metrics("", &ms));
    m.push(Metric::new(
        "errors",
        "count",
        Lower,
        (number(&["errors"])? * span).round(),
    ));
    m.push(Metric::new(
        "reconnects",
        "count",
        Lower,
        (number(&["reconnects"])? * span).round(),
    ));
    Ok(m)
}

/// Every event's latency (µs) from the threads' files.
fn latencies(out: &RunOutput) -> Result<Vec<f64>, ParseError> {
    let dir = out.workdir.join(SYSBENCH_DIR);
    let entries = std::fs::read_dir(&dir).map_err(|source| ParseError::OutputFile {
        tool: TOOL,
        path: dir.clone(),
        source,
        hint: "run the script through isolab's wrapper, which writes {workdir}/sysbench/latency.THREAD",
        output: tail(&format!("{}\n{}", out.stdout, out.stderr)),
    })?;
    let mut all = Vec::new();
    for path in entries.flatten().map(|e| e.path()) {
        let is_log = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("latency."));
        if !is_log {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|source| ParseError::OutputFile {
            tool: TOOL,
            path: path.clone(),
            source,
            hint: "the wrapper writes it when a thread ends",
            output: tail(out.stderr),
        })?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            all.push(super::finite(TOOL, "a latency", line)?);
        }
    }
    Ok(all)
}
