//! Fleets: one experiment run by many hosts, pooled with the host as a block.
//!
//! Each host ran every cell in its own shuffled rounds, as an experiment of its own. A
//! configuration is compared with its baseline **within** each host and pooled over hosts
//! ([`isolab_stats::blocked_ratio`]); a configuration whose effect differs between hosts
//! is flagged (Cochran's Q), and the ratio that ignores the hosts is shown beside the
//! pooled one, so that a reader sees what blocking changed.

use std::collections::BTreeMap;

use isolab_stats::{blocked_ratio, unblocked_ratio, BlockedComparison, Direction};

use crate::data::ExperimentData;
use crate::summary::{levels_key, SummaryOptions};
use crate::table::Table;

/// One host's experiment of a fleet.
#[derive(Debug, Clone)]
pub struct HostData {
    /// The host's name.
    pub host: String,
    /// Its experiment.
    pub data: ExperimentData,
    /// Its baseline and primary metrics (cell indexes differ between hosts that dropped
    /// different cells; the baseline is the spec's, the same on every host).
    pub options: SummaryOptions,
}

/// A configuration against its baseline, pooled over hosts.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PooledPoint {
    /// The configuration's levels, sorted.
    pub levels: Vec<(String, String)>,
    /// Its baseline cell's levels, sorted.
    pub baseline: Vec<(String, String)>,
    /// The metric (each cell's primary one).
    pub metric: String,
    /// Its unit.
    pub unit: String,
    /// Which way is better.
    pub direction: Direction,
    /// Within-host comparison pooled over hosts, as an overhead ratio: above 1 is worse,
    /// whichever way the metric improves (as the summary's "vs baseline").
    pub comparison: BlockedComparison,
    /// The same ratio of the plain means over all hosts' runs: what ignoring the hosts
    /// gives.
    pub unblocked: f64,
    /// With cells split across hosts: which hosts measured the configuration and which
    /// its baseline, when they differ (`None` in a blocked fleet). The effect is then
    /// confounded with the hosts.
    pub confounded: Option<String>,
}

/// How a fleet's cells were spread over its hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Design {
    /// Every host ran every cell: comparisons are made within each host and pooled with
    /// the host as a block.
    Blocked,
    /// Each host ran a share of the cells (`fleet submit --split-cells`): a
    /// configuration and its baseline can come from different hosts, so they are compared
    /// across hosts, confounded with them.
    Split,
}

/// "1 host", "3 hosts".
pub fn hosts(n: usize) -> String {
    if n == 1 {
        "1 host".to_owned()
    } else {
        format!("{n} hosts")
    }
}

/// The warning every table of a split fleet carries.
pub const SPLIT_WARNING: &str = "cells were split across hosts (--split-cells): a \
    configuration and its baseline measured on different hosts are compared across them, \
    so the ratio includes the difference between those hosts (confounded)";

/// One host's counted primary values of one cell, with the metric's unit and direction.
struct CellValues {
    /// The cell's levels, sorted.
    levels: Vec<(String, String)>,
    metric: String,
    unit: String,
    direction: Direction,
    values: Vec<f64>,
}

/// A host's cells by [`levels_key`]: how cells of different hosts are matched (their
/// indexes can differ when a host dropped cells that do not fit it).
type HostValues = BTreeMap<String, CellValues>;

fn primary_values(host: &HostData) -> HostValues {
    let options = &host.options;
    let by_cell = host.data.runs_by_cell();
    let mut out = HostValues::new();
    for cell in &host.data.cells {
        let Some(metric) = options.primary.get(&cell.index) else {
            continue;
        };
        let runs = by_cell.get(&cell.id).cloned().unwrap_or_default();
        let mut unit = String::new();
        let mut direction = Direction::Lower;
        let values: Vec<f64> = runs
            .iter()
            .filter(|r| r.is_counted())
            .filter_map(|r| r.metrics.iter().find(|m| &m.name == metric))
            .inspect(|m| {
                unit = m.unit.clone();
                direction = m.direction;
            })
            .map(|m| m.value)
            .collect();
        let mut levels = cell.levels.clone();
        levels.sort();
        out.insert(
            levels_key(&cell.levels),
            CellValues {
                levels,
                metric: metric.clone(),
                unit,
                direction,
                values,
            },
        );
    }
    out
}

/// Every non-baseline configuration of the fleet against its baseline, pooled over
/// hosts; `confidence` is the intervals' level (0.95). Configurations no host could
/// compare (no counted runs on either side) are left out. With [`Design::Split`], the
/// runs of every host are one block, and [`PooledPoint::confounded`] names the hosts
/// when the two sides were measured on different ones.
pub fn pooled(hosts: &[HostData], confidence: f64, design: Design) -> Vec<PooledPoint> {
    let Some(options) = hosts.first().map(|h| &h.options) else {
        return Vec::new();
    };
    if options.baseline.is_empty() {
        return Vec::new();
    }
    let per_host: Vec<(&str, HostValues)> = hosts
        .iter()
        .map(|h| (h.host.as_str(), primary_values(h)))
        .collect();
    let baseline_factors: Vec<&String> = options.baseline.iter().map(|(f, _)| f).collect();
    // The configurations, with their baseline partner: the same levels with the baseline
    // factors at the baseline's levels.
    let mut configurations: BTreeMap<String, (Vec<(String, String)>, String)> = BTreeMap::new();
    for (_, values) in &per_host {
        for (cell_key, CellValues { levels, .. }) in values {
            let is_baseline = options.baseline.iter().all(|pair| levels.contains(pair));
            if is_baseline {
                continue;
            }
            let mut partner: Vec<(String, String)> = levels
                .iter()
                .filter(|(f, _)| !baseline_factors.contains(&f))
                .cloned()
                .collect();
            partner.extend(options.baseline.iter().cloned());
            configurations
                .entry(cell_key.clone())
                .or_insert_with(|| (levels.clone(), levels_key(&partner)));
        }
    }
    let mut out = Vec::new();
    for (cell_key, (levels, partner_key)) in configurations {
        let mut baseline = Vec::new();
        let mut treatment = Vec::new();
        let mut described = None;
        let mut partner_levels = Vec::new();
        let (mut treatment_hosts, mut baseline_hosts) = (Vec::new(), Vec::new());
        for (host, values) in &per_host {
            let (t, b) = (values.get(&cell_key), values.get(&partner_key));
            let block = match design {
                Design::Blocked if t.is_none() || b.is_none() => continue,
                Design::Blocked => host.to_string(),
                Design::Split => SPLIT_BLOCK.to_owned(),
            };
            if let Some(t) = t.filter(|t| !t.values.is_empty()) {
                treatment.extend(t.values.iter().map(|v| (block.clone(), *v)));
                treatment_hosts.push(host.to_string());
                described.get_or_insert((t.metric.clone(), t.unit.clone(), t.direction));
            }
            if let Some(b) = b.filter(|b| !b.values.is_empty()) {
                baseline.extend(b.values.iter().map(|v| (block.clone(), *v)));
                baseline_hosts.push(host.to_string());
                partner_levels = b.levels.clone();
            }
        }
        let Some((metric, unit, direction)) = described else {
            continue;
        };
        if baseline.is_empty() || treatment.is_empty() {
            continue;
        }
        // Oriented as the summary's overhead: above 1 is worse whichever way the metric
        // improves (for a higher-is-better metric, the baseline over the configuration).
        let (worse_is_higher, other) = match direction {
            Direction::Lower => (&treatment, &baseline),
            Direction::Higher => (&baseline, &treatment),
        };
        let Ok(comparison) = blocked_ratio(other, worse_is_higher, confidence) else {
            continue;
        };
        let unblocked = unblocked_ratio(other, worse_is_higher);
        let confounded =
            (design == Design::Split && treatment_hosts != baseline_hosts).then(|| {
                format!(
                    "configuration on {}, baseline on {}",
                    treatment_hosts.join(" "),
                    baseline_hosts.join(" ")
                )
            });
        out.push(PooledPoint {
            confounded,
            unblocked,
            levels,
            baseline: partner_levels,
            metric,
            unit,
            direction,
            comparison,
        });
    }
    out
}

/// The one block of a split fleet's comparisons: every host's runs together.
const SPLIT_BLOCK: &str = "all hosts";

/// The pooled comparisons of a fleet of `design` as a table: one row per configuration,
/// with the number of hosts, the pooled ratio and its interval, the p-value, whether the
/// effect differs between hosts (with I² and each host's ratio), and the unblocked
/// ratio.
pub fn pooled_table(points: &[PooledPoint], design: Design) -> Table {
    let columns = [
        ("configuration", false),
        ("metric", false),
        ("hosts", true),
        ("overhead (pooled)", true),
        ("95% CI", true),
        ("p", true),
        ("differs by host", false),
        ("per host", false),
        ("ignoring hosts", true),
    ];
    let mut table = Table::new(
        columns.iter().map(|(h, _)| (*h).to_owned()).collect(),
        columns.iter().map(|(_, right)| *right).collect(),
    );
    for p in points {
        let c = &p.comparison;
        let differs = match (&p.confounded, &c.heterogeneity) {
            (Some(hosts), _) => format!("cannot tell: CONFOUNDED ({hosts})"),
            (None, None) if design == Design::Split => {
                "cannot tell (cells split across hosts)".to_owned()
            }
            (None, None) => "- (one host)".to_owned(),
            (None, Some(h)) => match h {
                h if h.differs() => {
                    format!("YES (Q p={:.3}, I²={:.0}%)", h.p, h.i_squared * 100.0)
                }
                h => format!("no (Q p={:.2})", h.p),
            },
        };
        let per_host = c
            .blocks
            .iter()
            .map(|b| format!("{} {:.3}", b.block, b.ratio()))
            .collect::<Vec<_>>()
            .join(", ");
        table.push(vec![
            levels_key(&p.levels),
            format!("{} ({})", p.metric, p.unit),
            c.blocks.len().to_string(),
            format!("{:.3}", c.ratio),
            format!("[{:.3}, {:.3}]", c.ci.low, c.ci.high),
            format!("{:.3}", c.p),
            differs,
            per_host,
            format!("{:.3}", p.unblocked),
        ]);
    }
    table
}
