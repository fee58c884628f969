//! Platforms: where a workload runs. Each platform turns a [`Job`] (argv, limits,
//! working directory) into an [`Execution`] (exit, output, limits read back,
//! telemetry). The runner only sees the [`Executor`] trait, so it can be tested with
//! a fake executor and no processes at all.
//!
//! The words, one meaning each (`docs/architecture.md` draws them):
//! - a **platform** is where a workload runs; a spec's level of it is a
//!   [`PlatformDef`], and its name in the registry a [`PlatformKind`];
//! - a **driver** ([`driver::Driver`]) runs one platform: availability, prepare,
//!   execute, services, gc, shutdown; the [`registry`] lists every driver, and
//!   [`Drivers`] holds them, behind the runner's [`Executor`];
//! - an **engine** ([`isolab_engines::Engine`]) is a third-party container engine's
//!   commands; one [`engine::EngineDriver`] drives each;
//! - the **supervisor** ([`Supervisor`]) owns instances and their cgroups (scope,
//!   prepare and cleanup, neighbours, probe, removal) on every platform.

mod cgroup_changes;
mod clone;
pub mod daemons;
pub mod driver;
mod engine;
mod host;
pub(crate) mod instance;
mod isolab;
pub mod launch;
pub(crate) mod limit;
mod limit_flags;
mod measured;
mod neighbour_host;
pub(crate) mod process;
mod registry;
mod service;
mod stack_guests;
mod vm;

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use isolab_cgroups::Limits;
use isolab_runtime::{ContainerId, InvalidContainerId};
use isolab_store::{Series, TelemetrySet};

pub use driver::{PlatformInfo, PlatformKind, Unavailable, UnknownPlatform};
pub use instance::{Supervisor, SupervisorConfig};
pub use isolab::{IsolabConfig, RUNTIME_PROGRAM};
pub use launch::{Launch, Launcher, Process, RealLauncher};
pub(crate) use measured::{push_host_util, push_interrupts, push_qemu_stats, push_stats};
pub use neighbour_host::{DiskTarget, GuestCpu, NeighbourJobs, NetTarget};
pub(crate) use neighbour_host::{
    NeighbourContainers, NeighbourGuest, NeighbourGuests, NeighbourHost,
};
pub(crate) use process::{free_port, isolab_running};
pub use process::{ExitKind, Interrupt};
pub use service::{Service, ServiceSpec};
pub use stack_guests::{GuestLevel, GuestShape, StackGuests, StackPlace};

pub use isolab_engines::{Capabilities, LimitKinds, NetworkMode as Network};
pub use registry::{availability, registry, unavailable, Availability};
pub use vm::vm_cache;

/// A platform level of a spec: a name, the engine behind it and its options.
///
/// Built-in levels are `host`, `isolab` (network `none`) and `isolab-bridge`; a
/// spec defines more with `[platform.NAME]` tables (`engine`, `network`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PlatformDef {
    /// The level's name.
    pub name: String,
    /// The engine.
    pub kind: PlatformKind,
    /// The network of each instance.
    pub network: Network,
    /// How a virtual machine is accelerated; `None` for the other engines. VM levels
    /// carry it in their names (`vm(tcg)`, `vm(kvm)+isolab`), so that no row of
    /// emulation is mistaken for virtualisation overhead.
    pub accel: Option<Accel>,
    /// How a service stack's components run on a VM level: in one guest (the container
    /// host of seed 003) or each in a guest of its own; `None` for the other engines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack_guests: Option<StackGuests>,
    /// The shared guest's shape (`guest_shape = "NAME"`), when the spec gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guest_shape: Option<GuestShape>,
    /// The guest OS of a VM cell (the `guest` factor); `None`: the experiment's image
    /// with the host's release of Debian's kernel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guest: Option<GuestLevel>,
    /// How QEMU caches a VM level's disks (`disk_cache = "none"`); `None`: QEMU's
    /// default, writeback.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_cache: Option<isolab_vm::DiskCache>,
}

/// How QEMU runs a guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// Hardware virtualisation through /dev/kvm.
    Kvm,
    /// QEMU's software emulation (the tiny code generator): no virtualisation
    /// hardware, many times slower.
    Tcg,
}

impl Accel {
    /// Parses `kvm` or `tcg`.
    pub fn parse(s: &str) -> Option<Accel> {
        match s {
            "kvm" => Some(Accel::Kvm),
            "tcg" => Some(Accel::Tcg),
            _ => None,
        }
    }

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

impl PlatformDef {
    /// A level named after its engine with the engine's default network.
    pub fn new(kind: PlatformKind) -> PlatformDef {
        PlatformDef {
            name: kind.as_str().to_owned(),
            kind,
            network: kind.networks()[0],
            accel: None,
            stack_guests: StackGuests::default_for(kind),
            guest_shape: None,
            guest: None,
            disk_cache: None,
        }
    }

    /// A VM level on `accel`, named `vm(tcg)`, or `vm(tcg)+ENGINE` for a
    /// container engine in the guest.
    pub fn vm(kind: PlatformKind, accel: Accel) -> PlatformDef {
        let inner = kind.as_str().strip_prefix("vm").unwrap_or_default();
        PlatformDef {
            name: format!("vm({}){inner}", accel.as_str()),
            accel: Some(accel),
            ..PlatformDef::new(kind)
        }
    }

    /// The built-in platform levels, from the [`registry`]: one per engine with its
    /// default network; `ENGINE-bridge` for each engine that also offers a bridge
    /// (`isolab-bridge`, `docker-bridge`, `podman-bridge`); and the VM levels named by
    /// accelerator, `vm(kvm)`, `vm(tcg)`, `vm(kvm)+isolab`, … (there is no plain
    /// `vm`: a spec says which it measures, and `isolab env` says which works on the
    /// host).
    pub fn builtins() -> Vec<PlatformDef> {
        let mut all: Vec<PlatformDef> = registry()
            .iter()
            .filter(|p| !p.capabilities.vm)
            .map(|p| PlatformDef::new(p.kind))
            .collect();
        for p in registry() {
            let caps = p.capabilities;
            if !caps.vm
                && caps.default_network() != Network::Bridge
                && caps.has_network(Network::Bridge)
            {
                all.push(PlatformDef {
                    name: format!("{}-bridge", p.kind),
                    network: Network::Bridge,
                    ..PlatformDef::new(p.kind)
                });
            }
        }
        for p in registry().iter().filter(|p| p.capabilities.vm) {
            for accel in [Accel::Kvm, Accel::Tcg] {
                all.push(PlatformDef::vm(p.kind, accel));
            }
        }
        all
    }

    /// The kinds of limit of `asked` this level does not apply, from its
    /// capabilities, said in one sentence; `None` when it applies them all.
    pub fn limits_unapplied(&self, asked: LimitKinds) -> Option<String> {
        let limits = self.kind.capabilities().limits;
        let missing = limits.missing(asked);
        (!missing.is_empty()).then(|| {
            format!(
                "platform `{}` does not apply {} limits (it applies {})",
                self.name,
                missing.join(", "),
                limits.names().join(", ")
            )
        })
    }

    /// Why this level cannot run a service stack, if it cannot: its engine starts no
    /// services (from its capabilities), or its network is `none`, so no client
    /// outside can reach them. On a bridge, a service is reached at its container's
    /// (or guest's) address.
    pub fn services_unavailable(&self) -> Option<String> {
        let caps = self.kind.capabilities();
        if !caps.services {
            return Some(format!(
                "platform `{}`: engine `{}` runs no services yet",
                self.name, self.kind
            ));
        }
        // A VM's services listen on the guest's own address on the bridge.
        if self.network != Network::None || caps.vm {
            return None;
        }
        let fix = if caps.has_network(Network::Host) {
            format!(
                "; use a [platform.NAME] with engine = \"{}\" and network = \"host\" or \"bridge\"",
                self.kind
            )
        } else {
            String::new()
        };
        Some(format!(
            "platform `{}` has network `none`, so no load generator or client outside can reach its components{fix}",
            self.name
        ))
    }

    /// Why this platform cannot run a workload with a server, if it cannot: the
    /// command must reach the server over a network, which the level's engine may
    /// offer (from its capabilities) or not at all.
    pub fn server_unreachable(&self) -> Option<String> {
        if self.network != Network::None {
            return None;
        }
        let others: Vec<&str> = self
            .kind
            .networks()
            .iter()
            .filter(|n| **n != Network::None)
            .map(|n| n.as_str())
            .collect();
        Some(if others.is_empty() {
            format!(
                "platform `{}` has network `none` and its engine `{}` offers no other, so its command cannot reach the workload's server",
                self.name, self.kind
            )
        } else {
            // A built-in level of the same engine that has a network.
            let builtin = PlatformDef::builtins()
                .into_iter()
                .find(|b| b.kind == self.kind && b.network != Network::None);
            format!(
                "platform `{}` has network `none`, so its command cannot reach the workload's server; use {}a [platform.NAME] with engine = \"{}\" and network = \"{}\"",
                self.name,
                builtin.map(|b| format!("`{}` or ", b.name)).unwrap_or_default(),
                self.kind,
                others.join("\" or \"")
            )
        })
    }
}

/// One measured execution to perform.
#[derive(Debug, Clone)]
pub struct Job {
    /// Where it runs.
    pub platform: PlatformDef,
    /// The root filesystem of container and VM platforms (a directory).
    pub image: Option<PathBuf>,
    /// Unique name of this run within the host (used for the cgroup path and logs),
    /// e.g. `exp3-pid4242/c2-r5`.
    pub name: String,
    /// The measured command.
    pub argv: Vec<String>,
    /// Run before the measured command, unmeasured and unconfined by the limits.
    pub prepare: Option<Vec<String>>,
    /// Run after the measured command, always.
    pub cleanup: Option<Vec<String>>,
    /// Started in the background before the command, inside the instance on the
    /// host platform and on the host side of the network for containers; the port
    /// must be listening before the command starts.
    pub server: Option<Server>,
    /// Working directory of all commands (created by the runner, removed after).
    pub workdir: PathBuf,
    /// Limits to apply to the instance and verify by reading them back.
    pub limits: Limits,
    /// The measured command is killed after this long.
    pub timeout: Duration,
    /// Co-located stressors, started before the command and stopped after it.
    pub neighbours: Option<NeighbourJobs>,
    /// Whether the workload's I/O should hit a disk (a VM gives it a scratch disk
    /// rather than the 9p-shared working directory).
    pub uses_disk: bool,
    /// The service stack run this job is a component of, when it is one (the job of
    /// a component's service; its prepare step, the data load and a client are not).
    pub stack: Option<StackPlace>,
}

impl Job {
    /// The image a container of `engine` runs from, which the job must name.
    pub(crate) fn container_image(&self, engine: &str) -> Result<&std::path::Path, PlatformError> {
        self.image.as_deref().ok_or_else(|| PlatformError::Engine {
            engine: engine.into(),
            message: "no image was given for the container's root".into(),
        })
    }
}

/// A workload's server: started in the background before the measured command,
/// which starts once `port` is listening.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// Its command line.
    pub argv: Vec<String>,
    /// The TCP port it listens on.
    pub port: u16,
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
    /// When the measured command started (to line up concurrent instances).
    pub started: std::time::Instant,
    /// The limits as read back from the instance after applying them.
    pub limits_applied: Limits,
    /// The limits of its neighbours' instances as read back (each instance has the
    /// same), when it had neighbours.
    pub neighbour_limits: Option<Limits>,
    /// Scalar telemetry under typed keys (names and units in [`isolab_store::Telemetry`]).
    pub telemetry: TelemetrySet,
    /// Time series sampled during the run.
    pub series: Vec<Series>,
    /// Remarks worth storing with the run (e.g. a counter that was unavailable).
    pub notes: Vec<String>,
}

/// The environment's entries of the image a platform runs from its root file system:
/// `engine.KIND.image` (the directory) and `engine.KIND.image_digest`
/// ([`isolab_image::image_digest`]: an image of one's own's ID, the same on every
/// platform, else the digest of its manifest).
pub(crate) fn image_entries(kind: &str, image: &std::path::Path) -> Vec<(String, String)> {
    let digest = isolab_image::image_digest(image).unwrap_or_else(|e| format!("unavailable: {e}"));
    vec![
        (format!("engine.{kind}.image"), image.display().to_string()),
        (format!("engine.{kind}.image_digest"), digest),
    ]
}

/// Why a job could not produce an execution.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    /// `gc` collected what it could; some parts could not be collected.
    #[error("gc could not collect everything: {}; run `isolab gc` again once that is mended", failures.join("; "))]
    GcIncomplete {
        /// What was removed anyway.
        removed: Vec<String>,
        /// What failed, one line each.
        failures: Vec<String>,
    },
    /// The run's storage (the `storage` factor) could not be made or read back.
    #[error(transparent)]
    Storage(#[from] crate::storage::StorageError),
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
    /// The neighbours or the reservation of a cell cannot be set up on this host.
    #[error("cannot set up the neighbours of {job}: {detail}")]
    Neighbours {
        /// The job.
        job: String,
        /// Why, and what to do.
        detail: String,
    },
    /// The latency probe found the host unusable during the run (its neighbours
    /// starved the scheduler) and everything in the run was killed.
    #[error("run aborted to keep the host usable: {reason}; lower the neighbours' intensity, add a reservation, or raise the probe's threshold")]
    Aborted {
        /// What the probe saw.
        reason: String,
    },
    /// A container engine's driver failed (its own error, not the workload's),
    /// with its cause chain; shared, as an engine that could not be made ready
    /// gives the same error to every run.
    #[error(transparent)]
    Driver(#[from] Arc<isolab_engines::EngineError>),
    /// A component of a service stack failed (its readiness check, its data load, or
    /// it exited while it was measured).
    #[error("component `{component}` {what}")]
    Component {
        /// The component's name in its stack.
        component: String,
        /// What happened, with the end of its log where there is one.
        what: String,
    },
    /// The level cannot run a service that clients on the host reach.
    #[error("platform `{platform}` cannot run a service: {why}")]
    NoServices {
        /// The level.
        platform: String,
        /// Why, and what to do.
        why: String,
    },
    /// QEMU or the guest could not run the instance (isolab-vm's error, with its
    /// cause chain).
    #[error(transparent)]
    Vm(#[from] isolab_vm::VmError),
    /// isolab's bridge network could not give a VM its tap or address (the
    /// network's error, with its cause chain).
    #[error(transparent)]
    Network(#[from] isolab_runtime::network::NetworkError),
    /// isolab-runtime's own work in isolab's process failed (collecting the
    /// containers of killed runtimes), with the runtime's error as its cause.
    #[error("isolab-runtime: {action}")]
    Runtime {
        /// What was being done.
        action: &'static str,
        /// The runtime's error, with its cause chain (boxed: it is large).
        #[source]
        source: Box<isolab_runtime::RuntimeError>,
    },
    /// The engine could not run the instance (its own error, not the workload's).
    #[error("{engine} failed: {message}")]
    Engine {
        /// The engine's program, e.g. `isolab-runtime`.
        engine: String,
        /// What it said.
        message: String,
    },
    /// A tree could not be copied (a stack's kept data into a run's directory).
    #[error("cannot copy {from} into {to}: {source}")]
    CopyTree {
        /// The tree copied.
        from: PathBuf,
        /// Where it was copied to.
        to: PathBuf,
        /// Why, with its own cause.
        #[source]
        source: Box<isolab_image::ImageError>,
    },
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
    /// A job's name does not make a valid container id (see [`container_id`]).
    #[error(transparent)]
    InvalidContainerId(#[from] InvalidContainerId),
    /// A template of the workload (its command or one of its files) does not render
    /// for the working directory `path`.
    #[error("{action} {path}: {source}")]
    Template {
        /// What was attempted.
        action: &'static str,
        /// The working directory, or the file rendered into it.
        path: PathBuf,
        /// Why.
        #[source]
        source: isolab_workloads::TemplateError,
    },
    /// An asset the workload needs was not built before the runs.
    #[error("cannot find the prepared asset for {path}: asset {asset} of workload {workload} was not built before the runs")]
    AssetMissing {
        /// Where it was to be placed.
        path: PathBuf,
        /// The asset.
        asset: String,
        /// The workload that needs it.
        workload: String,
    },
    /// A prepared asset could not be placed into the working directory.
    #[error("cannot place the asset into {path}: {source}")]
    Asset {
        /// Where it was to be placed.
        path: PathBuf,
        /// Why (boxed: it is large).
        #[source]
        source: Box<crate::assets::AssetError>,
    },
    /// The cell's reservation cannot be made on this host.
    #[error("cannot set up the neighbours of {job}: {source}")]
    Reservation {
        /// The job.
        job: String,
        /// Why.
        #[source]
        source: crate::reservation::ReservationError,
    },
    /// The cell's neighbour level cannot be realised on this host.
    #[error("cannot set up the neighbours of {job}: {source}")]
    NeighbourPlan {
        /// The job.
        job: String,
        /// Why (boxed: it is large).
        #[source]
        source: Box<crate::neighbour::PlanError>,
    },
}

impl From<isolab_engines::EngineError> for PlatformError {
    fn from(e: isolab_engines::EngineError) -> PlatformError {
        PlatformError::Driver(Arc::new(e))
    }
}

/// The container id of the job named `job_name`: `prefix`, then the name with `/`
/// replaced by `-` (`exp3-pid42/c0-r1` → `exp3-pid42-c0-r1` on the `isolab` platform,
/// with no prefix; `isolab-exp3-pid42-c0-r1` on the engines, with
/// [`isolab_engines::ID_PREFIX`], by which their `gc` finds it). Every container the
/// lab starts, subject or neighbour (`…-nb0`), is named by this one function.
pub(crate) fn container_id(
    prefix: &str,
    job_name: &str,
) -> Result<ContainerId, InvalidContainerId> {
    ContainerId::new(&format!("{prefix}{}", job_name.replace('/', "-")))
}

/// What the runner hands jobs to: something that runs each job on its platform.
/// [`Drivers`] is the real one; tests use fakes.
pub trait Executor: Sync {
    /// Runs one job: creates the instance, applies and verifies the limits, runs the
    /// command with telemetry, and tears everything down, also on error.
    fn execute(&self, job: &Job, interrupt: &Interrupt) -> Result<Execution, PlatformError>;

    /// Starts `job`'s command as a long-running service of its level (instance,
    /// limits applied and read back, ready once `spec.port` accepts connections);
    /// it runs until [`Service::stop`] or until it is dropped.
    fn start_service(&self, job: &Job, spec: ServiceSpec) -> Result<Service<'_>, PlatformError> {
        let _ = spec;
        Err(PlatformError::NoServices {
            platform: job.platform.name.clone(),
            why: "this platform implementation starts no services".into(),
        })
    }

    /// Runs `body` (the measurement of a service stack whose components run) beside
    /// `job`'s neighbours: each started on `job`'s platform in a cgroup of its own
    /// (`<job>-nb<i>`) with `job`'s neighbour limits before it, and stopped, their
    /// cgroups and containers removed, after it, also when it fails. Their
    /// telemetry and notes are added to the execution `body` returns.
    fn beside_neighbours(
        &self,
        job: &Job,
        interrupt: &Interrupt,
        body: &mut dyn FnMut() -> Result<Execution, PlatformError>,
    ) -> Result<Execution, PlatformError> {
        let _ = (interrupt, body);
        Err(PlatformError::NoServices {
            platform: job.platform.name.clone(),
            why: "this platform implementation runs no neighbours beside a service stack".into(),
        })
    }

    /// Runs `jobs` at the same time, each as [`Executor::execute`] would (the
    /// instances of one run of a scalability cell). Results are in `jobs` order.
    fn execute_all(
        &self,
        jobs: &[Job],
        interrupt: &Interrupt,
    ) -> Vec<Result<Execution, PlatformError>> {
        std::thread::scope(|scope| {
            let handles: Vec<_> = jobs
                .iter()
                .map(|job| scope.spawn(move || self.execute(job, interrupt)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(PlatformError::Engine {
                            engine: "isolab".into(),
                            message: "an instance's thread panicked".into(),
                        })
                    })
                })
                .collect()
        })
    }

    /// Makes the engines of `platforms` (the experiment's platform levels) ready
    /// before the first run (a daemon started, the image imported, a VM kernel and
    /// disk made) and returns what the experiment's environment should record about
    /// them (versions, image digests, accelerators).
    fn prepare(
        &self,
        _platforms: &[PlatformDef],
        _image: Option<&std::path::Path>,
    ) -> Result<Vec<(String, String)>, PlatformError> {
        Ok(Vec::new())
    }

    /// Where a command on `platform` reaches a workload's server running on the
    /// host (`{server}`).
    fn server_address(&self, platform: &PlatformDef) -> std::net::Ipv4Addr {
        default_server_address(platform)
    }

    /// Creates `platform`'s named volume `name` (storage `volume`) and returns the host
    /// directory that holds it.
    fn create_volume(
        &self,
        platform: &PlatformDef,
        name: &str,
    ) -> Result<std::path::PathBuf, PlatformError> {
        Err(PlatformError::Engine {
            engine: platform.kind.to_string(),
            message: format!("this executor makes no named volumes (asked for `{name}`)"),
        })
    }

    /// Removes `platform`'s named volume `name`.
    fn remove_volume(&self, platform: &PlatformDef, name: &str) -> Result<(), PlatformError> {
        Err(PlatformError::Engine {
            engine: platform.kind.to_string(),
            message: format!("this executor makes no named volumes (asked to remove `{name}`)"),
        })
    }

    /// Removes instances left behind by runs whose isolab process died (e.g. `kill -9`).
    /// Returns what was removed, one line each.
    fn gc(&self) -> Result<Vec<String>, PlatformError>;

    /// Confines the daemons of `platform`'s engine to `cpus` (a host cpu pool)
    /// until the returned guard is dropped. The default confines nothing.
    fn confine_daemons(
        &self,
        _platform: &PlatformDef,
        _cpus: &isolab_cgroups::IdSet,
    ) -> Result<daemons::ConfinedDaemons, PlatformError> {
        Ok(daemons::ConfinedDaemons::none())
    }
}

/// Where a command reaches a server on the host without an engine's help:
/// loopback when it shares the host's network, the host's address on isolab's
/// bridge (the first address of its subnet) when it runs behind it.
pub fn default_server_address(platform: &PlatformDef) -> std::net::Ipv4Addr {
    match platform.network {
        Network::Bridge => {
            isolab_runtime::network::Ipv4Subnet::parse(isolab_runtime::network::DEFAULT_SUBNET)
                .map(|s| std::net::Ipv4Addr::from(u32::from(s.network) + 1))
                .unwrap_or(std::net::Ipv4Addr::LOCALHOST)
        }
        Network::None | Network::Host => std::net::Ipv4Addr::LOCALHOST,
    }
}

/// Every driver of this build behind one [`Executor`]: each job goes to the driver
/// of the platform its [`Job::platform`] names (the [`registry`]'s). All drivers
/// share one [`Supervisor`]: the experiment's scope cgroup and the instances' life.
pub struct Drivers {
    supervisor: Supervisor,
    isolab: IsolabConfig,
    drivers: Vec<Box<dyn driver::Driver>>,
}

impl fmt::Debug for Drivers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<PlatformKind> = self.drivers.iter().map(|d| d.info().kind).collect();
        f.debug_struct("Drivers")
            .field("supervisor", &self.supervisor)
            .field("isolab", &self.isolab)
            .field("drivers", &names)
            .finish()
    }
}

impl Drivers {
    /// Every driver of the registry (each made ready on first use only), on
    /// `supervisor`'s instances, with the runtime from `isolab`.
    pub fn new(supervisor: Supervisor, isolab: IsolabConfig) -> Drivers {
        let clock = Arc::new(AtomicU64::new(0));
        let drivers = registry::drivers(&isolab, clock);
        Drivers {
            supervisor,
            isolab,
            drivers,
        }
    }

    fn driver(&self, kind: PlatformKind) -> Result<&dyn driver::Driver, PlatformError> {
        self.drivers
            .iter()
            .find(|d| d.info().kind == kind)
            .map(|d| &**d)
            .ok_or_else(|| PlatformError::Engine {
                engine: kind.as_str().into(),
                message: "this build of isolab has no driver for it".into(),
            })
    }
}

impl Drop for Drivers {
    fn drop(&mut self) {
        // A daemon isolab started is stopped, and the host state it changed
        // restored, the last used first.
        for (kind, err) in driver::shutdown_all(self.drivers.iter().map(|d| &**d)) {
            eprintln!("warning: shutting down {kind}: {err}");
        }
    }
}

impl Executor for Drivers {
    fn confine_daemons(
        &self,
        platform: &PlatformDef,
        cpus: &isolab_cgroups::IdSet,
    ) -> Result<daemons::ConfinedDaemons, PlatformError> {
        let names = platform.kind.capabilities().daemons;
        let record = std::path::Path::new(daemons::RECORD_DIR);
        daemons::ConfinedDaemons::confine(
            Box::new(daemons::RealAffinity::default()),
            names,
            cpus,
            record,
        )
        .map_err(|message| PlatformError::Engine {
            engine: platform.kind.to_string(),
            message,
        })
    }

    fn execute(&self, job: &Job, interrupt: &Interrupt) -> Result<Execution, PlatformError> {
        self.driver(job.platform.kind)?
            .execute(&self.supervisor, job, interrupt)
    }

    fn beside_neighbours(
        &self,
        job: &Job,
        interrupt: &Interrupt,
        body: &mut dyn FnMut() -> Result<Execution, PlatformError>,
    ) -> Result<Execution, PlatformError> {
        self.driver(job.platform.kind)?
            .beside_neighbours(&self.supervisor, job, interrupt, body)
    }

    fn start_service(&self, job: &Job, spec: ServiceSpec) -> Result<Service<'_>, PlatformError> {
        self.driver(job.platform.kind)?
            .start_service(&self.supervisor, job, spec)
    }

    fn prepare(
        &self,
        platforms: &[PlatformDef],
        image: Option<&std::path::Path>,
    ) -> Result<Vec<(String, String)>, PlatformError> {
        let mut env = Vec::new();
        for d in &self.drivers {
            let kind = d.info().kind;
            let levels: Vec<&PlatformDef> = platforms.iter().filter(|p| p.kind == kind).collect();
            if !levels.is_empty() {
                env.extend(d.prepare(&levels, image)?);
            }
        }
        Ok(env)
    }

    fn create_volume(
        &self,
        platform: &PlatformDef,
        name: &str,
    ) -> Result<std::path::PathBuf, PlatformError> {
        self.driver(platform.kind)?.create_volume(name)
    }

    fn remove_volume(&self, platform: &PlatformDef, name: &str) -> Result<(), PlatformError> {
        self.driver(platform.kind)?.remove_volume(name)
    }

    fn server_address(&self, platform: &PlatformDef) -> std::net::Ipv4Addr {
        self.driver(platform.kind)
            .ok()
            .and_then(|d| d.server_address(platform))
            .unwrap_or_else(|| default_server_address(platform))
    }

    fn gc(&self) -> Result<Vec<String>, PlatformError> {
        // Containers of the engines isolab drives whose experiment died (named
        // after it, `isolab-exp3-pid42-…`); then runtimes whose isolab died first
        // (their containers die with them), then the containers (their cgroups
        // are nested in the instances'), then the instances.
        let mut prefixes: Vec<String> = self
            .supervisor
            .orphan_experiments()?
            .iter()
            // A name that makes no container id cannot prefix one either.
            .filter_map(|exp| container_id(isolab_engines::ID_PREFIX, exp).ok())
            .map(String::from)
            .collect();
        prefixes.dedup();
        let mut removed = Vec::new();
        // One engine that cannot collect (its daemon or host fix broken) must not keep
        // the others, the orphaned runtimes and the run cgroups from being collected:
        // its error is kept and reported after everything else was done.
        let mut failures = Vec::new();
        for d in &self.drivers {
            match d.gc(&prefixes) {
                Ok(lines) => removed.extend(lines),
                Err(e) => failures.push(format!("{}: {e}", d.info().kind)),
            }
        }
        self.supervisor.kill_orphans()?;
        removed.extend(
            isolab_runtime::gc(&self.isolab.state_dir, self.supervisor.hierarchy())
                .map_err(|e| PlatformError::Runtime {
                    action: "collecting the containers of killed runtimes",
                    source: Box::new(e),
                })?
                .into_iter()
                .map(|id| format!("container {id}")),
        );
        removed.extend(self.supervisor.gc()?);
        // Neighbour networks of killed runs, and the iperf3 servers that outlived them
        // there.
        let alive = |pid: u32| {
            pid == std::process::id() || isolab_running(std::path::Path::new("/proc"), pid)
        };
        // Engine daemons a killed run left confined to its host cpu pool.
        removed.extend(daemons::gc(
            std::path::Path::new(daemons::RECORD_DIR),
            &daemons::RealAffinity::default(),
            alive,
        ));
        let commands = crate::neighbour::IpCommands;
        for ns in crate::neighbour::stale_namespaces(std::path::Path::new("/run/netns"), alive) {
            let netns = std::path::Path::new("/run/netns").join(&ns);
            for pid in crate::neighbour::namespace_pids(&netns, std::path::Path::new("/proc")) {
                let Ok(raw) = libc::pid_t::try_from(pid) else {
                    continue;
                };
                // SAFETY: kill(2) on a pid read from /proc; no memory is involved.
                if unsafe { libc::kill(raw, libc::SIGKILL) } == 0 {
                    removed.push(format!("process {pid} in network namespace {ns} (killed)"));
                }
            }
            let argv = ["ip", "netns", "del", ns.as_str()].map(String::from);
            match crate::neighbour::NetCommands::run(&commands, &argv) {
                Ok(_) => removed.push(format!("network namespace {ns}")),
                Err(e) => failures.push(format!("`{}`: {e}", argv.join(" "))),
            }
        }
        // The IFB devices that shaped killed runs' neighbour VMs.
        for ifb in crate::neighbour::stale_ifbs(std::path::Path::new("/sys/class/net"), alive) {
            let argv = ["ip", "link", "del", ifb.as_str()].map(String::from);
            match crate::neighbour::NetCommands::run(&commands, &argv) {
                Ok(_) => removed.push(format!("IFB device {ifb}")),
                Err(e) => failures.push(format!("`{}`: {e}", argv.join(" "))),
            }
        }
        if failures.is_empty() {
            Ok(removed)
        } else {
            Err(PlatformError::GcIncomplete { removed, failures })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_error_keeps_its_cause() {
        let e = PlatformError::Runtime {
            action: "collecting the containers of killed runtimes",
            source: Box::new(isolab_runtime::RuntimeError::Host {
                op: "read",
                path: "/run/isolab/x.json".into(),
                source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
            }),
        };
        assert_eq!(
            e.to_string(),
            "isolab-runtime: collecting the containers of killed runtimes"
        );
        let runtime = std::error::Error::source(&e).expect("the runtime's error");
        assert!(
            runtime.to_string().contains("/run/isolab/x.json"),
            "{runtime}"
        );
        assert!(
            runtime.source().is_some(),
            "and its own cause, the io error"
        );
    }

    #[test]
    fn container_ids_carry_the_gc_prefix() {
        assert_eq!(
            container_id(isolab_engines::ID_PREFIX, "exp3-pid42/c0-r1").unwrap(),
            "isolab-exp3-pid42-c0-r1"
        );
        assert_eq!(
            container_id("", "exp3-pid42/c0-r1").unwrap(),
            "exp3-pid42-c0-r1"
        );
    }

    #[test]
    fn the_longest_job_names_the_lab_makes_are_container_ids() {
        // Experiment 2^32 - 1 of pid_max's largest pid, cell 9999, warm-up 99 of
        // instance 127, its neighbour 15, and the calibration suffixes.
        for suffix in ["-nb15", "-diskcal", "-netcal"] {
            let name = format!("exp4294967295-pid4194304/c9999-w99-i127{suffix}");
            assert!(
                container_id(isolab_engines::ID_PREFIX, &name).is_ok(),
                "{name}"
            );
        }
        let e = container_id("", "exp1-pid2/c0-r1/x y").unwrap_err();
        assert!(e.to_string().contains("' ' at byte"), "{e}");
    }
}
