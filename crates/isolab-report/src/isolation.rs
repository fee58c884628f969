//! Seed 001's isolation table: the degradation of each workload's primary metric with a
//! neighbour against the same cell without one.
//!
//! Rows are the neighbour scenarios, labelled as seed 001 labels them (chapter 5,
//! tables 5.6–5.8): `90%U` (a neighbour driving the contended resource to 90%
//! utilisation), `FU` (full utilisation, 100%), and `90%URR` / `FURR` (the same with a
//! resource reservation); the kind of neighbour and the reservation follow in
//! parentheses, e.g. `FURR (cpu, cpuset)`. Neighbours given by count (`cpu*4`) keep
//! their level as label. Columns are workload × platform (and any other varied factor,
//! such as placement), as in the seed's tables.
//!
//! Each entry is the isolation degradation of DESIGN.md's derived measures,
//! `100·(b − a)/a` for lower-is-better metrics and `100·(a − b)/a` for higher-is-better
//! ones, with `a` the mean without and `b` the mean with the neighbour: positive =
//! worse. With the overhead ratio `r` (`b/a` or `a/b`), degradation is `100·(r − 1)` or
//! `100·(1 − 1/r)`, increasing in `r`, so the bootstrap CI of the ratio maps to a CI of
//! the degradation. The verdict is the one the summary's baseline comparison gave when
//! the baseline is `neighbour=none` (the default of an isolation experiment); with
//! another baseline the same comparison (Mann-Whitney, Benjamini-Hochberg over each
//! neighbour level's points, noise threshold) is made here against the cell without
//! neighbour.

use std::cmp::Ordering;
use std::collections::HashMap;

use isolab_stats::Direction;

pub use crate::degradation::{degradation_of_ratio, entry_text, DegradationEntry};
use crate::degradation::{entries, index_of, level};
use crate::summary::MetricRow;
use crate::table::{text_lines, Style, Table};

pub use crate::data::{NEIGHBOUR, NONE, RESERVATION};

/// The isolation table of an experiment (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IsolationTable {
    /// Neighbour scenarios, in seed 001's order.
    pub rows: Vec<IsolationRow>,
    /// Workload × platform (× other varied factors), in matrix order.
    pub columns: Vec<ColumnKey>,
    /// `cells[row][column]`; `None` where the matrix has no such pair of cells.
    pub cells: Vec<Vec<Option<DegradationEntry>>>,
}

/// One neighbour scenario: a neighbour level with a reservation level.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IsolationRow {
    /// The `neighbour` level, e.g. `cpu@90%`.
    pub neighbour: String,
    /// The `reservation` level (`none` when the factor is absent).
    pub reservation: String,
    /// Seed 001's label, e.g. `90%URR (cpu, cpuset)`.
    pub label: String,
}

/// A column of the table: one primary metric of one workload on one platform, with the
/// other varied factors (neither neighbour nor reservation).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ColumnKey {
    /// The workload level (empty when the cells have none).
    pub workload: String,
    /// The platform level (empty when the cells have none).
    pub platform: String,
    /// Other factors that vary between cells, e.g. `("placement", "quota")`.
    pub others: Vec<(String, String)>,
    /// The metric.
    pub metric: String,
    /// Its unit.
    pub unit: String,
    /// Which way is better.
    pub direction: Direction,
    /// How the column is headed: workload · platform · other levels (and the metric
    /// when two columns would otherwise read the same).
    pub label: String,
}

impl IsolationTable {
    /// The entry of `row` and `column`, when both cells exist.
    pub fn entry(&self, row: usize, column: usize) -> Option<&DegradationEntry> {
        self.cells.get(row)?.get(column)?.as_ref()
    }

    /// The rendering for a terminal or in Markdown ([`Style`]; a `bool` is text with or
    /// without colour): a title saying what the numbers are, the metric of each
    /// workload, then one line per scenario and one column per workload × platform.
    pub fn render(&self, style: impl Into<Style>) -> String {
        let style = style.into();
        let mut header = vec!["scenario".to_owned()];
        header.extend(self.columns.iter().map(|c| c.label.clone()));
        let mut right = vec![false];
        right.extend(self.columns.iter().map(|_| true));
        let mut t = Table::new(header, right);
        for (i, row) in self.rows.iter().enumerate() {
            let mut line = vec![row.label.clone()];
            line.extend(
                (0..self.columns.len())
                    .map(|j| self.entry(i, j).map_or_else(|| "-".to_owned(), entry_text)),
            );
            t.push(line);
        }
        let mut out = text_lines(
            &format!("{TITLE}\n{LEGEND}\nmetrics: {}\n", self.metrics_line()),
            style,
        );
        out.push_str(&t.render(style));
        out
    }

    /// `workload: metric (unit, higher is better); …`, one per distinct workload and metric.
    pub fn metrics_line(&self) -> String {
        let mut seen: Vec<String> = Vec::new();
        for c in &self.columns {
            let unit = if c.unit.is_empty() {
                String::new()
            } else {
                format!("{}, ", c.unit)
            };
            let s = format!(
                "{}: {} ({unit}{} is better)",
                if c.workload.is_empty() {
                    "-"
                } else {
                    &c.workload
                },
                c.metric,
                c.direction.as_str()
            );
            if !seen.contains(&s) {
                seen.push(s);
            }
        }
        seen.join("; ")
    }
}

/// What the numbers are, as the first line of every rendering.
pub const TITLE: &str = "isolation degradation (seed 001), % of the same cell without neighbour: 100·(b − a)/a for lower-is-better metrics, 100·(a − b)/a for higher-is-better (a = mean without, b = mean with the neighbour); positive = worse";
/// How to read the rows and entries.
pub const LEGEND: &str = "90%U / FU: neighbour at 90% / full utilisation of the contended resource; 90%URR / FURR: the same with the resource reserved; [95% CI] from the bootstrap CI of the overhead ratio; worse/better when significant and beyond the noise threshold, ≈ when equivalent within it, ? when the data cannot tell (n≈ runs that would decide) or untested (n with/without)";

/// Levels with `neighbour` set to `none`, sorted, as a key.
fn key_without_neighbour(levels: &[(String, String)]) -> String {
    let mut pairs: Vec<(String, String)> = levels
        .iter()
        .map(|(f, l)| {
            if f == NEIGHBOUR {
                (f.clone(), NONE.to_owned())
            } else {
                (f.clone(), l.clone())
            }
        })
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(f, l)| format!("{f}={l}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A neighbour level split into its kind and, for `KIND@PCT%`, the target utilisation.
fn parse_neighbour(level: &str) -> (&str, Option<f64>) {
    match level.split_once('@') {
        Some((kind, pct)) => {
            let p = pct
                .strip_suffix('%')
                .and_then(|p| p.trim().parse::<f64>().ok())
                .filter(|p| p.is_finite());
            (kind, p)
        }
        None => (level.split('*').next().unwrap_or(level), None),
    }
}

/// Seed 001's label of a scenario: `90%U (cpu)`, `FU (cpu)`, `90%URR (cpu, cpuset)`,
/// `FURR (cpu, cpuset)`; other utilisations as `50%U (cpu)`; counts as the level itself
/// (`cpu*4`, `cpu*4, quota`).
pub fn scenario_label(neighbour: &str, reservation: &str) -> String {
    let reserved = reservation != NONE;
    match parse_neighbour(neighbour) {
        (kind, Some(pct)) => {
            let u = if pct == 100.0 {
                "FU".to_owned()
            } else {
                format!("{}%U", neighbour_pct_text(neighbour))
            };
            if reserved {
                format!("{u}RR ({kind}, {reservation})")
            } else {
                format!("{u} ({kind})")
            }
        }
        (_, None) if reserved => format!("{neighbour}, {reservation}"),
        (_, None) => neighbour.to_owned(),
    }
}

/// The percentage as written in the level (`90` of `cpu@90%`).
fn neighbour_pct_text(neighbour: &str) -> &str {
    neighbour
        .split_once('@')
        .map_or("", |(_, p)| p.trim_end_matches('%'))
}

/// Where a scenario goes: utilisation scenarios first, by kind (matrix order), then
/// without before with reservation, then by utilisation (90%U before FU), then by
/// reservation; the rest (counts) after them in matrix order.
#[derive(Debug, Clone, Copy)]
struct Rank {
    utilisation: Option<(usize, bool, f64)>,
    neighbour: usize,
    reservation: usize,
}

fn compare_rank(a: &Rank, b: &Rank) -> Ordering {
    match (a.utilisation, b.utilisation) {
        (Some((ka, ra, pa)), Some((kb, rb, pb))) => ka
            .cmp(&kb)
            .then(ra.cmp(&rb))
            .then(pa.total_cmp(&pb))
            .then(a.reservation.cmp(&b.reservation))
            .then(a.neighbour.cmp(&b.neighbour)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a
            .neighbour
            .cmp(&b.neighbour)
            .then(a.reservation.cmp(&b.reservation)),
    }
}

/// Builds the isolation table from the summary rows (see the [module docs](self)).
///
/// `primary` says which rows hold a workload's primary metric (e.g.
/// [`SummaryOptions::is_primary`](crate::SummaryOptions::is_primary)); only those are
/// shown. `None` when the factor `neighbour` is not varied with a level `none`, i.e.
/// when there is no cell to measure isolation against.
pub fn isolation_table(
    rows: &[MetricRow],
    primary: impl Fn(&MetricRow) -> bool,
) -> Option<IsolationTable> {
    let primary: Vec<&MetricRow> = rows.iter().filter(|r| primary(r)).collect();
    let neighbour_of = |r: &MetricRow| level(&r.levels, NEIGHBOUR).map(str::to_owned);
    let mut neighbours: Vec<String> = Vec::new();
    let mut reservations: Vec<String> = Vec::new();
    let mut kinds: Vec<String> = Vec::new();
    for r in &primary {
        if let Some(n) = neighbour_of(r) {
            index_of(&mut neighbours, &n);
        }
        index_of(
            &mut reservations,
            level(&r.levels, RESERVATION).unwrap_or(NONE),
        );
    }
    if neighbours.len() < 2 || !neighbours.iter().any(|n| n == NONE) {
        return None;
    }
    for n in &neighbours {
        if let (kind, Some(_)) = parse_neighbour(n) {
            index_of(&mut kinds, kind);
        }
    }

    // Other factors that vary between cells go into the column label.
    let mut varied: Vec<String> = Vec::new();
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for r in &primary {
        for (f, l) in &r.levels {
            if [NEIGHBOUR, RESERVATION, "workload", "platform"].contains(&f.as_str()) {
                continue;
            }
            match seen.get(f.as_str()) {
                Some(prev) if prev != l && !varied.contains(f) => varied.push(f.clone()),
                Some(_) => {}
                None => {
                    seen.insert(f, l);
                }
            }
        }
    }
    // Keep the cells' factor order.
    let order: Vec<&String> = primary
        .iter()
        .flat_map(|r| r.levels.iter().map(|(f, _)| f))
        .collect();
    varied.sort_by_key(|f| order.iter().position(|o| *o == f));

    let without: HashMap<(String, &str), &MetricRow> = primary
        .iter()
        .filter(|r| neighbour_of(r).as_deref() == Some(NONE))
        .map(|r| ((key_without_neighbour(&r.levels), r.metric.as_str()), *r))
        .collect();

    let mut scenarios: Vec<(IsolationRow, Rank)> = Vec::new();
    let mut columns: Vec<ColumnKey> = Vec::new();
    // (scenario, column, with, without)
    let mut pairs: Vec<(usize, usize, &MetricRow, &MetricRow)> = Vec::new();
    for r in &primary {
        let Some(n) = neighbour_of(r) else { continue };
        if n == NONE {
            continue;
        }
        let Some(base) = without.get(&(key_without_neighbour(&r.levels), r.metric.as_str())) else {
            continue;
        };
        let reservation = level(&r.levels, RESERVATION).unwrap_or(NONE).to_owned();
        let s = match scenarios
            .iter()
            .position(|(s, _)| s.neighbour == n && s.reservation == reservation)
        {
            Some(i) => i,
            None => {
                let (kind, pct) = parse_neighbour(&n);
                let rank = Rank {
                    utilisation: pct.map(|p| {
                        (
                            kinds.iter().position(|k| k == kind).unwrap_or(usize::MAX),
                            reservation != NONE,
                            p,
                        )
                    }),
                    neighbour: neighbours.iter().position(|x| *x == n).unwrap_or(0),
                    reservation: reservations
                        .iter()
                        .position(|x| *x == reservation)
                        .unwrap_or(0),
                };
                scenarios.push((
                    IsolationRow {
                        label: scenario_label(&n, &reservation),
                        neighbour: n.clone(),
                        reservation,
                    },
                    rank,
                ));
                scenarios.len() - 1
            }
        };
        let column = ColumnKey {
            workload: level(&r.levels, "workload").unwrap_or("").to_owned(),
            platform: level(&r.levels, "platform").unwrap_or("").to_owned(),
            others: varied
                .iter()
                .map(|f| (f.clone(), level(&r.levels, f).unwrap_or("").to_owned()))
                .collect(),
            metric: r.metric.clone(),
            unit: r.unit.clone(),
            direction: r.direction,
            label: String::new(),
        };
        let c = match columns.iter().position(|c| same_column(c, &column)) {
            Some(i) => i,
            None => {
                columns.push(column);
                columns.len() - 1
            }
        };
        pairs.push((s, c, *r, *base));
    }
    if scenarios.is_empty() {
        return None;
    }
    label_columns(&mut columns);

    let found = entries(
        &pairs
            .iter()
            .map(|&(_, _, with, base)| (with, base))
            .collect::<Vec<_>>(),
        |i| scenarios[pairs[i].0].0.neighbour.clone(),
    );
    let mut order: Vec<usize> = (0..scenarios.len()).collect();
    order.sort_by(|&a, &b| compare_rank(&scenarios[a].1, &scenarios[b].1));
    let position: Vec<usize> = {
        let mut p = vec![0; order.len()];
        for (to, &from) in order.iter().enumerate() {
            p[from] = to;
        }
        p
    };
    let mut cells = vec![vec![None; columns.len()]; scenarios.len()];
    for ((s, c, _, _), e) in pairs.iter().zip(found) {
        cells[position[*s]][*c] = Some(e);
    }
    let rows = order.iter().map(|&i| scenarios[i].0.clone()).collect();
    Some(IsolationTable {
        rows,
        columns,
        cells,
    })
}

fn same_column(a: &ColumnKey, b: &ColumnKey) -> bool {
    a.workload == b.workload
        && a.platform == b.platform
        && a.others == b.others
        && a.metric == b.metric
}

/// Workload · platform · other levels; placement and shape by level alone (`quota`),
/// other factors as `factor=level`; the metric added where two labels would be equal.
fn label_columns(columns: &mut [ColumnKey]) {
    let base = |c: &ColumnKey| {
        let mut parts: Vec<String> = [&c.workload, &c.platform]
            .into_iter()
            .filter(|s| !s.is_empty())
            .cloned()
            .collect();
        for (f, l) in &c.others {
            parts.push(if f == "placement" || f == "shape" {
                l.clone()
            } else {
                format!("{f}={l}")
            });
        }
        parts.join(" · ")
    };
    let labels: Vec<String> = columns.iter().map(base).collect();
    for (i, c) in columns.iter_mut().enumerate() {
        let clash = labels
            .iter()
            .enumerate()
            .any(|(j, l)| j != i && *l == labels[i]);
        c.label = if clash || labels[i].is_empty() {
            format!("{} ({})", labels[i], c.metric).trim().to_owned()
        } else {
            labels[i].clone()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isolab_stats::Verdict;

    fn levels(platform: &str, workload: &str, n: &str, r: &str) -> Vec<(String, String)> {
        vec![
            ("platform".into(), platform.into()),
            ("workload".into(), workload.into()),
            ("neighbour".into(), n.into()),
            ("reservation".into(), r.into()),
        ]
    }

    /// A row as the summary makes it with baseline `neighbour=none`.
    fn row(levels: Vec<(String, String)>, values: Vec<f64>, direction: Direction) -> MetricRow {
        let none = level(&levels, NEIGHBOUR) == Some(NONE);
        let mut r = MetricRow::for_test(levels, "events_per_second", "events/s", direction, values);
        r.is_baseline = none;
        r
    }

    fn around(mean: f64) -> Vec<f64> {
        (0..8)
            .map(|i| mean * (1.0 + 0.002 * (i as f64 - 3.5)))
            .collect()
    }

    fn compared(r: MetricRow, ratio: f64, ci: (f64, f64), v: Verdict) -> MetricRow {
        r.compared_for_test(ratio, ci, v)
    }

    #[test]
    fn a_cpu_bomb_at_90_percent_degrades_by_20_percent() {
        let rows = vec![
            row(
                levels("host", "cpu", "none", "none"),
                around(1000.0),
                Direction::Higher,
            ),
            compared(
                row(
                    levels("host", "cpu", "cpu@90%", "none"),
                    around(800.0),
                    Direction::Higher,
                ),
                1.25,
                (1.2, 1.3),
                Verdict::Worse,
            ),
        ];
        let t = isolation_table(&rows, |_| true).unwrap();
        assert_eq!(t.rows.len(), 1);
        assert_eq!(t.rows[0].label, "90%U (cpu)");
        assert_eq!(t.columns.len(), 1);
        assert_eq!(t.columns[0].label, "cpu · host");
        let e = t.entry(0, 0).unwrap();
        assert!((e.degradation.unwrap() - 20.0).abs() < 1e-9, "{e:?}");
        let ci = e.ci.unwrap();
        // 100·(1 − 1/1.2) and 100·(1 − 1/1.3)
        assert!((ci.low - 16.666_666_666_666_664).abs() < 1e-9, "{ci:?}");
        assert!((ci.high - 23.076_923_076_923_08).abs() < 1e-9, "{ci:?}");
        assert_eq!(e.verdict, Some(Verdict::Worse));
        assert_eq!((e.n_with, e.n_without), (8, 8));
        assert_eq!(entry_text(e), "+20.0% [+16.7, +23.1] worse");
    }

    #[test]
    fn an_equivalent_difference_shows_its_estimate_and_interval() {
        let rows = vec![
            row(
                levels("host", "cpu", "none", "cpuset"),
                around(1000.0),
                Direction::Higher,
            ),
            compared(
                row(
                    levels("host", "cpu", "cpu@100%", "cpuset"),
                    around(995.0),
                    Direction::Higher,
                ),
                1.005,
                (0.99, 1.02),
                Verdict::Equivalent,
            ),
        ];
        let t = isolation_table(&rows, |_| true).unwrap();
        assert_eq!(t.rows[0].label, "FURR (cpu, cpuset)");
        let e = t.entry(0, 0).unwrap();
        assert_eq!(e.verdict, Some(Verdict::Equivalent));
        let text = entry_text(e);
        assert!(text.ends_with("[-1.0, +2.0] ≈"), "{text}");
        assert!(text.starts_with("+0.5%"), "the point estimate: {text}");
    }

    #[test]
    fn rows_follow_seed_001_then_counts_in_matrix_order() {
        let mut rows = Vec::new();
        for r in ["none", "cpuset", "quota"] {
            for n in ["none", "cpu*4", "cpu@100%", "cpu@90%", "disk@90%", "fork"] {
                rows.push(row(
                    levels("host", "w", n, r),
                    around(10.0),
                    Direction::Lower,
                ));
            }
        }
        let t = isolation_table(&rows, |_| true).unwrap();
        let labels: Vec<&str> = t.rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "90%U (cpu)",
                "FU (cpu)",
                "90%URR (cpu, cpuset)",
                "90%URR (cpu, quota)",
                "FURR (cpu, cpuset)",
                "FURR (cpu, quota)",
                "90%U (disk)",
                "90%URR (disk, cpuset)",
                "90%URR (disk, quota)",
                "cpu*4",
                "cpu*4, cpuset",
                "cpu*4, quota",
                "fork",
                "fork, cpuset",
                "fork, quota",
            ]
        );
        // Entries follow their rows.
        assert_eq!(t.cells.len(), t.rows.len());
        assert!(t.cells.iter().all(|c| c.len() == 1 && c[0].is_some()));
    }

    #[test]
    fn other_utilisations_keep_their_percentage() {
        assert_eq!(scenario_label("cpu@50%", "none"), "50%U (cpu)");
        assert_eq!(scenario_label("memory*2", "memory"), "memory*2, memory");
        assert_eq!(scenario_label("network", "none"), "network");
        // Seed 001's Tables 5.8 and 5.9: one row per direction.
        assert_eq!(
            scenario_label("network-tx@90%", "none"),
            "90%U (network-tx)"
        );
        assert_eq!(
            scenario_label("network-rx@100%", "net"),
            "FURR (network-rx, net)"
        );
        assert_eq!(scenario_label("cpu@bad", "none"), "cpu@bad");
    }

    #[test]
    fn no_neighbour_factor_means_no_table() {
        let plain = |p: &str| {
            let mut r = row(
                levels("host", "w", "none", "none"),
                around(1.0),
                Direction::Lower,
            );
            r.levels = vec![("placement".into(), p.into())];
            r
        };
        assert!(isolation_table(&[plain("shared"), plain("quota")], |_| true).is_none());
        // A single neighbour level is not varied either.
        let only = vec![row(
            levels("host", "w", "none", "none"),
            around(1.0),
            Direction::Lower,
        )];
        assert!(isolation_table(&only, |_| true).is_none());
        // Neighbours without a `none` cell have nothing to be measured against.
        let no_none = vec![
            row(
                levels("host", "w", "cpu", "none"),
                around(1.0),
                Direction::Lower,
            ),
            row(
                levels("host", "w", "fork", "none"),
                around(1.0),
                Direction::Lower,
            ),
        ];
        assert!(isolation_table(&no_none, |_| true).is_none());
    }

    #[test]
    fn only_primary_rows_and_columns_per_varied_factor() {
        let mut rows = Vec::new();
        for platform in ["host", "isolab"] {
            for placement in ["quota", "pinned"] {
                for n in ["none", "cpu@90%"] {
                    let mut l = levels(platform, "sysbench", n, "none");
                    l.insert(1, ("placement".into(), placement.into()));
                    rows.push(row(l.clone(), around(10.0), Direction::Lower));
                    let mut other = row(l, around(3.0), Direction::Lower);
                    other.metric = "latency_p95".into();
                    rows.push(other);
                }
            }
        }
        let t = isolation_table(&rows, |r| r.metric == "events_per_second").unwrap();
        let labels: Vec<&str> = t.columns.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "sysbench · host · quota",
                "sysbench · host · pinned",
                "sysbench · isolab · quota",
                "sysbench · isolab · pinned"
            ]
        );
        assert_eq!(t.rows.len(), 1);
        assert!(t.metrics_line().contains("events_per_second"));
        assert!(!t.metrics_line().contains("latency_p95"));
    }

    #[test]
    fn another_baseline_is_compared_here_against_no_neighbour() {
        // Baseline platform=host: the isolab rows' verdicts are against the host.
        let mut rows = [
            row(
                levels("host", "w", "none", "none"),
                around(10.0),
                Direction::Lower,
            ),
            row(
                levels("isolab", "w", "none", "none"),
                around(10.0),
                Direction::Lower,
            ),
            row(
                levels("isolab", "w", "cpu@100%", "none"),
                around(15.0),
                Direction::Lower,
            ),
        ];
        rows[0].is_baseline = true;
        rows[1].is_baseline = false;
        rows[1] = compared(rows[1].clone(), 1.0, (0.99, 1.01), Verdict::Equivalent);
        // Its summary verdict against the host says ~; against no neighbour it is worse.
        rows[2].is_baseline = false;
        rows[2] = compared(rows[2].clone(), 1.0, (0.99, 1.01), Verdict::Equivalent);
        let t = isolation_table(&rows[1..], |_| true).unwrap();
        let e = t.entry(0, 0).unwrap();
        assert_eq!(e.verdict, Some(Verdict::Worse), "{e:?}");
        assert!((e.degradation.unwrap() - 50.0).abs() < 1e-9);
        let ci = e.ci.unwrap();
        assert!(ci.low > 45.0 && ci.high < 55.0, "{ci:?}");
    }

    #[test]
    fn untested_pairs_say_so() {
        let rows = vec![
            row(
                levels("host", "w", "none", "none"),
                vec![10.0],
                Direction::Lower,
            ),
            row(
                levels("host", "w", "cpu*2", "none"),
                vec![11.0],
                Direction::Lower,
            ),
        ];
        let t = isolation_table(&rows, |_| true).unwrap();
        let e = t.entry(0, 0).unwrap();
        assert_eq!(e.verdict, None);
        assert_eq!(entry_text(e), "+10.0% ? (n=1/1)");
    }
}
