//! Time series over seconds since a start: telemetry of one run (per-core utilisation,
//! throttling, …) as thin lines, compact for thousands of samples; and load over time
//! (response time, requests per second) with a shaded band per line (the spread over
//! repetitions), thin companion lines (p99) and a secondary axis on the right (active
//! users).

use std::time::Duration;

use super::axis::{self, Axis};
use super::canvas::{self, Frame, LegendEntry, Overlay, Swatch, INK};
use super::{series_colour, Size, PALETTE};

/// A time-series chart: one line per series over time since the start of the run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimeSeriesChart {
    /// The chart's title (also its accessible name).
    pub title: String,
    /// The y axis title with its unit, e.g. `"utilisation (%)"`.
    pub y_label: String,
    /// The y range to show (e.g. `Some((0.0, 100.0))` for utilisation); values outside are
    /// clamped to it. `None` fits the data (including 0).
    pub y_range: Option<(f64, f64)>,
    /// The series, in legend order (e.g. one per core).
    pub series: Vec<TimeSeries>,
    /// Series in another unit on a second y axis at the right (e.g. active users over
    /// requests per second), or `None`.
    pub secondary: Option<SecondaryAxis>,
    /// The size of the SVG.
    pub size: Size,
}

/// The right-hand y axis of a [`TimeSeriesChart`] and the series drawn against it; it
/// always starts at 0.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SecondaryAxis {
    /// The axis title with its unit, e.g. `"active users"`.
    pub label: String,
    /// Its series; one without [`TimeSeries::colour`] is drawn dark grey.
    pub series: Vec<TimeSeries>,
}

/// One series of a [`TimeSeriesChart`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimeSeries {
    /// Its name in the legend (e.g. `"cpu 3"`).
    pub name: String,
    /// Its samples; drawn in order of time, samples with a non-finite value are skipped.
    pub samples: Vec<TimeSample>,
    /// A band shaded in the series' colour under the line (e.g. the lowest to the highest
    /// value over repetitions); empty for none. Entries with a non-finite end are skipped.
    pub band: Vec<TimeBand>,
    /// How the line is drawn.
    pub style: LineStyle,
    /// The [`PALETTE`] index of its colour (so that a companion line shares its main
    /// line's colour); `None` takes the series' position.
    pub colour: Option<usize>,
}

/// How a [`TimeSeries`] line is drawn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LineStyle {
    /// 1.25 px, solid (dashed once the palette has gone round).
    #[default]
    Regular,
    /// 1 px, dashed: a companion of a regular line, e.g. the p99 beside the median.
    Thin,
}

/// One sample of a [`TimeSeries`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeSample {
    /// Time since the start of the run.
    pub t: Duration,
    /// The value, in y-axis units.
    pub value: f64,
}

/// One step of a [`TimeSeries::band`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeBand {
    /// Time since the start.
    pub t: Duration,
    /// The band's lower end, in y-axis units.
    pub low: f64,
    /// The band's upper end.
    pub high: f64,
}

/// A series reduced to what can be drawn: its finite samples and band as (seconds, …) in
/// time order, its colour and dash.
struct Drawable<'a> {
    series: &'a TimeSeries,
    points: Vec<(f64, f64)>,
    band: Vec<(f64, f64, f64)>,
    colour: &'static str,
    dash: &'static str,
    width: f64,
}

impl<'a> Drawable<'a> {
    /// `None` when the series has neither a finite sample nor a band.
    fn new(i: usize, s: &'a TimeSeries, default_colour: Option<&'static str>) -> Option<Self> {
        let mut points: Vec<(f64, f64)> = s
            .samples
            .iter()
            .filter(|p| p.value.is_finite())
            .map(|p| (p.t.as_secs_f64(), p.value))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut band: Vec<(f64, f64, f64)> = s
            .band
            .iter()
            .filter(|b| b.low.is_finite() && b.high.is_finite())
            .map(|b| (b.t.as_secs_f64(), b.low.min(b.high), b.high.max(b.low)))
            .collect();
        band.sort_by(|a, b| a.0.total_cmp(&b.0));
        let index = s.colour.unwrap_or(i);
        let colour = match (s.colour, default_colour) {
            (None, Some(c)) => c,
            _ => series_colour(index),
        };
        let (dash, width) = match s.style {
            LineStyle::Regular => (dash(index), 1.25),
            LineStyle::Thin => ("4 3", 1.0),
        };
        (!points.is_empty() || !band.is_empty()).then_some(Drawable {
            series: s,
            points,
            band,
            colour,
            dash,
            width,
        })
    }

    fn times(&self) -> impl Iterator<Item = f64> + '_ {
        self.points
            .iter()
            .map(|p| p.0)
            .chain(self.band.iter().map(|b| b.0))
    }

    fn values(&self) -> impl Iterator<Item = f64> + '_ {
        self.points
            .iter()
            .map(|p| p.1)
            .chain(self.band.iter().flat_map(|b| [b.1, b.2]))
    }

    fn legend(&self, suffix: &str) -> LegendEntry {
        LegendEntry {
            swatch: Swatch::Line {
                colour: self.colour,
                dash: self.dash,
                width: if self.width < 1.25 { 1.5 } else { 2.0 },
            },
            label: format!("{}{suffix}", self.series.name),
        }
    }
}

/// Legend entries shown before "+N more".
const MAX_LEGEND: usize = 16;

/// Dash patterns for the second, third, … round through the palette, so that more series
/// than colours stay distinguishable.
const DASHES: [&str; 4] = ["", "6 3", "2 2", "8 3 2 3"];

fn dash(i: usize) -> &'static str {
    DASHES[(i / PALETTE.len()) % DASHES.len()]
}

/// The opacity of bands: light enough that lines and other bands show through.
const BAND_OPACITY: f64 = 0.18;

/// Renders a time-series chart as an `<svg>` element (see the [module docs](super)).
///
/// One `<polyline class="plot-line">` per series, 1.25 px wide (1 px and dashed for
/// [`LineStyle::Thin`]), no point symbols; points that fall in the same pixel column are
/// reduced to their first, lowest, highest and last value, so peaks survive and the SVG
/// stays small however many samples there are. A series' band is a `plot-band` polygon
/// in its colour under every line, reduced per pixel column to its lowest and highest
/// end. Secondary series are `plot-line plot-secondary` polylines against a right-hand
/// axis, marked "(right axis)" in the legend. The x axis is "time since start (s)".
/// Returns the "no data" chart when no series has a finite sample or band.
pub fn time_series(chart: &TimeSeriesChart) -> String {
    let series: Vec<Drawable<'_>> = chart
        .series
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Drawable::new(i, s, None))
        .collect();
    let secondary: Vec<Drawable<'_>> = chart
        .secondary
        .iter()
        .flat_map(|a| a.series.iter().enumerate())
        .filter_map(|(i, s)| Drawable::new(i, s, Some(INK)))
        .collect();
    if series.is_empty() && secondary.is_empty() {
        return canvas::no_data(chart.size, &chart.title);
    }
    let times = series.iter().chain(&secondary).flat_map(Drawable::times);
    let (t_lo, t_hi) = axis::finite_extent(times).unwrap_or((0.0, 1.0));
    let x = Axis::numeric_tight(t_lo, t_hi, 10, "time since start (s)");
    let range = chart
        .y_range
        .filter(|(lo, hi)| lo.is_finite() && hi.is_finite() && lo < hi);
    let y = match range {
        Some((lo, hi)) => Axis::numeric(lo, hi, 5, &chart.y_label),
        None => {
            let (lo, hi) = fitted(series.iter().flat_map(Drawable::values));
            Axis::numeric(lo, hi, 5, &chart.y_label)
        }
    };
    let y2 = chart
        .secondary
        .as_ref()
        .filter(|_| !secondary.is_empty())
        .map(|a| {
            let (lo, hi) = fitted(secondary.iter().flat_map(Drawable::values));
            Axis::numeric(lo, hi, 5, &a.label)
        });

    let mut legend: Vec<LegendEntry> = series
        .iter()
        .map(|d| d.legend(""))
        .chain(secondary.iter().map(|d| d.legend(" (right axis)")))
        .collect();
    if legend.len() > MAX_LEGEND {
        let more = legend.len() - MAX_LEGEND;
        legend.truncate(MAX_LEGEND);
        legend.push(LegendEntry {
            swatch: Swatch::None,
            label: format!("+{more} more"),
        });
    }
    let frame = Frame {
        size: chart.size,
        title: &chart.title,
        legend,
        top_extra: 0,
    };
    let (y_min, y_max) = (y.min, y.max);
    let y2_range = y2.as_ref().map(|a| (a.min, a.max));
    canvas::render_dual(&frame, &x, &y, y2.as_ref(), |plot, o| {
        for d in &series {
            draw_band(d, plot.map, (y_min, y_max), o);
        }
        for d in &series {
            draw_line(d, plot.map, (y_min, y_max), "plot-line", o);
        }
        if let (Some(map), Some(range)) = (plot.map_secondary, y2_range) {
            for d in &secondary {
                draw_band(d, map, range, o);
                draw_line(d, map, range, "plot-line plot-secondary", o);
            }
        }
    })
}

/// The range of `values` and 0; from 0 to 1 when all are 0 (a series of zeros, e.g. no
/// successful request, sits on the axis instead of mid-way up a −1 to 1 one).
fn fitted(values: impl Iterator<Item = f64>) -> (f64, f64) {
    match axis::finite_extent(values.chain([0.0])) {
        Some((lo, hi)) if hi > lo => (lo, hi),
        _ => (0.0, 1.0),
    }
}

type Map<'a> = &'a dyn Fn(f64, f64) -> (i32, i32);

fn draw_line(d: &Drawable<'_>, map: Map<'_>, (lo, hi): (f64, f64), class: &str, o: &mut Overlay) {
    let pixels = decimate(&d.points, lo, hi, map);
    o.polyline(
        class,
        &pixels,
        d.colour,
        d.width,
        d.dash,
        Some(&d.series.name),
    );
    if pixels.len() == 1 {
        o.point(
            "plot-point",
            pixels[0],
            canvas::PointShape::Circle,
            d.colour,
        );
    }
}

/// The band as one polygon: per pixel column the highest upper end and the lowest lower
/// end, along the top from left to right and back along the bottom.
fn draw_band(d: &Drawable<'_>, map: Map<'_>, (lo, hi): (f64, f64), o: &mut Overlay) {
    let mut top: Vec<(i32, i32)> = Vec::new();
    let mut bottom: Vec<(i32, i32)> = Vec::new();
    for (t, low, high) in &d.band {
        let up = map(*t, high.clamp(lo, hi));
        let down = map(*t, low.clamp(lo, hi));
        match (top.last_mut(), bottom.last_mut()) {
            (Some(u), Some(b)) if u.0 == up.0 => {
                // Pixel y grows downwards: the top is the smallest y, the bottom the largest.
                u.1 = u.1.min(up.1);
                b.1 = b.1.max(down.1);
            }
            _ => {
                top.push(up);
                bottom.push(down);
            }
        }
    }
    if top.len() < 2 {
        return;
    }
    top.extend(bottom.into_iter().rev());
    o.polygon("plot-band", &top, d.colour, BAND_OPACITY);
}

/// Maps samples to pixels, keeping per pixel column the first, lowest, highest and last
/// point (in time order) and dropping repeats.
fn decimate(pts: &[(f64, f64)], y_min: f64, y_max: f64, map: Map<'_>) -> Vec<(i32, i32)> {
    let mut out: Vec<(i32, i32)> = Vec::new();
    let mut column: Vec<(i32, i32)> = Vec::new();
    let flush = |column: &mut Vec<(i32, i32)>, out: &mut Vec<(i32, i32)>| {
        if column.is_empty() {
            return;
        }
        let first = column[0];
        let last = column[column.len() - 1];
        // Pixel y grows downwards: the lowest value has the largest y.
        let mut keep: Vec<(usize, (i32, i32))> = vec![(0, first), (column.len() - 1, last)];
        if let Some((i, p)) = column.iter().enumerate().max_by_key(|(_, p)| p.1) {
            keep.push((i, *p));
        }
        if let Some((i, p)) = column.iter().enumerate().min_by_key(|(_, p)| p.1) {
            keep.push((i, *p));
        }
        keep.sort_by_key(|(i, _)| *i);
        keep.dedup_by_key(|(i, _)| *i);
        for (_, p) in keep {
            if out.last() != Some(&p) {
                out.push(p);
            }
        }
        column.clear();
    };
    for (t, v) in pts {
        let p = map(*t, v.clamp(y_min, y_max));
        if column.first().is_some_and(|c| c.0 != p.0) {
            flush(&mut column, &mut out);
        }
        column.push(p);
    }
    flush(&mut column, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plots::canvas::has_text;

    fn utilisation(cores: usize, samples: usize) -> TimeSeriesChart {
        TimeSeriesChart {
            title: "CPU utilisation per core".into(),
            y_label: "utilisation (%)".into(),
            y_range: Some((0.0, 100.0)),
            series: (0..cores)
                .map(|c| TimeSeries {
                    name: format!("cpu {c}"),
                    samples: (0..samples)
                        .map(|i| TimeSample {
                            t: Duration::from_millis(i as u64 * 100),
                            value: 50.0
                                + 45.0 * ((i as f64 / 37.0) + c as f64).sin()
                                + (i % 7) as f64,
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            size: Size::default(),
            ..Default::default()
        }
    }

    #[test]
    fn one_polyline_per_series_and_axes_with_units() {
        let svg = time_series(&utilisation(4, 200));
        assert_eq!(svg.matches("class=\"plot-line\"").count(), 4);
        assert!(!svg.contains("plot-point"));
        assert!(has_text(&svg, "time since start (s)"));
        assert!(has_text(&svg, "utilisation (%)"));
        assert!(has_text(&svg, "100") && has_text(&svg, "0"));
        assert!(svg.contains(">cpu 3</text>"));
    }

    #[test]
    fn thousands_of_samples_stay_compact() {
        let one = time_series(&utilisation(1, 1000));
        assert!(one.len() < 20_000, "{} bytes", one.len());
        // Per pixel column at most four points survive.
        let points = one
            .split("class=\"plot-line\" points=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .map(|s| s.split(' ').count())
            .unwrap_or(0);
        assert!(points > 100 && points <= 4 * 800, "{points}");
        let many = time_series(&utilisation(16, 1000));
        assert!(many.len() < 250_000, "{} bytes", many.len());
    }

    #[test]
    fn many_series_get_dashes_and_a_short_legend() {
        let svg = time_series(&utilisation(20, 50));
        assert_eq!(svg.matches("class=\"plot-line\"").count(), 20);
        assert!(svg.contains("stroke-dasharray=\"6 3\""));
        assert!(svg.contains(">+4 more</text>"));
        assert!(!svg.contains(">cpu 17</text>"));
    }

    #[test]
    fn values_outside_the_range_are_clamped() {
        let c = TimeSeriesChart {
            title: "t".into(),
            y_label: "utilisation (%)".into(),
            y_range: Some((0.0, 100.0)),
            series: vec![TimeSeries {
                name: "cpu 0".into(),
                samples: vec![
                    TimeSample {
                        t: Duration::ZERO,
                        value: -20.0,
                    },
                    TimeSample {
                        t: Duration::from_secs(1),
                        value: 180.0,
                    },
                ],
                ..Default::default()
            }],
            size: Size::default(),
            ..Default::default()
        };
        let svg = time_series(&c);
        assert!(!has_text(&svg, "150") && !has_text(&svg, "-20"));
    }

    /// Two lines with bands over 600 seconds, a thin companion of the first, and a
    /// profile on the right axis.
    fn load(seconds: u64) -> TimeSeriesChart {
        let samples = |per: f64| -> Vec<TimeSample> {
            (0..seconds)
                .map(|s| TimeSample {
                    t: Duration::from_secs(s),
                    value: per * s as f64,
                })
                .collect()
        };
        let band = |per: f64| -> Vec<TimeBand> {
            (0..seconds)
                .map(|s| TimeBand {
                    t: Duration::from_secs(s),
                    low: 0.9 * per * s as f64,
                    high: 1.1 * per * s as f64,
                })
                .collect()
        };
        TimeSeriesChart {
            title: "load".into(),
            y_label: "requests (1/s)".into(),
            series: vec![
                TimeSeries {
                    name: "host".into(),
                    samples: samples(4.0),
                    band: band(4.0),
                    ..TimeSeries::default()
                },
                TimeSeries {
                    name: "vm".into(),
                    samples: samples(3.0),
                    band: band(3.0),
                    ..TimeSeries::default()
                },
                TimeSeries {
                    name: "host p99".into(),
                    samples: samples(8.0),
                    style: LineStyle::Thin,
                    colour: Some(0),
                    ..TimeSeries::default()
                },
            ],
            secondary: Some(SecondaryAxis {
                label: "active users".into(),
                series: vec![TimeSeries {
                    name: "active users".into(),
                    samples: samples(0.5),
                    style: LineStyle::Thin,
                    ..TimeSeries::default()
                }],
            }),
            ..TimeSeriesChart::default()
        }
    }

    #[test]
    fn bands_companions_and_a_secondary_axis() {
        let svg = time_series(&load(600));
        assert_eq!(svg.matches("class=\"plot-band\"").count(), 2);
        assert_eq!(svg.matches("class=\"plot-line\"").count(), 3);
        assert_eq!(svg.matches("class=\"plot-line plot-secondary\"").count(), 1);
        // The companion shares the first line's colour, the profile is dark grey.
        assert_eq!(
            svg.matches("stroke=\"#0072B2\" stroke-width=\"1\"").count(),
            1
        );
        assert!(svg.contains("stroke=\"#222222\" stroke-width=\"1\""));
        assert!(svg.contains(">active users (right axis)</text>"));
        assert!(has_text(&svg, "active users"));
        // The right axis reaches the profile's 300 users, the left one the p99's 4792.
        assert!(has_text(&svg, "300"));
        assert!(has_text(&svg, "5000") || has_text(&svg, "5k"), "{svg}");
        // Bands are reduced per pixel column: 600 seconds fit in well under 2 × 600 points.
        let band = svg.split("class=\"plot-band\" points=\"").nth(1).unwrap();
        let points = band.split('"').next().unwrap().split(' ').count();
        assert!(points <= 2 * 600, "{points}");
        // Without the secondary series there is no right axis.
        let mut plain = load(60);
        plain.secondary = None;
        let svg = time_series(&plain);
        assert!(!svg.contains("plot-secondary") && !has_text(&svg, "active users"));
    }

    #[test]
    fn a_series_of_zeros_sits_on_the_axis() {
        let mut c = load(10);
        c.secondary = None;
        for s in &mut c.series {
            s.band.clear();
            for p in &mut s.samples {
                p.value = 0.0;
            }
        }
        let svg = time_series(&c);
        assert!(!has_text(&svg, "-1") && !has_text(&svg, "-1.0"), "{svg}");
        assert!(has_text(&svg, "1.0") || has_text(&svg, "1"), "{svg}");
    }

    #[test]
    fn a_band_alone_is_drawn_and_bad_ends_are_skipped() {
        let c = TimeSeriesChart {
            series: vec![TimeSeries {
                name: "band".into(),
                band: vec![
                    TimeBand {
                        t: Duration::ZERO,
                        low: 1.0,
                        high: 2.0,
                    },
                    TimeBand {
                        t: Duration::from_secs(1),
                        low: f64::NAN,
                        high: 2.0,
                    },
                    TimeBand {
                        t: Duration::from_secs(2),
                        low: 3.0,
                        high: 1.0,
                    },
                ],
                ..TimeSeries::default()
            }],
            ..TimeSeriesChart::default()
        };
        let svg = time_series(&c);
        assert!(!svg.contains("no data"));
        assert_eq!(svg.matches("class=\"plot-band\"").count(), 1);
        assert!(!svg.contains("NaN"));
    }

    #[test]
    fn empty_or_nan_gives_no_data() {
        assert!(time_series(&TimeSeriesChart::default()).contains(">no data</text>"));
        let mut c = utilisation(2, 10);
        for s in &mut c.series {
            for p in &mut s.samples {
                p.value = f64::NAN;
            }
        }
        assert!(time_series(&c).contains(">no data</text>"));
    }

    #[test]
    fn one_sample_is_a_point() {
        let c = TimeSeriesChart {
            title: "t".into(),
            y_label: "u (%)".into(),
            y_range: None,
            series: vec![TimeSeries {
                name: "cpu 0".into(),
                samples: vec![TimeSample {
                    t: Duration::from_secs(2),
                    value: 40.0,
                }],
                ..Default::default()
            }],
            size: Size::default(),
            ..Default::default()
        };
        let svg = time_series(&c);
        assert!(svg.contains("class=\"plot-point\""));
        assert!(!svg.contains("no data"));
    }
}
