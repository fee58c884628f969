//! The regression histogram of seed 000: bins of regression %, with the mean and
//! percentiles marked; over fewer than [`DOTS_BELOW`] values, a dot plot of the values
//! themselves (bins of a handful of points say less than the points).

use super::axis::{self, Axis};
use super::canvas::{self, Frame, LegendEntry, Overlay, Plot, PointShape, Swatch, INK};
use super::Size;

/// A histogram of values already binned (e.g. regression % over all measurement points of
/// one comparison), with vertical lines at 0, the mean and chosen percentiles.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramChart {
    /// The chart's title (also its accessible name).
    pub title: String,
    /// The x axis title with its unit; by default `"regression (%)"`.
    pub x_label: String,
    /// The y axis title; by default `"points"`.
    pub y_label: String,
    /// The unit written after values in the line labels (`"%"` gives "mean 1.2%").
    pub unit: String,
    /// The bins; a bin with a non-finite edge or `low >= high` is skipped.
    pub bins: Vec<HistogramBin>,
    /// The values themselves, when the caller has them: fewer than [`DOTS_BELOW`]
    /// finite ones are drawn as dots instead of the bins.
    pub values: Vec<f64>,
    /// The mean of the values, drawn as a dashed vermillion line.
    pub mean: Option<f64>,
    /// Percentiles of the values (e.g. 5, 50, 95), drawn as dashed blue lines.
    pub percentiles: Vec<Percentile>,
    /// The size of the SVG.
    pub size: Size,
}

impl Default for HistogramChart {
    /// An empty regression histogram: labels "regression (%)" and "points", unit "%".
    fn default() -> Self {
        HistogramChart {
            title: String::new(),
            x_label: "regression (%)".to_owned(),
            y_label: "points".to_owned(),
            unit: "%".to_owned(),
            bins: Vec::new(),
            values: Vec::new(),
            mean: None,
            percentiles: Vec::new(),
            size: Size::default(),
        }
    }
}

/// One bin: values in `low..high` and how many there are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistogramBin {
    /// Lower edge (inclusive), in x-axis units.
    pub low: f64,
    /// Upper edge (exclusive), in x-axis units.
    pub high: f64,
    /// Number of values in the bin.
    pub count: u64,
}

/// A percentile of the values: `p` in 0..=100 and its value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Percentile {
    /// Which percentile (e.g. 5.0 for p5).
    pub p: f64,
    /// Its value, in x-axis units.
    pub value: f64,
}

/// Fewer finite values than this are drawn as a dot plot, one dot per value.
pub const DOTS_BELOW: usize = 20;

const BIN_FILL: &str = "#56B4E9";
const BIN_EDGE: &str = "#0072B2";
const MEAN_COLOUR: &str = "#D55E00";
const PERCENTILE_COLOUR: &str = "#0072B2";
const LABEL_ROW_H: i32 = 15;
const MAX_LABEL_ROWS: usize = 3;

/// A vertical line, its tag over the plot and its label in the legend.
struct VLine {
    x: f64,
    /// Over the line, where it fits: "mean", "p95".
    tag: String,
    /// In the legend, with the value: "mean 1.2%", "p95 4.5%".
    label: String,
    colour: &'static str,
    dash: &'static str,
    width: f64,
    class: &'static str,
}

/// Renders a histogram as an `<svg>` element (see the [module docs](super)).
///
/// One `<rect class="plot-bin">` per bin (with a tooltip), the count above each non-empty
/// bin where it fits, a solid line at 0 (`plot-zero`), the mean and percentiles as dashed
/// lines (`plot-vline`) tagged above the plot where the tags fit ("mean", "p95", staggered
/// in up to three rows), and a legend that gives each line's value ("mean 1.2%", "p95 4.5%").
/// Returns the "no data" chart when there is no valid bin or every count is 0.
pub fn histogram(chart: &HistogramChart) -> String {
    let bins: Vec<HistogramBin> = chart
        .bins
        .iter()
        .copied()
        .filter(|b| b.low.is_finite() && b.high.is_finite() && b.low < b.high)
        .collect();
    if bins.iter().all(|b| b.count == 0) {
        return canvas::no_data(chart.size, &chart.title);
    }
    let unit = &chart.unit;
    let mut vlines = Vec::new();
    if let Some(m) = chart.mean.filter(|m| m.is_finite()) {
        vlines.push(VLine {
            x: m,
            tag: "mean".to_owned(),
            label: format!("mean {}{unit}", axis::value(m)),
            colour: MEAN_COLOUR,
            dash: "7 4",
            width: 2.0,
            class: "plot-vline plot-mean",
        });
    }
    for p in chart
        .percentiles
        .iter()
        .filter(|p| p.p.is_finite() && p.value.is_finite())
    {
        vlines.push(VLine {
            x: p.value,
            tag: format!("p{}", axis::value(p.p)),
            label: format!("p{} {}{unit}", axis::value(p.p), axis::value(p.value)),
            colour: PERCENTILE_COLOUR,
            dash: "3 3",
            width: 1.5,
            class: "plot-vline plot-percentile",
        });
    }

    let mut values: Vec<f64> = chart
        .values
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    let dots = !values.is_empty() && values.len() < DOTS_BELOW;
    if dots {
        values.sort_by(f64::total_cmp);
    }
    let xs = if dots {
        values.clone()
    } else {
        bins.iter().flat_map(|b| [b.low, b.high]).collect()
    };
    let xs = xs
        .into_iter()
        .chain(vlines.iter().map(|v| v.x))
        .chain([0.0]);
    let (lo, hi) = axis::finite_extent(xs).unwrap_or((0.0, 1.0));
    // Dots need room for their radius at the ends.
    let pad = (hi - lo) * if dots { 0.04 } else { 0.02 };
    let x = Axis::numeric_tight(lo - pad, hi + pad, 10, &chart.x_label);
    let stacks = if dots {
        stack(&values, (hi - lo) / 40.0)
    } else {
        Vec::new()
    };
    let max_count = if dots {
        stacks.iter().max().map_or(1, |s| s + 1) as u64
    } else {
        bins.iter().map(|b| b.count).max().unwrap_or(1)
    } as f64;
    let y = Axis::counts(max_count * 1.1, 6, &chart.y_label);

    let mut legend = vec![if dots {
        LegendEntry {
            swatch: Swatch::LinePoint {
                colour: BIN_EDGE,
                shape: PointShape::Circle,
            },
            label: format!(
                "one dot per {} ({} in all)",
                singular(&chart.y_label),
                values.len()
            ),
        }
    } else {
        LegendEntry {
            swatch: Swatch::Fill(BIN_FILL),
            label: format!("{} per bin", chart.y_label),
        }
    }];
    legend.push(LegendEntry {
        swatch: Swatch::Line {
            colour: INK,
            dash: "",
            width: 1.5,
        },
        label: "0 = no change".to_owned(),
    });
    // Each line's value is in the legend, so none is lost where tags over the plot
    // would collide.
    legend.extend(vlines.iter().map(|v| LegendEntry {
        swatch: Swatch::Line {
            colour: v.colour,
            dash: v.dash,
            width: v.width,
        },
        label: v.label.clone(),
    }));
    let rows = vlines.len().min(MAX_LABEL_ROWS) as u32;
    let frame = Frame {
        size: chart.size,
        title: &chart.title,
        legend,
        top_extra: rows * LABEL_ROW_H as u32,
    };
    canvas::render(&frame, &x, &y, |plot, o| {
        if dots {
            // The dots over the lines: a dot at a percentile stays visible.
            draw_vlines(&vlines, plot, o);
            draw_dots(chart, &values, &stacks, plot, o);
        } else {
            draw_histogram(chart, &bins, &vlines, plot, o);
        }
    })
}

/// The stack level of each of the sorted `values`: 0, or one above the previous
/// value's when it lies within `gap` of it, so that close dots pile up instead of
/// covering each other (Wilkinson's dot plot, with the dots at their exact values).
fn stack(values: &[f64], gap: f64) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::with_capacity(values.len());
    for (i, v) in values.iter().enumerate() {
        let level = match i.checked_sub(1) {
            Some(j) if v - values[j] < gap => out[j] + 1,
            _ => 0,
        };
        out.push(level);
    }
    out
}

/// "points" → "point": the y label, which counts, names one value.
fn singular(label: &str) -> &str {
    label.strip_suffix('s').unwrap_or(label)
}

/// One dot per value at its x, piled by `stacks`, with the value as its tooltip.
fn draw_dots(
    chart: &HistogramChart,
    values: &[f64],
    stacks: &[usize],
    plot: &Plot<'_>,
    o: &mut Overlay,
) {
    o.group("plot-dots", None);
    for (v, level) in values.iter().zip(stacks) {
        let at = (plot.map)(*v, *level as f64 + 0.5);
        let tooltip = format!("{}{}", axis::value(*v), chart.unit);
        o.group("plot-dot-group", Some(&tooltip));
        o.point("plot-dot", at, PointShape::Circle, BIN_EDGE);
        o.end_group();
    }
    o.end_group();
}

fn draw_histogram(
    chart: &HistogramChart,
    bins: &[HistogramBin],
    vlines: &[VLine],
    plot: &Plot<'_>,
    o: &mut Overlay,
) {
    let unit = &chart.unit;
    // Bins first, then the vertical lines, then the counts, so lines never cover counts.
    let mut counts = Vec::new();
    o.group("plot-bins", None);
    for b in bins {
        let a = (plot.map)(b.low, 0.0);
        let c = (plot.map)(b.high, b.count as f64);
        let tooltip = format!(
            "[{}, {}){unit}: {} {}",
            axis::value(b.low),
            axis::value(b.high),
            b.count,
            chart.y_label
        );
        o.rect(
            "plot-bin",
            a,
            c,
            BIN_FILL,
            Some(BIN_EDGE),
            None,
            Some(&tooltip),
        );
        let text = b.count.to_string();
        let bin_px = (c.0 - a.0).abs();
        if b.count > 0 && axis::text_width(&text, 11.0, false) as i32 <= bin_px + 2 {
            counts.push((((a.0 + c.0) / 2, c.1 - 4), text));
        }
    }
    o.end_group();

    draw_vlines(vlines, plot, o);
    for (at, text) in counts {
        o.text("plot-count", at, &text, "middle", 11, INK, false);
    }
}

/// The line at 0, then the mean and percentile lines with their tags.
fn draw_vlines(vlines: &[VLine], plot: &Plot<'_>, o: &mut Overlay) {
    let (zx, _) = (plot.map)(0.0, 0.0);
    o.line("plot-zero", (zx, plot.bottom), (zx, plot.top), INK, 1.5, "");

    // Tags in rows above the plot, filled greedily left to right; a tag that fits in no
    // row is left out (its line's value is in the legend), so tags never overlap.
    let mut order: Vec<usize> = (0..vlines.len()).collect();
    order.sort_by(|a, b| vlines[*a].x.total_cmp(&vlines[*b].x));
    let mut row_end = [i32::MIN; MAX_LABEL_ROWS];
    for i in order {
        let v = &vlines[i];
        let (px, _) = (plot.map)(v.x, 0.0);
        o.line(
            v.class,
            (px, plot.bottom),
            (px, plot.top),
            v.colour,
            v.width,
            v.dash,
        );
        let w = axis::text_width(&v.tag, 12.0, false) as i32;
        let start = (px - w / 2).min(plot.right - w).max(plot.left);
        let Some(row) = row_end.iter().position(|end| *end + 6 <= start) else {
            continue;
        };
        row_end[row] = start + w;
        let y = plot.top - 5 - row as i32 * LABEL_ROW_H;
        o.text(
            "plot-vline-label",
            (start, y),
            &v.tag,
            "start",
            12,
            v.colour,
            false,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plots::canvas::has_text;

    fn chart() -> HistogramChart {
        HistogramChart {
            title: "Regression B vs A".into(),
            bins: vec![
                HistogramBin {
                    low: -4.0,
                    high: -2.0,
                    count: 3,
                },
                HistogramBin {
                    low: -2.0,
                    high: 0.0,
                    count: 40,
                },
                HistogramBin {
                    low: 0.0,
                    high: 2.0,
                    count: 52,
                },
                HistogramBin {
                    low: 2.0,
                    high: 4.0,
                    count: 0,
                },
                HistogramBin {
                    low: 4.0,
                    high: 6.0,
                    count: 5,
                },
            ],
            mean: Some(0.42),
            percentiles: vec![
                Percentile {
                    p: 5.0,
                    value: -2.61,
                },
                Percentile {
                    p: 50.0,
                    value: 0.3,
                },
                Percentile {
                    p: 95.0,
                    value: 4.2,
                },
            ],
            ..HistogramChart::default()
        }
    }

    #[test]
    fn bins_counts_lines_and_labels() {
        let svg = histogram(&chart());
        assert!(svg.contains("<title>Regression B vs A</title>"));
        assert_eq!(svg.matches("class=\"plot-bin\"").count(), 5);
        assert!(svg.contains(">52</text>") && svg.contains(">3</text>"));
        assert!(!svg.contains(">0</text>"), "empty bins carry no count");
        assert!(svg.contains(">mean 0.42%</text>"));
        assert!(svg.contains(">p5 -2.61%</text>"));
        assert!(svg.contains(">p50 0.3%</text>"));
        assert!(svg.contains(">p95 4.2%</text>"));
        assert_eq!(
            svg.matches("class=\"plot-vline plot-percentile\"").count(),
            3
        );
        assert_eq!(svg.matches("class=\"plot-vline plot-mean\"").count(), 1);
        assert!(svg.contains("class=\"plot-zero\""));
        assert!(has_text(&svg, "regression (%)"));
        assert!(has_text(&svg, "points"));
        assert!(svg.contains("<title>[-2, 0)%: 40 points</title>"));
    }

    #[test]
    fn few_values_are_dots_with_the_mean_and_percentiles() {
        let values = vec![-1.5, 0.2, 0.25, 0.3, 3.0, f64::NAN];
        let svg = histogram(&HistogramChart {
            values: values.clone(),
            ..chart()
        });
        assert_eq!(svg.matches("class=\"plot-bin\"").count(), 0, "no bins");
        assert_eq!(svg.matches("class=\"plot-dot\"").count(), 5, "NaN skipped");
        assert!(svg.contains("<title>0.25%</title>"));
        assert!(svg.contains(">one dot per point (5 in all)</text>"));
        assert!(svg.contains(">mean 0.42%</text>") && svg.contains(">p95 4.2%</text>"));
        assert!(svg.contains("class=\"plot-zero\""));
        // Close values pile up: 0.2, 0.25 and 0.3 stand on each other.
        assert_eq!(stack(&[-1.5, 0.2, 0.25, 0.3, 3.0], 0.1), [0, 0, 1, 2, 0]);
        // From DOTS_BELOW values on, the bins again.
        let many: Vec<f64> = (0..DOTS_BELOW).map(|i| i as f64 / 4.0).collect();
        let svg = histogram(&HistogramChart {
            values: many,
            ..chart()
        });
        assert_eq!(svg.matches("class=\"plot-bin\"").count(), 5);
        assert_eq!(svg.matches("class=\"plot-dot\"").count(), 0);
    }

    #[test]
    fn y_ticks_are_whole_counts() {
        let svg = histogram(&chart());
        assert!(has_text(&svg, "0") && has_text(&svg, "10") && has_text(&svg, "50"));
        assert!(!has_text(&svg, "2.5"));
    }

    #[test]
    fn empty_nan_or_all_zero_gives_no_data() {
        assert!(histogram(&HistogramChart::default()).contains(">no data</text>"));
        let mut c = chart();
        for b in &mut c.bins {
            b.low = f64::NAN;
        }
        assert!(histogram(&c).contains(">no data</text>"));
        let mut c = chart();
        for b in &mut c.bins {
            b.count = 0;
        }
        assert!(histogram(&c).contains(">no data</text>"));
    }

    #[test]
    fn nan_markers_are_skipped() {
        let mut c = chart();
        c.mean = Some(f64::NAN);
        c.percentiles.push(Percentile {
            p: 99.0,
            value: f64::INFINITY,
        });
        let svg = histogram(&c);
        assert!(!svg.contains("plot-mean"));
        assert_eq!(
            svg.matches("class=\"plot-vline plot-percentile\"").count(),
            3
        );
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }
}
