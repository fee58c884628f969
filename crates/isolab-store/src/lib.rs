//! The isolab results store: every experiment, cell and run, in one SQLite file or in a
//! PostgreSQL database a team shares.
//!
//! [`Store`] is the whole API; [`Store::open_location`] takes what `--db` says (a file
//! path or a `postgres://` URL). A runner creates an experiment with its cells and captured
//! environment ([`Store::create_experiment`]), then stores each run as it completes
//! ([`Store::insert_run`]): the run row, its metrics, scalar telemetry, time series, load
//! intervals, notes and logs are written in **one transaction**, so a run is either stored
//! whole or not at all, and a stored run is never lost: a crash, Ctrl-C or SIGKILL
//! afterwards cannot touch it. `(cell, warmup, repetition)` is unique, which is what lets `isolab run --resume`
//! continue an experiment without running anything twice ([`Error::DuplicateRun`]).
//! Interrupted attempts are kept apart ([`Store::record_interruption`]).
//! Reports and exports read it back: [`Store::runs`], [`Store::observations`] (one row per
//! metric value of a counted run, with its cell's levels), [`Store::series`],
//! [`Store::intervals`] (a service workload's per-second load per named request,
//! [`LoadInterval`]), [`Store::interval_observations`] (those of all counted runs, with
//! their cells' levels), [`Store::run_logs`].
//!
//! # Telemetry vocabulary
//!
//! [`Telemetry`] is every scalar a run records besides its metrics (cgroup cpu time and
//! throttling, memory peak, io bytes, PSI, context switches, cpu migrations, host and
//! neighbour utilisation, VM and runtime phases, probe latencies): its stored name, its
//! [`Unit`] and a doc line, in one place. A run carries a [`TelemetrySet`]: producers
//! (the lab) push values under keys, consumers (the report) ask for keys, and the store
//! writes and reads the set as one row per run: its names (a *layout*, stored once for
//! all the runs that record the same names) and its values packed in a BLOB. Stored
//! names never change, and a set keeps the names as stored, so a name another isolab
//! version wrote survives a read and a rewrite ([`TelemetryName::Other`]).
//!
//! # Storage
//!
//! - One SQLite file, WAL journal (reports can read while a run writes), `synchronous =
//!   NORMAL` (a committed run survives the process's death; [`Store::sync`], which the
//!   runner calls about once a second and at the end, makes it survive a power cut),
//!   foreign keys on, a busy timeout so that two processes wait for each other instead of
//!   failing.
//! - Tidy tables, one fact per row: `experiments`, `environment`, `cells`, `cell_levels`,
//!   `runs`, `metrics`, `telemetry`, `series`, `load_intervals`, `run_logs`, `run_notes`,
//!   `interruptions`. Child tables are keyed by `(parent id, position)` (load intervals by
//!   `(run id, request, start)`), so order is kept and per-run reads are index lookups;
//!   runs are indexed by experiment. A run's telemetry is the exception (schema version
//!   4): one `telemetry` row per run, its values packed, under a list of names in
//!   `telemetry_layouts`, because a run records about 50 and a report reads them all.
//! - The schema is created and upgraded by numbered migrations recorded in `PRAGMA
//!   user_version`; a store written by a newer isolab is refused
//!   ([`Error::SchemaTooNew`]), as is a file of another program ([`Error::NotAStore`]).
//! - Times are **integer milliseconds since the Unix epoch** (UTC), durations integer
//!   nanoseconds, seeds decimal text, time series one compact BLOB per series (16 bytes a
//!   point), NaN metric values NULL; the `encoding` module has the full table.
//!
//! - Or a PostgreSQL database (the `backend::postgres` module): the same tables, column
//!   types translated word by word from the same migrations, every write one transaction,
//!   many hosts writing at once, a lost connection reported as such
//!   ([`Error::is_connection_lost`]) and re-established by the next operation.
//!
//! The API carries no database types (errors wrap the backend's in [`BackendError`]); the
//! SQL is written once, plain, for both backends.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use isolab_store::*;
//!
//! # fn main() -> Result<(), Error> {
//! let mut store = Store::open_in_memory()?;
//! let id = store.create_experiment(&NewExperiment {
//!     name: "quick-start".into(),
//!     spec_toml: String::new(),
//!     spec_path: None,
//!     seed: 42,
//!     isolab_version: "0.1.0".into(),
//!     created_at: SystemTime::now(),
//!     cells: vec![NewCell {
//!         index: 0,
//!         key: "platform=host".into(),
//!         levels: vec![("platform".into(), "host".into())],
//!     }],
//!     environment: vec![("kernel".into(), "6.18".into())],
//! })?;
//! let cell = store.cells(id)?[0].id;
//! store.insert_run(&NewRun {
//!     cell,
//!     repetition: 1,
//!     warmup: false,
//!     round: 1,
//!     status: RunStatus::Ok,
//!     exit_code: Some(0),
//!     started_at: SystemTime::now(),
//!     wall: Duration::from_millis(1500),
//!     stdout: "events per second: 1234.5".into(),
//!     stderr: String::new(),
//!     error: None,
//!     limits: serde_json::json!({}),
//!     metrics: vec![MetricValue {
//!         name: "events_per_s".into(),
//!         unit: "1/s".into(),
//!         direction: isolab_stats::Direction::Higher,
//!         value: 1234.5,
//!     }],
//!     telemetry: TelemetrySet::new(),
//!     series: vec![],
//!     intervals: vec![],
//!     notes: vec![],
//! })?;
//! assert_eq!(store.resolve("quick-start")?, id);
//! assert_eq!(store.observations(id)?.len(), 1);
//! # Ok(())
//! # }
//! ```

mod backend;
mod encoding;
mod error;
mod fleet;
mod layouts;
mod model;
mod schema;
mod store;
mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;

pub use error::{BackendError, Error};
pub use fleet::{FleetHost, FleetId, FleetRecord, NewFleet};
pub use model::{
    CellId, CellRecord, ExperimentId, ExperimentRecord, ExperimentStatus, ExperimentSummary,
    Interruption, IntervalObservation, LoadInterval, MetricValue, NewCell, NewExperiment, NewRun,
    Observation, Pace, RunId, RunRecord, RunStatus, Series, UnknownStatus,
};
pub use schema::SCHEMA_VERSION;
pub use store::{Copied, Store};
pub use telemetry::{PsiLine, PsiResource, Telemetry, TelemetryName, TelemetrySet, Unit};
