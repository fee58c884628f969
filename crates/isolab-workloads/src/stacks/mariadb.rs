//! Stack `mariadb`: MariaDB 10.11 from Debian as one component, `db`.
//!
//! | file (under `{workdir}`) | what it is |
//! |---|---|
//! | `db/my.cnf` | the server's options: TCP on `{port}`, an abstract socket, durable commits, no binary log |
//! | `db/init.sql` | run at the end of `mariadb-install-db`: database `bench`, user `isolab` without a password |
//! | `db/run.sh` | the server in the foreground; `innodb-buffer-pool-size` a quarter of the shape's memory, `max-connections` the clients (`{threads}`) + 10 |
//!
//! The data directory is `{workdir}/db/data`, in the run's working directory, where
//! a storage level applies. The same configuration as the `wordpress` stack's
//! database, sized from the cell instead of fixed.

use super::{component, BuiltinStack};
use crate::stack::Ready;

pub(super) fn stack() -> BuiltinStack {
    let mut db = component(
        "db",
        "sh {workdir}/db/run.sh",
        &[
            ("db/my.cnf", include_str!("mariadb/my.cnf")),
            ("db/init.sql", include_str!("mariadb/init.sql")),
            ("db/run.sh", include_str!("mariadb/run.sh")),
        ],
        Ready::Command(
            "mariadb-admin --protocol=tcp --host={db.host} --port={db.port} --user=isolab ping"
                .into(),
        ),
    );
    db.prepare = Some(
        "mariadb-install-db --defaults-file={workdir}/db/my.cnf --auth-root-authentication-method=normal --skip-test-db --skip-name-resolve --extra-file={workdir}/db/init.sql".into(),
    );
    BuiltinStack {
        name: "mariadb",
        description: "MariaDB 10.11 (db): data directory in the run's working directory, database `bench` for user `isolab`, buffer pool a quarter of the shape's memory, max-connections the clients + 10",
        components: vec![db],
        data_load: None,
        packages: &["mariadb-server", "mariadb-client"],
    }
}
