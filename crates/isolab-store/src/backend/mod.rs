//! The databases a store can live in, behind one small interface: SQLite (a file, or
//! memory) and PostgreSQL (a server a team shares).
//!
//! The store's SQL is written once, in the plain dialect both understand, with numbered
//! placeholders `?1`, `?2`, …; a backend translates what differs ([`Connection::ddl`] for
//! column types, placeholders for PostgreSQL's `$1`). Values cross the interface as
//! [`Value`], one of the five kinds the schema uses, and rows come back whole as [`Row`]s,
//! so no backend type reaches the store's code.

pub(crate) mod postgres;
pub(crate) mod sqlite;

use std::borrow::Cow;
use std::fmt;

use crate::error::BackendError;

/// A value bound to a statement or read from a row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Value {
    /// What kind of value it is, for messages.
    fn kind(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Int(_) => "an integer",
            Value::Real(_) => "a real",
            Value::Text(_) => "text",
            Value::Blob(_) => "a blob",
        }
    }
}

/// Turns a Rust value into a [`Value`] to bind: what [`args!`] calls on each argument.
pub(crate) trait ToValue {
    fn to_value(&self) -> Value;
}

impl ToValue for i64 {
    fn to_value(&self) -> Value {
        Value::Int(*self)
    }
}

impl ToValue for i32 {
    fn to_value(&self) -> Value {
        Value::Int(i64::from(*self))
    }
}

impl ToValue for u32 {
    fn to_value(&self) -> Value {
        Value::Int(i64::from(*self))
    }
}

impl ToValue for bool {
    fn to_value(&self) -> Value {
        Value::Int(i64::from(*self))
    }
}

impl ToValue for f64 {
    fn to_value(&self) -> Value {
        Value::Real(*self)
    }
}

impl ToValue for str {
    fn to_value(&self) -> Value {
        Value::Text(self.to_owned())
    }
}

impl ToValue for String {
    fn to_value(&self) -> Value {
        Value::Text(self.clone())
    }
}

impl ToValue for [u8] {
    fn to_value(&self) -> Value {
        Value::Blob(self.to_vec())
    }
}

impl ToValue for Vec<u8> {
    fn to_value(&self) -> Value {
        Value::Blob(self.clone())
    }
}

impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
}

impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Value {
        self.as_ref().map_or(Value::Null, ToValue::to_value)
    }
}

/// The arguments of a statement, each turned into a [`Value`] by reference:
/// `args![id, e.name, run.warmup]`.
macro_rules! args {
    ($($arg:expr),* $(,)?) => {
        [$($crate::backend::ToValue::to_value(&$arg)),*]
    };
}
pub(crate) use args;

/// Reads a Rust value out of a [`Value`]; the error says what was expected.
pub(crate) trait FromValue: Sized {
    fn from_value(v: &Value) -> Result<Self, &'static str>;

    /// [`FromValue::from_value`] of a value the caller gives away: text and blobs
    /// move instead of being copied.
    fn from_owned(v: Value) -> Result<Self, (Value, &'static str)> {
        Self::from_value(&v).map_err(|e| (v, e))
    }
}

impl FromValue for i64 {
    fn from_value(v: &Value) -> Result<i64, &'static str> {
        match v {
            Value::Int(i) => Ok(*i),
            _ => Err("an integer"),
        }
    }
}

impl FromValue for f64 {
    fn from_value(v: &Value) -> Result<f64, &'static str> {
        match v {
            Value::Real(r) => Ok(*r),
            // SQLite keeps a REAL that is a whole number as written by some tools.
            Value::Int(i) => Ok(*i as f64),
            _ => Err("a real"),
        }
    }
}

impl FromValue for bool {
    fn from_value(v: &Value) -> Result<bool, &'static str> {
        match v {
            Value::Int(0) => Ok(false),
            Value::Int(1) => Ok(true),
            _ => Err("0 or 1"),
        }
    }
}

impl FromValue for String {
    fn from_value(v: &Value) -> Result<String, &'static str> {
        match v {
            Value::Text(t) => Ok(t.clone()),
            _ => Err("text"),
        }
    }

    fn from_owned(v: Value) -> Result<String, (Value, &'static str)> {
        match v {
            Value::Text(t) => Ok(t),
            other => Err((other, "text")),
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(v: &Value) -> Result<Vec<u8>, &'static str> {
        match v {
            Value::Blob(b) => Ok(b.clone()),
            _ => Err("a blob"),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: &Value) -> Result<Option<T>, &'static str> {
        match v {
            Value::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }

    fn from_owned(v: Value) -> Result<Option<T>, (Value, &'static str)> {
        match v {
            Value::Null => Ok(None),
            other => T::from_owned(other).map(Some),
        }
    }
}

/// One row of a result, its columns in `SELECT` order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row(pub(crate) Vec<Value>);

impl Row {
    /// Column `i` as a `T`.
    pub(crate) fn get<T: FromValue>(&self, i: usize) -> Result<T, BackendError> {
        let v = self.0.get(i).ok_or_else(|| {
            BackendError::message(format!(
                "the query returned {} columns, column {i} was read",
                self.0.len()
            ))
        })?;
        T::from_value(v).map_err(|expected| {
            BackendError::message(format!(
                "column {i} holds {}, expected {expected}",
                v.kind()
            ))
        })
    }

    /// Column `i` as a `T`, moved out of the row (which then holds NULL there).
    pub(crate) fn take<T: FromValue>(&mut self, i: usize) -> Result<T, BackendError> {
        let columns = self.0.len();
        let v = self.0.get_mut(i).ok_or_else(|| {
            BackendError::message(format!(
                "the query returned {columns} columns, column {i} was read"
            ))
        })?;
        T::from_owned(std::mem::replace(v, Value::Null)).map_err(|(v, expected)| {
            BackendError::message(format!(
                "column {i} holds {}, expected {expected}",
                v.kind()
            ))
        })
    }
}

/// A row read whole into a Rust value: tuples of [`FromValue`]s, and the store's raw rows.
pub(crate) trait FromRow: Sized {
    fn from_row(r: &Row) -> Result<Self, BackendError>;

    /// [`FromRow::from_row`] of a row the caller gives away.
    fn from_owned_row(r: Row) -> Result<Self, BackendError> {
        Self::from_row(&r)
    }
}

macro_rules! tuple_from_row {
    ($($t:ident $i:tt),+) => {
        impl<$($t: FromValue),+> FromRow for ($($t,)+) {
            fn from_row(r: &Row) -> Result<Self, BackendError> {
                Ok(($(r.get::<$t>($i)?,)+))
            }

            fn from_owned_row(mut r: Row) -> Result<Self, BackendError> {
                Ok(($(r.take::<$t>($i)?,)+))
            }
        }
    };
}

tuple_from_row!(A 0);
tuple_from_row!(A 0, B 1);
tuple_from_row!(A 0, B 1, C 2);
tuple_from_row!(A 0, B 1, C 2, D 3);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);

/// The kind of transaction to begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Begin {
    /// Several reads that must see one snapshot.
    Read,
    /// A write: takes the write lock at once (SQLite `IMMEDIATE`), so two writers wait
    /// for each other instead of failing halfway.
    Write,
    /// A schema migration: only one process at a time, across every client of the store.
    Migrate,
}

/// What a database says about itself before isolab writes into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    /// The schema version recorded, 0 when none is.
    pub(crate) version: u32,
    /// `Err(reason)` when the database is marked as another program's.
    pub(crate) marked: Result<(), String>,
    /// How many tables it holds that are not isolab's marker.
    pub(crate) tables: u64,
}

/// Which database a connection talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dialect::Sqlite => "SQLite",
            Dialect::Postgres => "PostgreSQL",
        })
    }
}

/// A connection to the store's database: what the store runs its SQL on.
///
/// Transactions are explicit ([`Connection::begin`], then [`Connection::commit`] or
/// [`Connection::rollback`]); a statement outside one commits on its own. Statements are
/// prepared once per connection and reused.
pub(crate) trait Connection: Send {
    fn dialect(&self) -> Dialect;

    /// Runs one statement; returns the number of rows it changed.
    fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64, BackendError>;

    /// Runs one query and reads all its rows.
    fn query(&mut self, sql: &str, args: &[Value]) -> Result<Vec<Row>, BackendError>;

    /// Runs one query and hands each row to `each` as it is read, stopping at the
    /// first error (`each`'s or the backend's). For queries of many rows: no list of
    /// them all is made first.
    fn query_each(
        &mut self,
        sql: &str,
        args: &[Value],
        each: &mut dyn FnMut(Row) -> Result<(), BackendError>,
    ) -> Result<(), BackendError> {
        for row in self.query(sql, args)? {
            each(row)?;
        }
        Ok(())
    }

    /// Runs several statements without arguments (a migration).
    fn batch(&mut self, sql: &str) -> Result<(), BackendError>;

    /// Makes every committed transaction durable against a power cut (a commit is
    /// already durable against the process's death). SQLite commits without syncing
    /// the journal (`synchronous = NORMAL` in WAL mode) and syncs here; a PostgreSQL
    /// server syncs at each commit as it is configured to, so this does nothing there.
    fn sync(&mut self) -> Result<(), BackendError> {
        Ok(())
    }

    /// A second connection to the same database, to read beside this one (a report
    /// reads an experiment's runs and their telemetry at once); `None` where there is no
    /// other way in (a database in memory).
    fn another(&self) -> Option<Result<Box<dyn Connection>, BackendError>>;

    fn begin(&mut self, kind: Begin) -> Result<(), BackendError>;
    fn commit(&mut self) -> Result<(), BackendError>;
    fn rollback(&mut self) -> Result<(), BackendError>;

    /// The schema version and owner recorded in the database.
    fn identity(&mut self) -> Result<Identity, BackendError>;

    /// Marks the database as an isolab store at schema `version` (inside the migration's
    /// transaction).
    fn set_identity(&mut self, version: u32) -> Result<(), BackendError>;

    /// A migration's DDL, written in the SQLite dialect, in this backend's.
    fn ddl<'s>(&self, sql: &'s str) -> Cow<'s, str>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_bind_by_reference() {
        let name = String::from("n");
        let none: Option<f64> = None;
        let bound = args![7_i64, name, true, none, 2.5, "x", vec![1_u8, 2]];
        assert_eq!(
            bound,
            [
                Value::Int(7),
                Value::Text("n".into()),
                Value::Int(1),
                Value::Null,
                Value::Real(2.5),
                Value::Text("x".into()),
                Value::Blob(vec![1, 2]),
            ]
        );
        // `name` is still ours.
        assert_eq!(name, "n");
    }

    #[test]
    fn rows_read_as_tuples_and_say_what_they_found() {
        let row = Row(vec![
            Value::Int(3),
            Value::Null,
            Value::Text("t".into()),
            Value::Int(1),
        ]);
        let (a, b, c, d): (i64, Option<f64>, String, bool) = FromRow::from_row(&row).unwrap();
        assert_eq!((a, b, c.as_str(), d), (3, None, "t", true));
        let err = row.get::<String>(0).unwrap_err().to_string();
        assert_eq!(err, "column 0 holds an integer, expected text");
        let err = row.get::<i64>(9).unwrap_err().to_string();
        assert!(err.contains("returned 4 columns"), "{err}");
        assert!(row.get::<bool>(0).is_err());
    }
}
