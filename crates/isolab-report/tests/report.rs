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

#[test]
fn isolation_table_in_seed_001_shape() {
    let (_store, data) = experiment::isolation_experiment();
    let analysis = analyse(
        &data,
        experiment::isolation_options(&data),
        &CompareOptions::default(),
    );
    let t = analysis
        .isolation
        .as_ref()
        .expect("neighbour is varied: an isolation table");
    let labels: Vec<&str> = t.rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "90%U (cpu)",
            "FU (cpu)",
            "90%URR (cpu, cpuset)",
            "FURR (cpu, cpuset)",
            "cpu*2",
            "cpu*2, cpuset"
        ]
    );
    let columns: Vec<&str> = t.columns.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(
        columns,
        [
            "sysbench-cpu · host",
            "fio-randread · host",
            "sysbench-cpu · isolab",
            "fio-randread · isolab"
        ]
    );
    // 20% fewer events/s on the host under a cpu bomb at 90%: +20% degradation, worse.
    let e = t.entry(0, 0).unwrap();
    assert!((e.degradation.unwrap() - 20.0).abs() < 0.01, "{e:?}");
    let ci = e.ci.unwrap();
    assert!(ci.low < 20.0 && ci.high > 20.0, "{ci:?}");
    assert_eq!(e.verdict, Some(Verdict::Worse));
    // cpuset keeps the 90% bomb away: ~.
    assert_eq!(t.entry(2, 0).unwrap().verdict, Some(Verdict::Same));
    // fio's latency at 100%: +10%, worse (lower is better).
    let fio = t.entry(1, 1).unwrap();
    assert!((fio.degradation.unwrap() - 10.0).abs() < 0.01, "{fio:?}");
    assert_eq!(fio.verdict, Some(Verdict::Worse));
    insta::assert_snapshot!("isolation_table", t.render(false));
    // The summary rows without neighbour are not in the table, and the table agrees
    // with the summary's verdicts.
    for row in analysis.rows.iter().filter(|r| !r.is_baseline) {
        let n = row.levels.iter().find(|(f, _)| f == "neighbour").unwrap();
        let r = row.levels.iter().find(|(f, _)| f == "reservation").unwrap();
        let i = t
            .rows
            .iter()
            .position(|x| x.neighbour == n.1 && x.reservation == r.1)
            .unwrap();
        let w = row.levels.iter().find(|(f, _)| f == "workload").unwrap();
        let p = row.levels.iter().find(|(f, _)| f == "platform").unwrap();
        let j = t
            .columns
            .iter()
            .position(|c| c.workload == w.1 && c.platform == p.1)
            .unwrap();
        assert_eq!(t.entry(i, j).unwrap().verdict, row.verdict, "{row:?}");
    }
}

#[test]
fn no_isolation_table_without_neighbours() {
    let (_store, data) = experiment::experiment();
    let analysis = analyse(
        &data,
        experiment::options(&data),
        &CompareOptions::default(),
    );
    assert!(analysis.isolation.is_none());
    assert!(!html::html(&data, &analysis).contains("<h2>Isolation</h2>"));
}

#[test]
fn html_report_of_an_isolation_experiment() {
    let (_store, data) = experiment::isolation_experiment();
    let analysis = analyse(
        &data,
        experiment::isolation_options(&data),
        &CompareOptions::default(),
    );
    let page = html::html(&data, &analysis);
    let outline: Vec<String> = page
        .lines()
        .flat_map(|l| {
            l.split("<h2>")
                .skip(1)
                .map(|h| h.split("</h2>").next().unwrap_or("").to_owned())
        })
        .collect();
    insta::assert_snapshot!("html_outline_isolation", outline.join("\n"));
    let section = page
        .split("<h2>Isolation</h2>")
        .nth(1)
        .and_then(|s| s.split("<h2>").next())
        .expect("an Isolation section");
    assert!(section.contains("<table class=sortable>"));
    assert!(section.contains("<th>scenario</th><th>sysbench-cpu · host</th>"));
    assert!(section.contains("+20.0% ["));
    assert_eq!(section.matches("<svg").count(), 1, "one isolation chart");
    let t = analysis.isolation.as_ref().unwrap();
    let svg = isolab_report::html::isolation_chart(t);
    let svg = isolab_report::plots::grouped_bars(&svg);
    assert!(section.contains(&svg));
    // 6 scenarios × 4 columns, every pair tested.
    assert_eq!(svg.matches("class=\"plot-bar\"").count(), 24);
    assert_eq!(svg.matches("\"plot-marker plot-").count(), 24);
    assert!(svg.contains("90%URR (cpu, cpuset)"));
    insta::assert_snapshot!("isolation_chart", svg);
}
