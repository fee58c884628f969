//! Every chart kind, drawn with long titles and labels and extreme data at the sizes the
//! report uses: every `<text>` must lie inside the SVG's viewBox and no two labels may
//! overlap, by the same width estimate the charts lay text out with
//! ([`text_width`](super::axis::text_width)).

use std::time::Duration;

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use super::axis::text_width;
use super::*;

/// The box a `<text>` element covers, in SVG pixels.
#[derive(Debug, Clone)]
struct TextBox {
    text: String,
    class: String,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
}

impl TextBox {
    fn overlaps(&self, other: &TextBox) -> bool {
        // Half a pixel of slack: boxes that touch do not overlap.
        const SLACK: f64 = 0.5;
        self.left + SLACK < other.right
            && other.left + SLACK < self.right
            && self.top + SLACK < other.bottom
            && other.top + SLACK < self.bottom
    }
}

fn attr(e: &BytesStart<'_>, name: &str) -> Option<String> {
    e.attributes()
        .filter_map(Result::ok)
        .find(|a| a.key.as_ref() == name.as_bytes())
        .map(|a| String::from_utf8_lossy(&a.value).into_owned())
}

fn number(s: &str) -> f64 {
    s.trim()
        .parse()
        .unwrap_or_else(|_| panic!("not a number: {s:?}"))
}

/// A `style` property, e.g. `font-size` in `font-family:sans-serif;font-size:12px`.
fn style(style: &str, key: &str) -> Option<String> {
    style.split(';').find_map(|kv| {
        let (k, v) = kv.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_owned())
    })
}

/// The viewBox (width, height) and the box of every `<text>` of `svg` (its own text only,
/// not a `<title>` tooltip inside it).
fn text_boxes(svg: &str) -> ((f64, f64), Vec<TextBox>) {
    let mut reader = Reader::from_str(svg);
    let mut view = None;
    let mut boxes = Vec::new();
    // The open <text> element and the depth of elements opened inside it.
    let mut open: Option<(BytesStart<'static>, String)> = None;
    let mut inner = 0usize;
    loop {
        match reader.read_event().expect("well-formed SVG") {
            Event::Start(e) if e.name().as_ref() == b"svg" => {
                let v: Vec<f64> = attr(&e, "viewBox")
                    .expect("a viewBox")
                    .split_whitespace()
                    .map(number)
                    .collect();
                view = Some((v[2], v[3]));
            }
            Event::Start(e) if e.name().as_ref() == b"text" => {
                open = Some((e.into_owned(), String::new()));
                inner = 0;
            }
            Event::Start(_) if open.is_some() => inner += 1,
            Event::Text(t) if inner == 0 => {
                if let Some((_, text)) = open.as_mut() {
                    text.push_str(&t.unescape().expect("valid text"));
                }
            }
            Event::End(e) if e.name().as_ref() == b"text" => {
                if let Some((start, text)) = open.take() {
                    let text = text.trim().to_owned();
                    if !text.is_empty() {
                        boxes.push(text_box(&start, text));
                    }
                }
            }
            Event::End(_) if open.is_some() => inner = inner.saturating_sub(1),
            Event::Eof => break,
            _ => {}
        }
    }
    (view.expect("an <svg> root"), boxes)
}

/// Where a `<text>` is drawn: plotters writes `font-size`, `dy` (top, middle or bottom
/// alignment) and `transform="rotate(…)"`; the overlay writes its font in `style`, with the
/// baseline at `y`.
fn text_box(e: &BytesStart<'_>, text: String) -> TextBox {
    let css = attr(e, "style").unwrap_or_default();
    let px = attr(e, "font-size")
        .or_else(|| style(&css, "font-size"))
        .map(|s| number(s.trim_end_matches("px")))
        .expect("a font size");
    let bold = style(&css, "font-weight").is_some_and(|w| w == "bold")
        || attr(e, "font-weight").is_some_and(|w| w == "bold");
    let x = number(&attr(e, "x").unwrap_or_else(|| "0".into()));
    let y = number(&attr(e, "y").unwrap_or_else(|| "0".into()));
    let w = f64::from(text_width(&text, px, bold));
    let (left, right) = match attr(e, "text-anchor").as_deref() {
        Some("middle") => (x - w / 2.0, x + w / 2.0),
        Some("end") => (x - w, x),
        _ => (x, x + w),
    };
    let baseline = y + match attr(e, "dy").as_deref() {
        Some(dy) if dy.ends_with("em") => number(dy.trim_end_matches("em")) * px,
        Some(dy) if dy.ends_with("ex") => number(dy.trim_end_matches("ex")) * px / 2.0,
        Some(dy) => number(dy),
        None => 0.0,
    };
    // Ascent and descent of the font.
    let (top, bottom) = (baseline - 0.76 * px, baseline + 0.24 * px);
    let class = attr(e, "class").unwrap_or_default();
    let Some(rotate) = attr(e, "transform") else {
        return TextBox {
            text,
            class,
            left,
            right,
            top,
            bottom,
        };
    };
    // rotate(a, cx, cy): the box's corners turned by a degrees about (cx, cy).
    let args: Vec<f64> = rotate
        .trim_start_matches("rotate(")
        .trim_end_matches(')')
        .split(',')
        .map(number)
        .collect();
    let (a, cx, cy) = (args[0].to_radians(), args[1], args[2]);
    let corners = [(left, top), (right, top), (left, bottom), (right, bottom)].map(|(px, py)| {
        let (u, v) = (px - cx, py - cy);
        (
            cx + u * a.cos() - v * a.sin(),
            cy + u * a.sin() + v * a.cos(),
        )
    });
    let xs = corners.map(|c| c.0);
    let ys = corners.map(|c| c.1);
    TextBox {
        text,
        class,
        left: xs.iter().copied().fold(f64::INFINITY, f64::min),
        right: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        top: ys.iter().copied().fold(f64::INFINITY, f64::min),
        bottom: ys.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    }
}

/// Every text lies inside the viewBox, and no two labels overlap (verdict markers are
/// marks, drawn over their bars, not labels).
fn check(name: &str, svg: &str) -> Result<(), String> {
    let ((w, h), boxes) = text_boxes(svg);
    let mut problems = Vec::new();
    for b in &boxes {
        if b.left < 0.0 || b.top < 0.0 || b.right > w || b.bottom > h {
            problems.push(format!(
                "{name}: {:?} ({:.0}..{:.0} × {:.0}..{:.0}) leaves the {w} × {h} viewBox",
                b.text, b.left, b.right, b.top, b.bottom
            ));
        }
    }
    let labels: Vec<&TextBox> = boxes
        .iter()
        .filter(|b| !b.class.contains("plot-marker"))
        .collect();
    for (i, a) in labels.iter().enumerate() {
        for b in &labels[i + 1..] {
            if a.overlaps(b) {
                problems.push(format!(
                    "{name}: {:?} ({:.0}..{:.0} × {:.0}..{:.0}) overlaps {:?} ({:.0}..{:.0} × {:.0}..{:.0})",
                    a.text, a.left, a.right, a.top, a.bottom, b.text, b.left, b.right, b.top, b.bottom
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

const LONG: &str = "platform=isolab shape=xlarge placement=pinned against platform=host shape=xlarge placement=shared: overhead ratio of events_per_second over 1234 measurement points";

fn long(prefix: &str, i: usize) -> String {
    format!("{prefix} {i} with a rather long name=value")
}

/// The sizes charts are drawn at: the default, the report's bars (640 × 380), histograms
/// (640 × 360) and time series (520 × 260), and the smallest sensible one.
const SIZES: [(u32, u32); 5] = [(800, 420), (640, 380), (640, 360), (520, 260), (400, 300)];

/// Data ranges from tiny to huge, negative and positive.
const RANGES: [(f64, f64); 6] = [
    (0.0, 1.0),
    (-3.0, 2.5),
    (1e-7, 3e-7),
    (-123_456.0, 987_654.0),
    (0.97, 1.12),
    (-4.0e12, 9.5e15),
];

fn bar_charts(size: Size, lo: f64, hi: f64) -> Vec<BarChart> {
    let mut out = Vec::new();
    for (n_cat, n_grp) in [(1, 6), (4, 4), (12, 3), (40, 1), (2, 28)] {
        let bars = (0..n_cat)
            .flat_map(|c| {
                (0..n_grp).map(move |g| {
                    let f = (c * n_grp + g) as f64 / (n_cat * n_grp).max(2) as f64;
                    let v = lo + (hi - lo) * f;
                    Bar {
                        low: Some(v - (hi - lo) * 0.05),
                        high: Some(v + (hi - lo) * 0.05),
                        marker: Some(
                            [Marker::Worse, Marker::Better, Marker::Equivalent][(c + g) % 3],
                        ),
                        ..Bar::new(c, g, v)
                    }
                })
            })
            .collect();
        out.push(BarChart {
            title: LONG.into(),
            y_label:
                "overhead ratio (× baseline, above 1 = worse, oriented by the metric's direction)"
                    .into(),
            x_label: "shape of the instance, in named sizes as in seed 002".into(),
            categories: (0..n_cat).map(|i| long("category", i)).collect(),
            groups: (0..n_grp)
                .map(|i| long("platform=isolab placement=pinned group", i))
                .collect(),
            bars,
            reference: Some(ReferenceLine {
                value: (lo + hi) / 2.0,
                label: "1.0 = baseline, the configuration everything is compared against".into(),
            }),
            size,
        });
    }
    out
}

fn histogram_charts(size: Size, lo: f64, hi: f64) -> Vec<HistogramChart> {
    let n = 16;
    let step = (hi - lo) / n as f64;
    let bins: Vec<HistogramBin> = (0..n)
        .map(|i| HistogramBin {
            low: lo + step * i as f64,
            high: lo + step * (i + 1) as f64,
            count: [1, 5, 40, 1_234_567, 3, 0, 17, 2][i % 8],
        })
        .collect();
    let mid = (lo + hi) / 2.0;
    // Percentiles and the mean bunched together, spread out, and at the edges.
    let spreads = [0.0, 1e-3, 0.1, 0.5];
    spreads
        .iter()
        .map(|s| HistogramChart {
            title: LONG.into(),
            x_label: "regression (%, 100·(B − A)/min(A, B), positive = worse)".into(),
            y_label: "measurement points per bin of 5%".into(),
            unit: "% of the baseline's mean".into(),
            bins: bins.clone(),
            values: Vec::new(),
            mean: Some(mid + s * (hi - lo) * 0.1),
            percentiles: [1.0, 5.0, 25.0, 50.0, 75.0, 95.0, 99.0]
                .iter()
                .map(|p| Percentile {
                    p: *p,
                    value: (mid + s * (hi - lo) * (p - 50.0) / 50.0).clamp(lo, hi),
                })
                .collect(),
            size,
        })
        // The same over a few values: a dot plot, some dots piled up, some alone.
        .flat_map(|chart| {
            let dots = HistogramChart {
                values: (0..12)
                    .map(|i| lo + (hi - lo) * [0.0, 0.01, 0.02, 0.5, 0.51, 1.0][i % 6])
                    .collect(),
                ..chart.clone()
            };
            [chart, dots]
        })
        .collect()
}

fn line_charts(size: Size, lo: f64, hi: f64) -> Vec<LineChart> {
    let xs = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0];
    [XScale::Linear, XScale::Log2]
        .iter()
        .map(|scale| LineChart {
            title: LONG.into(),
            x_label: "threads of the workload, as many as the instance has cpus (count)".into(),
            y_label: "throughput of the workload (events per second, higher is better)".into(),
            x_scale: *scale,
            series: (0..6)
                .map(|s| LineSeries {
                    name: long("platform=isolab series", s),
                    points: xs
                        .iter()
                        .enumerate()
                        .map(|(i, x)| {
                            let y = lo + (hi - lo) * ((i + s) % 8) as f64 / 7.0;
                            LinePoint {
                                y_low: Some(y - (hi - lo) * 0.02),
                                y_high: Some(y + (hi - lo) * 0.02),
                                ..LinePoint::new(x * (hi.abs().max(1.0)), y)
                            }
                        })
                        .collect(),
                    fit: Some(Fit {
                        label: long("USL fit σ = 0.04, κ = 0.003 of series", s),
                        points: xs
                            .iter()
                            .map(|x| (x * hi.abs().max(1.0), mid(lo, hi)))
                            .collect(),
                    }),
                })
                .collect(),
            reference: Some(ReferenceLine {
                value: mid(lo, hi),
                label: "linear scaling from one thread, the ideal nobody reaches".into(),
            }),
            size,
        })
        .collect()
}

fn mid(lo: f64, hi: f64) -> f64 {
    (lo + hi) / 2.0
}

fn scaling_charts(size: Size, lo: f64, hi: f64) -> Vec<ScalingChart> {
    let xs = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0];
    let ys: Vec<f64> = (0..xs.len())
        .map(|i| lo + (hi - lo) * i as f64 / 5.0)
        .collect();
    let fit = |label: &str| Fit {
        label: label.into(),
        points: xs.iter().zip(&ys).map(|(x, y)| (*x, *y)).collect(),
    };
    [XScale::Linear, XScale::Log2]
        .iter()
        .map(|scale| ScalingChart {
            title: LONG.into(),
            x_label: "instances of the workload running at the same time (count)".into(),
            y_label: "aggregate throughput of all instances (events per second)".into(),
            x_scale: *scale,
            points_label: "measured mean throughput with its 95% confidence interval".into(),
            points: xs
                .iter()
                .zip(&ys)
                .map(|(x, y)| LinePoint {
                    y_low: Some(y - (hi - lo) * 0.03),
                    y_high: Some(y + (hi - lo) * 0.03),
                    ..LinePoint::new(*x, *y)
                })
                .collect(),
            fit: Some(fit(
                "USL: λ = 1000, σ = 0.04, κ = 0.003 (preferred, lower AIC)",
            )),
            band: xs
                .iter()
                .zip(&ys)
                .map(|(x, y)| BandSample {
                    x: *x,
                    low: y - (hi - lo) * 0.05,
                    high: y + (hi - lo) * 0.05,
                })
                .collect(),
            band_label: "95% bootstrap band of the preferred model".into(),
            other: Some(fit("Amdahl: λ = 1000, σ = 0.1 (the other model)")),
            linear: Some(fit("linear scaling from X(1), the ideal")),
            size,
        })
        .collect()
}

fn time_series_charts(size: Size, lo: f64, hi: f64) -> Vec<TimeSeriesChart> {
    [2usize, 64]
        .iter()
        .map(|cores| TimeSeriesChart {
            title: LONG.into(),
            y_label: "cpu utilisation of the core (%, sampled at 10 Hz)".into(),
            y_range: None,
            series: (0..*cores)
                .map(|c| TimeSeries {
                    name: format!("cpu{c} of the host, {}", long("core", c)),
                    samples: (0..50)
                        .map(|i| TimeSample {
                            t: Duration::from_millis(i * 100_000),
                            value: lo + (hi - lo) * ((i as usize + c) % 10) as f64 / 9.0,
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            size,
            ..Default::default()
        })
        .collect()
}

#[test]
fn every_text_fits_in_the_chart_and_no_labels_overlap() {
    let mut problems = Vec::new();
    let mut charts = 0;
    let mut run = |name: String, svg: String| {
        charts += 1;
        if let Err(e) = check(&name, &svg) {
            problems.push(e);
        }
    };
    for (width, height) in SIZES {
        let size = Size { width, height };
        for (lo, hi) in RANGES {
            let at = format!("{width}×{height} [{lo}, {hi}]");
            for (i, c) in bar_charts(size, lo, hi).iter().enumerate() {
                run(format!("bars {i} {at}"), grouped_bars(c));
            }
            for (i, c) in histogram_charts(size, lo, hi).iter().enumerate() {
                run(format!("histogram {i} {at}"), histogram(c));
            }
            for (i, c) in line_charts(size, lo, hi).iter().enumerate() {
                run(format!("lines {i} {at}"), lines(c));
            }
            for (i, c) in scaling_charts(size, lo, hi).iter().enumerate() {
                run(format!("scaling {i} {at}"), scaling(c));
            }
            for (i, c) in time_series_charts(size, lo, hi).iter().enumerate() {
                run(format!("time series {i} {at}"), time_series(c));
            }
        }
        run(
            format!("no data {width}×{height}"),
            grouped_bars(&BarChart {
                title: LONG.into(),
                size,
                ..BarChart::default()
            }),
        );
    }
    assert!(charts > 300, "{charts} charts");
    let total = problems.len();
    problems.truncate(40);
    assert!(
        total == 0,
        "{total} charts with text outside or overlapping:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_legend_of_28_configurations_shows_every_one_in_its_own_fill() {
    // 14 platforms × 2 placements, at the report's bar size and the smallest one.
    for (width, height) in [(640, 380), (400, 300)] {
        let chart = &bar_charts(Size { width, height }, 0.97, 1.12)[4];
        assert_eq!(chart.groups.len(), 28);
        let svg = grouped_bars(chart);
        check("28 groups", &svg).unwrap();
        assert!(!svg.contains("more</text>"), "every group in the legend");
        for g in &chart.groups {
            let shown = canvas::ellipsize(g, 12.0, false, width as i32 - 24 - 30);
            assert!(svg.contains(&format!(">{shown}</text>")), "{g} missing");
        }
        let (_, h) = text_boxes(&svg).0;
        assert!(h > f64::from(height), "grown for the legend: {h}");
    }
    let fills: Vec<BarFill> = (0..28).map(bar_fill).collect();
    for (i, a) in fills.iter().enumerate() {
        assert!(!fills[i + 1..].contains(a), "group {i} shares its fill");
    }
}

#[test]
fn text_boxes_follow_anchor_alignment_and_rotation() {
    let svg = "<svg viewBox=\"0 0 100 50\"><text x=\"50\" y=\"20\" text-anchor=\"middle\" style=\"font-size:10px\">ab<title>tip</title></text>\
               <text x=\"12\" y=\"30\" dy=\"0.76em\" text-anchor=\"middle\" font-size=\"10\" transform=\"rotate(270, 12, 30)\">abcd</text></svg>";
    let ((w, h), boxes) = text_boxes(svg);
    assert_eq!((w, h), (100.0, 50.0));
    assert_eq!(boxes.len(), 2);
    assert_eq!(boxes[0].text, "ab");
    let half = f64::from(text_width("ab", 10.0, false)) / 2.0;
    assert_eq!((boxes[0].left, boxes[0].right), (50.0 - half, 50.0 + half));
    assert!((boxes[0].top - 12.4).abs() < 1e-9 && (boxes[0].bottom - 22.4).abs() < 1e-9);
    // Rotated a quarter turn: as tall as the text is wide, centred on y = 30.
    let tall = f64::from(text_width("abcd", 10.0, false));
    assert!((boxes[1].bottom - boxes[1].top - tall).abs() < 1e-9);
    assert!(((boxes[1].top + boxes[1].bottom) / 2.0 - 30.0).abs() < 1e-9);
    assert!(check("overflow", svg).is_ok());
    let overlapping = svg
        .replace("x=\"12\" y=\"30\"", "x=\"50\" y=\"20\"")
        .replace(" transform=\"rotate(270, 12, 30)\"", "");
    assert!(check("overlap", &overlapping).is_err());
}
