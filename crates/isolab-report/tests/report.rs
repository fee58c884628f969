//! Terminal tables and the HTML report of a synthetic experiment, as snapshots, and
//! the verdicts they must show.

mod experiment;

use isolab_report::compare::{compare, CompareOptions, Side};
use isolab_report::table::{comparison_table, summary_table};
use isolab_report::{analyse, html};
use isolab_stats::Verdict;

#[test]
fn summary_table_shows_verdicts_against_the_baseline() {
    let (_store, data) = experiment::experiment();
    let analysis = analyse(
        &data,
        experiment::options(&data),
        &CompareOptions::default(),
    );
    let table = summary_table(&analysis.rows, &analysis.factors, false);
    insta::assert_snapshot!("summary_table", table);
    let quota_cpu = analysis
        .rows
        .iter()
        .find(|r| r.levels.iter().any(|(_, l)| l == "quota") && r.metric == "events_per_second")
        .unwrap();
    assert_eq!(
        quota_cpu.verdict,
        Some(Verdict::Worse),
        "10% fewer events/s under quota is worse"
    );
    let pinned_fio = analysis
        .rows
        .iter()
        .find(|r| r.levels.iter().any(|(_, l)| l == "pinned") && r.metric == "iops")
        .unwrap();
    assert_eq!(pinned_fio.verdict, Some(Verdict::Better));
    assert_eq!(analysis.quality.share_stable, Some(1.0));
    assert!(
        analysis.quality.unexpected_throttling.is_empty(),
        "only quota cells are throttled"
    );
}

#[test]
fn comparison_table_and_histogram() {
    let (_store, data) = experiment::experiment();
    let primary = experiment::options(&data).primary;
    let side = |p: &str| Side {
        data: &data,
        select: vec![("placement".into(), p.into())],
        primary: primary.clone(),
        label: format!("placement={p}"),
    };
    let c = compare(&side("shared"), &side("quota"), &CompareOptions::default()).unwrap();
    assert_eq!((c.worse, c.better, c.same), (2, 0, 2));
    insta::assert_snapshot!("comparison_table", comparison_table(&c, false));
}

#[test]
fn html_report_has_every_section() {
    let (_store, data) = experiment::experiment();
    let analysis = analyse(
        &data,
        experiment::options(&data),
        &CompareOptions::default(),
    );
    let page = html::html(&data, &analysis);
    // The structure: headings and chart titles, in order (values change with styling).
    let outline: Vec<String> = page
        .lines()
        .flat_map(|l| {
            l.split("<h2>")
                .skip(1)
                .map(|h| h.split("</h2>").next().unwrap_or("").to_owned())
        })
        .collect();
    insta::assert_snapshot!("html_outline", outline.join("\n"));
    assert_eq!(
        page.matches("<svg").count(),
        2 + 2 + 12,
        "2 bar charts, 2 histograms, 12 time series"
    );
    assert!(
        !page.contains("http://")
            || page.matches("http://").count()
                == page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count(),
        "no network references"
    );
}
