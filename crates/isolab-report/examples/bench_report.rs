//! Benchmark: load, analyse and render the HTML report of an experiment with many
//! stored runs. Run with
//! `cargo run --release -p isolab-report --example bench_report -- [RUNS] [CELLS] [COUNTERS]`
//! (defaults: 100000 runs over 100 cells, 2 counters per run: throttled periods and
//! migrations, both constant). With COUNTERS up to 50, each run records that many of
//! the counters a real run on a 16-core host records (cgroup cpu time, throttling and
//! memory, getrusage, perf, PSI, interrupts, scheduling latency, each core's
//! utilisation), some moving with the placement as real runs' do and some constant, so
//! that attribution has counters to test for every decided point. Prints the time of each phase. With
//! `ISOLAB_BENCH_STORE=FILE` the store is kept in FILE, made on the first run and only
//! read after (the arguments of the first run stand), so that a profiler sees the
//! report alone. With `ISOLAB_BENCH_HTML=FILE` the rendered report is written to FILE
//! (after the timing), so that two builds' reports of one store can be compared byte
//! for byte.

use std::time::{Duration, Instant, SystemTime};

use isolab_report::compare::CompareOptions;
use isolab_report::{analyse, ExperimentData, SummaryOptions};
use isolab_stats::Direction;
use isolab_store::{MetricValue, NewCell, NewExperiment, NewRun, RunStatus, Store, Telemetry};

/// Host cores whose utilisation a run records (`host_cpu<N>_util_pct`), as on a
/// 16-core host.
const HOST_CORES: u32 = 16;

/// The most counters a run of the benchmark records: what a real run on a 16-core host
/// stores (cgroup, getrusage, perf, per-core utilisation, interrupts, the probe).
const MAX_COUNTERS: usize = 50;

/// The first `n` counters of a run of placement `p` (0 shared, 1 quota, 2 pinned, 3
/// shared2) with `noise` in [0, 1). The first 12 are the benchmark's earlier telemetry
/// (the first two constant, the others moving with the placement and a little noise),
/// so that 2 and 12 measure what they did before; the other 38 complete what
/// `platform/measured.rs` and the probe push for one run on a 16-core host: cpu time
/// split, cgroup periods and bursts, memory and io, the other PSI lines, getrusage,
/// softirqs, scheduling latency and each host core's utilisation. Some move with the
/// placement (a quota throttles, a pinned run loads one core), some stay constant
/// (bursts, major faults, memory stalls), as on a real host.
fn telemetry(n: usize, p: usize, noise: f64) -> isolab_store::TelemetrySet {
    use isolab_store::{PsiLine, PsiResource};
    let quota = if p == 1 { 1.0 } else { 0.0 };
    let pinned = if p == 2 { 1.0 } else { 0.0 };
    let cpu = 1.0 + 0.01 * noise;
    let wall = 1.1 * (1.0 + 0.02 * p as f64) + 0.01 * noise;
    let mut all = vec![
        (Telemetry::NrThrottled, 0.0),
        (Telemetry::CpuMigrations, 3.0),
        (Telemetry::CpuUsage, cpu),
        (Telemetry::Throttled, quota * (0.2 + 0.01 * noise)),
        (
            Telemetry::ContextSwitches,
            500.0 + 200.0 * quota + 20.0 * noise,
        ),
        (
            Telemetry::CtxSwitchesInvoluntary,
            50.0 + 100.0 * quota - 30.0 * pinned + 5.0 * noise,
        ),
        (
            Telemetry::Psi(PsiResource::Cpu, PsiLine::Some),
            0.05 + 0.1 * quota + 0.01 * noise,
        ),
        (
            Telemetry::Psi(PsiResource::Io, PsiLine::Some),
            0.01 + 0.001 * noise,
        ),
        (Telemetry::MinorFaults, 1000.0 + 10.0 * noise),
        (Telemetry::MajorFaults, 0.0),
        (Telemetry::Interrupts, 2000.0 + 100.0 * noise),
        (Telemetry::HostUtil, 50.0 - 20.0 * pinned + noise),
        // The rest of a real run's counters.
        (Telemetry::Wall, wall),
        (Telemetry::CpuUser, 0.9 * cpu),
        (Telemetry::CpuSystem, 0.1 * cpu),
        (Telemetry::CpuUtil, 100.0 * cpu / wall),
        (Telemetry::NrPeriods, quota * (wall / 0.1).ceil()),
        (Telemetry::NrBursts, 0.0),
        (Telemetry::Burst, 0.0),
        (
            Telemetry::MemoryPeak,
            48.0 * 1024.0 * 1024.0 + 4096.0 * (100.0 * noise).floor(),
        ),
        (Telemetry::MemoryMajorFaults, 0.0),
        (Telemetry::IoRead, 0.0),
        (Telemetry::IoWrite, 4096.0 * (4.0 * noise).floor()),
        (
            Telemetry::Psi(PsiResource::Cpu, PsiLine::Full),
            0.08 * quota * (1.0 + 0.1 * noise),
        ),
        (Telemetry::Psi(PsiResource::Memory, PsiLine::Some), 0.0),
        (Telemetry::Psi(PsiResource::Memory, PsiLine::Full), 0.0),
        (
            Telemetry::Psi(PsiResource::Io, PsiLine::Full),
            0.0005 * noise,
        ),
        (
            Telemetry::CtxSwitchesVoluntary,
            450.0 + 100.0 * quota + 15.0 * noise,
        ),
        (Telemetry::MaxRss, 46_000.0 + (200.0 * noise).floor()),
        (Telemetry::Softirqs, 800.0 + 40.0 * noise),
        (Telemetry::SoftirqsNet, 12.0),
        (
            Telemetry::SchedLatencyP50,
            0.004 + 0.002 * quota - 0.001 * pinned + 0.0005 * noise,
        ),
        (
            Telemetry::SchedLatencyP99,
            0.05 + 0.2 * quota + 0.01 * noise,
        ),
        (Telemetry::SchedLatencyMax, 0.5 + 2.0 * quota + noise),
    ];
    // Each host core's utilisation: a pinned run keeps core 2 busy, the others idle.
    for core in 0..HOST_CORES {
        let busy = if p == 2 && core == 2 { 95.0 } else { 3.0 };
        all.push((Telemetry::HostCoreUtil(core), busy + noise));
    }
    debug_assert_eq!(all.len(), MAX_COUNTERS);
    all.into_iter().take(n).collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let runs = args.first().copied().unwrap_or(100_000);
    let cells = args.get(1).copied().unwrap_or(100).max(2);
    let counters = args.get(2).copied().unwrap_or(2).clamp(2, MAX_COUNTERS);
    // $ISOLAB_BENCH_STORE keeps the store between runs (made once for these
    // arguments, then only read), so that a profiler sees the report alone.
    let kept = std::env::var_os("ISOLAB_BENCH_STORE").map(std::path::PathBuf::from);
    let dir = std::env::temp_dir().join(format!("isolab-bench-report-{}", std::process::id()));
    let db = match &kept {
        Some(path) => path.clone(),
        None => {
            std::fs::create_dir_all(&dir)?;
            dir.join("bench.db")
        }
    };
    let reuse = kept.is_some() && db.exists();
    let mut store = Store::open(&db)?;
    let id = if reuse {
        store.resolve("bench")?
    } else {
        fill(&mut store, runs, cells, counters)?
    };
    let t0 = Instant::now();
    let data = ExperimentData::load(&store, id)?;
    let load = t0.elapsed();
    // What the store holds (a kept store was made with the arguments of its first run).
    let (runs, cells) = (data.runs.len(), data.cells.len());
    let counters = data.runs.first().map_or(0, |r| r.telemetry.len());
    let options = SummaryOptions {
        baseline: vec![("placement".into(), "shared".into())],
        primary: Default::default(),
        all_metrics: false,
        max_repetitions: None,
    };
    let t1 = Instant::now();
    let analysis = analyse(&data, options, &CompareOptions::default());
    let analyse_time = t1.elapsed();
    let t2 = Instant::now();
    let html = isolab_report::html::html(&data, &analysis);
    let render = t2.elapsed();
    println!(
        "report over {runs} runs in {cells} cells, {counters} counters a run ({} compared points, {} attributions): load {:.3} s, analyse {:.3} s, render {:.3} s ({} KiB), total {:.3} s",
        analysis.comparisons.iter().map(|c| c.points.len()).sum::<usize>(),
        analysis
            .comparisons
            .iter()
            .map(|c| c.attributions.len())
            .sum::<usize>(),
        load.as_secs_f64(),
        analyse_time.as_secs_f64(),
        render.as_secs_f64(),
        html.len() / 1024,
        (load + analyse_time + render).as_secs_f64()
    );
    if let Some(path) = std::env::var_os("ISOLAB_BENCH_HTML") {
        std::fs::write(path, &html)?;
    }
    if kept.is_none() {
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}

/// Stores the benchmark's experiment: `runs` runs over `cells` cells, each with
/// `counters` counters.
fn fill(
    store: &mut Store,
    runs: usize,
    cells: usize,
    counters: usize,
) -> Result<isolab_store::ExperimentId, Box<dyn std::error::Error>> {
    let placements = ["shared", "quota", "pinned", "shared2"];
    let new_cells: Vec<NewCell> = (0..cells)
        .map(|i| {
            let levels = vec![
                ("placement".to_string(), placements[i % 4].to_string()),
                ("workload".to_string(), format!("w{}", i / 4)),
            ];
            NewCell {
                index: i as u32,
                key: levels
                    .iter()
                    .map(|(f, l)| format!("{f}={l}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                levels,
            }
        })
        .collect();
    let spec = "[experiment]\nname = \"bench\"\nbaseline = { placement = \"shared\" }\n[matrix]\nplacement = [\"shared\", \"quota\", \"pinned\", \"shared2\"]\nworkload = [\"sysbench-cpu\"]\n";
    let id = store.create_experiment(&NewExperiment {
        name: "bench".into(),
        spec_toml: spec.into(),
        spec_path: None,
        seed: 1,
        isolab_version: "bench".into(),
        created_at: SystemTime::now(),
        cells: new_cells,
        environment: vec![("kernel".into(), "bench".into())],
    })?;
    let cell_ids: Vec<i64> = store.cells(id)?.iter().map(|c| c.id).collect();
    let t = Instant::now();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for r in 0..runs {
        let cell = r % cells;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let noise = (x % 1000) as f64 / 1000.0;
        let value = 1000.0 * (1.0 + 0.02 * (cell % 4) as f64) + 20.0 * noise;
        store.insert_run(&NewRun {
            cell: cell_ids[cell],
            repetition: (r / cells) as u32 + 1,
            warmup: false,
            round: (r / cells) as u32,
            status: RunStatus::Ok,
            exit_code: Some(0),
            started_at: SystemTime::now(),
            wall: Duration::from_millis(10),
            stdout: String::new(),
            stderr: String::new(),
            error: None,
            limits: serde_json::json!({ "summary": "no quota" }),
            metrics: vec![MetricValue {
                name: "events_per_second".into(),
                unit: "events/s".into(),
                direction: Direction::Higher,
                value,
            }],
            telemetry: telemetry(counters, cell % 4, noise),
            series: vec![],
            intervals: vec![],
            notes: vec![],
        })?;
    }
    eprintln!(
        "stored {runs} runs in {} cells in {:.1} s (setup, not measured)",
        cells,
        t.elapsed().as_secs_f64()
    );

    Ok(id)
}
