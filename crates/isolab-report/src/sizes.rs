//! Seed 002 §IV: each platform's overhead against bare metal split into its
//! platform-type overhead (PTO, constant over instance sizes) and platform-size overhead
//! (PSO, vanishing with the instance's cpus), by [`isolab_stats::fit_size_overhead`].
//!
//! A fit is made for every platform × workload × other levels × metric whose cells ran
//! at two or more instance sizes (the factor `shape`; the size is the cpus the shape's
//! first counted run read back) and have the summary's baseline at each: the overhead
//! ratio at size `s` is fitted as `1 + PTO + PSO₁/s`, so `PSO(s) = PSO₁/s`.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use isolab_stats::{fit_size_overhead, Direction, Dominant, SizeOverheadFit, SizePoint};

use crate::data::ExperimentData;
use crate::degradation::level;
use crate::summary::MetricRow;
use crate::table::{num, signed_pct, text_lines, Style, Table};

/// The factor whose levels are instance sizes.
pub const SHAPE: &str = "shape";
/// Bootstrap replicates of each fit.
pub const RESAMPLES: usize = 2000;
/// The seed of every fit's bootstrap.
pub const SEED: u64 = 2002;

/// One fit: which cells it is over and what it found.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SizeOverhead {
    /// The cells' levels but the shape.
    pub levels: Vec<(String, String)>,
    /// The metric.
    pub metric: String,
    /// Which way is better.
    pub direction: Direction,
    /// The shape level at each of the fit's sizes.
    pub shapes: Vec<String>,
    /// The fit.
    pub fit: SizeOverheadFit,
}

/// What the numbers are, as the first line of every rendering.
pub const TITLE: &str = "platform-type and platform-size overhead (seed 002 §IV): the overhead ratio against the baseline at instance size s (cpus) fitted as 1 + PTO + PSO₁/s; PTO stays at any size (the platform type's), PSO(s) = PSO₁/s vanishes with size (seed 002: CPU accounting of small containers, mitigated by pinning)";
/// How to read the entries.
pub const LEGEND: &str = "PTO and PSO in % of the baseline with their 95% bootstrap intervals; dominant: which part is larger at each size in at least 97.5% of the bootstrap replicates (? when they cannot tell); PSO = PTO at: the size where the two parts are equal";

/// The fits of an experiment (see the [module docs](self)) against the summary's
/// `baseline` levels: empty unless `shape` is varied and a baseline is set.
pub fn size_overheads(
    data: &ExperimentData,
    rows: &[MetricRow],
    baseline: &[(String, String)],
) -> Vec<SizeOverhead> {
    if !rows.iter().any(|r| level(&r.levels, SHAPE).is_some()) {
        return Vec::new();
    }
    // Each cell's size as its first counted run read it back: one pass over the runs.
    let mut cpus_of_id: HashMap<i64, f64> = HashMap::new();
    for r in data.runs.iter().filter(|r| r.is_counted()) {
        if let (Entry::Vacant(e), Some(c)) = (
            cpus_of_id.entry(r.cell),
            r.limits
                .pointer("/placement/shape_cpus")
                .and_then(|v| v.as_f64()),
        ) {
            e.insert(c);
        }
    }
    let cpus: HashMap<u32, f64> = data
        .cells
        .iter()
        .filter_map(|c| Some((c.index, *cpus_of_id.get(&c.id)?)))
        .collect();
    // Baseline rows by their levels and metric.
    type Levels<'a> = &'a [(String, String)];
    let baselines: HashMap<(Levels<'_>, &str), &MetricRow> = rows
        .iter()
        .filter(|r| r.is_baseline)
        .map(|r| ((r.levels.as_slice(), r.metric.as_str()), r))
        .collect();
    let without_shape = |levels: &[(String, String)]| -> Vec<(String, String)> {
        levels.iter().filter(|(f, _)| f != SHAPE).cloned().collect()
    };
    // (group levels, metric) → [(size, shape, baseline row, row)]
    type Point<'a> = (f64, String, &'a MetricRow, &'a MetricRow);
    type Key = (Vec<(String, String)>, String);
    // In the rows' order, found by key.
    let mut groups: Vec<(Key, Vec<Point<'_>>)> = Vec::new();
    let mut group_of: HashMap<Key, usize> = HashMap::new();
    for r in rows
        .iter()
        .filter(|r| !r.is_baseline && r.overhead.is_some())
    {
        let Some(shape) = level(&r.levels, SHAPE) else {
            continue;
        };
        // The baseline cell of the same metric and levels, the baseline's own replaced.
        let wanted: Vec<(String, String)> = r
            .levels
            .iter()
            .map(|(f, l)| match level(baseline, f) {
                Some(b) => (f.clone(), b.to_owned()),
                None => (f.clone(), l.clone()),
            })
            .collect();
        let Some(base) = baselines.get(&(wanted.as_slice(), r.metric.as_str())) else {
            continue;
        };
        let Some(&size) = cpus.get(&r.cell) else {
            continue;
        };
        let key = (without_shape(&r.levels), r.metric.clone());
        let point = (size, shape.to_owned(), *base, r);
        match group_of.entry(key.clone()) {
            Entry::Occupied(e) => groups[*e.get()].1.push(point),
            Entry::Vacant(e) => {
                e.insert(groups.len());
                groups.push((key, vec![point]));
            }
        }
    }
    let mut out = Vec::new();
    for ((levels, metric), mut points) in groups {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        points.dedup_by(|a, b| a.0 == b.0);
        if points.len() < 2 {
            continue;
        }
        let direction = points[0].3.direction;
        let sized: Vec<SizePoint> = points
            .iter()
            .map(|(size, _, base, r)| SizePoint {
                size: *size,
                baseline: &base.values,
                platform: &r.values,
            })
            .collect();
        let Some(fit) = fit_size_overhead(&sized, direction, 0.95, RESAMPLES, SEED) else {
            continue;
        };
        out.push(SizeOverhead {
            levels,
            metric,
            direction,
            shapes: points.iter().map(|p| p.1.clone()).collect(),
            fit,
        });
    }
    out
}

/// The fits as a terminal or Markdown text: [`TITLE`], [`LEGEND`] and [`table`].
pub fn render(fits: &[SizeOverhead], style: impl Into<Style>) -> String {
    let style = style.into();
    let mut out = text_lines(&format!("{TITLE}\n{LEGEND}\n"), style);
    out.push_str(&table(fits).render(style));
    out
}

/// One line per fit: its cells, metric, the ratio at each size, PTO, PSO at the
/// smallest size, the dominant part at each size and where PSO falls to PTO.
pub fn table(fits: &[SizeOverhead]) -> Table {
    let mut t = Table::new(
        [
            "cells",
            "metric",
            "ratio by size",
            "PTO",
            "PSO at the smallest size",
            "dominant by size",
            "PSO = PTO at",
        ]
        .map(String::from)
        .to_vec(),
        vec![false, false, false, true, true, false, true],
    );
    for s in fits {
        let f = &s.fit;
        let small = f.sizes[0];
        t.push(vec![
            s.levels
                .iter()
                .map(|(f, l)| format!("{f}={l}"))
                .collect::<Vec<_>>()
                .join(" "),
            s.metric.clone(),
            f.sizes
                .iter()
                .zip(&f.ratios)
                .zip(&s.shapes)
                .map(|((size, r), shape)| format!("{shape} ({}) {r:.3}×", cpus_text(*size)))
                .collect::<Vec<_>>()
                .join(", "),
            format!(
                "{}% [{}, {}]",
                signed_pct(100.0 * f.pto),
                signed_pct(100.0 * f.pto_ci.low),
                signed_pct(100.0 * f.pto_ci.high)
            ),
            format!(
                "{}% [{}, {}]",
                signed_pct(100.0 * f.pso(small)),
                signed_pct(100.0 * f.inverse_ci.low / small),
                signed_pct(100.0 * f.inverse_ci.high / small)
            ),
            f.dominant
                .iter()
                .map(|d| match d {
                    Some(Dominant::Size) => "PSO",
                    Some(Dominant::Type) => "PTO",
                    None => "?",
                })
                .collect::<Vec<_>>()
                .join(", "),
            f.crossover().map_or_else(|| "-".to_owned(), cpus_text),
        ]);
    }
    t
}

/// `1 cpu`, `4 cpus`, `2.5 cpus`.
fn cpus_text(cpus: f64) -> String {
    let n = if (cpus - cpus.round()).abs() < 1e-9 {
        format!("{cpus:.0}")
    } else {
        num(cpus)
    };
    format!("{n} cpu{}", if n == "1" { "" } else { "s" })
}

/// One line for `isolab advise`: `platform=docker execution_time: PTO +0.0% [-0.3,
/// +0.4], PSO +40.0% [+39.1, +41.0] at 1 cpu; PSO dominates at 1, 2, 4, 8 cpus`.
pub fn evidence(s: &SizeOverhead) -> String {
    let f = &s.fit;
    let small = f.sizes[0];
    let at = |part: Dominant| -> Vec<String> {
        f.sizes
            .iter()
            .zip(&f.dominant)
            .filter(|(_, d)| **d == Some(part))
            .map(|(size, _)| cpus_text(*size))
            .collect()
    };
    let mut parts = Vec::new();
    for (name, part) in [("PSO", Dominant::Size), ("PTO", Dominant::Type)] {
        let sizes = at(part);
        if !sizes.is_empty() {
            parts.push(format!("{name} dominates at {}", sizes.join(", ")));
        }
    }
    if let Some(c) = f.crossover() {
        parts.push(format!("PSO falls to PTO at {}", cpus_text(c)));
    }
    format!(
        "{} {}: PTO {}% [{}, {}], PSO {}% [{}, {}] at {}{}",
        s.levels
            .iter()
            .map(|(f, l)| format!("{f}={l}"))
            .collect::<Vec<_>>()
            .join(" "),
        s.metric,
        signed_pct(100.0 * f.pto),
        signed_pct(100.0 * f.pto_ci.low),
        signed_pct(100.0 * f.pto_ci.high),
        signed_pct(100.0 * f.pso(small)),
        signed_pct(100.0 * f.inverse_ci.low / small),
        signed_pct(100.0 * f.inverse_ci.high / small),
        cpus_text(small),
        if parts.is_empty() {
            String::new()
        } else {
            format!("; {}", parts.join("; "))
        }
    )
}
