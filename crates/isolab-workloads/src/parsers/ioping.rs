//! ioping `-J` (JSON) on stdout: one entry per request, then the statistics.
//!
//! ioping prints a JSON array: an entry with `io` per request (`time` in ns,
//! `ignored` for the warm-up request) and a final entry with `stat` over the
//! requests that count. Times are converted to µs.
//!
//! | name | unit | direction | source |
//! |---|---|---|---|
//! | `latency_avg` | µs | lower | `stat.avg` |
//! | `latency_min`, `latency_max` | µs | lower | `stat.min`, `stat.max` |
//! | `latency_mdev` | µs | lower | `stat.mdev` (mean deviation) |
//! | `latency_p50`, `latency_p99` | µs | lower | the requests' `io.time` that are not `ignored` ([`isolab_stats::percentile`]) |
//! | `iops` | IOPS | higher | `stat.iops`: requests per second of I/O time |

use super::{excerpt, finite_json, json_get, percentile, tail, ParseError};
use crate::{Metric, ParserKind, RunOutput};
use isolab_stats::Direction::{Higher, Lower};

const TOOL: ParserKind = ParserKind::Ioping;

pub(super) fn parse(out: &RunOutput) -> Result<Vec<Metric>, ParseError> {
    let text = out.stdout.trim();
    if text.is_empty() {
        return Err(ParseError::Empty {
            tool: TOOL,
            stderr: tail(out.stderr),
        });
    }
    let entries: Vec<serde_json::Value> =
        serde_json::from_str(text).map_err(|source| ParseError::Json {
            tool: TOOL,
            excerpt: excerpt(text),
            source,
        })?;
    let stat = entries
        .iter()
        .rev()
        .find_map(|e| e.get("stat"))
        .ok_or_else(|| ParseError::MissingField {
            tool: TOOL,
            field: "`stat` entry".into(),
            excerpt: excerpt(text),
        })?;
    let number = |key: &str| -> Result<f64, ParseError> {
        let v = json_get(stat, &[key]).ok_or_else(|| ParseError::MissingField {
            tool: TOOL,
            field: format!("`stat.{key}`"),
            excerpt: excerpt(text),
        })?;
        finite_json(TOOL, &format!("stat.{key}"), v)
    };
    let mut times = Vec::new();
    for io in entries.iter().filter_map(|e| e.get("io")) {
        if io.get("ignored").and_then(|v| v.as_bool()) == Some(true) {
            continue;
        }
        let t = io.get("time").ok_or_else(|| ParseError::MissingField {
            tool: TOOL,
            field: "`io.time`".into(),
            excerpt: excerpt(text),
        })?;
        times.push(finite_json(TOOL, "io.time", t)? / 1000.0);
    }
    if times.is_empty() {
        return Err(ParseError::MissingField {
            tool: TOOL,
            field: "a request that counts (every `io` entry is `ignored`)".into(),
            excerpt: excerpt(text),
        });
    }
    let us = |ns: f64| ns / 1000.0;
    Ok(vec![
        Metric::new("latency_avg", "µs", Lower, us(number("avg")?)),
        Metric::new("latency_min", "µs", Lower, us(number("min")?)),
        Metric::new("latency_max", "µs", Lower, us(number("max")?)),
        Metric::new("latency_mdev", "µs", Lower, us(number("mdev")?)),
        Metric::new("latency_p50", "µs", Lower, percentile(&times, 50.0)),
        Metric::new("latency_p99", "µs", Lower, percentile(&times, 99.0)),
        Metric::new("iops", "IOPS", Higher, number("iops")?),
    ])
}
