//! Snapshot tests of every chart on fixed data (`tests/snapshots/`), and checks that each
//! SVG is well-formed XML with an accessible name: what a page embedding them relies on.
//!
//! The output contains no timings, paths or random values and numbers are integers or
//! fixed decimals, so the snapshots are byte-for-byte stable. Review changes with
//! `cargo insta review` (or `INSTA_UPDATE=always cargo test -p isolab-report --test plots`
//! and `git diff`).

mod fixtures;

use isolab_report::plots::{
    grouped_bars, histogram, lines, time_series, BarChart, HistogramChart, LineChart,
    TimeSeriesChart,
};
use quick_xml::events::Event;
use quick_xml::Reader;

/// What the parser found in one SVG.
struct Parsed {
    root_attributes: Vec<(String, String)>,
    first_child: String,
    title: String,
}

/// Parses `svg` as XML (end tags must match), or says why it is not well-formed.
fn parse(svg: &str) -> Result<Parsed, String> {
    let mut reader = Reader::from_str(svg);
    let mut root: Option<Vec<(String, String)>> = None;
    let mut first_child = None;
    let mut in_title = false;
    let mut title = String::new();
    let mut depth = 0usize;
    loop {
        let event = reader
            .read_event()
            .map_err(|e| format!("not well-formed at byte {}: {e}", reader.buffer_position()))?;
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                if root.is_none() {
                    if name != "svg" {
                        return Err(format!("root element is <{name}>, not <svg>"));
                    }
                    root = Some(
                        e.attributes()
                            .filter_map(Result::ok)
                            .map(|a| {
                                (
                                    String::from_utf8_lossy(a.key.as_ref()).into_owned(),
                                    String::from_utf8_lossy(&a.value).into_owned(),
                                )
                            })
                            .collect(),
                    );
                } else if first_child.is_none() {
                    first_child = Some(name.clone());
                    in_title = name == "title";
                }
                if matches!(event, Event::Start(_)) {
                    depth += 1;
                }
            }
            Event::Text(t) if in_title => {
                title.push_str(&t.unescape().map_err(|e| e.to_string())?);
            }
            Event::End(_) => {
                in_title = false;
                depth = depth.saturating_sub(1);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("{depth} element(s) left open"));
    }
    Ok(Parsed {
        root_attributes: root.ok_or("no root element")?,
        first_child: first_child.unwrap_or_default(),
        title,
    })
}

fn check_svg(svg: &str, title: &str) {
    let p = parse(svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
    let attr = |k: &str| {
        p.root_attributes
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(attr("role"), Some("img"));
    assert_eq!(attr("xmlns"), Some("http://www.w3.org/2000/svg"));
    let (w, h) = (
        attr("width").expect("width"),
        attr("height").expect("height"),
    );
    assert_eq!(attr("viewBox"), Some(format!("0 0 {w} {h}").as_str()));
    assert_eq!(p.first_child, "title", "the <title> comes first");
    assert!(p.title.starts_with(title), "{:?} vs {title:?}", p.title);
    assert!(
        !svg.contains("NaN") && !svg.contains("inf\""),
        "non-finite numbers in the SVG"
    );
    assert!(
        !svg.contains(" id=\""),
        "ids would clash between charts on one page"
    );
}

#[test]
fn grouped_bars_snapshot() {
    let chart = fixtures::bars();
    let svg = grouped_bars(&chart);
    check_svg(&svg, &chart.title);
    insta::assert_snapshot!("grouped_bars", svg);
}

#[test]
fn histogram_snapshot() {
    let chart = fixtures::histogram();
    let svg = histogram(&chart);
    check_svg(&svg, &chart.title);
    insta::assert_snapshot!("histogram", svg);
}

#[test]
fn lines_snapshot() {
    let chart = fixtures::lines();
    let svg = lines(&chart);
    check_svg(&svg, &chart.title);
    insta::assert_snapshot!("lines", svg);
}

#[test]
fn time_series_snapshot() {
    // Two cores keep the snapshot short; compactness for 1000 samples is checked below.
    let mut chart = fixtures::time_series();
    chart.series.truncate(2);
    let svg = time_series(&chart);
    check_svg(&svg, &chart.title);
    insta::assert_snapshot!("time_series", svg);
}

#[test]
fn no_data_snapshot() {
    let svg = histogram(&HistogramChart {
        title: "regression: A & B".into(),
        ..HistogramChart::default()
    });
    check_svg(&svg, "regression: A & B: no data");
    insta::assert_snapshot!("no_data", svg);
}

#[test]
fn every_empty_chart_is_a_valid_no_data_svg() {
    for svg in [
        grouped_bars(&BarChart::default()),
        histogram(&HistogramChart::default()),
        lines(&LineChart::default()),
        time_series(&TimeSeriesChart::default()),
    ] {
        check_svg(&svg, "");
        assert!(svg.contains(">no data</text>"));
    }
}

#[test]
fn hostile_text_is_escaped() {
    let mut chart = fixtures::bars();
    chart.title = "<script>alert('x')</script> & \"quotes\"".into();
    chart.groups[0] = "a<b>".into();
    chart.categories[0] = "</svg>".into();
    chart.y_label = "ratio (<1 is better)".into();
    let svg = grouped_bars(&chart);
    check_svg(&svg, &chart.title);
    assert!(!svg.contains("<script>") && !svg.contains("a<b>"));
}

#[test]
fn a_thousand_samples_per_core_stay_compact() {
    let chart = fixtures::time_series();
    let svg = time_series(&chart);
    check_svg(&svg, &chart.title);
    // 4 cores × 1000 samples: well under 10 bytes per sample.
    assert!(svg.len() < 40_000, "{} bytes", svg.len());
}

#[test]
fn output_is_deterministic() {
    assert_eq!(
        grouped_bars(&fixtures::bars()),
        grouped_bars(&fixtures::bars())
    );
    assert_eq!(lines(&fixtures::lines()), lines(&fixtures::lines()));
}

mod experiment;

#[test]
fn scaling_snapshot() {
    let (_store, data) = experiment::scalability_experiment();
    let analysis = isolab_report::analyse(
        &data,
        experiment::scalability_options(&data),
        &isolab_report::compare::CompareOptions::default(),
    );
    let chart = isolab_report::scalability::chart(&analysis.scalability[1]);
    let svg = isolab_report::plots::scaling(&chart);
    check_svg(&svg, &chart.title);
    assert!(svg.contains("class=\"plot-band\""));
    assert!(svg.contains("class=\"plot-fit plot-preferred\""));
    assert!(svg.contains("class=\"plot-fit plot-other\""));
    assert!(svg.contains("class=\"plot-reference\""));
    assert_eq!(svg.matches("class=\"plot-point\"").count(), 5);
    insta::assert_snapshot!("scaling", svg);
    let empty = isolab_report::plots::scaling(&isolab_report::plots::ScalingChart::default());
    check_svg(&empty, "");
    assert!(empty.contains(">no data</text>"));
}

#[test]
fn load_charts_snapshot() {
    let (_, analysis) = experiment::load_analysis();
    let group = &analysis.load[0];
    let latency = isolab_report::load::latency_chart(group).unwrap();
    let svg = isolab_report::plots::time_series(&latency);
    check_svg(&svg, &latency.title);
    // host and docker: a line over a band each, and a thin dashed p99 line each.
    assert_eq!(svg.matches("class=\"plot-band\"").count(), 2);
    assert_eq!(svg.matches("class=\"plot-line\"").count(), 4);
    assert_eq!(
        svg.matches("stroke-dasharray=\"4 3\"").count(),
        2 + 2,
        "lines and legend"
    );
    insta::assert_snapshot!("load_latency", svg);

    let rate = isolab_report::load::rate_chart(group);
    let svg = isolab_report::plots::time_series(&rate);
    check_svg(&svg, &rate.title);
    assert_eq!(svg.matches("class=\"plot-band\"").count(), 2);
    // One users line for both cells (the same profile), on the right-hand axis.
    assert_eq!(svg.matches("class=\"plot-line plot-secondary\"").count(), 1);
    assert!(svg.contains(">active users (right axis)</text>"));
    assert!(svg.contains("active users"), "the right axis has a title");
    insta::assert_snapshot!("load_rate", svg);
}
