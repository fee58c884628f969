//! The metrics each built-in yields, declared in `metrics.tsv` (workload, metric,
//! unit, direction, in the parser's order) for listings and specs, before any run.
//!
//! The table is checked against the real tools' committed output: the test
//! `every_builtin_declares_the_metrics_its_fixture_yields` parses each built-in's
//! fixture and compares; run it with `ISOLAB_UPDATE_METRICS=1` to write the table
//! again after a parser changes.

use isolab_stats::Direction;
use serde::Serialize;

/// The declared table, one `workload<TAB>metric<TAB>unit<TAB>direction` per line.
pub const METRICS_TSV: &str = include_str!("metrics.tsv");

/// One metric a workload yields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MetricInfo {
    /// Its name.
    pub name: String,
    /// Its unit.
    pub unit: String,
    /// Whether lower or higher is better.
    pub direction: Direction,
}

/// The metrics the built-in `workload` yields, in its parser's order; empty for a
/// workload that is not a built-in (its parser's output decides).
pub fn declared_metrics(workload: &str) -> Vec<MetricInfo> {
    METRICS_TSV
        .lines()
        .filter_map(|line| {
            let mut f = line.split('\t');
            let (w, name, unit, dir) = (f.next()?, f.next()?, f.next()?, f.next()?);
            (w == workload).then(|| MetricInfo {
                name: name.to_owned(),
                unit: unit.to_owned(),
                direction: if dir == "higher" {
                    Direction::Higher
                } else {
                    Direction::Lower
                },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_has_four_fields_and_a_direction() {
        for line in METRICS_TSV.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            assert_eq!(f.len(), 4, "{line}");
            assert!(f[3] == "lower" || f[3] == "higher", "{line}");
        }
    }

    #[test]
    fn every_builtin_has_its_primary_among_its_declared_metrics() {
        for w in crate::catalog() {
            let m = declared_metrics(&w.name);
            assert!(m.iter().any(|m| m.name == w.primary), "{}", w.name);
        }
        assert!(declared_metrics("no-such-workload").is_empty());
    }
}
