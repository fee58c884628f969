//! The SQLite backend: one file (WAL journal, synced at the store's durability points)
//! or an in-memory database.
//!
//! The schema version lives in `PRAGMA user_version` and the file is marked as an isolab
//! store with `PRAGMA application_id`.

use std::borrow::Cow;
use std::time::Duration;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params_from_iter, ErrorCode};

use super::{Begin, Connection, Dialect, Identity, Row, Value};
use crate::error::{BackendError, Kind};

/// `PRAGMA application_id` of an isolab store: "ISLB".
pub(crate) const APPLICATION_ID: i32 = 0x4953_4c42;

/// How long a statement waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection to an SQLite database.
pub(crate) struct Sqlite {
    conn: rusqlite::Connection,
}

impl From<rusqlite::Error> for BackendError {
    fn from(e: rusqlite::Error) -> BackendError {
        let kind = match e.sqlite_error_code() {
            Some(ErrorCode::NotADatabase) => Kind::NotADatabase,
            Some(ErrorCode::ConstraintViolation)
                if matches!(
                    &e,
                    rusqlite::Error::SqliteFailure(f, _)
                        if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                            || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
                ) =>
            {
                Kind::UniqueViolation
            }
            _ => Kind::Other,
        };
        BackendError::of_kind(kind, e)
    }
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Int(i) => ValueRef::Integer(*i),
            Value::Real(r) => ValueRef::Real(*r),
            Value::Text(t) => ValueRef::Text(t.as_bytes()),
            Value::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

fn value(v: ValueRef<'_>) -> Result<Value, BackendError> {
    Ok(match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(r) => Value::Real(r),
        ValueRef::Text(t) => Value::Text(
            String::from_utf8(t.to_vec())
                .map_err(|e| BackendError::message(format!("text that is not UTF-8: {e}")))?,
        ),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    })
}

impl Sqlite {
    /// Opens (creating) the file at `path`, configured for the store.
    pub(crate) fn open(path: &std::path::Path) -> Result<Sqlite, BackendError> {
        Sqlite::configure(rusqlite::Connection::open(path)?)
    }

    /// A fresh database in memory.
    pub(crate) fn in_memory() -> Result<Sqlite, BackendError> {
        Sqlite::configure(rusqlite::Connection::open_in_memory()?)
    }

    /// Busy timeout, foreign keys, WAL journal, `synchronous = NORMAL`: a committed
    /// transaction is in the journal, which survives the process's death (`kill -9`); the
    /// journal reaches the disk at each [`Connection::sync`] (a checkpoint), so a power
    /// cut loses at most what was committed since the last one.
    fn configure(conn: rusqlite::Connection) -> Result<Sqlite, BackendError> {
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.pragma_update(None, "foreign_keys", true)?;
        // In-memory databases answer `memory`: that is fine, they have no journal file.
        let _mode: String =
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        Ok(Sqlite { conn })
    }
}

impl Connection for Sqlite {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64, BackendError> {
        let changed = self
            .conn
            .prepare_cached(sql)?
            .execute(params_from_iter(args.iter()))?;
        Ok(changed as u64)
    }

    fn query(&mut self, sql: &str, args: &[Value]) -> Result<Vec<Row>, BackendError> {
        let mut out = Vec::new();
        self.query_each(sql, args, &mut |row| {
            out.push(row);
            Ok(())
        })?;
        Ok(out)
    }

    fn query_each(
        &mut self,
        sql: &str,
        args: &[Value],
        each: &mut dyn FnMut(Row) -> Result<(), BackendError>,
    ) -> Result<(), BackendError> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        let columns = stmt.column_count();
        let mut rows = stmt.query(params_from_iter(args.iter()))?;
        while let Some(row) = rows.next()? {
            // Sized once: a collect through `Result` knows no length and grows the list
            // (a million rows each grew it twice).
            let mut values = Vec::with_capacity(columns);
            for i in 0..columns {
                values.push(value(row.get_ref(i)?)?);
            }
            each(Row(values))?;
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<(), BackendError> {
        // A checkpoint syncs the journal before it copies its pages into the database
        // (then syncs that): everything committed is on the disk. PASSIVE never waits
        // for readers; what a reader holds back stays in the synced journal.
        self.conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
        Ok(())
    }

    fn batch(&mut self, sql: &str) -> Result<(), BackendError> {
        Ok(self.conn.execute_batch(sql)?)
    }

    fn another(&self) -> Option<Result<Box<dyn Connection>, BackendError>> {
        // `Some("")` for a database in memory: only its own connection sees it.
        let path = self.conn.path().filter(|p| !p.is_empty())?;
        Some(Sqlite::open(std::path::Path::new(path)).map(|c| Box::new(c) as Box<dyn Connection>))
    }

    fn begin(&mut self, kind: Begin) -> Result<(), BackendError> {
        Ok(self.conn.execute_batch(match kind {
            Begin::Read => "BEGIN DEFERRED",
            Begin::Write | Begin::Migrate => "BEGIN IMMEDIATE",
        })?)
    }

    fn commit(&mut self) -> Result<(), BackendError> {
        Ok(self.conn.execute_batch("COMMIT")?)
    }

    fn rollback(&mut self) -> Result<(), BackendError> {
        if self.conn.is_autocommit() {
            // SQLite already rolled the transaction back (e.g. after a full disk).
            return Ok(());
        }
        Ok(self.conn.execute_batch("ROLLBACK")?)
    }

    fn identity(&mut self) -> Result<Identity, BackendError> {
        let version: i64 = self
            .conn
            .pragma_query_value(None, "user_version", |row| row.get(0))?;
        let app: i32 = self
            .conn
            .pragma_query_value(None, "application_id", |row| row.get(0))?;
        let tables: i64 = self.conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
            [],
            |row| row.get(0),
        )?;
        Ok(Identity {
            // user_version is a signed 32-bit header field; a negative one is far from ours.
            version: u32::try_from(version).unwrap_or(u32::MAX),
            marked: if app == APPLICATION_ID {
                Ok(())
            } else {
                Err(format!("its application id is {app:#x}, not isolab's"))
            },
            tables: u64::try_from(tables).unwrap_or(0),
        })
    }

    fn set_identity(&mut self, version: u32) -> Result<(), BackendError> {
        self.conn
            .pragma_update(None, "application_id", APPLICATION_ID)?;
        self.conn.pragma_update(None, "user_version", version)?;
        Ok(())
    }

    fn ddl<'s>(&self, sql: &'s str) -> Cow<'s, str> {
        Cow::Borrowed(sql)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        let mut db = Sqlite::in_memory().unwrap();
        db.batch("CREATE TABLE t (i INTEGER, r REAL, s TEXT, b BLOB, n TEXT)")
            .unwrap();
        let row = vec![
            Value::Int(-3),
            Value::Real(0.5),
            Value::Text("é".into()),
            Value::Blob(vec![0, 255]),
            Value::Null,
        ];
        assert_eq!(
            db.execute("INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5)", &row)
                .unwrap(),
            1
        );
        let rows = db.query("SELECT i, r, s, b, n FROM t", &[]).unwrap();
        assert_eq!(rows, vec![Row(row)]);
    }

    #[test]
    fn unique_violations_are_recognised() {
        let mut db = Sqlite::in_memory().unwrap();
        db.batch("CREATE TABLE t (k INTEGER PRIMARY KEY, u TEXT UNIQUE)")
            .unwrap();
        db.execute("INSERT INTO t VALUES (1, 'a')", &[]).unwrap();
        let err = db
            .execute("INSERT INTO t VALUES (2, 'a')", &[])
            .unwrap_err();
        assert_eq!(err.kind(), Kind::UniqueViolation, "{err}");
        let err = db
            .execute("INSERT INTO t VALUES (1, 'b')", &[])
            .unwrap_err();
        assert_eq!(err.kind(), Kind::UniqueViolation, "{err}");
        let err = db
            .execute("INSERT INTO nowhere VALUES (1)", &[])
            .unwrap_err();
        assert_eq!(err.kind(), Kind::Other, "{err}");
    }

    #[test]
    fn a_rolled_back_transaction_leaves_nothing() {
        let mut db = Sqlite::in_memory().unwrap();
        db.batch("CREATE TABLE t (k INTEGER)").unwrap();
        db.begin(Begin::Write).unwrap();
        db.execute("INSERT INTO t VALUES (1)", &[]).unwrap();
        db.rollback().unwrap();
        assert!(db.query("SELECT k FROM t", &[]).unwrap().is_empty());
        // A rollback with nothing open is harmless.
        db.rollback().unwrap();
    }
}
