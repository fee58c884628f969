//! The PostgreSQL backend: a store a team shares, written by many hosts at once.
//!
//! - **Where:** a `postgres://` or `postgresql://` URL (libpq's syntax: user, password,
//!   host or Unix-socket directory, port, database, `?options=-csearch_path=SCHEMA` for a
//!   schema of its own). The password never appears in messages ([`redact`]).
//! - **Schema:** the same migrations as SQLite, their column types translated by
//!   [`ddl`]: `INTEGER` is `BIGINT`, `REAL` `DOUBLE PRECISION`, `BLOB` `BYTEA`, ids
//!   identities, and text compares byte by byte (`COLLATE "C"`), as SQLite's does, so
//!   both backends order names alike. The version and owner live in a one-row table
//!   `isolab_store`; migrations hold an advisory lock, so two hosts opening a new store at
//!   once cannot both migrate it.
//! - **Transactions:** a write is one `READ COMMITTED` transaction (the uniqueness of
//!   `(cell, warmup, repetition)` is the database's constraint, so two writers can never
//!   store the same run twice); reads of several queries run in one `REPEATABLE READ
//!   READ ONLY` snapshot.
//! - **A lost connection** (server restart, `pg_terminate_backend`, network): the
//!   statement fails with an error whose [`crate::BackendError::is_connection_lost`] is
//!   true, the server rolls back whatever was open, and the next statement outside a
//!   transaction connects again.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

use bytes::BytesMut;
use postgres::error::SqlState;
use postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use postgres::{Client, Config, NoTls, Statement};

use super::{Begin, Connection, Dialect, Identity, Row, Value};
use crate::error::{BackendError, Kind};

/// The one-row table that marks a database (or schema) as an isolab store.
const MARKER: &str = "isolab_store";

/// The advisory lock key migrations hold: "ISLB".
const MIGRATION_LOCK: i64 = 0x4953_4c42;

/// How long a connection attempt may take when the URL does not say.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether `location` is a PostgreSQL URL.
pub(crate) fn is_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// `url` with its password, in the user part or in a `password=` parameter, shown as
/// `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{user}:***@{host}"),
            None => authority.to_owned(),
        },
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some(("password", _)) => "password=***".to_owned(),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// The connection settings in `url`, or what is wrong with it.
pub(crate) fn parse(url: &str) -> Result<Config, String> {
    let mut config: Config = url.parse().map_err(|e: postgres::Error| e.to_string())?;
    if config.get_dbname().is_none() {
        return Err("the URL names no database (postgres://USER@HOST/DATABASE)".to_owned());
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    Ok(config)
}

/// The store's SQL with SQLite's numbered placeholders `?N` written as PostgreSQL's `$N`
/// (outside quoted text).
pub(crate) fn placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quoted = false;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = !quoted;
                out.push(c);
            }
            '?' if !quoted && chars.peek().is_some_and(char::is_ascii_digit) => out.push('$'),
            _ => out.push(c),
        }
    }
    out
}

/// A migration written for SQLite, in PostgreSQL's column types (see the module doc).
pub(crate) fn ddl(sql: &str) -> String {
    sql.lines()
        .map(|line| {
            let line = if line.contains("INTEGER PRIMARY KEY AUTOINCREMENT") {
                line.replace(
                    "INTEGER PRIMARY KEY AUTOINCREMENT",
                    "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
                )
            } else if line.split_whitespace().next() == Some("id")
                && line.contains("INTEGER PRIMARY KEY")
            {
                // SQLite's rowid alias: assigned when not given.
                line.replace(
                    "INTEGER PRIMARY KEY",
                    "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
                )
            } else {
                line.to_owned()
            };
            words(&line, |word| match word {
                "INTEGER" => Some("BIGINT"),
                "REAL" => Some("DOUBLE PRECISION"),
                "BLOB" => Some("BYTEA"),
                "TEXT" => Some("TEXT COLLATE \"C\""),
                _ => None,
            })
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `line` with each whole word that `map` maps replaced.
fn words(line: &str, map: impl Fn(&str) -> Option<&'static str>) -> String {
    let mut out = String::with_capacity(line.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        out.push_str(map(word).unwrap_or(word));
        word.clear();
    };
    for c in line.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

impl From<postgres::Error> for BackendError {
    fn from(e: postgres::Error) -> BackendError {
        let kind = if e.is_closed() {
            Kind::Connection
        } else if let Some(code) = e.code() {
            if *code == SqlState::UNIQUE_VIOLATION {
                Kind::UniqueViolation
            } else if code.code().starts_with("08")
                || *code == SqlState::ADMIN_SHUTDOWN
                || *code == SqlState::CRASH_SHUTDOWN
                || *code == SqlState::CANNOT_CONNECT_NOW
            {
                Kind::Connection
            } else {
                Kind::Other
            }
        } else if std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>()) {
            Kind::Connection
        } else {
            Kind::Other
        };
        BackendError::of_kind(kind, e)
    }
}

impl ToSql for Value {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let ty_is = |t: &Type| ty == t;
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) if ty_is(&Type::INT8) => i.to_sql(ty, out),
            Value::Int(i) if ty_is(&Type::INT4) => i32::try_from(*i)?.to_sql(ty, out),
            Value::Int(i) if ty_is(&Type::INT2) => i16::try_from(*i)?.to_sql(ty, out),
            Value::Int(i) if ty_is(&Type::FLOAT8) => (*i as f64).to_sql(ty, out),
            Value::Int(i) if ty_is(&Type::BOOL) => (*i != 0).to_sql(ty, out),
            Value::Real(r) if ty_is(&Type::FLOAT8) => r.to_sql(ty, out),
            Value::Real(r) if ty_is(&Type::FLOAT4) => (*r as f32).to_sql(ty, out),
            Value::Text(t) => t.as_str().to_sql(ty, out),
            Value::Blob(b) => b.as_slice().to_sql(ty, out),
            other => {
                Err(format!("cannot bind {} to a parameter of type {ty}", other.kind()).into())
            }
        }
    }

    fn accepts(_: &Type) -> bool {
        // Checked per value in `to_sql`, which knows the parameter's type.
        true
    }

    to_sql_checked!();
}

/// Column `i` of `row` as a [`Value`].
fn value(row: &postgres::Row, i: usize) -> Result<Value, BackendError> {
    let ty = row.columns()[i].type_();
    let int = |v: Option<i64>| v.map_or(Value::Null, Value::Int);
    let real = |v: Option<f64>| v.map_or(Value::Null, Value::Real);
    Ok(if *ty == Type::INT8 {
        int(row.try_get(i)?)
    } else if *ty == Type::INT4 {
        int(row.try_get::<_, Option<i32>>(i)?.map(i64::from))
    } else if *ty == Type::INT2 {
        int(row.try_get::<_, Option<i16>>(i)?.map(i64::from))
    } else if *ty == Type::BOOL {
        int(row.try_get::<_, Option<bool>>(i)?.map(i64::from))
    } else if *ty == Type::FLOAT8 {
        real(row.try_get(i)?)
    } else if *ty == Type::FLOAT4 {
        real(row.try_get::<_, Option<f32>>(i)?.map(f64::from))
    } else if [Type::TEXT, Type::VARCHAR, Type::BPCHAR, Type::NAME].contains(ty) {
        row.try_get::<_, Option<String>>(i)?
            .map_or(Value::Null, Value::Text)
    } else if *ty == Type::BYTEA {
        row.try_get::<_, Option<Vec<u8>>>(i)?
            .map_or(Value::Null, Value::Blob)
    } else {
        return Err(BackendError::message(format!(
            "column {i} (`{}`) has type {ty}, which the store never uses",
            row.columns()[i].name()
        )));
    })
}

/// A connection to a PostgreSQL store.
pub(crate) struct Postgres {
    config: Config,
    client: Client,
    /// Prepared statements by the store's SQL text, for this connection.
    statements: HashMap<String, Statement>,
    in_transaction: bool,
    /// A statement failed because the connection was lost: connect again before the next.
    lost: bool,
}

impl Postgres {
    pub(crate) fn connect(config: Config) -> Result<Postgres, BackendError> {
        let client = config.connect(NoTls)?;
        Ok(Postgres {
            config,
            client,
            statements: HashMap::new(),
            in_transaction: false,
            lost: false,
        })
    }

    /// Connects again when the server closed the connection and no transaction is open
    /// (an open one died with the connection and is reported by its next statement).
    fn reconnect_if_closed(&mut self) -> Result<(), BackendError> {
        if (self.lost || self.client.is_closed()) && !self.in_transaction {
            self.client = self.config.connect(NoTls)?;
            self.statements.clear();
            self.lost = false;
        }
        Ok(())
    }

    /// `result` as the store's error, remembering a lost connection.
    fn checked<T>(&mut self, result: Result<T, postgres::Error>) -> Result<T, BackendError> {
        result.map_err(|e| {
            let e = BackendError::from(e);
            if e.is_connection_lost() {
                self.lost = true;
            }
            e
        })
    }

    fn statement(&mut self, sql: &str) -> Result<Statement, BackendError> {
        self.reconnect_if_closed()?;
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let prepared = self.client.prepare(&placeholders(sql));
        let statement = self.checked(prepared)?;
        self.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }
}

fn refs(args: &[Value]) -> Vec<&(dyn ToSql + Sync)> {
    args.iter().map(|v| v as &(dyn ToSql + Sync)).collect()
}

impl Connection for Postgres {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64, BackendError> {
        let statement = self.statement(sql)?;
        let done = self.client.execute(&statement, &refs(args));
        self.checked(done)
    }

    fn query(&mut self, sql: &str, args: &[Value]) -> Result<Vec<Row>, BackendError> {
        let statement = self.statement(sql)?;
        let rows = self.client.query(&statement, &refs(args));
        let rows = self.checked(rows)?;
        rows.iter()
            .map(|row| {
                (0..row.len())
                    .map(|i| value(row, i))
                    .collect::<Result<Vec<Value>, BackendError>>()
                    .map(Row)
            })
            .collect()
    }

    fn batch(&mut self, sql: &str) -> Result<(), BackendError> {
        self.reconnect_if_closed()?;
        let done = self.client.batch_execute(sql);
        self.checked(done)
    }

    fn another(&self) -> Option<Result<Box<dyn Connection>, BackendError>> {
        Some(Postgres::connect(self.config.clone()).map(|c| Box::new(c) as Box<dyn Connection>))
    }

    fn begin(&mut self, kind: Begin) -> Result<(), BackendError> {
        self.reconnect_if_closed()?;
        let sql = match kind {
            Begin::Read => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY".to_owned(),
            Begin::Write => "BEGIN".to_owned(),
            Begin::Migrate => format!("BEGIN; SELECT pg_advisory_xact_lock({MIGRATION_LOCK})"),
        };
        let begun = self.client.batch_execute(&sql);
        self.checked(begun)?;
        self.in_transaction = true;
        Ok(())
    }

    fn commit(&mut self) -> Result<(), BackendError> {
        self.in_transaction = false;
        let done = self.client.batch_execute("COMMIT");
        self.checked(done)
    }

    fn rollback(&mut self) -> Result<(), BackendError> {
        self.in_transaction = false;
        if self.lost || self.client.is_closed() {
            // The server rolled it back when the connection ended.
            return Ok(());
        }
        let done = self.client.batch_execute("ROLLBACK");
        self.checked(done)
    }

    fn identity(&mut self) -> Result<Identity, BackendError> {
        let rows = self.query(
            "SELECT count(*) FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_name <> ?1",
            &[Value::Text(MARKER.to_owned())],
        )?;
        let tables: i64 = rows.first().map(|r| r.get(0)).transpose()?.unwrap_or(0);
        let marker = self.query(
            "SELECT EXISTS (SELECT 1 FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_name = ?1)",
            &[Value::Text(MARKER.to_owned())],
        )?;
        let marked: bool = marker
            .first()
            .map(|r| r.get(0))
            .transpose()?
            .unwrap_or(false);
        let tables = u64::try_from(tables).unwrap_or(0);
        if !marked {
            return Ok(Identity {
                version: 0,
                marked: Ok(()),
                tables,
            });
        }
        let rows = self.query(&format!("SELECT application, version FROM {MARKER}"), &[])?;
        let (application, version): (String, i64) = match rows.as_slice() {
            [row] => (row.get(0)?, row.get(1)?),
            _ => {
                return Ok(Identity {
                    version: u32::MAX,
                    marked: Err(format!(
                        "its table `{MARKER}` holds {} rows instead of one",
                        rows.len()
                    )),
                    tables,
                })
            }
        };
        Ok(Identity {
            version: u32::try_from(version).unwrap_or(u32::MAX),
            marked: if application == "isolab" {
                Ok(())
            } else {
                Err(format!(
                    "its table `{MARKER}` names the application `{application}`"
                ))
            },
            tables,
        })
    }

    fn set_identity(&mut self, version: u32) -> Result<(), BackendError> {
        self.batch(&format!(
            "CREATE TABLE IF NOT EXISTS {MARKER} (application TEXT NOT NULL, \
             version BIGINT NOT NULL); DELETE FROM {MARKER}"
        ))?;
        self.execute(
            &format!("INSERT INTO {MARKER} (application, version) VALUES ('isolab', ?1)"),
            &[Value::Int(i64::from(version))],
        )?;
        Ok(())
    }

    fn ddl<'s>(&self, sql: &'s str) -> Cow<'s, str> {
        Cow::Owned(ddl(sql))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_hidden() {
        assert_eq!(
            redact("postgres://isolab:s3cret@db.example:5432/results"),
            "postgres://isolab:***@db.example:5432/results"
        );
        assert_eq!(
            redact("postgresql://u@h/d?password=x&sslmode=disable"),
            "postgresql://u@h/d?password=***&sslmode=disable"
        );
        assert_eq!(redact("postgres://u@h/d"), "postgres://u@h/d");
        assert_eq!(
            redact("postgres://u:p@ss@h/d"),
            "postgres://u:***@h/d",
            "the last @ ends the user part"
        );
    }

    #[test]
    fn placeholders_are_numbered_the_postgres_way() {
        assert_eq!(
            placeholders("SELECT a FROM t WHERE b = ?1 AND c = '?2' AND d = ?12"),
            "SELECT a FROM t WHERE b = $1 AND c = '?2' AND d = $12"
        );
    }

    #[test]
    fn ddl_translates_types_and_ids() {
        let sql = "CREATE TABLE runs (\n    id            INTEGER PRIMARY KEY AUTOINCREMENT,\n    \
                   cell_id INTEGER NOT NULL REFERENCES cells (id),\n    value REAL,\n    \
                   points BLOB NOT NULL,\n    name TEXT NOT NULL\n);\n\
                   CREATE TABLE cells (\n    id            INTEGER PRIMARY KEY,\n    \
                   idx INTEGER\n);\n\
                   CREATE TABLE run_logs (\n    run_id INTEGER PRIMARY KEY REFERENCES runs (id)\n);";
        let out = ddl(sql);
        assert!(
            out.contains("id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"),
            "{out}"
        );
        assert!(
            out.contains("id            BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"),
            "{out}"
        );
        assert!(
            out.contains("run_id BIGINT PRIMARY KEY REFERENCES runs (id)"),
            "{out}"
        );
        assert!(out.contains("value DOUBLE PRECISION,"), "{out}");
        assert!(out.contains("points BYTEA NOT NULL"), "{out}");
        assert!(out.contains("name TEXT COLLATE \"C\" NOT NULL"), "{out}");
        assert!(!out.contains("INTEGER"), "{out}");
    }

    #[test]
    fn urls_without_a_database_or_of_bad_syntax_are_refused() {
        assert!(parse("postgres://u@h/d").is_ok());
        let err = parse("postgres://u@h").unwrap_err();
        assert!(err.contains("no database"), "{err}");
        assert!(parse("postgres://u@h:notaport/d").is_err());
        assert!(is_url("postgresql://x/y") && is_url("postgres://x/y"));
        assert!(!is_url("results.db") && !is_url("sqlite://x"));
    }
}
