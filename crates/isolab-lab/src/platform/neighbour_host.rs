//! A run's neighbours ([`NeighbourJobs`], with their utilisation targets) and where
//! their instances run inside their cgroups: as processes, in
//! containers of the subject's platform ([`NeighbourContainers`]) or in guests of their
//! own ([`NeighbourGuests`], the VM platforms), and what a guest reports of its cpu time.

use std::time::Duration;

use isolab_cgroups::Limits;

use super::{Job, PlatformError};

/// A disk utilisation target of disk neighbours.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskTarget {
    /// The whole disk's name in /proc/diskstats (`vda`).
    pub device: String,
    /// Its measured capacity, in IOPS.
    pub capacity_iops: f64,
    /// The utilisation to reach, in percent of the capacity.
    pub target_pct: f64,
}

/// A network utilisation target of network neighbours.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NetTarget {
    /// The neighbour network's measured capacity, in Mbit/s.
    pub capacity_mbps: f64,
    /// The utilisation to reach, in percent of the capacity.
    pub target_pct: f64,
    /// Which way the neighbours' traffic flows (what is counted against the target).
    pub direction: crate::neighbour::NetDirection,
}

/// The neighbours of a run: each instance in a cgroup of its own, next to the
/// subject's, with its own limits (a reservation's), started before the subject's
/// command and stopped after it.
#[derive(Debug, Clone)]
pub struct NeighbourJobs {
    /// The level, e.g. `cpu@90%` (for notes and telemetry names).
    pub level: String,
    /// One argv per instance.
    pub instances: Vec<Vec<String>>,
    /// Limits of every instance.
    pub limits: Limits,
    /// Host utilisation to reach, in percent of all its cpus, when the level is a
    /// cpu utilisation target: verified from the host sampler during the run.
    pub target_util_pct: Option<f64>,
    /// When the reservation keeps the neighbours from reaching `target_util_pct`:
    /// the most they can reach, which runs are checked against instead.
    pub reachable_util_pct: Option<f64>,
    /// A disk utilisation target: the operations completed on the disk during the
    /// run are compared with it.
    pub disk_target: Option<DiskTarget>,
    /// A network utilisation target: the traffic of neighbours and subject during
    /// the run is compared with it.
    pub net_target: Option<NetTarget>,
    /// The `net` reservation: the rate, in Mbit/s, of the neighbours' interface
    /// (all network neighbours together), applied with `tc` and read back. Neighbour
    /// VMs share it out: each VM's tap is shaped to its part.
    pub net_rate_mbps: Option<u64>,
    /// How long the neighbours run before the subject starts.
    pub settle: Duration,
    /// Cpu neighbours: each instance's planned load, in percent of one cpu (its
    /// `--cpu-load`, 100 at full load); empty for other kinds. A neighbour VM's kernel
    /// should count its vCPUs this busy (divided by their number).
    pub loads_pct: Vec<f64>,
    /// Network neighbours: the number of iperf3 servers of the neighbour network
    /// (two namespaces of their own, or for neighbour VMs one on isolab's bridge, see
    /// [`crate::neighbour::NeighbourNet`]) that the instances stream to; 0 for other
    /// kinds.
    pub network_servers: u32,
}

/// Runs neighbour instances in containers of the subject's platform (seed 001's
/// stress containers next to a container under test): the instance's cgroup is
/// limited from outside, and the container's cgroup nests in it.
pub(crate) trait NeighbourContainers: Sync {
    /// The command that runs `argv` in a container named after `id`, its cgroup
    /// below `cgroup_parent`, with `workdir` bound at the same path.
    fn wrap(
        &self,
        id: &str,
        argv: &[String],
        cgroup_parent: &std::path::Path,
        workdir: &std::path::Path,
    ) -> Result<Vec<String>, PlatformError>;

    /// Removes what the container `id` left after its processes were killed.
    fn collect(&self, id: &str) -> Result<(), PlatformError>;
}

/// Runs neighbour instances in guests of their own (seed 001's stress VMs next to a
/// VM under test): each instance's cgroup holds its guest's QEMU, limited from
/// outside as the subject's QEMU is.
pub(crate) trait NeighbourGuests: Sync {
    /// The limits of the cgroup a neighbour's QEMU runs in, from the neighbours'
    /// `limits` (a guest's memory is its RAM, not a cgroup limit).
    fn outer_limits(&self, limits: &Limits) -> Limits;

    /// The neighbours' limits as the run records them: what the cgroup read back
    /// (`applied`) with the guest's RAM as its memory.
    fn recorded_limits(&self, applied: Limits, limits: &Limits) -> Limits;

    /// Boots neighbour `index` of `job` in a guest of its own whose QEMU starts in
    /// `cgroup` (already limited); `argv` runs in the guest until the guest is
    /// removed. Returns once the command is about to start.
    fn start(
        &self,
        job: &Job,
        index: usize,
        argv: &[String],
        cgroup: &isolab_cgroups::Cgroup,
    ) -> Result<Box<dyn NeighbourGuest>, PlatformError>;
}

/// A neighbour's guest while it runs.
pub(crate) trait NeighbourGuest: Send {
    /// Whether its QEMU still runs.
    fn is_running(&mut self) -> bool;
    /// Why it ended early: the end of its command's stderr or its console.
    fn why_ended(&self) -> String;
    /// What the host reads back about it (the vCPU threads' affinity), for the run's notes.
    fn facts(&mut self) -> Vec<String>;
    /// Busy and total time of its vCPUs as its own kernel counts them (`/proc/stat`,
    /// in jiffies), when it samples them.
    fn guest_cpu(&self) -> Option<GuestCpu>;
    /// Whether it samples its cpu time at all (a disk neighbour's guest does not).
    fn samples(&self) -> bool;
    /// The number of its vCPUs.
    fn vcpus(&self) -> u32;
    /// The rate its network is shaped to each way (the `net` reservation on its tap),
    /// as read back, in Mbit/s.
    fn net_rate(&self) -> Option<f64>;
    /// The interfaces of the host's namespace that carry only its traffic (its tap):
    /// not the subject's.
    fn host_interfaces(&self) -> Vec<String>;
    /// Kills its QEMU and releases its network.
    fn remove(self: Box<Self>) -> Result<(), PlatformError>;
}

/// A guest's cpu time from its `/proc/stat` line `cpu`: busy (user, nice, system,
/// irq, softirq) and total (busy, idle, iowait and steal), in jiffies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestCpu {
    /// Jiffies its vCPUs ran something.
    pub busy: u64,
    /// Jiffies of all its vCPUs.
    pub total: u64,
}

impl GuestCpu {
    /// Parses the first line of `/proc/stat` (`cpu  user nice system idle iowait irq
    /// softirq steal …`); `None` for anything else.
    pub fn parse(line: &str) -> Option<GuestCpu> {
        let mut fields = line.split_whitespace();
        if fields.next()? != "cpu" {
            return None;
        }
        let v: Vec<u64> = fields
            .take(8)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        if v.len() < 8 {
            return None;
        }
        let busy = v[0] + v[1] + v[2] + v[5] + v[6];
        Some(GuestCpu {
            busy,
            total: busy + v[3] + v[4] + v[7],
        })
    }

    /// The busy share between `self` and a later `after`, in percent; `None` when no
    /// time passed.
    pub fn util_pct(self, after: GuestCpu) -> Option<f64> {
        let total = after.total.checked_sub(self.total)?;
        let busy = after.busy.checked_sub(self.busy)?;
        (total > 0).then(|| 100.0 * busy as f64 / total as f64)
    }
}

/// Where a run's neighbour instances run, inside their cgroups.
#[derive(Clone, Copy)]
pub(crate) enum NeighbourHost<'a> {
    /// Directly, as processes of the host.
    Processes,
    /// In containers of the subject's platform.
    Containers(&'a dyn NeighbourContainers),
    /// In guests of their own (the subject's VM platform).
    Guests(&'a dyn NeighbourGuests),
}
