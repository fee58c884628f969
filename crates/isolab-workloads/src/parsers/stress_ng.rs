//! stress-ng `--metrics --yaml {workdir}/stress-ng.yaml` report.
//!
//! stress-ng's YAML report holds one entry per stressor under `metrics:`. With
//! `S` the stressor's name in snake_case (`cpu`, `vm`, `matrix`, `cache`, …):
//!
//! | name | unit | direction | source |
//! |---|---|---|---|
//! | `S_bogo_ops_per_second_real_time` | bogo-ops/s | higher | `bogo-ops-per-second-real-time` |
//! | `S_bogo_ops_per_second_usr_sys_time` | bogo-ops/s | higher | `bogo-ops-per-second-usr-sys-time` |
//!
//! The rate over real (wall) time is what a user of the stressor experiences
//! and is the built-ins' primary metric; the rate over user+system CPU time
//! shows the work done per CPU second.

use super::{excerpt, tail, ParseError};
use crate::{Metric, ParserKind, RunOutput};
use isolab_stats::Direction::Higher;
use yaml_rust2::{Yaml, YamlEmitter, YamlLoader};

const TOOL: ParserKind = ParserKind::StressNg;

/// File name of stress-ng's YAML report inside the run's working directory:
/// stress-ng commands must pass `--yaml {workdir}/stress-ng.yaml`.
pub const STRESS_NG_REPORT: &str = "stress-ng.yaml";

/// The report's fields read per stressor: YAML key and metric suffix.
const RATES: [(&str, &str); 2] = [
    (
        "bogo-ops-per-second-real-time",
        "bogo_ops_per_second_real_time",
    ),
    (
        "bogo-ops-per-second-usr-sys-time",
        "bogo_ops_per_second_usr_sys_time",
    ),
];

pub(super) fn parse(out: &RunOutput) -> Result<Vec<Metric>, ParseError> {
    let path = out.workdir.join(STRESS_NG_REPORT);
    let text = std::fs::read_to_string(&path).map_err(|source| ParseError::ReportFile {
        path: path.clone(),
        source,
        output: tail(&format!("{}\n{}", out.stdout, out.stderr)),
    })?;
    let missing = |field: String| ParseError::MissingField {
        tool: TOOL,
        field,
        excerpt: excerpt(&text),
    };
    let doc = load(&text).map_err(|source| ParseError::Yaml {
        path: path.clone(),
        excerpt: excerpt(&text),
        source,
    })?;
    let entries = doc["metrics"]
        .as_vec()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            missing(format!(
                "`metrics:` list of stressors in {}",
                path.display()
            ))
        })?;

    let mut metrics = Vec::new();
    for entry in entries {
        let stressor = entry["stressor"]
            .as_str()
            .ok_or_else(|| missing("`stressor:` name in a `metrics:` entry".to_owned()))?;
        let prefix = snake_case(stressor);
        for (key, suffix) in RATES {
            let v = &entry[key];
            if v.is_badvalue() {
                return Err(missing(format!("`{key}:` of stressor `{stressor}`")));
            }
            let value =
                number(v)
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| ParseError::BadNumber {
                        tool: TOOL,
                        field: format!("`{key}` of stressor `{stressor}`"),
                        value: shown(v),
                    })?;
            metrics.push(Metric::new(
                format!("{prefix}_{suffix}"),
                "bogo-ops/s",
                Higher,
                value,
            ));
        }
    }
    Ok(metrics)
}

/// The longest `wall-clock-time` of the report's stressors, in seconds.
pub(super) fn wall_clock_time(out: &RunOutput) -> Option<f64> {
    let text = std::fs::read_to_string(out.workdir.join(STRESS_NG_REPORT)).ok()?;
    load(&text).ok()?["metrics"]
        .as_vec()?
        .iter()
        .filter_map(|e| number(&e["wall-clock-time"]))
        .reduce(f64::max)
}

/// The first document of a YAML text; `Yaml::BadValue` (every key missing) when there is
/// none, as in an empty file.
fn load(text: &str) -> Result<Yaml, yaml_rust2::ScanError> {
    Ok(YamlLoader::load_from_str(text)?
        .into_iter()
        .next()
        .unwrap_or(Yaml::BadValue))
}

/// A YAML number as `f64`: an integer (`2`) or a real (`1.5`, `.inf`); `None` for any
/// other value.
fn number(v: &Yaml) -> Option<f64> {
    match v {
        Yaml::Integer(i) => Some(*i as f64),
        _ => v.as_f64(),
    }
}

/// A value as the report wrote it, for an error message: a scalar as is, a list or map
/// as YAML.
fn shown(v: &Yaml) -> String {
    match v {
        Yaml::Real(s) | Yaml::String(s) => s.clone(),
        Yaml::Integer(i) => i.to_string(),
        Yaml::Boolean(b) => b.to_string(),
        Yaml::Null => "null".to_owned(),
        _ => {
            let mut out = String::new();
            let _ = YamlEmitter::new(&mut out).dump(v);
            out.trim_start_matches("---").trim().to_owned()
        }
    }
}

/// `name` with every run of non-alphanumeric characters turned into one `_`, lowercased.
fn snake_case(name: &str) -> String {
    let mut s = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.ends_with('_') {
            s.push('_');
        }
    }
    s.trim_matches('_').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn parse_yaml(yaml: &str) -> Result<Vec<Metric>, ParseError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(STRESS_NG_REPORT), yaml).unwrap();
        parse(&RunOutput {
            stdout: "",
            stderr: "",
            workdir: dir.path(),
            wall: Duration::from_secs(1),
        })
    }

    #[test]
    fn stressor_names_become_snake_case() {
        assert_eq!(snake_case("cpu-online"), "cpu_online");
        assert_eq!(snake_case("AF--alg"), "af_alg");
        let m = parse_yaml(
            "metrics:\n  - stressor: cpu-online\n    bogo-ops-per-second-real-time: 2\n    bogo-ops-per-second-usr-sys-time: 1.5\n",
        )
        .unwrap();
        assert_eq!(m[0].name, "cpu_online_bogo_ops_per_second_real_time");
        assert_eq!(m[1].value, 1.5);
    }

    #[test]
    fn missing_report_file_says_how_to_write_it() {
        let dir = tempfile::tempdir().unwrap();
        let err = parse(&RunOutput {
            stdout: "stress-ng: error: [1] cannot find stressor\n",
            stderr: "",
            workdir: dir.path(),
            wall: Duration::from_secs(1),
        })
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("stress-ng.yaml"), "{msg}");
        assert!(
            msg.contains("--metrics --yaml {workdir}/stress-ng.yaml"),
            "{msg}"
        );
        assert!(msg.contains("cannot find stressor"), "{msg}");
    }

    #[test]
    fn empty_truncated_and_wrong_reports_are_errors() {
        let err = parse_yaml("").unwrap_err();
        assert!(err.to_string().contains("`metrics:` list"), "{err}");
        let err = parse_yaml("metrics:\n  - stressor: cpu\n    bogo-ops: 1\n").unwrap_err();
        assert!(
            err.to_string()
                .contains("`bogo-ops-per-second-real-time:` of stressor `cpu`"),
            "{err}"
        );
        let err = parse_yaml("metrics:\n  - stressor: cpu\n    bogo-ops-per-second-real-time: fast\n    bogo-ops-per-second-usr-sys-time: 1\n").unwrap_err();
        assert!(matches!(err, ParseError::BadNumber { .. }), "{err:?}");
        let err = parse_yaml("metrics:\n  - stressor: [cpu\n").unwrap_err();
        assert!(matches!(err, ParseError::Yaml { .. }), "{err:?}");
    }
}
