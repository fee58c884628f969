//! Stack `postgresql`: PostgreSQL 15 from Debian as one component, `db`.
//!
//! | file (under `{workdir}`) | what it is |
//! |---|---|
//! | `db/postgresql.conf` | the server's settings: TCP only on `{port}`, durable commits, autovacuum off |
//! | `db/pg_hba.conf` | any role over TCP without a password |
//! | `db/init.sh` | prepare: `initdb` of `db/data` as the `postgres` user |
//! | `db/run.sh` | the server in the foreground as `postgres`; `shared_buffers` a quarter of the shape's memory, `max_connections` the clients (`{threads}`) + 10 |
//!
//! The data directory is `{workdir}/db/data`: the run's working directory, where a
//! storage level applies. PostgreSQL refuses to run as root, so the server runs as
//! Debian's `postgres` user, which must be able to reach the working directory (the
//! prepare step says so when it cannot). Clients connect as `postgres` to any
//! database; the workloads create theirs in their data load.

use super::{component, BuiltinStack};
use crate::stack::Ready;

pub(super) fn stack() -> BuiltinStack {
    let mut db = component(
        "db",
        "sh {workdir}/db/run.sh",
        &[
            ("db/postgresql.conf", include_str!("postgresql/postgresql.conf")),
            ("db/pg_hba.conf", include_str!("postgresql/pg_hba.conf")),
            ("db/init.sh", include_str!("postgresql/init.sh")),
            ("db/run.sh", include_str!("postgresql/run.sh")),
        ],
        Ready::Command(
            "pg_isready --quiet --host={db.host} --port={db.port} --username=postgres --dbname=postgres".into(),
        ),
    );
    db.prepare = Some("sh {workdir}/db/init.sh".into());
    BuiltinStack {
        name: "postgresql",
        description: "PostgreSQL 15 (db): data directory in the run's working directory, shared_buffers a quarter of the shape's memory, max_connections the clients + 10",
        components: vec![db],
        data_load: None,
        packages: &["postgresql-15", "postgresql-client-15"],
    }
}
