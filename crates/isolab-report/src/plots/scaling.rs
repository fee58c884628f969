//! Scalability charts: throughput measured at each concurrency N with CI whiskers, the
//! preferred model's fitted curve over its shaded bootstrap band, the other model dashed
//! and linear scaling dotted (issue 5, seed 001 chapter 6).

use super::axis::{self, Axis};
use super::canvas::{self, Frame, LegendEntry, Overlay, Plot, PointShape, Swatch, INK};
use super::lines::{log2_axis, to_axis, usable_x};
use super::{Fit, LinePoint, Size, XScale, PALETTE};

/// Colour of the preferred fit and its band (Okabe-Ito blue).
const FIT_COLOUR: &str = PALETTE[0];
/// Colour of the other model (Okabe-Ito orange).
const OTHER_COLOUR: &str = PALETTE[1];

/// A scalability chart (see the [module docs](self)).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScalingChart {
    /// The chart's title (also its accessible name).
    pub title: String,
    /// The x axis title with its unit, e.g. `"threads (count)"`.
    pub x_label: String,
    /// The y axis title with its unit, e.g. `"throughput (events/s)"`.
    pub y_label: String,
    /// How N is placed: linear, or log₂ for wide ranges (1 … 128).
    pub x_scale: XScale,
    /// What the measured points are, in the legend (e.g. "mean of runs, 95% CI").
    pub points_label: String,
    /// Measured throughput per N: the mean, with its CI as a whisker when both ends are
    /// given.
    pub points: Vec<LinePoint>,
    /// The preferred model's fitted curve, drawn solid.
    pub fit: Option<Fit>,
    /// The pointwise confidence band of the preferred fit, shaded.
    pub band: Vec<BandSample>,
    /// What the band is, in the legend.
    pub band_label: String,
    /// The other model's fitted curve, drawn dashed.
    pub other: Option<Fit>,
    /// Linear scaling X(1)·N, drawn dotted; cut where it leaves the range of the other
    /// marks, so that it does not flatten the data.
    pub linear: Option<Fit>,
    /// The size of the SVG.
    pub size: Size,
}

/// One point of a confidence band.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BandSample {
    /// Position on the x axis (N).
    pub x: f64,
    /// Lower end of the band.
    pub low: f64,
    /// Upper end of the band.
    pub high: f64,
}

/// The finite points of a curve usable on `scale`, in order of x.
fn usable_curve(fit: Option<&Fit>, scale: XScale) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = fit
        .iter()
        .flat_map(|f| f.points.iter().copied())
        .filter(|(x, y)| usable_x(*x, scale) && y.is_finite())
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts
}

/// The part of an increasing curve at or below `cap`, ending where it crosses `cap`
/// (linear interpolation between samples).
fn clip_above(points: &[(f64, f64)], cap: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for (i, &(x, y)) in points.iter().enumerate() {
        if y <= cap {
            out.push((x, y));
            continue;
        }
        if let Some(&(x0, y0)) = i.checked_sub(1).and_then(|j| points.get(j)) {
            if y0 < cap && y > y0 {
                out.push((x0 + (x - x0) * (cap - y0) / (y - y0), cap));
            }
        }
        break;
    }
    out
}

/// Renders a scalability chart as an `<svg>` element.
///
/// Marks: the band as a `plot-band` polygon, linear scaling as a dotted
/// `plot-reference` polyline, the other model as a dashed `plot-fit plot-other`
/// polyline, the preferred model as a solid `plot-fit plot-preferred` polyline, then each
/// measured point (`plot-point`, black circles, with a tooltip) over its `plot-whisker`.
/// Returns the "no data" chart when nothing is drawable.
pub fn scaling(chart: &ScalingChart) -> String {
    let scale = chart.x_scale;
    let points: Vec<LinePoint> = {
        let mut p: Vec<LinePoint> = chart
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
        p.sort_by(|a, b| a.x.total_cmp(&b.x));
        p
    };
    let fit = usable_curve(chart.fit.as_ref(), scale);
    let other = usable_curve(chart.other.as_ref(), scale);
    let mut band: Vec<BandSample> = chart
        .band
        .iter()
        .copied()
        .filter(|b| usable_x(b.x, scale) && b.low.is_finite() && b.high.is_finite())
        .collect();
    band.sort_by(|a, b| a.x.total_cmp(&b.x));
    if points.is_empty() && fit.len() < 2 && other.len() < 2 {
        return canvas::no_data(chart.size, &chart.title);
    }

    let ys = points
        .iter()
        .flat_map(|p| [Some(p.y), p.y_low, p.y_high])
        .flatten()
        .chain(fit.iter().chain(&other).map(|p| p.1))
        .chain(band.iter().flat_map(|b| [b.low, b.high]));
    let (y_lo, y_hi) = axis::finite_extent(ys).unwrap_or((0.0, 1.0));
    // Linear scaling is a reference: it may use the headroom above the data, not more.
    let linear = clip_above(
        &usable_curve(chart.linear.as_ref(), scale),
        y_hi + (y_hi - y_lo.min(0.0)) * 0.1,
    );
    let xs = points
        .iter()
        .map(|p| p.x)
        .chain(fit.iter().chain(&other).chain(&linear).map(|p| p.0))
        .chain(band.iter().map(|b| b.x));
    let (x_lo, x_hi) = axis::finite_extent(xs).unwrap_or((1.0, 2.0));
    let y_hi = linear.iter().map(|p| p.1).fold(y_hi, f64::max);
    // Throughput starts at zero: the eye reads ratios of heights.
    let y_lo = if y_lo >= 0.0 { 0.0 } else { y_lo };
    let y = Axis::numeric(y_lo, y_hi + (y_hi - y_lo) * 0.05, 6, &chart.y_label);
    let x = match scale {
        XScale::Linear => {
            let pad = (x_hi - x_lo) * 0.02;
            Axis::numeric_tight(x_lo - pad, x_hi + pad, 8, &chart.x_label)
        }
        XScale::Log2 => log2_axis(x_lo, x_hi, &chart.x_label),
    };

    let mut legend = Vec::new();
    if !points.is_empty() {
        legend.push(LegendEntry {
            swatch: Swatch::LinePoint {
                colour: INK,
                shape: PointShape::Circle,
            },
            label: chart.points_label.clone(),
        });
    }
    let label = |f: Option<&Fit>, default: &str| {
        f.map(|f| f.label.clone())
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| default.to_owned())
    };
    if fit.len() >= 2 {
        legend.push(LegendEntry {
            swatch: Swatch::Line {
                colour: FIT_COLOUR,
                dash: "",
                width: 2.0,
            },
            label: label(chart.fit.as_ref(), "fit"),
        });
    }
    if band.len() >= 2 {
        legend.push(LegendEntry {
            swatch: Swatch::Fill("#b3d4e8"),
            label: if chart.band_label.is_empty() {
                "confidence band".to_owned()
            } else {
                chart.band_label.clone()
            },
        });
    }
    if other.len() >= 2 {
        legend.push(LegendEntry {
            swatch: Swatch::Line {
                colour: OTHER_COLOUR,
                dash: "6 4",
                width: 1.5,
            },
            label: label(chart.other.as_ref(), "other fit"),
        });
    }
    if linear.len() >= 2 {
        legend.push(LegendEntry {
            swatch: Swatch::Line {
                colour: INK,
                dash: "2 3",
                width: 1.5,
            },
            label: label(chart.linear.as_ref(), "linear scaling"),
        });
    }
    let frame = Frame {
        size: chart.size,
        title: &chart.title,
        legend,
        top_extra: 0,
    };
    let marks = Marks {
        scale,
        points: &points,
        fit: &fit,
        other: &other,
        band: &band,
        linear: &linear,
    };
    canvas::render(&frame, &x, &y, |plot, o| marks.draw(plot, o))
}

/// What [`scaling`] draws, reduced to drawable values.
struct Marks<'a> {
    scale: XScale,
    points: &'a [LinePoint],
    fit: &'a [(f64, f64)],
    other: &'a [(f64, f64)],
    band: &'a [BandSample],
    linear: &'a [(f64, f64)],
}

impl Marks<'_> {
    fn draw(&self, plot: &Plot<'_>, o: &mut Overlay) {
        let map = |x: f64, y: f64| (plot.map)(to_axis(x, self.scale), y);
        let curve = |pts: &[(f64, f64)]| -> Vec<(i32, i32)> {
            pts.iter().map(|&(x, y)| map(x, y)).collect()
        };
        if self.band.len() >= 2 {
            let mut poly: Vec<(i32, i32)> = self.band.iter().map(|b| map(b.x, b.high)).collect();
            poly.extend(self.band.iter().rev().map(|b| map(b.x, b.low)));
            o.polygon("plot-band", &poly, FIT_COLOUR, 0.2);
        }
        o.polyline("plot-reference", &curve(self.linear), INK, 1.5, "2 3", None);
        o.polyline(
            "plot-fit plot-other",
            &curve(self.other),
            OTHER_COLOUR,
            1.5,
            "6 4",
            None,
        );
        o.polyline(
            "plot-fit plot-preferred",
            &curve(self.fit),
            FIT_COLOUR,
            2.0,
            "",
            None,
        );
        for p in self.points {
            let ci = match (p.y_low, p.y_high) {
                (Some(l), Some(h)) => format!(" [{}, {}]", axis::value(l), axis::value(h)),
                _ => String::new(),
            };
            let tip = format!("N = {}: {}{ci}", axis::value(p.x), axis::value(p.y));
            o.group("plot-measured", Some(&tip));
            if let (Some(l), Some(h)) = (p.y_low, p.y_high) {
                let (x, yl) = map(p.x, l);
                let (_, yh) = map(p.x, h);
                o.line("plot-whisker", (x, yl), (x, yh), INK, 1.5, "");
                o.line("plot-whisker", (x - 4, yl), (x + 4, yl), INK, 1.5, "");
                o.line("plot-whisker", (x - 4, yh), (x + 4, yh), INK, 1.5, "");
            }
            o.point("plot-point", map(p.x, p.y), PointShape::Circle, INK);
            o.end_group();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plots::canvas::has_text;

    fn usl(n: f64) -> f64 {
        100.0 * n / (1.0 + 0.05 * (n - 1.0) + 0.002 * n * (n - 1.0))
    }

    fn chart(scale: XScale) -> ScalingChart {
        let ns = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0];
        let grid: Vec<f64> = (0..=20).map(|i| 2f64.powf(f64::from(i) / 4.0)).collect();
        ScalingChart {
            title: "threads".into(),
            x_label: "threads (count)".into(),
            y_label: "throughput (events/s)".into(),
            x_scale: scale,
            points_label: "mean of runs, 95% CI".into(),
            points: ns
                .iter()
                .map(|&n| LinePoint {
                    x: n,
                    y: usl(n),
                    y_low: Some(usl(n) * 0.97),
                    y_high: Some(usl(n) * 1.03),
                })
                .collect(),
            fit: Some(Fit {
                label: "USL (preferred)".into(),
                points: grid.iter().map(|&n| (n, usl(n))).collect(),
            }),
            band: grid
                .iter()
                .map(|&n| BandSample {
                    x: n,
                    low: usl(n) * 0.95,
                    high: usl(n) * 1.05,
                })
                .collect(),
            band_label: "95% band".into(),
            other: Some(Fit {
                label: "Amdahl".into(),
                points: grid
                    .iter()
                    .map(|&n| (n, 100.0 * n / (1.0 + 0.1 * (n - 1.0))))
                    .collect(),
            }),
            linear: Some(Fit {
                label: "linear scaling".into(),
                points: grid.iter().map(|&n| (n, 100.0 * n)).collect(),
            }),
            size: Size::default(),
        }
    }

    #[test]
    fn every_mark_and_the_legend() {
        let svg = scaling(&chart(XScale::Log2));
        assert_eq!(svg.matches("class=\"plot-point\"").count(), 6);
        assert_eq!(svg.matches("class=\"plot-whisker\"").count(), 18);
        assert_eq!(svg.matches("class=\"plot-band\"").count(), 1);
        assert_eq!(svg.matches("class=\"plot-fit plot-preferred\"").count(), 1);
        assert_eq!(svg.matches("class=\"plot-fit plot-other\"").count(), 1);
        assert_eq!(svg.matches("class=\"plot-reference\"").count(), 1);
        for t in [
            "mean of runs, 95% CI",
            "USL (preferred)",
            "95% band",
            "Amdahl",
            "linear scaling",
        ] {
            assert!(svg.contains(&format!(">{t}</text>")), "{t}");
        }
        assert!(has_text(&svg, "threads (count) (log₂ scale)"));
        assert!(svg.contains("<title>N = 4: "));
    }

    #[test]
    fn linear_scaling_is_cut_above_the_data() {
        let pts: Vec<(f64, f64)> = (1..=8).map(|n| (f64::from(n), f64::from(n))).collect();
        let c = clip_above(&pts, 3.5);
        assert_eq!(c, [(1.0, 1.0), (2.0, 2.0), (3.0, 3.0), (3.5, 3.5)]);
        assert!(clip_above(&pts, 0.5).is_empty());
        // The y axis does not reach 100·32 = 3200.
        let svg = scaling(&chart(XScale::Linear));
        assert!(!has_text(&svg, "3000") && !has_text(&svg, "3k"), "{svg}");
    }

    #[test]
    fn nothing_drawable_gives_no_data() {
        assert!(scaling(&ScalingChart::default()).contains(">no data</text>"));
        let mut c = chart(XScale::Log2);
        c.fit = None;
        c.other = None;
        for p in &mut c.points {
            p.x = 0.0;
        }
        assert!(scaling(&c).contains(">no data</text>"));
    }
}
