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

impl Stats {
    /// The counters of the interval from `before` to this reading: each cumulative
    /// counter the difference (0 when it went backwards, as a counter of a recreated
    /// cgroup does), `None` where either reading lacks it; the levels (memory in use
    /// and its peak, tasks, the PSI averages) as this reading has them.
    pub fn since(&self, before: &Stats) -> Stats {
        fn d(now: Option<Duration>, then: Option<Duration>) -> Option<Duration> {
            Some(now?.saturating_sub(then?))
        }
        fn n(now: Option<u64>, then: Option<u64>) -> Option<u64> {
            Some(now?.saturating_sub(then?))
        }
        fn b(now: Option<Bytes>, then: Option<Bytes>) -> Option<Bytes> {
            Some(Bytes(now?.0.saturating_sub(then?.0)))
        }
        Stats {
            cpu_usage: d(self.cpu_usage, before.cpu_usage),
            cpu_user: d(self.cpu_user, before.cpu_user),
            cpu_system: d(self.cpu_system, before.cpu_system),
            nr_periods: n(self.nr_periods, before.nr_periods),
            nr_throttled: n(self.nr_throttled, before.nr_throttled),
            throttled: d(self.throttled, before.throttled),
            nr_bursts: n(self.nr_bursts, before.nr_bursts),
            burst: d(self.burst, before.burst),
            memory_current: self.memory_current,
            memory_peak: self.memory_peak,
            memory_major_faults: n(self.memory_major_faults, before.memory_major_faults),
            io_read: b(self.io_read, before.io_read),
            io_write: b(self.io_write, before.io_write),
            pids_current: self.pids_current,
            psi: match (&self.psi, &before.psi) {
                (Some(now), Some(then)) => Some(now.since(then)),
                _ => None,
            },
        }
    }

    /// The counters of two cgroups together (the components of a service stack):
    /// every field summed, `None` where either lacks it. Summed levels are the sum of
    /// the parts' levels: memory peaks reached at different times sum to an upper
    /// bound of the joint peak. PSI totals sum to the stall time of the parts, each
    /// counted once per part that stalled; PSI averages are the larger of the two.
    pub fn plus(&self, other: &Stats) -> Stats {
        fn d(x: Option<Duration>, y: Option<Duration>) -> Option<Duration> {
            Some(x? + y?)
        }
        fn n(x: Option<u64>, y: Option<u64>) -> Option<u64> {
            Some(x?.saturating_add(y?))
        }
        fn b(x: Option<Bytes>, y: Option<Bytes>) -> Option<Bytes> {
            Some(Bytes(x?.0.saturating_add(y?.0)))
        }
        Stats {
            cpu_usage: d(self.cpu_usage, other.cpu_usage),
            cpu_user: d(self.cpu_user, other.cpu_user),
            cpu_system: d(self.cpu_system, other.cpu_system),
            nr_periods: n(self.nr_periods, other.nr_periods),
            nr_throttled: n(self.nr_throttled, other.nr_throttled),
            throttled: d(self.throttled, other.throttled),
            nr_bursts: n(self.nr_bursts, other.nr_bursts),
            burst: d(self.burst, other.burst),
            memory_current: b(self.memory_current, other.memory_current),
            memory_peak: b(self.memory_peak, other.memory_peak),
            memory_major_faults: n(self.memory_major_faults, other.memory_major_faults),
            io_read: b(self.io_read, other.io_read),
            io_write: b(self.io_write, other.io_write),
            pids_current: n(self.pids_current, other.pids_current),
            psi: match (&self.psi, &other.psi) {
                (Some(x), Some(y)) => Some(x.plus(y)),
                _ => None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::psi::{Psi, PsiLines};

    fn reading(usage_ms: u64, throttled: u64, peak: u64, psi_total_ms: u64) -> Stats {
        let psi = Psi {
            avg10: 1.0,
            total: Duration::from_millis(psi_total_ms),
            ..Psi::default()
        };
        Stats {
            cpu_usage: Some(Duration::from_millis(usage_ms)),
            nr_throttled: Some(throttled),
            memory_peak: Some(Bytes(peak)),
            io_read: None,
            psi: Some(Pressure {
                cpu: Some(PsiLines {
                    some: psi,
                    full: None,
                }),
                memory: None,
                io: None,
            }),
            ..Stats::default()
        }
    }

    #[test]
    fn an_interval_subtracts_counters_and_keeps_levels() {
        let before = reading(1000, 5, 100, 300);
        let after = reading(1600, 9, 250, 450);
        let d = after.since(&before);
        assert_eq!(d.cpu_usage, Some(Duration::from_millis(600)));
        assert_eq!(d.nr_throttled, Some(4));
        assert_eq!(d.memory_peak, Some(Bytes(250)));
        assert_eq!(d.io_read, None);
        let cpu = d.psi.and_then(|p| p.cpu).unwrap();
        assert_eq!(cpu.some.total, Duration::from_millis(150));
        assert_eq!(cpu.some.avg10, 1.0);
        // A counter that went backwards (a recreated cgroup) gives 0, not a wrap.
        assert_eq!(before.since(&after).nr_throttled, Some(0));
    }

    #[test]
    fn two_parts_sum_and_a_missing_counter_stays_missing() {
        let x = reading(600, 4, 250, 150);
        let mut y = reading(400, 1, 50, 50);
        y.nr_throttled = None;
        let s = x.plus(&y);
        assert_eq!(s.cpu_usage, Some(Duration::from_millis(1000)));
        assert_eq!(s.nr_throttled, None);
        assert_eq!(s.memory_peak, Some(Bytes(300)));
        let cpu = s.psi.and_then(|p| p.cpu).unwrap();
        assert_eq!(cpu.some.total, Duration::from_millis(200));
    }
}
