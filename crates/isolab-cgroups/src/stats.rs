//! [`Stats`]: cumulative counters of a cgroup.

use std::time::Duration;

use crate::bytes::Bytes;
use crate::psi::Pressure;

/// Cumulative counters of a cgroup since it was created. Each field that the layout
/// (version, mounted controllers, kernel) cannot provide is `None`.
///
/// Counters only grow: take two readings and subtract to measure an interval
/// (except `memory_current`, `pids_current` and the PSI averages, which are levels).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    /// Cpu time used (v1 `cpuacct.usage`; v2 `cpu.stat` `usage_usec`).
    pub cpu_usage: Option<Duration>,
    /// User cpu time (v1 `cpuacct.stat` `user`, in `USER_HZ` ticks; v2 `user_usec`).
    pub cpu_user: Option<Duration>,
    /// System cpu time (v1 `cpuacct.stat` `system`; v2 `system_usec`).
    pub cpu_system: Option<Duration>,
    /// CFS periods with runnable tasks (`cpu.stat` `nr_periods`).
    pub nr_periods: Option<u64>,
    /// Periods in which the quota ran out (`cpu.stat` `nr_throttled`).
    pub nr_throttled: Option<u64>,
    /// Time spent throttled (v1 `throttled_time`; v2 `throttled_usec`).
    pub throttled: Option<Duration>,
    /// Periods in which the cgroup ran on its burst allowance (`cpu.stat` `nr_bursts`,
    /// Linux 5.14+).
    pub nr_bursts: Option<u64>,
    /// Time it ran beyond its quota on the burst allowance (v1 `burst_time`; v2
    /// `burst_usec`).
    pub burst: Option<Duration>,
    /// Memory in use now (v1 `memory.usage_in_bytes`; v2 `memory.current`).
    pub memory_current: Option<Bytes>,
    /// Highest memory use (v1 `memory.max_usage_in_bytes`; v2 `memory.peak`, absent
    /// before Linux 5.19).
    pub memory_peak: Option<Bytes>,
    /// Major page faults of the cgroup and its descendants (v1 `memory.stat`
    /// `total_pgmajfault`; v2 `memory.stat` `pgmajfault`).
    pub memory_major_faults: Option<u64>,
    /// Bytes read from block devices (v1 `blkio.throttle.io_service_bytes_recursive`
    /// `Read`; v2 `io.stat` `rbytes`), summed over devices.
    pub io_read: Option<Bytes>,
    /// Bytes written to block devices, summed over devices.
    pub io_write: Option<Bytes>,
    /// Tasks in the cgroup now (`pids.current`).
    pub pids_current: Option<u64>,
    /// Pressure stall information (v2, or the unified directory in hybrid mode).
    pub psi: Option<Pressure>,
}
