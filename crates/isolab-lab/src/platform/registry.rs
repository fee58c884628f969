//! The one registry of platforms: the list of every [`Driver`] a spec can name.
//! Spec validation, `isolab list --platforms`, the preflight, `isolab bench-start`
//! (through [`isolab_engines::registry`]), `isolab gc` and the runner all read it;
//! there is no second list. What a driver is and does lives in [`super::driver`].
//!
//! The built-in drivers are the host, isolab-runtime, every container engine of
//! [`isolab_engines::registry`] (each behind one [`super::engine::EngineDriver`]), and
//! the VM compositions: a plain `vm`, and `vm+ENGINE` for each engine that runs inside
//! the guest.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};

use isolab_engines::{Capabilities, NetworkMode};

use super::driver::{Driver, PlatformInfo, PlatformKind, Unavailable, UnknownPlatform};

/// Every platform's driver, in documentation order: the host, isolab-runtime, the
/// container engines of [`isolab_engines::registry`], then the VMs. Engines that
/// share `clock` record the order of their first use.
pub(crate) fn drivers(isolab: &super::IsolabConfig, clock: Arc<AtomicU64>) -> Vec<Box<dyn Driver>> {
    let mut all: Vec<Box<dyn Driver>> = vec![
        Box::new(super::host::HostDriver),
        Box::new(super::isolab::IsolabDriver::new(isolab.clone())),
    ];
    for engine in isolab_engines::registry() {
        all.push(Box::new(super::engine::EngineDriver::new(
            engine,
            clock.clone(),
        )));
    }
    all.extend(super::vm::drivers(isolab));
    all
}

/// The drivers as the registry and availability checks use them: this host's
/// runtime, and no [`super::Drivers`] around them (nothing is made ready).
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

/// A kind's entry in the registry and what follows from it.
impl PlatformKind {
    /// Parses an engine name of the registry.
    pub fn parse(s: &str) -> Result<PlatformKind, UnknownPlatform> {
        registry()
            .iter()
            .find(|p| p.kind.as_str() == s)
            .map(|p| p.kind)
            .ok_or_else(|| UnknownPlatform::Unknown {
                name: s.into(),
                known: registry().iter().map(|p| p.kind.as_str()).collect(),
            })
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

/// Whether this host can run a platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Availability {
    /// Whether it can.
    pub usable: bool,
    /// What was found, or what is missing and what to do.
    pub detail: String,
}

/// Whether each platform of the registry can run on this host, in registry order,
/// with what was found or what is missing and what to do. Every platform creates
/// cgroups: without root, only those that [run without
/// root](PlatformKind::runs_without_root) are usable, in a cgroup delegated to the user.
pub fn availability() -> Vec<(PlatformInfo, Availability)> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let delegation = if root {
        Ok(String::new())
    } else {
        delegation()
    };
    detached_drivers()
        .iter()
        .map(|d| {
            let rootless = d.info().kind.runs_without_root();
            let availability = match d.available() {
                Ok(found) if root => Availability {
                    usable: true,
                    detail: found,
                },
                Ok(found) if rootless => match &delegation {
                    Ok(cgroup) => Availability {
                        usable: true,
                        detail: format!("{found}, without root in {cgroup}"),
                    },
                    Err(why) => Availability {
                        usable: false,
                        detail: format!("{found}, but without root: {why}"),
                    },
                },
                Ok(found) => Availability {
                    usable: false,
                    detail: format!("{found}, but this platform needs root"),
                },
                Err(why) => Availability {
                    usable: false,
                    detail: why.to_string(),
                },
            };
            (d.info(), availability)
        })
        .collect()
}

/// The caller's delegated cgroup, when it is one that passes on cpu and memory (what every
/// run needs), else why not and what to do.
fn delegation() -> Result<String, String> {
    use isolab_cgroups::{Controller, Delegated};
    let h = isolab_cgroups::Hierarchy::detect().map_err(|e| e.to_string())?;
    let d = Delegated::of_this_process(&h).map_err(|e| e.to_string())?;
    d.require(&[Controller::Cpu, Controller::Memory])
        .map_err(|e| e.to_string())?;
    Ok(format!(
        "the delegated cgroup {} (controllers: {})",
        d.path().display(),
        d.controllers().join(" ")
    ))
}

/// The platforms among `kinds` that this host cannot run, each with what is
/// missing and what to do (root aside: the preflight checks that once, itself).
pub fn unavailable(kinds: &[PlatformKind]) -> Vec<(PlatformKind, Unavailable)> {
    detached_drivers()
        .iter()
        .filter(|d| kinds.contains(&d.info().kind))
        .filter_map(|d| d.available().err().map(|why| (d.info().kind, why)))
        .collect()
}

#[cfg(test)]
mod tests {
    use isolab_engines::NetworkMode;

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
