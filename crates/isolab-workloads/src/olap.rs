//! The OLAP workloads: TPC-H (22 queries, 8 tables) and TPC-DS (99 queries, 24 tables,
//! the public kit closest to seed 000's 38 tables) against PostgreSQL 15 of the
//! built-in stack `postgresql`, every query its own measurement point.
//!
//! - **Data**: the asset `tpch` or `tpcds`, generated once per scale factor on the
//!   host by DuckDB 1.5.5's own `tpch`/`tpcds` extensions (`CALL dbgen(sf)`,
//!   `CALL dsdgen(sf)`), loaded by file path from PyPI's `duckdb-extension-tpch` and
//!   `duckdb-extension-tpcds` 1.5.5 in `/opt/isolab/duckdb` (never downloaded at run
//!   time), exported as `|`-separated CSV with the schema, TPC-H's keys and the query
//!   texts ([`GENERATE`]); cached by content hash like every asset. `{work}` is the
//!   scale factor in hundredths (1 = sf 0.01).
//! - **Dialect**: DuckDB's query texts run unchanged on PostgreSQL 15: its TPC-H
//!   and TPC-DS queries already have their substitution parameters and date
//!   arithmetic folded into literals (`CAST('1995-01-01' AS date)`), and use
//!   standard `extract`, `substring … FROM … FOR`, CTEs, `ROLLUP` and `LIMIT`. No
//!   query needed a change; TPC-H needs its primary keys (q20 runs ~50 s without
//!   them at sf 0.01, 0.1 s with them), which the data load adds.
//! - **Load** (in the platform, unmeasured): database `olap`, its tables, the data
//!   by `\copy`, the keys, `VACUUM ANALYZE`; the data set's size is stored with the
//!   run (`data-set.json`).
//! - **Measure** (a client on the host, outside the platform's limits, over one
//!   connection): each query's elapsed time (`qNN_time`: execute and fetch every
//!   row) and the database's cpu time during it (`qNN_db_cpu_time`, from its
//!   cgroup through `{db.cpu_usage}`), and `total_time`, the primary metric. A
//!   query that fails fails the run with the database's message. Every query is a
//!   point of `isolab compare --all-metrics`.

use crate::definition::{Work, WorkloadDef};
use crate::oltp::{client_of, file};
use crate::ParserKind;

/// The data set's generator, run by the asset's script in the DuckDB venv.
pub const GENERATE: &str = include_str!("olap/generate.py");

/// The Python of the venv setup installs DuckDB and its extensions into.
pub const DUCKDB_PYTHON: &str = "/opt/isolab/duckdb/bin/python3";

/// The benchmarks, each a workload `NAME-pgsql` and an asset `NAME`.
pub const BENCHMARKS: [&str; 2] = ["tpch", "tpcds"];

/// Every OLAP workload.
pub(crate) fn workloads() -> Vec<WorkloadDef> {
    vec![
        olap(
            "tpch",
            "TPC-H (22 queries, 8 tables)",
            "TPC-H data and queries at scale factor {work}/100 from DuckDB 1.5.5's tpch extension",
        ),
        olap(
            "tpcds",
            "TPC-DS (99 queries, 24 tables)",
            "TPC-DS data and queries at scale factor {work}/100 from DuckDB 1.5.5's tpcds extension",
        ),
    ]
}

/// The data set of `benchmark`, generated on the host.
fn data_set(benchmark: &str, description: &str) -> crate::AssetDef {
    crate::AssetDef {
        name: benchmark.into(),
        description: description.into(),
        script: format!(
            "if [ ! -x {DUCKDB_PYTHON} ]; then\n\
             \x20 echo 'the {benchmark} data set needs PyPI duckdb==1.5.5 with duckdb-extension-{benchmark}==1.5.5 in /opt/isolab/duckdb: run scripts/setup.sh' >&2; exit 1\n\
             fi\n\
             {DUCKDB_PYTHON} generate.py {benchmark} @work@ .\n\
             rm generate.py\n"
        ),
        sources: vec![crate::stack::FileTemplate {
            path: "generate.py".into(),
            contents: GENERATE.into(),
        }],
        // The venv's python is Debian's (its duckdb version is pinned in the script).
        tools: vec![("python3".into(), "python3-minimal".into())],
        stand_in: None,
    }
}

/// `benchmark`'s queries against PostgreSQL, one point each.
fn olap(benchmark: &str, what: &str, data: &str) -> WorkloadDef {
    let load = include_str!("olap/load.sh").replace("@asset@", benchmark);
    let files = vec![
        file("olap/load.sh", &load),
        file("olap/client.py", include_str!("olap/client.py")),
    ];
    let mut w = client_of(
        "postgresql",
        "sh {workdir}/olap/load.sh {db.host} {db.port}".into(),
        &[],
        files,
        WorkloadDef {
            name: format!("{benchmark}-pgsql"),
            description: format!(
                "{what} against PostgreSQL 15 at scale factor {{work}}/100, data from DuckDB's {benchmark} extension; each query's time and the database's cpu time during it, from the host over one connection"
            ),
            command: format!(
                "/usr/bin/python3 {{workdir}}/olap/client.py {{db.host}} {{db.port}} {{workdir}}/{benchmark}/queries {{db.cpu_usage}}"
            ),
            prepare: None,
            cleanup: None,
            server: None,
            files: Vec::new(),
            parser: ParserKind::Json,
            primary: "total_time".into(),
            uses_disk: true,
            tools: vec!["/usr/bin/python3".into()],
            stack: None,
            packages: vec!["postgresql-client-15".into()],
            work: Some(Work {
                amount: 1,
                unit: "hundredths of the scale factor".into(),
            }),
            assets: Vec::new(),
        },
    );
    w.assets = vec![data_set(benchmark, data)];
    w
}
