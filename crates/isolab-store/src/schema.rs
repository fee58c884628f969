//! The schema and its numbered migrations.
//!
//! `MIGRATIONS[i]` takes a store from schema version `i` to `i + 1`. Where the version is
//! recorded and how the database is marked as an isolab store is the backend's
//! ([`Connection::identity`]): SQLite's `PRAGMA user_version` and `application_id`,
//! PostgreSQL's table `isolab_store`. Pending migrations run in one transaction that only
//! one process can hold ([`Begin::Migrate`]), so two processes opening a new store at once
//! cannot both migrate it and a failed upgrade leaves the store as it was. A migration,
//! once released, is never edited: changes go into a new one appended to the list.
//!
//! The SQL is written in SQLite's dialect and kept plain (no backend-only column types or
//! functions), so that PostgreSQL's can be derived from it word by word
//! ([`Connection::ddl`]). How values are encoded is described in the `encoding` module.

use crate::backend::{Begin, Connection, Identity};
use crate::error::{BackendError, Error, Kind};

/// Version 1: the tidy tables of experiments, cells, runs and their measurements.
const V1: &str = r#"
CREATE TABLE experiments (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    name           TEXT    NOT NULL,
    spec_toml      TEXT    NOT NULL,
    spec_path      TEXT,
    seed           TEXT    NOT NULL,
    isolab_version TEXT    NOT NULL,
    created_at_ms  INTEGER NOT NULL,
    finished_at_ms INTEGER,
    status         TEXT    NOT NULL
);
CREATE INDEX experiments_by_name ON experiments (name, id);

CREATE TABLE environment (
    experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    position      INTEGER NOT NULL,
    key           TEXT    NOT NULL,
    value         TEXT    NOT NULL,
    PRIMARY KEY (experiment_id, position)
);

CREATE TABLE cells (
    id            INTEGER PRIMARY KEY,
    experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    idx           INTEGER NOT NULL,
    key           TEXT    NOT NULL,
    stop_reason   TEXT,
    UNIQUE (experiment_id, idx),
    UNIQUE (experiment_id, key)
);

CREATE TABLE cell_levels (
    cell_id  INTEGER NOT NULL REFERENCES cells (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    factor   TEXT    NOT NULL,
    level    TEXT    NOT NULL,
    PRIMARY KEY (cell_id, position)
);

CREATE TABLE runs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    cell_id       INTEGER NOT NULL REFERENCES cells (id) ON DELETE CASCADE,
    repetition    INTEGER NOT NULL,
    warmup        INTEGER NOT NULL,
    round         INTEGER NOT NULL,
    status        TEXT    NOT NULL,
    exit_code     INTEGER,
    started_at_ms INTEGER NOT NULL,
    wall_ns       INTEGER NOT NULL,
    error         TEXT,
    limits_json   TEXT    NOT NULL,
    UNIQUE (cell_id, warmup, repetition)
);
CREATE INDEX runs_by_experiment ON runs (experiment_id, id);

CREATE TABLE metrics (
    run_id    INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position  INTEGER NOT NULL,
    name      TEXT    NOT NULL,
    unit      TEXT    NOT NULL,
    direction TEXT    NOT NULL,
    value     REAL,
    PRIMARY KEY (run_id, position)
);

CREATE TABLE telemetry (
    run_id   INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    key      TEXT    NOT NULL,
    value    REAL,
    PRIMARY KEY (run_id, position)
);

CREATE TABLE series (
    run_id   INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    name     TEXT    NOT NULL,
    unit     TEXT    NOT NULL,
    points   BLOB    NOT NULL,
    PRIMARY KEY (run_id, position)
);

CREATE TABLE run_logs (
    run_id INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    stdout TEXT NOT NULL,
    stderr TEXT NOT NULL
);

CREATE TABLE run_notes (
    run_id   INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    note     TEXT    NOT NULL,
    PRIMARY KEY (run_id, position)
);

CREATE TABLE interruptions (
    id            INTEGER PRIMARY KEY,
    experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    cell_id       INTEGER NOT NULL REFERENCES cells (id) ON DELETE CASCADE,
    repetition    INTEGER NOT NULL,
    warmup        INTEGER NOT NULL,
    at_ms         INTEGER NOT NULL,
    reason        TEXT    NOT NULL
);
CREATE INDEX interruptions_by_experiment ON interruptions (experiment_id, id);
"#;

/// Version 2: a service workload's load per run, named request and second, as its load
/// generator reported it (one row per interval; counts as integers, latencies in ms, a
/// field the generator did not report NULL).
const V2: &str = r#"
CREATE TABLE load_intervals (
    run_id          INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    request         TEXT    NOT NULL,
    start_s         REAL    NOT NULL,
    users           REAL,
    target_rate     REAL,
    requests        INTEGER NOT NULL,
    failures        INTEGER NOT NULL,
    latency_mean_ms REAL,
    latency_p50_ms  REAL,
    latency_p90_ms  REAL,
    latency_p99_ms  REAL,
    latency_max_ms  REAL,
    PRIMARY KEY (run_id, request, start_s)
);
"#;

/// Version 3: fleets. A fleet is one experiment spec run by many hosts, each host running
/// every cell as an experiment of its own (the host is the block), or with `split_cells`
/// a share of them; `fleet_hosts` links each host's experiment to its fleet, one per host.
const V3: &str = r#"
CREATE TABLE fleets (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    name          TEXT    NOT NULL,
    spec_toml     TEXT    NOT NULL,
    spec_path     TEXT,
    seed          TEXT    NOT NULL,
    created_at_ms INTEGER NOT NULL,
    scheduler     TEXT    NOT NULL,
    request       TEXT    NOT NULL,
    split_cells   INTEGER NOT NULL DEFAULT 0,
    job_id        TEXT
);
CREATE INDEX fleets_by_name ON fleets (name, id);

CREATE TABLE fleet_hosts (
    fleet_id      INTEGER NOT NULL REFERENCES fleets (id) ON DELETE CASCADE,
    host          TEXT    NOT NULL,
    experiment_id INTEGER NOT NULL UNIQUE REFERENCES experiments (id) ON DELETE CASCADE,
    PRIMARY KEY (fleet_id, host)
);
"#;

/// Version 4: a run's telemetry in one row instead of a row per value (the `layouts`
/// module): `telemetry_layouts` holds each list of names once, found by its digest, and
/// the new `telemetry` the run's layout and its values packed in a BLOB. A report over
/// 100 000 runs of 50 counters read 5 000 000 rows before and reads 100 000 now. Made in
/// three steps: the new tables (`run_telemetry` until the old table is gone), the
/// conversion of every stored run ([`crate::layouts::convert`]), then [`V4_AFTER`].
const V4: &str = r#"
CREATE TABLE telemetry_layouts (
    id     INTEGER PRIMARY KEY,
    digest INTEGER NOT NULL,
    names  TEXT    NOT NULL
);
CREATE INDEX telemetry_layouts_by_digest ON telemetry_layouts (digest);

CREATE TABLE run_telemetry (
    run_id    INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    layout_id INTEGER NOT NULL REFERENCES telemetry_layouts (id),
    packed    BLOB    NOT NULL
);
"#;

/// Version 4's last step, once every run is converted: the new table takes the old
/// one's name.
const V4_AFTER: &str = r#"
DROP TABLE telemetry;
ALTER TABLE run_telemetry RENAME TO telemetry;
"#;

/// Version 5: a run's `status` may be `dnr` (did not report: beside a neighbour, the
/// subject ran past its timeout). No table changes: the version is raised so that an
/// earlier build, which cannot read the word, refuses the store instead of failing on
/// the run.
const V5: &str = "SELECT 1;";

/// Version 6: `tags`, names given to experiments (`isolab tag`), several experiments
/// under one name: the reference a gate decides against.
const V6: &str = r#"
CREATE TABLE tags (
    name          TEXT    NOT NULL,
    experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    created_at_ms INTEGER NOT NULL,
    PRIMARY KEY (name, experiment_id)
);
"#;

/// A migration's conversion of stored data, run between its SQL and the SQL after it.
type Convert = fn(&mut dyn Connection) -> Result<(), BackendError>;

/// One migration: its SQL and, for one that converts stored data, the conversion and
/// the SQL that runs after it.
struct Migration {
    sql: &'static str,
    convert: Option<Convert>,
    after: &'static str,
}

impl Migration {
    /// A migration of SQL alone.
    const fn sql(sql: &'static str) -> Migration {
        Migration {
            sql,
            convert: None,
            after: "",
        }
    }
}

/// Every migration, in order: entry `i` upgrades version `i` to `i + 1`.
const MIGRATIONS: &[Migration] = &[
    Migration::sql(V1),
    Migration::sql(V2),
    Migration::sql(V3),
    Migration {
        sql: V4,
        convert: Some(crate::layouts::convert),
        after: V4_AFTER,
    },
    Migration::sql(V5),
    Migration::sql(V6),
];

/// The schema version this build creates and understands.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// The error for a failure while opening `store`.
pub(crate) fn open_error(store: &str, e: BackendError) -> Error {
    match e.kind() {
        Kind::NotADatabase => Error::NotAStore {
            store: store.to_owned(),
            reason: "the file is not an SQLite database".to_owned(),
        },
        _ => Error::Open {
            store: store.to_owned(),
            source: e,
        },
    }
}

/// Checks that the store is ours and not too new, and that nothing else lives in a
/// store at version 0.
fn check_identity(store: &str, identity: &Identity) -> Result<(), Error> {
    if identity.version > SCHEMA_VERSION {
        return Err(Error::SchemaTooNew {
            store: store.to_owned(),
            found: identity.version,
            supported: SCHEMA_VERSION,
        });
    }
    if identity.version == 0 {
        if identity.tables > 0 {
            return Err(Error::NotAStore {
                store: store.to_owned(),
                reason: format!("it holds {} tables of another program", identity.tables),
            });
        }
    } else if let Err(reason) = &identity.marked {
        return Err(Error::NotAStore {
            store: store.to_owned(),
            reason: reason.clone(),
        });
    }
    Ok(())
}

/// Brings the store to [`SCHEMA_VERSION`], or refuses it.
pub(crate) fn migrate(conn: &mut dyn Connection, store: &str) -> Result<(), Error> {
    migrate_to(conn, store, SCHEMA_VERSION)
}

/// Brings the store to schema `version` (at most [`SCHEMA_VERSION`]; an earlier one
/// only for tests of the migrations), or refuses it.
pub(crate) fn migrate_to(
    conn: &mut dyn Connection,
    store: &str,
    version: u32,
) -> Result<(), Error> {
    let identity = conn.identity().map_err(|e| open_error(store, e))?;
    check_identity(store, &identity)?;
    if identity.version >= version {
        return Ok(());
    }
    conn.begin(Begin::Migrate)
        .map_err(|e| open_error(store, e))?;
    let result = migrate_locked(conn, store, version);
    if result.is_err() {
        // Best effort: the error that matters is the migration's.
        let _ = conn.rollback();
    }
    result
}

/// The migrations up to `version`, inside the transaction [`migrate_to`] began.
fn migrate_locked(conn: &mut dyn Connection, store: &str, version: u32) -> Result<(), Error> {
    // Another process may have migrated between the first look and the lock.
    let identity = conn.identity().map_err(|e| open_error(store, e))?;
    check_identity(store, &identity)?;
    let from = identity.version;
    let mut to = from;
    let failed = |to: u32, source: BackendError| Error::Migrate {
        store: store.to_owned(),
        from,
        to,
        source,
    };
    for (i, migration) in MIGRATIONS
        .iter()
        .enumerate()
        .take(version as usize)
        .skip(from as usize)
    {
        to = i as u32 + 1;
        let sql = conn.ddl(migration.sql).into_owned();
        conn.batch(&sql).map_err(|e| failed(to, e))?;
        if let Some(convert) = migration.convert {
            convert(conn).map_err(|e| failed(to, e))?;
            let after = conn.ddl(migration.after).into_owned();
            conn.batch(&after).map_err(|e| failed(to, e))?;
        }
    }
    conn.set_identity(to)
        .and_then(|()| conn.commit())
        .map_err(|e| failed(to, e))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The SQL of the migration to `version` and the SQL that runs after its
    /// conversion, for tests that build a store as an earlier version left it.
    pub(crate) fn migration_sql(version: u32) -> (&'static str, &'static str) {
        let m = &MIGRATIONS[version as usize - 1];
        (m.sql, m.after)
    }
    use crate::backend::sqlite::{Sqlite, APPLICATION_ID};
    use crate::backend::Row;

    fn memory() -> Sqlite {
        Sqlite::in_memory().unwrap()
    }

    fn version(conn: &mut Sqlite) -> u32 {
        conn.identity().unwrap().version
    }

    #[test]
    fn migrates_an_empty_database_to_the_current_version() {
        let mut conn = memory();
        migrate(&mut conn, ":memory:").unwrap();
        let identity = conn.identity().unwrap();
        assert_eq!(identity.version, SCHEMA_VERSION);
        assert_eq!(identity.marked, Ok(()));
        let app = conn.query("PRAGMA application_id", &[]).unwrap();
        assert_eq!(app[0].get::<i64>(0).unwrap(), i64::from(APPLICATION_ID));
        // A second pass changes nothing.
        migrate(&mut conn, ":memory:").unwrap();
        assert_eq!(version(&mut conn), SCHEMA_VERSION);
    }

    /// The tables of the store, by name.
    fn tables(conn: &mut Sqlite) -> Vec<String> {
        conn.query(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r: &Row| r.get(0).unwrap())
        .collect()
    }

    #[test]
    fn a_fresh_store_has_every_version_s_tables() {
        let mut conn = memory();
        migrate(&mut conn, ":memory:").unwrap();
        let tables = tables(&mut conn);
        for t in ["runs", "series", "load_intervals", "fleets", "fleet_hosts"] {
            assert!(tables.iter().any(|n| n == t), "{t} missing from {tables:?}");
        }
    }

    /// A store as version 1 left it.
    fn at_version_1() -> Sqlite {
        let mut conn = memory();
        conn.batch(V1).unwrap();
        conn.set_identity(1).unwrap();
        conn
    }

    #[test]
    fn upgrades_version_1_to_the_current_version() {
        let mut conn = at_version_1();
        assert!(!tables(&mut conn).iter().any(|n| n == "load_intervals"));
        migrate(&mut conn, ":memory:").unwrap();
        assert_eq!(version(&mut conn), SCHEMA_VERSION);
        assert!(tables(&mut conn).iter().any(|n| n == "load_intervals"));
    }

    #[test]
    fn a_failed_upgrade_leaves_the_store_at_its_version() {
        let mut conn = at_version_1();
        // A table in the way of version 2's.
        conn.batch("CREATE TABLE load_intervals (x INTEGER)")
            .unwrap();
        let err = migrate(&mut conn, ":memory:").unwrap_err();
        assert!(
            matches!(err, Error::Migrate { from: 1, to: 2, .. }),
            "{err}"
        );
        // Nothing of the later versions either.
        assert!(!tables(&mut conn).iter().any(|n| n == "fleets"));
        assert!(err.to_string().contains("left at version 1"), "{err}");
        assert_eq!(version(&mut conn), 1);
    }

    #[test]
    fn foreign_keys_are_enforced() {
        let mut conn = memory();
        migrate(&mut conn, ":memory:").unwrap();
        let err = conn
            .execute(
                "INSERT INTO cells (experiment_id, idx, key) VALUES (42, 0, 'k')",
                &[],
            )
            .unwrap_err();
        assert!(err.to_string().contains("FOREIGN KEY"), "{err}");
    }

    #[test]
    fn refuses_a_database_of_another_program() {
        let mut conn = memory();
        conn.batch("CREATE TABLE accounts (id INTEGER)").unwrap();
        let err = migrate(&mut conn, ":memory:").unwrap_err();
        assert!(matches!(err, Error::NotAStore { .. }), "{err}");
    }

    #[test]
    fn refuses_a_versioned_database_without_our_application_id() {
        let mut conn = memory();
        conn.batch("PRAGMA user_version = 1").unwrap();
        let err = migrate(&mut conn, ":memory:").unwrap_err();
        assert!(err.to_string().contains("application id"), "{err}");
    }

    #[test]
    fn refuses_a_newer_schema() {
        let mut conn = memory();
        migrate(&mut conn, ":memory:").unwrap();
        conn.batch(&format!("PRAGMA user_version = {}", SCHEMA_VERSION + 1))
            .unwrap();
        let err = migrate(&mut conn, ":memory:").unwrap_err();
        assert!(err.to_string().ends_with("upgrade isolab"), "{err}");
    }

    #[test]
    fn every_migration_has_a_postgres_form_without_sqlite_words() {
        for sql in MIGRATIONS.iter().flat_map(|m| [m.sql, m.after]) {
            let pg = crate::backend::postgres::ddl(sql);
            for word in ["AUTOINCREMENT", "INTEGER", "BLOB", " REAL"] {
                assert!(!pg.contains(word), "{word} left in {pg}");
            }
        }
    }
}
