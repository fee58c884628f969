//! Overhead against the cpu share a configuration had: the container-to-host core
//! ratio (CHR, seed 002's Fig 7: the shape's cpus over the host cpu pool, when
//! `host_cpus` varies) and the shape's cpus (when shapes of different, possibly
//! fractional, sizes are compared). Each run records both in
//! `limits.placement` (`chr`, `shape_cpus`); each point of a comparison with the
//! baseline (primary metrics) is placed at its B side's values.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{Report, Section};
use crate::escape::esc;
use crate::plots::{self, LineChart, LinePoint, LineSeries, ReferenceLine, Size};
use crate::table::{num, Style, Table};

/// The overhead-against-cpu-share tables and charts.
pub struct CpuShare;

/// One axis: what the run recorded, its title, and the factors that move it.
struct Axis {
    key: &'static str,
    title: &'static str,
    factors: &'static [&'static str],
}

const AXES: [Axis; 2] = [
    Axis {
        key: "chr",
        title: "container-to-host core ratio (CHR)",
        factors: &["host_cpus", "shape"],
    },
    Axis {
        key: "shape_cpus",
        title: "cpus of the shape",
        factors: &["shape"],
    },
];

/// A point of a curve: x, the overhead ratio and its CI.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
struct SharePoint {
    x: f64,
    ratio: f64,
    low: Option<f64>,
    high: Option<f64>,
}

/// The curves over `axis`: one per configuration, metric and the levels the axis
/// does not move; only curves of two or more distinct x values.
fn curves(r: &Report, axis: &Axis) -> BTreeMap<String, Vec<SharePoint>> {
    // The recorded value per cell (its first counted run's).
    let mut by_cell: BTreeMap<i64, f64> = BTreeMap::new();
    for run in r.data.runs.iter().filter(|run| run.is_counted()) {
        if let Some(v) = run.limits["placement"][axis.key].as_f64() {
            by_cell.entry(run.cell).or_insert(v);
        }
    }
    // The B cell of a point's levels: its recorded value and primary metric.
    let primary = &r.analysis.options.primary;
    let value_of = |levels: &[(String, String)], metric: &str| -> Option<f64> {
        let cell = r
            .data
            .cells
            .iter()
            .find(|c| levels.iter().all(|pair| c.levels.contains(pair)))?;
        let is_primary = primary.get(&cell.index).is_none_or(|m| m == metric);
        is_primary.then(|| by_cell.get(&cell.id).copied())?
    };
    let mut out: BTreeMap<String, Vec<SharePoint>> = BTreeMap::new();
    for c in &r.analysis.comparisons {
        for p in &c.points {
            let Some(ratio) = p.ratio else { continue };
            let mut levels = p.levels.clone();
            levels.extend(c.b_select.iter().cloned());
            let Some(x) = value_of(&levels, &p.metric) else {
                continue;
            };
            let rest: Vec<String> = p
                .levels
                .iter()
                .filter(|(f, _)| !axis.factors.contains(&f.as_str()))
                .map(|(f, l)| format!("{f}={l}"))
                .collect();
            let name = format!("{} {} {}", c.b, rest.join(" "), p.metric)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            out.entry(name).or_default().push(SharePoint {
                x,
                ratio,
                low: p.ratio_ci.map(|ci| ci.low),
                high: p.ratio_ci.map(|ci| ci.high),
            });
        }
    }
    out.retain(|_, points| {
        points.sort_by(|a, b| a.x.total_cmp(&b.x));
        points.dedup_by(|a, b| a.x == b.x);
        points.len() >= 2
    });
    out
}

/// The axes whose factor the matrix varies, with their curves.
fn varied(r: &Report) -> Vec<(&'static Axis, BTreeMap<String, Vec<SharePoint>>)> {
    AXES.iter()
        .filter(|a| a.factors.iter().any(|f| r.analysis.factors.iter().any(|g| g == f)))
        .map(|a| (a, curves(r, a)))
        .filter(|(_, c)| !c.is_empty())
        .collect()
}

impl Section for CpuShare {
    fn title(&self) -> &'static str {
        "Overhead against the cpu share"
    }

    fn applies(&self, r: &Report) -> bool {
        !varied(r).is_empty()
    }

    fn text(&self, r: &Report, style: Style) -> String {
        let mut out = String::new();
        for (axis, curves) in varied(r) {
            let _ = writeln!(out, "\nOverhead against the {}:", axis.title);
            let mut t = Table::new(
                vec!["configuration".into(), axis.key.into(), "overhead [95% CI]".into()],
                vec![false, true, true],
            );
            for (name, points) in &curves {
                for p in points {
                    t.push(vec![name.clone(), num(p.x), ratio_text(p)]);
                }
            }
            out.push_str(&t.render(style));
        }
        out
    }

    fn html(&self, r: &Report) -> String {
        let mut out = String::from("<h2>Overhead against the cpu share</h2>\n<p class=note>Overhead ratio against the baseline (above 1 = worse) of each configuration, over what each run recorded: its container-to-host core ratio (the shape's cpus over the host cpu pool, seed 002's Fig 7) and its shape's cpus.</p>\n");
        for (axis, curves) in varied(r) {
            let chart = LineChart {
                title: format!("Overhead against the {}", axis.title),
                x_label: axis.title.to_owned(),
                y_label: "overhead ratio (×)".into(),
                series: curves
                    .iter()
                    .map(|(name, points)| LineSeries {
                        name: name.clone(),
                        points: points
                            .iter()
                            .map(|p| LinePoint {
                                y_low: p.low,
                                y_high: p.high,
                                ..LinePoint::new(p.x, p.ratio)
                            })
                            .collect(),
                        fit: None,
                    })
                    .collect(),
                reference: Some(ReferenceLine {
                    value: 1.0,
                    label: "baseline".into(),
                }),
                size: Size::default(),
                ..LineChart::default()
            };
            let _ = writeln!(out, "<figure>{}</figure>", plots::lines(&chart));
            let _ = writeln!(
                out,
                "<table class=sortable><thead><tr><th>configuration</th><th>{}</th><th>overhead [95% CI]</th></tr></thead><tbody>",
                esc(axis.key)
            );
            for (name, points) in &curves {
                for p in points {
                    let _ = writeln!(
                        out,
                        "<tr><td>{}</td><td class=n>{}</td><td class=n>{}</td></tr>",
                        esc(name),
                        num(p.x),
                        esc(&ratio_text(p))
                    );
                }
            }
            out.push_str("</tbody></table>\n");
        }
        out
    }

    fn json(&self, r: &Report) -> Vec<(&'static str, serde_json::Value)> {
        let axes: serde_json::Map<String, serde_json::Value> = varied(r)
            .into_iter()
            .map(|(a, c)| (a.key.to_owned(), serde_json::json!(c)))
            .collect();
        vec![("cpu_share", serde_json::Value::Object(axes))]
    }
}

/// `1.23× [1.10, 1.40]`.
fn ratio_text(p: &SharePoint) -> String {
    match (p.low, p.high) {
        (Some(l), Some(h)) => format!("{:.2}× [{l:.2}, {h:.2}]", p.ratio),
        _ => format!("{:.2}×", p.ratio),
    }
}
