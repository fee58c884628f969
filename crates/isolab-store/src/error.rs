//! What can go wrong in the store. Each message says what failed, on which store or
//! object, and what to do; the database's own message is the error's source (print the
//! chain to see it).

use std::fmt;

use crate::model::{CellId, ExperimentId, RunId};

/// A failure of the database backend, kept opaque so that no backend's types leak into
/// the store's API. Its message is the backend's message.
#[derive(Debug)]
pub struct BackendError {
    kind: Kind,
    inner: Box<dyn std::error::Error + Send + Sync + 'static>,
}

/// What the store needs to know about a backend failure to act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Other,
    /// The file is not a database of this backend.
    NotADatabase,
    /// A UNIQUE or PRIMARY KEY constraint refused a row.
    UniqueViolation,
    /// The connection to the server was lost or refused: a new connection may succeed.
    Connection,
}

impl BackendError {
    pub(crate) fn of_kind(
        kind: Kind,
        e: impl std::error::Error + Send + Sync + 'static,
    ) -> BackendError {
        BackendError {
            kind,
            inner: Box::new(e),
        }
    }

    /// An error the store itself detected while reading the backend's answer.
    pub(crate) fn message(message: String) -> BackendError {
        BackendError {
            kind: Kind::Other,
            inner: message.into(),
        }
    }

    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    /// Whether the connection to the database server was lost: the operation was not done
    /// (or its outcome is unknown) and may be retried on a new connection.
    pub fn is_connection_lost(&self) -> bool {
        self.kind == Kind::Connection
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl std::error::Error for BackendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner.source()
    }
}

/// An error of the results store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database could not be opened or configured.
    #[error(
        "cannot open the results store {store}: check that its directory exists and is \
         writable, or choose another file"
    )]
    Open {
        /// The store's location (a path, or `:memory:`).
        store: String,
        /// The backend's error.
        #[source]
        source: BackendError,
    },

    /// The PostgreSQL server could not be reached or refused the connection.
    #[error(
        "cannot connect to the results store {store}: check that the PostgreSQL server \
         runs and that this URL's host, port, user, password and database are right \
         (`psql '{store}'` must connect)"
    )]
    Connect {
        /// The store's URL, its password hidden.
        store: String,
        /// The backend's error.
        #[source]
        source: BackendError,
    },

    /// `--db` names something isolab cannot open as a store.
    #[error(
        "`{location}` is not a results store isolab can open: {reason}; give a file path \
         (SQLite) or a postgres://USER@HOST[:PORT]/DATABASE URL (PostgreSQL)"
    )]
    Location {
        /// What was given, its password hidden.
        location: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The file exists but is not an isolab results store.
    #[error(
        "{store} is not an isolab results store ({reason}); choose another file, isolab will \
         not write into it"
    )]
    NotAStore {
        /// The store's location.
        store: String,
        /// What gave it away.
        reason: String,
    },

    /// The store was written by a newer isolab.
    #[error(
        "the results store {store} has schema version {found}, newer than this isolab \
         supports ({supported}): upgrade isolab"
    )]
    SchemaTooNew {
        /// The store's location.
        store: String,
        /// The version found in the store.
        found: u32,
        /// The newest version this build knows.
        supported: u32,
    },

    /// A schema migration failed; its transaction was rolled back.
    #[error(
        "upgrading the results store {store} from schema version {from} to {to} failed; \
         the store was left at version {from}: check free disk space and that no other \
         program holds the file, then retry"
    )]
    Migrate {
        /// The store's location.
        store: String,
        /// The version the store is at.
        from: u32,
        /// The version the failed migration leads to.
        to: u32,
        /// The backend's error.
        #[source]
        source: BackendError,
    },

    /// A query or statement failed.
    #[error("{operation} in the results store {store} failed")]
    Sql {
        /// What was being done, e.g. `inserting run 3 of cell 5`.
        operation: String,
        /// The store's location.
        store: String,
        /// The backend's error.
        #[source]
        source: BackendError,
    },

    /// A value could not be encoded for storage.
    #[error("{operation}: cannot encode the value as JSON")]
    Encode {
        /// What was being done.
        operation: String,
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },

    /// No experiment has the requested id or name.
    #[error("{}", no_such_experiment(requested, known))]
    NoSuchExperiment {
        /// What was asked for (an id or a name).
        requested: String,
        /// The experiments that exist, newest first: `(id, name)`.
        known: Vec<(ExperimentId, String)>,
    },

    /// No cell has the given id (in the given experiment, when one was named).
    #[error("no cell with id {cell}{}: {context}", in_experiment(experiment))]
    NoSuchCell {
        /// The cell asked for.
        cell: CellId,
        /// The experiment it was expected in, if any.
        experiment: Option<ExperimentId>,
        /// What was being done.
        context: String,
    },

    /// No run has the given id.
    #[error(
        "no run with id {run} in the results store: check the run id against the experiment's runs"
    )]
    NoSuchRun {
        /// The run asked for.
        run: RunId,
    },

    /// A run of this cell, kind and repetition is already stored; the stored one is kept.
    #[error(
        "cell {cell} (`{cell_key}`) already has a stored {} run for repetition {repetition}; \
         the stored run is kept and this one was not written",
        if *warmup { "warm-up" } else { "counted" }
    )]
    DuplicateRun {
        /// The cell's id.
        cell: CellId,
        /// The cell's key.
        cell_key: String,
        /// The repetition number.
        repetition: u32,
        /// Whether it is a warm-up run.
        warmup: bool,
    },

    /// The destination store already holds the experiment being copied.
    #[error(
        "experiment {experiment} (`{name}`) is already in {store}, as experiment \
         {existing} (same name, seed and creation time); nothing was copied"
    )]
    AlreadyCopied {
        /// The experiment's id in the source store.
        experiment: ExperimentId,
        /// Its name.
        name: String,
        /// The destination store's location.
        store: String,
        /// Its id in the destination store.
        existing: ExperimentId,
    },

    /// No fleet has the requested id or name.
    #[error("{}", no_such_fleet(requested, known))]
    NoSuchFleet {
        /// What was asked for (an id or a name).
        requested: String,
        /// The fleets that exist, newest first: `(id, name)`.
        known: Vec<(crate::model::FleetId, String)>,
    },

    /// A host of a fleet already has its experiment.
    #[error(
        "host `{host}` already has experiment {experiment} in fleet {fleet}: resume it \
         (`isolab run --resume {experiment}`) instead of starting another"
    )]
    FleetHostTaken {
        /// The fleet.
        fleet: crate::model::FleetId,
        /// The host.
        host: String,
        /// Its experiment.
        experiment: ExperimentId,
    },

    /// A stored value cannot be read back.
    #[error(
        "corrupt value in table `{table}` ({row}), column `{column}`: `{value}` ({reason}); \
         the store was damaged or written by another program"
    )]
    Corrupt {
        /// The table.
        table: &'static str,
        /// Which row, by its key columns, e.g. `run_id 12, position 0`.
        row: String,
        /// The column.
        column: &'static str,
        /// The value found, as text.
        value: String,
        /// What was expected.
        reason: String,
    },
}

/// How many known experiments a [`Error::NoSuchExperiment`] message lists.
const LISTED: usize = 10;

fn no_such_experiment(requested: &str, known: &[(ExperimentId, String)]) -> String {
    if known.is_empty() {
        return format!(
            "no experiment `{requested}`: the results store holds no experiments yet; \
             start one with `isolab run`"
        );
    }
    let listed: Vec<String> = known
        .iter()
        .take(LISTED)
        .map(|(id, name)| format!("{id} ({name})"))
        .collect();
    let more = match known.len().saturating_sub(LISTED) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    format!(
        "no experiment `{requested}`: give an id or a name from `isolab list`; \
         newest first: {}{more}",
        listed.join(", ")
    )
}

fn no_such_fleet(requested: &str, known: &[(crate::model::FleetId, String)]) -> String {
    if known.is_empty() {
        return format!(
            "no fleet `{requested}`: the results store holds no fleets; submit one with \
             `isolab fleet submit SPEC --db postgres://…`"
        );
    }
    let listed: Vec<String> = known
        .iter()
        .take(LISTED)
        .map(|(id, name)| format!("{id} ({name})"))
        .collect();
    format!(
        "no fleet `{requested}`: give an id or a name; newest first: {}",
        listed.join(", ")
    )
}

fn in_experiment(experiment: &Option<ExperimentId>) -> String {
    experiment.map_or_else(String::new, |e| format!(" in experiment {e}"))
}

/// Attaches the operation being performed to a backend error.
pub(crate) trait Context<T> {
    /// Maps the error to [`Error::Sql`] naming `operation` and the store.
    fn during(self, store: &str, operation: impl FnOnce() -> String) -> Result<T, Error>;
}

impl<T> Context<T> for Result<T, BackendError> {
    fn during(self, store: &str, operation: impl FnOnce() -> String) -> Result<T, Error> {
        self.map_err(|e| Error::Sql {
            operation: operation(),
            store: store.to_owned(),
            source: e,
        })
    }
}

impl Error {
    /// Whether the failure is a lost connection to the database server: nothing was
    /// written by the failed operation (a transaction that did not commit is rolled back
    /// by the server), and it may be retried once the server is back.
    pub fn is_connection_lost(&self) -> bool {
        match self {
            Error::Sql { source, .. } | Error::Connect { source, .. } => {
                source.is_connection_lost()
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_such_experiment_lists_what_exists() {
        let e = Error::NoSuchExperiment {
            requested: "cpu".into(),
            known: vec![(3, "pinning".into()), (1, "quick-start".into())],
        };
        let msg = e.to_string();
        assert!(msg.contains("`cpu`"), "{msg}");
        assert!(msg.contains("3 (pinning), 1 (quick-start)"), "{msg}");
        assert!(msg.contains("isolab list"), "{msg}");
    }

    #[test]
    fn no_such_experiment_in_an_empty_store_says_how_to_start() {
        let e = Error::NoSuchExperiment {
            requested: "7".into(),
            known: vec![],
        };
        assert!(e.to_string().contains("isolab run"), "{e}");
    }

    #[test]
    fn long_lists_are_cut() {
        let known = (1..=25).rev().map(|i| (i, format!("e{i}"))).collect();
        let e = Error::NoSuchExperiment {
            requested: "x".into(),
            known,
        };
        let msg = e.to_string();
        assert!(msg.contains("25 (e25)"), "{msg}");
        assert!(!msg.contains("15 (e15)"), "{msg}");
        assert!(msg.ends_with("and 15 more"), "{msg}");
    }

    #[test]
    fn duplicate_run_names_the_cell_and_repetition() {
        let e = Error::DuplicateRun {
            cell: 5,
            cell_key: "platform=host".into(),
            repetition: 3,
            warmup: false,
        };
        let msg = e.to_string();
        assert!(msg.contains("cell 5 (`platform=host`)"), "{msg}");
        assert!(msg.contains("repetition 3"), "{msg}");
    }

    #[test]
    fn sql_errors_keep_the_backend_message_as_source() {
        let r: Result<(), BackendError> = Err(BackendError::message("no row".into()));
        let e = r.during("x.db", || "reading run 4".into()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "reading run 4 in the results store x.db failed"
        );
        let source = std::error::Error::source(&e).unwrap();
        assert_eq!(source.to_string(), "no row");
    }
}
