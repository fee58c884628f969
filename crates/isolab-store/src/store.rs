//! [`Store`]: the SQLite backend of the results store.

use std::collections::HashMap;
use std::fmt::Display;
use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use isolab_stats::Direction;
use rusqlite::{params, Connection, OptionalExtension, Params, Row, TransactionBehavior};

use crate::encoding::{
    count_to_sql, decode_points, duration_to_nanos, encode_points, millis_to_time,
    nanos_to_duration, optional_real_to_sql, real_to_sql, sql_to_real, time_to_millis,
};
use crate::error::{BackendError, Context, Error};
use crate::model::{
    CellId, CellRecord, ExperimentId, ExperimentRecord, ExperimentStatus, ExperimentSummary,
    Interruption, IntervalObservation, LoadInterval, MetricValue, NewExperiment, NewRun,
    Observation, RunId, RunRecord, RunStatus, Series,
};
use crate::schema;

/// The results store: one SQLite file (or an in-memory database for tests).
///
/// Every write is one transaction: an experiment with its cells and environment, a run
/// with everything measured during it. Reads that take several queries run in one read
/// transaction, so they see a consistent snapshot while a runner keeps writing (WAL mode
/// lets readers and the writer proceed together).
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    /// The path shown in messages, or `:memory:`.
    location: String,
}

/// Which row of which table a decoded value came from, for [`Error::Corrupt`].
struct At {
    table: &'static str,
    row: String,
}

impl At {
    fn new(table: &'static str, row: impl Into<String>) -> At {
        At {
            table,
            row: row.into(),
        }
    }

    fn corrupt(&self, column: &'static str, value: impl Display, reason: impl Display) -> Error {
        Error::Corrupt {
            table: self.table,
            row: self.row.clone(),
            column,
            value: value.to_string(),
            reason: reason.to_string(),
        }
    }

    fn u32(&self, column: &'static str, v: i64) -> Result<u32, Error> {
        u32::try_from(v)
            .map_err(|_| self.corrupt(column, v, "expected an integer from 0 to 2^32-1"))
    }

    fn bool(&self, column: &'static str, v: i64) -> Result<bool, Error> {
        match v {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(self.corrupt(column, other, "expected 0 or 1")),
        }
    }

    fn time(&self, column: &'static str, ms: i64) -> Result<SystemTime, Error> {
        millis_to_time(ms).ok_or_else(|| {
            self.corrupt(column, ms, "milliseconds since the Unix epoch out of range")
        })
    }

    fn duration(&self, column: &'static str, ns: i64) -> Result<Duration, Error> {
        nanos_to_duration(ns).ok_or_else(|| self.corrupt(column, ns, "expected nanoseconds >= 0"))
    }

    fn parse<T>(&self, column: &'static str, word: &str) -> Result<T, Error>
    where
        T: FromStr,
        T::Err: Display,
    {
        word.parse().map_err(|e| self.corrupt(column, word, e))
    }

    fn json(&self, column: &'static str, text: &str) -> Result<serde_json::Value, Error> {
        serde_json::from_str(text).map_err(|e| self.corrupt(column, text, e))
    }

    fn count(&self, column: &'static str, v: i64) -> Result<u64, Error> {
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
    fn read(r: &Row<'_>, first: usize) -> rusqlite::Result<RawInterval> {
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

impl TryFrom<&Row<'_>> for RunInterval {
    type Error = rusqlite::Error;

    fn try_from(r: &Row<'_>) -> rusqlite::Result<RunInterval> {
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

impl TryFrom<&Row<'_>> for RawRun {
    type Error = rusqlite::Error;

    /// Reads the columns `id, cell_id, repetition, warmup, round, status, exit_code,
    /// started_at_ms, wall_ns, error, limits_json`, in this order.
    fn try_from(r: &Row<'_>) -> rusqlite::Result<RawRun> {
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
    /// Opens the store at `path`, creating the file if it is missing and bringing its
    /// schema up to [`crate::SCHEMA_VERSION`]. The directory must exist.
    ///
    /// Refuses a file that is not an isolab store and a store written by a newer isolab.
    pub fn open(path: &Path) -> Result<Store, Error> {
        let location = path.display().to_string();
        let conn = Connection::open(path).map_err(|e| Error::Open {
            store: location.clone(),
            source: BackendError::new(e),
        })?;
        Store::start(conn, location)
    }

    /// Opens a fresh store that lives in memory and disappears when dropped.
    pub fn open_in_memory() -> Result<Store, Error> {
        let location = ":memory:".to_owned();
        let conn = Connection::open_in_memory().map_err(|e| Error::Open {
            store: location.clone(),
            source: BackendError::new(e),
        })?;
        Store::start(conn, location)
    }

    fn start(mut conn: Connection, location: String) -> Result<Store, Error> {
        schema::configure(&conn, &location)?;
        schema::migrate(&mut conn, &location)?;
        Ok(Store { conn, location })
    }

    /// Queries on the store's connection, outside any transaction.
    fn db(&self) -> Db<'_> {
        Db::new(&self.conn, &self.location)
    }

    /// Where the store lives: its path as given to [`Store::open`], or `:memory:`.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The schema version of the store (equal to [`crate::SCHEMA_VERSION`] once open).
    pub fn schema_version(&self) -> Result<u32, Error> {
        schema::user_version(&self.conn)
            .during(&self.location, || "reading the schema version".into())
    }

    /// Creates an experiment, its cells (with their levels) and its environment in one
    /// transaction, with status `running`.
    pub fn create_experiment(&mut self, e: &NewExperiment) -> Result<ExperimentId, Error> {
        let store = self.location.as_str();
        let what = || format!("creating experiment `{}`", e.name);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .during(store, what)?;
        let id: ExperimentId = Db::new(&tx, store).query_one(
            "INSERT INTO experiments (name, spec_toml, spec_path, seed, isolab_version, \
             created_at_ms, finished_at_ms, status) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7) RETURNING id",
            params![
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
        {
            let mut env = tx
                .prepare_cached(
                    "INSERT INTO environment (experiment_id, position, key, value) \
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .during(store, what)?;
            for (position, (key, value)) in e.environment.iter().enumerate() {
                env.execute(params![id, position as i64, key, value])
                    .during(store, || {
                        format!(
                            "storing environment entry `{key}` of experiment `{}`",
                            e.name
                        )
                    })?;
            }
            let mut cell_insert = tx
                .prepare_cached(
                    "INSERT INTO cells (experiment_id, idx, key, stop_reason) \
                     VALUES (?1, ?2, ?3, NULL) RETURNING id",
                )
                .during(store, what)?;
            let mut level_insert = tx
                .prepare_cached(
                    "INSERT INTO cell_levels (cell_id, position, factor, level) \
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .during(store, what)?;
            for cell in &e.cells {
                let cell_what = || {
                    format!(
                        "storing cell {} (`{}`) of experiment `{}` (cell indexes and keys \
                         must be unique)",
                        cell.index, cell.key, e.name
                    )
                };
                let cell_id: CellId = cell_insert
                    .query_row(params![id, cell.index, cell.key], |row| row.get(0))
                    .during(store, cell_what)?;
                for (position, (factor, level)) in cell.levels.iter().enumerate() {
                    level_insert
                        .execute(params![cell_id, position as i64, factor, level])
                        .during(store, cell_what)?;
                }
            }
        }
        tx.commit().during(store, what)?;
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
            [wanted],
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
            [id],
            || format!("reading experiment {id}"),
            |r| Raw::try_from(r),
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
            [RunStatus::Ok.as_str()],
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
        let store = self.location.as_str();
        let finished = (status != ExperimentStatus::Running).then(|| time_to_millis(at));
        let changed = self
            .conn
            .execute(
                "UPDATE experiments SET status = ?2, finished_at_ms = ?3 WHERE id = ?1",
                params![id, status.as_str(), finished],
            )
            .during(store, || {
                format!("setting the status of experiment {id} to {status}")
            })?;
        if changed == 0 {
            return Err(missing_experiment(self.db(), &id.to_string()));
        }
        Ok(())
    }

    /// The cells of an experiment with their levels, ordered by index.
    pub fn cells(&self, id: ExperimentId) -> Result<Vec<CellRecord>, Error> {
        let store = self.location.as_str();
        let tx = read(&self.conn, store)?;
        let db = Db::new(&tx, store);
        ensure_experiment(db, id)?;
        read_cells(db, id)
    }

    /// Records why the runner stopped repeating a cell (e.g. `cv 0.031 <= 0.05 after 7 runs`).
    pub fn set_stop_reason(&mut self, cell: CellId, reason: &str) -> Result<(), Error> {
        let store = self.location.as_str();
        let changed = self
            .conn
            .execute(
                "UPDATE cells SET stop_reason = ?2 WHERE id = ?1",
                params![cell, reason],
            )
            .during(store, || format!("setting the stop reason of cell {cell}"))?;
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
        let store = self.location.as_str();
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
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .during(store, || step("starting a transaction"))?;
        let db = Db::new(&tx, store);
        let cell: Option<(ExperimentId, String)> = db.query_optional(
            "SELECT experiment_id, key FROM cells WHERE id = ?1",
            [run.cell],
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
        let taken: bool = db.query_one(
            "SELECT EXISTS (SELECT 1 FROM runs \
             WHERE cell_id = ?1 AND warmup = ?2 AND repetition = ?3)",
            params![run.cell, run.warmup, run.repetition],
            || step("checking for a stored duplicate"),
            |r| r.get(0),
        )?;
        if taken {
            return Err(Error::DuplicateRun {
                cell: run.cell,
                cell_key,
                repetition: run.repetition,
                warmup: run.warmup,
            });
        }
        let id: RunId = db.query_one(
            "INSERT INTO runs (experiment_id, cell_id, repetition, warmup, round, status, \
             exit_code, started_at_ms, wall_ns, error, limits_json) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) RETURNING id",
            params![
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
        )?;
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO metrics (run_id, position, name, unit, direction, value) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .during(store, || step("inserting metrics"))?;
            for (position, m) in run.metrics.iter().enumerate() {
                stmt.execute(params![
                    id,
                    position as i64,
                    m.name,
                    m.unit,
                    m.direction.as_str(),
                    real_to_sql(m.value),
                ])
                .during(store, || step(&format!("inserting metric `{}`", m.name)))?;
            }
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO telemetry (run_id, position, key, value) \
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .during(store, || step("inserting telemetry"))?;
            for (position, (key, value)) in run.telemetry.iter().enumerate() {
                stmt.execute(params![id, position as i64, key, real_to_sql(*value)])
                    .during(store, || step(&format!("inserting telemetry `{key}`")))?;
            }
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO series (run_id, position, name, unit, points) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .during(store, || step("inserting series"))?;
            for (position, s) in run.series.iter().enumerate() {
                stmt.execute(params![
                    id,
                    position as i64,
                    s.name,
                    s.unit,
                    encode_points(&s.points)
                ])
                .during(store, || step(&format!("inserting series `{}`", s.name)))?;
            }
            let mut stmt = tx
                .prepare_cached(&format!(
                    "INSERT INTO load_intervals (run_id, {INTERVAL_COLUMNS}) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
                ))
                .during(store, || step("inserting load intervals"))?;
            for i in &run.intervals {
                stmt.execute(params![
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
                ])
                .during(store, || {
                    step(&format!(
                        "inserting the load interval of request `{}` at {} s (each request \
                         and start once per run, the start a number)",
                        i.request, i.start_s
                    ))
                })?;
            }
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO run_notes (run_id, position, note) VALUES (?1, ?2, ?3)",
                )
                .during(store, || step("inserting notes"))?;
            for (position, note) in run.notes.iter().enumerate() {
                stmt.execute(params![id, position as i64, note])
                    .during(store, || step("inserting a note"))?;
            }
            tx.prepare_cached("INSERT INTO run_logs (run_id, stdout, stderr) VALUES (?1, ?2, ?3)")
                .and_then(|mut stmt| stmt.execute(params![id, run.stdout, run.stderr]))
                .during(store, || step("inserting its logs"))?;
        }
        tx.commit().during(store, || step("committing"))?;
        Ok(id)
    }

    /// Records an interrupted or killed attempt at `(cell, warmup, repetition)`. It is kept
    /// for the record and does not count as a run: the repetition can still be stored.
    pub fn record_interruption(&mut self, i: &Interruption) -> Result<(), Error> {
        let store = self.location.as_str();
        let changed = self
            .conn
            .execute(
                "INSERT INTO interruptions \
                 (experiment_id, cell_id, repetition, warmup, at_ms, reason) \
                 SELECT experiment_id, id, ?3, ?4, ?5, ?6 FROM cells \
                 WHERE id = ?2 AND experiment_id = ?1",
                params![
                    i.experiment,
                    i.cell,
                    i.repetition,
                    i.warmup,
                    time_to_millis(i.at),
                    i.reason
                ],
            )
            .during(store, || {
                format!(
                    "recording the interruption of {} {} of cell {}",
                    kind(i.warmup),
                    i.repetition,
                    i.cell
                )
            })?;
        if changed == 0 {
            return Err(Error::NoSuchCell {
                cell: i.cell,
                experiment: Some(i.experiment),
                context: "cannot record an interruption of it".to_owned(),
            });
        }
        Ok(())
    }

    /// The interruptions recorded for an experiment, in the order they were recorded.
    pub fn interruptions(&self, id: ExperimentId) -> Result<Vec<Interruption>, Error> {
        let store = self.location.as_str();
        let tx = read(&self.conn, store)?;
        let db = Db::new(&tx, store);
        ensure_experiment(db, id)?;
        db.decode_rows(
            "SELECT id, cell_id, repetition, warmup, at_ms, reason FROM interruptions \
             WHERE experiment_id = ?1 ORDER BY id",
            [id],
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
        let store = self.location.as_str();
        let what = || format!("reading the runs of experiment {id}");
        let tx = read(&self.conn, store)?;
        let db = Db::new(&tx, store);
        ensure_experiment(db, id)?;

        let mut runs = db.decode_rows(
            "SELECT id, cell_id, repetition, warmup, round, status, exit_code, \
             started_at_ms, wall_ns, error, limits_json FROM runs \
             WHERE experiment_id = ?1 ORDER BY id",
            [id],
            what,
            RawRun::decode,
        )?;
        let slot = positions(&runs, |r| r.id);

        let metrics = db.decode_rows(
            "SELECT m.run_id, m.position, m.name, m.unit, m.direction, m.value \
             FROM metrics m JOIN runs r ON r.id = m.run_id \
             WHERE r.experiment_id = ?1 ORDER BY m.run_id, m.position",
            [id],
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
            "SELECT t.run_id, t.key, t.value FROM telemetry t \
             JOIN runs r ON r.id = t.run_id \
             WHERE r.experiment_id = ?1 ORDER BY t.run_id, t.position",
            [id],
            what,
        )?;
        let telemetry = telemetry
            .into_iter()
            .map(|(run, key, value)| (run, (key, sql_to_real(value))));
        attach(&mut runs, &slot, telemetry, |r| &mut r.telemetry);

        let notes: Vec<(RunId, String)> = db.query_rows(
            "SELECT n.run_id, n.note FROM run_notes n JOIN runs r ON r.id = n.run_id \
             WHERE r.experiment_id = ?1 ORDER BY n.run_id, n.position",
            [id],
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
                [run],
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
                [run],
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
                [run],
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
        let store = self.location.as_str();
        let tx = read(&self.conn, store)?;
        let db = Db::new(&tx, store);
        ensure_run(db, run)?;
        read_it(db)
    }

    /// One row per load interval of the experiment's counted runs (not warm-ups, status
    /// `ok`), with the cell's levels: what `isolab export --series` writes. Ordered by cell
    /// index, repetition, request, then start.
    pub fn interval_observations(
        &self,
        id: ExperimentId,
    ) -> Result<Vec<IntervalObservation>, Error> {
        let store = self.location.as_str();
        let tx = read(&self.conn, store)?;
        let db = Db::new(&tx, store);
        ensure_experiment(db, id)?;
        let cells: HashMap<CellId, CellRecord> =
            read_cells(db, id)?.into_iter().map(|c| (c.id, c)).collect();
        let runs: Vec<(RunId, CellId, i64)> = db.query_rows(
            "SELECT id, cell_id, repetition FROM runs \
             WHERE experiment_id = ?1 AND warmup = 0 AND status = ?2",
            params![id, RunStatus::Ok.as_str()],
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
            params![id, RunStatus::Ok.as_str()],
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
        let store = self.location.as_str();
        let tx = read(&self.conn, store)?;
        let db = Db::new(&tx, store);
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
            params![id, RunStatus::Ok.as_str()],
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
        let store = self.location.as_str();
        let tx = read(&self.conn, store)?;
        let db = Db::new(&tx, store);
        ensure_experiment(db, id)?;
        db.query_rows(
            "SELECT key, value FROM environment WHERE experiment_id = ?1 ORDER BY position",
            [id],
            || format!("reading the environment of experiment {id}"),
        )
    }
}

/// A connection (or an open transaction) and the store's location, which every error
/// names: what the queries below run on.
#[derive(Clone, Copy)]
struct Db<'c> {
    conn: &'c Connection,
    store: &'c str,
}

impl<'c> Db<'c> {
    fn new(conn: &'c Connection, store: &'c str) -> Db<'c> {
        Db { conn, store }
    }

    /// Runs a query that returns exactly one row, read by `get`; a backend error names
    /// `what`.
    fn query_one<T, P: Params>(
        self,
        sql: &str,
        params: P,
        what: impl FnOnce() -> String,
        get: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<T, Error> {
        self.conn
            .prepare_cached(sql)
            .and_then(|mut stmt| stmt.query_row(params, get))
            .during(self.store, what)
    }

    /// Runs a query that returns at most one row, read by `get`; a backend error names
    /// `what`.
    fn query_optional<T, P: Params>(
        self,
        sql: &str,
        params: P,
        what: impl FnOnce() -> String,
        get: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Option<T>, Error> {
        self.conn
            .prepare_cached(sql)
            .and_then(|mut stmt| stmt.query_row(params, get).optional())
            .during(self.store, what)
    }

    /// Runs a query and reads every row whole, in order: as a tuple of its columns in
    /// `SELECT` order, or a [`RawRun`]. A backend error names `what`.
    fn query_rows<R, P: Params>(
        self,
        sql: &str,
        params: P,
        what: impl Fn() -> String,
    ) -> Result<Vec<R>, Error>
    where
        R: for<'r> TryFrom<&'r Row<'r>, Error = rusqlite::Error>,
    {
        self.decode_rows(sql, params, what, Ok)
    }

    /// [`Db::query_rows`], turning each row into a value with `decode` (which reports
    /// stored values it cannot read back as [`Error::Corrupt`]) as soon as it is read: the
    /// first error of either kind stops the query.
    fn decode_rows<R, T, P: Params>(
        self,
        sql: &str,
        params: P,
        what: impl Fn() -> String,
        mut decode: impl FnMut(R) -> Result<T, Error>,
    ) -> Result<Vec<T>, Error>
    where
        R: for<'r> TryFrom<&'r Row<'r>, Error = rusqlite::Error>,
    {
        let store = self.store;
        let mut stmt = self.conn.prepare_cached(sql).during(store, &what)?;
        let rows = stmt
            .query_map(params, |row| R::try_from(row))
            .during(store, &what)?;
        rows.map(|row| decode(row.during(store, &what)?)).collect()
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

/// Starts a read transaction: the queries of one read see one snapshot.
fn read<'c>(conn: &'c Connection, store: &str) -> Result<rusqlite::Transaction<'c>, Error> {
    conn.unchecked_transaction()
        .during(store, || "starting a read transaction".to_owned())
}

fn experiment_exists(db: Db<'_>, id: ExperimentId) -> Result<bool, Error> {
    db.query_one(
        "SELECT EXISTS (SELECT 1 FROM experiments WHERE id = ?1)",
        [id],
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
        [run],
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
fn missing_experiment(db: Db<'_>, requested: &str) -> Error {
    let known = db.query_rows(
        "SELECT id, name FROM experiments ORDER BY id DESC",
        [],
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
        [id],
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
        [id],
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
        store
            .conn
            .execute("UPDATE metrics SET direction = 'sideways'", [])
            .unwrap();
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
        store
            .conn
            .execute("UPDATE runs SET status = 'meh'", [])
            .unwrap();
        let err = store.runs(id).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("table `runs` (id {run}), column `status`")),
            "{err}"
        );

        store
            .conn
            .execute("UPDATE experiments SET status = 'done'", [])
            .unwrap();
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

        store
            .conn
            .execute("UPDATE series SET points = x'0102'", [])
            .unwrap();
        let err = store.series(run).unwrap_err();
        assert!(err.to_string().contains("2 bytes"), "{err}");

        store
            .conn
            .execute("UPDATE runs SET limits_json = '{'", [])
            .unwrap();
        assert!(matches!(
            store.runs(id).unwrap_err(),
            Error::Corrupt {
                column: "limits_json",
                ..
            }
        ));

        store
            .conn
            .execute("UPDATE experiments SET seed = '-1'", [])
            .unwrap();
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
        store
            .conn
            .execute("UPDATE load_intervals SET failures = -2", [])
            .unwrap();
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
        store.conn.execute_batch("DROP TABLE run_notes").unwrap();
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
            .conn
            .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(runs, 0);
    }
}
