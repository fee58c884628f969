//! The telemetry vocabulary: every scalar a run records besides its metrics, with its
//! stored name, its unit and what it means, in one place.
//!
//! Producers (the lab's platforms, the neighbour supervisor, the probe, the runner) push
//! values under a [`Telemetry`] key into a run's [`TelemetrySet`]; the store writes the set
//! as one row of the `telemetry` table (its names as a layout of `telemetry_layouts`, its
//! values packed) and reads it back into a set;
//! consumers (the report's summary columns, quality checks and findings) ask the set for a
//! key. Nobody types a telemetry name as a string.
//!
//! The stored names are the contract with every existing store: they never change. A set
//! keeps its names as stored, so a name this version does not know (written by an older or a
//! newer isolab) survives a read and a rewrite unchanged, and [`TelemetrySet::entries`]
//! shows it as [`TelemetryName::Other`].

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, OnceLock};

/// The unit of a telemetry value. The stored name ends with it (`_s`, `_bytes`, `_pct`, …)
/// except for counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// Seconds.
    Seconds,
    /// Milliseconds.
    Milliseconds,
    /// Bytes.
    Bytes,
    /// Kibibytes (1024 bytes).
    Kibibytes,
    /// Percent (of one core for cpu utilisation, of a capacity for a target).
    Percent,
    /// Megabits per second.
    Mbps,
    /// Operations per second.
    PerSecond,
    /// A number of events or things.
    Count,
    /// 1 for yes, 0 for no.
    Flag,
}

impl Unit {
    /// The unit's symbol, as a report prints it.
    pub fn symbol(self) -> &'static str {
        match self {
            Unit::Seconds => "s",
            Unit::Milliseconds => "ms",
            Unit::Bytes => "B",
            Unit::Kibibytes => "KiB",
            Unit::Percent => "%",
            Unit::Mbps => "Mbit/s",
            Unit::PerSecond => "1/s",
            Unit::Count => "",
            Unit::Flag => "",
        }
    }
}

/// A resource the kernel's pressure stall information (PSI) covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PsiResource {
    /// `cpu.pressure`.
    Cpu,
    /// `memory.pressure`.
    Memory,
    /// `io.pressure`.
    Io,
}

impl PsiResource {
    /// Every resource, in stored order.
    pub const ALL: [PsiResource; 3] = [PsiResource::Cpu, PsiResource::Memory, PsiResource::Io];

    fn name(self) -> &'static str {
        match self {
            PsiResource::Cpu => "cpu",
            PsiResource::Memory => "memory",
            PsiResource::Io => "io",
        }
    }
}

/// One PSI line: some task stalled, or all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PsiLine {
    /// At least one task stalled.
    Some,
    /// All non-idle tasks stalled at once.
    Full,
}

impl PsiLine {
    fn name(self) -> &'static str {
        match self {
            PsiLine::Some => "some",
            PsiLine::Full => "full",
        }
    }
}

/// A telemetry key. [`Telemetry::name`] is the stored name, which never changes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Telemetry {
    /// `wall_s`: the workload's wall-clock time, start to exit.
    Wall,
    /// `cpu_usage_s`: cpu time of the instance's cgroup (user + system).
    CpuUsage,
    /// `cpu_user_s`: user cpu time of the instance's cgroup.
    CpuUser,
    /// `cpu_system_s`: system cpu time of the instance's cgroup.
    CpuSystem,
    /// `cpu_util_pct`: cpu time over wall time, in percent of one core.
    CpuUtil,
    /// `nr_periods`: CFS bandwidth periods the cgroup was runnable in.
    NrPeriods,
    /// `nr_throttled`: CFS bandwidth periods in which the cgroup was throttled.
    NrThrottled,
    /// `throttled_s`: total time the cgroup was throttled.
    Throttled,
    /// `memory_peak_bytes`: the cgroup's peak memory use.
    MemoryPeak,
    /// `io_read_bytes`: bytes the cgroup read from block devices.
    IoRead,
    /// `io_write_bytes`: bytes the cgroup wrote to block devices.
    IoWrite,
    /// `psi_<resource>_<line>_s`: total stall time of the cgroup on a resource.
    Psi(PsiResource, PsiLine),
    /// `ctx_switches_voluntary`: voluntary context switches (getrusage).
    CtxSwitchesVoluntary,
    /// `ctx_switches_involuntary`: involuntary context switches (getrusage).
    CtxSwitchesInvoluntary,
    /// `max_rss_kib`: the largest resident set of the workload's processes (getrusage).
    MaxRss,
    /// `context_switches`: context switches counted by perf for the workload.
    ContextSwitches,
    /// `cpu_migrations`: moves of the workload's threads between cpus, counted by perf.
    CpuMigrations,
    /// `host_cpu<N>_util_pct`: mean utilisation of host core N during the run.
    HostCoreUtil(u32),
    /// `host_util_pct`: mean utilisation of the host's cores during the run.
    HostUtil,
    /// `vm_boot_s`: time from starting QEMU to the guest being ready.
    VmBoot,
    /// `vm_total_s`: QEMU's whole life, boot included.
    VmTotal,
    /// `vm_vcpus`: the guest's virtual cpus.
    VmVcpus,
    /// `qemu_cpu_usage_s`: cpu time of QEMU's cgroup (boot included).
    QemuCpuUsage,
    /// `qemu_nr_throttled`: CFS periods in which QEMU's cgroup was throttled.
    QemuNrThrottled,
    /// `qemu_throttled_s`: total time QEMU's cgroup was throttled.
    QemuThrottled,
    /// `qemu_memory_peak_bytes`: peak memory of QEMU's cgroup.
    QemuMemoryPeak,
    /// `runtime_<phase>_s`: when isolab-runtime reached a phase of its start
    /// (`cgroup`, `clone`, …, `exec`), from its start.
    RuntimePhase(Cow<'static, str>),
    /// `neighbours`: the number of neighbour instances.
    Neighbours,
    /// `neighbours_cpu_s`: cpu time of all neighbours.
    NeighboursCpu,
    /// `neighbours_in_containers`: whether the neighbours ran in containers.
    NeighboursInContainers,
    /// `neighbours_in_vms`: whether the neighbours ran in VMs of their own.
    NeighboursInVms,
    /// `neighbour_guest_util_pct`: the busy share of the neighbour VMs' vCPUs while
    /// the subject ran, as their own kernels counted it (mean over the VMs).
    NeighbourGuestUtil,
    /// `neighbour_guest_load_pct`: how busy the neighbour VMs' kernels should count
    /// their vCPUs: the cpu stressors' planned load over their vCPUs (mean over the VMs).
    NeighbourGuestLoad,
    /// `neighbours_memory_peak_bytes`: the largest neighbour's peak memory.
    NeighboursMemoryPeak,
    /// `neighbours_io_read_bytes`: bytes all neighbours read from block devices.
    NeighboursIoRead,
    /// `neighbours_io_write_bytes`: bytes all neighbours wrote to block devices.
    NeighboursIoWrite,
    /// `neighbours_throttled_s`: total time the neighbours were throttled.
    NeighboursThrottled,
    /// `neighbours_net_rate_mbps`: the rate the network neighbours were asked to send.
    NeighboursNetRate,
    /// `neighbours_net_mbps`: the rate the network neighbours achieved.
    NeighboursNetMbps,
    /// `subject_net_mbps`: the subject's network rate beside the neighbours.
    SubjectNetMbps,
    /// `neighbour_read_iops_limit`: the io reservation's read IOPS limit per instance.
    NeighbourReadIopsLimit,
    /// `neighbour_write_iops_limit`: the io reservation's write IOPS limit per instance.
    NeighbourWriteIopsLimit,
    /// `neighbour_target_util_pct`: the utilisation the neighbour level asked for.
    NeighbourTargetUtil,
    /// `neighbour_reachable_util_pct`: the utilisation the neighbours could reach.
    NeighbourReachableUtil,
    /// `neighbour_achieved_util_pct`: the utilisation measured during the run.
    NeighbourAchievedUtil,
    /// `disk_iops`: IOPS the contended disk did during the run.
    DiskIops,
    /// `instances`: the number of instances of a multi-instance run.
    Instances,
    /// `instances_overlap_pct`: how much the instances' measurements overlapped.
    InstancesOverlap,
    /// `sched_latency_p50_ms`: the probe's median scheduling latency.
    SchedLatencyP50,
    /// `sched_latency_p99_ms`: the probe's 99th percentile scheduling latency.
    SchedLatencyP99,
    /// `sched_latency_max_ms`: the probe's largest scheduling latency.
    SchedLatencyMax,
    /// `probe_samples`: how many wake-ups the probe measured.
    ProbeSamples,
    /// `generator_cpu_s`: cpu time the load generator used (its own cgroup).
    GeneratorCpu,
    /// `generator_cpu_util_pct`: the generator's cpu time over its wall time, in
    /// percent of the cpus it was given (near 100: it may have been the bottleneck).
    GeneratorCpuUtil,
    /// `generator_cpus`: how many cpus the generator was bound to.
    GeneratorCpus,
    /// `generator_shares_cpus`: 1 when the generator ran on cpus the subject uses too.
    GeneratorSharesCpus,
    /// `generator_saturated`: 1 when the generator may have been the bottleneck.
    GeneratorSaturated,
    /// `load_achieved_rps`: requests per second the generator achieved.
    LoadAchievedRate,
    /// `load_target_rps`: the open-loop profile's mean target rate.
    LoadTargetRate,
    /// `stack_ready_s`: from the first component's start until every one was ready
    /// and the data loaded.
    StackReady,
    /// `nr_bursts`: CFS periods in which the cgroup ran on its burst allowance.
    NrBursts,
    /// `burst_s`: time the cgroup ran beyond its quota on the burst allowance.
    Burst,
    /// `major_faults`: page faults of the workload's processes that read from disk
    /// (getrusage).
    MajorFaults,
    /// `minor_faults`: page faults served without I/O (getrusage).
    MinorFaults,
    /// `memory_major_faults`: major page faults of the instance's cgroup (its
    /// `memory.stat`), daemons and children included.
    MemoryMajorFaults,
    /// `irqs`: hardware interrupts served on the cpus the subject may use during the
    /// run (`/proc/interrupts`).
    Interrupts,
    /// `softirqs`: software interrupts served on those cpus (`/proc/softirqs`).
    Softirqs,
    /// `softirqs_net`: network software interrupts (`NET_RX` + `NET_TX`) on those cpus.
    SoftirqsNet,
}

/// Every key with a fixed name, for [`Telemetry::parse`] (the families — PSI, host
/// cores, runtime phases — are parsed from their pattern).
const FIXED: [Telemetry; 65] = [
    Telemetry::Wall,
    Telemetry::CpuUsage,
    Telemetry::CpuUser,
    Telemetry::CpuSystem,
    Telemetry::CpuUtil,
    Telemetry::NrPeriods,
    Telemetry::NrThrottled,
    Telemetry::Throttled,
    Telemetry::MemoryPeak,
    Telemetry::IoRead,
    Telemetry::IoWrite,
    Telemetry::CtxSwitchesVoluntary,
    Telemetry::CtxSwitchesInvoluntary,
    Telemetry::MaxRss,
    Telemetry::ContextSwitches,
    Telemetry::CpuMigrations,
    Telemetry::HostUtil,
    Telemetry::VmBoot,
    Telemetry::VmTotal,
    Telemetry::VmVcpus,
    Telemetry::QemuCpuUsage,
    Telemetry::QemuNrThrottled,
    Telemetry::QemuThrottled,
    Telemetry::QemuMemoryPeak,
    Telemetry::Neighbours,
    Telemetry::NeighboursCpu,
    Telemetry::NeighboursInContainers,
    Telemetry::NeighboursInVms,
    Telemetry::NeighbourGuestUtil,
    Telemetry::NeighbourGuestLoad,
    Telemetry::NeighboursMemoryPeak,
    Telemetry::NeighboursIoRead,
    Telemetry::NeighboursIoWrite,
    Telemetry::NeighboursThrottled,
    Telemetry::NeighboursNetRate,
    Telemetry::NeighboursNetMbps,
    Telemetry::SubjectNetMbps,
    Telemetry::NeighbourReadIopsLimit,
    Telemetry::NeighbourWriteIopsLimit,
    Telemetry::NeighbourTargetUtil,
    Telemetry::NeighbourReachableUtil,
    Telemetry::NeighbourAchievedUtil,
    Telemetry::DiskIops,
    Telemetry::Instances,
    Telemetry::InstancesOverlap,
    Telemetry::SchedLatencyP50,
    Telemetry::SchedLatencyP99,
    Telemetry::SchedLatencyMax,
    Telemetry::ProbeSamples,
    Telemetry::GeneratorCpu,
    Telemetry::GeneratorCpuUtil,
    Telemetry::GeneratorCpus,
    Telemetry::GeneratorSharesCpus,
    Telemetry::GeneratorSaturated,
    Telemetry::LoadAchievedRate,
    Telemetry::LoadTargetRate,
    Telemetry::StackReady,
    Telemetry::NrBursts,
    Telemetry::Burst,
    Telemetry::MajorFaults,
    Telemetry::MinorFaults,
    Telemetry::MemoryMajorFaults,
    Telemetry::Interrupts,
    Telemetry::Softirqs,
    Telemetry::SoftirqsNet,
];

impl Telemetry {
    /// The stored name (the `key` column of the `telemetry` table). Never changes:
    /// existing stores are read by it.
    pub fn name(&self) -> Cow<'static, str> {
        use Telemetry as T;
        Cow::Borrowed(match self {
            T::Wall => "wall_s",
            T::CpuUsage => "cpu_usage_s",
            T::CpuUser => "cpu_user_s",
            T::CpuSystem => "cpu_system_s",
            T::CpuUtil => "cpu_util_pct",
            T::NrPeriods => "nr_periods",
            T::NrThrottled => "nr_throttled",
            T::Throttled => "throttled_s",
            T::MemoryPeak => "memory_peak_bytes",
            T::IoRead => "io_read_bytes",
            T::IoWrite => "io_write_bytes",
            T::Psi(resource, line) => {
                return Cow::Owned(format!("psi_{}_{}_s", resource.name(), line.name()))
            }
            T::CtxSwitchesVoluntary => "ctx_switches_voluntary",
            T::CtxSwitchesInvoluntary => "ctx_switches_involuntary",
            T::MaxRss => "max_rss_kib",
            T::ContextSwitches => "context_switches",
            T::CpuMigrations => "cpu_migrations",
            T::HostCoreUtil(id) => return Cow::Owned(format!("host_cpu{id}_util_pct")),
            T::HostUtil => "host_util_pct",
            T::VmBoot => "vm_boot_s",
            T::VmTotal => "vm_total_s",
            T::VmVcpus => "vm_vcpus",
            T::QemuCpuUsage => "qemu_cpu_usage_s",
            T::QemuNrThrottled => "qemu_nr_throttled",
            T::QemuThrottled => "qemu_throttled_s",
            T::QemuMemoryPeak => "qemu_memory_peak_bytes",
            T::RuntimePhase(phase) => return Cow::Owned(format!("runtime_{phase}_s")),
            T::Neighbours => "neighbours",
            T::NeighboursCpu => "neighbours_cpu_s",
            T::NeighboursInContainers => "neighbours_in_containers",
            T::NeighboursInVms => "neighbours_in_vms",
            T::NeighbourGuestUtil => "neighbour_guest_util_pct",
            T::NeighbourGuestLoad => "neighbour_guest_load_pct",
            T::NeighboursMemoryPeak => "neighbours_memory_peak_bytes",
            T::NeighboursIoRead => "neighbours_io_read_bytes",
            T::NeighboursIoWrite => "neighbours_io_write_bytes",
            T::NeighboursThrottled => "neighbours_throttled_s",
            T::NeighboursNetRate => "neighbours_net_rate_mbps",
            T::NeighboursNetMbps => "neighbours_net_mbps",
            T::SubjectNetMbps => "subject_net_mbps",
            T::NeighbourReadIopsLimit => "neighbour_read_iops_limit",
            T::NeighbourWriteIopsLimit => "neighbour_write_iops_limit",
            T::NeighbourTargetUtil => "neighbour_target_util_pct",
            T::NeighbourReachableUtil => "neighbour_reachable_util_pct",
            T::NeighbourAchievedUtil => "neighbour_achieved_util_pct",
            T::DiskIops => "disk_iops",
            T::Instances => "instances",
            T::InstancesOverlap => "instances_overlap_pct",
            T::SchedLatencyP50 => "sched_latency_p50_ms",
            T::SchedLatencyP99 => "sched_latency_p99_ms",
            T::SchedLatencyMax => "sched_latency_max_ms",
            T::ProbeSamples => "probe_samples",
            T::GeneratorCpu => "generator_cpu_s",
            T::GeneratorCpuUtil => "generator_cpu_util_pct",
            T::GeneratorCpus => "generator_cpus",
            T::GeneratorSharesCpus => "generator_shares_cpus",
            T::GeneratorSaturated => "generator_saturated",
            T::LoadAchievedRate => "load_achieved_rps",
            T::LoadTargetRate => "load_target_rps",
            T::StackReady => "stack_ready_s",
            T::NrBursts => "nr_bursts",
            T::Burst => "burst_s",
            T::MajorFaults => "major_faults",
            T::MinorFaults => "minor_faults",
            T::MemoryMajorFaults => "memory_major_faults",
            T::Interrupts => "irqs",
            T::Softirqs => "softirqs",
            T::SoftirqsNet => "softirqs_net",
        })
    }

    /// The value's unit.
    pub fn unit(&self) -> Unit {
        use Telemetry as T;
        match self {
            T::Wall
            | T::CpuUsage
            | T::CpuUser
            | T::CpuSystem
            | T::Throttled
            | T::Psi(..)
            | T::VmBoot
            | T::VmTotal
            | T::QemuCpuUsage
            | T::QemuThrottled
            | T::RuntimePhase(_)
            | T::NeighboursCpu
            | T::NeighboursThrottled
            | T::GeneratorCpu
            | T::StackReady
            | T::Burst => Unit::Seconds,
            T::SchedLatencyP50 | T::SchedLatencyP99 | T::SchedLatencyMax => Unit::Milliseconds,
            T::MemoryPeak
            | T::IoRead
            | T::IoWrite
            | T::QemuMemoryPeak
            | T::NeighboursMemoryPeak
            | T::NeighboursIoRead
            | T::NeighboursIoWrite => Unit::Bytes,
            T::MaxRss => Unit::Kibibytes,
            T::CpuUtil
            | T::HostCoreUtil(_)
            | T::HostUtil
            | T::NeighbourTargetUtil
            | T::NeighbourReachableUtil
            | T::NeighbourAchievedUtil
            | T::NeighbourGuestUtil
            | T::NeighbourGuestLoad
            | T::InstancesOverlap
            | T::GeneratorCpuUtil => Unit::Percent,
            T::NeighboursNetRate | T::NeighboursNetMbps | T::SubjectNetMbps => Unit::Mbps,
            T::DiskIops
            | T::NeighbourReadIopsLimit
            | T::NeighbourWriteIopsLimit
            | T::LoadAchievedRate
            | T::LoadTargetRate => Unit::PerSecond,
            T::NeighboursInContainers
            | T::NeighboursInVms
            | T::GeneratorSharesCpus
            | T::GeneratorSaturated => Unit::Flag,
            T::NrPeriods
            | T::NrThrottled
            | T::CtxSwitchesVoluntary
            | T::CtxSwitchesInvoluntary
            | T::ContextSwitches
            | T::CpuMigrations
            | T::VmVcpus
            | T::QemuNrThrottled
            | T::Neighbours
            | T::Instances
            | T::ProbeSamples
            | T::GeneratorCpus
            | T::NrBursts
            | T::MajorFaults
            | T::MinorFaults
            | T::MemoryMajorFaults
            | T::Interrupts
            | T::Softirqs
            | T::SoftirqsNet => Unit::Count,
        }
    }

    /// The key of a stored name, or `None` for a name this version does not know.
    /// `Telemetry::parse(&k.name()) == Some(k)` for every key.
    pub fn parse(name: &str) -> Option<Telemetry> {
        if let Some(key) = fixed_by_name().get(name) {
            return Some(key.clone());
        }
        if let Some(rest) = name.strip_prefix("psi_").and_then(|r| r.strip_suffix("_s")) {
            let (resource, line) = rest.split_once('_')?;
            let resource = PsiResource::ALL
                .into_iter()
                .find(|r| r.name() == resource)?;
            let line = [PsiLine::Some, PsiLine::Full]
                .into_iter()
                .find(|l| l.name() == line)?;
            return Some(Telemetry::Psi(resource, line));
        }
        if let Some(id) = name
            .strip_prefix("host_cpu")
            .and_then(|r| r.strip_suffix("_util_pct"))
        {
            return id.parse().ok().map(Telemetry::HostCoreUtil);
        }
        if let Some(phase) = name
            .strip_prefix("runtime_")
            .and_then(|r| r.strip_suffix("_s"))
        {
            let known =
                !phase.is_empty() && phase.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
            return known.then(|| Telemetry::RuntimePhase(Cow::Owned(phase.to_owned())));
        }
        None
    }
}

/// The keys of [`FIXED`] by stored name: [`Telemetry::parse`] runs once for every
/// stored value a report reads (a million in a large experiment).
fn fixed_by_name() -> &'static std::collections::HashMap<&'static str, Telemetry> {
    static MAP: std::sync::OnceLock<std::collections::HashMap<&'static str, Telemetry>> =
        std::sync::OnceLock::new();
    MAP.get_or_init(|| {
        FIXED
            .iter()
            .filter_map(|k| match k.name() {
                Cow::Borrowed(name) => Some((name, k.clone())),
                Cow::Owned(_) => None,
            })
            .collect()
    })
}

impl fmt::Display for Telemetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// A stored telemetry name: a key this version knows, or another name kept as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TelemetryName<'a> {
    /// A known key.
    Known(Telemetry),
    /// A name written by another isolab version, kept unchanged.
    Other(&'a str),
}

/// A run's scalar telemetry: values under [`Telemetry`] keys, in recorded order.
///
/// It holds the stored names and values themselves, so a set read from a store writes
/// back exactly what was read, names unknown to this version included. Values are
/// appended ([`TelemetrySet::push`]); when a key was recorded twice, [`TelemetrySet::get`]
/// returns the first value, and both are stored.
///
/// The names are kept apart from the values, in a list that the sets read from one
/// store share: the runs of an experiment record the same names in the same order, so a
/// report over a million runs holds each list once, not a string per value
/// ([`TelemetrySet::shares_names`] tells a consumer it can reuse what it worked out for
/// another set's names). [`TelemetrySet::names`] and [`TelemetrySet::values`] read them
/// as they are; [`TelemetrySet::iter`] lends `(name, value)` rows, made on its first call.
#[derive(Clone)]
pub struct TelemetrySet {
    names: Arc<Vec<String>>,
    values: Vec<f64>,
    /// The rows [`TelemetrySet::iter`] lends, made on its first call (reports and the
    /// store never call it).
    rows: OnceLock<Vec<(String, f64)>>,
}

/// An empty set holds the one empty list of names: a store reads a set for every run
/// before it reads the run's telemetry, and a report holds a million.
impl Default for TelemetrySet {
    fn default() -> Self {
        static NO_NAMES: OnceLock<Arc<Vec<String>>> = OnceLock::new();
        TelemetrySet {
            names: Arc::clone(NO_NAMES.get_or_init(|| Arc::new(Vec::new()))),
            values: Vec::new(),
            rows: OnceLock::new(),
        }
    }
}

impl TelemetrySet {
    /// An empty set.
    pub fn new() -> Self {
        TelemetrySet::default()
    }

    /// The set of `values` under `names` (as many), the names shared with other sets.
    pub(crate) fn from_shared(names: Arc<Vec<String>>, values: Vec<f64>) -> Self {
        debug_assert_eq!(names.len(), values.len());
        TelemetrySet {
            names,
            values,
            rows: OnceLock::new(),
        }
    }

    /// Records `value` under `key`, after the values already recorded.
    pub fn push(&mut self, key: Telemetry, value: f64) {
        self.push_named(key.name().into_owned(), value);
    }

    /// Records `value` under a stored name, after the values already recorded.
    fn push_named(&mut self, name: String, value: f64) {
        Arc::make_mut(&mut self.names).push(name);
        self.values.push(value);
        self.rows = OnceLock::new();
    }

    /// Records `value` under `key` when there is one.
    pub fn push_some(&mut self, key: Telemetry, value: Option<f64>) {
        if let Some(value) = value {
            self.push(key, value);
        }
    }

    /// The first value recorded under `key`.
    pub fn get(&self, key: Telemetry) -> Option<f64> {
        self.get_named(&key.name())
    }

    /// The first value recorded under a stored name, known to this version or not.
    pub fn get_named(&self, name: &str) -> Option<f64> {
        self.names
            .iter()
            .position(|n| n == name)
            .map(|i| self.values[i])
    }

    /// The stored `(name, value)` rows, in recorded order (made on the first call:
    /// [`TelemetrySet::names`] and [`TelemetrySet::values`] cost nothing).
    pub fn iter(&self) -> std::slice::Iter<'_, (String, f64)> {
        self.as_rows().iter()
    }

    /// The rows with their names typed, in recorded order.
    pub fn entries(&self) -> impl Iterator<Item = (TelemetryName<'_>, f64)> + '_ {
        self.names.iter().zip(&self.values).map(|(name, value)| {
            let name =
                Telemetry::parse(name).map_or(TelemetryName::Other(name), TelemetryName::Known);
            (name, *value)
        })
    }

    /// The stored names, in recorded order (a name recorded twice appears twice).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The values, in recorded order: `values()[i]` is recorded under `names()[i]`.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// Whether `other` holds its names in the very list this set does (sets read from
    /// one store with the same names do): then `names()` of both are equal, and what a
    /// consumer worked out for one's names holds for the other's. `false` says nothing.
    pub fn shares_names(&self, other: &TelemetrySet) -> bool {
        Arc::ptr_eq(&self.names, &other.names)
    }

    /// The stored rows, in recorded order (made on the first call).
    pub fn as_rows(&self) -> &[(String, f64)] {
        self.rows.get_or_init(|| {
            self.names
                .iter()
                .cloned()
                .zip(self.values.iter().copied())
                .collect()
        })
    }

    /// The stored rows, in recorded order.
    pub fn into_rows(self) -> Vec<(String, f64)> {
        self.into_iter().collect()
    }

    /// How many values were recorded.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// Equal when the same values were recorded under the same names in the same order (a
/// NaN equals nothing, as in a list of pairs).
impl PartialEq for TelemetrySet {
    fn eq(&self, other: &TelemetrySet) -> bool {
        self.names == other.names && self.values == other.values
    }
}

/// As a list of rows: `TelemetrySet { rows: [("cpu_usage_s", 1.5), …] }`.
impl fmt::Debug for TelemetrySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Rows<'a>(&'a TelemetrySet);
        impl fmt::Debug for Rows<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_list()
                    .entries(self.0.names.iter().zip(&self.0.values))
                    .finish()
            }
        }
        f.debug_struct("TelemetrySet")
            .field("rows", &Rows(self))
            .finish()
    }
}

/// Stored rows, kept as they are (unknown names included).
impl From<Vec<(String, f64)>> for TelemetrySet {
    fn from(rows: Vec<(String, f64)>) -> Self {
        let (names, values) = rows.into_iter().unzip();
        TelemetrySet::from_shared(Arc::new(names), values)
    }
}

impl FromIterator<(Telemetry, f64)> for TelemetrySet {
    fn from_iter<I: IntoIterator<Item = (Telemetry, f64)>>(iter: I) -> Self {
        let mut set = TelemetrySet::new();
        set.extend(iter);
        set
    }
}

impl Extend<(Telemetry, f64)> for TelemetrySet {
    fn extend<I: IntoIterator<Item = (Telemetry, f64)>>(&mut self, iter: I) {
        for (key, value) in iter {
            self.push(key, value);
        }
    }
}

/// Appends another set's rows, unknown names included.
impl Extend<(String, f64)> for TelemetrySet {
    fn extend<I: IntoIterator<Item = (String, f64)>>(&mut self, iter: I) {
        for (name, value) in iter {
            self.push_named(name, value);
        }
    }
}

impl IntoIterator for TelemetrySet {
    type Item = (String, f64);
    type IntoIter = std::iter::Zip<std::vec::IntoIter<String>, std::vec::IntoIter<f64>>;
    fn into_iter(self) -> Self::IntoIter {
        let names = Arc::try_unwrap(self.names).unwrap_or_else(|shared| (*shared).clone());
        names.into_iter().zip(self.values)
    }
}

impl<'a> IntoIterator for &'a TelemetrySet {
    type Item = &'a (String, f64);
    type IntoIter = std::slice::Iter<'a, (String, f64)>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl PartialEq<Vec<(String, f64)>> for TelemetrySet {
    fn eq(&self, rows: &Vec<(String, f64)>) -> bool {
        self.len() == rows.len()
            && self
                .names
                .iter()
                .zip(&self.values)
                .zip(rows)
                .all(|((name, value), (n, v))| name == n && value == v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key, families included.
    fn every_key() -> Vec<Telemetry> {
        let mut keys = FIXED.to_vec();
        for r in PsiResource::ALL {
            keys.push(Telemetry::Psi(r, PsiLine::Some));
            keys.push(Telemetry::Psi(r, PsiLine::Full));
        }
        keys.push(Telemetry::HostCoreUtil(0));
        keys.push(Telemetry::HostCoreUtil(17));
        keys.push(Telemetry::RuntimePhase("exec".into()));
        keys
    }

    #[test]
    fn every_name_parses_back_to_its_key_and_names_are_unique() {
        let keys = every_key();
        for key in &keys {
            assert_eq!(Telemetry::parse(&key.name()).as_ref(), Some(key), "{key}");
        }
        let mut names: Vec<_> = keys.iter().map(Telemetry::name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), keys.len());
    }

    #[test]
    fn stored_names_do_not_change() {
        // The names existing stores hold; a change here breaks every old store.
        assert_eq!(Telemetry::CpuUsage.name(), "cpu_usage_s");
        assert_eq!(Telemetry::NrThrottled.name(), "nr_throttled");
        assert_eq!(Telemetry::Throttled.name(), "throttled_s");
        assert_eq!(Telemetry::MemoryPeak.name(), "memory_peak_bytes");
        assert_eq!(Telemetry::CpuMigrations.name(), "cpu_migrations");
        assert_eq!(
            Telemetry::Psi(PsiResource::Memory, PsiLine::Full).name(),
            "psi_memory_full_s"
        );
        assert_eq!(Telemetry::HostCoreUtil(3).name(), "host_cpu3_util_pct");
        assert_eq!(
            Telemetry::RuntimePhase("exec".into()).name(),
            "runtime_exec_s"
        );
        assert_eq!(Telemetry::MemoryPeak.unit(), Unit::Bytes);
        assert_eq!(Telemetry::NrThrottled.unit(), Unit::Count);
    }

    #[test]
    fn unknown_names_survive_a_round_trip() {
        let rows = vec![
            ("cpu_usage_s".to_string(), 1.5),
            ("from_the_future_widgets".to_string(), 7.0),
            ("psi_gpu_some_s".to_string(), 0.5),
        ];
        let set = TelemetrySet::from(rows.clone());
        assert_eq!(set.get(Telemetry::CpuUsage), Some(1.5));
        assert_eq!(set.get_named("from_the_future_widgets"), Some(7.0));
        let typed: Vec<_> = set.entries().map(|(n, _)| n).collect();
        assert_eq!(
            typed,
            vec![
                TelemetryName::Known(Telemetry::CpuUsage),
                TelemetryName::Other("from_the_future_widgets"),
                TelemetryName::Other("psi_gpu_some_s"),
            ]
        );
        assert_eq!(set.into_rows(), rows);
    }

    #[test]
    fn values_keep_their_order_and_the_first_wins() {
        let mut set = TelemetrySet::new();
        set.push(Telemetry::Wall, 2.0);
        set.push_some(Telemetry::NrThrottled, None);
        set.push(Telemetry::NeighbourTargetUtil, 90.0);
        set.push(Telemetry::NeighbourTargetUtil, 80.0);
        assert_eq!(set.get(Telemetry::NeighbourTargetUtil), Some(90.0));
        assert_eq!(set.get(Telemetry::NrThrottled), None);
        let names: Vec<_> = set.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "wall_s",
                "neighbour_target_util_pct",
                "neighbour_target_util_pct"
            ]
        );
    }
}
