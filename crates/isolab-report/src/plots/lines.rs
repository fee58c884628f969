//! Line charts: several series of (x, y) points with CI bands and dashed fitted curves
//! (scalability: throughput or overhead against threads or instances).

use super::axis::{self, Axis};
use super::canvas::{self, Frame, LegendEntry, Overlay, Plot, PointShape, Swatch, INK};
use super::{series_colour, ReferenceLine, Size};

/// How the x axis maps values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum XScale {
    /// Evenly spaced values.
    #[default]
    Linear,
    /// Powers of two evenly spaced (1, 2, 4, … 128 instances); points with x ≤ 0 are
    /// skipped.
    Log2,
}

/// A line chart: each series is a line through its points, with an optional CI band and
/// an optional fitted curve.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LineChart {
    /// The chart's title (also its accessible name).
    pub title: String,
    /// The x axis title with its unit, e.g. `"instances (count)"`.
    pub x_label: String,
    /// The y axis title with its unit, e.g. `"throughput (events/s)"`.
    pub y_label: String,
    /// How x values are placed.
    pub x_scale: XScale,
    /// The series, in legend order; each gets a colour and a point shape.
    pub series: Vec<LineSeries>,
    /// An optional horizontal reference line.
    pub reference: Option<ReferenceLine>,
    /// The size of the SVG.
    pub size: Size,
}

/// One series of a [`LineChart`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LineSeries {
    /// Its name in the legend.
    pub name: String,
    /// Its points; they are drawn in order of x, and points with a non-finite coordinate
    /// are skipped.
    pub points: Vec<LinePoint>,
    /// A fitted curve drawn dashed in the series' colour.
    pub fit: Option<Fit>,
}

/// One point of a [`LineSeries`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinePoint {
    /// Position on the x axis.
    pub x: f64,
    /// Position on the y axis.
    pub y: f64,
    /// Lower end of the confidence interval of `y`; with `y_high`, consecutive points
    /// form a shaded band.
    pub y_low: Option<f64>,
    /// Upper end of the confidence interval of `y`.
    pub y_high: Option<f64>,
}

impl LinePoint {
    /// A point without CI.
    pub fn new(x: f64, y: f64) -> LinePoint {
        LinePoint {
            x,
            y,
            y_low: None,
            y_high: None,
        }
    }
}

/// A fitted curve, sampled densely enough to look smooth (e.g. 50 points).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fit {
    /// What was fitted, shown in the legend after the series name (e.g. "Amdahl, p = 0.93").
    pub label: String,
    /// The curve's points, in order of x.
    pub points: Vec<(f64, f64)>,
}

/// A series reduced to what can be drawn.
struct Drawable<'a> {
    index: usize,
    series: &'a LineSeries,
    points: Vec<LinePoint>,
    fit: Vec<(f64, f64)>,
}

pub(super) fn usable_x(x: f64, scale: XScale) -> bool {
    x.is_finite() && (scale == XScale::Linear || x > 0.0)
}

/// x in axis space: the value itself, or its base-2 logarithm.
pub(super) fn to_axis(x: f64, scale: XScale) -> f64 {
    match scale {
        XScale::Linear => x,
        XScale::Log2 => x.log2(),
    }
}

/// Renders a line chart as an `<svg>` element (see the [module docs](super)).
///
/// Per series: a `<polyline class="plot-line">`, one point symbol per point (shape and
/// colour vary by series), a `plot-band` polygon over runs of points that have both CI
/// ends (a whisker for a lone one), and its fit as a dashed `plot-fit` polyline. A legend
/// lists series and fits. Returns the "no data" chart when no series has a drawable point.
pub fn lines(chart: &LineChart) -> String {
    let scale = chart.x_scale;
    let drawables: Vec<Drawable<'_>> = chart
        .series
        .iter()
        .enumerate()
        .filter_map(|(index, series)| {
            let mut points: Vec<LinePoint> = series
                .points
                .iter()
                .copied()
                .filter(|p| usable_x(p.x, scale) && p.y.is_finite())
                .map(|p| LinePoint {
                    y_low: p.y_low.filter(|v| v.is_finite()),
                    y_high: p.y_high.filter(|v| v.is_finite()),
                    ..p
                })
                .collect();
            points.sort_by(|a, b| a.x.total_cmp(&b.x));
            let fit: Vec<(f64, f64)> = series
                .fit
                .iter()
                .flat_map(|f| f.points.iter().copied())
                .filter(|(x, y)| usable_x(*x, scale) && y.is_finite())
                .collect();
            (!points.is_empty() || fit.len() >= 2).then_some(Drawable {
                index,
                series,
                points,
                fit,
            })
        })
        .collect();
    if drawables.is_empty() {
        return canvas::no_data(chart.size, &chart.title);
    }
    let reference = chart.reference.as_ref().filter(|r| r.value.is_finite());

    let xs = drawables.iter().flat_map(|d| {
        d.points
            .iter()
            .map(|p| p.x)
            .chain(d.fit.iter().map(|f| f.0))
    });
    let ys = drawables
        .iter()
        .flat_map(|d| {
            d.points
                .iter()
                .flat_map(|p| [Some(p.y), p.y_low, p.y_high])
                .flatten()
                .chain(d.fit.iter().map(|f| f.1))
        })
        .chain(reference.map(|r| r.value));
    let (x_lo, x_hi) = axis::finite_extent(xs).unwrap_or((0.0, 1.0));
    let (y_lo, y_hi) = axis::finite_extent(ys).unwrap_or((0.0, 1.0));
    let y_pad = (y_hi - y_lo) * 0.05;
    // Padding never makes an axis of positive values (throughput) cross zero.
    let y_lo = if y_lo >= 0.0 {
        (y_lo - y_pad).max(0.0)
    } else {
        y_lo - y_pad
    };
    let y = Axis::numeric(y_lo, y_hi + y_pad, 6, &chart.y_label);
    let x = match scale {
        XScale::Linear => {
            let x_pad = (x_hi - x_lo) * 0.02;
            Axis::numeric_tight(x_lo - x_pad, x_hi + x_pad, 8, &chart.x_label)
        }
        XScale::Log2 => log2_axis(x_lo, x_hi, &chart.x_label),
    };

    let mut legend = Vec::new();
    for d in &drawables {
        let colour = series_colour(d.index);
        if !d.points.is_empty() {
            legend.push(LegendEntry {
                swatch: Swatch::LinePoint {
                    colour,
                    shape: PointShape::nth(d.index),
                },
                label: d.series.name.clone(),
            });
        }
        if d.fit.len() >= 2 {
            let label = d
                .series
                .fit
                .as_ref()
                .map(|f| f.label.as_str())
                .unwrap_or("");
            legend.push(LegendEntry {
                swatch: Swatch::Line {
                    colour,
                    dash: "6 4",
                    width: 1.5,
                },
                label: if label.is_empty() {
                    format!("{} (fit)", d.series.name)
                } else {
                    format!("{}: {label}", d.series.name)
                },
            });
        }
    }
    if let Some(r) = reference {
        legend.push(LegendEntry {
            swatch: Swatch::Line {
                colour: INK,
                dash: "2 3",
                width: 1.5,
            },
            label: r.label.clone(),
        });
    }
    let frame = Frame {
        size: chart.size,
        title: &chart.title,
        legend,
        top_extra: 0,
    };
    canvas::render(&frame, &x, &y, |plot, o| {
        draw_lines(&drawables, scale, reference, plot, o)
    })
}

/// Ticks at powers of two (every other one, every third, … when there would be more than
/// ten).
pub(super) fn log2_axis(lo: f64, hi: f64, desc: &str) -> Axis {
    let (mut k_lo, mut k_hi) = (lo.log2().floor(), hi.log2().ceil());
    if !k_lo.is_finite() || !k_hi.is_finite() {
        (k_lo, k_hi) = (0.0, 1.0);
    }
    if k_hi <= k_lo {
        k_lo -= 1.0;
        k_hi += 1.0;
    }
    let k_lo = k_lo.max(-1000.0) as i32;
    let k_hi = k_hi.min(1000.0) as i32;
    // At most about ten ticks: every power of two, or every other, or every third, …
    let every = ((k_hi - k_lo + 9) / 10).max(1);
    let ticks: Vec<f64> = (k_lo..=k_hi)
        .filter(|k| (k - k_lo) % every == 0)
        .map(f64::from)
        .collect();
    let labels = ticks.iter().map(|k| axis::value(k.exp2())).collect();
    // A little room beyond the outer ticks, so end points are not cut by the axes.
    let pad = f64::from(k_hi - k_lo) * 0.02;
    Axis {
        min: f64::from(k_lo) - pad,
        max: f64::from(k_hi) + pad,
        ticks,
        labels,
        desc: format!("{desc} (log₂ scale)"),
        grid: true,
    }
}

fn draw_lines(
    drawables: &[Drawable<'_>],
    scale: XScale,
    reference: Option<&ReferenceLine>,
    plot: &Plot<'_>,
    o: &mut Overlay,
) {
    let map = |x: f64, y: f64| (plot.map)(to_axis(x, scale), y);
    if let Some(r) = reference {
        let (_, yr) = (plot.map)(0.0, r.value);
        o.line(
            "plot-reference",
            (plot.left, yr),
            (plot.right, yr),
            INK,
            1.5,
            "2 3",
        );
    }
    for d in drawables {
        let colour = series_colour(d.index);
        o.group("plot-series", Some(&d.series.name));
        // CI bands over runs of consecutive points with both ends.
        let mut run: Vec<LinePoint> = Vec::new();
        let flush = |run: &mut Vec<LinePoint>, o: &mut Overlay| {
            match run.len() {
                0 => {}
                1 => {
                    let p = run[0];
                    if let (Some(l), Some(h)) = (p.y_low, p.y_high) {
                        o.line("plot-whisker", map(p.x, l), map(p.x, h), colour, 1.5, "");
                    }
                }
                _ => {
                    let mut poly: Vec<(i32, i32)> = run
                        .iter()
                        .filter_map(|p| p.y_high.map(|h| map(p.x, h)))
                        .collect();
                    poly.extend(
                        run.iter()
                            .rev()
                            .filter_map(|p| p.y_low.map(|l| map(p.x, l))),
                    );
                    o.polygon("plot-band", &poly, colour, 0.18);
                }
            }
            run.clear();
        };
        for p in &d.points {
            if p.y_low.is_some() && p.y_high.is_some() {
                run.push(*p);
            } else {
                flush(&mut run, o);
            }
        }
        flush(&mut run, o);

        if d.fit.len() >= 2 {
            let pts: Vec<(i32, i32)> = d.fit.iter().map(|(x, y)| map(*x, *y)).collect();
            o.polyline("plot-fit", &pts, colour, 1.5, "6 4", None);
        }
        let pts: Vec<(i32, i32)> = d.points.iter().map(|p| map(p.x, p.y)).collect();
        o.polyline("plot-line", &pts, colour, 2.0, "", None);
        for at in pts {
            o.point("plot-point", at, PointShape::nth(d.index), colour);
        }
        o.end_group();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plots::canvas::has_text;

    fn ci(x: f64, y: f64) -> LinePoint {
        LinePoint {
            x,
            y,
            y_low: Some(y * 0.95),
            y_high: Some(y * 1.05),
        }
    }

    fn chart() -> LineChart {
        LineChart {
            title: "Scalability".into(),
            x_label: "instances (count)".into(),
            y_label: "throughput (events/s)".into(),
            x_scale: XScale::Log2,
            series: vec![
                LineSeries {
                    name: "isolab".into(),
                    points: [1.0, 2.0, 4.0, 8.0]
                        .iter()
                        .map(|x| ci(*x, 1000.0 * x.powf(0.9)))
                        .collect(),
                    fit: Some(Fit {
                        label: "power law, b = 0.9".into(),
                        points: (0..=12)
                            .map(|i| {
                                let x = 2f64.powf(i as f64 / 4.0);
                                (x, 1000.0 * x.powf(0.9))
                            })
                            .collect(),
                    }),
                },
                LineSeries {
                    name: "docker".into(),
                    points: vec![
                        LinePoint::new(1.0, 950.0),
                        LinePoint::new(2.0, 1800.0),
                        ci(4.0, 3300.0),
                        LinePoint::new(8.0, 5600.0),
                    ],
                    fit: None,
                },
            ],
            reference: None,
            size: Size::default(),
        }
    }

    #[test]
    fn series_points_bands_fits_and_legend() {
        let svg = lines(&chart());
        assert_eq!(svg.matches("class=\"plot-line\"").count(), 2);
        assert_eq!(svg.matches("class=\"plot-point\"").count(), 8);
        assert_eq!(svg.matches("class=\"plot-band\"").count(), 1);
        // docker's lone CI point gets a whisker instead of a band.
        assert_eq!(svg.matches("class=\"plot-whisker\"").count(), 1);
        assert_eq!(svg.matches("class=\"plot-fit\"").count(), 1);
        assert!(svg.contains("stroke-dasharray=\"6 4\""));
        assert!(svg.contains(">isolab</text>") && svg.contains(">docker</text>"));
        assert!(svg.contains(">isolab: power law, b = 0.9</text>"));
        assert!(has_text(&svg, "instances (count) (log₂ scale)"));
        assert!(has_text(&svg, "throughput (events/s)"));
        for t in ["1", "2", "4", "8"] {
            assert!(has_text(&svg, t), "{t}");
        }
        assert!(has_text(&svg, "2k") || has_text(&svg, "2000"));
    }

    #[test]
    fn linear_scale_and_reference() {
        let mut c = chart();
        c.x_scale = XScale::Linear;
        c.reference = Some(ReferenceLine {
            value: 1000.0,
            label: "one instance".into(),
        });
        let svg = lines(&c);
        assert!(has_text(&svg, "instances (count)"));
        assert!(svg.contains("class=\"plot-reference\""));
        assert!(svg.contains(">one instance</text>"));
    }

    #[test]
    fn empty_and_nan_give_no_data() {
        assert!(lines(&LineChart::default()).contains(">no data</text>"));
        let mut c = chart();
        for s in &mut c.series {
            s.fit = None;
            for p in &mut s.points {
                p.y = f64::NAN;
            }
        }
        assert!(lines(&c).contains(">no data</text>"));
        // Log scale drops non-positive x.
        let c = LineChart {
            x_scale: XScale::Log2,
            series: vec![LineSeries {
                name: "s".into(),
                points: vec![LinePoint::new(0.0, 1.0), LinePoint::new(-2.0, 1.0)],
                fit: None,
            }],
            ..LineChart::default()
        };
        assert!(lines(&c).contains(">no data</text>"));
    }

    #[test]
    fn single_point_is_drawable() {
        let c = LineChart {
            title: "one".into(),
            series: vec![LineSeries {
                name: "s".into(),
                points: vec![LinePoint::new(3.0, 3.0)],
                fit: None,
            }],
            ..LineChart::default()
        };
        let svg = lines(&c);
        assert_eq!(svg.matches("class=\"plot-point\"").count(), 1);
        assert!(!svg.contains("no data"));
    }
}
