//! fio `--output-format=json` report (one job group, `--group_reporting`).
//!
//! For each direction with I/O (`read`, `write`, `trim`: `total_ios` > 0), with
//! `D` the direction:
//!
//! | name | unit | direction | source |
//! |---|---|---|---|
//! | `D_iops` | IOPS | higher | `D.iops` |
//! | `D_bandwidth` | KiB/s | higher | `D.bw_bytes` / 1024 |
//! | `D_clat_mean` | ms | lower | `D.clat_ns.mean` |
//! | `D_clat_p50`, `D_clat_p99` | ms | lower | `D.clat_ns.percentile` 50 and 99 (when fio reports percentiles) |
//!
//! and over all directions: `iops` (IOPS, higher) and `bandwidth` (KiB/s, higher), the sums.

use super::{
    excerpt, finite_json, first_json, json_get, json_number, json_start, tail, ParseError,
};
use crate::{Metric, ParserKind, RunOutput};
use isolab_stats::Direction::{Higher, Lower};

const TOOL: ParserKind = ParserKind::Fio;

pub(super) fn parse(out: &RunOutput) -> Result<Vec<Metric>, ParseError> {
    if json_start(out.stdout).is_none() {
        if has_fio_lines(out.stdout) || has_fio_lines(out.stderr) {
            // fio failed before its report (bad option, missing directory): its
            // messages are the only explanation.
            return Err(ParseError::ToolError {
                tool: TOOL,
                message: format!("no JSON report: {}", fio_messages(out)),
            });
        }
        if !out.stdout.trim().is_empty() {
            return Err(ParseError::MissingField {
                tool: TOOL,
                field: "JSON report (is `--output-format=json` on the command?)".to_owned(),
                excerpt: excerpt(out.stdout),
            });
        }
    }
    let root = first_json(TOOL, out)?;
    let jobs = json_get(&root, &["jobs"])
        .and_then(|j| j.as_array())
        .ok_or_else(|| ParseError::MissingField {
            tool: TOOL,
            field: "`jobs` array".to_owned(),
            excerpt: excerpt(out.stdout),
        })?;
    let [job] = jobs.as_slice() else {
        return Err(ParseError::FioJobs { count: jobs.len() });
    };
    let name = job.get("jobname").and_then(|n| n.as_str()).unwrap_or("?");
    let errno = json_number(TOOL, job, &["error"], out)?;
    if errno != 0.0 {
        return Err(ParseError::ToolError {
            tool: TOOL,
            message: format!(
                "job `{name}` failed with error {errno}: {}",
                fio_messages(out)
            ),
        });
    }

    let mut metrics = Vec::new();
    let (mut iops, mut bandwidth) = (0.0, 0.0);
    let mut any = false;
    for dir in ["read", "write", "trim"] {
        let Some(d) = job.get(dir) else { continue };
        if json_number(TOOL, d, &["total_ios"], out)? <= 0.0 {
            continue;
        }
        any = true;
        let field = |path: &[&str]| -> Result<f64, ParseError> {
            let v = json_get(d, path).ok_or_else(|| ParseError::MissingField {
                tool: TOOL,
                field: format!("`jobs[0].{dir}.{}`", path.join(".")),
                excerpt: excerpt(out.stdout),
            })?;
            finite_json(TOOL, &format!("jobs[0].{dir}.{}", path.join(".")), v)
        };
        let dir_iops = field(&["iops"])?;
        let dir_bw = field(&["bw_bytes"])? / 1024.0;
        iops += dir_iops;
        bandwidth += dir_bw;
        metrics.push(Metric::new(format!("{dir}_iops"), "IOPS", Higher, dir_iops));
        metrics.push(Metric::new(
            format!("{dir}_bandwidth"),
            "KiB/s",
            Higher,
            dir_bw,
        ));
        metrics.push(Metric::new(
            format!("{dir}_clat_mean"),
            "ms",
            Lower,
            field(&["clat_ns", "mean"])? / 1e6,
        ));
        for (p, key) in [("p50", "50.000000"), ("p99", "99.000000")] {
            if json_get(d, &["clat_ns", "percentile", key]).is_some() {
                metrics.push(Metric::new(
                    format!("{dir}_clat_{p}"),
                    "ms",
                    Lower,
                    field(&["clat_ns", "percentile", key])? / 1e6,
                ));
            }
        }
    }
    if !any {
        return Err(ParseError::ToolError {
            tool: TOOL,
            message: format!(
                "job `{name}` did no I/O (total_ios is 0 in every direction): {}",
                fio_messages(out)
            ),
        });
    }
    metrics.push(Metric::new("iops", "IOPS", Higher, iops));
    metrics.push(Metric::new("bandwidth", "KiB/s", Higher, bandwidth));
    Ok(metrics)
}

/// Whether `text` holds one of fio's own `fio: …` message lines.
fn has_fio_lines(text: &str) -> bool {
    text.lines().any(|l| l.trim_start().starts_with("fio:"))
}

/// fio's own error lines (`fio: …`) from stderr and stdout, or the end of stderr.
fn fio_messages(out: &RunOutput) -> String {
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .chain(out.stdout.lines())
        .map(str::trim)
        .filter(|l| l.starts_with("fio:"))
        .collect();
    if lines.is_empty() {
        let t = tail(out.stderr);
        if t.is_empty() {
            "fio printed no message".to_owned()
        } else {
            t
        }
    } else {
        excerpt(&lines.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::parsers::test_output as out;

    const ONE_JOB: &str = r#"{"jobs":[{"jobname":"j","error":0,
        "read":{"total_ios":10,"iops":100.5,"bw_bytes":2048,"clat_ns":{"mean":1500000.0}},
        "write":{"total_ios":0,"iops":0,"bw_bytes":0,"clat_ns":{"mean":0}}}]}"#;

    #[test]
    fn directions_without_io_are_left_out_and_percentiles_are_optional() {
        let m = parse(&out(ONE_JOB)).unwrap();
        let names: Vec<&str> = m.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "read_iops",
                "read_bandwidth",
                "read_clat_mean",
                "iops",
                "bandwidth"
            ]
        );
        assert_eq!(m[1].value, 2.0);
        assert_eq!(m[2].value, 1.5);
    }

    #[test]
    fn leading_warnings_are_skipped() {
        let text = format!("fio: note: something harmless\n{ONE_JOB}\n");
        assert!(parse(&out(&text)).is_ok());
    }

    #[test]
    fn truncated_json_is_an_error_with_excerpt() {
        let err = parse(&out(&ONE_JOB[..60])).unwrap_err();
        assert!(matches!(err, ParseError::Json { .. }), "{err:?}");
        assert!(
            err.to_string()
                .starts_with("fio: the output is not a complete JSON report"),
            "{err}"
        );
    }

    #[test]
    fn more_than_one_job_needs_group_reporting() {
        let err = parse(&out(r#"{"jobs":[{},{}]}"#)).unwrap_err();
        assert!(err.to_string().contains("--group_reporting"), "{err}");
    }

    #[test]
    fn missing_fields_are_named() {
        let err = parse(&out(&ONE_JOB.replace("\"iops\":100.5,", ""))).unwrap_err();
        assert!(err.to_string().contains("`jobs[0].read.iops`"), "{err}");
        let err = parse(&out(r#"{"fio version":"fio-3.33"}"#)).unwrap_err();
        assert!(err.to_string().contains("`jobs` array"), "{err}");
        let err = parse(&out("")).unwrap_err();
        assert!(matches!(err, ParseError::Empty { .. }));
    }
}
