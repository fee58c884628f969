//! The results store end to end, on a file in a temporary directory.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use isolab_stats::Direction;
use isolab_store::testing::Cluster;
use isolab_store::{
    Error, ExperimentStatus, Interruption, LoadInterval, MetricValue, NewCell, NewExperiment,
    NewFleet, NewRun, RunRecord, RunStatus, Series, Store, Telemetry, TelemetryName, TelemetrySet,
    SCHEMA_VERSION,
};
use serde_json::json;

/// A time with whole milliseconds, which the store keeps exactly.
fn at(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(1_700_000_000_000 + ms)
}

fn db(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("results.db")
}

fn cell(index: u32, platform: &str, placement: &str) -> NewCell {
    NewCell {
        index,
        key: format!("platform={platform} placement={placement} workload=sysbench-cpu"),
        levels: vec![
            ("platform".into(), platform.into()),
            ("placement".into(), placement.into()),
            ("workload".into(), "sysbench-cpu".into()),
        ],
    }
}

fn experiment(name: &str, created: SystemTime) -> NewExperiment {
    NewExperiment {
        name: name.into(),
        spec_toml: format!("[experiment]\nname = \"{name}\"\n"),
        spec_path: Some(format!("/specs/{name}.toml")),
        seed: u64::MAX - 7,
        isolab_version: "0.1.0".into(),
        created_at: created,
        cells: vec![cell(0, "host", "quota"), cell(1, "isolab", "pinned")],
        environment: vec![
            ("kernel".into(), "6.18.0".into()),
            ("cpu_model".into(), "Example CPU @ 3.0GHz".into()),
            ("cgroup".into(), "v1".into()),
        ],
    }
}

fn metrics(events: f64) -> Vec<MetricValue> {
    vec![
        MetricValue {
            name: "events_per_s".into(),
            unit: "1/s".into(),
            direction: Direction::Higher,
            value: events,
        },
        MetricValue {
            name: "latency_p95".into(),
            unit: "ms".into(),
            direction: Direction::Lower,
            value: 1000.0 / events,
        },
    ]
}

/// One second of load of request `request` with `users` users: about 40 requests per user
/// and second, one in a hundred failed.
fn interval(request: &str, start_s: f64, users: f64) -> LoadInterval {
    let requests = (40.0 * users) as u64;
    LoadInterval {
        users: Some(users),
        requests,
        failures: requests / 100,
        latency_mean_ms: Some(20.0 + users),
        latency_p50_ms: Some(18.0 + users),
        latency_p90_ms: Some(30.0 + users),
        latency_p99_ms: Some(60.0 + users),
        latency_max_ms: Some(90.0 + users),
        ..LoadInterval::new(request, start_s)
    }
}

/// Two requests over five seconds of a ramp, listed by second (not in the order the store
/// returns them), the last second with nothing completed and nothing measured.
fn intervals() -> Vec<LoadInterval> {
    let mut out = Vec::new();
    for second in 0..4 {
        let users = 1.0 + f64::from(second);
        out.push(interval("login", f64::from(second), users));
        out.push(interval("home", f64::from(second), users));
    }
    out.push(LoadInterval {
        users: Some(5.0),
        ..LoadInterval::new("home", 4.0)
    });
    out
}

/// `intervals` as the store reads them back: by request, then start.
fn sorted(mut intervals: Vec<LoadInterval>) -> Vec<LoadInterval> {
    intervals.sort_by(|a, b| {
        a.request
            .cmp(&b.request)
            .then(a.start_s.total_cmp(&b.start_s))
    });
    intervals
}

fn run(cell: i64, repetition: u32, warmup: bool, status: RunStatus) -> NewRun {
    let points: Vec<(f64, f64)> = (0..1000)
        .map(|i| (f64::from(i) * 0.01, f64::from(i % 97)))
        .collect();
    NewRun {
        cell,
        repetition,
        warmup,
        round: repetition + 1,
        status,
        exit_code: Some(if status == RunStatus::Ok { 0 } else { 2 }),
        started_at: at(u64::from(repetition) * 1000),
        wall: Duration::new(10, 123_456_789),
        stdout: format!("events per second: {}\n", 1000 + repetition),
        stderr: "warning: something\n".into(),
        error: (status == RunStatus::Failed).then(|| "parser found no events".to_owned()),
        limits: json!({ "cpu": { "quota_us": 200000, "period_us": 100000 } }),
        metrics: if status == RunStatus::Ok {
            metrics(1000.0 + f64::from(repetition))
        } else {
            vec![]
        },
        telemetry: [(Telemetry::CpuUsage, 1.93), (Telemetry::NrThrottled, 12.0)]
            .into_iter()
            .collect(),
        series: vec![
            Series {
                name: "host_cpu_util".into(),
                unit: "%".into(),
                points: points.clone(),
            },
            Series {
                name: "memory_current".into(),
                unit: "B".into(),
                points: points.clone(),
            },
            Series {
                name: "io_bytes".into(),
                unit: "B".into(),
                points,
            },
        ],
        intervals: if status == RunStatus::Ok {
            intervals()
        } else {
            vec![]
        },
        notes: vec!["KVM unavailable, TCG used".into(), "second note".into()],
    }
}

/// The record `new` should read back as once stored under `id`. The struct literal is
/// exhaustive, so a field added to `RunRecord` must be added here too.
fn stored_as(id: i64, new: &NewRun) -> RunRecord {
    RunRecord {
        id,
        cell: new.cell,
        repetition: new.repetition,
        warmup: new.warmup,
        round: new.round,
        status: new.status,
        exit_code: new.exit_code,
        started_at: new.started_at,
        wall: new.wall,
        error: new.error.clone(),
        limits: new.limits.clone().into(),
        metrics: new.metrics.clone(),
        telemetry: new.telemetry.clone(),
        notes: new.notes.clone(),
    }
}

/// Where a scenario's stores live: a fresh SQLite file, or a fresh database on the test
/// binary's PostgreSQL server. Every scenario below runs on both (`on_both_backends!`).
enum Place<'c> {
    Sqlite(tempfile::TempDir),
    Postgres {
        cluster: &'c Cluster,
        database: String,
    },
}

impl Place<'_> {
    fn sqlite() -> Place<'static> {
        Place::Sqlite(tempfile::tempdir().unwrap())
    }

    fn postgres<'c>(cluster: &'c Cluster, database: &str) -> Place<'c> {
        cluster.create_database(database).unwrap();
        Place::Postgres {
            cluster,
            database: database.to_owned(),
        }
    }

    /// Opens the place's store (a second call opens a second connection to it).
    fn open(&self) -> Store {
        match self {
            Place::Sqlite(dir) => Store::open(&db(dir)).unwrap(),
            Place::Postgres { cluster, database } => {
                Store::open_location(&cluster.url(database)).unwrap()
            }
        }
    }

    /// Counts rows of a table with a plain connection, behind the store's back.
    fn count(&self, table: &str) -> i64 {
        match self {
            Place::Sqlite(dir) => {
                let conn = rusqlite::Connection::open(db(dir)).unwrap();
                conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
                    .unwrap()
            }
            Place::Postgres { cluster, database } => cluster.count(database, table).unwrap(),
        }
    }
}

/// A `#[test]` per scenario on SQLite, and one test that runs them all on one PostgreSQL
/// server of its own (started once: a server per scenario would take most of the time),
/// each scenario in a database of its own.
macro_rules! on_both_backends {
    ($($scenario:ident),* $(,)?) => {
        mod on_sqlite {
            $(
                #[test]
                fn $scenario() {
                    super::$scenario(&super::Place::sqlite());
                }
            )*
        }

        #[test]
        fn every_scenario_on_postgres() {
            let cluster = Cluster::start().unwrap();
            $(
                eprintln!("on PostgreSQL: {}", stringify!($scenario));
                $scenario(&Place::postgres(&cluster, stringify!($scenario)));
            )*
        }
    };
}

on_both_backends!(
    the_pace_of_runs_is_the_median_gap_between_starts_without_pauses,
    interval_observations_are_the_counted_runs_with_their_levels,
    a_run_with_a_repeated_or_unplaced_interval_is_not_stored,
    nan_latencies_are_stored_as_unknown_and_huge_counts_saturate,
    round_trips_a_whole_experiment,
    resuming_clears_the_finish_time,
    resolves_ids_and_names_newest_first,
    a_name_that_looks_like_an_id_still_resolves,
    a_duplicate_run_is_rejected_and_the_first_kept_whole,
    an_interruption_does_not_take_the_runs_slot,
    intervals_of_an_unknown_run_are_an_error,
    unknown_cells_and_runs_are_reported,
    an_experiment_with_duplicate_cells_is_not_created_at_all,
    a_second_store_on_the_same_file_sees_committed_runs,
    runs_read_while_runs_are_stored_are_each_whole,
    experiments_stored_in_turn_read_back_their_own_runs,
    many_runs_insert_quickly,
    telemetry_names_this_version_does_not_know_load_and_survive,
    a_fleet_records_its_job_and_one_experiment_per_host,
);

/// A store written by isolab at schema version 1 (before load intervals), kept as it was
/// written: experiment `made-by-v1` (seed 7, status complete), cells `platform=host` and
/// `platform=docker`, two counted runs each with metric `events_per_s` = 1000 plus the
/// repetition plus 100 × the cell index, telemetry `cpu_usage` 1.5, series `host_cpu_util` (0, 50), (0.1, 60),
/// a note and logs. Written through `Store` by the isolab of commit ccf2cfd, then
/// switched to a rollback journal and vacuumed with 1 KiB pages to keep the file small.
const SCHEMA_V1_STORE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/schema-v1.sqlite"
);

#[test]
fn a_store_written_at_schema_version_1_is_upgraded_with_its_runs_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    std::fs::copy(SCHEMA_V1_STORE, &path).unwrap();
    let version = |path: &Path| -> u32 {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(version(&path), 1);

    let mut store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    let id = store.resolve("made-by-v1").unwrap();
    let e = store.experiment(id).unwrap();
    assert_eq!(e.seed, 7);
    assert_eq!(e.status, ExperimentStatus::Complete);
    assert_eq!(
        store.environment(id).unwrap(),
        vec![("kernel".to_string(), "6.18.0".to_string())]
    );
    let cells = store.cells(id).unwrap();
    assert_eq!(
        cells.iter().map(|c| c.key.as_str()).collect::<Vec<_>>(),
        ["platform=host", "platform=docker"]
    );
    let runs = store.runs(id).unwrap();
    assert_eq!(runs.len(), 4);
    let values: Vec<f64> = store
        .observations(id)
        .unwrap()
        .iter()
        .map(|o| o.value)
        .collect();
    assert_eq!(values, [1001.0, 1002.0, 1101.0, 1102.0]);
    for r in &runs {
        assert!(r.is_counted());
        assert_eq!(r.telemetry.get(Telemetry::CpuUsage), Some(1.5));
        assert_eq!(r.notes, ["made by schema version 1"]);
        assert_eq!(
            store.series(r.id).unwrap()[0].points,
            [(0.0, 50.0), (0.1, 60.0)]
        );
        assert!(store
            .run_logs(r.id)
            .unwrap()
            .0
            .starts_with("events per second"));
        // Old runs have no load intervals, and that is no error.
        assert!(store.intervals(r.id).unwrap().is_empty());
    }
    assert!(store.interval_observations(id).unwrap().is_empty());

    // The upgraded store takes new runs with intervals, and keeps them after a reopen.
    let mut new = run(cells[0].id, 3, false, RunStatus::Ok);
    new.metrics.clear();
    let run_id = store.insert_run(&new).unwrap();
    drop(store);
    assert_eq!(version(&path), SCHEMA_VERSION);
    let store = Store::open(&path).unwrap();
    assert_eq!(store.intervals(run_id).unwrap(), sorted(intervals()));
    assert_eq!(store.runs(id).unwrap().len(), 5);
}

fn the_pace_of_runs_is_the_median_gap_between_starts_without_pauses(place: &Place) {
    let mut store = place.open();
    assert_eq!(store.run_pace().unwrap(), []);
    let id = store.create_experiment(&experiment("pace", at(0))).unwrap();
    let cells = store.cells(id).unwrap();
    // Interleaved: host at 0, 40, 80 s (then a pause of an hour), isolab at 20, 60 s.
    let starts = [
        (0, 1, 0),
        (1, 1, 20_000),
        (0, 2, 40_000),
        (1, 2, 60_000),
        (0, 3, 80_000),
        (1, 3, 3_680_000),
        (0, 4, 3_700_000),
    ];
    for (cell, repetition, ms) in starts {
        let mut r = run(cells[cell].id, repetition, false, RunStatus::Ok);
        r.started_at = at(ms);
        store.insert_run(&r).unwrap();
    }
    let pace = store.run_pace().unwrap();
    let platforms: Vec<&str> = pace.iter().map(|p| p.platform.as_str()).collect();
    assert_eq!(platforms, ["host", "isolab"]);
    assert!(pace.iter().all(|p| p.workload == "sysbench-cpu"));
    // host: gaps 20, 20, (the pause left out) → 20 s; isolab: 20, 20 s and 20 s
    // before the last run of the experiment.
    assert_eq!(pace[0].per_run, Duration::from_secs(20));
    assert_eq!(pace[0].runs, 2);
    assert_eq!(pace[1].per_run, Duration::from_secs(20));
    assert_eq!(pace[1].runs, 3);
}

fn interval_observations_are_the_counted_runs_with_their_levels(place: &Place) {
    let mut store = place.open();
    let new = experiment("load", at(0));
    let id = store.create_experiment(&new).unwrap();
    let cells = store.cells(id).unwrap();
    let warmup = store
        .insert_run(&run(cells[0].id, 1, true, RunStatus::Ok))
        .unwrap();
    let mut failed = run(cells[0].id, 9, false, RunStatus::Failed);
    failed.intervals = intervals();
    store.insert_run(&failed).unwrap();
    // Stored out of order: cell 1 first, repetition 2 before 1.
    let r12 = store
        .insert_run(&run(cells[1].id, 2, false, RunStatus::Ok))
        .unwrap();
    let r01 = store
        .insert_run(&run(cells[0].id, 1, false, RunStatus::Ok))
        .unwrap();
    let r02 = store
        .insert_run(&run(cells[0].id, 2, false, RunStatus::Ok))
        .unwrap();
    let rows = store.interval_observations(id).unwrap();
    let n = intervals().len();
    assert_eq!(rows.len(), 3 * n);
    let runs: Vec<i64> = rows.iter().map(|r| r.run).collect();
    let expected: Vec<i64> = [r01, r02, r12]
        .iter()
        .flat_map(|r| std::iter::repeat_n(*r, n))
        .collect();
    assert_eq!(runs, expected);
    assert!(!runs.contains(&warmup));
    assert_eq!(rows[0].cell_index, 0);
    assert_eq!(rows[0].repetition, 1);
    assert_eq!(rows[0].levels, new.cells[0].levels);
    assert_eq!(rows[2 * n].levels, new.cells[1].levels);
    assert!(rows.iter().all(|r| r.experiment == id));
    let first: Vec<LoadInterval> = rows[..n].iter().map(|r| r.interval.clone()).collect();
    assert_eq!(first, sorted(intervals()));
}

fn a_run_with_a_repeated_or_unplaced_interval_is_not_stored(place: &Place) {
    let mut store = place.open();
    let id = store.create_experiment(&experiment("bad", at(0))).unwrap();
    let cell = store.cells(id).unwrap()[0].id;

    let mut new = run(cell, 1, false, RunStatus::Ok);
    new.intervals.push(interval("home", 2.0, 9.0));
    let err = store.insert_run(&new).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Sql { .. }), "{msg}");
    assert!(
        msg.starts_with(&format!("storing run 1 of cell {cell}")),
        "{msg}"
    );
    assert!(msg.contains("request `home` at 2 s"), "{msg}");

    new.intervals = vec![interval("home", f64::NAN, 1.0)];
    let msg = store.insert_run(&new).unwrap_err().to_string();
    assert!(msg.contains("at NaN s"), "{msg}");

    // Nothing of either attempt was kept; the repetition is still free.
    assert!(store.runs(id).unwrap().is_empty());
    new.intervals = intervals();
    let stored = store.insert_run(&new).unwrap();
    assert_eq!(store.intervals(stored).unwrap().len(), intervals().len());
}

fn nan_latencies_are_stored_as_unknown_and_huge_counts_saturate(place: &Place) {
    let mut store = place.open();
    let id = store.create_experiment(&experiment("nan", at(0))).unwrap();
    let cell = store.cells(id).unwrap()[0].id;
    let mut new = run(cell, 1, false, RunStatus::Ok);
    new.intervals = vec![LoadInterval {
        users: Some(f64::NAN),
        latency_p50_ms: Some(f64::NAN),
        requests: u64::MAX,
        ..interval("home", 0.0, 1.0)
    }];
    let stored = store.insert_run(&new).unwrap();
    let back = &store.intervals(stored).unwrap()[0];
    assert_eq!(back.users, None);
    assert_eq!(back.latency_p50_ms, None);
    assert_eq!(back.latency_p99_ms, Some(61.0));
    assert_eq!(back.requests, i64::MAX as u64);
}

#[test]
fn creates_the_schema_and_reopens_without_changing_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    {
        let store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        assert_eq!(store.location(), path.display().to_string());
        assert!(store.experiments().unwrap().is_empty());
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn refuses_a_store_from_a_newer_isolab() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", SCHEMA_VERSION + 5)
        .unwrap();
    drop(conn);

    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, Error::SchemaTooNew { found, supported, .. }
        if found == SCHEMA_VERSION + 5 && supported == SCHEMA_VERSION));
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(
        msg.contains(&format!(
            "newer than this isolab supports ({SCHEMA_VERSION}): upgrade isolab"
        )),
        "{msg}"
    );
}

#[test]
fn refuses_a_file_that_is_not_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(
        &path,
        "these are not the tables you are looking for\n".repeat(100),
    )
    .unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, Error::NotAStore { .. }), "{err}");
    assert!(err.to_string().contains("notes.txt"), "{err}");
}

#[test]
fn a_missing_directory_is_an_open_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no/such/dir/results.db");
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, Error::Open { .. }), "{err}");
    assert!(err.to_string().contains("no/such/dir/results.db"), "{err}");
    assert!(std::error::Error::source(&err).is_some());
}

fn round_trips_a_whole_experiment(place: &Place) {
    let mut store = place.open();
    let new = experiment("cpu-pinning", at(0));
    let id = store.create_experiment(&new).unwrap();

    let e = store.experiment(id).unwrap();
    assert_eq!(e.id, id);
    assert_eq!(e.name, new.name);
    assert_eq!(e.spec_toml, new.spec_toml);
    assert_eq!(e.spec_path, new.spec_path);
    assert_eq!(e.seed, u64::MAX - 7);
    assert_eq!(e.isolab_version, "0.1.0");
    assert_eq!(e.created_at, at(0));
    assert_eq!(e.finished_at, None);
    assert_eq!(e.status, ExperimentStatus::Running);
    assert_eq!(store.environment(id).unwrap(), new.environment);

    let cells = store.cells(id).unwrap();
    assert_eq!(cells.len(), 2);
    for (stored, new) in cells.iter().zip(&new.cells) {
        assert_eq!(stored.index, new.index);
        assert_eq!(stored.key, new.key);
        assert_eq!(stored.levels, new.levels);
        assert_eq!(stored.stop_reason, None);
    }
    let (c0, c1) = (cells[0].id, cells[1].id);

    // A warm-up, three counted runs, one failed run.
    let inserted = [
        run(c0, 0, true, RunStatus::Ok),
        run(c0, 0, false, RunStatus::Ok),
        run(c1, 0, false, RunStatus::Ok),
        run(c0, 1, false, RunStatus::Ok),
        run(c1, 1, false, RunStatus::Failed),
    ];
    let ids: Vec<i64> = inserted
        .iter()
        .map(|r| store.insert_run(r).unwrap())
        .collect();
    let interruption = Interruption {
        experiment: id,
        cell: c1,
        repetition: 2,
        warmup: false,
        at: at(99_000),
        reason: "SIGINT".into(),
    };
    store.record_interruption(&interruption).unwrap();
    store
        .set_stop_reason(c0, "cv 0.012 <= 0.05 after 2 runs")
        .unwrap();
    store
        .set_status(id, ExperimentStatus::Interrupted, at(100_000))
        .unwrap();
    drop(store);

    // Everything is read back from the file by a new store.
    let store = place.open();
    let e = store.experiment(id).unwrap();
    assert_eq!(e.status, ExperimentStatus::Interrupted);
    assert_eq!(e.finished_at, Some(at(100_000)));
    assert_eq!(
        store.cells(id).unwrap()[0].stop_reason.as_deref(),
        Some("cv 0.012 <= 0.05 after 2 runs")
    );

    let runs = store.runs(id).unwrap();
    assert_eq!(runs.iter().map(|r| r.id).collect::<Vec<_>>(), ids);
    for (stored, new) in runs.iter().zip(&inserted) {
        assert_eq!(stored, &stored_as(stored.id, new));
        assert_eq!(
            stored.is_counted(),
            !new.warmup && new.status == RunStatus::Ok
        );

        let (stdout, stderr) = store.run_logs(stored.id).unwrap();
        assert_eq!(stdout, new.stdout);
        assert_eq!(stderr, new.stderr);
        assert_eq!(store.series(stored.id).unwrap(), new.series);
        assert_eq!(
            store.intervals(stored.id).unwrap(),
            sorted(new.intervals.clone())
        );
    }

    assert_eq!(store.interruptions(id).unwrap(), vec![interruption]);

    // Observations: counted runs only, by cell index then repetition, metrics in order.
    let obs = store.observations(id).unwrap();
    let rows: Vec<(u32, u32, &str, f64)> = obs
        .iter()
        .map(|o| (o.cell_index, o.repetition, o.metric.as_str(), o.value))
        .collect();
    assert_eq!(
        rows,
        vec![
            (0, 0, "events_per_s", 1000.0),
            (0, 0, "latency_p95", 1.0),
            (0, 1, "events_per_s", 1001.0),
            (0, 1, "latency_p95", 1000.0 / 1001.0),
            (1, 0, "events_per_s", 1000.0),
            (1, 0, "latency_p95", 1.0),
        ]
    );
    assert!(obs.iter().all(|o| o.experiment == id));
    assert_eq!(obs[0].run, ids[1]);
    assert_eq!(obs[0].levels, new.cells[0].levels);
    assert_eq!(obs[4].levels, new.cells[1].levels);
    assert_eq!(obs[0].unit, "1/s");
    assert_eq!(obs[0].direction, Direction::Higher);
    assert_eq!(obs[1].direction, Direction::Lower);

    let list = store.experiments().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].id, id);
    assert_eq!(list[0].name, "cpu-pinning");
    assert_eq!(list[0].status, ExperimentStatus::Interrupted);
    assert_eq!(list[0].created_at, at(0));
    assert_eq!(list[0].cells, 2);
    assert_eq!(list[0].runs, 3);
}

fn resuming_clears_the_finish_time(place: &Place) {
    let mut store = place.open();
    let id = store.create_experiment(&experiment("e", at(0))).unwrap();
    store
        .set_status(id, ExperimentStatus::Interrupted, at(5))
        .unwrap();
    store
        .set_status(id, ExperimentStatus::Running, at(6))
        .unwrap();
    let e = store.experiment(id).unwrap();
    assert_eq!(e.status, ExperimentStatus::Running);
    assert_eq!(e.finished_at, None);
    store
        .set_status(id, ExperimentStatus::Complete, at(7))
        .unwrap();
    assert_eq!(store.experiment(id).unwrap().finished_at, Some(at(7)));
}

fn resolves_ids_and_names_newest_first(place: &Place) {
    let mut store = place.open();
    let old = store
        .create_experiment(&experiment("pinning", at(0)))
        .unwrap();
    let other = store
        .create_experiment(&experiment("quick-start", at(1)))
        .unwrap();
    let new = store
        .create_experiment(&experiment("pinning", at(2)))
        .unwrap();

    assert_eq!(store.resolve(&old.to_string()).unwrap(), old);
    assert_eq!(store.resolve(&format!(" {other} ")).unwrap(), other);
    assert_eq!(store.resolve("pinning").unwrap(), new);
    assert_eq!(store.resolve("quick-start").unwrap(), other);

    let listed: Vec<i64> = store.experiments().unwrap().iter().map(|e| e.id).collect();
    assert_eq!(listed, vec![new, other, old]);

    let err = store.resolve("nope").unwrap_err();
    match &err {
        Error::NoSuchExperiment { requested, known } => {
            assert_eq!(requested, "nope");
            assert_eq!(known.len(), 3);
            assert_eq!(known[0], (new, "pinning".to_owned()));
        }
        other => panic!("unexpected error {other}"),
    }
    assert!(err.to_string().contains("isolab list"), "{err}");
    for err in [
        store.resolve("999").unwrap_err(),
        store.experiment(999).unwrap_err(),
        store.runs(999).unwrap_err(),
    ] {
        assert!(matches!(err, Error::NoSuchExperiment { .. }), "{err}");
    }
}

fn a_name_that_looks_like_an_id_still_resolves(place: &Place) {
    let mut store = place.open();
    let id = store.create_experiment(&experiment("2024", at(0))).unwrap();
    assert_eq!(store.resolve("2024").unwrap(), id);
}

fn a_duplicate_run_is_rejected_and_the_first_kept_whole(place: &Place) {
    let mut store = place.open();
    let id = store.create_experiment(&experiment("dup", at(0))).unwrap();
    let cells = store.cells(id).unwrap();
    let first = run(cells[0].id, 3, false, RunStatus::Ok);
    let first_id = store.insert_run(&first).unwrap();

    let tables = [
        "runs",
        "metrics",
        "telemetry",
        "series",
        "run_logs",
        "run_notes",
    ];
    let before: Vec<i64> = tables.iter().map(|t| place.count(t)).collect();

    let mut second = run(cells[0].id, 3, false, RunStatus::Ok);
    second.metrics = metrics(5.0);
    second.stdout = "second attempt".into();
    let err = store.insert_run(&second).unwrap_err();
    match &err {
        Error::DuplicateRun {
            cell,
            cell_key,
            repetition,
            warmup,
        } => {
            assert_eq!(*cell, cells[0].id);
            assert_eq!(cell_key, &cells[0].key);
            assert_eq!(*repetition, 3);
            assert!(!warmup);
        }
        other => panic!("unexpected error {other}"),
    }
    assert!(err.to_string().contains("repetition 3"), "{err}");
    assert!(err.to_string().contains(&cells[0].key), "{err}");

    // No partial rows of the second attempt anywhere.
    let after: Vec<i64> = tables.iter().map(|t| place.count(t)).collect();
    assert_eq!(before, after);
    let runs = store.runs(id).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].id, first_id);
    assert_eq!(runs[0].metrics, first.metrics);
    assert_eq!(store.run_logs(first_id).unwrap().0, first.stdout);

    // The same repetition as a warm-up, or in another cell, is a different slot.
    store
        .insert_run(&run(cells[0].id, 3, true, RunStatus::Ok))
        .unwrap();
    store
        .insert_run(&run(cells[1].id, 3, false, RunStatus::Ok))
        .unwrap();
    // The store is still usable after the rejected insert.
    assert_eq!(store.runs(id).unwrap().len(), 3);
}

fn an_interruption_does_not_take_the_runs_slot(place: &Place) {
    let mut store = place.open();
    let id = store.create_experiment(&experiment("int", at(0))).unwrap();
    let c = store.cells(id).unwrap()[0].id;
    let interruption = Interruption {
        experiment: id,
        cell: c,
        repetition: 0,
        warmup: false,
        at: at(1),
        reason: "killed".into(),
    };
    store.record_interruption(&interruption).unwrap();
    store.record_interruption(&interruption).unwrap();
    store.insert_run(&run(c, 0, false, RunStatus::Ok)).unwrap();
    assert_eq!(store.interruptions(id).unwrap().len(), 2);
    assert_eq!(store.runs(id).unwrap().len(), 1);
}

fn intervals_of_an_unknown_run_are_an_error(place: &Place) {
    let store = place.open();
    assert!(matches!(
        store.intervals(404).unwrap_err(),
        Error::NoSuchRun { run: 404 }
    ));
}

fn unknown_cells_and_runs_are_reported(place: &Place) {
    let mut store = place.open();
    let id = store.create_experiment(&experiment("x", at(0))).unwrap();
    let other = store.create_experiment(&experiment("y", at(1))).unwrap();
    let other_cell = store.cells(other).unwrap()[0].id;

    let err = store
        .insert_run(&run(12_345, 0, false, RunStatus::Ok))
        .unwrap_err();
    assert!(
        matches!(err, Error::NoSuchCell { cell: 12_345, .. }),
        "{err}"
    );
    assert!(store.runs(id).unwrap().is_empty());

    let err = store
        .record_interruption(&Interruption {
            experiment: id,
            cell: other_cell,
            repetition: 0,
            warmup: false,
            at: at(0),
            reason: "x".into(),
        })
        .unwrap_err();
    assert!(
        err.to_string().contains(&format!("in experiment {id}")),
        "{err}"
    );

    assert!(matches!(
        store.set_stop_reason(12_345, "done").unwrap_err(),
        Error::NoSuchCell { .. }
    ));
    assert!(matches!(
        store.run_logs(777).unwrap_err(),
        Error::NoSuchRun { run: 777 }
    ));
    assert!(matches!(
        store.series(777).unwrap_err(),
        Error::NoSuchRun { run: 777 }
    ));
}

fn an_experiment_with_duplicate_cells_is_not_created_at_all(place: &Place) {
    let mut store = place.open();
    let mut bad = experiment("bad", at(0));
    bad.cells.push(cell(2, "host", "quota")); // same key as cell 0
    let err = store.create_experiment(&bad).unwrap_err();
    assert!(err.to_string().contains("cell 2"), "{err}");
    assert!(store.experiments().unwrap().is_empty());
    for table in ["experiments", "environment", "cells", "cell_levels"] {
        assert_eq!(place.count(table), 0, "{table}");
    }
}

fn a_second_store_on_the_same_file_sees_committed_runs(place: &Place) {
    let mut writer = place.open();
    let reader = place.open();
    let id = writer
        .create_experiment(&experiment("live", at(0)))
        .unwrap();
    let c = writer.cells(id).unwrap()[0].id;
    writer.insert_run(&run(c, 0, false, RunStatus::Ok)).unwrap();
    assert_eq!(reader.runs(id).unwrap().len(), 1);
    assert_eq!(reader.observations(id).unwrap().len(), 2);
}

/// A reader of an experiment's runs while a runner stores more: every run it reads is
/// whole, its metrics and telemetry included, though it reads them on two connections
/// (each its own snapshot) beside each other.
fn runs_read_while_runs_are_stored_are_each_whole(place: &Place) {
    let mut writer = place.open();
    let reader = place.open();
    let id = writer
        .create_experiment(&experiment("busy", at(0)))
        .unwrap();
    let c = writer.cells(id).unwrap()[0].id;
    let stored: Vec<NewRun> = (0..40).map(|r| run(c, r, false, RunStatus::Ok)).collect();
    let stored = &stored;
    std::thread::scope(|scope| {
        let writing = scope.spawn(move || {
            for new in stored {
                writer.insert_run(new).unwrap();
            }
        });
        let mut reads = 0;
        while reads == 0 || !writing.is_finished() {
            for (k, read) in reader.runs(id).unwrap().iter().enumerate() {
                assert_eq!(*read, stored_as(read.id, &stored[k]), "read {reads}");
            }
            reads += 1;
        }
        writing.join().unwrap();
    });
    assert_eq!(reader.runs(id).unwrap().len(), stored.len());
}

/// Two experiments whose runs were stored in turn, as when two runners share a store:
/// each reads back its own runs whole and none of the other's, whether its run ids are
/// dense enough to read its metrics and telemetry by a range of ids (the other's rows
/// in the range skipped) or so spread that they are read through its runs.
fn experiments_stored_in_turn_read_back_their_own_runs(place: &Place) {
    let mut store = place.open();
    let a = store.create_experiment(&experiment("a", at(0))).unwrap();
    let b = store.create_experiment(&experiment("b", at(1))).unwrap();
    let (ca, cb) = (store.cells(a).unwrap()[0].id, store.cells(b).unwrap()[1].id);
    let mut stored: Vec<(isolab_store::ExperimentId, i64, NewRun)> = Vec::new();
    let store_run = |store: &mut Store, stored: &mut Vec<_>, experiment, new: NewRun| {
        let id = store.insert_run(&new).unwrap();
        stored.push((experiment, id, new));
    };
    let read_back_whole = |store: &Store, stored: &[(isolab_store::ExperimentId, i64, NewRun)]| {
        for e in [a, b] {
            let want: Vec<RunRecord> = stored
                .iter()
                .filter(|(of, _, _)| *of == e)
                .map(|(_, id, new)| stored_as(*id, new))
                .collect();
            assert_eq!(store.runs(e).unwrap(), want, "experiment {e}");
        }
    };
    // In turn: every other id is each one's (dense, read by a range).
    for r in 0..4 {
        store_run(&mut store, &mut stored, a, run(ca, r, false, RunStatus::Ok));
        let mut other = run(cb, r, false, RunStatus::Ok);
        other.limits = json!({ "summary": "b's" });
        other.metrics = metrics(5000.0 + f64::from(r));
        other.telemetry = [(Telemetry::CpuUsage, 7.0)].into_iter().collect();
        store_run(&mut store, &mut stored, b, other);
    }
    read_back_whole(&store, &stored);
    // Then ten of b's and one more of a's: a's five runs span 19 ids (read through its
    // runs), b's fourteen span 17.
    for r in 4..14 {
        store_run(&mut store, &mut stored, b, run(cb, r, false, RunStatus::Ok));
    }
    store_run(
        &mut store,
        &mut stored,
        a,
        run(ca, 4, false, RunStatus::Failed),
    );
    read_back_whole(&store, &stored);
    assert_eq!(stored.iter().filter(|(e, _, _)| *e == a).count(), 5);
}

fn many_runs_insert_quickly(place: &Place) {
    let mut store = place.open();
    let id = store.create_experiment(&experiment("bulk", at(0))).unwrap();
    let c = store.cells(id).unwrap()[0].id;
    let started = std::time::Instant::now();
    for repetition in 0..50 {
        // Each run: 3 series × 1000 points, its own transaction (and fsync).
        store
            .insert_run(&run(c, repetition, false, RunStatus::Ok))
            .unwrap();
    }
    let elapsed = started.elapsed();
    assert_eq!(store.observations(id).unwrap().len(), 100);
    // Generous bound: a regression to a row per point would be far slower than this.
    assert!(
        elapsed < Duration::from_secs(20),
        "50 runs took {elapsed:?}"
    );
}

fn telemetry_names_this_version_does_not_know_load_and_survive(place: &Place) {
    // As an older or a newer isolab wrote them: known names beside unknown ones.
    let mut store = place.open();
    let id = store.create_experiment(&experiment("tel", at(0))).unwrap();
    let c = store.cells(id).unwrap()[0].id;
    let rows = vec![
        ("nr_throttled".to_string(), 4.0),
        ("gpu_energy_j".to_string(), 12.5),
        ("cpu_migrations".to_string(), 3.0),
    ];
    let mut new = run(c, 0, false, RunStatus::Ok);
    new.telemetry = TelemetrySet::from(rows.clone());
    store.insert_run(&new).unwrap();

    let runs = store.runs(id).unwrap();
    let t = &runs[0].telemetry;
    assert_eq!(t.get(Telemetry::NrThrottled), Some(4.0));
    assert_eq!(t.get(Telemetry::CpuMigrations), Some(3.0));
    assert_eq!(t.get_named("gpu_energy_j"), Some(12.5));
    assert!(t
        .entries()
        .any(|(name, _)| name == TelemetryName::Other("gpu_energy_j")));
    // Written back, the rows are what was read.
    let mut again = run(c, 1, false, RunStatus::Ok);
    again.telemetry = t.clone();
    store.insert_run(&again).unwrap();
    assert_eq!(store.runs(id).unwrap()[1].telemetry, rows);
}

fn a_fleet_records_its_job_and_one_experiment_per_host(place: &Place) {
    let mut store = place.open();
    let new = NewFleet {
        name: "pinning".into(),
        spec_toml: "[experiment]\nname = \"pinning\"\n".into(),
        spec_path: Some("/specs/pinning.toml".into()),
        seed: u64::MAX - 1,
        created_at: at(0),
        scheduler: "slurm".into(),
        request: "--partition bench --nodes 2".into(),
        split_cells: true,
    };
    let fleet = store.create_fleet(&new).unwrap();
    store.set_fleet_job(fleet, "4242").unwrap();
    let a = store
        .create_fleet_experiment(&experiment("pinning", at(1)), fleet, "node-a")
        .unwrap();
    let b = store
        .create_fleet_experiment(&experiment("pinning", at(2)), fleet, "node-b")
        .unwrap();
    // A requeued task on node-a must resume, not start a second experiment.
    let err = store
        .create_fleet_experiment(&experiment("pinning", at(3)), fleet, "node-a")
        .unwrap_err();
    assert!(
        matches!(&err, Error::FleetHostTaken { experiment, .. } if *experiment == a),
        "{err}"
    );
    assert!(err.to_string().contains(&format!("--resume {a}")), "{err}");
    assert_eq!(
        store.experiments().unwrap().len(),
        2,
        "nothing of the refused one"
    );
    assert_eq!(store.fleet_experiment(fleet, "node-b").unwrap(), Some(b));
    assert_eq!(store.fleet_experiment(fleet, "node-c").unwrap(), None);

    let record = store
        .fleet(store.resolve_fleet("pinning").unwrap())
        .unwrap();
    assert_eq!(record.id, fleet);
    assert_eq!(record.seed, u64::MAX - 1);
    assert_eq!(record.created_at, at(0));
    assert_eq!(record.job_id.as_deref(), Some("4242"));
    assert_eq!(record.request, new.request);
    assert!(record.split_cells);
    let hosts: Vec<(&str, i64)> = record
        .hosts
        .iter()
        .map(|h| (h.host.as_str(), h.experiment))
        .collect();
    assert_eq!(hosts, [("node-a", a), ("node-b", b)]);
    assert!(matches!(
        store.resolve_fleet("nope").unwrap_err(),
        Error::NoSuchFleet { .. }
    ));
    assert!(store.resolve_fleet(&fleet.to_string()).is_ok());
}
