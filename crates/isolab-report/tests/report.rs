//! Terminal tables and the HTML report of a synthetic experiment, as snapshots, and
//! the verdicts they must show.

mod experiment;

use isolab_report::compare::{compare, CompareOptions, Side};
use isolab_report::table::{comparison_table, summary_table, Style};
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
    // The same table in Markdown: a pipe table with one line per row, every line with
    // as many cells as the header.
    let md = summary_table(&analysis.rows, &analysis.factors, Style::Markdown);
    let lines: Vec<&str> = md.lines().collect();
    assert_eq!(lines.len(), 1 + 2 + analysis.rows.len() + 1, "{md}");
    let header = "| shape | placement | workload | metric | n | mean |";
    assert!(lines[1].starts_with(header), "{md}");
    assert!(
        lines[2].starts_with("| --- | --- | --- | --- | ---: |"),
        "{md}"
    );
    let cells = |l: &str| l.matches(" | ").count();
    assert!(lines[1..=analysis.rows.len() + 2]
        .iter()
        .all(|l| cells(l) == cells(lines[1])));
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
    assert_eq!(
        (c.worse, c.better, c.equivalent + c.inconclusive),
        (2, 0, 2)
    );
    insta::assert_snapshot!("comparison_table", comparison_table(&c, false));
    insta::assert_snapshot!(
        "comparison_table_markdown",
        comparison_table(&c, Style::Markdown)
    );
    let g = c.geomean.as_ref().unwrap();
    assert_eq!(g.points, 4);
    // Two points at 1/0.9 and two at 1: the geometric mean is √(1/0.9).
    assert!((g.ratio - (1.0f64 / 0.9).sqrt()).abs() < 2e-3, "{g:?}");
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
    // cpuset keeps the 90% bomb away: no verdict of a difference.
    let kept = t.entry(2, 0).unwrap().verdict;
    assert!(
        matches!(kept, Some(Verdict::Equivalent | Verdict::Inconclusive)),
        "{kept:?}"
    );
    // fio's latency at 100%: +10%, worse (lower is better).
    let fio = t.entry(1, 1).unwrap();
    assert!((fio.degradation.unwrap() - 10.0).abs() < 0.01, "{fio:?}");
    assert_eq!(fio.verdict, Some(Verdict::Worse));
    insta::assert_snapshot!("isolation_table", t.render(false));
    assert!(
        t.render(Style::Markdown).contains("\n| scenario | "),
        "{}",
        t.render(Style::Markdown)
    );
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

fn scalability_analysis() -> (isolab_report::ExperimentData, isolab_report::Analysis) {
    let (_store, data) = experiment::scalability_experiment();
    let analysis = analyse(
        &data,
        experiment::scalability_options(&data),
        &CompareOptions::default(),
    );
    (data, analysis)
}

#[test]
fn scalability_fits_and_table() {
    let (_data, analysis) = scalability_analysis();
    let curves = &analysis.scalability;
    // threads is varied (5 levels) on 2 platforms; instances is not (a single level).
    assert_eq!(curves.len(), 2);
    assert!(curves.iter().all(|c| c.factor == "threads"));
    assert_eq!(curves[0].group_label, "platform=host");
    for (c, (sigma, kappa)) in curves.iter().zip([(0.04, 0.003), (0.06, 0.006)]) {
        assert_eq!(c.points.len(), 5);
        assert!(
            c.points.iter().all(|p| p.runs == 5),
            "warm-ups are not counted"
        );
        let comparison = c.comparison.expect("5 levels: a fit");
        let usl = comparison.usl;
        assert!((usl.lambda - 1000.0).abs() < 60.0, "{usl:?}");
        assert!((usl.sigma - sigma).abs() < 0.04, "{usl:?}");
        assert!((usl.kappa - kappa).abs() < 0.003, "{usl:?}");
        let b = c.bootstrap.as_ref().expect("a bootstrap");
        assert_eq!(b.resamples, isolab_report::scalability::RESAMPLES);
        assert!(
            b.lambda.low < 1000.0 && 1000.0 < b.lambda.high,
            "{:?}",
            b.lambda
        );
    }
    // isolab is retrograde at 16 threads: the USL is preferred, with a peak near 12.
    let isolab = &curves[1];
    let c = isolab.comparison.unwrap();
    assert_eq!(c.preferred, isolab_stats::ScalingModel::Usl, "{c:?}");
    let peak = c.usl.peak.unwrap();
    assert!((peak - 12.1).abs() < 3.0, "peak {peak}");
    // Seeded by the experiment's seed: the same analysis gives the same intervals.
    let (_d, again) = scalability_analysis();
    assert_eq!(again.scalability, analysis.scalability);
    let table = isolab_report::scalability::render(curves, false);
    let md = isolab_report::scalability::render(curves, Style::Markdown);
    assert!(md.contains("\n| group | throughput | N | n |"), "{md}");
    insta::assert_snapshot!("scalability_table", table);
    // JSON carries the curves (without the replicates).
    let json = serde_json::to_value(&analysis).unwrap();
    let s = &json["scalability"];
    assert_eq!(s.as_array().unwrap().len(), 2);
    assert_eq!(s[1]["comparison"]["preferred"], "usl");
    assert_eq!(s[1]["points"][4]["n"], 16.0);
    assert!(s[1]["bootstrap"]["kappa"]["low"].is_number());
    assert!(s[1]["bootstrap"].get("replicates").is_none());
    assert_eq!(s[1]["band"].as_array().unwrap().len(), 64);
}

#[test]
fn scalability_over_instances_shows_per_instance_means() {
    let (_store, data) = experiment::instances_experiment();
    let analysis = analyse(
        &data,
        experiment::scalability_options(&data),
        &CompareOptions::default(),
    );
    let curves = &analysis.scalability;
    assert_eq!(curves.len(), 1);
    let c = &curves[0];
    assert_eq!(c.factor, "instances");
    assert_eq!(c.metric, "events_per_second");
    assert_eq!(c.points[0].per_instance, None);
    let p8 = c.points[3];
    assert!(
        (p8.per_instance.unwrap() - p8.mean / 8.0).abs() < 1e-9,
        "{p8:?}"
    );
    let amdahl = c.comparison.unwrap().amdahl;
    assert!((amdahl.sigma - 0.1).abs() < 0.03, "{amdahl:?}");
    let table = isolab_report::scalability::render(curves, false);
    assert!(table.contains("per instance"), "{table}");
    assert!(table.starts_with("scalability over instances"), "{table}");
}

#[test]
fn html_report_of_a_scalability_experiment() {
    let (data, analysis) = scalability_analysis();
    let page = html::html(&data, &analysis);
    let section = page
        .split("<h2>Scalability</h2>")
        .nth(1)
        .and_then(|s| s.split("<h2>").next())
        .expect("a Scalability section");
    assert!(section.contains("<h3>Over threads</h3>"));
    assert!(section.contains("<table class=sortable>"));
    assert_eq!(section.matches("<svg").count(), 2, "one chart per curve");
    assert!(section.contains("preferred: USL (ΔAIC"));
    let svg =
        isolab_report::plots::scaling(&isolab_report::scalability::chart(&analysis.scalability[1]));
    assert!(section.contains(&svg));
    // Experiments without threads or instances have no such section.
    let (_store, plain) = experiment::experiment();
    let a = analyse(
        &plain,
        experiment::options(&plain),
        &CompareOptions::default(),
    );
    assert!(a.scalability.is_empty());
    assert!(!html::html(&plain, &a).contains("<h2>Scalability</h2>"));
}

/// A store with one workload in two placements, ten counted runs each with two metrics
/// (events/s, higher is better; latency in ms, lower is better), every value distinct
/// so that both benchstat and isolab use the exact Mann-Whitney distribution.
fn two_placements() -> (isolab_store::Store, isolab_store::ExperimentId) {
    use isolab_store::{MetricValue, NewCell, NewExperiment, Store};
    use std::time::SystemTime;
    let mut store = Store::open_in_memory().unwrap();
    let cells: Vec<NewCell> = ["quota", "pinned"]
        .iter()
        .enumerate()
        .map(|(i, p)| NewCell {
            index: i as u32,
            key: format!("workload=sysbench-cpu placement={p}"),
            levels: vec![
                ("workload".into(), "sysbench-cpu".into()),
                ("placement".into(), (*p).into()),
            ],
        })
        .collect();
    let id = store
        .create_experiment(&NewExperiment {
            name: "benchstat".into(),
            spec_toml: String::new(),
            spec_path: None,
            seed: 1,
            isolab_version: "test".into(),
            created_at: SystemTime::UNIX_EPOCH,
            cells,
            environment: vec![("cpu_model".into(), "Synthetic CPU".into())],
        })
        .unwrap();
    for (i, cell) in store.cells(id).unwrap().iter().enumerate() {
        // pinned: +13 events/s (better) and 0.17 ms more latency (worse) than quota.
        let (events, latency) = if i == 0 {
            (1000.0, 5.0)
        } else {
            (1013.0, 5.17)
        };
        for k in 0..10u32 {
            let metric = |name: &str, unit: &str, direction, value| MetricValue {
                name: name.into(),
                unit: unit.into(),
                direction,
                value,
            };
            store
                .insert_run(&experiment::counted_run(
                    cell.id,
                    k + 1,
                    vec![
                        metric(
                            "events_per_second",
                            "events/s",
                            isolab_stats::Direction::Higher,
                            events + 3.0 * f64::from(k),
                        ),
                        metric(
                            "latency",
                            "ms",
                            isolab_stats::Direction::Lower,
                            latency + 0.05 * f64::from(k),
                        ),
                    ],
                ))
                .unwrap();
        }
    }
    (store, id)
}

/// The real `benchstat` reads the export: `-col /placement` compares the two placements
/// with the p-value of isolab's unpaired Mann-Whitney test, in the same direction.
#[test]
fn benchstat_reads_the_export_and_agrees_with_mann_whitney() {
    use isolab_stats::{mann_whitney, overhead_ratio, Direction, Sample};
    let (store, id) = two_placements();
    let obs = store.observations(id).unwrap();
    let text = isolab_report::export::benchstat(&obs, &[("cpu".into(), "Synthetic CPU".into())]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("isolab.txt");
    std::fs::write(&file, &text).unwrap();
    let output = match std::process::Command::new("benchstat")
        .args(["-format", "csv", "-col", "/placement"])
        .arg(&file)
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            isolab_skip::skip(format!(
                "benchstat is not installed ({e}); scripts/setup.sh installs it"
            ));
            return;
        }
    };
    let csv = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "benchstat failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let head: Vec<&str> = text.lines().take(8).collect();
    println!(
        "export (first lines):\n{}\n…\nbenchstat -format csv -col /placement:\n{csv}",
        head.join("\n")
    );
    for (metric, direction) in [
        ("events_per_second", Direction::Higher),
        ("latency", Direction::Lower),
    ] {
        let values = |placement: &str| -> Vec<f64> {
            obs.iter()
                .filter(|o| o.metric == metric && o.levels.iter().any(|(_, l)| l == placement))
                .map(|o| o.value)
                .collect()
        };
        let (a, b) = (values("quota"), values("pinned"));
        assert_eq!((a.len(), b.len()), (10, 10));
        let mw = mann_whitney(
            &Sample::new(a.clone()).unwrap(),
            &Sample::new(b.clone()).unwrap(),
        );
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let isolab_worse = overhead_ratio(mean(&a), mean(&b), direction).unwrap() > 1.0;
        // A row: name, A center, A CI, B center, B CI, change ("+1.30%" or "~"), "p=… n=…".
        let row: Vec<&str> = csv
            .lines()
            .map(|l| l.split(',').collect::<Vec<_>>())
            .find(|f| f[0] == format!("sysbench-cpu/metric={metric}"))
            .unwrap_or_else(|| panic!("no row for {metric} in\n{csv}"));
        assert_eq!(row.len(), 7, "{row:?}");
        let p: f64 = row[6]
            .strip_prefix("p=")
            .and_then(|r| r.split(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no p in {row:?}"));
        let delta: f64 = row[5]
            .trim_end_matches('%')
            .parse()
            .unwrap_or_else(|_| panic!("benchstat saw no significant change: {row:?}"));
        // benchstat's change is B against A unoriented; its unit says which way is better.
        let benchstat_worse = match direction {
            Direction::Lower => delta > 0.0,
            Direction::Higher => delta < 0.0,
        };
        println!(
            "{metric}: benchstat p = {p:.3}, change {delta:+.2}% ({}); isolab Mann-Whitney p = {:.6} (exact: {}), ratio > 1: {isolab_worse}",
            if benchstat_worse { "worse" } else { "better" },
            mw.p,
            mw.exact
        );
        assert!(
            (p - mw.p).abs() <= 1e-3,
            "{metric}: benchstat p {p} vs isolab {}",
            mw.p
        );
        assert_eq!(benchstat_worse, isolab_worse, "{metric}: {row:?}");
    }
}

#[test]
fn the_baseline_is_never_compared_with_itself() {
    // The quick start's baseline names two factors, in another order than its cells.
    let (_store, data) = experiment::quick_start_experiment();
    let analysis = analyse(
        &data,
        experiment::quick_start_options(&data),
        &CompareOptions::default(),
    );
    let compared: Vec<&str> = analysis.comparisons.iter().map(|c| c.b.as_str()).collect();
    // host with quota and pinned, isolab with each placement: 5 configurations.
    assert_eq!(compared.len(), 5, "{compared:?}");
    for c in &analysis.comparisons {
        let mut b = c.b_select.clone();
        b.sort();
        assert_ne!(
            b,
            [
                ("placement".to_owned(), "shared".to_owned()),
                ("platform".to_owned(), "host".to_owned())
            ],
            "the baseline compared with itself: {} against {}",
            c.b,
            c.a
        );
    }
    let page = html::html(&data, &analysis);
    // A regression histogram is drawn (over its few points, as dots).
    assert!(page.contains("class=\"plot-bin\"") || page.contains("class=\"plot-dot\""));
    assert!(
        !page.contains("platform=host placement=shared against"),
        "a histogram of the baseline against itself"
    );
    // The same selection on both sides of one experiment is refused, in any order.
    let side = |select: &[(&str, &str)]| Side {
        data: &data,
        select: select
            .iter()
            .map(|(f, l)| ((*f).to_owned(), (*l).to_owned()))
            .collect(),
        primary: Default::default(),
        label: String::new(),
    };
    assert!(compare(
        &side(&[("placement", "shared"), ("platform", "host")]),
        &side(&[("platform", "host"), ("placement", "shared")]),
        &CompareOptions::default(),
    )
    .is_err());
}

#[test]
fn load_over_time_per_cell_with_totals_over_repetitions() {
    use isolab_report::load::LatencyStat;
    let (data, analysis) = experiment::load_analysis();
    assert_eq!(analysis.load.len(), 1, "one workload, one request");
    let g = &analysis.load[0];
    assert_eq!(
        (g.workload.as_str(), g.request.as_str()),
        ("wordpress", "home")
    );
    assert_eq!(g.latency, Some(LatencyStat::P50));
    let labels: Vec<&str> = g.lines.iter().map(|l| l.label.as_str()).collect();
    assert_eq!(labels, ["host", "docker"]);
    for line in &g.lines {
        assert_eq!(line.seconds.len(), experiment::LOAD_SECONDS as usize);
        assert_eq!(line.totals.runs.len(), 3);
        assert!(line.seconds.iter().all(|s| s.runs == 3));
        // The users are the profile's; the band holds the median.
        for s in &line.seconds {
            assert_eq!(s.users, Some(experiment::load_users(s.start_s as u32)));
            assert!(s.rate.low <= s.rate.median && s.rate.median <= s.rate.high);
            let l = s.latency_ms.unwrap();
            assert!(l.low <= l.median && l.median <= l.high);
        }
        // The run's successful requests are its metric `home_ok`.
        for r in &line.totals.runs {
            let run = data.runs.iter().find(|x| x.id == r.run).unwrap();
            assert_eq!(run.metrics[0].value, r.successful as f64);
            assert_eq!(r.duration_s, f64::from(experiment::LOAD_SECONDS));
        }
        let ci = line.totals.successful.ci.unwrap();
        assert!(ci.low < line.totals.successful.mean && line.totals.successful.mean < ci.high);
    }
    let (host, docker) = (&g.lines[0].totals, &g.lines[1].totals);
    assert!(host.successful.mean > docker.successful.mean);
    assert_eq!(host.failed.mean, 0.0);
    assert!(docker.failed.mean > 0.0);
    // Saturated at the end: about 400 and 330 × 0.99 successful requests per second.
    let last = |i: usize| g.lines[i].seconds.last().unwrap().rate.median;
    assert!((last(0) - 400.0).abs() < 15.0, "{}", last(0));
    assert!((last(1) - 330.0 * 0.99).abs() < 15.0, "{}", last(1));

    let text = isolab_report::load::render(&analysis.load, false);
    insta::assert_snapshot!("load_table", text);
    assert_eq!(
        text.lines().count(),
        2 + 2,
        "heading, header and one line per cell"
    );
    let md = isolab_report::load::render(&analysis.load, Style::Markdown);
    assert!(md.starts_with("**Load over time**"), "{md}");
    assert!(md.contains("| workload | request | cell | runs |"), "{md}");
    // Without load intervals there is no load section.
    let (_store, plain) = experiment::experiment();
    let plain = analyse(
        &plain,
        experiment::options(&plain),
        &CompareOptions::default(),
    );
    assert!(plain.load.is_empty());
    assert_eq!(isolab_report::load::render(&plain.load, false), "");
    assert!(!html::html(&experiment::experiment().1, &plain).contains("Load over time"));
}

#[test]
fn html_report_of_a_load_experiment() {
    let (data, analysis) = experiment::load_analysis();
    let page = html::html(&data, &analysis);
    assert!(page.contains("<h2>Load over time</h2>"));
    assert!(page.contains("<h3 class=load>wordpress · home</h3>"));
    assert!(page.contains("wordpress · home: response time over time"));
    assert!(page.contains("wordpress · home: successful requests per second"));
    assert!(page.contains("the lowest to the highest repetition at that second (min–max)"));
    assert!(page.contains(">active users (right axis)</text>"));
    // Seed 003's Table 2.2: a row per run, a column per cell, and the mean.
    let per_run = page.split("<table class=per-run>").nth(1).unwrap();
    let per_run = per_run.split("</table>").next().unwrap();
    assert_eq!(per_run.matches("<tr>").count(), 1 + 3 + 1, "{per_run}");
    assert!(
        per_run.contains("<th>host</th><th>docker</th>"),
        "{per_run}"
    );
}

/// An asset that stands in for the seed's own input is named near the top of the
/// report, not only in the environment table at its end.
#[test]
fn html_report_names_stand_in_inputs_near_the_top() {
    let (_store, mut data) = experiment::experiment();
    let analysis = analyse(
        &data,
        experiment::options(&data),
        &CompareOptions::default(),
    );
    assert!(!html::html(&data, &analysis).contains("Stand-in inputs"));
    data.environment.push((
        "asset.video.stand_in".into(),
        "generated stand-in for seed 002's Big Buck Bunny segment".into(),
    ));
    let page = html::html(&data, &analysis);
    let note = page
        .find("Stand-in inputs and programs (not the seed's own): <b>video</b>: generated stand-in for seed 002's Big Buck Bunny segment.")
        .expect("a stand-in note in the report");
    assert!(note < page.find("<h2>Environment</h2>").unwrap());
}

#[test]
fn a_hopeless_question_mark_says_noisy_instead_of_a_run_count() {
    let (_store, data) = experiment::tail_latency_experiment();
    let analysis = analyse(
        &data,
        experiment::tail_latency_options(&data),
        &CompareOptions::default(),
    );
    let isolab = analysis.rows.iter().find(|r| !r.is_baseline).unwrap();
    assert_eq!(isolab.verdict, Some(Verdict::Inconclusive), "{isolab:?}");
    let n = isolab.runs_to_decide.expect("a number of runs");
    assert!(isolab.too_noisy, "{n} runs would decide it");
    let table = summary_table(&analysis.rows, &analysis.factors, false);
    assert!(table.contains("? (noisy)"), "{table}");
    assert!(!table.contains("n≈"), "{table}");
    // Without the spec's max, the bound is 10 × the most runs a cell got (12 here too).
    let mut options = experiment::tail_latency_options(&data);
    options.max_repetitions = None;
    let analysis = analyse(&data, options, &CompareOptions::default());
    assert!(analysis.rows.iter().any(|r| r.too_noisy));
    // A generous max makes the same `?` worth its runs again.
    let mut options = experiment::tail_latency_options(&data);
    options.max_repetitions = Some(100_000);
    let analysis = analyse(&data, options, &CompareOptions::default());
    let isolab = analysis.rows.iter().find(|r| !r.is_baseline).unwrap();
    assert!(!isolab.too_noisy);
    let table = summary_table(&analysis.rows, &analysis.factors, false);
    assert!(table.contains(&format!("? (n≈{n})")), "{table}");
}

#[test]
fn a_question_mark_at_the_threshold_is_not_noisy() {
    // The quick start's isolab·pinned events/s: CV 1.8%, a change right at the 2%
    // threshold. Deciding it takes ≈15000 runs, but because of where the change lies,
    // not because of noise: the column keeps the run count.
    let (_store, data) = experiment::quick_start_experiment();
    let mut options = experiment::quick_start_options(&data);
    options.max_repetitions = Some(5);
    let analysis = analyse(&data, options, &CompareOptions::default());
    let row = analysis
        .rows
        .iter()
        .find(|r| r.runs_to_decide.is_some_and(|n| n > 10_000))
        .expect("a ? far from decided");
    assert!(!row.too_noisy, "{row:?}");
    assert!(analysis.rows.iter().all(|r| !r.too_noisy));
}

#[test]
fn a_noisy_metric_is_explained_under_the_table_with_a_steadier_one() {
    let (_store, data) = experiment::tail_latency_experiment();
    let analysis = analyse(
        &data,
        experiment::tail_latency_options(&data),
        &CompareOptions::default(),
    );
    let report = isolab_report::Report::new(&data, &analysis);
    let text = report.text(isolab_report::Reach::Report, Style::Text { color: false });
    let table = summary_table(&analysis.rows, &analysis.factors, false);
    let below = text.strip_prefix(&table).expect("the summary table first");
    let line = below.lines().next().unwrap();
    assert!(
        line.starts_with(
            "? (noisy): latency_max of cpu-tail-latency varies too much to decide (CV up to 3"
        ),
        "{line}"
    );
    assert!(
        line.contains("more than 10 × the spec's max of 12 runs"),
        "{line}"
    );
    assert!(
        line.ends_with("compare latency_p99 instead (CV 0.5%)"),
        "{line}"
    );
    let md = report.text(isolab_report::Reach::Report, Style::Markdown);
    assert!(
        md.contains("\n? (noisy): latency_max of cpu-tail-latency"),
        "{md}"
    );
    // The HTML report says it right under the summary table.
    let page = html::html(&data, &analysis);
    let after_table = page.split("</tbody></table>\n").nth(1).unwrap();
    assert!(
        after_table.starts_with("<p class=note>? (noisy): latency_max of cpu-tail-latency"),
        "{after_table}"
    );
    // The run's printout and each host of a fleet show it too; JSON is unchanged.
    assert!(report
        .text(isolab_report::Reach::Host, Style::Text { color: false })
        .contains(line));
    assert!(report.json().keys().all(|k| k != "noisy"));
}

#[test]
fn a_report_over_every_platform_stays_readable() {
    let (_store, data) = experiment::many_platforms_experiment();
    let analysis = analyse(
        &data,
        experiment::many_platforms_options(&data),
        &CompareOptions::default(),
    );
    let page = html::html(&data, &analysis);
    if let Some(path) = std::env::var_os("ISOLAB_WRITE_REPORT") {
        std::fs::write(path, &page).unwrap();
    }
    let grid = page
        .split("<h2>Overhead by configuration</h2>")
        .nth(1)
        .and_then(|s| s.split("<h2>").next())
        .expect("the grid");
    assert!(
        !grid.contains("more</text>"),
        "every configuration in the legend"
    );
    for platform in &experiment::ALL_PLATFORMS[1..] {
        assert!(
            grid.contains(&format!(">platform={platform}</text>")),
            "{platform}"
        );
    }
    // Quota and pinned side by side, not on each other; as wide as the bars need.
    assert!(grid.contains(">\nquota\n</text>") && grid.contains(">\npinned\n</text>"));
    assert_eq!(grid.matches("class=\"plot-bar\"").count(), 26);
    let width: u32 = grid
        .split("<svg role=\"img\" width=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .and_then(|w| w.parse().ok())
        .unwrap();
    assert!(width > 1000, "{width}");
    // 13 configurations: one row each, so the table does not scroll sideways.
    let table = page
        .split("<h2>Overhead against the baseline</h2>")
        .nth(1)
        .and_then(|s| s.split("</thead>").next())
        .unwrap();
    assert_eq!(table.matches("<th>").count(), 1 + 2, "{table}");
    assert_eq!(
        page.matches("<tr><td>platform=").count(),
        13,
        "a row per configuration"
    );
}

#[test]
fn every_output_reads_the_one_list_of_sections() {
    let titles: Vec<&str> = isolab_report::SECTIONS.iter().map(|s| s.title()).collect();
    let mut unique = titles.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), titles.len(), "{titles:?}");
    // The narrower outputs show the first sections of the wider ones, in the same order.
    let (_store, data) = experiment::isolation_experiment();
    let analysis = analyse(
        &data,
        experiment::isolation_options(&data),
        &CompareOptions::default(),
    );
    let report = isolab_report::Report::new(&data, &analysis);
    let style = Style::Text { color: false };
    let host = report.text(isolab_report::Reach::Host, style);
    let run = report.text(isolab_report::Reach::Run, style);
    let show = report.text(isolab_report::Reach::Report, style);
    assert!(host.starts_with(&summary_table(&analysis.rows, &analysis.factors, style)));
    assert!(run.starts_with(&host) && show.starts_with(&run));
    assert!(run.contains("isolation degradation") && !host.contains("isolation degradation"));
    assert!(show.contains("stop reasons:") && !run.contains("stop reasons:"));
    // The HTML report's sections come in the list's order.
    let page = html::html(&data, &analysis);
    let at = |t: &str| page.find(&format!("<h2>{t}</h2>"));
    let shown: Vec<usize> = titles.iter().filter_map(|t| at(t)).collect();
    assert!(shown.len() >= 6, "{shown:?}");
    assert!(shown.windows(2).all(|w| w[0] < w[1]), "{titles:?}");
}

#[test]
fn overhead_is_drawn_against_the_container_to_host_core_ratio() {
    let (_store, data) = experiment::chr_experiment();
    let options = baseline_options(&data, ("platform", "host"), "execution_time");
    let analysis = analyse(&data, options, &CompareOptions::default());
    let report = isolab_report::Report::new(&data, &analysis);
    let section = report
        .sections(isolab_report::Reach::Report)
        .find(|s| s.title() == "Overhead against the cpu share")
        .expect("the section applies when host_cpus varies");
    let text = section.text(&report, Style::Text { color: false });
    // One curve (docker, execution_time) over CHR 0.25, 0.5 and 1: the overhead falls.
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("platform=docker"))
        .collect();
    assert_eq!(rows.len(), 3, "{text}");
    assert!(
        rows[0].contains("0.25") && rows[0].contains("1.05×"),
        "{text}"
    );
    assert!(
        rows[1].contains("0.5") && rows[1].contains("1.15×"),
        "{text}"
    );
    assert!(rows[2].contains("1.30×"), "{text}");
    let html = section.html(&report);
    assert!(
        html.contains("<svg") && html.contains("container-to-host core ratio"),
        "{html}"
    );
    let json = section.json(&report);
    assert_eq!(json[0].1["chr"].as_object().unwrap().len(), 1, "{:?}", json);
}

#[test]
fn hundreds_of_points_say_their_steadiness_and_the_points_that_moved_most() {
    let (_store, data) = experiment::experiment();
    let primary = experiment::options(&data).primary;
    let side = |p: &str| Side {
        data: &data,
        select: vec![("placement".into(), p.into())],
        primary: primary.clone(),
        label: format!("placement={p}"),
    };
    let mut c = compare(&side("shared"), &side("quota"), &CompareOptions::default()).unwrap();
    // 300 points: regression i/10 %, the CV of every tenth at 8% (above seed 000's 5%).
    let template = c.points[0].clone();
    c.points = (0..300)
        .map(|i| {
            let mut p = template.clone();
            p.levels = vec![("query".into(), format!("q{i}"))];
            p.regression_pct = Some(f64::from(i) / 10.0 * if i % 2 == 0 { 1.0 } else { -1.0 });
            p.cv_a = Some(0.01);
            p.cv_b = Some(if i % 10 == 0 { 0.08 } else { 0.02 });
            p
        })
        .collect();
    c.steady = isolab_report::compare::Steady::of(&c.points);
    assert_eq!((c.steady.below, c.steady.of), (270, 300));
    assert_eq!(
        c.steady.line().unwrap(),
        "270 of 300 points (90.0%) have a CV below 5% on both sides: seed 000 asks 95%, not met"
    );
    let moved = isolab_report::compare::moved_most(&c.points, 3);
    let regressions: Vec<f64> = moved.iter().map(|p| p.regression_pct.unwrap()).collect();
    assert_eq!(regressions, [-29.9, 29.8, -29.7]);
    let table = comparison_table(&c, false);
    let tail = table
        .split("the 10 points that moved most (of 300):")
        .nth(1)
        .expect(&table);
    assert!(tail.lines().nth(2).unwrap().contains("q299"), "{tail}");
}

/// Seed 002 §IV on a synthetic store with known parts: the fit recovers docker's pure
/// 1/size part, the vm's pure constant and isolab's mix, each within its interval, and
/// `show` prints them.
#[test]
fn platform_type_and_size_overhead_are_recovered() {
    let (_store, data) = experiment::size_experiment();
    let options = baseline_options(&data, ("platform", "host"), "execution_time");
    let analysis = analyse(&data, options, &CompareOptions::default());
    let fit = |platform: &str| {
        &analysis
            .sizes
            .iter()
            .find(|s| s.levels == [("platform".to_string(), platform.to_string())])
            .unwrap_or_else(|| panic!("no fit for {platform}: {:?}", analysis.sizes))
            .fit
    };
    assert_eq!(analysis.sizes.len(), 3, "{:?}", analysis.sizes);
    for (platform, pto, inverse) in [
        ("docker", 0.0, 0.4),
        ("vm", 0.10, 0.0),
        ("isolab", 0.05, 0.2),
    ] {
        let f = fit(platform);
        assert_eq!(f.sizes, [1.0, 2.0, 4.0, 8.0]);
        assert!(
            f.pto_ci.low <= pto + 1e-9 && pto - 1e-9 <= f.pto_ci.high,
            "{platform}: PTO {pto} outside {:?}",
            f.pto_ci
        );
        assert!(
            f.inverse_ci.low <= inverse + 1e-9 && inverse - 1e-9 <= f.inverse_ci.high,
            "{platform}: PSO₁ {inverse} outside {:?}",
            f.inverse_ci
        );
        assert!((f.pto - pto).abs() < 0.01, "{platform}: {f:?}");
        assert!((f.inverse - inverse).abs() < 0.02, "{platform}: {f:?}");
    }
    use isolab_stats::Dominant::{Size, Type};
    assert_eq!(fit("docker").dominant, [Some(Size); 4]);
    assert_eq!(fit("vm").dominant, [Some(Type); 4]);
    // isolab: PSO 0.2, 0.1, 0.05, 0.025 against PTO 0.05: equal at 4 cpus.
    let mixed = &fit("isolab").dominant;
    assert_eq!(
        (mixed[0], mixed[1], mixed[3]),
        (Some(Size), Some(Size), Some(Type))
    );
    assert!((fit("isolab").crossover().unwrap() - 4.0).abs() < 0.5);

    let report = isolab_report::Report::new(&data, &analysis);
    let text = report.text(isolab_report::Reach::Report, Style::Text { color: false });
    assert!(
        text.contains("platform-type and platform-size overhead (seed 002"),
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("platform=vm"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("s1 (1 cpu) 1.100×") && line.contains("+10.0%"),
        "{line}"
    );
    let page = html::html(&data, &analysis);
    assert!(page.contains("<h2>Platform-type and platform-size overhead</h2>"));

    // `advise` shows the containers' split beside the CHR trend.
    use isolab_report::advice::{advise, Environment, Input, Outcome};
    let platforms = [
        ("host", Environment::BareMetal),
        ("docker", Environment::Container),
        ("isolab", Environment::Container),
        ("vm", Environment::Vm { emulated: false }),
    ]
    .into_iter()
    .map(|(p, e)| (p.to_string(), e))
    .collect();
    let advice = advise(&Input {
        data: &data,
        analysis: &analysis,
        compare: CompareOptions::default(),
        platforms: Ok(platforms),
        multitask: Vec::new(),
    });
    let chr = advice
        .iter()
        .find(|a| a.rule == "container-size-chr")
        .unwrap();
    let Outcome::Applies { evidence } = &chr.outcome else {
        panic!("{chr:?}")
    };
    let docker = evidence
        .iter()
        .find(|e| e.starts_with("platform=docker execution_time: PTO"))
        .unwrap_or_else(|| panic!("{evidence:?}"));
    assert!(
        docker.contains("PSO +40.0%")
            && docker.contains("at 1 cpu; PSO dominates at 1 cpu, 2 cpus, 4 cpus, 8 cpus"),
        "{docker}"
    );
    assert!(
        !evidence.iter().any(|e| e.starts_with("platform=vm")),
        "a VM is not a container: {evidence:?}"
    );
}

/// Baseline `factor=level`, primary metric `metric` in every cell.
fn baseline_options(
    data: &isolab_report::ExperimentData,
    (factor, level): (&str, &str),
    metric: &str,
) -> isolab_report::SummaryOptions {
    isolab_report::SummaryOptions {
        baseline: vec![(factor.into(), level.into())],
        primary: data
            .cells
            .iter()
            .map(|c| (c.index, metric.to_string()))
            .collect(),
        all_metrics: false,
        max_repetitions: None,
    }
}

/// Seed 001's DNR: a cell whose subject did not report is `DNR` in the isolation table,
/// worse than its baseline in the summary, `DNR` as its stop, and its run is listed with
/// its reason.
#[test]
fn a_cell_that_did_not_report_is_dnr_and_worst() {
    let (_store, data) = experiment::dnr_experiment();
    let options = baseline_options(&data, ("neighbour", "none"), "events_per_second");
    let analysis = analyse(&data, options, &CompareOptions::default());
    let dnr = analysis
        .rows
        .iter()
        .find(|r| r.levels.iter().any(|(_, l)| l == "fork*64"))
        .unwrap();
    assert!(dnr.is_dnr(), "{dnr:?}");
    assert_eq!(dnr.verdict, Some(Verdict::Worse));
    assert_eq!((dnr.n, dnr.did_not_report, dnr.failed), (0, 1, 0));
    let t = analysis.isolation.as_ref().unwrap();
    let labels: Vec<&str> = t.rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["fork*4", "fork*64"]);
    let e = t.entry(1, 0).unwrap();
    assert!(e.did_not_report && e.degradation.is_none(), "{e:?}");
    assert_eq!(isolab_report::isolation::entry_text(e), "DNR");
    let e = t.entry(0, 0).unwrap();
    assert!((e.degradation.unwrap() - 10.0).abs() < 0.5, "{e:?}");

    let report = isolab_report::Report::new(&data, &analysis);
    let text = report.text(isolab_report::Reach::Report, Style::Text { color: false });
    let table_line = text
        .lines()
        .find(|l| l.starts_with("fork*64"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(table_line.trim_end().ends_with("DNR"), "{table_line}");
    let summary_line = text
        .lines()
        .find(|l| l.contains("fork*64") && !l.starts_with("fork*64"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        summary_line.contains("DNR worse") && summary_line.trim_end().ends_with("DNR"),
        "{summary_line}"
    );
    assert!(
        text.contains("did-not-report run") && text.contains("beside neighbour `fork*64`"),
        "{text}"
    );
}

/// Seed 000 draws the regression histogram once per neighbour condition: `compare`'s
/// text and the HTML report have the pooled one and one for each neighbour level.
#[test]
fn the_regression_histogram_is_drawn_once_per_neighbour_level() {
    let (_store, data) = experiment::neighbour_pairs_experiment();
    let options = baseline_options(&data, ("placement", "quota"), "time");
    let analysis = analyse(&data, options, &CompareOptions::default());
    let c = analysis
        .comparisons
        .iter()
        .find(|c| c.histogram.is_some())
        .unwrap();
    let by = c.histograms_by("neighbour");
    let levels: Vec<&str> = by.iter().map(|h| h.level.as_str()).collect();
    assert_eq!(levels, ["none", "cpu*1"]);
    assert_eq!((by[0].histogram.n, by[1].histogram.n), (3, 3));
    // Pinned is 5% faster alone and 20% beside the neighbour: regression −100·(1 − s)/s.
    assert!(
        (by[0].histogram.mean + 5.26).abs() < 1.5,
        "{}",
        by[0].histogram.mean
    );
    assert!(
        (by[1].histogram.mean + 25.0).abs() < 1.5,
        "{}",
        by[1].histogram.mean
    );
    let text = comparison_table(c, Style::Text { color: false });
    assert!(
        text.contains("\nneighbour=none: regression histogram (seed 000")
            && text.contains("\nneighbour=cpu*1: regression histogram (seed 000"),
        "{text}"
    );
    let page = html::html(&data, &analysis);
    assert!(
        page.contains(", neighbour=none: 3 points"),
        "the chart per level"
    );
    assert!(page.contains(", neighbour=cpu*1: 3 points"));
    // Without a neighbour factor there is only the pooled histogram.
    let (_store, plain) = experiment::experiment();
    let a = analyse(
        &plain,
        experiment::options(&plain),
        &CompareOptions::default(),
    );
    assert!(a
        .comparisons
        .iter()
        .all(|c| c.histograms_by("neighbour").is_empty()));
}
