//! [`Store`]: the results store's API, on either backend.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Display;
use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use isolab_stats::Direction;

use crate::backend::postgres::{self, Postgres};
use crate::backend::sqlite::Sqlite;
use crate::backend::{args, Begin, Connection, FromRow, Row, Value};
use crate::encoding::{
    count_to_sql, decode_points, duration_to_nanos, encode_points, millis_to_time,
    nanos_to_duration, optional_real_to_sql, real_to_sql, sql_to_real, time_to_millis,
};
use crate::error::{BackendError, Context, Error, Kind};
use crate::model::{
    CellId, CellRecord, ExperimentId, ExperimentRecord, ExperimentStatus, ExperimentSummary,
    Interruption, IntervalObservation, LoadInterval, MetricValue, NewCell, NewExperiment, NewRun,
    Observation, Pace, RunId, RunRecord, RunStatus, Series,
};
use crate::schema;

/// An experiment [`Store::copy_experiment`] copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copied {
    /// Its id in the store it was copied to.
    pub id: ExperimentId,
    /// How many runs (warm-ups and failures included) it holds.
    pub runs: usize,
}

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

/// Which row of which table a decoded value came from, for [`Error::Corrupt`].
pub(crate) struct At {
    table: &'static str,
    row: String,
}

impl At {
    pub(crate) fn new(table: &'static str, row: impl Into<String>) -> At {
        At {
            table,
            row: row.into(),
        }
    }

    pub(crate) fn corrupt(
        &self,
        column: &'static str,
        value: impl Display,
        reason: impl Display,
    ) -> Error {
        Error::Corrupt {
            table: self.table,
            row: self.row.clone(),
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

/// The columns of `load_intervals` after `run_id`, in the order [`RawInterval`] reads them.
const INTERVAL_COLUMNS: &str = "request, start_s, users, target_rate, requests, failures, \
     latency_mean_ms, latency_p50_ms, latency_p90_ms, latency_p99_ms, latency_max_ms";

/// A `load_intervals` row as read, before decoding.
struct RawInterval {
    request: String,
    start_s: f64,
    users: Option<f64>,
    target_rate: Option<f64>,
    requests: i64,
    failures: i64,
    latency_ms: [Option<f64>; 5],
}

impl RawInterval {
    /// Reads [`INTERVAL_COLUMNS`] starting at column `first`.
    fn read(r: &Row, first: usize) -> Result<RawInterval, BackendError> {
        Ok(RawInterval {
            request: r.get(first)?,
            start_s: r.get(first + 1)?,
            users: r.get(first + 2)?,
            target_rate: r.get(first + 3)?,
            requests: r.get(first + 4)?,
            failures: r.get(first + 5)?,
            latency_ms: [
                r.get(first + 6)?,
                r.get(first + 7)?,
                r.get(first + 8)?,
                r.get(first + 9)?,
                r.get(first + 10)?,
            ],
        })
    }

    fn decode(self, run: RunId) -> Result<LoadInterval, Error> {
        let at = At::new(
            "load_intervals",
            format!(
                "run_id {run}, request `{}`, start_s {}",
                self.request, self.start_s
            ),
        );
        let [mean, p50, p90, p99, max] = self.latency_ms;
        Ok(LoadInterval {
            requests: at.count("requests", self.requests)?,
            failures: at.count("failures", self.failures)?,
            request: self.request,
            start_s: self.start_s,
            users: self.users,
            target_rate: self.target_rate,
            latency_mean_ms: mean,
            latency_p50_ms: p50,
            latency_p90_ms: p90,
            latency_p99_ms: p99,
            latency_max_ms: max,
        })
    }
}

/// `(run id, interval row)` as selected by `SELECT run_id, INTERVAL_COLUMNS`.
struct RunInterval(RunId, RawInterval);

impl FromRow for RunInterval {
    fn from_row(r: &Row) -> Result<RunInterval, BackendError> {
        Ok(RunInterval(r.get(0)?, RawInterval::read(r, 1)?))
    }
}

/// A run row as read, before decoding.
struct RawRun {
    id: i64,
    cell: i64,
    repetition: i64,
    warmup: i64,
    round: i64,
    status: String,
    exit_code: Option<i64>,
    started_at_ms: i64,
    wall_ns: i64,
    error: Option<String>,
    limits_json: String,
}

impl FromRow for RawRun {
    /// Reads the columns `id, cell_id, repetition, warmup, round, status, exit_code,
    /// started_at_ms, wall_ns, error, limits_json`, in this order.
    fn from_row(r: &Row) -> Result<RawRun, BackendError> {
        Ok(RawRun {
            id: r.get(0)?,
            cell: r.get(1)?,
            repetition: r.get(2)?,
            warmup: r.get(3)?,
            round: r.get(4)?,
            status: r.get(5)?,
            exit_code: r.get(6)?,
            started_at_ms: r.get(7)?,
            wall_ns: r.get(8)?,
            error: r.get(9)?,
            limits_json: r.get(10)?,
        })
    }
}

impl RawRun {
    fn decode(self) -> Result<RunRecord, Error> {
        let at = At::new("runs", format!("id {}", self.id));
        let exit_code = match self.exit_code {
            None => None,
            Some(code) => Some(
                i32::try_from(code)
                    .map_err(|_| at.corrupt("exit_code", code, "expected a 32-bit exit code"))?,
            ),
        };
        Ok(RunRecord {
            id: self.id,
            cell: self.cell,
            repetition: at.u32("repetition", self.repetition)?,
            warmup: at.bool("warmup", self.warmup)?,
            round: at.u32("round", self.round)?,
            status: at.parse("status", &self.status)?,
            exit_code,
            started_at: at.time("started_at_ms", self.started_at_ms)?,
            wall: at.duration("wall_ns", self.wall_ns)?,
            error: self.error,
            limits: at.json("limits_json", &self.limits_json)?,
            metrics: Vec::new(),
            telemetry: crate::TelemetrySet::new(),
            notes: Vec::new(),
        })
    }
}

fn kind(warmup: bool) -> &'static str {
    if warmup {
        "warm-up run"
    } else {
        "run"
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

    /// Creates an experiment, its cells (with their levels) and its environment in one
    /// transaction, with status `running`.
    pub fn create_experiment(&mut self, e: &NewExperiment) -> Result<ExperimentId, Error> {
        let what = || format!("creating experiment `{}`", e.name);
        let tx = self.begin(Begin::Write, what)?;
        let id = create_experiment(tx.db(), e)?;
        tx.commit(what)?;
        Ok(id)
    }

    /// Resolves `"12"` (an id) or a name (the newest experiment with that name) to an id.
    /// A number that is no experiment's id is tried as a name.
    pub fn resolve(&self, id_or_name: &str) -> Result<ExperimentId, Error> {
        let wanted = id_or_name.trim();
        if let Ok(id) = wanted.parse::<ExperimentId>() {
            if experiment_exists(self.db(), id)? {
                return Ok(id);
            }
        }
        let by_name: Option<ExperimentId> = self.db().query_optional(
            "SELECT id FROM experiments WHERE name = ?1 ORDER BY id DESC LIMIT 1",
            &args![wanted],
            || format!("looking up experiment `{wanted}`"),
            |row| row.get(0),
        )?;
        match by_name {
            Some(id) => Ok(id),
            None => Err(missing_experiment(self.db(), wanted)),
        }
    }

    /// The experiment with this id.
    pub fn experiment(&self, id: ExperimentId) -> Result<ExperimentRecord, Error> {
        type Raw = (
            String,
            String,
            Option<String>,
            String,
            String,
            i64,
            Option<i64>,
            String,
        );
        let raw: Option<Raw> = self.db().query_optional(
            "SELECT name, spec_toml, spec_path, seed, isolab_version, created_at_ms, \
             finished_at_ms, status FROM experiments WHERE id = ?1",
            &args![id],
            || format!("reading experiment {id}"),
            Raw::from_row,
        )?;
        let Some((name, spec_toml, spec_path, seed, isolab_version, created, finished, status)) =
            raw
        else {
            return Err(missing_experiment(self.db(), &id.to_string()));
        };
        let at = At::new("experiments", format!("id {id}"));
        Ok(ExperimentRecord {
            id,
            name,
            spec_toml,
            spec_path,
            seed: at.parse("seed", &seed)?,
            isolab_version,
            created_at: at.time("created_at_ms", created)?,
            finished_at: finished
                .map(|ms| at.time("finished_at_ms", ms))
                .transpose()?,
            status: at.parse("status", &status)?,
        })
    }

    /// Every experiment, newest first, with its number of cells and of counted runs.
    pub fn experiments(&self) -> Result<Vec<ExperimentSummary>, Error> {
        self.db().decode_rows(
            "SELECT e.id, e.name, e.status, e.created_at_ms, \
             (SELECT count(*) FROM cells c WHERE c.experiment_id = e.id), \
             (SELECT count(*) FROM runs r WHERE r.experiment_id = e.id \
              AND r.warmup = 0 AND r.status = ?1) \
             FROM experiments e ORDER BY e.id DESC",
            &args![RunStatus::Ok.as_str()],
            || "listing experiments".to_owned(),
            |row: (i64, String, String, i64, i64, i64)| {
                let (id, name, status, created, cells, runs) = row;
                let at = At::new("experiments", format!("id {id}"));
                Ok(ExperimentSummary {
                    id,
                    name,
                    status: at.parse("status", &status)?,
                    created_at: at.time("created_at_ms", created)?,
                    cells: u32::try_from(cells).unwrap_or(u32::MAX),
                    runs: u32::try_from(runs).unwrap_or(u32::MAX),
                })
            },
        )
    }

    /// Sets an experiment's status. Leaving `running` records `at` as its finish time;
    /// going back to `running` (a resume) clears it.
    pub fn set_status(
        &mut self,
        id: ExperimentId,
        status: ExperimentStatus,
        at: SystemTime,
    ) -> Result<(), Error> {
        let finished = (status != ExperimentStatus::Running).then(|| time_to_millis(at));
        let changed = self.db().execute(
            "UPDATE experiments SET status = ?2, finished_at_ms = ?3 WHERE id = ?1",
            &args![id, status.as_str(), finished],
            || format!("setting the status of experiment {id} to {status}"),
        )?;
        if changed == 0 {
            return Err(missing_experiment(self.db(), &id.to_string()));
        }
        Ok(())
    }

    /// The cells of an experiment with their levels, ordered by index.
    pub fn cells(&self, id: ExperimentId) -> Result<Vec<CellRecord>, Error> {
        let tx = self.read()?;
        let db = tx.db();
        ensure_experiment(db, id)?;
        read_cells(db, id)
    }

    /// Records why the runner stopped repeating a cell (e.g. `cv 0.031 <= 0.05 after 7 runs`).
    pub fn set_stop_reason(&mut self, cell: CellId, reason: &str) -> Result<(), Error> {
        let changed = self.db().execute(
            "UPDATE cells SET stop_reason = ?2 WHERE id = ?1",
            &args![cell, reason],
            || format!("setting the stop reason of cell {cell}"),
        )?;
        if changed == 0 {
            return Err(Error::NoSuchCell {
                cell,
                experiment: None,
                context: "cannot set its stop reason".to_owned(),
            });
        }
        Ok(())
    }

    /// Stores a run in one transaction: the run row, its metrics, scalar telemetry, time
    /// series, load intervals, notes and logs. Either all of it is stored or nothing is.
    ///
    /// `(cell, warmup, repetition)` is unique: storing it a second time fails with
    /// [`Error::DuplicateRun`] and keeps the first. Within the run, `(request, start_s)` of
    /// its load intervals is unique and `start_s` must be a number: a run that breaks
    /// either is not stored ([`Error::Sql`] names the interval).
    pub fn insert_run(&mut self, run: &NewRun) -> Result<RunId, Error> {
        let what = || {
            format!(
                "storing {} {} of cell {}",
                kind(run.warmup),
                run.repetition,
                run.cell
            )
        };
        let tx = self.begin(Begin::Write, || {
            format!("{}: starting a transaction", what())
        })?;
        let id = insert_run(tx.db(), run)?;
        tx.commit(|| format!("{}: committing", what()))?;
        Ok(id)
    }

    /// [`Store::insert_run`], retried while the connection to the database server is
    /// lost (a PostgreSQL restart, a network failure), for up to `patience`, with pauses
    /// growing from a quarter second to five: a measured run is not thrown away because
    /// the network blinked. A failed attempt stored nothing (its transaction died with the
    /// connection), except when only the answer to its commit was lost: then the retry
    /// finds the run stored, with its start time, and returns its id.
    pub fn insert_run_patiently(
        &mut self,
        run: &NewRun,
        patience: Duration,
    ) -> Result<RunId, Error> {
        let deadline = std::time::Instant::now() + patience;
        let mut pause = Duration::from_millis(250);
        let mut lost = false;
        loop {
            match self.insert_run(run) {
                Err(e) if e.is_connection_lost() && std::time::Instant::now() < deadline => {
                    lost = true;
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
                Err(Error::DuplicateRun { .. }) if lost => {
                    let stored: Option<(RunId, i64)> = self.db().query_optional(
                        "SELECT id, started_at_ms FROM runs \
                         WHERE cell_id = ?1 AND warmup = ?2 AND repetition = ?3",
                        &args![run.cell, run.warmup, run.repetition],
                        || format!("looking up run {} of cell {}", run.repetition, run.cell),
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )?;
                    match stored {
                        Some((id, started)) if started == time_to_millis(run.started_at) => {
                            return Ok(id)
                        }
                        _ => return self.insert_run(run),
                    }
                }
                other => return other,
            }
        }
    }

    /// Records an interrupted or killed attempt at `(cell, warmup, repetition)`. It is kept
    /// for the record and does not count as a run: the repetition can still be stored.
    pub fn record_interruption(&mut self, i: &Interruption) -> Result<(), Error> {
        record_interruption(self.db(), i)
    }

    /// Copies experiment `id` with everything stored about it (environment, cells and
    /// their stop reasons, every run with its metrics, telemetry, series, load intervals,
    /// notes and logs, interruptions, status and times) into the store `to`, in one
    /// transaction there: the copy is whole or absent, and this store is only read. Ids
    /// are `to`'s own; the new experiment's id is returned with how many runs it holds.
    ///
    /// Refuses an experiment `to` already holds (same name, seed and creation time), so
    /// that copying twice never doubles its runs ([`Error::AlreadyCopied`]).
    pub fn copy_experiment(&self, id: ExperimentId, to: &mut Store) -> Result<Copied, Error> {
        let e = self.experiment(id)?;
        let environment = self.environment(id)?;
        let cells = self.cells(id)?;
        let runs = self.runs(id)?;
        let interruptions = self.interruptions(id)?;
        let what = || {
            format!(
                "copying experiment {id} (`{}`) from {} to {}",
                e.name, self.location, to.location
            )
        };
        let tx = to.begin(Begin::Write, what)?;
        let db = tx.db();
        let existing: Option<ExperimentId> = db.query_optional(
            "SELECT id FROM experiments \
             WHERE name = ?1 AND seed = ?2 AND created_at_ms = ?3 ORDER BY id LIMIT 1",
            &args![e.name, e.seed.to_string(), time_to_millis(e.created_at)],
            what,
            |r| r.get(0),
        )?;
        if let Some(existing) = existing {
            return Err(Error::AlreadyCopied {
                experiment: id,
                name: e.name.clone(),
                store: to.location.clone(),
                existing,
            });
        }
        let copy = create_experiment(
            db,
            &NewExperiment {
                name: e.name.clone(),
                spec_toml: e.spec_toml.clone(),
                spec_path: e.spec_path.clone(),
                seed: e.seed,
                isolab_version: e.isolab_version.clone(),
                created_at: e.created_at,
                cells: cells
                    .iter()
                    .map(|c| NewCell {
                        index: c.index,
                        key: c.key.clone(),
                        levels: c.levels.clone(),
                    })
                    .collect(),
                environment,
            },
        )?;
        let by_index: HashMap<u32, CellId> = read_cells(db, copy)?
            .into_iter()
            .map(|c| (c.index, c.id))
            .collect();
        let new_cell: HashMap<CellId, CellId> = cells
            .iter()
            .filter_map(|c| by_index.get(&c.index).map(|&new| (c.id, new)))
            .collect();
        let cell_of = |old: CellId| {
            new_cell.get(&old).copied().ok_or(Error::NoSuchCell {
                cell: old,
                experiment: Some(id),
                context: "a run or interruption names it, but the experiment has no such cell"
                    .to_owned(),
            })
        };
        for c in &cells {
            if let Some(reason) = &c.stop_reason {
                db.execute(
                    "UPDATE cells SET stop_reason = ?2 WHERE id = ?1",
                    &args![cell_of(c.id)?, reason],
                    what,
                )?;
            }
        }
        for r in &runs {
            let (stdout, stderr) = self.run_logs(r.id)?;
            insert_run(
                db,
                &NewRun {
                    cell: cell_of(r.cell)?,
                    repetition: r.repetition,
                    warmup: r.warmup,
                    round: r.round,
                    status: r.status,
                    exit_code: r.exit_code,
                    started_at: r.started_at,
                    wall: r.wall,
                    stdout,
                    stderr,
                    error: r.error.clone(),
                    limits: r.limits.clone(),
                    metrics: r.metrics.clone(),
                    telemetry: r.telemetry.clone(),
                    series: self.series(r.id)?,
                    intervals: self.intervals(r.id)?,
                    notes: r.notes.clone(),
                },
            )?;
        }
        for i in &interruptions {
            record_interruption(
                db,
                &Interruption {
                    experiment: copy,
                    cell: cell_of(i.cell)?,
                    ..i.clone()
                },
            )?;
        }
        db.execute(
            "UPDATE experiments SET status = ?2, finished_at_ms = ?3 WHERE id = ?1",
            &args![copy, e.status.as_str(), e.finished_at.map(time_to_millis)],
            what,
        )?;
        tx.commit(what)?;
        Ok(Copied {
            id: copy,
            runs: runs.len(),
        })
    }

    /// The interruptions recorded for an experiment, in the order they were recorded.
    pub fn interruptions(&self, id: ExperimentId) -> Result<Vec<Interruption>, Error> {
        let tx = self.read()?;
        let db = tx.db();
        ensure_experiment(db, id)?;
        db.decode_rows(
            "SELECT id, cell_id, repetition, warmup, at_ms, reason FROM interruptions \
             WHERE experiment_id = ?1 ORDER BY id",
            &args![id],
            || format!("reading the interruptions of experiment {id}"),
            |row: (i64, i64, i64, i64, i64, String)| {
                let (row_id, cell, repetition, warmup, at_ms, reason) = row;
                let at = At::new("interruptions", format!("id {row_id}"));
                Ok(Interruption {
                    experiment: id,
                    cell,
                    repetition: at.u32("repetition", repetition)?,
                    warmup: at.bool("warmup", warmup)?,
                    at: at.time("at_ms", at_ms)?,
                    reason,
                })
            },
        )
    }

    /// Every run of an experiment (warm-ups and failures included) with its metrics,
    /// telemetry and notes, ordered by id. Logs and series are read separately.
    pub fn runs(&self, id: ExperimentId) -> Result<Vec<RunRecord>, Error> {
        let what = || format!("reading the runs of experiment {id}");
        let tx = self.read()?;
        let db = tx.db();
        ensure_experiment(db, id)?;

        let mut runs = db.decode_rows(
            "SELECT id, cell_id, repetition, warmup, round, status, exit_code, \
             started_at_ms, wall_ns, error, limits_json FROM runs \
             WHERE experiment_id = ?1 ORDER BY id",
            &args![id],
            what,
            RawRun::decode,
        )?;
        let slot = positions(&runs, |r| r.id);
        // Each query below walks the experiment's runs in id order (the index
        // `runs_by_experiment`) and each run's rows by position (their primary key): in
        // that order SQLite needs no sort; ordered by the child's `run_id` instead, it
        // sorted every row first (three times slower over a million telemetry rows).

        let metrics = db.decode_rows(
            "SELECT m.run_id, m.position, m.name, m.unit, m.direction, m.value \
             FROM runs r JOIN metrics m ON m.run_id = r.id \
             WHERE r.experiment_id = ?1 ORDER BY r.id, m.position",
            &args![id],
            what,
            |row: (RunId, i64, String, String, String, Option<f64>)| {
                let (run, position, name, unit, direction, value) = row;
                let at = At::new("metrics", format!("run_id {run}, position {position}"));
                let metric = MetricValue {
                    name,
                    unit,
                    direction: at.parse::<Direction>("direction", &direction)?,
                    value: sql_to_real(value),
                };
                Ok((run, metric))
            },
        )?;
        attach(&mut runs, &slot, metrics, |r| &mut r.metrics);

        let telemetry: Vec<(RunId, String, Option<f64>)> = db.query_rows(
            "SELECT t.run_id, t.key, t.value FROM runs r \
             JOIN telemetry t ON t.run_id = r.id \
             WHERE r.experiment_id = ?1 ORDER BY r.id, t.position",
            &args![id],
            what,
        )?;
        let telemetry = telemetry
            .into_iter()
            .map(|(run, key, value)| (run, (key, sql_to_real(value))));
        attach(&mut runs, &slot, telemetry, |r| &mut r.telemetry);

        let notes: Vec<(RunId, String)> = db.query_rows(
            "SELECT n.run_id, n.note FROM runs r JOIN run_notes n ON n.run_id = r.id \
             WHERE r.experiment_id = ?1 ORDER BY r.id, n.position",
            &args![id],
            what,
        )?;
        attach(&mut runs, &slot, notes, |r| &mut r.notes);
        Ok(runs)
    }

    /// The standard output and standard error captured during a run.
    pub fn run_logs(&self, run: RunId) -> Result<(String, String), Error> {
        self.db()
            .query_optional(
                "SELECT stdout, stderr FROM run_logs WHERE run_id = ?1",
                &args![run],
                || format!("reading the logs of run {run}"),
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?
            .ok_or(Error::NoSuchRun { run })
    }

    /// The time series sampled during a run, in recorded order.
    pub fn series(&self, run: RunId) -> Result<Vec<Series>, Error> {
        let what = || format!("reading the series of run {run}");
        self.read_run(run, |db| {
            db.decode_rows(
                "SELECT position, name, unit, points FROM series WHERE run_id = ?1 \
                 ORDER BY position",
                &args![run],
                what,
                |row: (i64, String, String, Vec<u8>)| {
                    let (position, name, unit, blob) = row;
                    let points = decode_points(&blob).ok_or_else(|| {
                        At::new("series", format!("run_id {run}, position {position}")).corrupt(
                            "points",
                            format!("{} bytes", blob.len()),
                            "expected a whole number of 16-byte points",
                        )
                    })?;
                    Ok(Series { name, unit, points })
                },
            )
        })
    }

    /// The load intervals of a run, ordered by request, then start.
    pub fn intervals(&self, run: RunId) -> Result<Vec<LoadInterval>, Error> {
        let what = || format!("reading the load intervals of run {run}");
        self.read_run(run, |db| {
            db.decode_rows(
                &format!(
                    "SELECT run_id, {INTERVAL_COLUMNS} FROM load_intervals WHERE run_id = ?1 \
                     ORDER BY request, start_s"
                ),
                &args![run],
                what,
                |RunInterval(run, raw)| raw.decode(run),
            )
        })
    }

    /// Runs `read_it` in one read transaction once `run` is known to exist.
    fn read_run<T>(
        &self,
        run: RunId,
        read_it: impl FnOnce(Db<'_>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let tx = self.read()?;
        let db = tx.db();
        ensure_run(db, run)?;
        read_it(db)
    }

    /// How long runs took here before, per platform and workload (the levels of
    /// their cells): the time from each run's start to the start of the next run of
    /// the same experiment, its median over every stored experiment. A gap longer
    /// than [`Store::PACE_GAP`] beyond the run's own wall time (an interruption, a
    /// resume the next day) is left out, and so is each experiment's last run. Sorted
    /// by platform, then workload.
    pub fn run_pace(&self) -> Result<Vec<Pace>, Error> {
        // (experiment, started at in ms, wall in ns, platform, workload)
        type Started = (i64, i64, i64, Option<String>, Option<String>);
        let rows: Vec<Started> = self.db().query_rows(
            "SELECT r.experiment_id, r.started_at_ms, r.wall_ns, \
             (SELECT l.level FROM cell_levels l WHERE l.cell_id = r.cell_id AND l.factor = 'platform'), \
             (SELECT l.level FROM cell_levels l WHERE l.cell_id = r.cell_id AND l.factor = 'workload') \
             FROM runs r ORDER BY r.experiment_id, r.started_at_ms, r.id",
            &args![],
            || "reading when the stored runs started".to_owned(),
        )?;
        let mut gaps: BTreeMap<(String, String), Vec<i64>> = BTreeMap::new();
        for pair in rows.windows(2) {
            let (experiment, start, wall_ns, platform, workload) = &pair[0];
            let (next_experiment, next_start, ..) = &pair[1];
            let Some(workload) = workload else { continue };
            let gap = next_start - start;
            let limit = wall_ns / 1_000_000 + Self::PACE_GAP.as_millis() as i64;
            if next_experiment != experiment || gap < 0 || gap > limit {
                continue;
            }
            let platform = platform.clone().unwrap_or_else(|| "host".to_owned());
            gaps.entry((platform, workload.clone()))
                .or_default()
                .push(gap);
        }
        Ok(gaps
            .into_iter()
            .map(|((platform, workload), mut ms)| {
                ms.sort_unstable();
                let mid = ms.len() / 2;
                let median = if ms.len() % 2 == 1 {
                    ms[mid]
                } else {
                    (ms[mid - 1] + ms[mid]) / 2
                };
                Pace {
                    platform,
                    workload,
                    per_run: Duration::from_millis(median.max(0) as u64),
                    runs: ms.len(),
                }
            })
            .collect())
    }

    /// The longest pause between two runs that [`Store::run_pace`] counts as setup.
    pub const PACE_GAP: Duration = Duration::from_secs(300);

    /// One row per load interval of the experiment's counted runs (not warm-ups, status
    /// `ok`), with the cell's levels: what `isolab export --series` writes. Ordered by cell
    /// index, repetition, request, then start.
    pub fn interval_observations(
        &self,
        id: ExperimentId,
    ) -> Result<Vec<IntervalObservation>, Error> {
        let tx = self.read()?;
        let db = tx.db();
        ensure_experiment(db, id)?;
        // Most experiments have no load intervals: say so without reading every run.
        let any: Option<i64> = db.query_optional(
            "SELECT 1 FROM runs r JOIN load_intervals l ON l.run_id = r.id \
             WHERE r.experiment_id = ?1 LIMIT 1",
            &args![id],
            || format!("looking for load intervals of experiment {id}"),
            |r| r.get(0),
        )?;
        if any.is_none() {
            return Ok(Vec::new());
        }
        let cells: HashMap<CellId, CellRecord> =
            read_cells(db, id)?.into_iter().map(|c| (c.id, c)).collect();
        let runs: Vec<(RunId, CellId, i64)> = db.query_rows(
            "SELECT id, cell_id, repetition FROM runs \
             WHERE experiment_id = ?1 AND warmup = 0 AND status = ?2",
            &args![id, RunStatus::Ok.as_str()],
            || format!("reading the counted runs of experiment {id}"),
        )?;
        let runs: HashMap<RunId, (&CellRecord, u32)> = runs
            .into_iter()
            .filter_map(|(run, cell, repetition)| {
                let repetition = At::new("runs", format!("id {run}")).u32("repetition", repetition);
                cells.get(&cell).map(|c| repetition.map(|r| (run, (c, r))))
            })
            .collect::<Result<_, _>>()?;
        let rows = db.decode_rows(
            &format!(
                "SELECT l.run_id, {} FROM load_intervals l \
                 JOIN runs r ON r.id = l.run_id JOIN cells c ON c.id = r.cell_id \
                 WHERE r.experiment_id = ?1 AND r.warmup = 0 AND r.status = ?2 \
                 ORDER BY c.idx, r.repetition, r.id, l.request, l.start_s",
                qualified("l", INTERVAL_COLUMNS)
            ),
            &args![id, RunStatus::Ok.as_str()],
            || format!("reading the load intervals of experiment {id}"),
            |RunInterval(run, raw)| {
                let Some((cell, repetition)) = runs.get(&run) else {
                    // The join guarantees the run is a counted run of this experiment.
                    return Ok(None);
                };
                Ok(Some(IntervalObservation {
                    experiment: id,
                    run,
                    cell_index: cell.index,
                    levels: cell.levels.clone(),
                    repetition: *repetition,
                    interval: raw.decode(run)?,
                }))
            },
        )?;
        Ok(rows.into_iter().flatten().collect())
    }

    /// One row per metric value of the experiment's counted runs (not warm-ups, status
    /// `ok`), with the cell's levels: what `isolab export` writes. Ordered by cell index,
    /// repetition, then the metric's position in its run.
    pub fn observations(&self, id: ExperimentId) -> Result<Vec<Observation>, Error> {
        let tx = self.read()?;
        let db = tx.db();
        ensure_experiment(db, id)?;
        let cells: HashMap<CellId, CellRecord> =
            read_cells(db, id)?.into_iter().map(|c| (c.id, c)).collect();
        let rows = db.decode_rows(
            "SELECT r.id, r.cell_id, r.repetition, m.position, m.name, m.unit, \
             m.direction, m.value \
             FROM runs r JOIN cells c ON c.id = r.cell_id \
             JOIN metrics m ON m.run_id = r.id \
             WHERE r.experiment_id = ?1 AND r.warmup = 0 AND r.status = ?2 \
             ORDER BY c.idx, r.repetition, r.id, m.position",
            &args![id, RunStatus::Ok.as_str()],
            || format!("reading the observations of experiment {id}"),
            |row: (RunId, CellId, i64, i64, String, String, String, Option<f64>)| {
                let (run, cell, repetition, position, metric, unit, direction, value) = row;
                let Some(cell) = cells.get(&cell) else {
                    // The join guarantees the cell exists and belongs to this experiment.
                    return Ok(None);
                };
                let metric_at = At::new("metrics", format!("run_id {run}, position {position}"));
                Ok(Some(Observation {
                    experiment: id,
                    run,
                    cell_index: cell.index,
                    levels: cell.levels.clone(),
                    repetition: At::new("runs", format!("id {run}"))
                        .u32("repetition", repetition)?,
                    metric,
                    unit,
                    direction: metric_at.parse("direction", &direction)?,
                    value: sql_to_real(value),
                }))
            },
        )?;
        Ok(rows.into_iter().flatten().collect())
    }

    /// The environment captured for an experiment, in capture order.
    pub fn environment(&self, id: ExperimentId) -> Result<Vec<(String, String)>, Error> {
        let tx = self.read()?;
        let db = tx.db();
        ensure_experiment(db, id)?;
        db.query_rows(
            "SELECT key, value FROM environment WHERE experiment_id = ?1 ORDER BY position",
            &args![id],
            || format!("reading the environment of experiment {id}"),
        )
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
        let store = self.store;
        let mut out = Vec::new();
        // An error of `decode` (a store error) stops the query and is returned as it is.
        let mut undecoded: Option<Error> = None;
        let read = self.conn.borrow_mut().query_each(sql, args, &mut |row| {
            let row = R::from_owned_row(row)?;
            match decode(row) {
                Ok(v) => {
                    out.push(v);
                    Ok(())
                }
                Err(e) => {
                    undecoded = Some(e);
                    Err(BackendError::message(
                        "stopped: a row could not be decoded".to_owned(),
                    ))
                }
            }
        });
        if let Some(e) = undecoded {
            return Err(e);
        }
        read.during(store, &what)?;
        Ok(out)
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

/// [`Store::create_experiment`] inside the caller's write transaction.
pub(crate) fn create_experiment(db: Db<'_>, e: &NewExperiment) -> Result<ExperimentId, Error> {
    let what = || format!("creating experiment `{}`", e.name);
    let id: ExperimentId = db.query_one(
        "INSERT INTO experiments (name, spec_toml, spec_path, seed, isolab_version, \
         created_at_ms, finished_at_ms, status) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7) RETURNING id",
        &args![
            e.name,
            e.spec_toml,
            e.spec_path,
            e.seed.to_string(),
            e.isolab_version,
            time_to_millis(e.created_at),
            ExperimentStatus::Running.as_str(),
        ],
        what,
        |row| row.get(0),
    )?;
    for (position, (key, value)) in e.environment.iter().enumerate() {
        db.execute(
            "INSERT INTO environment (experiment_id, position, key, value) \
             VALUES (?1, ?2, ?3, ?4)",
            &args![id, position as i64, key, value],
            || {
                format!(
                    "storing environment entry `{key}` of experiment `{}`",
                    e.name
                )
            },
        )?;
    }
    for cell in &e.cells {
        let cell_what = || {
            format!(
                "storing cell {} (`{}`) of experiment `{}` (cell indexes and keys \
                 must be unique)",
                cell.index, cell.key, e.name
            )
        };
        let cell_id: CellId = db.query_one(
            "INSERT INTO cells (experiment_id, idx, key, stop_reason) \
             VALUES (?1, ?2, ?3, NULL) RETURNING id",
            &args![id, cell.index, cell.key],
            cell_what,
            |row| row.get(0),
        )?;
        for (position, (factor, level)) in cell.levels.iter().enumerate() {
            db.execute(
                "INSERT INTO cell_levels (cell_id, position, factor, level) \
                 VALUES (?1, ?2, ?3, ?4)",
                &args![cell_id, position as i64, factor, level],
                cell_what,
            )?;
        }
    }
    Ok(id)
}

/// [`Store::insert_run`] inside the caller's write transaction.
fn insert_run(db: Db<'_>, run: &NewRun) -> Result<RunId, Error> {
    let what = format!(
        "storing {} {} of cell {}",
        kind(run.warmup),
        run.repetition,
        run.cell
    );
    let step = |detail: &str| format!("{what}: {detail}");
    let limits = serde_json::to_string(&run.limits).map_err(|source| Error::Encode {
        operation: step("encoding its limits"),
        source,
    })?;
    let cell: Option<(ExperimentId, String)> = db.query_optional(
        "SELECT experiment_id, key FROM cells WHERE id = ?1",
        &args![run.cell],
        || step("reading its cell"),
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let Some((experiment, cell_key)) = cell else {
        return Err(Error::NoSuchCell {
            cell: run.cell,
            experiment: None,
            context: format!("cannot store {} {} of it", kind(run.warmup), run.repetition),
        });
    };
    let duplicate = || Error::DuplicateRun {
        cell: run.cell,
        cell_key: cell_key.clone(),
        repetition: run.repetition,
        warmup: run.warmup,
    };
    let taken: bool = db.query_one(
        "SELECT EXISTS (SELECT 1 FROM runs \
         WHERE cell_id = ?1 AND warmup = ?2 AND repetition = ?3)",
        &args![run.cell, run.warmup, run.repetition],
        || step("checking for a stored duplicate"),
        |r| r.get(0),
    )?;
    if taken {
        return Err(duplicate());
    }
    let inserted: Result<RunId, Error> = db.query_one(
        "INSERT INTO runs (experiment_id, cell_id, repetition, warmup, round, status, \
         exit_code, started_at_ms, wall_ns, error, limits_json) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) RETURNING id",
        &args![
            experiment,
            run.cell,
            run.repetition,
            run.warmup,
            run.round,
            run.status.as_str(),
            run.exit_code,
            time_to_millis(run.started_at),
            duration_to_nanos(run.wall),
            run.error,
            limits,
        ],
        || step("inserting the run row"),
        |r| r.get(0),
    );
    let id = match inserted {
        // Another writer stored it since the check (PostgreSQL lets both in).
        Err(Error::Sql { source, .. }) if source.kind() == Kind::UniqueViolation => {
            return Err(duplicate())
        }
        other => other?,
    };
    for (position, m) in run.metrics.iter().enumerate() {
        db.execute(
            "INSERT INTO metrics (run_id, position, name, unit, direction, value) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            &args![
                id,
                position as i64,
                m.name,
                m.unit,
                m.direction.as_str(),
                real_to_sql(m.value),
            ],
            || step(&format!("inserting metric `{}`", m.name)),
        )?;
    }
    for (position, (key, value)) in run.telemetry.iter().enumerate() {
        db.execute(
            "INSERT INTO telemetry (run_id, position, key, value) \
             VALUES (?1, ?2, ?3, ?4)",
            &args![id, position as i64, key, real_to_sql(*value)],
            || step(&format!("inserting telemetry `{key}`")),
        )?;
    }
    for (position, series) in run.series.iter().enumerate() {
        db.execute(
            "INSERT INTO series (run_id, position, name, unit, points) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
            &args![
                id,
                position as i64,
                series.name,
                series.unit,
                encode_points(&series.points)
            ],
            || step(&format!("inserting series `{}`", series.name)),
        )?;
    }
    let interval_sql = format!(
        "INSERT INTO load_intervals (run_id, {INTERVAL_COLUMNS}) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
    );
    for i in &run.intervals {
        db.execute(
            &interval_sql,
            &args![
                id,
                i.request,
                real_to_sql(i.start_s),
                optional_real_to_sql(i.users),
                optional_real_to_sql(i.target_rate),
                count_to_sql(i.requests),
                count_to_sql(i.failures),
                optional_real_to_sql(i.latency_mean_ms),
                optional_real_to_sql(i.latency_p50_ms),
                optional_real_to_sql(i.latency_p90_ms),
                optional_real_to_sql(i.latency_p99_ms),
                optional_real_to_sql(i.latency_max_ms),
            ],
            || {
                step(&format!(
                    "inserting the load interval of request `{}` at {} s (each request \
                     and start once per run, the start a number)",
                    i.request, i.start_s
                ))
            },
        )?;
    }
    for (position, note) in run.notes.iter().enumerate() {
        db.execute(
            "INSERT INTO run_notes (run_id, position, note) VALUES (?1, ?2, ?3)",
            &args![id, position as i64, note],
            || step("inserting notes"),
        )?;
    }
    db.execute(
        "INSERT INTO run_logs (run_id, stdout, stderr) VALUES (?1, ?2, ?3)",
        &args![id, run.stdout, run.stderr],
        || step("inserting its logs"),
    )?;
    Ok(id)
}

/// [`Store::record_interruption`] on `db`.
fn record_interruption(db: Db<'_>, i: &Interruption) -> Result<(), Error> {
    // The casts give PostgreSQL the arguments' types, which a SELECT list cannot.
    let changed = db.execute(
        "INSERT INTO interruptions \
         (experiment_id, cell_id, repetition, warmup, at_ms, reason) \
         SELECT experiment_id, id, CAST(?3 AS BIGINT), CAST(?4 AS BIGINT), \
         CAST(?5 AS BIGINT), CAST(?6 AS TEXT) FROM cells \
         WHERE id = ?2 AND experiment_id = ?1",
        &args![
            i.experiment,
            i.cell,
            i.repetition,
            i.warmup,
            time_to_millis(i.at),
            i.reason
        ],
        || {
            format!(
                "recording the interruption of {} {} of cell {}",
                kind(i.warmup),
                i.repetition,
                i.cell
            )
        },
    )?;
    if changed == 0 {
        return Err(Error::NoSuchCell {
            cell: i.cell,
            experiment: Some(i.experiment),
            context: "cannot record an interruption of it".to_owned(),
        });
    }
    Ok(())
}

fn experiment_exists(db: Db<'_>, id: ExperimentId) -> Result<bool, Error> {
    db.query_one(
        "SELECT EXISTS (SELECT 1 FROM experiments WHERE id = ?1)",
        &args![id],
        || format!("looking up experiment {id}"),
        |r| r.get(0),
    )
}

fn ensure_experiment(db: Db<'_>, id: ExperimentId) -> Result<(), Error> {
    if experiment_exists(db, id)? {
        Ok(())
    } else {
        Err(missing_experiment(db, &id.to_string()))
    }
}

fn ensure_run(db: Db<'_>, run: RunId) -> Result<(), Error> {
    let exists: bool = db.query_one(
        "SELECT EXISTS (SELECT 1 FROM runs WHERE id = ?1)",
        &args![run],
        || format!("looking up run {run}"),
        |r| r.get(0),
    )?;
    if exists {
        Ok(())
    } else {
        Err(Error::NoSuchRun { run })
    }
}

/// `columns` (comma-separated) each prefixed with `table.`.
fn qualified(table: &str, columns: &str) -> String {
    columns
        .split(',')
        .map(|c| format!("{table}.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// [`Error::NoSuchExperiment`] listing what exists, or the error that prevented listing.
pub(crate) fn missing_experiment(db: Db<'_>, requested: &str) -> Error {
    let known = db.query_rows(
        "SELECT id, name FROM experiments ORDER BY id DESC",
        &[],
        || "listing experiments".to_owned(),
    );
    match known {
        Ok(known) => Error::NoSuchExperiment {
            requested: requested.to_owned(),
            known,
        },
        Err(e) => e,
    }
}

fn read_cells(db: Db<'_>, id: ExperimentId) -> Result<Vec<CellRecord>, Error> {
    let what = || format!("reading the cells of experiment {id}");
    let mut cells = db.decode_rows(
        "SELECT id, idx, key, stop_reason FROM cells WHERE experiment_id = ?1 \
         ORDER BY idx",
        &args![id],
        what,
        |row: (CellId, i64, String, Option<String>)| {
            let (cell, index, key, stop_reason) = row;
            Ok(CellRecord {
                id: cell,
                index: At::new("cells", format!("id {cell}")).u32("idx", index)?,
                key,
                levels: Vec::new(),
                stop_reason,
            })
        },
    )?;
    let levels: Vec<(CellId, String, String)> = db.query_rows(
        "SELECT l.cell_id, l.factor, l.level FROM cell_levels l \
         JOIN cells c ON c.id = l.cell_id \
         WHERE c.experiment_id = ?1 ORDER BY l.cell_id, l.position",
        &args![id],
        what,
    )?;
    let slot = positions(&cells, |c| c.id);
    let levels = levels
        .into_iter()
        .map(|(cell, factor, level)| (cell, (factor, level)));
    attach(&mut cells, &slot, levels, |c| &mut c.levels);
    Ok(cells)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NewCell, NewExperiment};
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
        assert_eq!(runs[0].limits, serde_json::Value::Null);
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
