//! The `redis` stack: Redis 7.0 from Debian's `redis-server`, one component `db` in
//! the foreground with its data directory in the run's working directory
//! (`{workdir}/db`), no persistence while measured. Its built-in client is
//! `redis-benchmark --csv` on the host ([`crate::nosql`]).

use crate::stack::Ready;

use super::{component, BuiltinStack};

/// The stack.
pub(super) fn stack() -> BuiltinStack {
    BuiltinStack {
        name: "redis",
        description: "Redis 7.0 (db) with its data in the working directory, no persistence",
        components: vec![component(
            "db",
            "redis-server {workdir}/db/redis.conf",
            &[("db/redis.conf", include_str!("redis/redis.conf"))],
            Ready::Command("redis-cli -h {db.host} -p {db.port} ping".into()),
        )],
        data_load: None,
        packages: &["redis-server"],
    }
}
