//! A whole experiment without root: a spec parsed by the real parser, the real
//! runner, the real platforms (the `host` platform and its instance supervisor) on
//! a fake cgroupfs with a scripted launcher, and a real store in a temporary
//! directory. Only the processes and the kernel are fake.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use isolab_lab::platform::{Drivers, ExitKind, IsolabConfig};
use isolab_lab::runner::{Outcome, Runner, RunnerConfig, Silent};
use isolab_lab::testing::{FakeCgroupfs, FakeLauncher, Scripted};
use isolab_lab::{ExperimentSpec, HostFacts, Interrupt, Source, Supervisor, SupervisorConfig};
use isolab_store::{CellRecord, ExperimentStatus, RunRecord, Store};

/// sysbench cpu's report, with `events_per_second`.
fn sysbench(events_per_second: f64) -> Scripted {
    Scripted::success(
        format!(
            "sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)\n\nCPU speed:\n    events per second: {events_per_second:.2}\n\nGeneral statistics:\n    total time:                          10.0001s\n    total number of events:              10000\n\nLatency (ms):\n         min:                                    1.00\n         avg:                                    1.00\n         max:                                    1.00\n         95th percentile:                        1.00\n         sum:                                  10000.00\n\nThreads fairness:\n    events (avg/stddev):           10000.0000/0.00\n    execution time (avg/stddev):   10.0000/0.00\n\n"
        ),
        WALL,
    )
}

/// How long every scripted sysbench "runs" (no test waits for it).
const WALL: Duration = Duration::from_secs(10);

/// ±1% around `mean`, in a fixed order.
fn around(mean: f64) -> Vec<Scripted> {
    [0.0, 0.01, -0.01, 0.005, -0.005, 0.0075, -0.0075]
        .iter()
        .map(|d| sysbench(mean * (1.0 + d)))
        .collect()
}

fn metric(run: &RunRecord) -> f64 {
    run.metrics
        .iter()
        .find(|m| m.name == "events_per_second")
        .unwrap_or_else(|| panic!("no events_per_second in {:?}", run.metrics))
        .value
}

/// An experiment that ran, as stored.
struct Ran {
    outcome: Outcome,
    store: Store,
    cells: Vec<CellRecord>,
    runs: Vec<RunRecord>,
}

/// A command that would run for an hour.
fn hangs() -> Scripted {
    Scripted::success("", Duration::from_secs(3600))
}

/// The fake host: its cgroupfs, /proc and working directories, and a store.
struct Lab {
    cgroupfs: tempfile::TempDir,
    proc_root: tempfile::TempDir,
    work: tempfile::TempDir,
    store_dir: tempfile::TempDir,
}

impl Lab {
    fn new() -> Lab {
        let dir = || tempfile::tempdir().unwrap();
        Lab {
            cgroupfs: dir(),
            proc_root: dir(),
            work: dir(),
            store_dir: dir(),
        }
    }

    /// Runs a spec of sysbench cpu on the host, with the lines `experiment` and
    /// `matrix` in its tables, on the real platforms with `launcher` and a fake
    /// cgroupfs, into a store on disk; returns what the store, opened again, holds.
    fn run(&self, experiment: &str, matrix: &str, launcher: Arc<FakeLauncher>) -> Ran {
        let spec = format!(
            "[experiment]\nseed = 7\nduration = \"10s\"\n{experiment}\n[matrix]\nplatform = [\"host\"]\nworkload = [\"sysbench-cpu\"]\n{matrix}"
        );
        let host = Supervisor::with_launcher(
            SupervisorConfig {
                hierarchy: FakeCgroupfs::create(self.cgroupfs.path()).unwrap(),
                proc_root: self.proc_root.path().to_path_buf(),
                cgroup_base: PathBuf::from("isolab"),
                sample_interval: Duration::from_millis(100),
                probe: None,
            },
            launcher,
        );
        let platforms = Drivers::new(
            host,
            IsolabConfig {
                program: PathBuf::from("isolab-runtime"),
                state_dir: self.work.path().join("runtime-state"),
                user_images: None,
            },
        );
        let spec = ExperimentSpec::parse(
            Source::new("fake.toml", spec.as_str()),
            &HostFacts {
                cpus: "0-3".parse().unwrap(),
                storage: Some(isolab_lab::spec::StorageSupport {
                    device_mapper: true,
                    btrfs: true,
                }),
            },
        )
        .unwrap();
        let path = self.store_dir.path().join("lab.db");
        let mut store = Store::open(&path).unwrap();
        let interrupt = Interrupt::new().unwrap();
        let outcome = Runner::new(
            &platforms,
            &mut store,
            &mut Silent,
            &interrupt,
            RunnerConfig {
                workdir_base: self.work.path().join("runs"),
                keep_workdirs: false,
                cpus: "0-3".parse().unwrap(),
                topology: isolab_lab::topology::Topology::flat(&"0-3".parse().unwrap()),
                assets: Default::default(),
                storage_host: std::sync::Arc::new(isolab_lab::storage::SystemStorageHost),
            },
        )
        .start(&spec, vec![])
        .unwrap();
        // The experiment's scope cgroup goes with the platforms.
        drop(platforms);
        drop(store);
        let store = Store::open(&path).unwrap();
        Ran {
            cells: store.cells(outcome.experiment).unwrap(),
            runs: store.runs(outcome.experiment).unwrap(),
            outcome,
            store,
        }
    }

    /// Whatever is left: cgroups in the fake tree, working directories.
    fn leftovers(&self) -> (Vec<PathBuf>, usize) {
        let workdirs = std::fs::read_dir(self.work.path().join("runs")).map_or(0, |d| d.count());
        (FakeCgroupfs::cgroups(self.cgroupfs.path()), workdirs)
    }
}

#[test]
fn a_whole_experiment_runs_through_the_fake_launcher_without_root() {
    // One cpu (medium) does 1000 events/s, two cpus (large) 10% fewer.
    let launcher = Arc::new(
        FakeLauncher::new()
            .on("--threads=1 ", around(1000.0))
            .on("--threads=2 ", around(900.0)),
    );
    let lab = Lab::new();
    let Ran { outcome, cells, runs, .. } = lab.run(
        "name = \"fake-launcher\"\nrepetitions = { warmup = 1, min = 3, max = 30, target_cv = 0.05 }\nbaseline = { shape = \"medium\" }\n",
        "shape = [\"medium\", \"large\"]\nplacement = [\"quota\", \"pinned\"]\nexclude = [{ shape = \"large\", placement = \"pinned\" }]\n",
        launcher.clone(),
    );

    assert_eq!(outcome.status, ExperimentStatus::Complete);
    assert_eq!(outcome.failed_cells, 0);
    let keys: Vec<&str> = cells.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "platform=host shape=medium placement=quota workload=sysbench-cpu",
            "platform=host shape=medium placement=pinned workload=sysbench-cpu",
            "platform=host shape=large placement=quota workload=sysbench-cpu",
        ]
    );
    let of =
        |i: usize| -> Vec<&RunRecord> { runs.iter().filter(|r| r.cell == cells[i].id).collect() };
    let counted = |i: usize| of(i).into_iter().filter(|r| r.is_counted()).count();

    // Runs per cell: one warm-up each; the cell with a comparison runs until the
    // comparison is decided, the other stops at `min` on its CV.
    for (i, cell) in cells.iter().enumerate() {
        assert_eq!(of(i).iter().filter(|r| r.warmup).count(), 1, "{}", cell.key);
        assert!(of(i).iter().all(|r| r.status == isolab_store::RunStatus::Ok
            && r.exit_code == Some(0)
            && r.error.is_none()));
    }
    assert_eq!((counted(0), counted(1), counted(2)), (15, 3, 15));
    assert_eq!(outcome.runs, 15 + 3 + 15 + 3);

    // The runner's stop reasons and verdicts.
    let reason = |i: usize| cells[i].stop_reason.clone().unwrap();
    assert_eq!(
        reason(0),
        "decided: all 1 comparisons (1 worse, 0 better, 0 ≈) after 15 runs"
    );
    assert!(
        reason(1).starts_with("stable: CV of events_per_second 0.50% ≤ target 5.00% after 3 runs"),
        "{}",
        reason(1)
    );
    assert_eq!(
        reason(2),
        "decided: worse against the baseline after 15 runs"
    );

    // The metric parsed from the scripted output: 1000 events/s ±1% on one cpu,
    // 10% fewer on two.
    let mean = |i: usize| {
        let v: Vec<f64> = of(i)
            .into_iter()
            .filter(|r| r.is_counted())
            .map(metric)
            .collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    for (i, centre) in [(0, 1000.0), (1, 1000.0), (2, 900.0)] {
        for r in of(i) {
            let v = metric(r);
            assert!(
                (v / centre - 1.0).abs() <= 0.0101,
                "{} ran {v}",
                cells[i].key
            );
        }
    }
    let ratio = mean(2) / mean(0);
    assert!((ratio - 0.9).abs() < 0.005, "large/medium = {ratio}");

    // Telemetry from the instance: the scripted wall time, and the cgroup's
    // counters read from the fake cgroupfs.
    for r in &runs {
        assert_eq!(r.wall, WALL);
        assert_eq!(r.telemetry.get_named("wall_s"), Some(WALL.as_secs_f64()));
        assert_eq!(r.telemetry.get_named("cpu_usage_s"), Some(0.0));
        assert!(r.notes.is_empty(), "{:?}", r.notes);
    }

    // The limits, written to the fake cgroupfs and read back.
    for r in &runs {
        assert_eq!(r.limits["applied"], r.limits["requested"], "{}", r.limits);
    }
    let applied = |i: usize| of(i)[0].limits["applied"].clone();
    assert_eq!(applied(0)["memory_max"], 4u64 << 30);
    assert_eq!(applied(0)["cpu"]["quota"]["nanos"], 100_000_000);
    assert_eq!(applied(0)["cpuset"], serde_json::Value::Null);
    assert_eq!(applied(1)["cpu"], serde_json::Value::Null);
    let pinned = applied(1)["cpuset"].as_str().unwrap().to_owned();
    assert_eq!(
        pinned.parse::<isolab_cgroups::IdSet>().unwrap().len(),
        1,
        "{pinned}"
    );
    assert_eq!(applied(2)["memory_max"], 8u64 << 30);
    assert_eq!(applied(2)["cpu"]["quota"]["nanos"], 200_000_000);

    // Every command ran counted in its own instance's cgroup of the experiment's
    // scope, with the shape's threads.
    let launched = launcher.launched();
    assert_eq!(launched.len(), runs.len());
    let scope = format!(
        "isolab/exp{}-pid{}/",
        outcome.experiment,
        std::process::id()
    );
    for l in &launched {
        assert_eq!((l.log.as_str(), l.count), ("command", true));
        let cgroup = l.cgroup.as_ref().unwrap().to_str().unwrap().to_owned();
        let cell = cgroup
            .strip_prefix(&scope)
            .and_then(|rest| rest.strip_prefix('c'))
            .and_then(|rest| rest.split('-').next())
            .unwrap_or_else(|| panic!("{cgroup} is not a run of {scope}"));
        let threads = if cell == "2" {
            "--threads=2"
        } else {
            "--threads=1"
        };
        assert!(
            l.argv.iter().any(|a| a == threads),
            "{cgroup}: {:?}",
            l.argv
        );
    }

    // Nothing is left: no cgroup in the fake tree, no working directory.
    assert_eq!(lab.leftovers(), (Vec::new(), 0));
}

#[test]
fn failed_and_timed_out_commands_are_recorded_and_leave_nothing() {
    // One cpu: sysbench fails at once; two cpus: it runs past its timeout (4 ×
    // duration + 120 s) and its instance is killed.
    let launcher = Arc::new(
        FakeLauncher::new()
            .on(
                "--threads=1 ",
                [Scripted {
                    exit: ExitKind::Code(1),
                    stdout: String::new(),
                    stderr: "FATAL: boom\n".into(),
                    wall: Duration::from_millis(5),
                }],
            )
            .on("--threads=2 ", [hangs()]),
    );
    let lab = Lab::new();
    let Ran { outcome, store, cells, runs } = lab.run(
        "name = \"fake-failures\"\nrepetitions = { warmup = 0, min = 2, max = 3, target_cv = 0.05 }\n",
        "shape = [\"medium\", \"large\"]\nplacement = [\"quota\"]\n",
        launcher.clone(),
    );
    // One counted failure fails a cell; the experiment itself completes.
    assert_eq!(outcome.status, ExperimentStatus::Complete);
    assert_eq!((outcome.runs, outcome.failed_cells), (2, 2));
    let reasons: Vec<String> = cells
        .iter()
        .map(|c| c.stop_reason.clone().unwrap())
        .collect();
    assert_eq!(
        reasons,
        [
            "failed: counted run 1: the command ended with exit status 1: cannot parse the output of sysbench-cpu: sysbench reported an error: FATAL: boom",
            "failed: counted run 1: the command ran longer than its timeout of 160s and was killed",
        ]
    );
    let run_of = |i: usize| runs.iter().find(|r| r.cell == cells[i].id).unwrap();
    let (failed, timed_out) = (run_of(0), run_of(1));
    assert_eq!(failed.status, isolab_store::RunStatus::Failed);
    assert_eq!(failed.exit_code, Some(1));
    let (_, stderr) = store.run_logs(failed.id).unwrap();
    assert_eq!(stderr, "FATAL: boom\n");
    assert_eq!(timed_out.status, isolab_store::RunStatus::Failed);
    assert_eq!(timed_out.exit_code, None);
    // The killed command's cgroup was emptied through the (fake) kernel and
    // removed with everything else.
    assert_eq!(lab.leftovers(), (Vec::new(), 0));
}

#[test]
fn neighbours_start_in_cgroups_of_their_own_and_are_stopped_after_the_subject() {
    // The subject's sysbench, and two stress-ng cpu neighbours that would run
    // for an hour: they are killed once the subject is done.
    let launcher = Arc::new(
        FakeLauncher::new()
            .on("--threads=1 ", around(1000.0))
            .on("stress-ng", [hangs()]),
    );
    let lab = Lab::new();
    let Ran { outcome, cells, runs, .. } = lab.run(
        "name = \"fake-neighbours\"\nrepetitions = { warmup = 0, min = 2, max = 2, target_cv = 0.05 }\n",
        "shape = [\"medium\"]\nplacement = [\"pinned\"]\nneighbour = [\"none\", \"cpu*2\"]\n",
        launcher.clone(),
    );
    assert_eq!(
        (outcome.status, outcome.runs),
        (ExperimentStatus::Complete, 4)
    );
    assert!(runs.iter().all(|r| r.is_counted() && r.notes.is_empty()));
    // The runs with neighbours say how many ran, next to the subject and not in
    // containers; the others say nothing about neighbours.
    for r in &runs {
        let with = r.cell == cells[1].id;
        let neighbours = r.telemetry.get_named("neighbours");
        assert_eq!(neighbours, with.then_some(2.0), "{:?}", r.telemetry);
        if with {
            assert_eq!(r.telemetry.get_named("neighbours_in_containers"), Some(0.0));
            assert_eq!(r.telemetry.get_named("neighbours_cpu_s"), Some(0.0));
        }
    }
    // In each run with neighbours: both instances, each in its own cgroup next to
    // the subject's, started before the subject's command.
    let launched = launcher.launched();
    let scope = format!("isolab/exp{}-pid{}", outcome.experiment, std::process::id());
    for run in ["c1-r1", "c1-r2"] {
        let at = |cgroup: String| {
            launched
                .iter()
                .position(|l| l.cgroup == Some(PathBuf::from(&cgroup)))
                .unwrap_or_else(|| panic!("nothing ran in {cgroup}"))
        };
        let subject = at(format!("{scope}/{run}"));
        for i in 0..2 {
            let n = at(format!("{scope}/{run}-nb{i}"));
            assert!(n < subject, "neighbour {i} of {run} after the subject");
            assert_eq!(launched[n].log, format!("neighbour{i}"));
            assert_eq!(launched[n].argv[..2], ["stress-ng", "--cpu"]);
        }
    }
    assert_eq!(launched.len(), 2 + 2 * 3);
    // The neighbours, still "running", were killed through their cgroups, which
    // are gone with everything else.
    assert_eq!(lab.leftovers(), (Vec::new(), 0));
}
