//! Exports of the metric observations of counted runs, with every factor level of
//! their cell: CSV and JSON (one row per observation), and Go's benchmark format, so
//! that `benchstat` (golang.org/x/perf/cmd/benchstat) runs on isolab data.
//!
//! # The benchstat format
//!
//! [`benchstat`] writes the Go benchmark format as `golang.org/x/perf/benchfmt` reads
//! it (<https://golang.org/design/14313-benchmark-format>):
//!
//! ```text
//! # isolab experiment 3: counted runs, one line per metric observation
//! cpu: AMD EPYC 7763 64-Core Processor
//!
//! Unit events/s better=higher
//! Unit s better=lower
//!
//! Benchmarksysbench-cpu/platform=host/placement=quota/metric=events_per_second 1 1234.5 events/s
//! Benchmarksysbench-cpu/platform=host/placement=quota/metric=total_time 1 10.02 s
//! ```
//!
//! - one result line per observation: `Benchmark<workload>/<factor>=<level>/…/metric=<metric>
//!   1 <value> <unit>`, the iteration count always 1. The benchmark's name is the cell's
//!   `workload` level (`isolab` when the cell has none); every other factor becomes a
//!   sub-benchmark key in the cell's factor order, so `benchstat -col /placement FILE`
//!   gives a column per placement (the first level in the file, which is the spec's
//!   first, is the base column; `-col "/placement@(quota pinned)"` chooses the order)
//!   and `-filter /platform:docker` selects cells. The `metric` key keeps apart metrics
//!   that share a unit. Lines follow the cells' order, then repetitions.
//! - names: whitespace and `/` inside a factor, level, workload or metric name become
//!   `_` (a `/` would start a new key); a name ending in `-<digits>` gets `_` for that
//!   `-`, which benchfmt would read as a GOMAXPROCS suffix.
//! - units: benchstat makes one table per unit. The metric's unit is written as it is
//!   (`events/s`, `ms`, `MB/s` are all valid; benchstat itself rescales `ns` to `sec`
//!   and `MB` to `B`), whitespace becoming `_`; a metric without unit uses its name. When
//!   metrics that share a unit disagree about their direction, each of them gets the
//!   unit `<metric>:<unit>`, because benchstat keeps one direction per unit.
//! - a `Unit <unit> better=higher|lower` line per unit gives its direction, so benchstat
//!   orients improvements correctly; `assume` is left at benchstat's default `nothing`
//!   (median and Mann-Whitney U test, as isolab).
//! - configuration: a `cpu: <model>` line (as `go test` writes) when the environment
//!   recorded it, and nothing that differs between experiments of one host, so that
//!   `benchstat old=A.txt new=B.txt` compares two experiments in one table. The
//!   experiment's id is in a comment line, which benchstat ignores.
//! - non-finite values are left out (benchfmt cannot read them).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use isolab_stats::Direction;

use isolab_store::Observation;

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Comma-separated values with a header row (RFC 4180 quoting).
    Csv,
    /// A JSON array of objects.
    Json,
    /// Go's benchmark format, for `benchstat` ([`benchstat`]).
    Benchstat,
}

/// Renders `obs` in `format`; `config` holds the file-level `key: value` lines of the
/// benchstat format (ignored by the others).
pub fn render(format: Format, obs: &[Observation], config: &[(String, String)]) -> String {
    match format {
        Format::Csv => csv(obs),
        Format::Json => json(obs) + "\n",
        Format::Benchstat => benchstat(obs, config),
    }
}

/// Quotes a CSV field when it needs it (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// Factor names in first-seen order over all observations.
fn factors(obs: &[Observation]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for o in obs {
        for (f, _) in &o.levels {
            if !out.contains(f) {
                out.push(f.clone());
            }
        }
    }
    out
}

/// Renders observations as CSV: `experiment,run,cell,<factors…>,repetition,metric,unit,direction,value`.
pub fn csv(obs: &[Observation]) -> String {
    let factors = factors(obs);
    let mut out = String::new();
    let mut header = vec!["experiment".to_owned(), "run".into(), "cell".into()];
    header.extend(factors.iter().cloned());
    header.extend(["repetition", "metric", "unit", "direction", "value"].map(String::from));
    out.push_str(
        &header
            .iter()
            .map(|h| csv_field(h))
            .collect::<Vec<_>>()
            .join(","),
    );
    out.push('\n');
    for o in obs {
        let mut row = vec![
            o.experiment.to_string(),
            o.run.to_string(),
            o.cell_index.to_string(),
        ];
        for f in &factors {
            row.push(
                o.levels
                    .iter()
                    .find(|(ff, _)| ff == f)
                    .map(|(_, l)| l.clone())
                    .unwrap_or_default(),
            );
        }
        row.push(o.repetition.to_string());
        row.push(o.metric.clone());
        row.push(o.unit.clone());
        row.push(o.direction.to_string());
        row.push(o.value.to_string());
        let _ = writeln!(
            out,
            "{}",
            row.iter()
                .map(|f| csv_field(f))
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    out
}

/// Renders observations as a JSON array; levels become an object.
pub fn json(obs: &[Observation]) -> String {
    let rows: Vec<serde_json::Value> = obs
        .iter()
        .map(|o| {
            let levels: serde_json::Map<String, serde_json::Value> =
                o.levels.iter().map(|(f, l)| (f.clone(), serde_json::Value::String(l.clone()))).collect();
            serde_json::json!({
                "experiment": o.experiment,
                "run": o.run,
                "cell": o.cell_index,
                "levels": levels,
                "repetition": o.repetition,
                "metric": o.metric,
                "unit": o.unit,
                "direction": o.direction,
                "value": if o.value.is_finite() { serde_json::json!(o.value) } else { serde_json::Value::Null },
            })
        })
        .collect();
    serde_json::to_string_pretty(&rows).unwrap_or_else(|_| "[]".into())
}

/// A name part for benchfmt: no whitespace (it ends the name) and no `/` (it starts a
/// new sub-benchmark key).
fn bench_name(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_whitespace() || c == '/' {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// The benchfmt unit of each metric: its own unit without whitespace (its name when it
/// has none), or `<metric>:<unit>` where metrics sharing a unit disagree on direction.
fn bench_units(obs: &[Observation]) -> BTreeMap<&str, (String, Direction)> {
    let plain = |o: &Observation| {
        if o.unit.trim().is_empty() {
            bench_name(&o.metric)
        } else {
            o.unit
                .trim()
                .chars()
                .map(|c| if c.is_whitespace() { '_' } else { c })
                .collect()
        }
    };
    let mut directions: BTreeMap<String, Vec<Direction>> = BTreeMap::new();
    for o in obs {
        let d = directions.entry(plain(o)).or_default();
        if !d.contains(&o.direction) {
            d.push(o.direction);
        }
    }
    let mut out = BTreeMap::new();
    for o in obs {
        out.entry(o.metric.as_str()).or_insert_with(|| {
            let unit = plain(o);
            if directions[&unit].len() > 1 {
                (format!("{}:{unit}", bench_name(&o.metric)), o.direction)
            } else {
                (unit, o.direction)
            }
        });
    }
    out
}

/// Renders observations in Go's benchmark format for `benchstat`: see the [module
/// documentation](self) for the mapping. `config` holds file-level `key: value`
/// lines (keys lower case without spaces, as benchfmt requires).
pub fn benchstat(obs: &[Observation], config: &[(String, String)]) -> String {
    let mut out = String::new();
    if let Some(o) = obs.first() {
        let _ = writeln!(
            out,
            "# isolab experiment {}: counted runs, one line per metric observation",
            o.experiment
        );
    }
    for (key, value) in config {
        let _ = writeln!(out, "{key}: {}", value.replace(['\n', '\r'], " "));
    }
    let units = bench_units(obs);
    let mut seen: Vec<&str> = Vec::new();
    let mut unit_lines = String::new();
    for (unit, direction) in units.values() {
        if !seen.contains(&unit.as_str()) {
            seen.push(unit);
            let _ = writeln!(unit_lines, "Unit {unit} better={direction}");
        }
    }
    if !unit_lines.is_empty() {
        out.push('\n');
        out.push_str(&unit_lines);
        out.push('\n');
    }
    for o in obs.iter().filter(|o| o.value.is_finite()) {
        let workload = o
            .levels
            .iter()
            .find(|(f, _)| f == "workload")
            .map_or("isolab", |(_, l)| l.as_str());
        let mut name = format!("Benchmark{}", bench_name(workload));
        for (f, l) in o.levels.iter().filter(|(f, _)| f != "workload") {
            let _ = write!(name, "/{}={}", bench_name(f), bench_name(l));
        }
        let _ = write!(name, "/metric={}", bench_name(&o.metric));
        // benchfmt reads a trailing `-<digits>` as the GOMAXPROCS suffix.
        if let Some(dash) = name.rfind('-') {
            let tail = &name[dash + 1..];
            if !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) {
                name.replace_range(dash..=dash, "_");
            }
        }
        let (unit, _) = &units[o.metric.as_str()];
        let _ = writeln!(out, "{name} 1 {} {unit}", o.value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use isolab_stats::Direction;

    fn obs(metric: &str, value: f64) -> Observation {
        Observation {
            experiment: 1,
            run: 2,
            cell_index: 0,
            levels: vec![("placement".into(), "quota".into())],
            repetition: 1,
            metric: metric.into(),
            unit: "events/s".into(),
            direction: Direction::Higher,
            value,
        }
    }

    #[test]
    fn benchstat_lines_name_the_workload_levels_and_metric() {
        let mut a = obs("events_per_second", 1234.5);
        a.levels = vec![
            ("platform".into(), "vm+isolab".into()),
            ("workload".into(), "sysbench-cpu".into()),
            ("placement".into(), "quota".into()),
        ];
        let mut b = a.clone();
        b.metric = "total time".into();
        b.unit = "s".into();
        b.direction = Direction::Lower;
        b.value = 10.25;
        let mut nan = a.clone();
        nan.value = f64::NAN;
        let text = benchstat(&[a, b, nan], &[("cpu".into(), "Synthetic CPU".into())]);
        assert_eq!(
            text,
            "# isolab experiment 1: counted runs, one line per metric observation\n\
             cpu: Synthetic CPU\n\
             \n\
             Unit events/s better=higher\n\
             Unit s better=lower\n\
             \n\
             Benchmarksysbench-cpu/platform=vm+isolab/placement=quota/metric=events_per_second 1 1234.5 events/s\n\
             Benchmarksysbench-cpu/platform=vm+isolab/placement=quota/metric=total_time 1 10.25 s\n"
        );
    }

    #[test]
    fn benchstat_names_and_units_are_valid_benchfmt() {
        let mut a = obs("p99-99", 3.0);
        a.levels = vec![("path".into(), "a/b c".into())];
        a.unit = "requests per s".into();
        let mut b = obs("hit rate", 0.5);
        b.unit = "".into();
        // A unit shared with opposite directions is qualified by the metric.
        let mut c = obs("lat", 2.0);
        c.unit = "requests per s".into();
        c.direction = Direction::Lower;
        let text = benchstat(&[a, b, c], &[]);
        assert!(
            text.contains("Benchmarkisolab/path=a_b_c/metric=p99_99 1 3 p99-99:requests_per_s\n"),
            "{text}"
        );
        assert!(
            text.contains("Benchmarkisolab/placement=quota/metric=hit_rate 1 0.5 hit_rate\n"),
            "{text}"
        );
        assert!(
            text.contains("Unit lat:requests_per_s better=lower\n"),
            "{text}"
        );
        assert!(text.contains("Unit hit_rate better=higher\n"), "{text}");
    }

    #[test]
    fn csv_has_one_row_per_observation_with_levels() {
        let text = csv(&[obs("a", 1.5), obs("b,c", 2.0)]);
        assert_eq!(
            text,
            "experiment,run,cell,placement,repetition,metric,unit,direction,value\n1,2,0,quota,1,a,events/s,higher,1.5\n1,2,0,quota,1,\"b,c\",events/s,higher,2\n"
        );
    }

    #[test]
    fn json_is_an_array_of_objects() {
        let v: serde_json::Value = serde_json::from_str(&json(&[obs("a", 1.5)])).unwrap();
        assert_eq!(v[0]["levels"]["placement"], "quota");
        assert_eq!(v[0]["value"], 1.5);
    }
}
