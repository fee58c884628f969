//! What a recorded counter points to when it moves with an effect: the small table
//! behind [attribution](crate::attribution).
//!
//! Every [`Telemetry`] key is either **excluded** — a setting (what the cell asked for:
//! the neighbours' target, the generator's cpus, a VM's vcpus; it differs between cells
//! by design and explains nothing), the measurement itself (`wall_s`), or one host
//! core's utilisation (`host_cpu<N>_util_pct`: that core may not be the subject's;
//! `host_util_pct` stands for them) — or a **counter** of what happened during the run,
//! pointing to one [`Mechanism`]:
//!
//! | counters | mechanism |
//! |---|---|
//! | `nr_throttled`, `throttled_s`, `nr_bursts`, `burst_s` | the CFS quota |
//! | `cpu_migrations`, `context_switches`, `ctx_switches_*` | placement and the scheduler |
//! | `psi_cpu_*`, `host_util_pct`, `neighbours_cpu_s`, `neighbour_achieved_util_pct`, `sched_latency_*` | contention for the cpus |
//! | `major_faults`, `memory_major_faults`, `psi_memory_*`, `memory_peak_bytes`, `max_rss_kib` | the memory limit |
//! | `psi_io_*`, `io_*_bytes`, `disk_iops`, `neighbours_io_*` | the disk or its throttle |
//! | `softirqs_net`, `subject_net_mbps`, `neighbours_net_mbps` | the network path (bridge, NAT, veth) |
//! | `irqs`, `softirqs` | interrupts on the subject's cpus |
//! | `qemu_*`, `vm_boot_s` | the hypervisor |
//! | `generator_*`, `load_achieved_rps` | the measurement (the load generator) |
//! | `cpu_usage_s`, `cpu_user_s`, `cpu_system_s`, `cpu_util_pct`, `minor_faults` | the work done |
//! | `runtime_<phase>_s`, `stack_ready_s`, `vm_total_s` | starting the platform |
//!
//! Run-queue wait has no counter of its own: this kernel family has no
//! `/proc/schedstat` without `CONFIG_SCHEDSTATS`, and the cgroup's cpu pressure
//! (`psi_cpu_some_s`, time with a runnable task waiting) is the same quantity per cgroup.
//!
//! The words are plain on purpose: they name where to look, not a proof. Names this
//! version does not know are not interpreted.

use isolab_store::Telemetry;

/// Where a moved counter points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// CFS bandwidth control: the quota ran out and the threads waited for the next
    /// period.
    Quota,
    /// Where the threads ran and how the scheduler moved and switched them.
    Placement,
    /// Other work competing for the same cpus.
    CpuContention,
    /// The memory limit: reclaim, major faults, stalls waiting for memory.
    Memory,
    /// The block device or its throttle.
    Disk,
    /// The network path: bridge, NAT, veth, softirq processing.
    Network,
    /// Hardware and software interrupts on the subject's cpus.
    Interrupts,
    /// The hypervisor: QEMU's own cpu, throttling and memory.
    Hypervisor,
    /// The measurement itself: the load generator, not the subject.
    Measurement,
    /// The subject did more (or less) work for the same result.
    Work,
    /// Starting the platform (runtime phases, a stack's readiness, a VM's boot).
    Startup,
}

impl Mechanism {
    /// The short name shown in tables.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Quota => "cpu quota",
            Mechanism::Placement => "placement",
            Mechanism::CpuContention => "cpu contention",
            Mechanism::Memory => "memory limit",
            Mechanism::Disk => "disk",
            Mechanism::Network => "network path",
            Mechanism::Interrupts => "interrupts",
            Mechanism::Hypervisor => "hypervisor",
            Mechanism::Measurement => "measurement",
            Mechanism::Work => "work done",
            Mechanism::Startup => "start-up",
        }
    }

    /// Whether counters of this mechanism describe the run rather than explain it: the
    /// work done (cpu time falls when the workload waits) and start-up. Attribution
    /// ranks them after every cause.
    pub fn is_context(self) -> bool {
        matches!(self, Mechanism::Work | Mechanism::Startup)
    }

    /// What the mechanism means for the workload, in plain words.
    pub fn words(self) -> &'static str {
        match self {
            Mechanism::Quota => {
                "the CFS quota: its threads wait out each period's rest once the quota is spent"
            }
            Mechanism::Placement => {
                "placement and the scheduler: threads moved between cpus or were switched out more, losing warm caches"
            }
            Mechanism::CpuContention => "contention: other work ran on the cpus it needed",
            Mechanism::Memory => {
                "the memory limit: pages were reclaimed and read back (major faults) or it stalled on memory"
            }
            Mechanism::Disk => "the disk or its throttle: it waited on block I/O",
            Mechanism::Network => {
                "the network path (bridge, NAT, veth): more packet processing per request"
            }
            Mechanism::Interrupts => {
                "interrupts: its cpus spent more time serving hardware and software interrupts"
            }
            Mechanism::Hypervisor => "the hypervisor: QEMU's own work or limits",
            Mechanism::Measurement => {
                "the measurement, not the subject: the load generator was busier or saturated"
            }
            Mechanism::Work => "the work done: it used more (or less) cpu time for the same result",
            Mechanism::Startup => "start-up: the platform took longer to get the workload running",
        }
    }
}

/// Which way a counter moves on the worse side when it is a cause of the effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Harm {
    /// More of it on the worse side: throttling, stalls, contention, faults, migrations,
    /// interrupts, the hypervisor's work, a longer start-up.
    More,
    /// Less of it on the worse side: the rate the load generator achieved.
    Less,
    /// Either way: the work done describes the run (cpu time falls when it waits and
    /// rises when it spins) rather than explains it.
    Either,
}

/// Which way `key` moves on the worse side when it explains the effect ([`Harm`]).
pub fn harm(key: &Telemetry) -> Harm {
    match role(key) {
        Role::Counter(Mechanism::Work) => Harm::Either,
        _ if *key == Telemetry::LoadAchievedRate => Harm::Less,
        _ => Harm::More,
    }
}

/// What a telemetry key is to attribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A setting of the cell, the measurement itself (`wall_s`) or one host core's
    /// utilisation: never an explanation.
    Excluded,
    /// A counter of what happened, pointing to a mechanism.
    Counter(Mechanism),
}

/// The role of `key` (see the table in the module documentation).
pub fn role(key: &Telemetry) -> Role {
    use Mechanism as M;
    use Telemetry as T;
    Role::Counter(match key {
        T::Wall
        | T::NrPeriods
        | T::VmVcpus
        | T::Neighbours
        | T::NeighboursInContainers
        | T::NeighboursInVms
        | T::NeighboursNetRate
        | T::NeighbourReadIopsLimit
        | T::NeighbourWriteIopsLimit
        | T::NeighbourGuestLoad
        | T::NeighbourTargetUtil
        | T::NeighbourReachableUtil
        | T::Instances
        | T::InstancesOverlap
        | T::ProbeSamples
        | T::GeneratorCpus
        | T::GeneratorSharesCpus
        | T::LoadTargetRate
        | T::HostCoreUtil(_) => return Role::Excluded,
        T::NrThrottled | T::Throttled | T::NrBursts | T::Burst => M::Quota,
        T::CpuMigrations
        | T::ContextSwitches
        | T::CtxSwitchesVoluntary
        | T::CtxSwitchesInvoluntary => M::Placement,
        T::Psi(isolab_store::PsiResource::Cpu, _)
        | T::HostUtil
        | T::NeighboursCpu
        | T::NeighboursThrottled
        | T::NeighbourAchievedUtil
        | T::NeighbourGuestUtil
        | T::SchedLatencyP50
        | T::SchedLatencyP99
        | T::SchedLatencyMax => M::CpuContention,
        T::MajorFaults
        | T::MemoryMajorFaults
        | T::Psi(isolab_store::PsiResource::Memory, _)
        | T::MemoryPeak
        | T::MaxRss
        | T::NeighboursMemoryPeak => M::Memory,
        T::Psi(isolab_store::PsiResource::Io, _)
        | T::IoRead
        | T::IoWrite
        | T::DiskIops
        | T::NeighboursIoRead
        | T::NeighboursIoWrite => M::Disk,
        T::SoftirqsNet | T::SubjectNetMbps | T::NeighboursNetMbps => M::Network,
        T::Interrupts | T::Softirqs => M::Interrupts,
        T::QemuCpuUsage | T::QemuNrThrottled | T::QemuThrottled | T::QemuMemoryPeak | T::VmBoot => {
            M::Hypervisor
        }
        T::GeneratorCpu | T::GeneratorCpuUtil | T::GeneratorSaturated | T::LoadAchievedRate => {
            M::Measurement
        }
        T::CpuUsage | T::CpuUser | T::CpuSystem | T::CpuUtil | T::MinorFaults => M::Work,
        T::RuntimePhase(_) | T::StackReady | T::VmTotal => M::Startup,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_s_examples_map_as_documented() {
        assert_eq!(
            role(&Telemetry::NrThrottled),
            Role::Counter(Mechanism::Quota)
        );
        assert_eq!(
            role(&Telemetry::CpuMigrations),
            Role::Counter(Mechanism::Placement)
        );
        assert_eq!(
            role(&Telemetry::MajorFaults),
            Role::Counter(Mechanism::Memory)
        );
        assert_eq!(
            role(&Telemetry::Psi(
                isolab_store::PsiResource::Io,
                isolab_store::PsiLine::Some
            )),
            Role::Counter(Mechanism::Disk)
        );
        assert_eq!(
            role(&Telemetry::GeneratorSaturated),
            Role::Counter(Mechanism::Measurement)
        );
        assert_eq!(role(&Telemetry::Wall), Role::Excluded);
        assert_eq!(role(&Telemetry::NeighbourTargetUtil), Role::Excluded);
    }
}
