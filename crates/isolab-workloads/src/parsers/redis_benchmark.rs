//! `redis-benchmark --csv` on stdout: one row per command it tested, with a header
//! row naming the columns (Redis 7.0: `test`, `rps`, `avg_latency_ms`,
//! `min_latency_ms`, `p50_latency_ms`, `p95_latency_ms`, `p99_latency_ms`,
//! `max_latency_ms`). Every command is its own measurement point: its metrics are
//! named after it, lowercased and without redis-benchmark's note in parentheses
//! (`LRANGE_100 (first 100 elements)` is `lrange_100`; a command tested twice, as
//! `LPUSH` before `LRANGE`, gets `_2` on its second row).
//!
//! | name | unit | direction | column |
//! |---|---|---|---|
//! | `CMD_requests_per_second` | requests/s | higher | `rps` |
//! | `CMD_latency_mean` | ms | lower | `avg_latency_ms` |
//! | `CMD_latency_p50`, `_p95`, `_p99` | ms | lower | `p50_latency_ms`, … |
//! | `CMD_latency_max` | ms | lower | `max_latency_ms` |
//!
//! A report without rows is an error quoting what redis-benchmark printed on stderr
//! (e.g. `Could not connect to Redis at …`).

use super::{excerpt, finite, tail, ParseError};
use crate::{Metric, ParserKind, RunOutput};
use isolab_stats::Direction::{Higher, Lower};

const TOOL: ParserKind = ParserKind::RedisBenchmark;

/// The columns read, with the metric each becomes.
const COLUMNS: [(&str, &str, &str); 6] = [
    ("rps", "requests_per_second", "requests/s"),
    ("avg_latency_ms", "latency_mean", "ms"),
    ("p50_latency_ms", "latency_p50", "ms"),
    ("p95_latency_ms", "latency_p95", "ms"),
    ("p99_latency_ms", "latency_p99", "ms"),
    ("max_latency_ms", "latency_max", "ms"),
];

pub(super) fn parse(out: &RunOutput) -> Result<Vec<Metric>, ParseError> {
    let mut rows = out.stdout.lines().map(str::trim).filter(|l| !l.is_empty());
    let Some(header) = rows.next() else {
        return Err(ParseError::Empty {
            tool: TOOL,
            stderr: tail(out.stderr),
        });
    };
    let header = fields(header);
    let index = |column: &str| {
        header
            .iter()
            .position(|h| h == column)
            .ok_or_else(|| ParseError::MissingField {
                tool: TOOL,
                field: format!("CSV column `{column}` (run it with --csv)"),
                excerpt: excerpt(out.stdout),
            })
    };
    let test = index("test")?;
    let columns = COLUMNS
        .iter()
        .map(|(column, name, unit)| Ok((index(column)?, *column, *name, *unit)))
        .collect::<Result<Vec<_>, ParseError>>()?;
    let mut metrics = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for row in rows {
        let f = fields(row);
        let label = f.get(test).ok_or_else(|| ParseError::MissingField {
            tool: TOOL,
            field: format!("a `test` value in row {row:?}"),
            excerpt: excerpt(out.stdout),
        })?;
        let mut command = command_name(label);
        let repeats = seen.iter().filter(|s| **s == command).count();
        seen.push(command.clone());
        if repeats > 0 {
            command = format!("{command}_{}", repeats + 1);
        }
        for (i, column, name, unit) in &columns {
            let text = f.get(*i).map(String::as_str).unwrap_or("");
            let value = finite(TOOL, &format!("`{column}` of {label}"), text)?;
            let direction = if *name == "requests_per_second" {
                Higher
            } else {
                Lower
            };
            metrics.push(Metric::new(
                format!("{command}_{name}"),
                *unit,
                direction,
                value,
            ));
        }
    }
    if metrics.is_empty() {
        return Err(ParseError::ToolError {
            tool: TOOL,
            message: format!(
                "no command was measured; it printed: {}",
                tail(&format!("{}\n{}", out.stdout, out.stderr))
            ),
        });
    }
    Ok(metrics)
}

/// The fields of a CSV row whose fields are quoted and contain no quotes (what
/// redis-benchmark writes).
fn fields(row: &str) -> Vec<String> {
    row.split(',')
        .map(|f| f.trim().trim_matches('"').to_owned())
        .collect()
}

/// `LRANGE_100 (first 100 elements)` → `lrange_100`.
fn command_name(label: &str) -> String {
    let name = label.split(" (").next().unwrap_or(label).trim();
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parsers::test_output;

    const CSV: &str = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
\"SET\",\"43478.26\",\"0.155\",\"0.040\",\"0.127\",\"0.199\",\"0.295\",\"3.583\"\n\
\"LPUSH (needed to benchmark LRANGE)\",\"46511.62\",\"0.144\",\"0.040\",\"0.127\",\"0.191\",\"0.247\",\"3.391\"\n\
\"LPUSH\",\"46511.62\",\"0.144\",\"0.040\",\"0.127\",\"0.191\",\"0.247\",\"3.391\"\n\
\"LRANGE_100 (first 100 elements)\",\"20000.00\",\"0.400\",\"0.100\",\"0.390\",\"0.500\",\"0.600\",\"1.000\"\n";

    #[test]
    fn every_command_is_its_own_point() {
        let m = parse(&test_output(CSV)).unwrap();
        assert_eq!(m.len(), 4 * 6);
        assert_eq!(
            m[0],
            Metric::new("set_requests_per_second", "requests/s", Higher, 43478.26)
        );
        assert_eq!(m[4], Metric::new("set_latency_p99", "ms", Lower, 0.295));
        assert_eq!(m[6].name, "lpush_requests_per_second");
        assert_eq!(m[12].name, "lpush_2_requests_per_second");
        assert_eq!(m[18].name, "lrange_100_requests_per_second");
    }

    #[test]
    fn no_rows_and_no_output_are_errors_with_the_reason() {
        let out = RunOutput {
            stdout: "",
            stderr: "Could not connect to Redis at 127.0.0.1:1: Connection refused",
            ..test_output("")
        };
        let err = parse(&out).unwrap_err().to_string();
        assert!(err.contains("Connection refused"), "{err}");
        let err = parse(&test_output("\"test\",\"rps\"\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("avg_latency_ms"), "{err}");
    }
}
