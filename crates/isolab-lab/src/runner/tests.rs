//! The runner against a fake platform and an in-memory store: no processes, no root.

use std::collections::VecDeque;
use std::sync::Mutex;

use isolab_cgroups::Limits;

use super::*;
use crate::platform::{Execution, ExitKind, Job, PlatformError};
use crate::spec::{HostFacts, Source};

/// Answers every job with a sysbench-like output whose events/s come from a queue
/// (or a constant), and can trigger the interrupt at the n-th job.
struct FakeExecutor {
    values: Mutex<VecDeque<f64>>,
    constant: f64,
    jobs: Mutex<Vec<Job>>,
    interrupt_at: Option<usize>,
    fail_cell: Option<&'static str>,
    /// Cells (by the `/cN-` of their job names) whose subject runs past its timeout.
    time_out_cell: Vec<String>,
    /// Cells (by the `/cN-` of their job names) whose value is scaled, and the factor.
    scale_cell: Vec<(&'static str, f64)>,
    /// Relative noise added to every value (a fixed pseudo-random sequence).
    noise: f64,
}

impl FakeExecutor {
    fn constant(v: f64) -> Self {
        FakeExecutor {
            values: Mutex::new(VecDeque::new()),
            constant: v,
            jobs: Mutex::new(Vec::new()),
            interrupt_at: None,
            fail_cell: None,
            time_out_cell: Vec::new(),
            scale_cell: Vec::new(),
            noise: 0.0,
        }
    }
}

fn sysbench_output(events_per_second: f64) -> String {
    format!(
        "sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)\n\nCPU speed:\n    events per second: {events_per_second:.2}\n\nGeneral statistics:\n    total time:                          1.0001s\n    total number of events:              100\n\nLatency (ms):\n         min:                                    1.00\n         avg:                                    1.00\n         max:                                    1.00\n         95th percentile:                        1.00\n         sum:                                  100.00\n\nThreads fairness:\n    events (avg/stddev):           100.0000/0.00\n    execution time (avg/stddev):   1.0000/0.00\n\n"
    )
}

impl Executor for FakeExecutor {
    fn execute(&self, job: &Job, interrupt: &Interrupt) -> Result<Execution, PlatformError> {
        let n = self.jobs.lock().unwrap().len();
        self.jobs.lock().unwrap().push(job.clone());
        if self.interrupt_at == Some(n) {
            interrupt.trigger();
            return Err(PlatformError::Interrupted);
        }
        let failing = self.fail_cell.is_some_and(|c| job.name.contains(c));
        if self
            .time_out_cell
            .iter()
            .any(|c| job.name.contains(c.as_str()))
        {
            return Err(PlatformError::TimedOut(job.timeout));
        }
        let scale = self
            .scale_cell
            .iter()
            .find(|(c, _)| job.name.contains(c))
            .map_or(1.0, |(_, f)| *f);
        // A fixed, well-spread sequence in [-1, 1] (Weyl sequence of the job number).
        let jitter = ((n as f64 * 0.618_033_988_75).fract() * 2.0 - 1.0) * self.noise;
        let v = self
            .values
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(self.constant)
            * scale
            * (1.0 + jitter);
        Ok(Execution {
            exit: if failing {
                ExitKind::Code(1)
            } else {
                ExitKind::Code(0)
            },
            stdout: sysbench_output(v),
            stderr: String::new(),
            wall: Duration::from_millis(10),
            // Instances of one run side by side: the same start.
            started: *FAKE_START.get_or_init(std::time::Instant::now),
            limits_applied: job.limits.clone(),
            neighbour_limits: None,
            telemetry: [(isolab_store::Telemetry::CpuUsage, 0.01)]
                .into_iter()
                .collect(),
            series: Vec::new(),
            notes: Vec::new(),
        })
    }

    fn gc(&self) -> Result<Vec<String>, PlatformError> {
        Ok(Vec::new())
    }
}

fn spec(reps: &str, placements: &str) -> ExperimentSpec {
    spec_of(&format!(
        "[experiment]\nname = \"t\"\nseed = 7\nduration = \"1s\"\nrepetitions = {reps}\n[matrix]\nshape = [\"medium\"]\nplacement = {placements}\nworkload = [\"sysbench-cpu\"]\n"
    ))
}

/// The spec `text` on a host of 2 cpus.
fn spec_of(text: &str) -> ExperimentSpec {
    let host = HostFacts {
        cpus: "0-1".parse().unwrap(),
        storage: Some(crate::spec::StorageSupport {
            device_mapper: true,
            btrfs: true,
        }),
    };
    ExperimentSpec::parse(Source::new("t.toml", text), &host).unwrap()
}

/// Starts `spec` on `platform` into `store`, with working directories under `dir`.
fn start(platform: &FakeExecutor, store: &mut Store, spec: &ExperimentSpec, dir: &Path) -> Outcome {
    let interrupt = Interrupt::new().unwrap();
    Runner::new(platform, store, &mut Silent, &interrupt, config(dir))
        .start(spec, vec![])
        .unwrap()
}

fn config(dir: &Path) -> RunnerConfig {
    RunnerConfig {
        workdir_base: dir.to_path_buf(),
        keep_workdirs: false,
        cpus: "0-1".parse().unwrap(),
        topology: crate::topology::Topology::flat(&"0-1".parse().unwrap()),
        assets: Default::default(),
        storage_host: std::sync::Arc::new(crate::storage::SystemStorageHost),
    }
}

#[test]
fn stable_cells_stop_at_min_and_warmups_are_not_counted() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(
        "{ warmup = 1, min = 3, max = 10, target_cv = 0.05 }",
        "[\"shared\", \"quota\", \"pinned\"]",
    );
    let platform = FakeExecutor::constant(1000.0);
    let mut store = Store::open_in_memory().unwrap();
    let outcome = start(&platform, &mut store, &spec, dir.path());
    assert_eq!(outcome.status, ExperimentStatus::Complete);
    // Every cell is compared with the baseline (placement = shared): none stops for
    // its CV, and none before the 6 rounds at which the paired test can decide; the
    // identical cells are then equivalent.
    assert_eq!(outcome.runs, 3 * (1 + 6));
    let runs = store.runs(outcome.experiment).unwrap();
    assert_eq!(runs.iter().filter(|r| r.warmup).count(), 3);
    assert_eq!(runs.iter().filter(|r| !r.warmup).count(), 18);
    for cell in store.cells(outcome.experiment).unwrap() {
        assert!(
            cell.stop_reason
                .as_deref()
                .unwrap()
                .starts_with("decided: "),
            "{cell:?}"
        );
    }
    // The limits were stored with each run; quota cells asked for 1 cpu of quota.
    let quota_job = platform
        .jobs
        .lock()
        .unwrap()
        .iter()
        .find(|j| j.limits.cpu.is_some())
        .cloned()
        .unwrap();
    assert_eq!(
        quota_job.limits.cpu.unwrap().quota,
        Duration::from_millis(100)
    );
    let pinned_job = platform
        .jobs
        .lock()
        .unwrap()
        .iter()
        .find(|j| j.limits.cpuset.is_some())
        .cloned()
        .unwrap();
    assert_eq!(pinned_job.limits.cpuset.unwrap().to_string(), "1");
    // Working directories are removed.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn compared_cells_stop_once_decided() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(
        "{ warmup = 0, min = 3, max = 30, target_cv = 0.05 }",
        "[\"shared\", \"quota\", \"pinned\"]",
    );
    // An injected effect: quota does 10% fewer events/s; pinned is the baseline's
    // equal; every run ±1% noise.
    let mut platform = FakeExecutor::constant(1000.0);
    platform.scale_cell = vec![("/c1-", 0.9)];
    platform.noise = 0.01;
    let mut store = Store::open_in_memory().unwrap();
    let outcome = start(&platform, &mut store, &spec, dir.path());
    let cells = store.cells(outcome.experiment).unwrap();
    let reason = |i: usize| cells[i].stop_reason.clone().unwrap();
    let runs = store.runs(outcome.experiment).unwrap();
    let n = |i: usize| runs.iter().filter(|r| r.cell == cells[i].id).count();
    // The first round at which the signed-rank test can pass the interim level
    // 0.001: 2/2¹¹.
    assert!(
        reason(1).starts_with("decided: worse against the baseline after 11 runs"),
        "{}",
        reason(1)
    );
    assert!(reason(2).starts_with("decided: ≈"), "{}", reason(2));
    assert!(
        reason(0).starts_with("decided: all 2 comparisons (1 worse, 0 better, 1 ≈)"),
        "{}",
        reason(0)
    );
    assert!(n(0) < 30 && n(2) <= n(0), "{} {} {}", n(0), n(1), n(2));
    assert_eq!(n(1), 11);
}

/// `[experiment] noise` is the stopping rule's Δ: a 1.5% slowdown is `≈` at the default
/// 2% and worse at 0.5%, and the runner stops the cell on that verdict.
#[test]
fn the_specs_noise_decides_when_a_compared_cell_stops() {
    let reason = |noise: &str| {
        let dir = tempfile::tempdir().unwrap();
        let spec = spec_of(&format!(
            "[experiment]\nname = \"t\"\nseed = 7\nduration = \"1s\"\n{noise}\nrepetitions = {{ warmup = 0, min = 3, max = 40, target_cv = 0.05 }}\n[matrix]\nshape = [\"medium\"]\nplacement = [\"shared\", \"quota\"]\nworkload = [\"sysbench-cpu\"]\n"
        ));
        let mut platform = FakeExecutor::constant(1000.0);
        platform.scale_cell = vec![("/c1-", 0.985)];
        platform.noise = 0.002;
        let mut store = Store::open_in_memory().unwrap();
        let outcome = start(&platform, &mut store, &spec, dir.path());
        store.cells(outcome.experiment).unwrap()[1]
            .stop_reason
            .clone()
            .unwrap()
    };
    let default = reason("");
    assert!(
        default.starts_with("decided: ≈ against the baseline"),
        "{default}"
    );
    let fine = reason("noise = 0.005");
    assert!(
        fine.starts_with("decided: worse against the baseline"),
        "{fine}"
    );
}

#[test]
fn comparisons_follow_the_baseline() {
    let s = spec(
        "{ warmup = 0, min = 3, max = 3, target_cv = 0.05 }",
        "[\"shared\", \"quota\", \"pinned\"]",
    );
    let c = comparisons(&s);
    let pairs: Vec<(usize, usize, usize)> = c.iter().map(|c| (c.base, c.other, c.points)).collect();
    assert_eq!(pairs, vec![(0, 1, 1), (0, 2, 1)]);
}

#[test]
fn noisy_cells_run_until_max_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(
        "{ warmup = 0, min = 2, max = 4, target_cv = 0.01 }",
        "[\"shared\"]",
    );
    let platform = FakeExecutor::constant(0.0);
    platform
        .values
        .lock()
        .unwrap()
        .extend([100.0, 200.0, 100.0, 200.0, 100.0]);
    let mut store = Store::open_in_memory().unwrap();
    let outcome = start(&platform, &mut store, &spec, dir.path());
    assert_eq!(outcome.runs, 4);
    let cells = store.cells(outcome.experiment).unwrap();
    assert!(
        cells[0]
            .stop_reason
            .as_deref()
            .unwrap()
            .starts_with("max: 4 runs reached"),
        "{:?}",
        cells[0]
    );
}

#[test]
fn rounds_are_shuffled_reproducibly() {
    let order = |seed_spec: &ExperimentSpec| {
        let dir = tempfile::tempdir().unwrap();
        let platform = FakeExecutor::constant(1000.0);
        let mut store = Store::open_in_memory().unwrap();
        start(&platform, &mut store, seed_spec, dir.path());
        let jobs = platform.jobs.lock().unwrap();
        jobs.iter()
            .map(|j| j.name.rsplit('/').next().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let s = spec(
        "{ warmup = 0, min = 4, max = 4, target_cv = 0.05 }",
        "[\"shared\", \"quota\", \"pinned\"]",
    );
    let a = order(&s);
    assert_eq!(a, order(&s), "same seed, same order");
    // Every round holds every cell once.
    for round in a.chunks(3) {
        let mut cells: Vec<&str> = round.iter().map(|t| t.split('-').next().unwrap()).collect();
        cells.sort();
        assert_eq!(cells, vec!["c0", "c1", "c2"]);
    }
    // And the rounds are not all in matrix order.
    assert!(
        a.chunks(3)
            .any(|r| r[0] != "c0-r1" && !r[0].starts_with("c0")),
        "{a:?}"
    );
}

#[test]
fn interruption_is_recorded_and_resume_completes_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(
        "{ warmup = 1, min = 3, max = 3, target_cv = 0.05 }",
        "[\"shared\", \"quota\"]",
    );
    let mut platform = FakeExecutor::constant(1000.0);
    platform.interrupt_at = Some(5);
    let mut store = Store::open_in_memory().unwrap();
    let first = start(&platform, &mut store, &spec, dir.path());
    assert_eq!(first.status, ExperimentStatus::Interrupted);
    assert_eq!(first.runs, 5);
    assert_eq!(store.interruptions(first.experiment).unwrap().len(), 1);
    assert_eq!(
        store.experiment(first.experiment).unwrap().status,
        ExperimentStatus::Interrupted
    );

    let platform = FakeExecutor::constant(1000.0);
    let interrupt = Interrupt::new().unwrap();
    let second = Runner::new(
        &platform,
        &mut store,
        &mut Silent,
        &interrupt,
        config(dir.path()),
    )
    .resume(first.experiment, &spec)
    .unwrap();
    assert_eq!(second.status, ExperimentStatus::Complete);
    assert_eq!(second.runs, 8 - 5);
    let runs = store.runs(first.experiment).unwrap();
    let mut keys: Vec<(CellId, bool, u32)> = runs
        .iter()
        .map(|r| (r.cell, r.warmup, r.repetition))
        .collect();
    let total = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), total, "no (cell, repetition) twice");
    assert_eq!(total, 2 * (1 + 3));
}

#[test]
fn a_failing_cell_stops_and_the_others_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(
        "{ warmup = 0, min = 2, max = 2, target_cv = 0.05 }",
        "[\"shared\", \"quota\"]",
    );
    let mut platform = FakeExecutor::constant(1000.0);
    platform.fail_cell = Some("/c1-");
    let mut store = Store::open_in_memory().unwrap();
    let outcome = start(&platform, &mut store, &spec, dir.path());
    assert_eq!(outcome.failed_cells, 1);
    let cells = store.cells(outcome.experiment).unwrap();
    assert!(
        cells[1]
            .stop_reason
            .as_deref()
            .unwrap()
            .starts_with("failed: counted run 1: the command ended with exit status 1"),
        "{cells:?}"
    );
    assert!(cells[0]
        .stop_reason
        .as_deref()
        .unwrap()
        .starts_with("stable"));
    let runs = store.runs(outcome.experiment).unwrap();
    assert_eq!(
        runs.iter()
            .filter(|r| r.status == RunStatus::Failed)
            .count(),
        1
    );
}

#[test]
fn limits_default_is_unlimited() {
    assert_eq!(Limits::default().cpu, None);
}

#[test]
fn instances_run_together_and_their_throughputs_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let text = "[experiment]\nname = \"t\"\nseed = 7\nduration = \"1s\"\nrepetitions = { warmup = 0, min = 2, max = 2 }\n[matrix]\nshape = [\"medium\"]\nworkload = [\"sysbench-cpu\"]\nthreads = [2]\ninstances = [1, 3]\n";
    let spec = spec_of(text);
    let platform = FakeExecutor::constant(100.0);
    let mut store = Store::open_in_memory().unwrap();
    let outcome = start(&platform, &mut store, &spec, dir.path());
    assert_eq!(outcome.status, ExperimentStatus::Complete);
    // 2 runs of the 1-instance cell, 2 runs of 3 instances each.
    let jobs = platform.jobs.lock().unwrap();
    assert_eq!(jobs.len(), 2 + 2 * 3);
    let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
    assert!(names.iter().any(|n| n.ends_with("-i2")), "{names:?}");
    // {threads} comes from the level, not from the shape.
    assert!(
        jobs[0].argv.contains(&"--threads=2".to_owned()),
        "{:?}",
        jobs[0].argv
    );
    drop(jobs);
    let cells = store.cells(outcome.experiment).unwrap();
    for run in store.runs(outcome.experiment).unwrap() {
        let cell = cells.iter().find(|c| c.id == run.cell).unwrap();
        let eps = |name: &str| run.metrics.iter().find(|m| m.name == name).map(|m| m.value);
        if cell.key.contains("instances=3") {
            assert_eq!(eps("events_per_second"), Some(300.0));
            assert_eq!(eps("events_per_second_per_instance"), Some(100.0));
        } else {
            assert_eq!(eps("events_per_second"), Some(100.0));
            assert_eq!(eps("events_per_second_per_instance"), None);
        }
    }
}

static FAKE_START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

#[test]
fn a_reservation_binds_the_subject_also_without_neighbour() {
    let dir = tempfile::tempdir().unwrap();
    let text = "[experiment]\nname = \"t\"\nseed = 7\nduration = \"1s\"\nrepetitions = { warmup = 0, min = 2, max = 2 }\n[matrix]\nshape = [\"medium\"]\nworkload = [\"sysbench-cpu\"]\nneighbour = [\"none\"]\nreservation = [\"none\", \"cpuset\"]\n";
    let spec = spec_of(text);
    let platform = FakeExecutor::constant(100.0);
    let mut store = Store::open_in_memory().unwrap();
    start(&platform, &mut store, &spec, dir.path());
    let jobs = platform.jobs.lock().unwrap();
    let bound: Vec<_> = jobs.iter().filter(|j| j.limits.cpuset.is_some()).collect();
    assert_eq!(bound.len(), 2, "the cpuset cell's runs are bound");
    assert_eq!(bound[0].limits.cpuset, Some("1".parse().unwrap()));
    assert!(jobs.iter().all(|j| j.neighbours.is_none()));
}

#[test]
fn until_decided_adds_rounds_of_two_cells_and_keeps_every_stored_run() {
    let dir = tempfile::tempdir().unwrap();
    // No baseline (threads is not a baseline factor): every cell stops on its CV.
    let text = "[experiment]\nname = \"t\"\nseed = 7\nduration = \"1s\"\nrepetitions = { warmup = 1, min = 3, max = 30, target_cv = 0.05 }\n[matrix]\nshape = [\"medium\"]\nworkload = [\"sysbench-cpu\"]\nthreads = [1, 2, 3]\n";
    let spec = spec_of(text);
    assert!(spec.baseline.is_empty());
    // Cell 2 does 10% fewer events/s; every run ±1% noise.
    let mut platform = FakeExecutor::constant(1000.0);
    platform.scale_cell = vec![("/c2-", 0.9)];
    platform.noise = 0.01;
    let mut store = Store::open_in_memory().unwrap();
    let first = start(&platform, &mut store, &spec, dir.path());
    assert_eq!(first.runs, 3 * (1 + 3), "stable after min");
    let before = store.runs(first.experiment).unwrap();
    let a2_reason = store.cells(first.experiment).unwrap()[1]
        .stop_reason
        .clone();

    let interrupt = Interrupt::new().unwrap();
    let outcome = Runner::new(
        &platform,
        &mut store,
        &mut Silent,
        &interrupt,
        config(dir.path()),
    )
    .until_decided(first.experiment, &spec, UntilDecided { a: 0, b: 2 })
    .unwrap();
    assert_eq!(outcome.status, ExperimentStatus::Complete);
    let after = store.runs(first.experiment).unwrap();
    // Stored runs are kept as they were; new ones are only added.
    assert_eq!(after[..before.len()], before[..]);
    let cells = store.cells(first.experiment).unwrap();
    let new: Vec<&isolab_store::RunRecord> = after[before.len()..].iter().collect();
    assert!(new
        .iter()
        .all(|r| r.cell == cells[0].id || r.cell == cells[2].id));
    assert!(new.iter().all(|r| !r.warmup && r.round >= 4));
    // Paired rounds: A and B run in each new round, 11 rounds decide the 10% effect.
    let n = |i: usize| {
        after
            .iter()
            .filter(|r| r.cell == cells[i].id && !r.warmup)
            .count()
    };
    assert_eq!((n(0), n(1), n(2)), (11, 3, 11));
    assert_eq!(outcome.runs, 2 * 8);
    assert_eq!(cells[1].stop_reason, a2_reason, "A2 is not touched");
    let reason = cells[2].stop_reason.clone().unwrap();
    assert!(
        reason.starts_with(
            "decided: worse (`shape=medium workload=sysbench-cpu threads=3` against `shape=medium workload=sysbench-cpu threads=1`) after 11 runs"
        ),
        "{reason}"
    );
}

/// Seed 001's DNR: beside a neighbour, a subject that runs past its timeout did not
/// report. The run is kept with status `dnr` and its reason, the cell stops, and the
/// experiment goes on and is not failed; without a neighbour the same timeout is a
/// failure.
#[test]
fn a_subject_past_its_timeout_beside_a_neighbour_did_not_report() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_of("[experiment]\nname = \"t\"\nseed = 7\nduration = \"1s\"\ntimeout = \"1m\"\nrepetitions = { warmup = 0, min = 2, max = 2 }\n[matrix]\nshape = [\"medium\"]\nworkload = [\"sysbench-cpu\"]\nplacement = [\"quota\", \"pinned\"]\nneighbour = [\"none\", \"fork*2\"]\n");
    let key = |i: usize| spec.cells[i].key();
    let dnr = (0..spec.cells.len())
        .find(|&i| key(i).contains("fork") && key(i).contains("quota"))
        .unwrap();
    let alone = (0..spec.cells.len())
        .find(|&i| key(i).contains("neighbour=none") && key(i).contains("pinned"))
        .unwrap();
    let mut platform = FakeExecutor::constant(1000.0);
    platform.time_out_cell = vec![format!("/c{dnr}-"), format!("/c{alone}-")];
    let mut store = Store::open_in_memory().unwrap();
    let outcome = start(&platform, &mut store, &spec, dir.path());
    assert_eq!(outcome.status, ExperimentStatus::Complete);
    assert_eq!(
        outcome.failed_cells, 1,
        "only the cell without neighbour failed"
    );
    let cells = store.cells(outcome.experiment).unwrap();
    let reason = |i: usize| cells[i].stop_reason.clone().unwrap_or_default();
    assert_eq!(
        reason(dnr),
        "did not report: counted run 1: beside neighbour `fork*2` the subject ran longer than its timeout of 1m and was killed"
    );
    assert!(
        reason(alone).starts_with("failed: counted run 1: the command ran longer than its timeout"),
        "{}",
        reason(alone)
    );
    let runs = store.runs(outcome.experiment).unwrap();
    let of = |i: usize| -> Vec<&isolab_store::RunRecord> {
        runs.iter().filter(|r| r.cell == cells[i].id).collect()
    };
    assert_eq!(of(dnr).len(), 1, "the cell stops at its first DNR");
    assert_eq!(of(dnr)[0].status, RunStatus::DidNotReport);
    assert!(!of(dnr)[0].is_counted());
    assert!(of(dnr)[0]
        .error
        .as_deref()
        .unwrap()
        .starts_with("did not report (DNR): beside neighbour `fork*2`"));
    assert_eq!(of(alone)[0].status, RunStatus::Failed);
    // The other cells ran to their end.
    for (i, c) in cells.iter().enumerate() {
        if i != dnr && i != alone {
            assert_eq!(of(i).len(), 2, "{}: {:?}", c.key, c.stop_reason);
        }
    }
}
