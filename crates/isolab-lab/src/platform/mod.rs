//! Platforms: where a workload runs. Each platform turns a [`Job`] (argv, limits,
//! working directory) into an [`Execution`] (exit, output, limits read back,
//! telemetry). The runner only sees the [`Platform`] trait, so it can be tested with
//! a fake platform and no processes at all.

mod host;
mod process;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use isolab_cgroups::Limits;
use isolab_store::Series;

pub use host::{HostPlatform, HostPlatformConfig};
pub use process::Interrupt;
pub(crate) use process::{free_port, isolab_running};

/// Every platform name isolab knows; only some are available in this build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlatformKind {
    /// Bare host: the workload runs as a child in its own cgroup.
    Host,
}

/// Platform names that DESIGN.md plans but this build cannot run yet.
pub const PLANNED: [&str; 8] = [
    "isolab",
    "docker",
    "podman",
    "runc",
    "crun",
    "lxc",
    "vm",
    "vm+isolab",
];

/// A platform name that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnknownPlatform {
    /// Planned but not built yet.
    #[error("platform `{0}` is not available in this version of isolab yet: available platforms are `host`")]
    NotYet(String),
    /// Not a platform at all.
    #[error("unknown platform `{0}`: expected `host` (planned: isolab, docker, podman, runc, crun, lxc, vm, vm+isolab)")]
    Unknown(String),
}

impl PlatformKind {
    /// Parses a platform name.
    pub fn parse(s: &str) -> Result<PlatformKind, UnknownPlatform> {
        match s {
            "host" => Ok(PlatformKind::Host),
            other if PLANNED.contains(&other) => Err(UnknownPlatform::NotYet(other.into())),
            other => Err(UnknownPlatform::Unknown(other.into())),
        }
    }

    /// Its name in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            PlatformKind::Host => "host",
        }
    }
}

impl fmt::Display for PlatformKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One measured execution to perform.
#[derive(Debug, Clone)]
pub struct Job {
    /// Unique name of this run within the host (used for the cgroup path and logs),
    /// e.g. `exp3-pid4242/c2-r5`.
    pub name: String,
    /// The measured command.
    pub argv: Vec<String>,
    /// Run before the measured command, unmeasured and unconfined by the limits.
    pub prepare: Option<Vec<String>>,
    /// Run after the measured command, always.
    pub cleanup: Option<Vec<String>>,
    /// Started in the background inside the instance before the command; the port
    /// must be listening before the command starts.
    pub server: Option<(Vec<String>, u16)>,
    /// Working directory of all commands (created by the runner, removed after).
    pub workdir: PathBuf,
    /// Limits to apply to the instance and verify by reading them back.
    pub limits: Limits,
    /// The measured command is killed after this long.
    pub timeout: Duration,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    /// Exited with this status.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

impl ExitKind {
    /// Shell-style status: the code, or 128 + signal.
    pub fn status(self) -> i32 {
        match self {
            ExitKind::Code(c) => c,
            ExitKind::Signal(s) => 128 + s,
        }
    }

    /// Whether it exited with 0.
    pub fn success(self) -> bool {
        self == ExitKind::Code(0)
    }
}

impl fmt::Display for ExitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitKind::Code(c) => write!(f, "exit status {c}"),
            ExitKind::Signal(s) => write!(f, "killed by signal {s}"),
        }
    }
}

/// What a finished job produced.
#[derive(Debug, Clone)]
pub struct Execution {
    /// How the measured command ended.
    pub exit: ExitKind,
    /// Its standard output (the tail, when very long).
    pub stdout: String,
    /// Its standard error (the tail, when very long).
    pub stderr: String,
    /// Wall-clock time from exec to exit of the measured command.
    pub wall: Duration,
    /// The limits as read back from the instance after applying them.
    pub limits_applied: Limits,
    /// Scalar telemetry, `(name, value)` with the unit in the name (`_s`, `_bytes`, `_pct`).
    pub telemetry: Vec<(String, f64)>,
    /// Time series sampled during the run.
    pub series: Vec<Series>,
    /// Remarks worth storing with the run (e.g. a counter that was unavailable).
    pub notes: Vec<String>,
}

/// Why a job could not produce an execution.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    /// Creating, limiting or reading the instance's cgroup failed.
    #[error(transparent)]
    Cgroup(#[from] isolab_cgroups::Error),
    /// The limits read back differ from the ones asked for.
    #[error("limits read back from cgroup {cgroup} differ from those applied: {detail}; another process or a kernel restriction changed them")]
    LimitMismatch {
        /// The cgroup.
        cgroup: String,
        /// Which limits differ, asked vs read.
        detail: String,
    },
    /// A command could not be started.
    #[error(
        "cannot start `{program}`: {source}; is it installed? (`isolab env` lists the tools found)"
    )]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// An unmeasured helper command (prepare, cleanup) failed.
    #[error("{phase} command `{command}` failed with {exit}: {stderr}")]
    Helper {
        /// prepare or cleanup.
        phase: &'static str,
        /// The command line.
        command: String,
        /// How it ended.
        exit: ExitKind,
        /// The end of its standard error.
        stderr: String,
    },
    /// The server did not start listening.
    #[error("server `{command}` did not listen on port {port} within {waited:?}: {stderr}")]
    ServerNotReady {
        /// The command line.
        command: String,
        /// The port.
        port: u16,
        /// How long isolab waited.
        waited: Duration,
        /// The end of its standard error.
        stderr: String,
    },
    /// The measured command ran past its timeout and was killed.
    #[error("the command ran longer than its timeout of {0:?} and was killed")]
    TimedOut(Duration),
    /// Ctrl-C or SIGTERM arrived; the instance was torn down.
    #[error("interrupted by a signal; the instance was torn down")]
    Interrupted,
    /// A file operation in the working directory failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was attempted.
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Something that can run jobs.
pub trait Platform {
    /// Runs one job: creates the instance, applies and verifies the limits, runs the
    /// command with telemetry, and tears everything down, also on error.
    fn execute(&self, job: &Job, interrupt: &Interrupt) -> Result<Execution, PlatformError>;

    /// Removes instances left behind by runs whose isolab process died (e.g. `kill -9`).
    /// Returns what was removed, one line each.
    fn gc(&self) -> Result<Vec<String>, PlatformError>;
}
