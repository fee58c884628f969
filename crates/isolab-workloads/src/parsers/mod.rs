//! Parsers that turn a finished command's output into [`Metric`]s, one module per tool.

pub mod ffmpeg;
pub mod fio;
pub mod hpcc;
pub mod ioping;
pub mod iperf3;
pub mod json;
pub mod latte;
pub mod pgbench;
pub mod redis_benchmark;
pub mod sockperf;
pub mod stress_ng;
pub mod sysbench;
pub mod sysbench_oltp;

pub use ffmpeg::FFMPEG_PROGRESS;
pub use hpcc::HPCC_REPORT;
pub use sockperf::SOCKPERF_LOG;
pub use stress_ng::STRESS_NG_REPORT;

use crate::{Metric, ParserKind, RunOutput};
use isolab_stats::Direction;
use std::path::PathBuf;

/// A parser name other than the known ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown parser `{0}`: expected one of sysbench, fio, stress-ng, iperf3, hpcc, ioping, sockperf, ffmpeg, pgbench, sysbench-oltp, redis-benchmark, latte, json, load, time")]
pub struct UnknownParser(pub String);

/// Why a run's output could not be turned into metrics.
///
/// Every message names the tool, says what was missing or unparsable and quotes
/// a short excerpt of what the tool printed.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The command printed nothing where its report was expected.
    #[error("{tool}: the command printed no report on stdout (check its exit status); stderr: {stderr:?}")]
    Empty {
        /// The parser that found nothing.
        tool: ParserKind,
        /// A short excerpt of stderr (often the reason).
        stderr: String,
    },
    /// A field the report always has is missing: the output is truncated, or it
    /// comes from another version or mode of the tool.
    #[error("{tool}: the report has no {field} (truncated output, or another version or mode of the tool?); output excerpt: {excerpt:?}")]
    MissingField {
        /// The parser.
        tool: ParserKind,
        /// The missing field, as the tool names it and where it should be.
        field: String,
        /// A short excerpt of the output.
        excerpt: String,
    },
    /// A field is present but its value is not a finite number.
    #[error("{tool}: {field} is {value:?}, not a finite number")]
    BadNumber {
        /// The parser.
        tool: ParserKind,
        /// The field, as the tool names it.
        field: String,
        /// The value as printed.
        value: String,
    },
    /// The output is not (complete) JSON.
    #[error(
        "{tool}: the output is not a complete JSON report ({source}); output excerpt: {excerpt:?}"
    )]
    Json {
        /// The parser.
        tool: ParserKind,
        /// A short excerpt of the output.
        excerpt: String,
        /// What the JSON parser said.
        source: serde_json::Error,
    },
    /// The tool's report says that the run failed.
    #[error("{tool} reported an error: {message}")]
    ToolError {
        /// The parser.
        tool: ParserKind,
        /// The tool's own error message, quoted.
        message: String,
    },
    /// fio's report does not hold exactly one job (group) entry.
    #[error("fio: the report has {count} job entries but isolab needs exactly one: run one job group with --group_reporting")]
    FioJobs {
        /// How many entries `jobs` holds.
        count: usize,
    },
    /// A tool's report file in the run's working directory could not be read.
    #[error("{tool}: cannot read its report {path}: {source}; {hint}; its output ended with: {output:?}")]
    OutputFile {
        /// The parser.
        tool: ParserKind,
        /// The report file the parser looked for.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
        /// How the command must write it.
        hint: &'static str,
        /// A short excerpt of stdout and stderr (where the tool printed its errors).
        output: String,
    },
    /// stress-ng's YAML report file could not be read.
    #[error("stress-ng: cannot read the YAML report {path}: {source}; the command must write it with `--metrics --yaml {{workdir}}/{file}`; its output ended with: {output:?}", file = STRESS_NG_REPORT)]
    ReportFile {
        /// The report file the parser looked for.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
        /// A short excerpt of stdout and stderr (stress-ng prints its errors there).
        output: String,
    },
    /// stress-ng's YAML report file is not valid YAML.
    #[error(
        "stress-ng: the YAML report {path} is not valid YAML ({source}); excerpt: {excerpt:?}"
    )]
    Yaml {
        /// The report file.
        path: PathBuf,
        /// A short excerpt of its content.
        excerpt: String,
        /// What the YAML parser said.
        source: yaml_rust2::ScanError,
    },
}

/// Metrics of one run. [`ParserKind::Time`] gives just `wall_time` (s, lower);
/// the others parse the tool's output: see the submodules of
/// [`parsers`](crate::parsers) for the metrics each yields.
pub fn parse(kind: ParserKind, out: &RunOutput) -> Result<Vec<Metric>, ParseError> {
    match kind {
        ParserKind::Sysbench => sysbench::parse(out),
        ParserKind::Fio => fio::parse(out),
        ParserKind::StressNg => stress_ng::parse(out),
        ParserKind::Iperf3 => iperf3::parse(out),
        ParserKind::Hpcc => hpcc::parse(out),
        ParserKind::Ioping => ioping::parse(out),
        ParserKind::Sockperf => sockperf::parse(out),
        ParserKind::Ffmpeg => ffmpeg::parse(out),
        ParserKind::Pgbench => pgbench::parse(out),
        ParserKind::SysbenchOltp => sysbench_oltp::parse(out),
        ParserKind::RedisBenchmark => redis_benchmark::parse(out),
        ParserKind::Latte => latte::parse(out),
        ParserKind::Json => json::parse(out),
        ParserKind::Load => Err(ParseError::ToolError {
            tool: kind,
            message: "a load's metrics come from its generator's output (load::parse_load), not from a command's".into(),
        }),
        ParserKind::Time => Ok(vec![Metric::new(
            "wall_time",
            "s",
            Direction::Lower,
            out.wall.as_secs_f64(),
        )]),
    }
}

/// How long the tool measured the rates it reports, from its own report: sysbench's
/// `total time`, fio's `jobs[0].job_runtime`, iperf3's `end.sum_sent.seconds`
/// (`end.sum.seconds` for UDP), stress-ng's longest `wall-clock-time`, and the wall
/// time for [`ParserKind::Time`]. `None` when the report does not say (then only
/// the command's wall time, which includes its start-up, is known).
///
/// Rates of concurrent instances add up over the spans in which they were
/// measured: an instance in a container that took seconds to start under load
/// measured its rate over its own run only, not over its wall time.
pub fn measured_time(kind: ParserKind, out: &RunOutput) -> Option<std::time::Duration> {
    let secs = match kind {
        ParserKind::Sysbench => sysbench::parse(out)
            .ok()?
            .into_iter()
            .find(|m| m.name == "total_time")
            .map(|m| m.value),
        ParserKind::Fio => {
            let root = first_json(ParserKind::Fio, out).ok()?;
            json_get(&root, &["jobs"])?
                .as_array()?
                .first()?
                .get("job_runtime")?
                .as_f64()
                .map(|ms| ms / 1000.0)
        }
        ParserKind::Iperf3 => {
            let root = first_json(ParserKind::Iperf3, out).ok()?;
            json_get(&root, &["end", "sum_sent", "seconds"])
                .or_else(|| json_get(&root, &["end", "sum", "seconds"]))?
                .as_f64()
        }
        ParserKind::StressNg => stress_ng::wall_clock_time(out),
        ParserKind::Ffmpeg => ffmpeg::parse(out)
            .ok()?
            .into_iter()
            .find(|m| m.name == "execution_time")
            .map(|m| m.value),
        // Each reports rates over its own span already (HPCC per test, sockperf's
        // transactions over its log, ioping per request): none for the whole run.
        ParserKind::Hpcc
        | ParserKind::Ioping
        | ParserKind::Sockperf
        | ParserKind::Pgbench
        | ParserKind::SysbenchOltp
        | ParserKind::RedisBenchmark
        | ParserKind::Latte
        | ParserKind::Json
        | ParserKind::Load => None,
        ParserKind::Time => Some(out.wall.as_secs_f64()),
    }?;
    (secs.is_finite() && secs > 0.0).then(|| std::time::Duration::from_secs_f64(secs))
}

/// The text of the report file `name` a tool wrote into the run's working directory;
/// when it cannot be read, an error with `hint` (how the command must write it) and
/// the end of what the tool printed (where it says why).
fn report_file(
    tool: ParserKind,
    out: &RunOutput,
    name: &str,
    hint: &'static str,
) -> Result<String, ParseError> {
    let path = out.workdir.join(name);
    std::fs::read_to_string(&path).map_err(|source| ParseError::OutputFile {
        tool,
        path,
        source,
        hint,
        output: tail(&format!("{}\n{}", out.stdout, out.stderr)),
    })
}

/// The longest excerpt quoted in an error, in characters.
const EXCERPT_CHARS: usize = 240;

/// A short excerpt of `text` for an error message: all of it when short,
/// otherwise its beginning and its end around an ellipsis.
/// A run's output with only `stdout` set, for parser unit tests.
#[cfg(test)]
pub(crate) fn test_output(stdout: &str) -> RunOutput<'_> {
    RunOutput {
        stdout,
        stderr: "",
        workdir: std::path::Path::new("/nonexistent"),
        wall: std::time::Duration::from_secs(1),
    }
}

pub(crate) fn excerpt(text: &str) -> String {
    let text = text.trim();
    let n = text.chars().count();
    if n <= EXCERPT_CHARS {
        return text.to_owned();
    }
    let half = EXCERPT_CHARS / 2;
    let head: String = text.chars().take(half).collect();
    let tail: String = text.chars().skip(n - half).collect();
    format!("{head} … {tail}")
}

/// The end of `text` (its last [`EXCERPT_CHARS`] characters).
pub(crate) fn tail(text: &str) -> String {
    let text = text.trim();
    let n = text.chars().count();
    let skipped = n.saturating_sub(EXCERPT_CHARS);
    let tail: String = text.chars().skip(skipped).collect();
    if skipped > 0 {
        format!("… {tail}")
    } else {
        tail
    }
}

/// Parses the first JSON document of `stdout`, skipping any lines printed before
/// it (tools sometimes print warnings ahead of their report) and ignoring
/// anything after it.
fn first_json(tool: ParserKind, out: &RunOutput) -> Result<serde_json::Value, ParseError> {
    if out.stdout.trim().is_empty() {
        return Err(ParseError::Empty {
            tool,
            stderr: tail(out.stderr),
        });
    }
    let start = json_start(out.stdout).ok_or_else(|| ParseError::MissingField {
        tool,
        field: "JSON report (no line starts with `{`)".to_owned(),
        excerpt: excerpt(out.stdout),
    })?;
    let mut docs = serde_json::Deserializer::from_str(&out.stdout[start..]).into_iter();
    match docs.next() {
        Some(Ok(v)) => Ok(v),
        Some(Err(source)) => Err(ParseError::Json {
            tool,
            excerpt: excerpt(out.stdout),
            source,
        }),
        None => Err(ParseError::MissingField {
            tool,
            field: "JSON report".to_owned(),
            excerpt: excerpt(out.stdout),
        }),
    }
}

/// Byte offset of the first line that starts with `{`.
fn json_start(text: &str) -> Option<usize> {
    if text.starts_with('{') {
        return Some(0);
    }
    text.match_indices("\n{").next().map(|(i, _)| i + 1)
}

/// A JSON field reached by `path` from `root`, as a finite number.
fn json_number(
    tool: ParserKind,
    root: &serde_json::Value,
    path: &[&str],
    out: &RunOutput,
) -> Result<f64, ParseError> {
    let name = path.join(".");
    let v = json_get(root, path).ok_or_else(|| ParseError::MissingField {
        tool,
        field: format!("`{name}`"),
        excerpt: excerpt(out.stdout),
    })?;
    finite_json(tool, &name, v)
}

/// `v` as a finite number, or [`ParseError::BadNumber`] naming `field`.
fn finite_json(tool: ParserKind, field: &str, v: &serde_json::Value) -> Result<f64, ParseError> {
    match v.as_f64() {
        Some(x) if x.is_finite() => Ok(x),
        _ => Err(ParseError::BadNumber {
            tool,
            field: format!("`{field}`"),
            value: v.to_string(),
        }),
    }
}

fn json_get<'v>(root: &'v serde_json::Value, path: &[&str]) -> Option<&'v serde_json::Value> {
    path.iter().try_fold(root, |v, key| v.get(key))
}

/// The `q`-th percentile (0–100) of non-empty `values` that a parser collected, with
/// the project's one definition ([`isolab_stats::percentile`], numpy's linear).
fn percentile(values: &[f64], q: f64) -> f64 {
    isolab_stats::percentile(values, q).unwrap_or(f64::NAN)
}

/// The mean and the 50th, 95th and 99th percentiles of `ms` (latencies in ms) as
/// `{prefix}latency_mean`, `{prefix}latency_p50`, … (ms, lower); none when empty.
fn latency_metrics(prefix: &str, ms: &[f64]) -> Vec<Metric> {
    if ms.is_empty() {
        return Vec::new();
    }
    let mean = ms.iter().sum::<f64>() / ms.len() as f64;
    let mut m = vec![Metric::new(
        format!("{prefix}latency_mean"),
        "ms",
        Direction::Lower,
        mean,
    )];
    for q in [50, 95, 99] {
        m.push(Metric::new(
            format!("{prefix}latency_p{q}"),
            "ms",
            Direction::Lower,
            percentile(ms, f64::from(q)),
        ));
    }
    m
}

/// `text` as a finite number, or [`ParseError::BadNumber`] naming `field`.
fn finite(tool: ParserKind, field: &str, text: &str) -> Result<f64, ParseError> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(ParseError::BadNumber {
            tool,
            field: field.to_owned(),
            value: text.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpt_keeps_both_ends_of_long_text() {
        assert_eq!(excerpt("  short \n"), "short");
        let long = format!("{}{}", "a".repeat(300), "z".repeat(300));
        let e = excerpt(&long);
        assert!(
            e.starts_with(&"a".repeat(120)) && e.ends_with(&"z".repeat(120)),
            "{e}"
        );
        assert!(e.contains(" … "));
        // Multi-byte characters never split.
        let wide = "é".repeat(1000);
        assert_eq!(excerpt(&wide).chars().filter(|c| *c == 'é').count(), 240);
        assert_eq!(tail(&wide).chars().filter(|c| *c == 'é').count(), 240);
    }

    #[test]
    fn json_is_found_after_leading_noise() {
        assert_eq!(json_start("{}"), Some(0));
        assert_eq!(json_start("note: x\n{\n}"), Some(8));
        assert_eq!(json_start("no json"), None);
    }
}
