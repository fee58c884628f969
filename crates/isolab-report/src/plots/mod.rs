//! Charts as standalone inline SVG strings, for the HTML report.
//!
//! Every function here is pure: it takes a plain data type defined in this module (never
//! the store), and returns one `<svg>` element as a `String` with `width`, `height`,
//! `viewBox`, `role="img"` and a `<title>`, ready to be pasted into an HTML page. Nothing
//! is read or written, no fonts are needed (text is SVG `<text>` in `sans-serif`), and no
//! element carries an `id`, so any number of charts can share one page.
//!
//! | function | data | what it shows |
//! |---|---|---|
//! | [`grouped_bars`] | [`BarChart`] | seed 002: a value per category and group (overhead ratio per shape, quota vs pinned) with CI whiskers, verdict markers and a reference line |
//! | [`histogram`] | [`HistogramChart`] | seed 000: regression % binned, counts above the bars, lines at 0, the mean and percentiles; under [`DOTS_BELOW`] values, one dot per value instead of bins |
//! | [`lines`] | [`LineChart`] | scalability: series of (x, y) with CI bands and dashed fitted curves, linear or log2 x |
//! | [`scaling`] | [`ScalingChart`] | one scalability curve: measured means with CI whiskers, the preferred model with its bootstrap band, the other model dashed, linear scaling dotted |
//! | [`time_series`] | [`TimeSeriesChart`] | telemetry of one run over time (per-core utilisation), thin lines, no markers; load over time (seed 003): lines with bands over repetitions, thin p99 companions, active users on a right-hand axis |
//!
//! What every chart shares: a bold title, axis labels that carry their unit (the caller
//! writes them, e.g. `"overhead ratio (× bare metal)"`), ticks at "nice" numbers (1, 2, 2.5
//! or 5 × 10^k) formatted with just enough decimals, a legend wherever there is more than
//! one kind of mark, and the colour-blind-safe Okabe-Ito palette ([`PALETTE`]); where colour
//! carries a verdict, a shape carries it too. Numbers in the SVG are integers or fixed
//! decimals, so the output is byte-for-byte reproducible (snapshot tests rely on it).
//!
//! No input makes these functions panic: empty charts, NaN or infinite values and
//! out-of-range indices are skipped, and when nothing drawable is left the result is a
//! small SVG that says "no data".
//!
//! Marks are tagged with classes prefixed `plot-` (`plot-bar`, `plot-whisker`,
//! `plot-marker`, `plot-line`, `plot-band`, `plot-fit`, `plot-bin`, `plot-vline`,
//! `plot-legend`, …) so tests and pages can find them; colours and sizes are inline, so page
//! CSS does not restyle the marks by accident.

mod axis;
mod bars;
mod canvas;
mod histogram;
#[cfg(test)]
mod layout_tests;
mod lines;
mod scaling;
mod time_series;

pub use bars::{grouped_bars, Bar, BarChart};
pub use histogram::{histogram, HistogramBin, HistogramChart, Percentile, DOTS_BELOW};
pub use lines::{lines, Fit, LineChart, LinePoint, LineSeries, XScale};
pub use scaling::{scaling, BandSample, ScalingChart};
pub use time_series::{
    time_series, LineStyle, SecondaryAxis, TimeBand, TimeSample, TimeSeries, TimeSeriesChart,
};

/// The Okabe-Ito colour-blind-safe palette (Okabe & Ito 2008, "Color Universal Design"),
/// in the order series get their colours: blue, orange, bluish green, vermillion, reddish
/// purple, sky blue, black, yellow (last: it has the least contrast on white).
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442",
];

/// The colour of the `i`-th series: [`PALETTE`] repeated.
pub fn series_colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// How the `i`-th group of a bar chart is filled: [`series_colour`], and from the ninth
/// group on a fill that tells the rounds of the palette apart, so that 32 groups look
/// different: solid; pale (35% opacity) with an outline; solid with white stripes;
/// pale, outlined and striped in the colour.
pub(crate) fn bar_fill(i: usize) -> BarFill {
    let round = i / PALETTE.len() % 4;
    BarFill {
        colour: series_colour(i),
        pale: round % 2 == 1,
        striped: round >= 2,
    }
}

/// A bar's fill: see [`bar_fill`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BarFill {
    /// The colour.
    pub colour: &'static str,
    /// Pale with an outline in the colour, rather than solid.
    pub pale: bool,
    /// Horizontal stripes over the fill.
    pub striped: bool,
}

impl BarFill {
    /// Draws a rectangle between two corners with this fill.
    pub(crate) fn draw(
        self,
        o: &mut canvas::Overlay,
        class: &str,
        a: (i32, i32),
        b: (i32, i32),
        tooltip: Option<&str>,
    ) {
        let (outline, opacity) = if self.pale {
            (Some(self.colour), Some(0.35))
        } else {
            (None, None)
        };
        o.rect(class, a, b, self.colour, outline, opacity, tooltip);
        if self.striped {
            let stripe = if self.pale { self.colour } else { "#ffffff" };
            let (x0, x1) = (a.0.min(b.0) + 1, a.0.max(b.0) - 1);
            let mut y = a.1.min(b.1) + 3;
            while y < a.1.max(b.1) - 1 && x0 < x1 {
                o.line("plot-stripe", (x0, y), (x1, y), stripe, 1.5, "");
                y += 4;
            }
        }
    }
}

/// The size of a chart in CSS pixels (the SVG's `width`, `height` and `viewBox`).
///
/// Sizes are clamped to at least 240 × 160 and at most 4000 × 4000 when drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

impl Default for Size {
    /// 800 × 420: readable on a laptop screen, two fit one above the other.
    fn default() -> Self {
        Size {
            width: 800,
            height: 420,
        }
    }
}

impl Size {
    /// The size actually drawn: clamped to 240..=4000 × 160..=4000.
    pub fn clamped(self) -> Size {
        Size {
            width: self.width.clamp(240, 4000),
            height: self.height.clamp(160, 4000),
        }
    }
}

/// A horizontal line across a chart at a value of the y axis, with a label: e.g. y = 1.0
/// "no overhead" on an overhead-ratio chart.
#[derive(Debug, Clone, PartialEq)]
pub struct ReferenceLine {
    /// Where the line is, in units of the y axis.
    pub value: f64,
    /// What it means, shown in the legend next to a dashed line (e.g. "1.0 = no
    /// overhead"); not written over the plot, where it would cover marks.
    pub label: String,
}

/// The verdict of a comparison, drawn as a small symbol over a bar (benchstat's notation).
///
/// Shapes carry the meaning, not colour alone: ▲ worse, ▼ better, `≈` equivalent
/// within the noise threshold, `?` inconclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// Significantly worse than the baseline (a filled triangle pointing up).
    Worse,
    /// Significantly better than the baseline (a filled triangle pointing down).
    Better,
    /// Equivalent within the noise threshold (a `≈`).
    Equivalent,
    /// The data cannot tell yet (a `?`).
    Inconclusive,
}

impl Marker {
    /// Every marker, in legend order.
    pub const ALL: [Marker; 4] = [
        Marker::Worse,
        Marker::Better,
        Marker::Equivalent,
        Marker::Inconclusive,
    ];

    /// The words the legend uses for this marker.
    pub fn description(self) -> &'static str {
        match self {
            Marker::Worse => "significantly worse",
            Marker::Better => "significantly better",
            Marker::Equivalent => "equivalent within the noise threshold",
            Marker::Inconclusive => "inconclusive: more runs needed",
        }
    }
}

impl From<isolab_stats::Verdict> for Marker {
    fn from(v: isolab_stats::Verdict) -> Self {
        match v {
            isolab_stats::Verdict::Worse => Marker::Worse,
            isolab_stats::Verdict::Better => Marker::Better,
            isolab_stats::Verdict::Equivalent => Marker::Equivalent,
            isolab_stats::Verdict::Inconclusive => Marker::Inconclusive,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn clean(svg: &str) {
        assert!(svg.starts_with("<svg role=\"img\""), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
    }

    #[test]
    fn extreme_values_do_not_panic_or_leak_nan() {
        for (lo, hi) in [(-1e308, 1e308), (1e-300, 2e-300), (5.0, 5.0), (-0.0, 0.0)] {
            let bars = BarChart {
                title: "extreme".into(),
                categories: vec!["a".into(), "b".into()],
                groups: vec!["g".into()],
                bars: vec![
                    Bar {
                        low: Some(lo),
                        high: Some(hi),
                        marker: Some(Marker::Better),
                        ..Bar::new(0, 0, lo)
                    },
                    Bar::new(1, 0, hi),
                ],
                size: Size {
                    width: 0,
                    height: 0,
                },
                ..BarChart::default()
            };
            clean(&grouped_bars(&bars));
            let hist = HistogramChart {
                bins: vec![HistogramBin {
                    low: lo,
                    high: hi,
                    count: u64::MAX,
                }],
                mean: Some(hi),
                percentiles: vec![Percentile { p: 50.0, value: lo }],
                ..HistogramChart::default()
            };
            clean(&histogram(&hist));
            let line = LineChart {
                x_scale: XScale::Log2,
                series: vec![LineSeries {
                    name: "s".into(),
                    points: vec![LinePoint::new(lo.abs(), lo), LinePoint::new(hi.abs(), hi)],
                    fit: None,
                }],
                ..LineChart::default()
            };
            clean(&lines(&line));
            let ts = TimeSeriesChart {
                y_range: Some((hi, lo)),
                series: vec![TimeSeries {
                    name: "s".into(),
                    samples: vec![
                        TimeSample {
                            t: Duration::ZERO,
                            value: lo,
                        },
                        TimeSample {
                            t: Duration::MAX,
                            value: hi,
                        },
                    ],
                    ..Default::default()
                }],
                ..TimeSeriesChart::default()
            };
            clean(&time_series(&ts));
        }
    }

    #[test]
    fn many_categories_and_long_names_do_not_panic() {
        let n = 300;
        let chart = BarChart {
            title: "x".repeat(500),
            y_label: "y".into(),
            categories: (0..n).map(|i| format!("category {i}")).collect(),
            groups: (0..20)
                .map(|i| format!("group with a long name {i}"))
                .collect(),
            bars: (0..n).map(|c| Bar::new(c, c % 20, c as f64)).collect(),
            ..BarChart::default()
        };
        clean(&grouped_bars(&chart));
    }

    #[test]
    fn the_smallest_size_still_draws() {
        let tiny = Size {
            width: 1,
            height: 1,
        };
        let hist = HistogramChart {
            bins: vec![HistogramBin {
                low: 0.0,
                high: 1.0,
                count: 3,
            }],
            mean: Some(0.5),
            percentiles: vec![
                Percentile { p: 5.0, value: 0.1 },
                Percentile {
                    p: 50.0,
                    value: 0.5,
                },
                Percentile {
                    p: 95.0,
                    value: 0.9,
                },
            ],
            size: tiny,
            ..HistogramChart::default()
        };
        let svg = histogram(&hist);
        clean(&svg);
        assert!(svg.contains("width=\"240\" height=\"160\""));
        let bars = BarChart {
            categories: vec!["a".into()],
            groups: (0..300).map(|i| format!("group {i}")).collect(),
            bars: (0..300).map(|g| Bar::new(0, g, 1.0)).collect(),
            size: tiny,
            ..BarChart::default()
        };
        let svg = grouped_bars(&bars);
        clean(&svg);
        assert!(svg.contains("more</text>"));
    }

    #[test]
    fn palette_repeats() {
        assert_eq!(series_colour(0), "#0072B2");
        assert_eq!(series_colour(8), series_colour(0));
    }
}
