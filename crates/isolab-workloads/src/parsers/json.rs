//! The `json` parser: a program of the user's (or one of isolab's own clients, such
//! as the database micro-operation scripts of the service stacks) prints its metrics
//! as one JSON object on stdout:
//!
//! ```json
//! {"metrics": [{"name": "select_time", "unit": "ms", "direction": "lower", "value": 0.52}]}
//! ```
//!
//! Lines before the object (progress, "Connected successfully") are skipped; every
//! metric needs all four fields, a `direction` of `lower` or `higher` and a finite
//! value.

use super::{excerpt, first_json, ParseError};
use crate::{Metric, ParserKind, RunOutput};
use isolab_stats::Direction;

/// The metrics of the JSON object on stdout.
pub fn parse(out: &RunOutput) -> Result<Vec<Metric>, ParseError> {
    let tool = ParserKind::Json;
    let root = first_json(tool, out)?;
    let missing = |field: &str| ParseError::MissingField {
        tool,
        field: field.to_owned(),
        excerpt: excerpt(out.stdout),
    };
    let list = root
        .get("metrics")
        .and_then(|m| m.as_array())
        .ok_or_else(|| missing("`metrics` array"))?;
    if list.is_empty() {
        return Err(missing("metric in `metrics` (it is empty)"));
    }
    list.iter()
        .enumerate()
        .map(|(i, m)| {
            let text = |key: &str| {
                m.get(key)
                    .and_then(|v| v.as_str())
                    .ok_or_else(|| missing(&format!("string `{key}` in metrics[{i}]")))
            };
            let name = text("name")?;
            let unit = text("unit")?;
            let direction = match text("direction")? {
                "lower" => Direction::Lower,
                "higher" => Direction::Higher,
                other => {
                    return Err(ParseError::BadNumber {
                        tool,
                        field: format!("metrics[{i}].direction (`lower` or `higher`)"),
                        value: other.to_owned(),
                    })
                }
            };
            let value = m
                .get("value")
                .and_then(|v| v.as_f64())
                .filter(|v| v.is_finite())
                .ok_or_else(|| ParseError::BadNumber {
                    tool,
                    field: format!("metrics[{i}].value"),
                    value: m.get("value").map_or("missing".into(), |v| v.to_string()),
                })?;
            Ok(Metric::new(name, unit, direction, value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parsers::test_output;

    #[test]
    fn reads_the_metrics_object_after_other_lines() {
        let out = test_output(
            "Connected successfully\n{\"metrics\": [{\"name\": \"select_time\", \"unit\": \"ms\", \"direction\": \"lower\", \"value\": 0.52}, {\"name\": \"rows\", \"unit\": \"count\", \"direction\": \"higher\", \"value\": 2}]}\n",
        );
        assert_eq!(
            parse(&out).unwrap(),
            [
                Metric::new("select_time", "ms", Direction::Lower, 0.52),
                Metric::new("rows", "count", Direction::Higher, 2.0)
            ]
        );
    }

    #[test]
    fn bad_objects_say_what_is_wrong() {
        for (stdout, says) in [
            ("", "printed no report"),
            ("no json here", "no line starts with `{`"),
            ("{\"metrics\": []}", "it is empty"),
            ("{\"other\": 1}", "`metrics` array"),
            (
                "{\"metrics\": [{\"name\": \"t\", \"unit\": \"ms\", \"value\": 1}]}",
                "string `direction` in metrics[0]",
            ),
            (
                "{\"metrics\": [{\"name\": \"t\", \"unit\": \"ms\", \"direction\": \"up\", \"value\": 1}]}",
                "metrics[0].direction",
            ),
            (
                "{\"metrics\": [{\"name\": \"t\", \"unit\": \"ms\", \"direction\": \"lower\", \"value\": \"x\"}]}",
                "metrics[0].value",
            ),
            ("{\"metrics\": [", "not a complete JSON report"),
        ] {
            let e = parse(&test_output(stdout)).unwrap_err().to_string();
            assert!(e.starts_with("json"), "{e}");
            assert!(e.contains(says), "{stdout}: {e}");
        }
    }
}
