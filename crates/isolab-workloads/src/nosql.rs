//! The NoSQL built-ins: a store started as a service stack in the platform
//! ([`crate::stacks`]: `redis`, `cassandra`) and its benchmark client on the host,
//! outside the platform's limits, on the cpus the store leaves
//! ([`crate::Measure::Client`]). Every command or operation type is its own
//! measurement point.
//!
//! | name | store | client | primary |
//! |---|---|---|---|
//! | `redis-benchmark` | Redis 7.0 | `redis-benchmark --csv`, 50 connections, `{work}` requests per command | `get_requests_per_second` |
//! | `cassandra-latte` | Cassandra 5.0.9 (OpenJDK 17) | latte 0.29: cassandra-stress's `keyspace1.standard1`, 100 concurrent requests, 25% writes, `{work}` operations at 1 000/s | `latency_mean` |
//!
//! `cassandra-latte` is seed 002's Cassandra job (100 threads, a quarter writes,
//! 1 000 operations in one second, mean response time) on what runs here: the
//! `cassandra` asset's `stand_in` says how it differs from the seed's Cassandra
//! 2.2 and cassandra-stress.

use crate::definition::{Work, WorkloadDef};
use crate::stack::{Measure, ShapeScope, StackDef};
use crate::{FileTemplate, ParserKind};

/// The NoSQL built-ins.
pub fn workloads() -> Vec<WorkloadDef> {
    vec![redis_benchmark(), cassandra_latte()]
}

/// The commands `redis-benchmark` tests, as its `-t` names them.
const REDIS_COMMANDS: &str = "set,get,incr,lpush,lpop,sadd,hset,mset";

/// The components of built-in stack `name`, measured by a client on the host.
fn client_of(name: &str) -> StackDef {
    let stack = crate::stacks::stack(name).expect("a built-in stack");
    StackDef {
        components: stack.components,
        shape: ShapeScope::Component,
        data_load: stack.data_load,
        data_paths: Vec::new(),
        keep_data: false,
        measure: Measure::Client,
    }
}

/// A NoSQL built-in from its parts.
fn nosql(
    name: &str,
    description: &str,
    command: &str,
    parser: ParserKind,
    primary: &str,
    work: (u64, &str),
    tools: &[&str],
) -> WorkloadDef {
    let stack = if name.starts_with("redis") {
        "redis"
    } else {
        "cassandra"
    };
    WorkloadDef {
        name: name.into(),
        description: description.into(),
        command: command.into(),
        prepare: None,
        cleanup: None,
        server: None,
        files: Vec::new(),
        parser,
        primary: primary.into(),
        uses_disk: false,
        tools: tools.iter().map(|t| t.to_string()).collect(),
        stack: Some(client_of(stack)),
        packages: crate::stacks::stack(stack)
            .map(|s| s.packages.iter().map(|p| p.to_string()).collect())
            .unwrap_or_default(),
        work: Some(Work {
            amount: work.0,
            unit: work.1.into(),
        }),
        assets: crate::stacks::assets(stack),
    }
}

/// Redis under `redis-benchmark --csv`: keys over a range of 100 000 (`-r`), one
/// point per command.
fn redis_benchmark() -> WorkloadDef {
    nosql(
        "redis-benchmark",
        "Redis 7.0 in the platform, redis-benchmark --csv on the host: SET, GET, INCR, LPUSH, LPOP, SADD, HSET, MSET, {work} requests each over 50 connections; requests/s and latency per command (each its own point)",
        &format!(
            "redis-benchmark -h {{db.host}} -p {{db.port}} --csv -c 50 -n {{work}} -r 100000 -t {REDIS_COMMANDS}"
        ),
        ParserKind::RedisBenchmark,
        "get_requests_per_second",
        (100_000, "requests per command"),
        &["redis-benchmark", "redis-server", "redis-cli"],
    )
}

/// Seed 002's Cassandra job on Cassandra 5.0.9 with latte: 100 concurrent
/// requests, 25% writes and 75% reads of 1 000 partitions written first, `{work}`
/// operations at 1 000 a second.
fn cassandra_latte() -> WorkloadDef {
    let file = |path: &str, contents: &str| FileTemplate {
        path: format!("cassandra-latte/{path}"),
        contents: contents.into(),
    };
    WorkloadDef {
        // Its data, commit log and hints are in the working directory.
        uses_disk: true,
        files: vec![
            file("client.sh", include_str!("stacks/cassandra/client.sh")),
            file("schema.cql", include_str!("stacks/cassandra/schema.cql")),
            file("mixed.rn", include_str!("stacks/cassandra/mixed.rn")),
        ],
        ..nosql(
            "cassandra-latte",
            "Cassandra 5.0.9 (OpenJDK 17) in the platform, latte on the host: cassandra-stress's keyspace1.standard1, 100 concurrent requests, 25% writes and 75% reads of 1000 partitions, {work} operations at 1000/s; mean response time and percentiles, overall and per operation (seed 002's Cassandra job; seed 002 ran Cassandra 2.2 with cassandra-stress)",
            "sh {workdir}/cassandra-latte/client.sh {db.host} {db.port} {work} 100 25 1000 1000",
            ParserKind::Latte,
            "latency_mean",
            (1_000, "operations (25% writes)"),
            &["sh", "java", "latte"],
        )
    }
}
