//! The `runs` table and what hangs off a run (metrics, telemetry, series, load
//! intervals, notes, logs), and the interruptions: writing a run in one transaction and
//! reading runs back.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use isolab_stats::Direction;

use crate::backend::{args, Begin, FromRow, Row};
use crate::encoding::{
    count_to_sql, decode_names, decode_points, decode_values, duration_to_nanos, encode_points,
    optional_real_to_sql, real_to_sql, sql_to_real, time_to_millis,
};
use crate::error::{BackendError, Error, Kind};
use crate::model::{
    ExperimentId, Interruption, LoadInterval, MetricValue, NewRun, RunId, RunRecord, Series,
};
use crate::telemetry::TelemetrySet;

use super::experiments::ensure_experiment;
use super::{At, Db, RowId, Store};

/// The columns of `load_intervals` after `run_id`, in the order [`RawInterval`] reads them.
pub(super) const INTERVAL_COLUMNS: &str =
    "request, start_s, users, target_rate, requests, failures, \
     latency_mean_ms, latency_p50_ms, latency_p90_ms, latency_p99_ms, latency_max_ms";

/// A `load_intervals` row as read, before decoding.
pub(super) struct RawInterval {
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

    pub(super) fn decode(self, run: RunId) -> Result<LoadInterval, Error> {
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
pub(super) struct RunInterval(pub(super) RunId, pub(super) RawInterval);

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
        Self::from_owned_row(r.clone())
    }

    /// [`FromRow::from_row`], the texts moved out of the row rather than copied.
    fn from_owned_row(mut r: Row) -> Result<RawRun, BackendError> {
        Ok(RawRun {
            id: r.get(0)?,
            cell: r.get(1)?,
            repetition: r.get(2)?,
            warmup: r.get(3)?,
            round: r.get(4)?,
            status: r.take(5)?,
            exit_code: r.get(6)?,
            started_at_ms: r.get(7)?,
            wall_ns: r.get(8)?,
            error: r.take(9)?,
            limits_json: r.take(10)?,
        })
    }
}

impl RawRun {
    /// The run, its limits parsed by `limits` (each distinct text once).
    fn decode(self, limits: &mut LimitsTexts) -> Result<RunRecord, Error> {
        let at = At::new("runs", RowId([("id", self.id)]));
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
            limits: limits.parse(&at, self.limits_json)?,
            metrics: Vec::new(),
            telemetry: crate::TelemetrySet::new(),
            notes: Vec::new(),
        })
    }
}

/// The limits of runs as parsed, by their stored text: the runs of one cell store the
/// same limits, so an experiment holds about one text a cell. Each is parsed once and
/// its runs share the value: parsing every run's took about a sixth of reading the
/// runs (1,000,000 runs sharing one text: 0.45 s of 2.5).
#[derive(Default)]
struct LimitsTexts(HashMap<String, Arc<serde_json::Value>>);

impl LimitsTexts {
    /// The most texts kept: enough for every cell of a large experiment; texts past
    /// it are parsed each time.
    const MOST: usize = 65_536;

    /// `text` parsed, as [`At::json`] parses it.
    fn parse(&mut self, at: &At<RowId<1>>, text: String) -> Result<Arc<serde_json::Value>, Error> {
        if let Some(value) = self.0.get(&text) {
            return Ok(Arc::clone(value));
        }
        let value = Arc::new(at.json("limits_json", &text)?);
        if self.0.len() < Self::MOST {
            self.0.insert(text, Arc::clone(&value));
        }
        Ok(value)
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
}

impl Store {
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
    ///
    /// The runs' telemetry, the largest part, is read beside the rest on a second
    /// connection to the store when there is one (a file or PostgreSQL). That
    /// connection's snapshot is taken after this one's, so it holds every run read here
    /// with all its telemetry: a run is stored with it in one transaction and never
    /// changes after. Telemetry of runs stored in between is skipped, as those runs are
    /// not among the runs read here.
    pub fn runs(&self, id: ExperimentId) -> Result<Vec<RunRecord>, Error> {
        let what = || format!("reading the runs of experiment {id}");
        let tx = self.read()?;
        let db = tx.db();
        // This read takes the snapshot, before the other connection takes its own.
        ensure_experiment(db, id)?;
        // Runs stored later have higher ids: the range holds only runs read here, and
        // the other connection's later snapshot may read by it too.
        let ids = dense_ids(db, id)?;
        std::thread::scope(|scope| {
            let beside = self.another().map(|other| {
                scope.spawn(move || {
                    let tx = other.read()?;
                    telemetry(tx.db(), id, ids)
                })
            });
            let mut limits = LimitsTexts::default();
            let mut runs = db.decode_rows(
                "SELECT id, cell_id, repetition, warmup, round, status, exit_code, \
                 started_at_ms, wall_ns, error, limits_json FROM runs \
                 WHERE experiment_id = ?1 ORDER BY id",
                &args![id],
                what,
                |raw: RawRun| raw.decode(&mut limits),
            )?;
            drop(limits);
            let mut owners = InOrder::new(&mut runs);
            db.decode_each(
                "SELECT n.run_id, n.note FROM runs r JOIN run_notes n ON n.run_id = r.id \
                 WHERE r.experiment_id = ?1 ORDER BY r.id, n.position",
                &args![id],
                what,
                |(run, note): (RunId, String)| {
                    if let Some(r) = owners.get(run) {
                        r.notes.push(note);
                    }
                    Ok(())
                },
            )?;
            attach_metrics(db, id, ids, &mut InOrder::new(&mut runs))?;
            let telemetry = match beside {
                Some(thread) => thread
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?,
                None => telemetry(db, id, ids)?,
            };
            let mut owners = InOrder::new(&mut runs);
            for (run, set) in telemetry {
                if let Some(r) = owners.get(run) {
                    r.telemetry = set;
                }
            }
            Ok(runs)
        })
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
}

/// The run of each row of a query over an experiment's runs in id order (its metrics,
/// telemetry, notes): the runs are in id order too, so a cursor that only moves forward
/// finds each row's run, without a map of a million ids; a row out of that order is
/// found by a binary search. Rows of runs not among them are skipped (`None`).
struct InOrder<'a> {
    runs: &'a mut [RunRecord],
    at: usize,
}

impl<'a> InOrder<'a> {
    /// Over `runs`, in increasing id order.
    fn new(runs: &'a mut [RunRecord]) -> InOrder<'a> {
        debug_assert!(runs.windows(2).all(|w| w[0].id < w[1].id));
        InOrder { runs, at: 0 }
    }

    /// The run `run`.
    fn get(&mut self, run: RunId) -> Option<&mut RunRecord> {
        while self.runs.get(self.at).is_some_and(|r| r.id < run) {
            self.at += 1;
        }
        if self.runs.get(self.at).is_some_and(|r| r.id == run) {
            return self.runs.get_mut(self.at);
        }
        let i = self.runs.binary_search_by_key(&run, |r| r.id).ok()?;
        self.runs.get_mut(i)
    }
}

/// The run ids of an experiment's runs, first and last, when they are dense enough to
/// read its runs' metrics and telemetry by a range of run ids: at least every other id
/// in between is one of its runs, as when one experiment ran at a time (`None` when
/// other experiments' runs are interleaved more thickly, or it has none).
///
/// A range reads each table in the order of its key alone. The join from the
/// experiment's runs instead looks every run up in the child table: over a million runs
/// it took SQLite twice as long, while at most as many rows of other runs are read
/// and skipped here.
fn dense_ids(db: Db<'_>, id: ExperimentId) -> Result<Option<(RunId, RunId)>, Error> {
    let rows = db.decode_rows(
        "SELECT min(id), max(id), count(*) FROM runs WHERE experiment_id = ?1",
        &args![id],
        || format!("counting the runs of experiment {id}"),
        |(first, last, count): (Option<i64>, Option<i64>, i64)| Ok((first, last, count)),
    )?;
    Ok(match rows.first() {
        Some(&(Some(first), Some(last), count)) if (last - first) / 2 < count => {
            Some((first, last))
        }
        _ => None,
    })
}

/// Reads the metrics of an experiment's runs, by the range of their `ids` when
/// [`dense_ids`] gave one, and attaches each to its run among `owners`, in position
/// order (the range's rows of other runs are skipped).
///
/// The join walks the experiment's runs in id order (the index `runs_by_experiment`)
/// and each run's rows by position (their primary key): in that order SQLite needs no
/// sort; ordered by the child's `run_id` instead, it sorted every row first (three
/// times slower over a million rows).
fn attach_metrics(
    db: Db<'_>,
    id: ExperimentId,
    ids: Option<(RunId, RunId)>,
    owners: &mut InOrder<'_>,
) -> Result<(), Error> {
    let columns = "m.run_id, m.position, m.name, m.unit, m.direction, m.value";
    let (sql, args) = match ids {
        Some((first, last)) => (
            format!(
                "SELECT {columns} FROM metrics m WHERE m.run_id BETWEEN ?1 AND ?2 \
                 ORDER BY m.run_id, m.position"
            ),
            args![first, last].to_vec(),
        ),
        None => (
            format!(
                "SELECT {columns} FROM runs r JOIN metrics m ON m.run_id = r.id \
                 WHERE r.experiment_id = ?1 ORDER BY r.id, m.position"
            ),
            args![id].to_vec(),
        ),
    };
    db.decode_each(
        &sql,
        &args,
        || format!("reading the metrics of experiment {id}"),
        |row: (RunId, i64, String, String, String, Option<f64>)| {
            let (run, position, name, unit, direction, value) = row;
            let at = At::new("metrics", RowId([("run_id", run), ("position", position)]));
            let metric = MetricValue {
                name,
                unit,
                direction: at.parse::<Direction>("direction", &direction)?,
                value: sql_to_real(value),
            };
            if let Some(r) = owners.get(run) {
                r.metrics.push(metric);
            }
            Ok(())
        },
    )
}

/// The telemetry of an experiment's runs with the run of each, in run id order, read by
/// the range of their `ids` when [`dense_ids`] gave one, so maybe with that of other
/// runs among them (see [`Store::runs`]).
fn telemetry(
    db: Db<'_>,
    id: ExperimentId,
    ids: Option<(RunId, RunId)>,
) -> Result<Vec<(RunId, TelemetrySet)>, Error> {
    let layouts = read_layouts(db)?;
    let (sql, args) = match ids {
        Some((first, last)) => (
            "SELECT run_id, layout_id, packed FROM telemetry \
             WHERE run_id BETWEEN ?1 AND ?2 ORDER BY run_id",
            args![first, last].to_vec(),
        ),
        None => (
            "SELECT t.run_id, t.layout_id, t.packed FROM runs r \
             JOIN telemetry t ON t.run_id = r.id \
             WHERE r.experiment_id = ?1 ORDER BY r.id",
            args![id].to_vec(),
        ),
    };
    db.decode_rows(
        sql,
        &args,
        || format!("reading the telemetry of experiment {id}"),
        |(run, layout, packed): (RunId, i64, Vec<u8>)| {
            Ok((run, layouts.set(run, layout, &packed)?))
        },
    )
}

/// The store's telemetry layouts by id, each list of names shared by the sets read
/// with it.
struct Layouts(HashMap<i64, Arc<Vec<String>>>);

/// Every layout of the store (a handful: one per list of names its runs recorded).
fn read_layouts(db: Db<'_>) -> Result<Layouts, Error> {
    let rows = db.decode_rows(
        "SELECT id, names FROM telemetry_layouts",
        &args![],
        || "reading the telemetry layouts".to_owned(),
        |(id, text): (i64, String)| {
            let names = decode_names(&text).ok_or_else(|| {
                At::new("telemetry_layouts", format!("id {id}")).corrupt(
                    "names",
                    &text,
                    "expected a JSON array of names",
                )
            })?;
            Ok((id, Arc::new(names)))
        },
    )?;
    Ok(Layouts(rows.into_iter().collect()))
}

impl Layouts {
    /// The telemetry of run `run`: `packed` values under the names of `layout`.
    fn set(&self, run: RunId, layout: i64, packed: &[u8]) -> Result<TelemetrySet, Error> {
        let at = At::new("telemetry", RowId([("run_id", run)]));
        let names = self
            .0
            .get(&layout)
            .ok_or_else(|| at.corrupt("layout_id", layout, "no such telemetry layout"))?;
        match decode_values(packed) {
            Some(values) if values.len() == names.len() => {
                Ok(TelemetrySet::from_shared(Arc::clone(names), values))
            }
            _ => Err(at.corrupt(
                "packed",
                format!("{} bytes", packed.len()),
                format!(
                    "expected {} values of 8 bytes, one per name of layout {layout}",
                    names.len()
                ),
            )),
        }
    }
}

/// [`Store::insert_run`] inside the caller's write transaction.
pub(super) fn insert_run(db: Db<'_>, run: &NewRun) -> Result<RunId, Error> {
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
    db.with_connection(
        || step("inserting its telemetry"),
        |conn| crate::layouts::insert(conn, id, &run.telemetry),
    )?;
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
pub(super) fn record_interruption(db: Db<'_>, i: &Interruption) -> Result<(), Error> {
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
