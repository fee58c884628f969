//! What only a PostgreSQL store has to get right: URLs, many writers at once, a database
//! that is not ours, a lost connection. Each test starts its own server
//! ([`isolab_store::testing::Cluster`]); the scenarios shared with SQLite are in
//! `store.rs`.

use std::time::{Duration, UNIX_EPOCH};

use isolab_stats::Direction;
use isolab_store::testing::Cluster;
use isolab_store::{
    Error, ExperimentId, MetricValue, NewCell, NewExperiment, NewRun, RunStatus, Store,
    TelemetrySet, SCHEMA_VERSION,
};

fn experiment(name: &str) -> NewExperiment {
    NewExperiment {
        name: name.into(),
        spec_toml: String::new(),
        spec_path: None,
        seed: 1,
        isolab_version: "0.1.0".into(),
        created_at: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        cells: (0..2)
            .map(|i| NewCell {
                index: i,
                key: format!("platform=p{i}"),
                levels: vec![("platform".into(), format!("p{i}"))],
            })
            .collect(),
        environment: vec![("host".into(), name.into())],
    }
}

fn run(cell: i64, repetition: u32) -> NewRun {
    NewRun {
        cell,
        repetition,
        warmup: false,
        round: repetition,
        status: RunStatus::Ok,
        exit_code: Some(0),
        started_at: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        wall: Duration::from_millis(1500),
        stdout: format!("repetition {repetition}"),
        stderr: String::new(),
        error: None,
        limits: serde_json::json!({ "cpus": "0" }),
        metrics: vec![MetricValue {
            name: "events_per_s".into(),
            unit: "1/s".into(),
            direction: Direction::Higher,
            value: 1000.0 + f64::from(repetition),
        }],
        telemetry: TelemetrySet::new(),
        series: vec![],
        intervals: vec![],
        notes: vec![],
    }
}

#[test]
fn urls_that_cannot_be_a_store_are_refused_with_what_to_do() {
    let err = Store::open_location("postgresql://isolab@127.0.0.1:5432").unwrap_err();
    assert!(matches!(err, Error::Location { .. }), "{err}");
    assert!(err.to_string().contains("names no database"), "{err}");

    let err = Store::open_location("mysql://isolab@db/results").unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("`mysql://` is not a store isolab supports"),
        "{msg}"
    );
    assert!(msg.contains("postgres://USER@HOST"), "{msg}");

    // Nothing listens on port 1: a connection error that hides the password.
    let err = Store::open_location("postgres://isolab:s3cret@127.0.0.1:1/results").unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Connect { .. }), "{msg}");
    assert!(err.is_connection_lost(), "{msg}");
    assert!(
        msg.contains("postgres://isolab:***@127.0.0.1:1/results"),
        "{msg}"
    );
    assert!(!format!("{err:?}").contains("s3cret"), "{err:?}");

    // None of these left a file or directory behind (a URL once became `postgresql:/…`).
    for left in ["postgresql:", "postgres:", "mysql:"] {
        assert!(!std::path::Path::new(left).exists(), "{left} was created");
    }
}

#[test]
fn a_database_of_another_program_or_a_newer_isolab_is_refused() {
    let cluster = Cluster::start().unwrap();
    let url = cluster.create_database("theirs").unwrap();
    cluster
        .client("theirs")
        .unwrap()
        .batch_execute("CREATE TABLE accounts (id BIGINT)")
        .unwrap();
    let err = Store::open_location(&url).unwrap_err();
    assert!(matches!(err, Error::NotAStore { .. }), "{err}");
    assert!(
        err.to_string().contains("1 tables of another program"),
        "{err}"
    );

    let url = cluster.create_database("newer").unwrap();
    let store = Store::open_location(&url).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert!(store.is_postgres());
    drop(store);
    cluster
        .client("newer")
        .unwrap()
        .batch_execute("UPDATE isolab_store SET version = 99")
        .unwrap();
    let err = Store::open_location(&url).unwrap_err();
    assert!(
        matches!(err, Error::SchemaTooNew { found: 99, .. }),
        "{err}"
    );
}

#[test]
fn four_writers_at_once_store_every_run_exactly_once() {
    let cluster = Cluster::start().unwrap();
    let url = cluster.create_database("fleet").unwrap();
    let shared: ExperimentId = {
        // Two stores opening a new database at once both find it migrated.
        let opened: Vec<Store> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| Store::open_location(&url).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut store = opened.into_iter().next().unwrap();
        store.create_experiment(&experiment("shared")).unwrap()
    };

    let outcomes: Vec<(ExperimentId, usize, usize)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|writer| {
                let url = url.clone();
                s.spawn(move || {
                    let mut store = Store::open_location(&url).unwrap();
                    // Each writer's own experiment, as each host of a fleet has.
                    let own = store
                        .create_experiment(&experiment(&format!("host-{writer}")))
                        .unwrap();
                    let cells = store.cells(own).unwrap();
                    for repetition in 0..20 {
                        for c in &cells {
                            store.insert_run(&run(c.id, repetition)).unwrap();
                        }
                    }
                    // And all four race for the same slots of the shared experiment.
                    let shared_cells = store.cells(shared).unwrap();
                    let (mut stored, mut refused) = (0, 0);
                    for repetition in 0..10 {
                        match store.insert_run(&run(shared_cells[0].id, repetition)) {
                            Ok(_) => stored += 1,
                            Err(Error::DuplicateRun { .. }) => refused += 1,
                            Err(e) => panic!("writer {writer}: {e}"),
                        }
                    }
                    (own, stored, refused)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    let store = Store::open_location(&url).unwrap();
    for (own, _, _) in &outcomes {
        let runs = store.runs(*own).unwrap();
        assert_eq!(runs.len(), 40);
        assert_eq!(store.observations(*own).unwrap().len(), 40);
    }
    let stored: usize = outcomes.iter().map(|o| o.1).sum();
    let refused: usize = outcomes.iter().map(|o| o.2).sum();
    assert_eq!((stored, refused), (10, 30));
    let mut repetitions: Vec<u32> = store
        .runs(shared)
        .unwrap()
        .iter()
        .map(|r| r.repetition)
        .collect();
    repetitions.sort_unstable();
    assert_eq!(repetitions, (0..10).collect::<Vec<_>>());
    assert_eq!(cluster.count("fleet", "run_logs").unwrap(), 4 * 40 + 10);
}

#[test]
fn a_lost_connection_is_reported_nothing_half_stored_and_the_next_write_reconnects() {
    let cluster = Cluster::start().unwrap();
    let url = cluster.create_database("flaky").unwrap();
    let mut store = Store::open_location(&url).unwrap();
    let id = store.create_experiment(&experiment("flaky")).unwrap();
    let cell = store.cells(id).unwrap()[0].id;
    store.insert_run(&run(cell, 0)).unwrap();

    // The server ends the session, as a restart or a broken network would.
    assert_eq!(cluster.terminate_sessions("flaky").unwrap(), 1);
    let err = store.insert_run(&run(cell, 1)).unwrap_err();
    assert!(err.is_connection_lost(), "{err}");
    assert_eq!(cluster.count("flaky", "runs").unwrap(), 1);

    // The next operation connects again; the lost run can be stored now, once.
    store.insert_run(&run(cell, 1)).unwrap();
    assert!(matches!(
        store.insert_run(&run(cell, 1)).unwrap_err(),
        Error::DuplicateRun { .. }
    ));
    let runs = store.runs(id).unwrap();
    assert_eq!(
        runs.iter().map(|r| r.repetition).collect::<Vec<_>>(),
        [0, 1]
    );
}

/// Everything a store returns about an experiment, ids left out: what a copy must keep.
fn contents(store: &Store, id: ExperimentId) -> String {
    let mut e = store.experiment(id).unwrap();
    e.id = 0;
    let index_of: std::collections::HashMap<i64, u32> = store
        .cells(id)
        .unwrap()
        .iter()
        .map(|c| (c.id, c.index))
        .collect();
    let cells: Vec<_> = store
        .cells(id)
        .unwrap()
        .into_iter()
        .map(|c| (c.index, c.key, c.levels, c.stop_reason))
        .collect();
    let runs: Vec<_> = store
        .runs(id)
        .unwrap()
        .into_iter()
        .map(|r| {
            let logs = store.run_logs(r.id).unwrap();
            let series = store.series(r.id).unwrap();
            let intervals = store.intervals(r.id).unwrap();
            let index = index_of[&r.cell];
            let mut r = r;
            r.id = 0;
            r.cell = 0;
            format!("cell {index}: {r:?} {logs:?} {series:?} {intervals:?}")
        })
        .collect();
    let interruptions: Vec<_> = store
        .interruptions(id)
        .unwrap()
        .into_iter()
        .map(|i| (i.repetition, i.warmup, i.at, i.reason))
        .collect();
    format!(
        "{e:?}\n{:?}\n{cells:?}\n{runs:#?}\n{interruptions:?}",
        store.environment(id).unwrap()
    )
}

#[test]
fn store_copy_moves_experiments_to_postgres_and_back_without_losing_a_run() {
    let cluster = Cluster::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut sqlite = Store::open(&dir.path().join("laptop.db")).unwrap();
    let id = sqlite.create_experiment(&experiment("laptop")).unwrap();
    let cells = sqlite.cells(id).unwrap();
    for repetition in 0..5 {
        for c in &cells {
            let mut r = run(c.id, repetition);
            r.series = vec![isolab_store::Series {
                name: "host_cpu_util".into(),
                unit: "%".into(),
                points: vec![(0.0, 50.0), (0.1, f64::NAN)],
            }];
            r.intervals = vec![isolab_store::LoadInterval {
                requests: 40,
                users: Some(2.0),
                ..isolab_store::LoadInterval::new("home", 1.0)
            }];
            r.notes = vec![format!("note {repetition}")];
            // Telemetry of two layouts, with a name this version does not know.
            r.telemetry = TelemetrySet::from(vec![
                ("cpu_usage_s".to_string(), 1.0 + f64::from(repetition)),
                ("gpu_energy_j".to_string(), f64::NAN),
            ]);
            if repetition % 2 == 1 {
                r.telemetry.push(isolab_store::Telemetry::Wall, 2.0);
            }
            sqlite.insert_run(&r).unwrap();
        }
    }
    sqlite
        .record_interruption(&isolab_store::Interruption {
            experiment: id,
            cell: cells[1].id,
            repetition: 5,
            warmup: false,
            at: UNIX_EPOCH + Duration::from_secs(1_700_000_100),
            reason: "SIGINT".into(),
        })
        .unwrap();
    sqlite
        .set_stop_reason(cells[0].id, "cv 0.01 <= 0.05")
        .unwrap();
    sqlite
        .set_status(
            id,
            isolab_store::ExperimentStatus::Interrupted,
            UNIX_EPOCH + Duration::from_secs(1_700_000_200),
        )
        .unwrap();

    let url = cluster.create_database("team").unwrap();
    let mut team = Store::open_location(&url).unwrap();
    // Something already there, so that ids differ between the stores.
    team.create_experiment(&experiment("earlier")).unwrap();
    let copied = sqlite.copy_experiment(id, &mut team).unwrap().id;
    assert_ne!(copied, id);
    assert_eq!(contents(&team, copied), contents(&sqlite, id));

    // A second copy is refused and adds nothing.
    let err = sqlite.copy_experiment(id, &mut team).unwrap_err();
    assert!(
        matches!(err, Error::AlreadyCopied { existing, .. } if existing == copied),
        "{err}"
    );
    assert_eq!(team.experiments().unwrap().len(), 2);

    // And back into a fresh SQLite file, identical again.
    let mut back = Store::open(&dir.path().join("back.db")).unwrap();
    let returned = team.copy_experiment(copied, &mut back).unwrap().id;
    assert_eq!(contents(&back, returned), contents(&sqlite, id));
}

#[test]
fn a_run_stored_patiently_survives_a_lost_connection_and_is_stored_once() {
    let cluster = Cluster::start().unwrap();
    let url = cluster.create_database("patient").unwrap();
    let mut store = Store::open_location(&url).unwrap();
    let id = store.create_experiment(&experiment("patient")).unwrap();
    let cell = store.cells(id).unwrap()[0].id;
    store.insert_run(&run(cell, 0)).unwrap();
    assert_eq!(cluster.terminate_sessions("patient").unwrap(), 1);
    store
        .insert_run_patiently(&run(cell, 1), Duration::from_secs(30))
        .unwrap();
    assert_eq!(cluster.count("patient", "runs").unwrap(), 2);
    // Without a lost connection, a duplicate is still refused.
    assert!(matches!(
        store
            .insert_run_patiently(&run(cell, 1), Duration::from_secs(30))
            .unwrap_err(),
        Error::DuplicateRun { .. }
    ));
}

#[test]
fn a_store_of_schema_version_3_is_converted_to_one_telemetry_row_per_run() {
    let cluster = Cluster::start().unwrap();
    let url = cluster.create_store_at_version("old", 3).unwrap();
    let mut client = cluster.client("old").unwrap();
    client
        .batch_execute(
            "INSERT INTO experiments (name, spec_toml, seed, isolab_version, created_at_ms, \
             status) VALUES ('old', '', '1', '0.1.0', 0, 'complete'); \
             INSERT INTO cells (experiment_id, idx, key) VALUES (1, 0, 'platform=host');",
        )
        .unwrap();
    // Run i: cpu_usage_s i, an unknown name (NULL: NaN) on odd runs, none on every
    // fifth; 25 runs.
    let rows = |run: i64| -> Vec<(&'static str, Option<f64>)> {
        match run % 5 {
            0 => vec![],
            r if r % 2 == 1 => vec![("cpu_usage_s", Some(run as f64)), ("gpu_energy_j", None)],
            _ => vec![("cpu_usage_s", Some(run as f64))],
        }
    };
    for run in 1..=25_i64 {
        client
            .execute(
                "INSERT INTO runs (experiment_id, cell_id, repetition, warmup, round, status, \
                 started_at_ms, wall_ns, limits_json) \
                 VALUES (1, 1, $1, 0, $1, 'ok', 0, 0, '{}')",
                &[&run],
            )
            .unwrap();
        for (position, (key, value)) in rows(run).into_iter().enumerate() {
            client
                .execute(
                    "INSERT INTO telemetry (run_id, position, key, value) \
                     VALUES ($1, $2, $3, $4)",
                    &[&run, &(position as i64), &key, &value],
                )
                .unwrap();
        }
    }
    drop(client);

    let store = Store::open_location(&url).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    let runs = store.runs(1).unwrap();
    assert_eq!(runs.len(), 25);
    for r in &runs {
        let want = rows(r.id);
        let got = r.telemetry.clone().into_rows();
        assert_eq!(got.len(), want.len(), "run {}", r.id);
        for ((name, value), (n, v)) in got.iter().zip(&want) {
            assert_eq!(name, n);
            assert_eq!(
                value.to_bits(),
                v.unwrap_or(f64::NAN).to_bits(),
                "run {}",
                r.id
            );
        }
    }
    assert_eq!(cluster.count("old", "telemetry_layouts").unwrap(), 2);
    assert_eq!(cluster.count("old", "telemetry").unwrap(), 20);
}
