//! Grouped bars with CI whiskers (seed 002: overhead ratio per instance size, vanilla vs
//! pinned).

use super::axis::{self, Axis};
use super::canvas::{self, Frame, LegendEntry, Overlay, Plot, Swatch, INK};
use super::{bar_fill, Marker, ReferenceLine, Size};

/// A grouped bar chart: categories along x, one bar per group within each category.
///
/// For seed 002: categories are shapes (`large`, `xlarge`, …), groups are placements
/// (`quota`, `pinned`), values are overhead ratios with their bootstrap CI, and the
/// reference line is y = 1.0 "no overhead".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BarChart {
    /// The chart's title (also its accessible name).
    pub title: String,
    /// The y axis title with its unit, e.g. `"overhead ratio (× host)"`.
    pub y_label: String,
    /// The x axis title, e.g. `"shape"`; empty for none.
    pub x_label: String,
    /// Category names, left to right.
    pub categories: Vec<String>,
    /// Group names, in legend order; each group has one colour.
    pub groups: Vec<String>,
    /// The bars; a bar whose indices are out of range or whose value is not finite is
    /// skipped.
    pub bars: Vec<Bar>,
    /// An optional horizontal reference line.
    pub reference: Option<ReferenceLine>,
    /// The size of the SVG.
    pub size: Size,
}

/// One bar of a [`BarChart`].
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Index into [`BarChart::categories`].
    pub category: usize,
    /// Index into [`BarChart::groups`].
    pub group: usize,
    /// The height of the bar, in y-axis units.
    pub value: f64,
    /// Lower end of the confidence interval, if known.
    pub low: Option<f64>,
    /// Upper end of the confidence interval, if known.
    pub high: Option<f64>,
    /// The verdict against the baseline, drawn over the bar.
    pub marker: Option<Marker>,
}

impl Bar {
    /// A bar without CI or marker.
    pub fn new(category: usize, group: usize, value: f64) -> Bar {
        Bar {
            category,
            group,
            value,
            low: None,
            high: None,
            marker: None,
        }
    }
}

/// The tallest a chart grows for its legend; beyond, the legend ends in "+N more".
const MAX_GROWN_HEIGHT: u32 = 1200;

/// Room for the title above a legend, in the height a chart grows to for its legend.
const LEGEND_TITLE_ROOM: u32 = 20;

/// Share of a category's width taken by its bars (the rest separates categories).
const CATEGORY_FILL: f64 = 0.8;
/// Share of a group slot taken by its bar (the rest separates bars within a category).
const BAR_FILL: f64 = 0.86;

fn finite(v: Option<f64>) -> Option<f64> {
    v.filter(|v| v.is_finite())
}

/// Renders a grouped bar chart as an `<svg>` element (see the [module docs](super)).
///
/// One `<rect class="plot-bar">` per drawable bar (with a tooltip giving value and CI), a
/// whisker (`plot-whisker`) where `low` or `high` is given, a verdict symbol
/// (`plot-marker`) where `marker` is, the reference line dashed, and a legend of the groups
/// (and of the markers, when any bar has one). Returns the "no data" chart when no bar is
/// drawable.
pub fn grouped_bars(chart: &BarChart) -> String {
    let n_cat = chart.categories.len();
    let n_grp = chart.groups.len();
    let bars: Vec<&Bar> = chart
        .bars
        .iter()
        .filter(|b| b.category < n_cat && b.group < n_grp && b.value.is_finite())
        .collect();
    if bars.is_empty() {
        return canvas::no_data(chart.size, &chart.title);
    }
    let reference = chart.reference.as_ref().filter(|r| r.value.is_finite());

    let values = bars
        .iter()
        .flat_map(|b| [Some(b.value), finite(b.low), finite(b.high)])
        .flatten()
        .chain(reference.map(|r| r.value))
        .chain([0.0]);
    let (lo, hi) = axis::finite_extent(values).unwrap_or((0.0, 1.0));
    // Headroom over the tallest whisker for the verdict markers.
    let has_markers = bars.iter().any(|b| b.marker.is_some());
    let headroom = if has_markers { 0.1 } else { 0.04 };
    let hi = hi + (hi - lo).max(f64::MIN_POSITIVE) * headroom;
    let y = Axis::numeric(lo, hi, 6, &chart.y_label);

    let centres: Vec<f64> = (0..n_cat).map(|i| i as f64 + 0.5).collect();
    let x = Axis {
        min: 0.0,
        max: n_cat as f64,
        ticks: centres,
        labels: category_labels(&chart.categories, chart.size.clamped().width),
        desc: chart.x_label.clone(),
        grid: false,
    };

    let mut legend: Vec<LegendEntry> = chart
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| LegendEntry {
            swatch: if i < super::PALETTE.len() {
                Swatch::Fill(super::series_colour(i))
            } else {
                Swatch::Bar(bar_fill(i))
            },
            label: g.clone(),
        })
        .collect();
    for m in Marker::ALL {
        if bars.iter().any(|b| b.marker == Some(m)) {
            legend.push(LegendEntry {
                swatch: Swatch::Verdict(m),
                label: m.description().to_owned(),
            });
        }
    }
    if let Some(r) = reference {
        legend.push(LegendEntry {
            swatch: Swatch::Line {
                colour: INK,
                dash: "6 4",
                width: 1.5,
            },
            label: r.label.clone(),
        });
    }

    // Taller rather than "+N more": every group stays in the legend, over a plot of
    // at least `MIN_PLOT_H` pixels (up to `MAX_GROWN_HEIGHT`).
    let mut size = chart.size.clamped();
    let legend_h = canvas::legend_height(&legend, size.width);
    if legend_h > canvas::legend_room(size.height) {
        size.height = (canvas::MIN_PLOT_H + legend_h + 2 * LEGEND_TITLE_ROOM)
            .min(MAX_GROWN_HEIGHT)
            .max(size.height);
    }
    let frame = Frame {
        size,
        title: &chart.title,
        legend,
        top_extra: 0,
    };
    canvas::render(&frame, &x, &y, |plot, o| {
        draw_bars(chart, &bars, reference, plot, o)
    })
}

/// Category labels that fit under their category: shortened in the middle with "…" when
/// too long (labels of one chart often differ at their end), and
/// only every k-th one when even a short label does not fit (tooltips keep full names).
fn category_labels(categories: &[String], width: u32) -> Vec<String> {
    // The plot is the width less the y-axis area and margins (about 130 px).
    let per_category = (f64::from(width) - 130.0).max(50.0) / categories.len().max(1) as f64;
    let short = f64::from(axis::text_width("0000", 12.0, false));
    let every = (short / per_category).ceil().max(1.0) as usize;
    let room = (per_category * every as f64) as i32 - 8;
    categories
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if i % every != 0 {
                String::new()
            } else {
                canvas::ellipsize_middle(c, 12.0, false, room)
            }
        })
        .collect()
}

fn draw_bars(
    chart: &BarChart,
    bars: &[&Bar],
    reference: Option<&ReferenceLine>,
    plot: &Plot<'_>,
    o: &mut Overlay,
) {
    let n_grp = chart.groups.len().max(1) as f64;
    let slot = CATEGORY_FILL / n_grp;
    let base = 0.0;
    o.group("plot-bars", None);
    for b in bars {
        let left = b.category as f64 + (1.0 - CATEGORY_FILL) / 2.0 + b.group as f64 * slot;
        let x0 = left + slot * (1.0 - BAR_FILL) / 2.0;
        let x1 = x0 + slot * BAR_FILL;
        let xm = left + slot / 2.0;
        let fill = bar_fill(b.group);
        let low = finite(b.low);
        let high = finite(b.high);
        let ci = match (low, high) {
            (Some(l), Some(h)) => format!(" (95% CI {}–{})", axis::value(l), axis::value(h)),
            (Some(l), None) => format!(" (CI from {})", axis::value(l)),
            (None, Some(h)) => format!(" (CI to {})", axis::value(h)),
            (None, None) => String::new(),
        };
        let verdict = b
            .marker
            .map(|m| format!(", {}", m.description()))
            .unwrap_or_default();
        let tooltip = format!(
            "{} · {}: {}{ci}{verdict}",
            chart.categories[b.category],
            chart.groups[b.group],
            axis::value(b.value)
        );
        fill.draw(
            o,
            "plot-bar",
            (plot.map)(x0, base),
            (plot.map)(x1, b.value),
            Some(&tooltip),
        );
        if low.is_some() || high.is_some() {
            let (cx, _) = (plot.map)(xm, b.value);
            let (_, y_lo) = (plot.map)(xm, low.unwrap_or(b.value));
            let (_, y_hi) = (plot.map)(xm, high.unwrap_or(b.value));
            let half_cap = (((plot.map)(x1, 0.0).0 - (plot.map)(x0, 0.0).0) / 5).clamp(3, 8);
            o.line("plot-whisker", (cx, y_lo), (cx, y_hi), INK, 1.5, "");
            if low.is_some() {
                o.line(
                    "plot-whisker",
                    (cx - half_cap, y_lo),
                    (cx + half_cap, y_lo),
                    INK,
                    1.5,
                    "",
                );
            }
            if high.is_some() {
                o.line(
                    "plot-whisker",
                    (cx - half_cap, y_hi),
                    (cx + half_cap, y_hi),
                    INK,
                    1.5,
                    "",
                );
            }
        }
        if let Some(m) = b.marker {
            let top = [Some(b.value), high, Some(0.0)]
                .into_iter()
                .flatten()
                .fold(f64::NEG_INFINITY, f64::max);
            let (cx, cy) = (plot.map)(xm, top);
            o.verdict("plot-marker", (cx, (cy - 11).max(plot.top + 6)), m);
        }
    }
    o.end_group();
    // The zero line, when zero is inside the range (bars grow from it).
    let (_, y0) = (plot.map)(0.0, 0.0);
    if y0 > plot.top && y0 < plot.bottom {
        o.line("plot-zero", (plot.left, y0), (plot.right, y0), INK, 1.0, "");
    }
    if let Some(r) = reference {
        let (_, yr) = (plot.map)(0.0, r.value);
        o.line(
            "plot-reference",
            (plot.left, yr),
            (plot.right, yr),
            INK,
            1.5,
            "6 4",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plots::canvas::has_text;

    fn chart() -> BarChart {
        BarChart {
            title: "Overhead ratio".into(),
            y_label: "overhead ratio (× host)".into(),
            x_label: "shape".into(),
            categories: vec!["medium".into(), "large".into()],
            groups: vec!["quota".into(), "pinned".into()],
            bars: vec![
                Bar {
                    low: Some(1.2),
                    high: Some(1.4),
                    marker: Some(Marker::Worse),
                    ..Bar::new(0, 0, 1.31)
                },
                Bar {
                    low: Some(0.98),
                    high: Some(1.03),
                    marker: Some(Marker::Equivalent),
                    ..Bar::new(0, 1, 1.01)
                },
                Bar::new(1, 0, 1.1),
                Bar {
                    high: Some(1.05),
                    ..Bar::new(1, 1, 1.02)
                },
            ],
            reference: Some(ReferenceLine {
                value: 1.0,
                label: "1.0 = no overhead".into(),
            }),
            size: Size::default(),
        }
    }

    #[test]
    fn one_rect_per_bar_with_whiskers_markers_and_legend() {
        let svg = grouped_bars(&chart());
        assert!(svg
            .starts_with("<svg role=\"img\" width=\"800\" height=\"420\" viewBox=\"0 0 800 420\""));
        assert!(svg.contains("<title>Overhead ratio</title>"));
        assert_eq!(svg.matches("class=\"plot-bar\"").count(), 4);
        // Bar 0 and 1: a stem and two caps each; bar 3: a stem and one cap.
        assert_eq!(svg.matches("class=\"plot-whisker\"").count(), 3 + 3 + 2);
        assert_eq!(svg.matches("\"plot-marker plot-worse\"").count(), 1);
        assert_eq!(svg.matches("\"plot-marker plot-equivalent\"").count(), 1);
        assert_eq!(svg.matches("\"plot-swatch plot-worse\"").count(), 1);
        assert_eq!(svg.matches("\"plot-swatch plot-equivalent\"").count(), 1);
        assert!(svg.contains(">quota</text>"));
        assert!(svg.contains(">pinned</text>"));
        assert!(svg.contains("significantly worse"));
        assert!(svg.contains("overhead ratio (× host)"));
        assert!(has_text(&svg, "medium"));
        assert!(svg.contains("class=\"plot-reference\""));
        assert!(svg.contains("1.0 = no overhead"));
        assert!(svg
            .contains("<title>medium · quota: 1.31 (95% CI 1.2–1.4), significantly worse</title>"));
        assert!(svg.contains("fill=\"#0072B2\"") && svg.contains("fill=\"#E69F00\""));
    }

    #[test]
    fn y_ticks_are_formatted_with_fixed_decimals() {
        let svg = grouped_bars(&chart());
        // 0 to 1.4 plus headroom: steps of 0.25, all with two decimals.
        for label in ["0.00", "0.25", "1.00", "1.50"] {
            assert!(has_text(&svg, label), "{label}");
        }
        assert!(!has_text(&svg, "0") && !has_text(&svg, "1.5"));
        assert!(!svg.contains("0.30000000000000004"));
    }

    #[test]
    fn empty_or_nan_input_gives_no_data() {
        let mut c = chart();
        c.bars.clear();
        assert!(grouped_bars(&c).contains(">no data</text>"));
        let mut c = chart();
        for b in &mut c.bars {
            b.value = f64::NAN;
        }
        assert!(grouped_bars(&c).contains(">no data</text>"));
        let mut c = chart();
        c.categories.clear();
        assert!(grouped_bars(&c).contains(">no data</text>"));
        assert!(grouped_bars(&BarChart::default()).contains(">no data</text>"));
    }

    #[test]
    fn bad_bars_are_skipped_not_fatal() {
        let mut c = chart();
        c.bars.push(Bar::new(7, 0, 1.0));
        c.bars.push(Bar::new(0, 9, 1.0));
        c.bars.push(Bar {
            low: Some(f64::NAN),
            high: Some(f64::INFINITY),
            ..Bar::new(1, 0, 1.0)
        });
        c.reference = Some(ReferenceLine {
            value: f64::NAN,
            label: "x".into(),
        });
        let svg = grouped_bars(&c);
        assert_eq!(svg.matches("class=\"plot-bar\"").count(), 5);
        assert!(!svg.contains("class=\"plot-reference\""));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn crowded_category_labels_are_shortened_or_thinned() {
        let few = category_labels(&["medium".into(), "large".into()], 800);
        assert_eq!(few, ["medium", "large"]);
        let long: Vec<String> = (0..12)
            .map(|i| format!("a rather long shape name {i}"))
            .collect();
        let labels = category_labels(&long, 800);
        assert!(labels
            .iter()
            .all(|l| l.contains('…') && l.chars().count() < 12));
        // Shortened in the middle: labels that differ at their end stay apart.
        let ways: Vec<String> = ["90%U (network-tx)", "90%U (network-rx)"]
            .into_iter()
            .cycle()
            .take(14)
            .map(String::from)
            .collect();
        let labels = category_labels(&ways, 1100);
        assert!(
            labels[0].contains('…') && labels[0].ends_with("tx)"),
            "{labels:?}"
        );
        assert!(labels[1].ends_with("rx)"), "{labels:?}");
        let many: Vec<String> = (0..300).map(|i| format!("c{i}")).collect();
        let labels = category_labels(&many, 800);
        assert_eq!(labels[0], "c0");
        assert!(labels.iter().filter(|l| !l.is_empty()).count() < 30);
    }

    #[test]
    fn negative_values_grow_down_from_zero() {
        let c = BarChart {
            title: "Degradation".into(),
            y_label: "degradation (%)".into(),
            categories: vec!["a".into()],
            groups: vec!["g".into()],
            bars: vec![Bar::new(0, 0, -4.0)],
            ..BarChart::default()
        };
        let svg = grouped_bars(&c);
        assert!(has_text(&svg, "-4") || has_text(&svg, "-4.0"));
        assert!(svg.contains("class=\"plot-zero\""));
    }
}
