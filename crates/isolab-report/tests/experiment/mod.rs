//! A synthetic stored experiment with deterministic values: 2 shapes × 3 placements
//! × 2 workloads, 8 counted runs per cell, a warm-up and one time series per run.

#![allow(dead_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use isolab_report::ExperimentData;
use isolab_stats::Direction;
use isolab_store::{
    ExperimentStatus, LoadInterval, MetricValue, NewCell, NewExperiment, NewRun, RunStatus, Series,
    Store, Telemetry,
};

/// A counted, successful run of `cell` at round `repetition - 1` with `metrics` and
/// nothing else (no limits, telemetry or series).
pub fn counted_run(cell: i64, repetition: u32, metrics: Vec<MetricValue>) -> NewRun {
    NewRun {
        cell,
        repetition,
        warmup: false,
        round: repetition - 1,
        status: RunStatus::Ok,
        exit_code: Some(0),
        started_at: SystemTime::UNIX_EPOCH,
        wall: Duration::from_secs(1),
        stdout: String::new(),
        stderr: String::new(),
        error: None,
        limits: serde_json::Value::Null,
        metrics,
        telemetry: Default::default(),
        series: vec![],
        intervals: vec![],
        notes: vec![],
    }
}

pub const SPEC: &str = "[experiment]\nname = \"synthetic\"\nbaseline = { placement = \"shared\" }\n[matrix]\nshape = [\"medium\", \"large\"]\nplacement = [\"shared\", \"quota\", \"pinned\"]\nworkload = [\"sysbench-cpu\", \"fio-randread\"]\n";

pub fn experiment() -> (Store, ExperimentData) {
    let mut store = Store::open_in_memory().unwrap();
    let mut cells = Vec::new();
    for shape in ["medium", "large"] {
        for placement in ["shared", "quota", "pinned"] {
            for workload in ["sysbench-cpu", "fio-randread"] {
                let levels = vec![
                    ("shape".to_string(), shape.to_string()),
                    ("placement".to_string(), placement.to_string()),
                    ("workload".to_string(), workload.to_string()),
                ];
                let key = levels
                    .iter()
                    .map(|(f, l)| format!("{f}={l}"))
                    .collect::<Vec<_>>()
                    .join(" ");
                cells.push(NewCell {
                    index: cells.len() as u32,
                    key,
                    levels,
                });
            }
        }
    }
    let id = store
        .create_experiment(&NewExperiment {
            name: "synthetic".into(),
            spec_toml: SPEC.into(),
            spec_path: Some("synthetic.toml".into()),
            seed: 42,
            isolab_version: "test".into(),
            created_at: UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            cells: cells.clone(),
            environment: vec![
                ("kernel".into(), "6.18-test".into()),
                ("cpu_model".into(), "Synthetic CPU".into()),
            ],
        })
        .unwrap();
    let stored = store.cells(id).unwrap();
    for (i, cell) in stored.iter().enumerate() {
        let placement = &cells[i].levels[1].1;
        let workload = &cells[i].levels[2].1;
        // quota costs 10% on sysbench-cpu, pinned gains 5% on fio; the rest is noise.
        let base = if workload == "sysbench-cpu" {
            1000.0
        } else {
            20000.0
        };
        let factor = match (placement.as_str(), workload.as_str()) {
            ("quota", "sysbench-cpu") => 0.90,
            ("pinned", "fio-randread") => 1.05,
            _ => 1.0,
        };
        let (name, unit) = if workload == "sysbench-cpu" {
            ("events_per_second", "events/s")
        } else {
            ("iops", "IOPS")
        };
        for rep in 0..9u32 {
            let jitter =
                [0.0, 0.004, -0.003, 0.002, -0.001, 0.003, -0.004, 0.001, 0.0][rep as usize];
            let value = base * factor * (1.0 + jitter);
            store
                .insert_run(&NewRun {
                    cell: cell.id,
                    repetition: if rep == 0 { 1 } else { rep },
                    warmup: rep == 0,
                    round: rep,
                    status: RunStatus::Ok,
                    exit_code: Some(0),
                    started_at: SystemTime::UNIX_EPOCH,
                    wall: Duration::from_secs(4),
                    stdout: String::new(),
                    stderr: String::new(),
                    error: None,
                    limits: if placement == "quota" {
                        serde_json::json!({ "summary": "quota limits", "applied": { "cpu": { "quota": { "secs": 0, "nanos": 100_000_000 }, "period": { "secs": 0, "nanos": 100_000_000 } } } })
                    } else {
                        serde_json::json!({ "summary": format!("{placement} limits"), "applied": { "cpu": null } })
                    },
                    metrics: vec![MetricValue { name: name.into(), unit: unit.into(), direction: Direction::Higher, value }],
                    telemetry: [(Telemetry::NrThrottled, if placement == "quota" { 12.0 } else { 0.0 }), (Telemetry::CpuMigrations, 3.0)].into_iter().collect(),
                    series: vec![
                        Series { name: "cpu0_util".into(), unit: "%".into(), points: (0..40).map(|t| (t as f64 / 10.0, 90.0 + (t % 5) as f64)).collect() },
                        Series { name: "cpu1_util".into(), unit: "%".into(), points: (0..40).map(|t| (t as f64 / 10.0, 5.0 + (t % 3) as f64)).collect() },
                    ],
                    intervals: vec![],
                    notes: vec![],
                })
                .unwrap();
        }
        store
            .set_stop_reason(
                cell.id,
                "stable: CV of the metric 0.30% ≤ target 5.00% after 8 runs",
            )
            .unwrap();
    }
    store
        .set_status(
            id,
            ExperimentStatus::Complete,
            UNIX_EPOCH + Duration::from_secs(1_800_000_100),
        )
        .unwrap();
    let data = ExperimentData::load(&store, id).unwrap();
    (store, data)
}

/// Baseline placement=shared, primary metrics as the built-ins have them.
pub fn options(data: &ExperimentData) -> isolab_report::SummaryOptions {
    isolab_report::SummaryOptions {
        baseline: vec![("placement".into(), "shared".into())],
        primary: data
            .cells
            .iter()
            .map(|c| {
                (
                    c.index,
                    if c.key.contains("sysbench") {
                        "events_per_second".to_string()
                    } else {
                        "iops".to_string()
                    },
                )
            })
            .collect(),
        all_metrics: false,
        max_repetitions: None,
    }
}

pub const ISOLATION_SPEC: &str = "[experiment]\nname = \"isolation\"\nbaseline = { neighbour = \"none\" }\n[matrix]\nplatform = [\"host\", \"isolab\"]\nworkload = [\"sysbench-cpu\", \"fio-randread\"]\nneighbour = [\"none\", \"cpu@90%\", \"cpu@100%\", \"cpu*2\"]\nreservation = [\"none\", \"cpuset\"]\n";

/// A synthetic isolation experiment (seed 001's design): 2 platforms × 2 workloads × 4
/// neighbours × 2 reservations, 8 counted runs per cell after a warm-up, baseline
/// neighbour=none. sysbench-cpu (events/s, higher is better) loses 20% to a cpu bomb at
/// 90% and 30% at 100% on the host (a little less in isolab), almost nothing with a
/// cpuset reservation; fio-randread's latency (ms, lower is better) is untouched except
/// at 100% without reservation (+10%).
pub fn isolation_experiment() -> (Store, ExperimentData) {
    let mut store = Store::open_in_memory().unwrap();
    let mut cells = Vec::new();
    for platform in ["host", "isolab"] {
        for workload in ["sysbench-cpu", "fio-randread"] {
            for neighbour in ["none", "cpu@90%", "cpu@100%", "cpu*2"] {
                for reservation in ["none", "cpuset"] {
                    let levels = vec![
                        ("platform".to_string(), platform.to_string()),
                        ("workload".to_string(), workload.to_string()),
                        ("neighbour".to_string(), neighbour.to_string()),
                        ("reservation".to_string(), reservation.to_string()),
                    ];
                    let key = levels
                        .iter()
                        .map(|(f, l)| format!("{f}={l}"))
                        .collect::<Vec<_>>()
                        .join(" ");
                    cells.push(NewCell {
                        index: cells.len() as u32,
                        key,
                        levels,
                    });
                }
            }
        }
    }
    let id = store
        .create_experiment(&NewExperiment {
            name: "isolation".into(),
            spec_toml: ISOLATION_SPEC.into(),
            spec_path: Some("isolation.toml".into()),
            seed: 7,
            isolab_version: "test".into(),
            created_at: UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            cells: cells.clone(),
            environment: vec![("kernel".into(), "6.18-test".into())],
        })
        .unwrap();
    let stored = store.cells(id).unwrap();
    for (i, cell) in stored.iter().enumerate() {
        let l = |k: usize| cells[i].levels[k].1.as_str();
        let (platform, workload, neighbour, reservation) = (l(0), l(1), l(2), l(3));
        let cpu = workload == "sysbench-cpu";
        // Relative performance: below 1 = worse.
        let factor = match (cpu, neighbour, reservation) {
            (_, "none", _) => 1.0,
            (true, "cpu@90%", "none") => 0.80,
            (true, "cpu@100%", "none") => 0.70,
            (true, "cpu*2", "none") => 0.75,
            (true, "cpu@100%", "cpuset") => 0.96,
            (true, _, "cpuset") => 1.0,
            (false, "cpu@100%", "none") => 1.0 / 1.1,
            _ => 1.0,
        };
        // The isolab platform's cgroup softens the bomb a little.
        let factor = if platform == "isolab" && factor < 1.0 {
            1.0 - (1.0 - factor) * 0.8
        } else {
            factor
        };
        let (name, unit, direction, value) = if cpu {
            (
                "events_per_second",
                "events/s",
                Direction::Higher,
                1000.0 * factor,
            )
        } else {
            ("lat_mean", "ms", Direction::Lower, 2.0 / factor)
        };
        for rep in 0..9u32 {
            let jitter =
                [0.0, 0.004, -0.003, 0.002, -0.001, 0.003, -0.004, 0.001, 0.0][rep as usize];
            store
                .insert_run(&NewRun {
                    cell: cell.id,
                    repetition: if rep == 0 { 1 } else { rep },
                    warmup: rep == 0,
                    round: rep,
                    status: RunStatus::Ok,
                    exit_code: Some(0),
                    started_at: SystemTime::UNIX_EPOCH,
                    wall: Duration::from_secs(4),
                    stdout: String::new(),
                    stderr: String::new(),
                    error: None,
                    limits: serde_json::json!({ "summary": format!("reservation {reservation}") }),
                    metrics: vec![MetricValue {
                        name: name.into(),
                        unit: unit.into(),
                        direction,
                        value: value * (1.0 + jitter),
                    }],
                    telemetry: isolab_store::TelemetrySet::new(),
                    series: vec![],
                    intervals: vec![],
                    notes: vec![],
                })
                .unwrap();
        }
        store
            .set_stop_reason(
                cell.id,
                "stable: CV of the metric 0.30% ≤ target 5.00% after 8 runs",
            )
            .unwrap();
    }
    store
        .set_status(
            id,
            ExperimentStatus::Complete,
            UNIX_EPOCH + Duration::from_secs(1_800_000_100),
        )
        .unwrap();
    let data = ExperimentData::load(&store, id).unwrap();
    (store, data)
}

/// Baseline neighbour=none, each workload's primary metric.
pub fn isolation_options(data: &ExperimentData) -> isolab_report::SummaryOptions {
    isolab_report::SummaryOptions {
        baseline: vec![("neighbour".into(), "none".into())],
        primary: data
            .cells
            .iter()
            .map(|c| {
                (
                    c.index,
                    if c.key.contains("sysbench") {
                        "events_per_second".to_string()
                    } else {
                        "lat_mean".to_string()
                    },
                )
            })
            .collect(),
        all_metrics: false,
        max_repetitions: None,
    }
}

pub const SCALABILITY_SPEC: &str = "[experiment]\nname = \"scalability\"\nseed = 11\n[matrix]\nplatform = [\"host\", \"isolab\"]\nworkload = [\"sysbench-cpu\"]\nthreads = [1, 2, 4, 8, 16]\ninstances = [1]\n";

/// USL throughput λN / (1 + σ(N − 1) + κN(N − 1)).
pub fn usl(lambda: f64, sigma: f64, kappa: f64, n: f64) -> f64 {
    lambda * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
}

/// Relative noise of run `rep` of cell `cell` (deterministic, within ±3%).
fn scaling_noise(cell: usize, rep: u32) -> f64 {
    const PATTERN: [f64; 7] = [0.012, -0.021, 0.004, 0.027, -0.009, -0.016, 0.019];
    PATTERN[(cell * 3 + rep as usize) % PATTERN.len()]
}

/// Stores cells with `levels` and, per cell, 5 counted runs (after a warm-up) whose
/// metrics come from `metrics(cell, levels, rep)`.
fn store_cells(
    name: &str,
    spec: &str,
    seed: u64,
    cells: Vec<Vec<(String, String)>>,
    metrics: impl Fn(usize, &[(String, String)], u32) -> Vec<MetricValue>,
) -> (Store, ExperimentData) {
    store_runs(name, spec, seed, cells, 5, |cell, levels, rep| {
        (metrics(cell, levels, rep), vec![])
    })
}

/// Stores cells with `levels` and, per cell, `runs` counted runs (after a warm-up) whose
/// metrics and load intervals come from `run(cell, levels, rep)`.
fn store_runs(
    name: &str,
    spec: &str,
    seed: u64,
    cells: Vec<Vec<(String, String)>>,
    runs: u32,
    run: impl Fn(usize, &[(String, String)], u32) -> (Vec<MetricValue>, Vec<LoadInterval>),
) -> (Store, ExperimentData) {
    let mut store = Store::open_in_memory().unwrap();
    let new_cells: Vec<NewCell> = cells
        .into_iter()
        .enumerate()
        .map(|(i, levels)| NewCell {
            index: i as u32,
            key: levels
                .iter()
                .map(|(f, l)| format!("{f}={l}"))
                .collect::<Vec<_>>()
                .join(" "),
            levels,
        })
        .collect();
    let id = store
        .create_experiment(&NewExperiment {
            name: name.into(),
            spec_toml: spec.into(),
            spec_path: Some(format!("{name}.toml")),
            seed,
            isolab_version: "test".into(),
            created_at: UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            cells: new_cells.clone(),
            environment: vec![("kernel".into(), "6.18-test".into())],
        })
        .unwrap();
    let stored = store.cells(id).unwrap();
    for (i, cell) in stored.iter().enumerate() {
        for rep in 0..=runs {
            let (metrics, intervals) = run(i, &new_cells[i].levels, rep);
            store
                .insert_run(&NewRun {
                    cell: cell.id,
                    repetition: rep.max(1),
                    warmup: rep == 0,
                    round: rep,
                    status: RunStatus::Ok,
                    exit_code: Some(0),
                    started_at: SystemTime::UNIX_EPOCH,
                    wall: Duration::from_secs(4),
                    stdout: String::new(),
                    stderr: String::new(),
                    error: None,
                    limits: serde_json::json!({ "summary": "none" }),
                    metrics,
                    telemetry: isolab_store::TelemetrySet::new(),
                    series: vec![],
                    intervals,
                    notes: vec![],
                })
                .unwrap();
        }
        store
            .set_stop_reason(cell.id, &format!("max: {runs} runs reached"))
            .unwrap();
    }
    store
        .set_status(
            id,
            ExperimentStatus::Complete,
            UNIX_EPOCH + Duration::from_secs(1_800_000_100),
        )
        .unwrap();
    let data = ExperimentData::load(&store, id).unwrap();
    (store, data)
}

fn levels_of(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(f, l)| ((*f).to_owned(), l.clone()))
        .collect()
}

/// A synthetic scalability experiment (seed 001 chapter 6, scaled down): 2 platforms ×
/// threads 1, 2, 4, 8, 16, one instance, 5 counted runs per cell after a warm-up, ±3%
/// noise. sysbench-cpu's events/s follow the USL with λ = 1000 and σ = 0.04, κ = 0.003
/// on the host (peak at N* ≈ 17.9) and σ = 0.06, κ = 0.006 in isolab (N* ≈ 12.1,
/// retrograde at 16).
pub fn scalability_experiment() -> (Store, ExperimentData) {
    let mut cells = Vec::new();
    for platform in ["host", "isolab"] {
        for threads in [1, 2, 4, 8, 16] {
            cells.push(levels_of(&[
                ("platform", platform.to_owned()),
                ("workload", "sysbench-cpu".to_owned()),
                ("threads", threads.to_string()),
                ("instances", "1".to_owned()),
            ]));
        }
    }
    store_cells(
        "scalability",
        SCALABILITY_SPEC,
        11,
        cells,
        |i, levels, rep| {
            let n: f64 = levels[2].1.parse().unwrap();
            let (sigma, kappa) = if levels[0].1 == "host" {
                (0.04, 0.003)
            } else {
                (0.06, 0.006)
            };
            vec![MetricValue {
                name: "events_per_second".into(),
                unit: "events/s".into(),
                direction: Direction::Higher,
                value: usl(1000.0, sigma, kappa, n) * (1.0 + scaling_noise(i, rep)),
            }]
        },
    )
}

/// 1, 2, 4 and 8 concurrent instances of sysbench-cpu: the aggregate events/s (sum over
/// instances, Amdahl with σ = 0.1) and the per-instance mean, 5 runs per cell.
pub fn instances_experiment() -> (Store, ExperimentData) {
    let cells = [1, 2, 4, 8]
        .iter()
        .map(|n| {
            levels_of(&[
                ("workload", "sysbench-cpu".to_owned()),
                ("instances", n.to_string()),
            ])
        })
        .collect();
    store_cells(
        "instances",
        "[experiment]\nname = \"instances\"\n",
        3,
        cells,
        |i, levels, rep| {
            let n: f64 = levels[1].1.parse().unwrap();
            let total = usl(500.0, 0.1, 0.0, n) * (1.0 + scaling_noise(i, rep));
            let mut m = vec![MetricValue {
                name: "events_per_second".into(),
                unit: "events/s".into(),
                direction: Direction::Higher,
                value: total,
            }];
            if n > 1.0 {
                m.push(MetricValue {
                    name: "events_per_second_per_instance".into(),
                    unit: "events/s".into(),
                    direction: Direction::Higher,
                    value: total / n,
                });
            }
            m
        },
    )
}

/// No baseline, events/s primary.
pub fn scalability_options(data: &ExperimentData) -> isolab_report::SummaryOptions {
    isolab_report::SummaryOptions {
        baseline: Vec::new(),
        primary: data
            .cells
            .iter()
            .map(|c| (c.index, "events_per_second".to_string()))
            .collect(),
        all_metrics: false,
        max_repetitions: None,
    }
}

/// The built-in quick start's matrix (isolab-lab's `quick-start.toml`).
pub const QUICK_START_SPEC: &str = "[experiment]\nname = \"quick-start\"\nbaseline = { platform = \"host\", placement = \"shared\" }\n[matrix]\nplatform = [\"host\", \"isolab\"]\nshape = [\"medium\"]\nplacement = [\"shared\", \"quota\", \"pinned\"]\nworkload = [\"sysbench-cpu\", \"sysbench-memory\", \"fio-randread\"]\n";

/// The quick start's cells (2 platforms × 1 shape × 3 placements × 3 workloads, levels
/// in matrix order), 5 counted runs each: quota costs 8%, the container 2%, ±3% noise.
pub fn quick_start_experiment() -> (Store, ExperimentData) {
    let mut cells = Vec::new();
    for platform in ["host", "isolab"] {
        for placement in ["shared", "quota", "pinned"] {
            for workload in ["sysbench-cpu", "sysbench-memory", "fio-randread"] {
                cells.push(levels_of(&[
                    ("platform", platform.to_owned()),
                    ("shape", "medium".to_owned()),
                    ("placement", placement.to_owned()),
                    ("workload", workload.to_owned()),
                ]));
            }
        }
    }
    store_cells(
        "quick-start",
        QUICK_START_SPEC,
        7,
        cells,
        |i, levels, rep| {
            let cost = 1.0
                + if levels[2].1 == "quota" { 0.08 } else { 0.0 }
                + if levels[0].1 == "isolab" { 0.02 } else { 0.0 };
            let (name, unit, base) = match levels[3].1.as_str() {
                "sysbench-cpu" => ("events_per_second", "events/s", 1200.0),
                "sysbench-memory" => ("throughput", "MiB/s", 9800.0),
                _ => ("read_iops", "IO/s", 48_000.0),
            };
            vec![MetricValue {
                name: name.into(),
                unit: unit.into(),
                direction: Direction::Higher,
                value: base / cost * (1.0 + scaling_noise(i, rep)),
            }]
        },
    )
}

/// The baseline as isolab-lab parses the quick start's spec: an inline table, so its
/// pairs come sorted by factor (placement before platform), not in the cells' order.
pub fn quick_start_options(data: &ExperimentData) -> isolab_report::SummaryOptions {
    isolab_report::SummaryOptions {
        baseline: vec![
            ("placement".into(), "shared".into()),
            ("platform".into(), "host".into()),
        ],
        primary: data
            .cells
            .iter()
            .map(|c| {
                let metric = match c.levels[3].1.as_str() {
                    "sysbench-cpu" => "events_per_second",
                    "sysbench-memory" => "throughput",
                    _ => "read_iops",
                };
                (c.index, metric.to_owned())
            })
            .collect(),
        all_metrics: false,
        max_repetitions: None,
    }
}

const LOAD_SPEC: &str = "[experiment]\nname = \"load\"\nbaseline = { platform = \"host\" }\nrepetitions = { warmup = 1, min = 3, max = 3 }\n\n[matrix]\nplatform = [\"host\", \"docker\"]\nworkload = [\"wordpress\"]\n";

/// Seconds of load: users ramp from 1 to 50 over the first 50, then 50 are held for 10
/// (seed 003's profile, 1 → 100 users over 720 s then 80 s, scaled down).
pub const LOAD_SECONDS: u32 = 60;

/// Active users at second `s` of [`LOAD_SECONDS`].
pub fn load_users(s: u32) -> f64 {
    (1.0 + 49.0 * f64::from(s) / 49.0).min(50.0)
}

/// A synthetic service experiment in seed 003's shape: WordPress on `host` and `docker`,
/// 3 counted runs each after a warm-up, [`LOAD_SECONDS`] seconds of request `home` under
/// ramping users ([`load_users`]). Each user asks for 10 pages a second until the
/// platform saturates (host at 400 requests/s, docker at 330), then response times grow
/// as Little's law says (users ÷ throughput); docker fails 1% of its requests once
/// saturated. Runs differ by a deterministic ±3% ripple. Metric: `home_ok`, the run's
/// successful requests.
pub fn load_experiment() -> (Store, ExperimentData) {
    let cells = ["host", "docker"]
        .iter()
        .map(|p| {
            levels_of(&[
                ("platform", (*p).to_owned()),
                ("workload", "wordpress".to_owned()),
            ])
        })
        .collect();
    store_runs("load", LOAD_SPEC, 3, cells, 3, |cell, _, rep| {
        let capacity = if cell == 0 { 400.0 } else { 330.0 };
        let intervals: Vec<LoadInterval> = (0..LOAD_SECONDS)
            .map(|s| {
                let users = load_users(s);
                let ripple = scaling_noise(cell + s as usize, rep);
                let rate = (10.0 * users).min(capacity) * (1.0 + ripple);
                let saturated = 10.0 * users > capacity;
                let requests = rate.round() as u64;
                let failures = if saturated && cell == 1 {
                    requests / 100
                } else {
                    0
                };
                let p50 = 1000.0 * users / rate * (1.0 - ripple);
                LoadInterval {
                    request: "home".into(),
                    start_s: f64::from(s),
                    users: Some(users),
                    target_rate: None,
                    requests,
                    failures,
                    latency_mean_ms: Some(1.2 * p50),
                    latency_p50_ms: Some(p50),
                    latency_p90_ms: Some(1.8 * p50),
                    latency_p99_ms: Some(2.5 * p50),
                    latency_max_ms: Some(4.0 * p50),
                }
            })
            .collect();
        let ok: u64 = intervals.iter().map(|i| i.requests - i.failures).sum();
        let metrics = vec![MetricValue {
            name: "home_ok".into(),
            unit: "requests".into(),
            direction: Direction::Higher,
            value: ok as f64,
        }];
        (metrics, intervals)
    })
}

/// The load experiment's baseline: platform = host.
pub fn load_options(_data: &ExperimentData) -> isolab_report::SummaryOptions {
    isolab_report::SummaryOptions {
        baseline: vec![("platform".into(), "host".into())],
        ..Default::default()
    }
}

/// The load experiment analysed against its baseline (the store is dropped: the data is
/// loaded).
pub fn load_analysis() -> (ExperimentData, isolab_report::Analysis) {
    let (_store, data) = load_experiment();
    let analysis = isolab_report::analyse(
        &data,
        load_options(&data),
        &isolab_report::compare::CompareOptions::default(),
    );
    (data, analysis)
}

const TAIL_SPEC: &str = "[experiment]\nname = \"tail\"\nbaseline = { platform = \"host\" }\nrepetitions = { warmup = 1, min = 6, max = 12 }\n\n[matrix]\nplatform = [\"host\", \"isolab\"]\nworkload = [\"cpu-tail-latency\"]\n";

/// The quick start's tail latency, scaled down: host and isolab, 12 counted runs each;
/// `latency_max` has a CV of about 30% (one slow request decides it) and isolab's is 5%
/// higher, `latency_p99` a CV of 0.5%.
pub fn tail_latency_experiment() -> (Store, ExperimentData) {
    const Z: [f64; 12] = [
        0.9, -1.4, 0.3, 1.7, -0.6, -0.2, 1.1, -1.8, 0.5, -0.9, 0.1, 0.3,
    ];
    let cells = ["host", "isolab"]
        .iter()
        .map(|p| {
            levels_of(&[
                ("platform", (*p).to_owned()),
                ("workload", "cpu-tail-latency".to_owned()),
            ])
        })
        .collect();
    store_runs("tail", TAIL_SPEC, 3, cells, 12, |cell, _, rep| {
        let z = Z[(rep as usize + 5 * cell) % Z.len()];
        let cost = if cell == 1 { 1.05 } else { 1.0 };
        let metric = |name: &str, value: f64| MetricValue {
            name: name.into(),
            unit: "ms".into(),
            direction: Direction::Lower,
            value,
        };
        (
            vec![
                metric("latency_max", 20.0 * cost * (1.0 + 0.3 * z)),
                metric("latency_p99", 3.6 * cost * (1.0 + 0.005 * z)),
            ],
            vec![],
        )
    })
}

/// The tail-latency experiment's options: latency_max is primary, at most 12 runs.
pub fn tail_latency_options(data: &ExperimentData) -> isolab_report::SummaryOptions {
    isolab_report::SummaryOptions {
        baseline: vec![("platform".into(), "host".into())],
        primary: data
            .cells
            .iter()
            .map(|c| (c.index, "latency_max".to_owned()))
            .collect(),
        all_metrics: false,
        max_repetitions: Some(12),
    }
}

/// Every platform the registry has, as a spec names them.
pub const ALL_PLATFORMS: [&str; 14] = [
    "host",
    "isolab",
    "docker",
    "podman",
    "runc",
    "crun",
    "youki",
    "lxc",
    "nspawn",
    "docker+isolab",
    "podman+isolab",
    "vm(tcg)",
    "vm(tcg)+isolab",
    "vm(tcg)+docker",
];

/// An experiment over all 14 platforms × placements quota and pinned (28 cells), 5
/// counted runs each of sysbench-cpu: each platform costs 1% more than the one before,
/// quota 5% more than pinned, ±3% noise.
pub fn many_platforms_experiment() -> (Store, ExperimentData) {
    let mut cells = Vec::new();
    for platform in ALL_PLATFORMS {
        for placement in ["quota", "pinned"] {
            cells.push(levels_of(&[
                ("platform", platform.to_owned()),
                ("placement", placement.to_owned()),
                ("workload", "sysbench-cpu".to_owned()),
            ]));
        }
    }
    store_cells(
        "all-platforms",
        "[experiment]\nname = \"all-platforms\"\nbaseline = { platform = \"host\" }\n",
        11,
        cells,
        |i, levels, rep| {
            let p = ALL_PLATFORMS
                .iter()
                .position(|p| *p == levels[0].1)
                .unwrap_or(0);
            let cost = 1.0 + 0.01 * p as f64 + if levels[1].1 == "quota" { 0.05 } else { 0.0 };
            vec![MetricValue {
                name: "events_per_second".into(),
                unit: "events/s".into(),
                direction: Direction::Higher,
                value: 1000.0 / cost * (1.0 + scaling_noise(i, rep)),
            }]
        },
    )
}

/// The all-platforms experiment's options: the host is the baseline.
pub fn many_platforms_options(data: &ExperimentData) -> isolab_report::SummaryOptions {
    isolab_report::SummaryOptions {
        baseline: vec![("platform".into(), "host".into())],
        primary: data
            .cells
            .iter()
            .map(|c| (c.index, "events_per_second".to_owned()))
            .collect(),
        all_metrics: false,
        max_repetitions: Some(30),
    }
}

/// A new experiment of `cells` in `store` without a spec or an environment, created at
/// the epoch.
fn bare_experiment(
    store: &mut Store,
    name: &str,
    seed: u64,
    cells: Vec<NewCell>,
) -> isolab_store::ExperimentId {
    store
        .create_experiment(&NewExperiment {
            name: name.into(),
            spec_toml: String::new(),
            spec_path: None,
            seed,
            isolab_version: "test".into(),
            created_at: UNIX_EPOCH,
            cells,
            environment: vec![],
        })
        .unwrap()
}

/// A synthetic CHR experiment (seed 002's Fig 7): docker against the host, a 1-cpu
/// shape in host cpu pools of 1, 2 and 4 cpus; docker's overhead falls as the pool
/// grows (CHR 1 → 0.25): 30%, 15%, 5%. Each run records its placement facts.
pub fn chr_experiment() -> (Store, ExperimentData) {
    let mut store = Store::open_in_memory().unwrap();
    let mut cells = Vec::new();
    for platform in ["host", "docker"] {
        for pool in ["1", "2", "4"] {
            let levels = vec![
                ("platform".to_string(), platform.to_string()),
                ("host_cpus".to_string(), pool.to_string()),
            ];
            cells.push(NewCell {
                index: cells.len() as u32,
                key: format!("platform={platform} host_cpus={pool}"),
                levels,
            });
        }
    }
    let id = bare_experiment(&mut store, "chr", 7, cells.clone());
    for (i, cell) in store.cells(id).unwrap().iter().enumerate() {
        let pool: f64 = cells[i].levels[1].1.parse().unwrap();
        let slower = if cells[i].levels[0].1 == "docker" {
            match pool as u32 {
                1 => 1.30,
                2 => 1.15,
                _ => 1.05,
            }
        } else {
            1.0
        };
        for k in 0..8u32 {
            let jitter = [0.0, 0.004, -0.003, 0.002, -0.001, 0.003, -0.004, 0.001][k as usize];
            let mut run = counted_run(
                cell.id,
                k + 1,
                vec![MetricValue {
                    name: "execution_time".into(),
                    unit: "s".into(),
                    direction: Direction::Lower,
                    value: 10.0 * slower * (1.0 + jitter),
                }],
            );
            run.limits =
                serde_json::json!({ "placement": { "chr": 1.0 / pool, "shape_cpus": 1.0 } });
            store.insert_run(&run).unwrap();
        }
    }
    let data = ExperimentData::load(&store, id).unwrap();
    (store, data)
}

/// The true overhead ratio of platform `platform` at `cpus` in [`size_experiment`]:
/// docker all platform-size (PTO 0, PSO₁ 0.4), vm all platform-type (PTO 10%, no
/// PSO), isolab both (PTO 5%, PSO₁ 0.2).
pub fn size_ratio(platform: &str, cpus: f64) -> f64 {
    match platform {
        "docker" => 1.0 + 0.4 / cpus,
        "vm" => 1.10,
        "isolab" => 1.05 + 0.2 / cpus,
        _ => 1.0,
    }
}

/// A synthetic seed 002 §IV experiment: host, docker, vm and isolab at shapes of 1, 2, 4
/// and 8 cpus, 8 counted runs a cell of an execution time of `10 s ×` [`size_ratio`]
/// with a ±0.5% wobble; each run records its shape's cpus and its CHR on an 8-cpu host.
pub fn size_experiment() -> (Store, ExperimentData) {
    let shapes = [("s1", 1.0), ("s2", 2.0), ("s4", 4.0), ("s8", 8.0)];
    let mut cells = Vec::new();
    for platform in ["host", "docker", "vm", "isolab"] {
        for (shape, _) in shapes {
            cells.push(vec![
                ("platform".to_string(), platform.to_string()),
                ("shape".to_string(), shape.to_string()),
            ]);
        }
    }
    let mut store = Store::open_in_memory().unwrap();
    let id = bare_experiment(
        &mut store,
        "sizes",
        2,
        cells
            .iter()
            .enumerate()
            .map(|(i, levels)| NewCell {
                index: i as u32,
                key: format!("platform={} shape={}", levels[0].1, levels[1].1),
                levels: levels.clone(),
            })
            .collect(),
    );
    for (i, cell) in store.cells(id).unwrap().iter().enumerate() {
        let cpus = shapes[i % shapes.len()].1;
        let ratio = size_ratio(&cells[i][0].1, cpus);
        for k in 0..8u32 {
            let wobble =
                [0.0, 0.004, -0.003, 0.002, -0.005, 0.003, -0.004, 0.001][(k as usize + i) % 8];
            let mut run = counted_run(
                cell.id,
                k + 1,
                vec![MetricValue {
                    name: "execution_time".into(),
                    unit: "s".into(),
                    direction: Direction::Lower,
                    value: 10.0 * ratio * (1.0 + wobble),
                }],
            );
            run.limits =
                serde_json::json!({ "placement": { "shape_cpus": cpus, "chr": cpus / 8.0 } });
            store.insert_run(&run).unwrap();
        }
    }
    let data = ExperimentData::load(&store, id).unwrap();
    (store, data)
}

/// Seed 001's fork table in small: sysbench-cpu on the host without neighbour, beside
/// `fork*4` (10% slower) and beside `fork*64`, where the subject did not report: its one
/// run is stored with status `dnr` and the cell stopped on it. 6 counted runs otherwise.
pub fn dnr_experiment() -> (Store, ExperimentData) {
    let mut store = Store::open_in_memory().unwrap();
    let neighbours = ["none", "fork*4", "fork*64"];
    let cells: Vec<NewCell> = neighbours
        .iter()
        .enumerate()
        .map(|(i, n)| NewCell {
            index: i as u32,
            key: format!("workload=sysbench-cpu neighbour={n}"),
            levels: vec![
                ("workload".into(), "sysbench-cpu".into()),
                ("neighbour".into(), (*n).into()),
            ],
        })
        .collect();
    let id = bare_experiment(&mut store, "dnr", 1, cells);
    let stored = store.cells(id).unwrap();
    for (i, cell) in stored.iter().enumerate() {
        if i == 2 {
            let mut run = counted_run(cell.id, 1, vec![]);
            run.status = RunStatus::DidNotReport;
            run.exit_code = None;
            run.error = Some(
                "did not report (DNR): beside neighbour `fork*64` the subject ran longer than its timeout of 15m and was killed"
                    .into(),
            );
            store.insert_run(&run).unwrap();
            store
                .set_stop_reason(
                    cell.id,
                    "did not report: counted run 1: beside neighbour `fork*64` the subject ran longer than its timeout of 15m and was killed",
                )
                .unwrap();
            continue;
        }
        let factor = if i == 1 { 0.9 } else { 1.0 };
        for k in 0..6u32 {
            let jitter = [0.0, 0.002, -0.003, 0.001, -0.002, 0.003][k as usize];
            store
                .insert_run(&counted_run(
                    cell.id,
                    k + 1,
                    vec![MetricValue {
                        name: "events_per_second".into(),
                        unit: "events/s".into(),
                        direction: Direction::Higher,
                        value: 1000.0 * factor * (1.0 + jitter),
                    }],
                ))
                .unwrap();
        }
        store
            .set_stop_reason(cell.id, "max: 6 runs reached")
            .unwrap();
    }
    let data = ExperimentData::load(&store, id).unwrap();
    (store, data)
}

/// Seed 000's design in small: `pinned` against `quota` (the baseline) for three
/// workloads, without and with a noisy neighbour; pinned is 5% faster alone and 20%
/// faster beside the neighbour. 5 counted runs a cell, ±3% deterministic noise.
pub fn neighbour_pairs_experiment() -> (Store, ExperimentData) {
    let mut cells = Vec::new();
    for placement in ["quota", "pinned"] {
        for workload in ["w1", "w2", "w3"] {
            for neighbour in ["none", "cpu*1"] {
                cells.push(levels_of(&[
                    ("placement", placement.to_owned()),
                    ("workload", workload.to_owned()),
                    ("neighbour", neighbour.to_owned()),
                ]));
            }
        }
    }
    store_cells(
        "pairs",
        "[experiment]\nname = \"pairs\"\nbaseline = { placement = \"quota\" }\n",
        5,
        cells,
        |i, levels, rep| {
            let speedup = match (levels[0].1.as_str(), levels[2].1.as_str()) {
                ("pinned", "none") => 0.95,
                ("pinned", _) => 0.80,
                _ => 1.0,
            };
            vec![MetricValue {
                name: "time".into(),
                unit: "s".into(),
                direction: Direction::Lower,
                value: 10.0 * speedup * (1.0 + scaling_noise(i, rep)),
            }]
        },
    )
}
