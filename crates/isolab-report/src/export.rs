//! CSV and JSON exports: one row per metric observation of a counted run, with every
//! factor level of its cell.

use std::fmt::Write as _;

use isolab_store::Observation;

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Comma-separated values with a header row (RFC 4180 quoting).
    Csv,
    /// A JSON array of objects.
    Json,
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
