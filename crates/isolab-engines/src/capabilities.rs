//! What a platform can do, declared once by its driver and read by every consumer:
//! the spec checker explains an impossible cell from it, `isolab list --platforms`
//! prints it, the runner decides from it whether perf counters describe the workload,
//! and which [`StorageLevel`]s a run's working directory may live on.

use isolab_cgroups::Limits;

use crate::NetworkMode;

/// The kinds of limit a platform can apply to an instance and read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LimitKinds {
    /// A CFS bandwidth quota (`cpus = 1.5`).
    pub cpu_quota: bool,
    /// Pinned cpus and memory nodes (`cpuset`, `mems`).
    pub cpuset: bool,
    /// A memory limit, and swap with it.
    pub memory: bool,
    /// A maximum number of tasks.
    pub pids: bool,
    /// Block I/O throttles.
    pub io: bool,
}

impl LimitKinds {
    /// Every kind.
    pub const ALL: LimitKinds = LimitKinds {
        cpu_quota: true,
        cpuset: true,
        memory: true,
        pids: true,
        io: true,
    };

    /// The names of the kinds it has, in a fixed order (`cpu-quota cpuset memory pids io`).
    pub fn names(&self) -> Vec<&'static str> {
        [
            (self.cpu_quota, "cpu-quota"),
            (self.cpuset, "cpuset"),
            (self.memory, "memory"),
            (self.pids, "pids"),
            (self.io, "io"),
        ]
        .into_iter()
        .filter_map(|(has, name)| has.then_some(name))
        .collect()
    }

    /// The kinds `limits` asks for.
    pub fn of(limits: &Limits) -> LimitKinds {
        LimitKinds {
            cpu_quota: limits.cpu.is_some(),
            cpuset: limits.cpuset.is_some() || limits.mems.is_some(),
            memory: limits.memory_max.is_some() || limits.memory_swap_max.is_some(),
            pids: limits.pids_max.is_some(),
            io: !limits.io.is_empty(),
        }
    }

    /// The kinds of `asked` this platform cannot apply, by name.
    pub fn missing(&self, asked: LimitKinds) -> Vec<&'static str> {
        LimitKinds {
            cpu_quota: asked.cpu_quota && !self.cpu_quota,
            cpuset: asked.cpuset && !self.cpuset,
            memory: asked.memory && !self.memory,
            pids: asked.pids && !self.pids,
            io: asked.io && !self.io,
        }
        .names()
    }
}

/// Where a run's working directory (and a service's data directory, which lives in it)
/// is stored: the `storage` factor of a spec (docs/storage.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StorageLevel {
    /// A host directory bind-mounted at the same path (the default).
    Bind,
    /// The container's writable layer: an overlay file system (the mechanism of
    /// overlay2's and isolab's writable layer) mounted at the working directory.
    Layer,
    /// The engine's named volume (`docker volume create`).
    Volume,
    /// An ext4 image file on a loop device mounted at the working directory.
    Image,
    /// A tmpfs mounted at the working directory.
    Tmpfs,
    /// Each instance its own block device (a loop device over a backing file, ext4).
    Dedicated,
    /// One device-mapper `striped` device over several loop devices, ext4, shared by
    /// every instance of the run.
    Shared,
}

impl StorageLevel {
    /// Every level, in the order specs and docs list them.
    pub const ALL: [StorageLevel; 7] = [
        StorageLevel::Bind,
        StorageLevel::Layer,
        StorageLevel::Volume,
        StorageLevel::Image,
        StorageLevel::Tmpfs,
        StorageLevel::Dedicated,
        StorageLevel::Shared,
    ];
    /// The levels the lab mounts on the host at the working directory, which every
    /// platform that binds the working directory at the same path sees.
    pub const MOUNTED: &'static [StorageLevel] = &[
        StorageLevel::Bind,
        StorageLevel::Image,
        StorageLevel::Tmpfs,
        StorageLevel::Dedicated,
        StorageLevel::Shared,
    ];
    /// [`StorageLevel::MOUNTED`] and a container's writable layer.
    pub const CONTAINER: &'static [StorageLevel] = &[
        StorageLevel::Bind,
        StorageLevel::Layer,
        StorageLevel::Image,
        StorageLevel::Tmpfs,
        StorageLevel::Dedicated,
        StorageLevel::Shared,
    ];

    /// Its name in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            StorageLevel::Bind => "bind",
            StorageLevel::Layer => "layer",
            StorageLevel::Volume => "volume",
            StorageLevel::Image => "image",
            StorageLevel::Tmpfs => "tmpfs",
            StorageLevel::Dedicated => "dedicated",
            StorageLevel::Shared => "shared",
        }
    }

    /// The level named `s`.
    pub fn parse(s: &str) -> Option<StorageLevel> {
        StorageLevel::ALL.into_iter().find(|l| l.as_str() == s)
    }

    /// Whether it is a block device the lab makes (loop devices, device-mapper).
    pub fn is_block(self) -> bool {
        matches!(
            self,
            StorageLevel::Image | StorageLevel::Dedicated | StorageLevel::Shared
        )
    }
}

impl std::fmt::Display for StorageLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a platform offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// The networks an instance can get; the first is the default.
    pub networks: &'static [NetworkMode],
    /// The limits it applies and reads back.
    pub limits: LimitKinds,
    /// Whether perf counters opened on the command isolab starts follow the
    /// workload (false when a daemon, not the client, is the container's parent).
    pub perf_follows_workload: bool,
    /// Whether it runs the workload from the experiment's image.
    pub needs_image: bool,
    /// Whether it can run a long-running service that a client outside reaches at
    /// an address (an instance on a network the host can route to).
    pub services: bool,
    /// Whether the workload runs in a virtual machine.
    pub vm: bool,
    /// The names of the engine's daemons (long-running processes outside the
    /// containers that serve them: dockerd, containerd and its shims), which a host
    /// cpu pool (`host_cpus`) confines with the cell.
    pub daemons: &'static [&'static str],
    /// The storage levels its runs' working directories can live on.
    pub storage: &'static [StorageLevel],
}

impl Capabilities {
    /// A container engine's: every limit, the image, perf counters following the
    /// workload, services on any network but `none`, the storage levels of
    /// [`StorageLevel::CONTAINER`] (the working directory is bound at the same path).
    pub fn container(networks: &'static [NetworkMode]) -> Capabilities {
        Capabilities {
            networks,
            limits: LimitKinds::ALL,
            perf_follows_workload: true,
            needs_image: true,
            services: networks.iter().any(|n| *n != NetworkMode::None),
            vm: false,
            daemons: &[],
            storage: StorageLevel::CONTAINER,
        }
    }

    /// Whether its runs' working directories can live on `level`.
    pub fn has_storage(&self, level: StorageLevel) -> bool {
        self.storage.contains(&level)
    }

    /// Whether it offers `network`.
    pub fn has_network(&self, network: NetworkMode) -> bool {
        self.networks.contains(&network)
    }

    /// The default network.
    pub fn default_network(&self) -> NetworkMode {
        self.networks.first().copied().unwrap_or(NetworkMode::None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_limit_kinds_are_named() {
        let limits = Limits {
            cpu: Some(
                isolab_cgroups::CpuQuota::from_cpus(1.5, std::time::Duration::from_millis(100))
                    .unwrap(),
            ),
            pids_max: Some(10),
            ..Limits::default()
        };
        assert!(LimitKinds::ALL.missing(LimitKinds::of(&limits)).is_empty());
        let only_cpus = LimitKinds {
            cpu_quota: true,
            cpuset: true,
            ..LimitKinds::default()
        };
        assert_eq!(only_cpus.missing(LimitKinds::of(&limits)), vec!["pids"]);
        assert_eq!(only_cpus.names(), vec!["cpu-quota", "cpuset"]);
    }

    #[test]
    fn a_container_engine_runs_services_only_with_a_network() {
        assert!(!Capabilities::container(&[NetworkMode::None]).services);
        let c = Capabilities::container(&[NetworkMode::None, NetworkMode::Host]);
        assert!(c.services && c.needs_image && !c.vm);
        assert_eq!(c.default_network(), NetworkMode::None);
        assert!(c.has_network(NetworkMode::Host) && !c.has_network(NetworkMode::Bridge));
    }
}
