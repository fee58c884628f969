//! [`Store`]: the results store's API, on either backend: opening it, its transactions
//! ([`Tx`]) and the connection every query runs on ([`Db`]). The queries live by table
//! or query family: `experiments` (experiments, cells, environment), `runs` (a run and
//! what hangs off it, interruptions), `queries` (what reports read), `copy` (an
//! experiment into another store).

mod copy;
mod experiments;
mod queries;
mod runs;
mod tags;

pub use copy::Copied;
pub(crate) use experiments::create_experiment;

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Display;
use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use crate::backend::postgres::{self, Postgres};
use crate::backend::sqlite::Sqlite;
use crate::backend::{Begin, Connection, FromRow, Row, Value};
use crate::encoding::{millis_to_time, nanos_to_duration};
use crate::error::{BackendError, Context, Error};
use crate::schema;

/// The results store: one SQLite file (or an in-memory database for tests), or a
/// PostgreSQL database that many hosts write at once.
///
/// Every write is one transaction: an experiment with its cells and environment, a run
/// with everything measured during it. Reads that take several queries run in one read
/// transaction, so they see a consistent snapshot while a runner keeps writing (SQLite's
/// WAL mode and PostgreSQL's snapshots let readers and writers proceed together).
pub struct Store {
    /// The connection; borrowed for one statement at a time.
    conn: RefCell<Box<dyn Connection>>,
    /// The path or URL shown in messages (its password hidden), or `:memory:`.
    location: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("location", &self.location)
            .field("backend", &self.conn.borrow().dialect())
            .finish()
    }
}

/// Which row of which table a decoded value came from, for [`Error::Corrupt`]. The
/// row's name is written only for an error: a decoder of a million rows names each
/// with [`RowId`] and formats nothing.
pub(crate) struct At<R = String> {
    table: &'static str,
    row: R,
}

/// A row's name by its key columns, written as `run_id 7, position 2` when needed.
pub(crate) struct RowId<const N: usize>(pub(crate) [(&'static str, i64); N]);

impl<const N: usize> Display for RowId<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (column, value)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{column} {value}")?;
        }
        Ok(())
    }
}

impl<R: Display> At<R> {
    pub(crate) fn new(table: &'static str, row: R) -> At<R> {
        At { table, row }
    }

    pub(crate) fn corrupt(
        &self,
        column: &'static str,
        value: impl Display,
        reason: impl Display,
    ) -> Error {
        Error::Corrupt {
            table: self.table,
            row: self.row.to_string(),
            column,
            value: value.to_string(),
            reason: reason.to_string(),
        }
    }

    pub(crate) fn u32(&self, column: &'static str, v: i64) -> Result<u32, Error> {
        u32::try_from(v)
            .map_err(|_| self.corrupt(column, v, "expected an integer from 0 to 2^32-1"))
    }

    pub(crate) fn bool(&self, column: &'static str, v: i64) -> Result<bool, Error> {
        match v {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(self.corrupt(column, other, "expected 0 or 1")),
        }
    }

    pub(crate) fn time(&self, column: &'static str, ms: i64) -> Result<SystemTime, Error> {
        millis_to_time(ms).ok_or_else(|| {
            self.corrupt(column, ms, "milliseconds since the Unix epoch out of range")
        })
    }

    pub(crate) fn duration(&self, column: &'static str, ns: i64) -> Result<Duration, Error> {
        nanos_to_duration(ns).ok_or_else(|| self.corrupt(column, ns, "expected nanoseconds >= 0"))
    }

    pub(crate) fn parse<T>(&self, column: &'static str, word: &str) -> Result<T, Error>
    where
        T: FromStr,
        T::Err: Display,
    {
        word.parse().map_err(|e| self.corrupt(column, word, e))
    }

    pub(crate) fn json(
        &self,
        column: &'static str,
        text: &str,
    ) -> Result<serde_json::Value, Error> {
        serde_json::from_str(text).map_err(|e| self.corrupt(column, text, e))
    }

    pub(crate) fn count(&self, column: &'static str, v: i64) -> Result<u64, Error> {
        u64::try_from(v).map_err(|_| self.corrupt(column, v, "expected a count >= 0"))
    }
}

impl Store {
    /// Opens the SQLite store at `path`, creating the file if it is missing and bringing
    /// its schema up to [`crate::SCHEMA_VERSION`]. The directory must exist.
    ///
    /// Refuses a file that is not an isolab store and a store written by a newer isolab.
    pub fn open(path: &Path) -> Result<Store, Error> {
        let location = path.display().to_string();
        let conn = Sqlite::open(path).map_err(|e| schema::open_error(&location, e))?;
        Store::start(Box::new(conn), location)
    }

    /// Opens the store that `location` names: a `postgres://` or `postgresql://` URL
    /// (PostgreSQL; the database must exist, isolab creates its tables), or a file path
    /// (SQLite, created when missing). Any other `SCHEME://` is refused
    /// ([`Error::Location`]), so that a mistyped URL never becomes a directory tree.
    pub fn open_location(location: &str) -> Result<Store, Error> {
        if postgres::is_url(location) {
            let shown = postgres::redact(location);
            let config = postgres::parse(location).map_err(|reason| Error::Location {
                location: shown.clone(),
                reason,
            })?;
            let conn = Postgres::connect(config).map_err(|source| Error::Connect {
                store: shown.clone(),
                source,
            })?;
            return Store::start(Box::new(conn), shown);
        }
        if let Some((scheme, _)) = location.split_once("://") {
            let is_scheme = scheme
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
            if is_scheme {
                return Err(Error::Location {
                    location: postgres::redact(location),
                    reason: format!("`{scheme}://` is not a store isolab supports"),
                });
            }
        }
        Store::open(Path::new(location))
    }

    /// Opens a fresh store that lives in memory and disappears when dropped.
    pub fn open_in_memory() -> Result<Store, Error> {
        let location = ":memory:".to_owned();
        let conn = Sqlite::in_memory().map_err(|e| schema::open_error(&location, e))?;
        Store::start(Box::new(conn), location)
    }

    fn start(mut conn: Box<dyn Connection>, location: String) -> Result<Store, Error> {
        schema::migrate(conn.as_mut(), &location)?;
        Ok(Store {
            conn: RefCell::new(conn),
            location,
        })
    }

    /// A second connection to this store's database, to read beside this one; `None`
    /// for a store in memory or when the database refuses another connection (the
    /// caller then reads on this one).
    pub(crate) fn another(&self) -> Option<Store> {
        let conn = self.conn.borrow().another()?.ok()?;
        Some(Store {
            conn: RefCell::new(conn),
            location: self.location.clone(),
        })
    }

    /// Whether the store lives in PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        self.conn.borrow().dialect() == crate::backend::Dialect::Postgres
    }

    /// Queries on the store's connection, outside any transaction.
    pub(crate) fn db(&self) -> Db<'_> {
        Db::new(&self.conn, &self.location)
    }

    /// Begins a transaction of `kind`; `what` names the operation in an error.
    pub(crate) fn begin(
        &self,
        kind: Begin,
        what: impl FnOnce() -> String,
    ) -> Result<Tx<'_>, Error> {
        self.conn
            .borrow_mut()
            .begin(kind)
            .during(&self.location, what)?;
        Ok(Tx {
            conn: &self.conn,
            store: &self.location,
            open: true,
        })
    }

    /// Starts a read transaction: the queries of one read see one snapshot.
    pub(crate) fn read(&self) -> Result<Tx<'_>, Error> {
        self.begin(Begin::Read, || "starting a read transaction".to_owned())
    }

    /// Makes everything committed so far durable against a power cut: every commit is
    /// durable against the process's death already (a `kill -9` loses no stored run), and
    /// SQLite syncs its journal to the disk here rather than at every commit. The runner
    /// calls it about once a second and when an experiment ends.
    pub fn sync(&self) -> Result<(), Error> {
        self.conn
            .borrow_mut()
            .sync()
            .during(&self.location, || "syncing the store to the disk".into())
    }

    /// Where the store lives: its path as given to [`Store::open`], its URL with the
    /// password hidden, or `:memory:`.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The schema version of the store (equal to [`crate::SCHEMA_VERSION`] once open).
    pub fn schema_version(&self) -> Result<u32, Error> {
        self.conn
            .borrow_mut()
            .identity()
            .map(|identity| identity.version)
            .during(&self.location, || "reading the schema version".into())
    }
}

/// An open transaction on the store's connection, rolled back when dropped uncommitted
/// (an error returned half-way through a write leaves nothing of it).
pub(crate) struct Tx<'s> {
    conn: &'s RefCell<Box<dyn Connection>>,
    store: &'s str,
    open: bool,
}

impl<'s> Tx<'s> {
    /// Queries inside the transaction.
    pub(crate) fn db(&self) -> Db<'s> {
        Db::new(self.conn, self.store)
    }

    pub(crate) fn commit(mut self, what: impl FnOnce() -> String) -> Result<(), Error> {
        self.open = false;
        let mut conn = self.conn.borrow_mut();
        let committed = conn.commit();
        if committed.is_err() {
            // Best effort: the error that matters is the commit's.
            let _ = conn.rollback();
        }
        committed.during(self.store, what)
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.open {
            // Best effort: a connection that is gone has rolled back on its own.
            let _ = self.conn.borrow_mut().rollback();
        }
    }
}

/// The store's connection (inside a transaction or not) and its location, which every
/// error names: what the queries below run on.
#[derive(Clone, Copy)]
pub(crate) struct Db<'c> {
    conn: &'c RefCell<Box<dyn Connection>>,
    store: &'c str,
}

impl<'c> Db<'c> {
    fn new(conn: &'c RefCell<Box<dyn Connection>>, store: &'c str) -> Db<'c> {
        Db { conn, store }
    }

    /// Runs a statement; returns how many rows it changed. A backend error names `what`.
    pub(crate) fn execute(
        self,
        sql: &str,
        args: &[Value],
        what: impl FnOnce() -> String,
    ) -> Result<u64, Error> {
        self.conn
            .borrow_mut()
            .execute(sql, args)
            .during(self.store, what)
    }

    /// Runs `f` on the connection itself (for work of several statements that the
    /// migrations share); a backend error names `what`.
    pub(crate) fn with_connection<T>(
        self,
        what: impl FnOnce() -> String,
        f: impl FnOnce(&mut dyn Connection) -> Result<T, BackendError>,
    ) -> Result<T, Error> {
        let mut conn = self.conn.borrow_mut();
        f(conn.as_mut()).during(self.store, what)
    }

    /// Runs a query that returns exactly one row, read by `get`; a backend error names
    /// `what`.
    pub(crate) fn query_one<T>(
        self,
        sql: &str,
        args: &[Value],
        what: impl FnOnce() -> String,
        get: impl FnOnce(&Row) -> Result<T, BackendError>,
    ) -> Result<T, Error> {
        let rows = self.conn.borrow_mut().query(sql, args);
        rows.and_then(|rows| match rows.first() {
            Some(row) => get(row),
            None => Err(BackendError::message(
                "the query returned no row".to_owned(),
            )),
        })
        .during(self.store, what)
    }

    /// Runs a query that returns at most one row, read by `get`; a backend error names
    /// `what`.
    pub(crate) fn query_optional<T>(
        self,
        sql: &str,
        args: &[Value],
        what: impl FnOnce() -> String,
        get: impl FnOnce(&Row) -> Result<T, BackendError>,
    ) -> Result<Option<T>, Error> {
        let rows = self.conn.borrow_mut().query(sql, args);
        rows.and_then(|rows| rows.first().map(get).transpose())
            .during(self.store, what)
    }

    /// Runs a query and reads every row whole, in order: as a tuple of its columns in
    /// `SELECT` order, or a [`RawRun`]. A backend error names `what`.
    pub(crate) fn query_rows<R: FromRow>(
        self,
        sql: &str,
        args: &[Value],
        what: impl Fn() -> String,
    ) -> Result<Vec<R>, Error> {
        self.decode_rows(sql, args, what, Ok)
    }

    /// [`Db::query_rows`], turning each row into a value with `decode` (which reports
    /// stored values it cannot read back as [`Error::Corrupt`]) as soon as it is read: the
    /// first error of either kind stops the query.
    pub(crate) fn decode_rows<R: FromRow, T>(
        self,
        sql: &str,
        args: &[Value],
        what: impl Fn() -> String,
        mut decode: impl FnMut(R) -> Result<T, Error>,
    ) -> Result<Vec<T>, Error> {
        let mut out = Vec::new();
        self.decode_each(sql, args, what, |row| {
            out.push(decode(row)?);
            Ok(())
        })?;
        Ok(out)
    }

    /// Runs `sql` and hands each row, read as an `R`, to `each`, in order; an error of
    /// `each` (a store error) stops the query and is returned as it is.
    pub(crate) fn decode_each<R: FromRow>(
        self,
        sql: &str,
        args: &[Value],
        what: impl Fn() -> String,
        mut each: impl FnMut(R) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let store = self.store;
        let mut undecoded: Option<Error> = None;
        let read = self.conn.borrow_mut().query_each(sql, args, &mut |row| {
            let row = R::from_owned_row(row)?;
            each(row).map_err(|e| {
                undecoded = Some(e);
                BackendError::message("stopped: a row could not be decoded".to_owned())
            })
        });
        if let Some(e) = undecoded {
            return Err(e);
        }
        read.during(store, &what)?;
        Ok(())
    }
}

/// Where each record sits in `records`, by its id: for [`attach`].
fn positions<R>(records: &[R], id: impl Fn(&R) -> i64) -> HashMap<i64, usize> {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| (id(r), i))
        .collect()
}

/// Appends each `(owner id, item)` row to the list `list` picks in its owner, keeping the
/// rows' order; `slot` comes from [`positions`]. Rows of owners not in `slot` are skipped.
fn attach<O, T, C>(
    owners: &mut [O],
    slot: &HashMap<i64, usize>,
    rows: impl IntoIterator<Item = (i64, T)>,
    list: impl Fn(&mut O) -> &mut C,
) where
    C: Extend<T>,
{
    for (owner, item) in rows {
        if let Some(o) = slot.get(&owner).and_then(|&i| owners.get_mut(i)) {
            list(o).extend(std::iter::once(item));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        CellId, ExperimentId, LoadInterval, MetricValue, NewCell, NewExperiment, NewRun, RunStatus,
        Series,
    };
    use isolab_stats::Direction;
    use std::time::UNIX_EPOCH;

    impl Store {
        /// Runs SQL on the store directly: how these tests damage it.
        fn raw(&self, sql: &str) {
            self.conn.borrow_mut().batch(sql).unwrap();
        }
    }

    fn store_with_cell() -> (Store, ExperimentId, CellId) {
        let mut store = Store::open_in_memory().unwrap();
        let id = store
            .create_experiment(&NewExperiment {
                name: "t".into(),
                spec_toml: String::new(),
                spec_path: None,
                seed: 0,
                isolab_version: "0".into(),
                created_at: UNIX_EPOCH,
                cells: vec![NewCell {
                    index: 0,
                    key: "platform=host".into(),
                    levels: vec![("platform".into(), "host".into())],
                }],
                environment: vec![],
            })
            .unwrap();
        let cell = store.cells(id).unwrap()[0].id;
        (store, id, cell)
    }

    fn bare_run(cell: CellId, metrics: Vec<MetricValue>) -> NewRun {
        NewRun {
            cell,
            repetition: 0,
            warmup: false,
            round: 0,
            status: RunStatus::Ok,
            exit_code: None,
            started_at: UNIX_EPOCH,
            wall: Duration::ZERO,
            stdout: String::new(),
            stderr: String::new(),
            error: None,
            limits: serde_json::Value::Null,
            metrics,
            telemetry: vec![("psi_some_avg10".to_string(), f64::NAN)].into(),
            series: vec![],
            intervals: vec![],
            notes: vec![],
        }
    }

    #[test]
    fn nan_and_infinite_values_are_kept() {
        let (mut store, id, cell) = store_with_cell();
        let metric = |value| MetricValue {
            name: "m".into(),
            unit: "s".into(),
            direction: Direction::Lower,
            value,
        };
        store
            .insert_run(&bare_run(
                cell,
                vec![metric(f64::NAN), metric(f64::INFINITY)],
            ))
            .unwrap();
        let runs = store.runs(id).unwrap();
        assert!(runs[0].metrics[0].value.is_nan());
        assert_eq!(runs[0].metrics[1].value, f64::INFINITY);
        assert!(runs[0].telemetry.as_rows()[0].1.is_nan());
        assert_eq!(*runs[0].limits, serde_json::Value::Null);
        assert_eq!(runs[0].exit_code, None);
        assert!(store.series(runs[0].id).unwrap().is_empty());
    }

    #[test]
    fn a_bad_direction_names_its_row() {
        let (mut store, id, cell) = store_with_cell();
        let run = store
            .insert_run(&bare_run(
                cell,
                vec![MetricValue {
                    name: "m".into(),
                    unit: "s".into(),
                    direction: Direction::Lower,
                    value: 1.0,
                }],
            ))
            .unwrap();
        store.raw("UPDATE metrics SET direction = 'sideways'");
        let err = store.runs(id).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(
            err,
            Error::Corrupt {
                table: "metrics",
                column: "direction",
                ..
            }
        ));
        assert!(msg.contains(&format!("run_id {run}, position 0")), "{msg}");
        assert!(msg.contains("`sideways`"), "{msg}");
        assert!(store.observations(id).is_err());
    }

    #[test]
    fn a_bad_status_names_its_row() {
        let (mut store, id, cell) = store_with_cell();
        let run = store.insert_run(&bare_run(cell, vec![])).unwrap();
        store.raw("UPDATE runs SET status = 'meh'");
        let err = store.runs(id).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("table `runs` (id {run}), column `status`")),
            "{err}"
        );

        store.raw("UPDATE experiments SET status = 'done'");
        assert!(matches!(
            store.experiment(id).unwrap_err(),
            Error::Corrupt {
                table: "experiments",
                column: "status",
                ..
            }
        ));
        assert!(store.experiments().is_err());
    }

    #[test]
    fn bad_json_seed_and_points_are_reported() {
        let (mut store, id, cell) = store_with_cell();
        let mut new = bare_run(cell, vec![]);
        new.series = vec![Series {
            name: "s".into(),
            unit: "u".into(),
            points: vec![(0.0, 1.0)],
        }];
        let run = store.insert_run(&new).unwrap();

        store.raw("UPDATE series SET points = x'0102'");
        let err = store.series(run).unwrap_err();
        assert!(err.to_string().contains("2 bytes"), "{err}");

        store.raw("UPDATE runs SET limits_json = '{'");
        assert!(matches!(
            store.runs(id).unwrap_err(),
            Error::Corrupt {
                column: "limits_json",
                ..
            }
        ));

        store.raw("UPDATE experiments SET seed = '-1'");
        assert!(matches!(
            store.experiment(id).unwrap_err(),
            Error::Corrupt { column: "seed", .. }
        ));
    }

    #[test]
    fn a_negative_count_names_its_interval() {
        let (mut store, _, cell) = store_with_cell();
        let mut new = bare_run(cell, vec![]);
        new.intervals = vec![LoadInterval {
            target_rate: Some(50.0),
            requests: 50,
            ..LoadInterval::new("home", 3.0)
        }];
        let run = store.insert_run(&new).unwrap();
        assert_eq!(store.intervals(run).unwrap(), new.intervals);
        store.raw("UPDATE load_intervals SET failures = -2");
        let msg = store.intervals(run).unwrap_err().to_string();
        assert!(
            msg.contains(&format!(
                "table `load_intervals` (run_id {run}, request `home`, start_s 3), column `failures`: `-2`"
            )),
            "{msg}"
        );
    }

    #[test]
    fn sql_errors_name_the_operation() {
        let (mut store, _, cell) = store_with_cell();
        store.raw("DROP TABLE run_notes");
        let mut new = bare_run(cell, vec![]);
        new.repetition = 4;
        new.notes = vec!["n".into()];
        let err = store.insert_run(&new).unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("storing run 4 of cell"), "{msg}");
        assert!(msg.contains("inserting notes"), "{msg}");
        assert!(msg.contains(":memory:"), "{msg}");
        // Rolled back: the run row is gone with the failed transaction.
        let runs: i64 = store
            .db()
            .query_one("SELECT count(*) FROM runs", &[], String::new, |r| r.get(0))
            .unwrap();
        assert_eq!(runs, 0);
    }
}
