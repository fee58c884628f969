//! The OLTP workloads: a database of a built-in stack (`postgresql`, `mariadb`)
//! in the platform, filled by an unmeasured data load sized from the shape's
//! memory, driven by a client on the host outside the platform's limits
//! ([`Measure::Client`]) with `{threads}` connections.
//!
//! Every statement type × client count is its own measurement point (seed 000's
//! ~700 points): the client count is the `threads` factor of the matrix, and
//!
//! - `pgbench-oltp` runs pgbench 15 with its built-in TPC-B-like script and five
//!   scripts of one statement each (`--file=q.sql@1`), all in one run; its
//!   per-transaction log (`--log`) gives one latency distribution per script
//!   (`script_no`), so each script's metrics are named after it
//!   (`point_select_tps`, `point_select_latency_p95`, …; see
//!   [`crate::parsers::pgbench`]);
//! - `sysbench-pgsql-SCRIPT` and `sysbench-mysql-SCRIPT` run one of sysbench
//!   1.0.20's OLTP scripts each against PostgreSQL (driver `pgsql`) or MariaDB
//!   (driver `mysql`), through a wrapper that reports JSON and every event's
//!   latency (see [`crate::parsers::sysbench_oltp`]).
//!
//! The runner adds the database's own cpu time during the point (`db_cpu_time`,
//! from its cgroup) and stores the data set's size (`data-set.json`, written by
//! the data load) with the run.

use crate::definition::{Work, WorkloadDef};
use crate::stack::{FileTemplate, Measure, ShapeScope, StackDef};
use crate::ParserKind;

/// sysbench 1.0.20's OLTP scripts in `/usr/share/sysbench/`, one workload each.
pub const SYSBENCH_SCRIPTS: [&str; 7] = [
    "oltp_point_select",
    "oltp_read_only",
    "oltp_read_write",
    "oltp_update_index",
    "oltp_update_non_index",
    "oltp_insert",
    "oltp_delete",
];

/// The scripts of `pgbench-oltp` in the order of its options (`script_no`): the
/// built-in first, then one file each. The parser reads their names from
/// `{workdir}/pgbench/scripts`.
pub const PGBENCH_SCRIPTS: [(&str, &str); 6] = [
    ("tpcb_like", ""),
    ("point_select", include_str!("oltp/point_select.sql")),
    ("range_select", include_str!("oltp/range_select.sql")),
    ("join_select", include_str!("oltp/join_select.sql")),
    ("update", include_str!("oltp/update.sql")),
    ("insert", include_str!("oltp/insert.sql")),
];

/// Every OLTP workload.
pub(crate) fn workloads() -> Vec<WorkloadDef> {
    let mut all = vec![pgbench_oltp()];
    for script in SYSBENCH_SCRIPTS {
        all.push(sysbench_oltp(Database::Postgresql, script));
        all.push(sysbench_oltp(Database::Mariadb, script));
    }
    all
}

/// The database a sysbench workload drives.
#[derive(Clone, Copy)]
enum Database {
    Postgresql,
    Mariadb,
}

impl Database {
    /// sysbench's driver, which names the workload.
    fn driver(self) -> &'static str {
        match self {
            Database::Postgresql => "pgsql",
            Database::Mariadb => "mysql",
        }
    }

    /// The built-in stack that runs it.
    fn stack(self) -> &'static str {
        match self {
            Database::Postgresql => "postgresql",
            Database::Mariadb => "mariadb",
        }
    }

    /// sysbench's connection options.
    fn options(self) -> &'static str {
        match self {
            Database::Postgresql => "--db-driver=pgsql --pgsql-host={db.host} --pgsql-port={db.port} --pgsql-user=postgres --pgsql-db=bench",
            Database::Mariadb => "--db-driver=mysql --mysql-host={db.host} --mysql-port={db.port} --mysql-user=isolab --mysql-db=bench",
        }
    }

    /// What to run before sysbench's prepare: PostgreSQL's stack has no database yet.
    fn create_database(self) -> &'static str {
        match self {
            Database::Postgresql => {
                "createdb --host={db.host} --port={db.port} --username=postgres bench && "
            }
            Database::Mariadb => "",
        }
    }
}

/// The file in which a database workload's data load states the data set's size,
/// stored with each run.
pub const DATA_SET_FILE: &str = "data-set.json";

/// A workload on built-in stack `stack` measured by a client on the host. Its data
/// (the database's directory `db/data`, [`DATA_SET_FILE`] and `more_data` that the
/// data load writes) is its [`StackDef::data_paths`], made in every run unless a spec
/// sets `keep_data` ([`StackDef::keep_data`]).
pub(crate) fn client_of(
    stack: &str,
    data_load: String,
    more_data: &[&str],
    files: Vec<FileTemplate>,
    workload: WorkloadDef,
) -> WorkloadDef {
    let b = crate::stacks::stack(stack).expect("the OLTP stacks are built in");
    let mut components = b.components;
    // The workload's own files (scripts, data load) travel with its database.
    components[0].files.extend(files);
    let mut packages: Vec<String> = b.packages.iter().map(|p| (*p).to_owned()).collect();
    for p in &workload.packages {
        if !packages.contains(p) {
            packages.push(p.clone());
        }
    }
    WorkloadDef {
        stack: Some(StackDef {
            components,
            shape: ShapeScope::Component,
            data_load: Some(data_load),
            data_paths: ["db/data", DATA_SET_FILE]
                .iter()
                .chain(more_data)
                .map(|p| (*p).to_owned())
                .collect(),
            keep_data: false,
            measure: Measure::Client,
        }),
        packages,
        ..workload
    }
}

pub(crate) fn file(path: &str, contents: &str) -> FileTemplate {
    FileTemplate {
        path: path.into(),
        contents: contents.into(),
    }
}

/// pgbench's built-in TPC-B-like script and five single-statement scripts, one run.
fn pgbench_oltp() -> WorkloadDef {
    let mut files = vec![file(
        "pgbench/load.sh",
        include_str!("oltp/pgbench-load.sh"),
    )];
    let mut names = String::new();
    let mut options = String::from("--builtin=tpcb-like@1");
    for (name, sql) in PGBENCH_SCRIPTS {
        names.push_str(name);
        names.push('\n');
        if !sql.is_empty() {
            files.push(file(&format!("pgbench/{name}.sql"), sql));
            options.push_str(&format!(" --file={{workdir}}/pgbench/{name}.sql@1"));
        }
    }
    files.push(file("pgbench/scripts", &names));
    client_of(
        "postgresql",
        "sh {workdir}/pgbench/load.sh {db.host} {db.port}".into(),
        &[],
        files,
        WorkloadDef {
            name: "pgbench-oltp".into(),
            description: "pgbench 15 against PostgreSQL 15: TPC-B-like and five single-statement scripts (point, range and join select, update, insert) in one run, {threads} clients from the host; per-script tps and latency, data sized from the shape's memory".into(),
            command: format!(
                "pgbench --host={{db.host}} --port={{db.port}} --username=postgres --no-vacuum \
                 --client={{threads}} --jobs={{cpus}} --time={{duration}} \
                 --log --log-prefix={{workdir}}/pgbench/log {options} bench"
            ),
            prepare: None,
            cleanup: None,
            server: None,
            files: Vec::new(),
            parser: ParserKind::Pgbench,
            primary: "tps".into(),
            uses_disk: true,
            tools: vec!["pgbench".into()],
            stack: None,
            packages: vec!["postgresql-client-15".into()],
            work: None::<Work>,
            assets: Vec::new(),
        },
    )
}

/// One of sysbench's OLTP scripts against `db`.
fn sysbench_oltp(db: Database, script: &str) -> WorkloadDef {
    let short = script.trim_start_matches("oltp_").replace('_', "-");
    let wrapper = include_str!("oltp/sysbench-wrapper.lua").replace("@script@", script);
    let files = vec![
        file("sysbench/oltp.lua", &wrapper),
        file("sysbench/load.sh", include_str!("oltp/sysbench-load.sh")),
    ];
    let options = db.options();
    client_of(
        db.stack(),
        format!(
            "sh -c '{create}sh \"$0\"/sysbench/load.sh {options}' {{workdir}}",
            create = db.create_database()
        ),
        &["sysbench/table-size"],
        files,
        WorkloadDef {
            name: format!("sysbench-{}-{short}", db.driver()),
            description: format!(
                "sysbench 1.0.20 {script} against {}, {{threads}} clients from the host; tps, latency from every event, errors; one table sized from the shape's memory",
                match db {
                    Database::Postgresql => "PostgreSQL 15",
                    Database::Mariadb => "MariaDB 10.11",
                }
            ),
            command: format!(
                "sysbench {{workdir}}/sysbench/oltp.lua {options} --tables=1 --threads={{threads}} \
                 --time={{duration}} --report-interval=0 run"
            ),
            prepare: None,
            cleanup: None,
            server: None,
            files: Vec::new(),
            parser: ParserKind::SysbenchOltp,
            primary: "tps".into(),
            uses_disk: true,
            tools: vec!["sysbench".into()],
            stack: None,
            packages: vec!["sysbench".into()],
            work: None,
            assets: Vec::new(),
        },
    )
}
