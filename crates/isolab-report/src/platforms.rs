//! Seed 001's Table 4.1: the performance degradation of each platform against the native
//! host, one row per benchmark and measured operation (a workload's metric), one column
//! per platform.
//!
//! Each entry is the degradation of [`crate::degradation`] of a cell against the cell
//! with the same levels on the reference platform: `100·(b − a)/a` for a lower-is-better
//! metric and `100·(a − b)/a` for a higher-is-better one (`a` the host's mean, `b` the
//! platform's; seed 001: "degradation = (Native − SUT)/Native" of throughputs), positive
//! = worse, with the CI of the overhead ratio mapped through the same formula. The
//! reference platform is the baseline's `platform` level when the baseline names one,
//! else `host`. Other factors that vary (a shape, a neighbour) go into the row's label, so
//! a row compares like with like.

use isolab_stats::Direction;

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use crate::degradation::{entries, entry_text, index_of, level, DegradationEntry};
use crate::summary::MetricRow;
use crate::table::{text_lines, Style, Table};

/// The factor whose levels are the columns.
pub const PLATFORM: &str = "platform";
/// The reference platform when the baseline does not name one.
pub const HOST: &str = "host";

/// Seed 001's Table 4.1 for an experiment (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PlatformTable {
    /// The platform every entry is measured against (`host`).
    pub reference: String,
    /// Benchmark × measured operation (× other varied levels), in matrix order.
    pub rows: Vec<BenchmarkRow>,
    /// The other platforms, in matrix order.
    pub columns: Vec<String>,
    /// `cells[row][column]`; `None` where the matrix has no such pair of cells.
    pub cells: Vec<Vec<Option<DegradationEntry>>>,
}

/// A row: one metric of one workload, with the other varied levels.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct BenchmarkRow {
    /// The workload level (empty when the cells have none).
    pub workload: String,
    /// Other factors that vary between cells, e.g. `("shape", "hpc")`.
    pub others: Vec<(String, String)>,
    /// The metric: seed 001's "measured operation".
    pub metric: String,
    /// Its unit.
    pub unit: String,
    /// Which way is better.
    pub direction: Direction,
}

impl BenchmarkRow {
    /// The benchmark column: the workload and the other levels (`hpl · hpc`).
    pub fn benchmark(&self) -> String {
        let mut parts = vec![self.workload.clone()];
        parts.extend(self.others.iter().map(|(f, l)| {
            if f == "shape" || f == "placement" {
                l.clone()
            } else {
                format!("{f}={l}")
            }
        }));
        parts.retain(|p| !p.is_empty());
        parts.join(" · ")
    }

    /// The operation column: `metric (unit, higher is better)`.
    pub fn operation(&self) -> String {
        if self.unit.is_empty() {
            format!("{} ({} is better)", self.metric, self.direction.as_str())
        } else {
            format!(
                "{} ({}, {} is better)",
                self.metric,
                self.unit,
                self.direction.as_str()
            )
        }
    }
}

/// What the numbers are, as the first line of every rendering.
pub const TITLE: &str = "performance degradation against the host (seed 001 Table 4.1), %: 100·(b − a)/a for lower-is-better metrics, 100·(a − b)/a for higher-is-better (a = mean on the host, b = mean on the platform); positive = worse";
/// How to read the entries.
pub const LEGEND: &str = "[95% CI] from the bootstrap CI of the overhead ratio; worse/better when significant and beyond the noise threshold, ≈ when equivalent within it, ? when the data cannot tell or untested (n platform/host)";

impl PlatformTable {
    /// The entry of `row` and `column`, when both cells exist.
    pub fn entry(&self, row: usize, column: usize) -> Option<&DegradationEntry> {
        self.cells.get(row)?.get(column)?.as_ref()
    }

    /// The rendering for a terminal or in Markdown: a title saying what the numbers are,
    /// then one line per benchmark and operation and one column per platform.
    pub fn render(&self, style: impl Into<Style>) -> String {
        let style = style.into();
        let mut header = vec!["benchmark".to_owned(), "operation".to_owned()];
        header.extend(self.columns.iter().cloned());
        let mut right = vec![false, false];
        right.extend(self.columns.iter().map(|_| true));
        let mut t = Table::new(header, right);
        for (i, row) in self.rows.iter().enumerate() {
            let mut line = vec![row.benchmark(), row.operation()];
            line.extend(
                (0..self.columns.len())
                    .map(|j| self.entry(i, j).map_or_else(|| "-".to_owned(), entry_text)),
            );
            t.push(line);
        }
        let title = if self.reference == HOST {
            TITLE.to_owned()
        } else {
            TITLE.replace("the host", &format!("platform {}", self.reference))
        };
        let mut out = text_lines(&format!("{title}\n{LEGEND}\n"), style);
        out.push_str(&t.render(style));
        out
    }
}

/// The reference platform: the baseline's `platform` level, else `host`.
pub fn reference_platform(baseline: &[(String, String)]) -> String {
    level(baseline, PLATFORM).unwrap_or(HOST).to_owned()
}

/// Builds Table 4.1 from the summary rows (every row given: the summary's own choice of
/// metrics, its primary ones or all). `None` when the factor `platform` is not varied
/// or no cell has a counterpart on `reference`.
pub fn platform_table(rows: &[MetricRow], reference: &str) -> Option<PlatformTable> {
    let platform_of = |r: &MetricRow| level(&r.levels, PLATFORM).map(str::to_owned);
    // Other factors that vary between cells go into the row's label.
    let mut varied: Vec<String> = Vec::new();
    let mut first: Vec<(&str, &str)> = Vec::new();
    for r in rows {
        for (f, l) in &r.levels {
            if f == PLATFORM || f == "workload" {
                continue;
            }
            match first.iter().find(|(x, _)| *x == f) {
                Some((_, prev)) if *prev != l && !varied.contains(f) => varied.push(f.clone()),
                Some(_) => {}
                None => first.push((f, l)),
            }
        }
    }
    // A cell's levels but the platform (every cell lists its factors in one order).
    let key = |r: &MetricRow| -> Levels {
        r.levels
            .iter()
            .filter(|(f, _)| f != PLATFORM)
            .cloned()
            .collect()
    };
    let references: HashMap<(Levels, &str), &MetricRow> = rows
        .iter()
        .filter(|r| platform_of(r).as_deref() == Some(reference))
        .map(|r| ((key(r), r.metric.as_str()), r))
        .collect();

    let mut bench: Vec<BenchmarkRow> = Vec::new();
    let mut row_of: HashMap<BenchmarkRow, usize> = HashMap::new();
    let mut columns: Vec<String> = Vec::new();
    // (row, column, on the platform, on the reference)
    let mut pairs: Vec<(usize, usize, &MetricRow, &MetricRow)> = Vec::new();
    for r in rows {
        let Some(p) = platform_of(r) else { continue };
        if p == reference {
            continue;
        }
        let Some(base) = references.get(&(key(r), r.metric.as_str())) else {
            continue;
        };
        let row = BenchmarkRow {
            workload: level(&r.levels, "workload").unwrap_or("").to_owned(),
            others: varied
                .iter()
                .filter_map(|f| Some((f.clone(), level(&r.levels, f)?.to_owned())))
                .collect(),
            metric: r.metric.clone(),
            unit: r.unit.clone(),
            direction: r.direction,
        };
        let i = match row_of.entry(row.clone()) {
            Entry::Occupied(e) => *e.get(),
            Entry::Vacant(e) => {
                bench.push(row);
                *e.insert(bench.len() - 1)
            }
        };
        let j = index_of(&mut columns, &p);
        pairs.push((i, j, r, *base));
    }
    if pairs.is_empty() {
        return None;
    }
    let found = entries(
        &pairs
            .iter()
            .map(|&(_, _, with, base)| (with, base))
            .collect::<Vec<_>>(),
        |i| columns[pairs[i].1].clone(),
    );
    let mut cells = vec![vec![None; columns.len()]; bench.len()];
    for ((i, j, _, _), e) in pairs.iter().zip(found) {
        cells[*i][*j] = Some(e);
    }
    Some(PlatformTable {
        reference: reference.to_owned(),
        rows: bench,
        columns,
        cells,
    })
}

/// A cell's levels.
type Levels = Vec<(String, String)>;

#[cfg(test)]
mod tests {
    use super::*;
    use isolab_stats::Verdict;

    fn row(
        platform: &str,
        workload: &str,
        metric: &str,
        direction: Direction,
        values: Vec<f64>,
        baseline: bool,
    ) -> MetricRow {
        let levels = vec![
            ("platform".into(), platform.into()),
            ("workload".into(), workload.into()),
        ];
        let mut r = MetricRow::for_test(levels, metric, "u", direction, values);
        r.is_baseline = baseline;
        r
    }

    fn around(mean: f64) -> Vec<f64> {
        (0..8)
            .map(|i| mean * (1.0 + 0.002 * (i as f64 - 3.5)))
            .collect()
    }

    /// The summary's verdict against the baseline `platform=host`.
    fn against_host(r: MetricRow, ratio: f64, ci: (f64, f64), v: Verdict) -> MetricRow {
        r.compared_for_test(ratio, ci, v)
    }

    #[test]
    fn throughput_and_latency_rows_by_hand() {
        use Direction::{Higher, Lower};
        let rows = vec![
            row("host", "hpl", "gflops", Higher, around(100.0), true),
            row("host", "tcp-rr", "latency", Lower, around(10.0), true),
            against_host(
                row("vm", "hpl", "gflops", Higher, around(80.0), false),
                1.25,
                (1.2, 1.3),
                Verdict::Worse,
            ),
            against_host(
                row("vm", "tcp-rr", "latency", Lower, around(17.2), false),
                1.72,
                (1.6, 1.8),
                Verdict::Worse,
            ),
            against_host(
                row("docker", "hpl", "gflops", Higher, around(99.0), false),
                100.0 / 99.0,
                (0.99, 1.02),
                Verdict::Equivalent,
            ),
        ];
        let t = platform_table(&rows, "host").unwrap();
        assert_eq!(t.columns, ["vm", "docker"]);
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.rows[0].benchmark(), "hpl");
        assert_eq!(t.rows[0].operation(), "gflops (u, higher is better)");
        // (100 − 80)/100 = 20%; CI 100·(1 − 1/1.2), 100·(1 − 1/1.3).
        let e = t.entry(0, 0).unwrap();
        assert!((e.degradation.unwrap() - 20.0).abs() < 1e-9, "{e:?}");
        assert_eq!(entry_text(e), "+20.0% [+16.7, +23.1] worse");
        // (17.2 − 10)/10 = 72%, seed 001's KVM TCP RR; CI 100·(1.6 − 1), 100·(1.8 − 1).
        let e = t.entry(1, 0).unwrap();
        assert!((e.degradation.unwrap() - 72.0).abs() < 1e-9, "{e:?}");
        assert_eq!(entry_text(e), "+72.0% [+60.0, +80.0] worse");
        // (100 − 99)/100 = 1%, equivalent.
        let e = t.entry(0, 1).unwrap();
        assert!((e.degradation.unwrap() - 1.0).abs() < 1e-9, "{e:?}");
        assert_eq!(e.verdict, Some(Verdict::Equivalent));
        // Docker ran no tcp-rr: no entry.
        assert!(t.entry(1, 1).is_none());
        let text = t.render(false);
        assert!(
            text.starts_with("performance degradation against the host"),
            "{text}"
        );
        assert!(text.contains("+72.0% [+60.0, +80.0] worse"), "{text}");
        let md = t.render(Style::Markdown);
        assert!(
            md.contains("| benchmark | operation | vm | docker |"),
            "{md}"
        );
    }

    #[test]
    fn another_baseline_is_decided_here_against_the_host() {
        // The baseline is platform=docker: the vm rows' summary verdicts are against
        // Docker, so the table compares them with the host itself.
        let host = row("host", "w", "time", Direction::Lower, around(10.0), false);
        let docker = row("docker", "w", "time", Direction::Lower, around(10.0), true);
        let vm = against_host(
            row("vm", "w", "time", Direction::Lower, around(15.0), false),
            1.5,
            (1.49, 1.51),
            Verdict::Worse,
        );
        let t = platform_table(&[host, docker, vm], "host").unwrap();
        assert_eq!(t.columns, ["docker", "vm"]);
        let e = t.entry(0, 1).unwrap();
        assert!((e.degradation.unwrap() - 50.0).abs() < 1e-9);
        assert_eq!(e.verdict, Some(Verdict::Worse));
        let e = t.entry(0, 0).unwrap();
        assert_eq!(e.verdict, Some(Verdict::Equivalent), "{e:?}");
    }

    #[test]
    fn other_varied_levels_label_the_rows_and_no_platform_means_no_table() {
        let mut rows = Vec::new();
        for shape in ["full", "hpc"] {
            for p in ["host", "isolab"] {
                let mut r = row(p, "w", "ops", Direction::Higher, around(5.0), p == "host");
                r.levels.push(("shape".into(), shape.into()));
                rows.push(r);
            }
        }
        let t = platform_table(&rows, "host").unwrap();
        let labels: Vec<String> = t.rows.iter().map(BenchmarkRow::benchmark).collect();
        assert_eq!(labels, ["w · full", "w · hpc"]);
        assert!(platform_table(&rows[..1], "host").is_none());
        assert!(platform_table(&rows, "vm").is_none());
        assert_eq!(reference_platform(&[]), "host");
        assert_eq!(
            reference_platform(&[("platform".into(), "runc".into())]),
            "runc"
        );
    }
}
