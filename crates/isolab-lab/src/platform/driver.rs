//! What a platform is to the lab: its name ([`PlatformKind`]), what it can do
//! ([`PlatformInfo`], [`Capabilities`]), and the [`Driver`] that runs it — whether this
//! host can run it (or the typed reason it cannot, [`Unavailable`]), prepare (daemon,
//! image, VM disk), execute a measured job inside an instance of the [`Supervisor`],
//! services, the address at which a command reaches a server on the host, gc of what a
//! killed run left, and shutdown. The [`super::registry`] lists the drivers and looks
//! platforms up by kind; this module defines them and imports none of them.

use std::fmt;

use isolab_engines::Capabilities;

use super::instance::Supervisor;
use super::service::{ServiceSpec, Started};
use super::{Execution, Interrupt, Job, PlatformDef, PlatformError};

/// A platform engine's name in specs (`host`, `docker`, `vm+isolab`), one of the
/// [`registry`](super::registry::registry).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PlatformKind(&'static str);

impl PlatformKind {
    /// Bare host: the workload runs as a child in its own cgroup.
    pub const HOST: PlatformKind = PlatformKind("host");
    /// isolab's own container runtime (`isolab-runtime`), on the experiment's image.
    pub const ISOLAB: PlatformKind = PlatformKind("isolab");
    /// A QEMU virtual machine (KVM when it works, TCG otherwise, always labelled).
    pub const VM: PlatformKind = PlatformKind("vm");
    /// isolab-runtime inside a QEMU virtual machine (a container in a VM).
    pub const VM_ISOLAB: PlatformKind = PlatformKind("vm+isolab");

    /// The kind of the container engine named `name` (an [`isolab_engines::Engine`]'s).
    pub(crate) fn from_engine(name: &'static str) -> PlatformKind {
        PlatformKind(name)
    }

    /// Its name in specs.
    pub fn as_str(self) -> &'static str {
        self.0
    }

    /// Whether it runs without root, in a cgroup v2 subtree delegated to the user: the
    /// host, and isolab-runtime in a user namespace. The engines' daemons and the VMs'
    /// taps, bridges and loop devices need root.
    pub fn runs_without_root(self) -> bool {
        self == PlatformKind::HOST || self == PlatformKind::ISOLAB
    }
}

impl fmt::Display for PlatformKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl fmt::Debug for PlatformKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PlatformKind({})", self.0)
    }
}

impl serde::Serialize for PlatformKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

/// A platform name that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnknownPlatform {
    /// Not an engine of the registry.
    #[error("unknown engine `{name}`: expected one of {}", known.join(", "))]
    Unknown {
        /// The name given.
        name: String,
        /// The registry's names.
        known: Vec<&'static str>,
    },
}

/// A platform of the registry, as spec validation and `isolab list` see it.
#[derive(Debug, Clone, Copy)]
pub struct PlatformInfo {
    /// Its name in specs.
    pub kind: PlatformKind,
    /// One line saying what it is.
    pub summary: &'static str,
    /// What it can do.
    pub capabilities: Capabilities,
}

/// Why this host cannot run a platform, with what to do; [`Driver::available`]'s
/// error. Each variant keeps its cause, so a caller can tell a missing program from a
/// missing kernel facility.
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    /// A container engine's own check failed (it names the program and its package;
    /// boxed: an engine error is large).
    #[error("{0}")]
    Engine(#[source] Box<isolab_engines::EngineError>),
    /// A program the platform runs is not installed.
    #[error("{0}")]
    Program(#[from] isolab_tools::NotInstalled),
    /// isolab's container runtime was not found.
    #[error("`{program}` is neither next to isolab nor on PATH: build it with `cargo build --release -p isolab-runtime` (or set ISOLAB_RUNTIME to its path)")]
    Runtime {
        /// The program looked for.
        program: &'static str,
    },
    /// A file or device the platform needs is missing.
    #[error("{path} is missing ({needed_for}): {fix}")]
    Missing {
        /// The file, device or program.
        path: String,
        /// What the platform needs it for.
        needed_for: &'static str,
        /// What to do.
        fix: &'static str,
    },
}

impl From<isolab_engines::EngineError> for Unavailable {
    fn from(e: isolab_engines::EngineError) -> Unavailable {
        Unavailable::Engine(Box::new(e))
    }
}

/// What a driver's [`Driver::execute`] gives: the run, or why there is none.
pub(crate) type Executed = Result<Execution, PlatformError>;

/// A platform's driver: what the runner, the preflight and gc ask of a platform.
pub(crate) trait Driver: Send + Sync {
    /// Its name and what it can do.
    fn info(&self) -> PlatformInfo;

    /// Whether this host can run it, checked without changing anything (no daemon
    /// started): `Ok` with what was found, or what is missing and what to do.
    fn available(&self) -> Result<String, Unavailable>;

    /// Makes it ready for `levels` (the experiment's levels of this platform) before
    /// the first run — a daemon started, the image imported, a VM kernel and disk
    /// made — and returns what the experiment's environment records about it.
    fn prepare(
        &self,
        _levels: &[&PlatformDef],
        _image: Option<&std::path::Path>,
    ) -> Result<Vec<(String, String)>, PlatformError> {
        Ok(Vec::new())
    }

    /// Runs one job inside an instance of `supervisor` (scope and instance cgroups,
    /// prepare and cleanup, neighbours, probe), tearing everything down, also on
    /// error.
    fn execute(&self, supervisor: &Supervisor, job: &Job, interrupt: &Interrupt) -> Executed;

    /// Starts `job`'s command as a long-running service in an instance of `supervisor`
    /// (see [`super::service`]); platforms without services say why.
    fn start_service(
        &self,
        _supervisor: &Supervisor,
        job: &Job,
        _spec: ServiceSpec,
    ) -> Started<'_> {
        Err(PlatformError::NoServices {
            platform: job.platform.name.clone(),
            why: format!("engine `{}` runs no services", self.info().kind),
        })
    }

    /// Runs `body` (a service stack's measurement) beside `job`'s neighbours,
    /// started in the experiment's scope of `supervisor` and stopped after it, also
    /// on error (see [`Supervisor::beside_neighbours`]). By default they run in
    /// cgroups on the host, as the host platform's do; container platforms run
    /// them in their containers, and VMs refuse.
    fn beside_neighbours(
        &self,
        supervisor: &Supervisor,
        job: &Job,
        interrupt: &Interrupt,
        body: &mut dyn FnMut() -> Executed,
    ) -> Executed {
        supervisor.beside_neighbours(job, interrupt, super::NeighbourHost::Processes, body)
    }

    /// Where a command on `level` reaches a server on the host, when the platform
    /// knows better than [`super::default_server_address`].
    fn server_address(&self, _level: &PlatformDef) -> Option<std::net::Ipv4Addr> {
        None
    }

    /// Creates its named volume `name` (storage `volume`) and returns the host
    /// directory that holds it; only platforms whose capabilities list the level.
    fn create_volume(&self, name: &str) -> Result<std::path::PathBuf, PlatformError> {
        Err(PlatformError::Engine {
            engine: self.info().kind.to_string(),
            message: format!("it has no named volumes (asked for `{name}`)"),
        })
    }

    /// Removes its named volume `name`.
    fn remove_volume(&self, name: &str) -> Result<(), PlatformError> {
        Err(PlatformError::Engine {
            engine: self.info().kind.to_string(),
            message: format!("it has no named volumes (asked to remove `{name}`)"),
        })
    }

    /// Removes its instances whose id starts with one of `prefixes` (those of dead
    /// experiments); one line per thing removed.
    fn gc(&self, _prefixes: &[String]) -> Result<Vec<String>, PlatformError> {
        Ok(Vec::new())
    }

    /// When it was first used in this process (0: never), for shutting down the
    /// platforms that change the host last-used-first.
    fn first_used(&self) -> u64 {
        0
    }

    /// Undoes what preparing it started (a daemon, a host fix).
    fn shutdown(&self) -> Result<(), PlatformError> {
        Ok(())
    }
}

/// Shuts `drivers` down, the last used first: each one's record of the host (taken
/// on first use) may hold the changes of the drivers used before it, e.g. Podman's
/// snapshot holds the `ip_forward` that dockerd turned on, so undoing in any other
/// order would put a change back. Unused drivers are left alone. Returns the
/// drivers that failed, with their errors.
pub(crate) fn shutdown_all<'a>(
    drivers: impl IntoIterator<Item = &'a dyn Driver>,
) -> Vec<(PlatformKind, PlatformError)> {
    let mut used: Vec<&dyn Driver> = drivers.into_iter().filter(|d| d.first_used() > 0).collect();
    used.sort_by_key(|d| std::cmp::Reverse(d.first_used()));
    used.into_iter()
        .filter_map(|d| d.shutdown().err().map(|err| (d.info().kind, err)))
        .collect()
}
