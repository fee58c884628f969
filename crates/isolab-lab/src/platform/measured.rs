//! What a measured command produced, and how it becomes an [`Execution`]: the
//! telemetry named with units, and the logs kept with the run.

use std::path::Path;
use std::time::{Duration, Instant};

use isolab_cgroups::{IdSet, Limits, Stats};
use isolab_store::{PsiLine, PsiResource, Telemetry as T, TelemetrySet};

use super::launch::{log_path, PerfCounts};
use super::process::read_tail;
use super::{Execution, ExitKind};
use crate::telemetry::{HostCpu, Interrupts};

/// Largest part of a log kept with a run.
const LOG_TAIL: usize = 1 << 20;

/// What a measured command produced, before it becomes an [`Execution`].
pub(crate) struct Measured {
    pub exit: ExitKind,
    /// When the command started.
    pub started: Instant,
    pub rusage: libc::rusage,
    /// From the start of the command to its exit.
    pub wall: Duration,
    /// The instance's cgroup counters, or why there are none.
    pub stats: Result<Stats, String>,
    pub perf: Result<PerfCounts, String>,
    pub host_cpu: HostCpu,
    pub notes: Vec<String>,
}

impl Measured {
    /// The execution, with telemetry named with units, and the logs from `workdir`.
    pub(crate) fn into_execution(self, workdir: &Path, limits_applied: Limits) -> Execution {
        let Measured {
            exit,
            started,
            rusage,
            wall,
            stats,
            perf,
            host_cpu,
            mut notes,
        } = self;
        let mut telemetry = TelemetrySet::new();
        telemetry.push(T::Wall, wall.as_secs_f64());
        match stats {
            Ok(s) => push_stats(&mut telemetry, &s, wall),
            Err(e) => notes.push(format!("cgroup statistics unavailable: {e}")),
        }
        telemetry.push(T::CtxSwitchesVoluntary, rusage.ru_nvcsw as f64);
        telemetry.push(T::CtxSwitchesInvoluntary, rusage.ru_nivcsw as f64);
        telemetry.push(T::MaxRss, rusage.ru_maxrss as f64);
        telemetry.push(T::MajorFaults, rusage.ru_majflt as f64);
        telemetry.push(T::MinorFaults, rusage.ru_minflt as f64);
        match perf {
            Ok(c) => {
                telemetry.push(T::ContextSwitches, c.context_switches as f64);
                telemetry.push(T::CpuMigrations, c.cpu_migrations as f64);
            }
            Err(why) => notes.push(why),
        }
        push_host_util(&mut telemetry, &host_cpu.mean);
        push_interrupts(
            &mut telemetry,
            &host_cpu.interrupts,
            limits_applied.cpuset.as_ref(),
        );

        Execution {
            exit,
            stdout: read_tail(&log_path(workdir, "command", "stdout"), LOG_TAIL),
            stderr: read_tail(&log_path(workdir, "command", "stderr"), LOG_TAIL),
            wall,
            started,
            limits_applied,
            neighbour_limits: None,
            telemetry,
            series: host_cpu.series,
            notes,
        }
    }
}

/// Records the host's utilisation, `util` per cpu (percent): each core's
/// (`host_core<N>_util_pct`) and their mean (`host_util_pct`); nothing without cpus.
pub(crate) fn push_host_util(t: &mut TelemetrySet, util: &[(u32, f64)]) {
    if util.is_empty() {
        return;
    }
    for (id, u) in util {
        t.push(T::HostCoreUtil(*id), *u);
    }
    let mean = util.iter().map(|(_, u)| u).sum::<f64>() / util.len() as f64;
    t.push(T::HostUtil, mean);
}

/// Records a cgroup's counters `s` over `wall` (cpu time, its share of `wall`, CFS
/// throttling and bursts, memory peak and major faults, block io, PSI stall totals).
/// Records the `interrupts` served on the cpus the subject may use: `cpus`, else
/// every cpu.
pub(crate) fn push_interrupts(t: &mut TelemetrySet, interrupts: &Interrupts, cpus: Option<&IdSet>) {
    let on_subject = |counts: &[(u32, u64)]| -> Option<f64> {
        (!counts.is_empty()).then(|| {
            counts
                .iter()
                .filter(|(cpu, _)| cpus.is_none_or(|set| set.contains(*cpu)))
                .map(|(_, n)| *n as f64)
                .sum()
        })
    };
    t.push_some(T::Interrupts, on_subject(&interrupts.irqs));
    t.push_some(T::Softirqs, on_subject(&interrupts.softirqs));
    t.push_some(T::SoftirqsNet, on_subject(&interrupts.softirqs_net));
}

pub(crate) fn push_stats(t: &mut TelemetrySet, s: &Stats, wall: Duration) {
    t.push_some(T::CpuUsage, s.cpu_usage.map(|d| d.as_secs_f64()));
    t.push_some(T::CpuUser, s.cpu_user.map(|d| d.as_secs_f64()));
    t.push_some(T::CpuSystem, s.cpu_system.map(|d| d.as_secs_f64()));
    t.push_some(
        T::CpuUtil,
        s.cpu_usage
            .map(|d| 100.0 * d.as_secs_f64() / wall.as_secs_f64().max(1e-9)),
    );
    t.push_some(T::NrPeriods, s.nr_periods.map(|v| v as f64));
    t.push_some(T::NrThrottled, s.nr_throttled.map(|v| v as f64));
    t.push_some(T::Throttled, s.throttled.map(|d| d.as_secs_f64()));
    t.push_some(T::NrBursts, s.nr_bursts.map(|v| v as f64));
    t.push_some(T::Burst, s.burst.map(|d| d.as_secs_f64()));
    t.push_some(T::MemoryPeak, s.memory_peak.map(|b| b.0 as f64));
    t.push_some(
        T::MemoryMajorFaults,
        s.memory_major_faults.map(|v| v as f64),
    );
    t.push_some(T::IoRead, s.io_read.map(|b| b.0 as f64));
    t.push_some(T::IoWrite, s.io_write.map(|b| b.0 as f64));
    if let Some(p) = &s.psi {
        for (resource, lines) in PsiResource::ALL.into_iter().zip([&p.cpu, &p.memory, &p.io]) {
            if let Some(l) = lines {
                t.push(T::Psi(resource, PsiLine::Some), l.some.total.as_secs_f64());
                t.push_some(
                    T::Psi(resource, PsiLine::Full),
                    l.full.map(|f| f.total.as_secs_f64()),
                );
            }
        }
    }
}

/// Records the counters of a VM's QEMU cgroup `s` under the `qemu_*` keys: what the host
/// paid for the guest.
pub(crate) fn push_qemu_stats(t: &mut TelemetrySet, s: &Stats) {
    t.push_some(T::QemuCpuUsage, s.cpu_usage.map(|d| d.as_secs_f64()));
    t.push_some(T::QemuNrThrottled, s.nr_throttled.map(|v| v as f64));
    t.push_some(T::QemuThrottled, s.throttled.map(|d| d.as_secs_f64()));
    t.push_some(T::QemuMemoryPeak, s.memory_peak.map(|b| b.0 as f64));
}
