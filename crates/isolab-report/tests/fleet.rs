//! A fleet's pooled analysis on synthetic hosts: two hosts of different speed, a
//! configuration that costs 10% on both. Blocked, the 10% is recovered; with the cells
//! split across the hosts, the comparison is flagged as confounded with them.

mod experiment;

use std::time::{Duration, UNIX_EPOCH};

use isolab_report::fleet::PooledPoint;
use isolab_report::fleet::{pooled, pooled_table, Design, HostData, SPLIT_WARNING};
use isolab_report::html::fleet_html;
use isolab_report::{analyse, ExperimentData, SummaryOptions};
use isolab_stats::Direction;
use isolab_store::{ExperimentStatus, MetricValue, NewCell, NewExperiment, Store};

const SPEC: &str = "[experiment]\nname = \"fleet\"\nbaseline = { placement = \"shared\" }\n[matrix]\nplacement = [\"shared\", \"quota\"]\nworkload = [\"sysbench-cpu\"]\n";

/// Host `name`'s experiment: the `placements` it ran, 8 counted runs each, at `speed`
/// events/s for `shared` and 10% fewer for `quota`, with ±0.4% jitter.
fn host(name: &str, speed: f64, placements: &[&str]) -> (Store, HostData) {
    let mut store = Store::open_in_memory().unwrap();
    let cells: Vec<NewCell> = placements
        .iter()
        .map(|p| {
            let index = if *p == "shared" { 0 } else { 1 };
            NewCell {
                index,
                key: format!("placement={p} workload=sysbench-cpu"),
                levels: vec![
                    ("placement".into(), (*p).into()),
                    ("workload".into(), "sysbench-cpu".into()),
                ],
            }
        })
        .collect();
    let id = store
        .create_experiment(&NewExperiment {
            name: "fleet".into(),
            spec_toml: SPEC.into(),
            spec_path: None,
            seed: 1,
            isolab_version: "test".into(),
            created_at: UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            cells: cells.clone(),
            environment: vec![("hostname".into(), name.into())],
        })
        .unwrap();
    for (cell, new) in store.cells(id).unwrap().iter().zip(&cells) {
        let factor = if new.key.contains("quota") { 0.9 } else { 1.0 };
        for rep in 1..=8u32 {
            let jitter =
                [0.004, -0.003, 0.002, -0.001, 0.003, -0.004, 0.001, 0.0][rep as usize - 1];
            let value = speed * factor * (1.0 + jitter);
            let metric = MetricValue {
                name: "events_per_second".into(),
                unit: "events/s".into(),
                direction: Direction::Higher,
                value,
            };
            store
                .insert_run(&experiment::counted_run(cell.id, rep, vec![metric]))
                .unwrap();
        }
    }
    store
        .set_status(
            id,
            ExperimentStatus::Complete,
            UNIX_EPOCH + Duration::from_secs(1_800_000_100),
        )
        .unwrap();
    let data = ExperimentData::load(&store, id).unwrap();
    let options = SummaryOptions {
        baseline: vec![("placement".into(), "shared".into())],
        primary: data
            .cells
            .iter()
            .map(|c| (c.index, "events_per_second".to_string()))
            .collect(),
        all_metrics: false,
        max_repetitions: None,
    };
    let data = HostData {
        host: name.into(),
        data,
        options,
    };
    (store, data)
}

/// The fleet's HTML report, each host analysed as `isolab report` does.
fn report(id: i64, design: Design, points: &[PooledPoint], hosts: &[HostData]) -> String {
    let analyses: Vec<_> = hosts
        .iter()
        .map(|h| analyse(&h.data, h.options.clone(), &Default::default()))
        .collect();
    fleet_html(id, "fleet", "--nodes 2", design, points, hosts, &analyses)
}

#[test]
fn blocked_hosts_recover_the_effect_and_the_report_shows_every_host() {
    let (_a, fast) = host("node-a", 2000.0, &["shared", "quota"]);
    let (_b, slow) = host("node-b", 1000.0, &["shared", "quota"]);
    let hosts = [fast, slow];
    let points = pooled(&hosts, 0.95, Design::Blocked);
    assert_eq!(points.len(), 1, "{points:?}");
    let p = &points[0];
    assert!(p.confounded.is_none());
    assert_eq!(p.comparison.blocks.len(), 2);
    // Fewer events/s is worse: the ratio is 1/0.9.
    assert!((p.comparison.ratio - 1.0 / 0.9).abs() < 0.005, "{p:?}");
    assert!(p.comparison.ci.low > 1.0, "{p:?}");
    assert!(!p.comparison.heterogeneity.unwrap().differs());
    let table = pooled_table(&points, Design::Blocked).render(false);
    assert!(
        table.contains("placement=quota workload=sysbench-cpu"),
        "{table}"
    );
    assert!(table.contains("no (Q p="), "{table}");

    let html = report(3, Design::Blocked, &points, &hosts);
    for want in [
        "isolab fleet 3: fleet",
        "Pooled over hosts",
        "Host node-a",
        "Host node-b",
        "1.111",
    ] {
        assert!(html.contains(want), "{want} missing");
    }
    assert!(!html.contains("Warning:"));
}

#[test]
fn split_cells_are_compared_across_hosts_and_flagged_as_confounded() {
    // node-a ran the baseline, node-b (half as fast) the configuration: the 10% cost
    // reads as 2.22×, and every table must say why.
    let (_a, fast) = host("node-a", 2000.0, &["shared"]);
    let (_b, slow) = host("node-b", 1000.0, &["quota"]);
    let hosts = [fast, slow];
    assert!(
        pooled(&hosts, 0.95, Design::Blocked).is_empty(),
        "no host has both sides"
    );
    let points = pooled(&hosts, 0.95, Design::Split);
    assert_eq!(points.len(), 1, "{points:?}");
    let p = &points[0];
    assert_eq!(
        p.confounded.as_deref(),
        Some("configuration on node-b, baseline on node-a")
    );
    assert!((p.comparison.ratio - 1.0 / 0.45).abs() < 0.01, "{p:?}");
    let table = pooled_table(&points, Design::Split).render(false);
    assert!(table.contains("CONFOUNDED"), "{table}");

    let html = report(4, Design::Split, &points, &hosts);
    assert!(
        html.contains(&isolab_report::html::esc(SPLIT_WARNING)),
        "no warning"
    );
    assert!(html.contains("CONFOUNDED"));
}
