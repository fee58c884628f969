//! Time series of one run (per-core utilisation, throttling, …): thin lines over seconds
//! since the start, compact for thousands of samples.

use std::time::Duration;

use super::axis::{self, Axis};
use super::canvas::{self, Frame, LegendEntry, Plot, Swatch};
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
    /// The size of the SVG.
    pub size: Size,
}

/// One series of a [`TimeSeriesChart`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimeSeries {
    /// Its name in the legend (e.g. `"cpu 3"`).
    pub name: String,
    /// Its samples; drawn in order of time, samples with a non-finite value are skipped.
    pub samples: Vec<TimeSample>,
}

/// One sample of a [`TimeSeries`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeSample {
    /// Time since the start of the run.
    pub t: Duration,
    /// The value, in y-axis units.
    pub value: f64,
}

/// A series to draw: its index (for its colour), itself, and its finite samples as
/// (seconds, value) in time order.
type Drawable<'a> = (usize, &'a TimeSeries, Vec<(f64, f64)>);

/// Legend entries shown before "+N more".
const MAX_LEGEND: usize = 16;

/// Dash patterns for the second, third, … round through the palette, so that more series
/// than colours stay distinguishable.
const DASHES: [&str; 4] = ["", "6 3", "2 2", "8 3 2 3"];

fn dash(i: usize) -> &'static str {
    DASHES[(i / PALETTE.len()) % DASHES.len()]
}

/// Renders a time-series chart as an `<svg>` element (see the [module docs](super)).
///
/// One `<polyline class="plot-line">` per series, 1.25 px wide, no point symbols; points
/// that fall in the same pixel column are reduced to their first, lowest, highest and last
/// value, so peaks survive and the SVG stays small however many samples there are. The x
/// axis is "time since start (s)". Returns the "no data" chart when no series has a
/// finite sample.
pub fn time_series(chart: &TimeSeriesChart) -> String {
    let series: Vec<Drawable<'_>> = chart
        .series
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let mut pts: Vec<(f64, f64)> = s
                .samples
                .iter()
                .filter(|p| p.value.is_finite())
                .map(|p| (p.t.as_secs_f64(), p.value))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            (!pts.is_empty()).then_some((i, s, pts))
        })
        .collect();
    if series.is_empty() {
        return canvas::no_data(chart.size, &chart.title);
    }
    let (t_lo, t_hi) = axis::finite_extent(series.iter().flat_map(|s| s.2.iter().map(|p| p.0)))
        .unwrap_or((0.0, 1.0));
    let x = Axis::numeric_tight(t_lo, t_hi, 10, "time since start (s)");
    let range = chart
        .y_range
        .filter(|(lo, hi)| lo.is_finite() && hi.is_finite() && lo < hi);
    let y = match range {
        Some((lo, hi)) => Axis::numeric(lo, hi, 5, &chart.y_label),
        None => {
            let values = series.iter().flat_map(|s| s.2.iter().map(|p| p.1));
            let (lo, hi) = axis::finite_extent(values.chain([0.0])).unwrap_or((0.0, 1.0));
            Axis::numeric(lo, hi, 5, &chart.y_label)
        }
    };

    let mut legend: Vec<LegendEntry> = series
        .iter()
        .take(MAX_LEGEND)
        .map(|(i, s, _)| LegendEntry {
            swatch: Swatch::Line {
                colour: series_colour(*i),
                dash: dash(*i),
                width: 2.0,
            },
            label: s.name.clone(),
        })
        .collect();
    if series.len() > MAX_LEGEND {
        legend.push(LegendEntry {
            swatch: Swatch::None,
            label: format!("+{} more", series.len() - MAX_LEGEND),
        });
    }
    let frame = Frame {
        size: chart.size,
        title: &chart.title,
        legend,
        top_extra: 0,
    };
    let (y_min, y_max) = (y.min, y.max);
    canvas::render(&frame, &x, &y, |plot, o| {
        for (i, s, pts) in &series {
            let pixels = decimate(pts, y_min, y_max, plot);
            o.polyline(
                "plot-line",
                &pixels,
                series_colour(*i),
                1.25,
                dash(*i),
                Some(&s.name),
            );
            if pixels.len() == 1 {
                o.point(
                    "plot-point",
                    pixels[0],
                    canvas::PointShape::Circle,
                    series_colour(*i),
                );
            }
        }
    })
}

/// Maps samples to pixels, keeping per pixel column the first, lowest, highest and last
/// point (in time order) and dropping repeats.
fn decimate(pts: &[(f64, f64)], y_min: f64, y_max: f64, plot: &Plot<'_>) -> Vec<(i32, i32)> {
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
        let p = (plot.map)(*t, v.clamp(y_min, y_max));
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
                })
                .collect(),
            size: Size::default(),
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
            }],
            size: Size::default(),
        };
        let svg = time_series(&c);
        assert!(!has_text(&svg, "150") && !has_text(&svg, "-20"));
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
            }],
            size: Size::default(),
        };
        let svg = time_series(&c);
        assert!(svg.contains("class=\"plot-point\""));
        assert!(!svg.contains("no data"));
    }
}
