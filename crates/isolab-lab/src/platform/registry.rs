//! The one registry of platforms: every engine a spec can name, what it can do, and
//! the driver that runs it. Spec validation, `isolab list --platforms`, the
//! preflight, `isolab bench-start` (through [`isolab_engines::registry`]), `isolab
//! gc` and the runner all read it; there is no second list.
//!
//! A platform is a [`Driver`]: its name ([`PlatformKind`]), its [`Capabilities`],
//! whether this host can run it, and the operations the runner needs — prepare
//! (daemon, image, VM disk), execute a measured job inside an instance of the
//! host's supervisor, the address at which a command reaches a server on the host,
//! gc of what a killed run left, and shutdown. The built-in drivers are the host,
//! isolab-runtime, every container engine of [`isolab_engines::registry`], and the
//! VM compositions: a plain `vm`, and `vm+ENGINE` for each engine that runs inside
//! the guest.

use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};

use isolab_engines::{Capabilities, LimitKinds, NetworkMode};

use super::host::HostPlatform;
use super::service::{self, ServiceSpec, Started};
use super::{Execution, Interrupt, Job, PlatformDef, PlatformError};

/// A platform engine's name in specs (`host`, `docker`, `vm+isolab`), one of the
/// [`registry`].
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

    /// Parses an engine name of the registry.
    pub fn parse(s: &str) -> Result<PlatformKind, UnknownPlatform> {
        registry()
            .iter()
            .find(|p| p.kind.0 == s)
            .map(|p| p.kind)
            .ok_or_else(|| UnknownPlatform::Unknown {
                name: s.into(),
                known: registry().iter().map(|p| p.kind.0).collect(),
            })
    }

    /// The kind of the container engine named `name` (an [`isolab_engines::Engine`]'s).
    pub(crate) fn from_engine(name: &'static str) -> PlatformKind {
        PlatformKind(name)
    }

    /// Its name in specs.
    pub fn as_str(self) -> &'static str {
        self.0
    }

    /// Its entry in the registry.
    pub fn info(self) -> &'static PlatformInfo {
        registry()
            .iter()
            .find(|p| p.kind == self)
            .expect("every PlatformKind comes from the registry")
    }

    /// What it can do.
    pub fn capabilities(self) -> Capabilities {
        self.info().capabilities
    }

    /// Whether the workload runs from the experiment's image (a container or VM).
    pub fn needs_image(self) -> bool {
        self.capabilities().needs_image
    }

    /// Whether it is a virtual machine.
    pub fn is_vm(self) -> bool {
        self.capabilities().vm
    }

    /// The networks it offers; the first is its default.
    pub fn networks(self) -> &'static [NetworkMode] {
        self.capabilities().networks
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

/// What a driver's [`Driver::execute`] gives: the run, or why there is none.
pub(crate) type Executed = Result<Execution, PlatformError>;

/// A platform's driver: what the runner, the preflight and gc ask of a platform.
pub(crate) trait Driver: Send + Sync {
    /// Its name and what it can do.
    fn info(&self) -> PlatformInfo;

    /// Whether this host can run it, checked without changing anything (no daemon
    /// started): `Ok` with what was found, or what is missing and what to do.
    fn available(&self) -> Result<String, String>;

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

    /// Runs one job inside an instance of `host` (scope and instance cgroups,
    /// prepare and cleanup, neighbours, probe), tearing everything down, also on
    /// error.
    fn execute(&self, host: &HostPlatform, job: &Job, interrupt: &Interrupt) -> Executed;

    /// Starts `job`'s command as a long-running service in an instance of `host`
    /// (see [`super::service`]); platforms without services say why.
    fn start_service(&self, _host: &HostPlatform, job: &Job, _spec: ServiceSpec) -> Started<'_> {
        Err(PlatformError::NoServices {
            platform: job.platform.name.clone(),
            why: format!("engine `{}` runs no services", self.info().kind),
        })
    }

    /// Where a command on `level` reaches a server on the host, when the platform
    /// knows better than [`super::default_server_address`].
    fn server_address(&self, _level: &PlatformDef) -> Option<std::net::Ipv4Addr> {
        None
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

/// The bare host.
struct HostDriver;

impl Driver for HostDriver {
    fn info(&self) -> PlatformInfo {
        PlatformInfo {
            kind: PlatformKind::HOST,
            summary: "the bare host: the workload runs as a child of isolab in a cgroup of its own",
            capabilities: Capabilities {
                networks: &[NetworkMode::Host],
                limits: LimitKinds::ALL,
                perf_follows_workload: true,
                needs_image: false,
                services: true,
                vm: false,
            },
        }
    }

    fn available(&self) -> Result<String, String> {
        Ok("always".into())
    }

    fn execute(&self, host: &HostPlatform, job: &Job, interrupt: &Interrupt) -> Executed {
        use super::Platform;
        host.execute(job, interrupt)
    }

    fn start_service(&self, host: &HostPlatform, job: &Job, spec: ServiceSpec) -> Started<'_> {
        let sup = host.supervisor();
        service::start(sup, job, spec, service::LimitsAt::Instance, || {
            Ok((job.argv.clone(), None))
        })
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

/// Every platform's driver, in documentation order: the host, isolab-runtime, the
/// container engines of [`isolab_engines::registry`], then the VMs. Engines that
/// share `clock` record the order of their first use.
pub(crate) fn drivers(isolab: &super::IsolabConfig, clock: Arc<AtomicU64>) -> Vec<Box<dyn Driver>> {
    let mut all: Vec<Box<dyn Driver>> = vec![
        Box::new(HostDriver),
        Box::new(super::isolab::IsolabDriver::new(isolab.clone())),
    ];
    for engine in isolab_engines::registry() {
        all.push(Box::new(super::engine::EnginePlatform::new(
            engine,
            clock.clone(),
        )));
    }
    all.extend(super::vm::drivers(isolab));
    all
}

/// The drivers as the registry and availability checks use them: this host's
/// runtime, and no [`super::Platforms`] around them (nothing is made ready).
fn detached_drivers() -> Vec<Box<dyn Driver>> {
    drivers(
        &super::IsolabConfig::discover(),
        Arc::new(AtomicU64::new(0)),
    )
}

/// Every platform of this build, in documentation order.
pub fn registry() -> &'static [PlatformInfo] {
    static REGISTRY: OnceLock<Vec<PlatformInfo>> = OnceLock::new();
    REGISTRY.get_or_init(|| detached_drivers().iter().map(|d| d.info()).collect())
}

/// Whether this host can run a platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Availability {
    /// Whether it can.
    pub usable: bool,
    /// What was found, or what is missing and what to do.
    pub detail: String,
}

/// Whether each platform of the registry can run on this host, in registry order,
/// with what was found or what is missing and what to do. Every platform
/// creates cgroups, so none is usable without root.
pub fn availability() -> Vec<(PlatformInfo, Availability)> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    detached_drivers()
        .iter()
        .map(|d| {
            let availability = match d.available() {
                Ok(found) if root => Availability {
                    usable: true,
                    detail: found,
                },
                Ok(found) => Availability {
                    usable: false,
                    detail: format!("{found}, but isolab must run as root to create cgroups"),
                },
                Err(why) => Availability {
                    usable: false,
                    detail: why,
                },
            };
            (d.info(), availability)
        })
        .collect()
}

/// The platforms among `kinds` that this host cannot run, each with what is
/// missing and what to do (root aside: the preflight checks that once, itself).
pub fn unavailable(kinds: &[PlatformKind]) -> Vec<(PlatformKind, String)> {
    detached_drivers()
        .iter()
        .filter(|d| kinds.contains(&d.info().kind))
        .filter_map(|d| d.available().err().map(|why| (d.info().kind, why)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_names_each_platform_once_and_parses_its_names() {
        let names: Vec<&str> = registry().iter().map(|p| p.kind.as_str()).collect();
        for expected in [
            "host",
            "isolab",
            "docker",
            "podman",
            "runc",
            "crun",
            "lxc",
            "vm",
            "vm+isolab",
        ] {
            assert!(names.contains(&expected), "{expected} in {names:?}");
        }
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        for p in registry() {
            assert_eq!(PlatformKind::parse(p.kind.as_str()), Ok(p.kind));
            assert!(!p.capabilities.networks.is_empty(), "{}", p.kind);
        }
        let e = PlatformKind::parse("kubernetes").unwrap_err().to_string();
        assert!(
            e.contains("unknown engine `kubernetes`: expected one of host, isolab, docker"),
            "{e}"
        );
    }

    #[test]
    fn capabilities_say_what_each_platform_offers() {
        assert!(!PlatformKind::HOST.needs_image());
        assert!(PlatformKind::ISOLAB.needs_image());
        assert!(PlatformKind::VM.is_vm() && PlatformKind::VM_ISOLAB.is_vm());
        assert_eq!(PlatformKind::HOST.networks(), &[NetworkMode::Host]);
        let docker = PlatformKind::parse("docker").unwrap();
        assert!(!docker.capabilities().perf_follows_workload);
        assert!(docker.networks().contains(&NetworkMode::Bridge));
        assert!(!PlatformKind::VM.capabilities().limits.pids);
        assert!(PlatformKind::VM_ISOLAB.capabilities().limits.pids);
    }
}
