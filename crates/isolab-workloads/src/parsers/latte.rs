//! latte's JSON report (`latte run --output {workdir}/cassandra-latte/latte.json`,
//! latte 0.29): the whole run and each workload function (`read`, `write`) as its
//! own measurement point. Latencies are latte's cycle latencies (one call of a
//! workload function), from its HDR histograms, in ms; latte reports percentiles
//! as a fixed array (min, 1, 2, 5, 10, 25, 50, 75, 90, 95, 98, 99, 99.9, 99.99,
//! max), of which isolab reads the 50th, 95th, 99th and the maximum.
//!
//! | name | unit | direction | source (`result.…`) |
//! |---|---|---|---|
//! | `latency_mean` | ms | lower | `cycle_latency.mean.value` (seed 002's mean response time) |
//! | `latency_p50`, `_p95`, `_p99`, `latency_max` | ms | lower | `cycle_latency.percentiles[…].value` |
//! | `operations_per_second` | op/s | higher | `cycle_throughput.value` |
//! | `requests_per_second` | requests/s | higher | `req_throughput.value` |
//! | `operations` | count | higher | `cycle_count` |
//! | `errors` | count | lower | `error_count` |
//! | `FN_latency_mean`, `FN_latency_p50`, … | ms | lower | `cycle_latency_by_fn.FN`, functions by name |
//!
//! latte counts a request that failed after its retries as an error and goes on;
//! the run's `errors` says how many. A report that is missing (latte stopped
//! early) is an error with the end of what latte printed.

use super::{finite_json, json_get, report_file, ParseError};
use crate::{Metric, ParserKind, RunOutput};
use isolab_stats::Direction::{Higher, Lower};

const TOOL: ParserKind = ParserKind::Latte;

/// The report's path inside the run's working directory.
pub const LATTE_REPORT: &str = "cassandra-latte/latte.json";

/// The percentiles read, by their index in latte's array, and the metric each becomes.
const PERCENTILES: [(usize, &str); 4] = [
    (6, "latency_p50"),
    (9, "latency_p95"),
    (11, "latency_p99"),
    (14, "latency_max"),
];

pub(super) fn parse(out: &RunOutput) -> Result<Vec<Metric>, ParseError> {
    let text = report_file(
        TOOL,
        out,
        LATTE_REPORT,
        "pass --output {workdir}/cassandra-latte/latte.json to latte run",
    )?;
    let root: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| ParseError::Json {
            tool: TOOL,
            excerpt: super::excerpt(&text),
            source,
        })?;
    let result = json_get(&root, &["result"]).ok_or_else(|| missing("`result`", &text))?;
    let number = |path: &[&str]| -> Result<f64, ParseError> {
        let v = json_get(result, path)
            .ok_or_else(|| missing(&format!("`result.{}`", path.join(".")), &text))?;
        finite_json(TOOL, &format!("result.{}", path.join(".")), v)
    };
    let cycle = json_get(result, &["cycle_latency"])
        .ok_or_else(|| missing("`result.cycle_latency`", &text))?;
    let mut metrics = latency("", "cycle_latency", cycle, &text)?;
    metrics.push(Metric::new(
        "operations_per_second",
        "op/s",
        Higher,
        number(&["cycle_throughput", "value"])?,
    ));
    metrics.push(Metric::new(
        "requests_per_second",
        "requests/s",
        Higher,
        number(&["req_throughput", "value"])?,
    ));
    metrics.push(Metric::new(
        "operations",
        "count",
        Higher,
        number(&["cycle_count"])?,
    ));
    metrics.push(Metric::new(
        "errors",
        "count",
        Lower,
        number(&["error_count"])?,
    ));
    if let Some(by_fn) = json_get(result, &["cycle_latency_by_fn"]).and_then(|v| v.as_object()) {
        let mut names: Vec<&String> = by_fn.keys().collect();
        names.sort();
        for name in names {
            let field = format!("cycle_latency_by_fn.{name}");
            metrics.extend(latency(&format!("{name}_"), &field, &by_fn[name], &text)?);
        }
    }
    Ok(metrics)
}

/// The mean and percentiles of one of latte's latency distributions, named with `prefix`.
fn latency(
    prefix: &str,
    field: &str,
    d: &serde_json::Value,
    text: &str,
) -> Result<Vec<Metric>, ParseError> {
    let value = |v: Option<&serde_json::Value>, what: &str| -> Result<f64, ParseError> {
        let name = format!("result.{field}.{what}");
        let v = v.ok_or_else(|| missing(&format!("`{name}`"), text))?;
        finite_json(TOOL, &name, v)
    };
    let mut m = vec![Metric::new(
        format!("{prefix}latency_mean"),
        "ms",
        Lower,
        value(json_get(d, &["mean", "value"]), "mean.value")?,
    )];
    let percentiles = d.get("percentiles").and_then(|p| p.as_array());
    for (i, name) in PERCENTILES {
        let v = percentiles
            .and_then(|p| p.get(i))
            .and_then(|p| p.get("value"));
        m.push(Metric::new(
            format!("{prefix}{name}"),
            "ms",
            Lower,
            value(v, &format!("percentiles[{i}].value"))?,
        ));
    }
    Ok(m)
}

fn missing(field: &str, text: &str) -> ParseError {
    ParseError::MissingField {
        tool: TOOL,
        field: field.to_owned(),
        excerpt: super::excerpt(text),
    }
}
