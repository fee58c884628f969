//! Writes a synthetic experiment of seed 000's size into a SQLite store, for timing
//! `isolab report`, `show` and `compare` over hundreds of measurement points:
//! `cargo run --release -p isolab-report --example synthetic_store -- STORE [POINTS]`
//! (700 points by default), then e.g.
//! `time isolab --db STORE report seed-000-synthetic --out r.html`.
//!
//! The experiment: POINTS queries (`query` = q0 …) × placement `cpus` and `cpuset`
//! × 10 counted runs each, interleaved rounds, baseline `placement=cpus`; cpuset is
//! 3% faster on average with a spread of regressions, and its latency CV is 2% (a
//! tenth of the queries 7%). Every run is labelled synthetic in its notes.

use std::time::{Duration, SystemTime};

use isolab_stats::Direction;
use isolab_store::{
    ExperimentStatus, MetricValue, NewCell, NewExperiment, NewRun, RunStatus, Store,
};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: synthetic_store STORE [POINTS]");
        std::process::exit(2);
    };
    let points: u32 = args
        .next()
        .map_or(700, |p| p.parse().expect("POINTS is a number"));
    let mut store = Store::open(std::path::Path::new(&path)).expect("the store opens");
    let spec = format!(
        "[experiment]\nname = \"seed-000-synthetic\"\nbaseline = {{ placement = \"cpus\" }}\n# synthetic: written by the synthetic_store example, {points} queries\n"
    );
    let mut cells = Vec::new();
    for q in 0..points {
        for placement in ["cpus", "cpuset"] {
            let levels = vec![
                ("placement".to_string(), placement.to_string()),
                ("query".to_string(), format!("q{q}")),
            ];
            cells.push(NewCell {
                index: cells.len() as u32,
                key: format!("placement={placement} query=q{q}"),
                levels,
            });
        }
    }
    let id = store
        .create_experiment(&NewExperiment {
            name: "seed-000-synthetic".into(),
            spec_toml: spec,
            spec_path: None,
            seed: 0,
            isolab_version: env!("CARGO_PKG_VERSION").into(),
            created_at: SystemTime::now(),
            cells,
            environment: vec![("synthetic".into(), "yes".into())],
        })
        .expect("the experiment is stored");
    let stored = store.cells(id).expect("its cells");
    // A deterministic spread: a small LCG, no dependency.
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut uniform = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    for round in 0..10u32 {
        for (i, cell) in stored.iter().enumerate() {
            let q = (i / 2) as f64;
            let cpuset = i % 2 == 1;
            let base = 1.0 + q / 100.0;
            let effect = if cpuset {
                0.97 + 0.06 * (uniform() - 0.5)
            } else {
                1.0
            };
            let cv = if (i / 2) % 10 == 0 { 0.07 } else { 0.02 };
            // Uniform noise of standard deviation `cv` (a uniform on [-½, ½] has sd 1/√12).
            let value = base * effect * (1.0 + cv * 12f64.sqrt() * (uniform() - 0.5));
            let run = NewRun {
                cell: cell.id,
                repetition: round + 1,
                warmup: false,
                round,
                status: RunStatus::Ok,
                exit_code: Some(0),
                started_at: SystemTime::now(),
                wall: Duration::from_millis(100),
                stdout: String::new(),
                stderr: String::new(),
                error: None,
                limits: serde_json::Value::Null,
                metrics: vec![MetricValue {
                    name: "latency_mean".into(),
                    unit: "ms".into(),
                    direction: Direction::Lower,
                    value,
                }],
                telemetry: Default::default(),
                series: vec![],
                intervals: vec![],
                notes: vec!["synthetic: written by the synthetic_store example".into()],
            };
            store.insert_run(&run).expect("the run is stored");
        }
    }
    store
        .set_status(id, ExperimentStatus::Complete, SystemTime::now())
        .expect("the status is stored");
    println!(
        "experiment {id} (seed-000-synthetic): {points} points, {} runs in {path}",
        stored.len() * 10
    );
}
