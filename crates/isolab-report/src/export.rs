//! Exports of the metric observations of counted runs, with every factor level of
//! their cell: CSV and JSON (one row per observation), and Go's benchmark format, so
//! that `benchstat` (golang.org/x/perf/cmd/benchstat) runs on isolab data; and of the
//! load intervals of service workloads ([`intervals_csv`], [`intervals_json`]): one row
//! per run, named request and second, with the same leading columns.
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

use isolab_store::{IntervalObservation, LoadInterval, Observation};

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Comma-separated values with a header row (RFC 4180 quoting).
    Csv,
    /// A JSON document: `schema_version` and an array of objects, one per row.
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

/// Where a row of a tidy export comes from: its experiment, run, cell (with its levels)
/// and repetition, the columns every export starts with.
struct RowKey<'a> {
    experiment: i64,
    run: i64,
    cell: u32,
    levels: &'a [(String, String)],
    repetition: u32,
}

/// Both kinds of exported row carry the same leading fields under the same names.
macro_rules! row_key_from {
    ($($row:ty),*) => {$(
        impl<'a> From<&'a $row> for RowKey<'a> {
            fn from(o: &'a $row) -> Self {
                RowKey {
                    experiment: o.experiment,
                    run: o.run,
                    cell: o.cell_index,
                    levels: &o.levels,
                    repetition: o.repetition,
                }
            }
        }
    )*};
}

row_key_from!(Observation, IntervalObservation);

/// Factor names in first-seen order over all rows.
fn factors(keys: &[RowKey<'_>]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for k in keys {
        for (f, _) in k.levels {
            if !out.contains(f) {
                out.push(f.clone());
            }
        }
    }
    out
}

/// A tidy CSV: `experiment,run,cell,<factors…>,repetition,<columns…>`, then one line per
/// row with the values `values` gives for `columns`.
fn tidy_csv<'a, R>(rows: &'a [R], columns: &[&str], values: impl Fn(&R) -> Vec<String>) -> String
where
    RowKey<'a>: From<&'a R>,
{
    let keys: Vec<RowKey<'a>> = rows.iter().map(RowKey::from).collect();
    let factors = factors(&keys);
    let mut header = vec!["experiment".to_owned(), "run".into(), "cell".into()];
    header.extend(factors.iter().cloned());
    header.push("repetition".into());
    header.extend(columns.iter().map(|c| (*c).to_owned()));
    // RFC 4180 through the `csv` crate: a field is quoted when it holds a comma, a quote
    // or a line break; lines end in `\n`.
    let mut out = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    let write = |out: &mut csv::Writer<Vec<u8>>, fields: &[String]| {
        out.write_record(fields)
            .expect("writing CSV into memory cannot fail");
    };
    write(&mut out, &header);
    for (key, row) in keys.iter().zip(rows) {
        let mut fields = vec![
            key.experiment.to_string(),
            key.run.to_string(),
            key.cell.to_string(),
        ];
        for f in &factors {
            fields.push(
                key.levels
                    .iter()
                    .find(|(ff, _)| ff == f)
                    .map(|(_, l)| l.clone())
                    .unwrap_or_default(),
            );
        }
        fields.push(key.repetition.to_string());
        fields.extend(values(row));
        write(&mut out, &fields);
    }
    let bytes = out
        .into_inner()
        .expect("flushing CSV into memory cannot fail");
    String::from_utf8(bytes).expect("CSV of UTF-8 fields is UTF-8")
}

/// A pretty JSON document, `{"schema_version": …, key: [rows]}`, with one object per
/// row: `experiment`, `run`, `cell`, `levels` (an object), `repetition`, then the fields
/// `fields` adds.
fn tidy_json<'a, R>(
    key: &str,
    rows: &'a [R],
    fields: impl Fn(&R, &mut serde_json::Map<String, serde_json::Value>),
) -> String
where
    RowKey<'a>: From<&'a R>,
{
    let rows: Vec<serde_json::Value> = rows
        .iter()
        .map(|row| {
            let key = RowKey::from(row);
            let levels: serde_json::Map<String, serde_json::Value> = key
                .levels
                .iter()
                .map(|(f, l)| (f.clone(), serde_json::Value::String(l.clone())))
                .collect();
            let mut object = serde_json::Map::new();
            object.insert("experiment".into(), key.experiment.into());
            object.insert("run".into(), key.run.into());
            object.insert("cell".into(), key.cell.into());
            object.insert("levels".into(), levels.into());
            object.insert("repetition".into(), key.repetition.into());
            fields(row, &mut object);
            serde_json::Value::Object(object)
        })
        .collect();
    let document = crate::schema::versioned(serde_json::Value::Array(rows), key);
    serde_json::to_string_pretty(&document).expect("a JSON value serializes")
}

/// A finite number as JSON, anything else as `null`.
fn json_number(v: f64) -> serde_json::Value {
    if v.is_finite() {
        serde_json::json!(v)
    } else {
        serde_json::Value::Null
    }
}

/// Renders observations as CSV: `experiment,run,cell,<factors…>,repetition,metric,unit,direction,value`.
pub fn csv(obs: &[Observation]) -> String {
    tidy_csv(obs, &["metric", "unit", "direction", "value"], |o| {
        vec![
            o.metric.clone(),
            o.unit.clone(),
            o.direction.to_string(),
            o.value.to_string(),
        ]
    })
}

/// Renders observations as `{"schema_version": …, "observations": [...]}`; levels become
/// an object.
pub fn json(obs: &[Observation]) -> String {
    tidy_json("observations", obs, |o, out| {
        out.insert("metric".into(), o.metric.clone().into());
        out.insert("unit".into(), o.unit.clone().into());
        out.insert("direction".into(), serde_json::json!(o.direction));
        out.insert("value".into(), json_number(o.value));
    })
}

/// The columns of a load-interval export after the run's, in order; each is a field of
/// [`LoadInterval`](isolab_store::LoadInterval).
pub const INTERVAL_COLUMNS: [&str; 11] = [
    "request",
    "start_s",
    "users",
    "target_rate",
    "requests",
    "failures",
    "latency_mean_ms",
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p99_ms",
    "latency_max_ms",
];

/// The optional measurements of an interval after its counts, in [`INTERVAL_COLUMNS`]
/// order.
fn latencies(i: &LoadInterval) -> [Option<f64>; 5] {
    [
        i.latency_mean_ms,
        i.latency_p50_ms,
        i.latency_p90_ms,
        i.latency_p99_ms,
        i.latency_max_ms,
    ]
}

/// Renders load intervals (`isolab export --series`) as a tidy CSV, one line per run,
/// request and second: `experiment,run,cell,<factors…>,repetition,request,start_s,users,
/// target_rate,requests,failures,latency_mean_ms,latency_p50_ms,latency_p90_ms,
/// latency_p99_ms,latency_max_ms`; a value the generator did not report is empty.
pub fn intervals_csv(rows: &[IntervalObservation]) -> String {
    let optional = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    tidy_csv(rows, &INTERVAL_COLUMNS, |o| {
        let i = &o.interval;
        let mut fields = vec![
            i.request.clone(),
            i.start_s.to_string(),
            optional(i.users),
            optional(i.target_rate),
            i.requests.to_string(),
            i.failures.to_string(),
        ];
        fields.extend(latencies(i).map(optional));
        fields
    })
}

/// Renders load intervals as `{"schema_version": …, "intervals": [...]}`: objects with
/// the [`INTERVAL_COLUMNS`] as fields, levels as an object, unreported values `null`.
pub fn intervals_json(rows: &[IntervalObservation]) -> String {
    let optional = |v: Option<f64>| v.map_or(serde_json::Value::Null, json_number);
    tidy_json("intervals", rows, |o, out| {
        let i = &o.interval;
        let values = [
            i.request.clone().into(),
            json_number(i.start_s),
            optional(i.users),
            optional(i.target_rate),
            i.requests.into(),
            i.failures.into(),
        ]
        .into_iter()
        .chain(latencies(i).map(optional));
        for (column, value) in INTERVAL_COLUMNS.iter().zip(values) {
            out.insert((*column).into(), value);
        }
    })
}

/// Renders load intervals in `format`: CSV or JSON, `None` for [`Format::Benchstat`],
/// which has no form for series.
pub fn render_intervals(format: Format, rows: &[IntervalObservation]) -> Option<String> {
    match format {
        Format::Csv => Some(intervals_csv(rows)),
        Format::Json => Some(intervals_json(rows) + "\n"),
        Format::Benchstat => None,
    }
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

    fn interval(request: &str, start_s: f64, p50: Option<f64>) -> IntervalObservation {
        IntervalObservation {
            experiment: 1,
            run: 7,
            cell_index: 0,
            levels: vec![
                ("platform".into(), "host".into()),
                ("workload".into(), "nginx".into()),
            ],
            repetition: 2,
            interval: LoadInterval {
                request: request.into(),
                start_s,
                users: Some(3.0),
                target_rate: None,
                requests: 120,
                failures: 2,
                latency_mean_ms: Some(4.25),
                latency_p50_ms: p50,
                latency_p90_ms: None,
                latency_p99_ms: Some(19.0),
                latency_max_ms: Some(31.5),
            },
        }
    }

    #[test]
    fn intervals_csv_has_one_row_per_run_request_and_second() {
        let text = intervals_csv(&[interval("home", 0.0, Some(3.5)), interval("a,b", 1.0, None)]);
        assert_eq!(
            text,
            "experiment,run,cell,platform,workload,repetition,request,start_s,users,target_rate,requests,failures,latency_mean_ms,latency_p50_ms,latency_p90_ms,latency_p99_ms,latency_max_ms\n\
             1,7,0,host,nginx,2,home,0,3,,120,2,4.25,3.5,,19,31.5\n\
             1,7,0,host,nginx,2,\"a,b\",1,3,,120,2,4.25,,,19,31.5\n"
        );
    }

    #[test]
    fn intervals_json_has_every_column_and_null_for_the_unreported() {
        let text = render_intervals(Format::Json, &[interval("home", 0.0, None)]).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["schema_version"], crate::SCHEMA_VERSION);
        let row = &v["intervals"][0];
        assert_eq!(row["levels"]["workload"], "nginx");
        assert_eq!(
            (row["run"].clone(), row["repetition"].clone()),
            (7.into(), 2.into())
        );
        assert_eq!(row["request"], "home");
        assert_eq!(row["requests"], 120);
        assert_eq!(row["latency_mean_ms"], 4.25);
        assert!(row["latency_p50_ms"].is_null() && row["target_rate"].is_null());
        for c in INTERVAL_COLUMNS {
            assert!(row.get(c).is_some(), "{c}");
        }
        assert!(render_intervals(Format::Benchstat, &[]).is_none());
    }

    #[test]
    fn json_is_a_versioned_array_of_objects() {
        let v: serde_json::Value = serde_json::from_str(&json(&[obs("a", 1.5)])).unwrap();
        assert_eq!(v["schema_version"], crate::SCHEMA_VERSION);
        assert_eq!(v["observations"][0]["levels"]["placement"], "quota");
        assert_eq!(v["observations"][0]["value"], 1.5);
    }
}
