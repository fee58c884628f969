//! The schema and its numbered migrations.
//!
//! `MIGRATIONS[i]` takes a store from schema version `i` to `i + 1`; the version lives in
//! SQLite's `PRAGMA user_version` and the file is marked as an isolab store with
//! `PRAGMA application_id`. Pending migrations run in one `IMMEDIATE` transaction, so two
//! processes opening a new store at once cannot both migrate it and a failed upgrade leaves
//! the store as it was. A migration, once released, is never edited: changes go into a new
//! one appended to the list.
//!
//! The SQL is kept plain (no SQLite-only column types or functions) so that the same tables
//! can be declared for PostgreSQL; the few SQLite-only words are `AUTOINCREMENT` (ids that
//! are never reused, PostgreSQL: `GENERATED ALWAYS AS IDENTITY`) and `BLOB` (`bytea`).
//! How values are encoded is described in the `encoding` module.

use std::time::Duration;

use rusqlite::{Connection, ErrorCode, TransactionBehavior};

use crate::error::{BackendError, Error};

/// `PRAGMA application_id` of an isolab store: "ISLB".
const APPLICATION_ID: i32 = 0x4953_4c42;

/// How long a statement waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Every migration, in order: entry `i` upgrades version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[V1, V2];

/// The schema version this build creates and understands.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

fn open_error(store: &str, e: rusqlite::Error) -> Error {
    if e.sqlite_error_code() == Some(ErrorCode::NotADatabase) {
        Error::NotAStore {
            store: store.to_owned(),
            reason: "the file is not an SQLite database".to_owned(),
        }
    } else {
        Error::Open {
            store: store.to_owned(),
            source: BackendError::new(e),
        }
    }
}

/// Sets the connection up: busy timeout, foreign keys, WAL journal, full sync (a committed
/// run survives a power cut).
pub(crate) fn configure(conn: &Connection, store: &str) -> Result<(), Error> {
    let err = |e| open_error(store, e);
    conn.busy_timeout(BUSY_TIMEOUT).map_err(err)?;
    conn.pragma_update(None, "foreign_keys", true)
        .map_err(err)?;
    // In-memory databases answer `memory`: that is fine, they have no journal file.
    let _mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .map_err(err)?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(err)?;
    Ok(())
}

/// The schema version recorded in the store.
pub(crate) fn user_version(conn: &Connection) -> rusqlite::Result<u32> {
    let v: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    // user_version is a signed 32-bit header field; a negative one is far from ours.
    Ok(u32::try_from(v).unwrap_or(u32::MAX))
}

/// Checks that the store is ours and not too new, and that nothing else lives in a
/// store at version 0.
fn check_identity(conn: &Connection, store: &str, version: u32) -> Result<(), Error> {
    let err = |e| open_error(store, e);
    if version > SCHEMA_VERSION {
        return Err(Error::SchemaTooNew {
            store: store.to_owned(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    let app: i32 = conn
        .pragma_query_value(None, "application_id", |row| row.get(0))
        .map_err(err)?;
    if version == 0 {
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                [],
                |row| row.get(0),
            )
            .map_err(err)?;
        if tables > 0 {
            return Err(Error::NotAStore {
                store: store.to_owned(),
                reason: format!("it holds {tables} tables of another program"),
            });
        }
    } else if app != APPLICATION_ID {
        return Err(Error::NotAStore {
            store: store.to_owned(),
            reason: format!("its application id is {app:#x}, not isolab's"),
        });
    }
    Ok(())
}

/// Brings the store to [`SCHEMA_VERSION`], or refuses it.
pub(crate) fn migrate(conn: &mut Connection, store: &str) -> Result<(), Error> {
    let version = user_version(conn).map_err(|e| open_error(store, e))?;
    check_identity(conn, store, version)?;
    if version == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| open_error(store, e))?;
    // Another process may have migrated between the first look and the lock.
    let from = user_version(&tx).map_err(|e| open_error(store, e))?;
    check_identity(&tx, store, from)?;
    let mut to = from;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(from as usize) {
        to = i as u32 + 1;
        tx.execute_batch(sql).map_err(|e| Error::Migrate {
            store: store.to_owned(),
            from,
            to,
            source: BackendError::new(e),
        })?;
    }
    let finish = tx
        .pragma_update(None, "application_id", APPLICATION_ID)
        .and_then(|()| tx.pragma_update(None, "user_version", to))
        .and_then(|()| tx.commit());
    finish.map_err(|e| Error::Migrate {
        store: store.to_owned(),
        from,
        to,
        source: BackendError::new(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        configure(&conn, ":memory:").unwrap();
        conn
    }

    #[test]
    fn migrates_an_empty_database_to_the_current_version() {
        let mut conn = memory();
        migrate(&mut conn, ":memory:").unwrap();
        assert_eq!(user_version(&conn).unwrap(), SCHEMA_VERSION);
        let app: i32 = conn
            .pragma_query_value(None, "application_id", |r| r.get(0))
            .unwrap();
        assert_eq!(app, APPLICATION_ID);
        // A second pass changes nothing.
        migrate(&mut conn, ":memory:").unwrap();
        assert_eq!(user_version(&conn).unwrap(), SCHEMA_VERSION);
    }

    /// The tables of the store, by name.
    fn tables(conn: &Connection) -> Vec<String> {
        let mut stmt = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .unwrap();
        let names = stmt.query_map([], |r| r.get(0)).unwrap();
        names.collect::<Result<_, _>>().unwrap()
    }

    #[test]
    fn a_fresh_store_has_every_version_s_tables() {
        let mut conn = memory();
        migrate(&mut conn, ":memory:").unwrap();
        let tables = tables(&conn);
        for t in ["runs", "series", "load_intervals"] {
            assert!(tables.iter().any(|n| n == t), "{t} missing from {tables:?}");
        }
    }

    /// A store as version 1 left it.
    fn at_version_1() -> Connection {
        let conn = memory();
        conn.execute_batch(V1).unwrap();
        conn.pragma_update(None, "application_id", APPLICATION_ID)
            .unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn
    }

    #[test]
    fn upgrades_version_1_to_the_current_version() {
        let mut conn = at_version_1();
        assert!(!tables(&conn).iter().any(|n| n == "load_intervals"));
        migrate(&mut conn, ":memory:").unwrap();
        assert_eq!(user_version(&conn).unwrap(), SCHEMA_VERSION);
        assert!(tables(&conn).iter().any(|n| n == "load_intervals"));
    }

    #[test]
    fn a_failed_upgrade_leaves_the_store_at_its_version() {
        let mut conn = at_version_1();
        // A table in the way of version 2's.
        conn.execute_batch("CREATE TABLE load_intervals (x INTEGER)")
            .unwrap();
        let err = migrate(&mut conn, ":memory:").unwrap_err();
        assert!(
            matches!(err, Error::Migrate { from: 1, to: 2, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("left at version 1"), "{err}");
        assert_eq!(user_version(&conn).unwrap(), 1);
    }

    #[test]
    fn foreign_keys_are_enforced() {
        let mut conn = memory();
        migrate(&mut conn, ":memory:").unwrap();
        let err = conn
            .execute(
                "INSERT INTO cells (experiment_id, idx, key) VALUES (42, 0, 'k')",
                [],
            )
            .unwrap_err();
        assert_eq!(
            err.sqlite_error_code(),
            Some(ErrorCode::ConstraintViolation)
        );
    }

    #[test]
    fn refuses_a_database_of_another_program() {
        let mut conn = memory();
        conn.execute_batch("CREATE TABLE accounts (id INTEGER)")
            .unwrap();
        let err = migrate(&mut conn, ":memory:").unwrap_err();
        assert!(matches!(err, Error::NotAStore { .. }), "{err}");
    }

    #[test]
    fn refuses_a_versioned_database_without_our_application_id() {
        let mut conn = memory();
        conn.pragma_update(None, "user_version", 1).unwrap();
        let err = migrate(&mut conn, ":memory:").unwrap_err();
        assert!(err.to_string().contains("application id"), "{err}");
    }

    #[test]
    fn refuses_a_newer_schema() {
        let mut conn = memory();
        migrate(&mut conn, ":memory:").unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        let err = migrate(&mut conn, ":memory:").unwrap_err();
        assert!(err.to_string().ends_with("upgrade isolab"), "{err}");
    }
}
