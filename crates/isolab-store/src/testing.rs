//! A throwaway PostgreSQL server for tests (feature `testing`): Debian's `initdb` into a
//! temporary directory, `pg_ctl` on a free loopback port and a Unix socket in that
//! directory, trust authentication for the superuser `isolab`, durability off (it is
//! thrown away). [`Cluster`] stops the server and removes the directory when dropped,
//! also when the test fails.
//!
//! PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user
//! that Debian's `postgresql` package creates, through `runuser`.

use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use postgres::{Client, NoTls};

/// Where Debian installs PostgreSQL's server programs, one directory per major version.
const DEBIAN_LIB: &str = "/usr/lib/postgresql";

/// A PostgreSQL server of its own, stopped and removed on drop.
pub struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    /// Run the server programs as `postgres` (we are root).
    as_postgres: bool,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("dir", &self.dir.path())
            .field("port", &self.port)
            .finish()
    }
}

/// The newest `bin` directory under [`DEBIAN_LIB`] that has `initdb`.
fn server_programs() -> Result<PathBuf, String> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(DEBIAN_LIB)
        .map_err(|e| {
            format!(
                "{DEBIAN_LIB}: {e}; install Debian's postgresql package \
                 (apt-get install postgresql)"
            )
        })?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).ok_or_else(|| {
        format!("no PostgreSQL server under {DEBIAN_LIB}; apt-get install postgresql")
    })
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("free port: {e}"))
}

impl Cluster {
    /// Creates and starts a server; the error says what failed, with its output.
    pub fn start() -> Result<Cluster, String> {
        let bin = server_programs()?;
        let as_postgres = std::fs::metadata("/proc/self")
            .map(|m| m.uid() == 0)
            .unwrap_or(false);
        let dir = tempfile::Builder::new()
            .prefix("isolab-pg-")
            .tempdir()
            .map_err(|e| format!("temporary directory: {e}"))?;
        let port = free_port()?;
        let cluster = Cluster {
            dir,
            bin,
            port,
            as_postgres,
        };
        if as_postgres {
            run(Command::new("chown")
                .arg("postgres:")
                .arg(cluster.dir.path()))?;
        }
        let data = cluster.data();
        cluster.server_program(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "isolab",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale",
                "C",
                "--no-sync",
            ],
        )?;
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off \
             -c synchronous_commit=off -c full_page_writes=off -c max_connections=60",
            cluster.dir.path().display()
        );
        let log = cluster.dir.path().join("server.log");
        let started = cluster.server_program(
            "pg_ctl",
            &[
                "-D",
                &data,
                "-l",
                &log.display().to_string(),
                "-w",
                "-t",
                "60",
                "-o",
                &options,
                "start",
            ],
        );
        if let Err(e) = started {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(format!("{e}\nserver log:\n{log}"));
        }
        Ok(cluster)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    /// Runs one of the server's programs, as `postgres` when we are root.
    fn server_program(&self, program: &str, args: &[&str]) -> Result<(), String> {
        let path = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&path);
            c
        } else {
            Command::new(&path)
        };
        command.args(args).current_dir(self.dir.path());
        run(&mut command)
    }

    /// The port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory of the server's Unix socket.
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The URL of `database` on this server.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://isolab@127.0.0.1:{}/{database}", self.port)
    }

    /// A client of `database`.
    pub fn client(&self, database: &str) -> Result<Client, String> {
        Client::connect(&self.url(database), NoTls).map_err(|e| format!("{database}: {e}"))
    }

    /// Creates an empty database `name` and returns its URL.
    pub fn create_database(&self, name: &str) -> Result<String, String> {
        let mut admin = self.client("postgres")?;
        admin
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .map_err(|e| format!("CREATE DATABASE {name}: {e}"))?;
        Ok(self.url(name))
    }

    /// Creates database `name` holding isolab's tables as schema `version` (an earlier
    /// one) left them, for tests of the migrations, and returns its URL.
    pub fn create_store_at_version(&self, name: &str, version: u32) -> Result<String, String> {
        let url = self.create_database(name)?;
        let config = crate::backend::postgres::parse(&url)?;
        let mut conn =
            crate::backend::postgres::Postgres::connect(config).map_err(|e| e.to_string())?;
        crate::schema::migrate_to(&mut conn, &url, version).map_err(|e| e.to_string())?;
        Ok(url)
    }

    /// Ends every other session on `database`, as a server restart or a network failure
    /// would; returns how many were ended.
    pub fn terminate_sessions(&self, database: &str) -> Result<u64, String> {
        let mut admin = self.client("postgres")?;
        let rows = admin
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = $1 AND pid <> pg_backend_pid()",
                &[&database],
            )
            .map_err(|e| format!("terminating the sessions on {database}: {e}"))?;
        Ok(rows.len() as u64)
    }

    /// `SELECT count(*) FROM table` in `database`, behind the store's back.
    pub fn count(&self, database: &str, table: &str) -> Result<i64, String> {
        let mut client = self.client(database)?;
        client
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .map(|row| row.get(0))
            .map_err(|e| format!("counting {table}: {e}"))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data();
        if let Err(e) =
            self.server_program("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"])
        {
            eprintln!("stopping the test PostgreSQL server in {data}: {e}");
        }
    }
}

/// Runs `command`; an error carries its output.
fn run(command: &mut Command) -> Result<(), String> {
    let out = command
        .output()
        .map_err(|e| format!("{:?}: {e}", command.get_program()))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{:?} {:?} failed ({}): {}{}",
        command.get_program(),
        command.get_args().collect::<Vec<_>>(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}
