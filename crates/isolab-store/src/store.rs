//! [`Store`]: the SQLite backend of the results store.

use std::collections::HashMap;
use std::fmt::Display;
use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use isolab_stats::Direction;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::encoding::{
    decode_points, duration_to_nanos, encode_points, millis_to_time, nanos_to_duration,
    real_to_sql, sql_to_real, time_to_millis,
};
use crate::error::{BackendError, Context, Error};
use crate::model::{
    CellId, CellRecord, ExperimentId, ExperimentRecord, ExperimentStatus, ExperimentSummary,
    Interruption, MetricValue, NewExperiment, NewRun, Observation, RunId, RunRecord, RunStatus,
    Series,
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
            telemetry: Vec::new(),
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
        let id: ExperimentId = tx
            .query_row(
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
                |row| row.get(0),
            )
            .during(store, what)?;
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
        let store = self.location.as_str();
        if let Ok(id) = wanted.parse::<ExperimentId>() {
            if experiment_exists(&self.conn, store, id)? {
                return Ok(id);
            }
        }
        let by_name: Option<ExperimentId> = self
            .conn
            .prepare_cached("SELECT id FROM experiments WHERE name = ?1 ORDER BY id DESC LIMIT 1")
            .and_then(|mut stmt| stmt.query_row([wanted], |row| row.get(0)).optional())
            .during(store, || format!("looking up experiment `{wanted}`"))?;
        match by_name {
            Some(id) => Ok(id),
            None => Err(missing_experiment(&self.conn, store, wanted)),
        }
    }

    /// The experiment with this id.
    pub fn experiment(&self, id: ExperimentId) -> Result<ExperimentRecord, Error> {
        let store = self.location.as_str();
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
        let raw: Option<Raw> = self
            .conn
            .prepare_cached(
                "SELECT name, spec_toml, spec_path, seed, isolab_version, created_at_ms, \
                 finished_at_ms, status FROM experiments WHERE id = ?1",
            )
            .and_then(|mut stmt| {
                stmt.query_row([id], |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                        r.get(6)?,
                        r.get(7)?,
                    ))
                })
                .optional()
            })
            .during(store, || format!("reading experiment {id}"))?;
        let Some((name, spec_toml, spec_path, seed, isolab_version, created, finished, status)) =
            raw
        else {
            return Err(missing_experiment(&self.conn, store, &id.to_string()));
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
        let store = self.location.as_str();
        let what = || "listing experiments".to_owned();
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT e.id, e.name, e.status, e.created_at_ms, \
                 (SELECT count(*) FROM cells c WHERE c.experiment_id = e.id), \
                 (SELECT count(*) FROM runs r WHERE r.experiment_id = e.id \
                  AND r.warmup = 0 AND r.status = ?1) \
                 FROM experiments e ORDER BY e.id DESC",
            )
            .during(store, what)?;
        let rows = stmt
            .query_map([RunStatus::Ok.as_str()], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, i64>(5)?,
                ))
            })
            .during(store, what)?;
        let mut out = Vec::new();
        for row in rows {
            let (id, name, status, created, cells, runs) = row.during(store, what)?;
            let at = At::new("experiments", format!("id {id}"));
            out.push(ExperimentSummary {
                id,
                name,
                status: at.parse("status", &status)?,
                created_at: at.time("created_at_ms", created)?,
                cells: u32::try_from(cells).unwrap_or(u32::MAX),
                runs: u32::try_from(runs).unwrap_or(u32::MAX),
            });
        }
        Ok(out)
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
            return Err(missing_experiment(&self.conn, store, &id.to_string()));
        }
        Ok(())
    }

    /// The cells of an experiment with their levels, ordered by index.
    pub fn cells(&self, id: ExperimentId) -> Result<Vec<CellRecord>, Error> {
        let store = self.location.as_str();
        let tx = read(&self.conn, store)?;
        ensure_experiment(&tx, store, id)?;
        read_cells(&tx, store, id)
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
    /// series, notes and logs. Either all of it is stored or nothing is.
    ///
    /// `(cell, warmup, repetition)` is unique: storing it a second time fails with
    /// [`Error::DuplicateRun`] and keeps the first.
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
        let cell: Option<(ExperimentId, String)> = tx
            .prepare_cached("SELECT experiment_id, key FROM cells WHERE id = ?1")
            .and_then(|mut stmt| {
                stmt.query_row([run.cell], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
            })
            .during(store, || step("reading its cell"))?;
        let Some((experiment, cell_key)) = cell else {
            return Err(Error::NoSuchCell {
                cell: run.cell,
                experiment: None,
                context: format!("cannot store {} {} of it", kind(run.warmup), run.repetition),
            });
        };
        let taken: bool = tx
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM runs \
                 WHERE cell_id = ?1 AND warmup = ?2 AND repetition = ?3)",
            )
            .and_then(|mut stmt| {
                stmt.query_row(params![run.cell, run.warmup, run.repetition], |r| r.get(0))
            })
            .during(store, || step("checking for a stored duplicate"))?;
        if taken {
            return Err(Error::DuplicateRun {
                cell: run.cell,
                cell_key,
                repetition: run.repetition,
                warmup: run.warmup,
            });
        }
        let id: RunId = tx
            .prepare_cached(
                "INSERT INTO runs (experiment_id, cell_id, repetition, warmup, round, status, \
                 exit_code, started_at_ms, wall_ns, error, limits_json) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) RETURNING id",
            )
            .and_then(|mut stmt| {
                stmt.query_row(
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
                    |r| r.get(0),
                )
            })
            .during(store, || step("inserting the run row"))?;
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
        let what = || format!("reading the interruptions of experiment {id}");
        let tx = read(&self.conn, store)?;
        ensure_experiment(&tx, store, id)?;
        let mut stmt = tx
            .prepare_cached(
                "SELECT id, cell_id, repetition, warmup, at_ms, reason FROM interruptions \
                 WHERE experiment_id = ?1 ORDER BY id",
            )
            .during(store, what)?;
        let rows = stmt
            .query_map([id], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, String>(5)?,
                ))
            })
            .during(store, what)?;
        let mut out = Vec::new();
        for row in rows {
            let (row_id, cell, repetition, warmup, at_ms, reason) = row.during(store, what)?;
            let at = At::new("interruptions", format!("id {row_id}"));
            out.push(Interruption {
                experiment: id,
                cell,
                repetition: at.u32("repetition", repetition)?,
                warmup: at.bool("warmup", warmup)?,
                at: at.time("at_ms", at_ms)?,
                reason,
            });
        }
        Ok(out)
    }

    /// Every run of an experiment (warm-ups and failures included) with its metrics,
    /// telemetry and notes, ordered by id. Logs and series are read separately.
    pub fn runs(&self, id: ExperimentId) -> Result<Vec<RunRecord>, Error> {
        let store = self.location.as_str();
        let what = || format!("reading the runs of experiment {id}");
        let tx = read(&self.conn, store)?;
        ensure_experiment(&tx, store, id)?;

        let mut runs = Vec::new();
        {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT id, cell_id, repetition, warmup, round, status, exit_code, \
                     started_at_ms, wall_ns, error, limits_json FROM runs \
                     WHERE experiment_id = ?1 ORDER BY id",
                )
                .during(store, what)?;
            let rows = stmt
                .query_map([id], |r| {
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
                })
                .during(store, what)?;
            for row in rows {
                runs.push(row.during(store, what)?.decode()?);
            }
        }
        let slot: HashMap<RunId, usize> = runs.iter().enumerate().map(|(i, r)| (r.id, i)).collect();

        {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT m.run_id, m.position, m.name, m.unit, m.direction, m.value \
                     FROM metrics m JOIN runs r ON r.id = m.run_id \
                     WHERE r.experiment_id = ?1 ORDER BY m.run_id, m.position",
                )
                .during(store, what)?;
            let rows = stmt
                .query_map([id], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, Option<f64>>(5)?,
                    ))
                })
                .during(store, what)?;
            for row in rows {
                let (run, position, name, unit, direction, value) = row.during(store, what)?;
                let at = At::new("metrics", format!("run_id {run}, position {position}"));
                let metric = MetricValue {
                    name,
                    unit,
                    direction: at.parse::<Direction>("direction", &direction)?,
                    value: sql_to_real(value),
                };
                if let Some(&i) = slot.get(&run) {
                    runs[i].metrics.push(metric);
                }
            }
        }
        {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT t.run_id, t.key, t.value FROM telemetry t \
                     JOIN runs r ON r.id = t.run_id \
                     WHERE r.experiment_id = ?1 ORDER BY t.run_id, t.position",
                )
                .during(store, what)?;
            let rows = stmt
                .query_map([id], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, Option<f64>>(2)?,
                    ))
                })
                .during(store, what)?;
            for row in rows {
                let (run, key, value) = row.during(store, what)?;
                if let Some(&i) = slot.get(&run) {
                    runs[i].telemetry.push((key, sql_to_real(value)));
                }
            }
        }
        {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT n.run_id, n.note FROM run_notes n JOIN runs r ON r.id = n.run_id \
                     WHERE r.experiment_id = ?1 ORDER BY n.run_id, n.position",
                )
                .during(store, what)?;
            let rows = stmt
                .query_map([id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
                .during(store, what)?;
            for row in rows {
                let (run, note) = row.during(store, what)?;
                if let Some(&i) = slot.get(&run) {
                    runs[i].notes.push(note);
                }
            }
        }
        Ok(runs)
    }

    /// The standard output and standard error captured during a run.
    pub fn run_logs(&self, run: RunId) -> Result<(String, String), Error> {
        let store = self.location.as_str();
        self.conn
            .prepare_cached("SELECT stdout, stderr FROM run_logs WHERE run_id = ?1")
            .and_then(|mut stmt| {
                stmt.query_row([run], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
            })
            .during(store, || format!("reading the logs of run {run}"))?
            .ok_or(Error::NoSuchRun { run })
    }

    /// The time series sampled during a run, in recorded order.
    pub fn series(&self, run: RunId) -> Result<Vec<Series>, Error> {
        let store = self.location.as_str();
        let what = || format!("reading the series of run {run}");
        let tx = read(&self.conn, store)?;
        let exists: bool = tx
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM runs WHERE id = ?1)")
            .and_then(|mut stmt| stmt.query_row([run], |r| r.get(0)))
            .during(store, what)?;
        if !exists {
            return Err(Error::NoSuchRun { run });
        }
        let mut stmt = tx
            .prepare_cached(
                "SELECT position, name, unit, points FROM series WHERE run_id = ?1 \
                 ORDER BY position",
            )
            .during(store, what)?;
        let rows = stmt
            .query_map([run], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Vec<u8>>(3)?,
                ))
            })
            .during(store, what)?;
        let mut out = Vec::new();
        for row in rows {
            let (position, name, unit, blob) = row.during(store, what)?;
            let points = decode_points(&blob).ok_or_else(|| {
                At::new("series", format!("run_id {run}, position {position}")).corrupt(
                    "points",
                    format!("{} bytes", blob.len()),
                    "expected a whole number of 16-byte points",
                )
            })?;
            out.push(Series { name, unit, points });
        }
        Ok(out)
    }

    /// One row per metric value of the experiment's counted runs (not warm-ups, status
    /// `ok`), with the cell's levels: what `isolab export` writes. Ordered by cell index,
    /// repetition, then the metric's position in its run.
    pub fn observations(&self, id: ExperimentId) -> Result<Vec<Observation>, Error> {
        let store = self.location.as_str();
        let what = || format!("reading the observations of experiment {id}");
        let tx = read(&self.conn, store)?;
        ensure_experiment(&tx, store, id)?;
        let cells: HashMap<CellId, CellRecord> = read_cells(&tx, store, id)?
            .into_iter()
            .map(|c| (c.id, c))
            .collect();
        let mut stmt = tx
            .prepare_cached(
                "SELECT r.id, r.cell_id, r.repetition, m.position, m.name, m.unit, \
                 m.direction, m.value \
                 FROM runs r JOIN cells c ON c.id = r.cell_id \
                 JOIN metrics m ON m.run_id = r.id \
                 WHERE r.experiment_id = ?1 AND r.warmup = 0 AND r.status = ?2 \
                 ORDER BY c.idx, r.repetition, r.id, m.position",
            )
            .during(store, what)?;
        let rows = stmt
            .query_map(params![id, RunStatus::Ok.as_str()], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, Option<f64>>(7)?,
                ))
            })
            .during(store, what)?;
        let mut out = Vec::new();
        for row in rows {
            let (run, cell, repetition, position, metric, unit, direction, value) =
                row.during(store, what)?;
            let Some(cell) = cells.get(&cell) else {
                // The join guarantees the cell exists and belongs to this experiment.
                continue;
            };
            let metric_at = At::new("metrics", format!("run_id {run}, position {position}"));
            out.push(Observation {
                experiment: id,
                run,
                cell_index: cell.index,
                levels: cell.levels.clone(),
                repetition: At::new("runs", format!("id {run}")).u32("repetition", repetition)?,
                metric,
                unit,
                direction: metric_at.parse("direction", &direction)?,
                value: sql_to_real(value),
            });
        }
        Ok(out)
    }

    /// The environment captured for an experiment, in capture order.
    pub fn environment(&self, id: ExperimentId) -> Result<Vec<(String, String)>, Error> {
        let store = self.location.as_str();
        let what = || format!("reading the environment of experiment {id}");
        let tx = read(&self.conn, store)?;
        ensure_experiment(&tx, store, id)?;
        let mut stmt = tx
            .prepare_cached(
                "SELECT key, value FROM environment WHERE experiment_id = ?1 ORDER BY position",
            )
            .during(store, what)?;
        let rows = stmt
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .during(store, what)?;
        rows.map(|row| row.during(store, what)).collect()
    }
}

/// Starts a read transaction: the queries of one read see one snapshot.
fn read<'c>(conn: &'c Connection, store: &str) -> Result<rusqlite::Transaction<'c>, Error> {
    conn.unchecked_transaction()
        .during(store, || "starting a read transaction".to_owned())
}

fn experiment_exists(conn: &Connection, store: &str, id: ExperimentId) -> Result<bool, Error> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM experiments WHERE id = ?1)")
        .and_then(|mut stmt| stmt.query_row([id], |r| r.get(0)))
        .during(store, || format!("looking up experiment {id}"))
}

fn ensure_experiment(conn: &Connection, store: &str, id: ExperimentId) -> Result<(), Error> {
    if experiment_exists(conn, store, id)? {
        Ok(())
    } else {
        Err(missing_experiment(conn, store, &id.to_string()))
    }
}

/// [`Error::NoSuchExperiment`] listing what exists, or the error that prevented listing.
fn missing_experiment(conn: &Connection, store: &str, requested: &str) -> Error {
    let known = conn
        .prepare_cached("SELECT id, name FROM experiments ORDER BY id DESC")
        .and_then(|mut stmt| {
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<Vec<(ExperimentId, String)>, _>>()
        })
        .during(store, || "listing experiments".to_owned());
    match known {
        Ok(known) => Error::NoSuchExperiment {
            requested: requested.to_owned(),
            known,
        },
        Err(e) => e,
    }
}

fn read_cells(conn: &Connection, store: &str, id: ExperimentId) -> Result<Vec<CellRecord>, Error> {
    let what = || format!("reading the cells of experiment {id}");
    let mut cells = Vec::new();
    {
        let mut stmt = conn
            .prepare_cached(
                "SELECT id, idx, key, stop_reason FROM cells WHERE experiment_id = ?1 \
                 ORDER BY idx",
            )
            .during(store, what)?;
        let rows = stmt
            .query_map([id], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<String>>(3)?,
                ))
            })
            .during(store, what)?;
        for row in rows {
            let (cell, index, key, stop_reason) = row.during(store, what)?;
            cells.push(CellRecord {
                id: cell,
                index: At::new("cells", format!("id {cell}")).u32("idx", index)?,
                key,
                levels: Vec::new(),
                stop_reason,
            });
        }
    }
    let slot: HashMap<CellId, usize> = cells.iter().enumerate().map(|(i, c)| (c.id, i)).collect();
    let mut stmt = conn
        .prepare_cached(
            "SELECT l.cell_id, l.factor, l.level FROM cell_levels l \
             JOIN cells c ON c.id = l.cell_id \
             WHERE c.experiment_id = ?1 ORDER BY l.cell_id, l.position",
        )
        .during(store, what)?;
    let rows = stmt
        .query_map([id], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .during(store, what)?;
    for row in rows {
        let (cell, factor, level) = row.during(store, what)?;
        if let Some(&i) = slot.get(&cell) {
            cells[i].levels.push((factor, level));
        }
    }
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
            telemetry: vec![("psi_some_avg10".into(), f64::NAN)],
            series: vec![],
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
        assert!(runs[0].telemetry[0].1.is_nan());
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
