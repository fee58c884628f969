//! vegeta 12 (`go install github.com/tsenart/vegeta/v12@v12.13.0`, by
//! `scripts/setup.sh`): an open loop at a constant rate per step, read back from its
//! results encoded as CSV.
//!
//! Each step of the profile (a `rate` profile is one step) is one command:
//! `vegeta -cpus THREADS attack -targets targets.txt -format http -rate FREQ/PER
//! -duration D -timeout T -max-workers W -max-body 0 -name step-I -output
//! results-I.bin`. The targets file lists the requests, which vegeta sends in turn.
//! The rate is `N/1s` for a whole number, else in thousandths (`2500/1000s` for 2.5/s);
//! `-max-workers` is enough for every request of `rate × (timeout + 1 s)` to be in
//! flight at once (at least 100), so workers never hold the rate back unless the host
//! cannot; response bodies are not kept (`-max-body 0`). A last command encodes every
//! step's results into one CSV: `vegeta encode --to csv --output results.csv
//! results-0.bin …`. `vegeta-requests.json` maps each method and URL back to its
//! request's name for [`parse_load`].
//!
//! [`parse_load`] reads `results.csv`, which has no header: its columns are documented by
//! `vegeta encode -h` (timestamp in ns since the epoch, status code, latency in ns, bytes
//! out, bytes in, error, base64 body, attack name, sequence number, method, URL, base64
//! headers). A request fails when it has an error (a timeout, a refused connection:
//! status code 0) or a status outside 200–399.
//!
//! [`parse_load`]: super::parse_load

use super::csv::{number, Csv};
use super::result::{summarize, Sample};
use super::{
    go_duration, in_dir, open_file, read_file, BaseUrl, Generator, Invocation, LoadProfile,
    LoadResult, LoadSpec, Output, ParseError,
};
use std::collections::BTreeMap;
use std::path::Path;

/// The targets file's name in the working directory.
pub const TARGETS: &str = "targets.txt";
/// The file mapping method and URL to request names, in the working directory.
pub const REQUESTS: &str = "vegeta-requests.json";
/// The encoded results' file name in the working directory.
pub const RESULTS: &str = "results.csv";

/// The columns of `vegeta encode --to csv` that the parser reads (0-based).
const TIMESTAMP: usize = 0;
const CODE: usize = 1;
const LATENCY: usize = 2;
const ERROR: usize = 5;
const METHOD: usize = 9;
const URL: usize = 10;
/// The columns vegeta 12.13 writes, as `vegeta encode -h` lists them.
const COLUMNS: [&str; 12] = [
    "timestamp",
    "code",
    "latency",
    "bytes_out",
    "bytes_in",
    "error",
    "body",
    "attack",
    "seq",
    "method",
    "url",
    "headers",
];

/// `rate` requests per second as vegeta's `-rate` value.
fn rate_flag(rate: f64) -> String {
    if rate.fract() == 0.0 {
        format!("{rate:.0}/1s")
    } else {
        format!("{:.0}/1000s", (rate * 1000.0).round())
    }
}

/// The targets file and the `vegeta` commands for `spec` (checked by
/// [`super::invocation`]).
pub(crate) fn invocation(
    spec: &LoadSpec,
    url: &BaseUrl,
    workdir: &Path,
    threads: u32,
) -> Invocation {
    let steps = match &spec.profile {
        LoadProfile::Rate { rate, duration } => vec![(*rate, *duration)],
        LoadProfile::Steps { steps } => steps.clone(),
        _ => unreachable!("vegeta supports only rate and steps profiles, checked by invocation()"),
    };
    let targets: String = spec
        .requests
        .iter()
        .map(|r| format!("{} {}\n\n", r.method, url.url(r)))
        .collect();
    let names: Vec<serde_json::Value> = spec
        .requests
        .iter()
        .map(|r| serde_json::json!({"name": r.name, "method": r.method, "url": url.url(r)}))
        .collect();
    let timeout = spec.timeout.as_secs_f64();
    let mut commands = Vec::new();
    let mut results = Vec::new();
    for (i, (rate, duration)) in steps.iter().enumerate() {
        let output = in_dir(workdir, &format!("results-{i}.bin"));
        let max_workers = ((rate * (timeout + 1.0)).ceil() as u64).max(100);
        commands.push(
            [
                spec.generator.program(),
                "-cpus",
                &threads.to_string(),
                "attack",
                "-targets",
                &in_dir(workdir, TARGETS),
                "-format",
                "http",
                "-rate",
                &rate_flag(*rate),
                "-duration",
                &go_duration(*duration),
                "-timeout",
                &go_duration(spec.timeout),
                "-max-workers",
                &max_workers.to_string(),
                "-max-body",
                "0",
                "-name",
                &format!("step-{i}"),
                "-output",
                &output,
            ]
            .map(str::to_owned)
            .to_vec(),
        );
        results.push(output);
    }
    let mut encode: Vec<String> = [
        spec.generator.program(),
        "encode",
        "--to",
        "csv",
        "--output",
        &in_dir(workdir, RESULTS),
    ]
    .map(str::to_owned)
    .to_vec();
    encode.extend(results);
    commands.push(encode);
    Invocation {
        files: vec![
            (TARGETS.to_owned(), targets),
            (
                REQUESTS.to_owned(),
                serde_json::Value::from(names).to_string(),
            ),
        ],
        commands,
        env: Vec::new(),
    }
}

/// Reads `results.csv` (and the request names) in `workdir`.
pub(crate) fn parse(workdir: &Path, output: &Output) -> Result<LoadResult, ParseError> {
    let tool = Generator::Vegeta;
    let (map_path, map_text) = read_file(tool, workdir, REQUESTS, output)?;
    let map: Vec<serde_json::Value> =
        serde_json::from_str(&map_text).map_err(|source| ParseError::Json {
            tool,
            path: map_path.clone(),
            excerpt: super::excerpt(&map_text),
            source,
        })?;
    let mut names: Vec<String> = Vec::new();
    let mut by_target: BTreeMap<(String, String), usize> = BTreeMap::new();
    for entry in &map {
        let field = |k: &str| {
            entry
                .get(k)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| ParseError::MissingField {
                    tool,
                    path: map_path.clone(),
                    field: format!("`{k}` in an entry"),
                    excerpt: super::excerpt(&map_text),
                })
        };
        by_target.insert((field("method")?, field("url")?), names.len());
        names.push(field("name")?);
    }

    let (path, file) = open_file(tool, workdir, RESULTS, output)?;
    let mut rows = Csv::headless(tool, &path, file, &COLUMNS);
    let mut samples = Vec::new();
    let mut failures: BTreeMap<(String, String), u64> = BTreeMap::new();
    for row in rows.by_ref() {
        let (line, row) = row?;
        let num = |i: usize| number(tool, &path, line, COLUMNS[i], &row[i]);
        let target = (row[METHOD].clone(), row[URL].clone());
        let index = match by_target.get(&target) {
            Some(i) => *i,
            None => {
                names.push(target.1.clone());
                by_target.insert(target, names.len() - 1);
                names.len() - 1
            }
        };
        let code = num(CODE)?;
        let error = row[ERROR].trim();
        let ok = error.is_empty() && (200.0..400.0).contains(&code);
        if !ok {
            let why = if error.is_empty() {
                format!("status {code}")
            } else {
                error.to_owned()
            };
            *failures.entry((names[index].clone(), why)).or_default() += 1;
        }
        samples.push(Sample {
            name: index,
            start_ms: num(TIMESTAMP)? / 1e6,
            latency_ms: num(LATENCY)? / 1e6,
            ok,
            users: None,
        });
    }
    if samples.is_empty() {
        return Err(ParseError::NoRequests {
            tool,
            path,
            output: output.tail(),
        });
    }
    // Names in order of first appearance, as for the other tools.
    let mut order: Vec<usize> = Vec::new();
    for s in &samples {
        if !order.contains(&s.name) {
            order.push(s.name);
        }
    }
    let ordered: Vec<String> = order.iter().map(|&i| names[i].clone()).collect();
    for s in &mut samples {
        s.name = order.iter().position(|&i| i == s.name).unwrap_or(0);
    }
    let mut result = summarize(&ordered, &samples);
    result.notes = super::jmeter::failure_notes(&failures);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{parse_files, spec};
    use super::super::{invocation as build, Request};
    use super::*;
    use std::time::Duration;

    #[test]
    fn one_attack_per_step_then_one_encode() {
        let mut s = spec(
            Generator::Vegeta,
            LoadProfile::Steps {
                steps: vec![
                    (50.0, Duration::from_secs(2)),
                    (2.5, Duration::from_millis(1500)),
                ],
            },
        );
        s.requests.push(Request::get("search", "/?s=x"));
        let inv = build(&s, "http://10.0.0.2:8080", Path::new("/w"), 2).unwrap();
        assert_eq!(inv.commands.len(), 3);
        assert_eq!(
            inv.commands[0].join(" "),
            "vegeta -cpus 2 attack -targets /w/targets.txt -format http -rate 50/1s \
             -duration 2000ms -timeout 5000ms -max-workers 300 -max-body 0 -name step-0 \
             -output /w/results-0.bin"
        );
        assert!(inv.commands[1]
            .join(" ")
            .contains("-rate 2500/1000s -duration 1500ms"));
        assert!(inv.commands[1].join(" ").contains("-max-workers 100 "));
        assert_eq!(
            inv.commands[2].join(" "),
            "vegeta encode --to csv --output /w/results.csv /w/results-0.bin /w/results-1.bin"
        );
        assert_eq!(
            inv.files[0],
            (
                TARGETS.to_owned(),
                "GET http://10.0.0.2:8080/index.html\n\nGET http://10.0.0.2:8080/?s=x\n\n"
                    .to_owned()
            )
        );
    }

    fn parse_text(csv: &str) -> Result<LoadResult, ParseError> {
        let names = r#"[{"name":"front","method":"GET","url":"http://h/index.html"}]"#;
        parse_files(Generator::Vegeta, &[(REQUESTS, names), (RESULTS, csv)], "")
    }

    #[test]
    fn errors_and_bad_codes_fail_and_rows_are_checked() {
        let ok = "1700000000000000000,200,1000000,0,10000,,,step-0,0,GET,http://h/index.html,\n";
        let refused = "1700000000500000000,0,2000000,0,0,\"Get \"\"http://h/index.html\"\": dial tcp: connection refused\",,step-0,1,GET,http://h/index.html,\n";
        let bad = "1700000001500000000,503,3000000,0,0,,,step-0,2,GET,http://h/index.html,\n";
        let r = parse_text(&format!("{ok}{refused}{bad}")).unwrap();
        assert_eq!((r.overall.requests, r.overall.failures), (3, 2));
        assert_eq!(r.requests[0].name, "front");
        assert_eq!(r.intervals.len(), 2);
        assert_eq!(r.intervals[1].failures, 1);
        assert_eq!(r.overall.latency_ms.unwrap().max, 3.0);
        assert!(
            r.notes
                .iter()
                .any(|n| n == "front: 1 failed with status 503"),
            "{:?}",
            r.notes
        );

        let e = parse_text("").unwrap_err().to_string();
        assert!(
            e.starts_with("vegeta:") && e.contains("records no request"),
            "{e}"
        );
        let e = parse_text(&format!("{ok}1700000000000000000,200,10"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("results.csv line 2") && e.contains("3 fields"),
            "{e}"
        );
        let e = parse_text("x,200,1,0,0,,,a,0,GET,u,\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`timestamp` is \"x\""), "{e}");
    }
}
