//! [`Controller`]: the cgroup controllers this crate uses, by name and purpose. Below
//! every other module: the error type names a controller without knowing hierarchies.

use std::fmt;

/// A cgroup controller this crate uses.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Controller {
    /// CFS bandwidth (quota, period) and throttling statistics.
    Cpu,
    /// v1 cpu accounting (usage, user and system time).
    Cpuacct,
    /// Cpu and memory-node binding.
    Cpuset,
    /// Memory limits and usage.
    Memory,
    /// Task count limit.
    Pids,
    /// v1 block io throttling and statistics.
    Blkio,
    /// v1 freezer, used to stop a fork bomb before killing it.
    Freezer,
    /// v2 io throttling and statistics.
    Io,
    /// Huge page limits.
    Hugetlb,
}

impl Controller {
    /// The controller's name in mount options and `cgroup.controllers`.
    pub fn name(self) -> &'static str {
        match self {
            Controller::Cpu => "cpu",
            Controller::Cpuacct => "cpuacct",
            Controller::Cpuset => "cpuset",
            Controller::Memory => "memory",
            Controller::Pids => "pids",
            Controller::Blkio => "blkio",
            Controller::Freezer => "freezer",
            Controller::Io => "io",
            Controller::Hugetlb => "hugetlb",
        }
    }

    /// What isolab uses the controller for (in error messages).
    pub fn purpose(self) -> &'static str {
        match self {
            Controller::Cpu => "cpu quotas and throttling statistics",
            Controller::Cpuacct => "cpu usage statistics",
            Controller::Cpuset => "pinning to cpus and memory nodes",
            Controller::Memory => "memory limits and usage statistics",
            Controller::Pids => "limits on the number of tasks",
            Controller::Blkio | Controller::Io => "io throttling and io statistics",
            Controller::Freezer => "freezing processes before killing them",
            Controller::Hugetlb => "huge page limits",
        }
    }

    /// The v1 controllers a cgroup is created in, when mounted.
    pub(crate) const V1: [Controller; 8] = [
        Controller::Cpu,
        Controller::Cpuacct,
        Controller::Cpuset,
        Controller::Memory,
        Controller::Pids,
        Controller::Blkio,
        Controller::Freezer,
        Controller::Hugetlb,
    ];

    /// The v2 controllers enabled for a cgroup, when available.
    pub(crate) const V2: [Controller; 6] = [
        Controller::Cpu,
        Controller::Cpuset,
        Controller::Memory,
        Controller::Pids,
        Controller::Io,
        Controller::Hugetlb,
    ];

    pub(crate) fn from_v1_option(option: &str) -> Option<Controller> {
        Controller::V1.into_iter().find(|c| c.name() == option)
    }
}

impl fmt::Display for Controller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
