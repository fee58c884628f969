//! Host telemetry sampled during a run: per-core utilisation from `/proc/stat`, and
//! the interrupts each cpu served (`/proc/interrupts`, `/proc/softirqs`) between the
//! run's start and end.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use isolab_store::Series;

/// Default sampling interval: 10 Hz.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);

/// Cumulative jiffies of one cpu line of `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// All jiffies (guest time is already included in user/nice and not added again).
    pub total: u64,
    /// Idle plus iowait jiffies.
    pub idle: u64,
}

/// Parses the per-cpu lines (`cpu0`, `cpu1`, …) of `/proc/stat`, in order, with their ids.
pub fn parse_proc_stat(text: &str) -> Vec<(u32, CpuTimes)> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("cpu")?;
            let (id, fields) = rest.split_once(' ')?;
            let id: u32 = id.parse().ok()?;
            let v: Vec<u64> = fields
                .split_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect();
            if v.len() < 4 {
                return None;
            }
            // user nice system idle iowait irq softirq steal guest guest_nice
            let total: u64 = v.iter().take(8).sum();
            let idle = v[3] + v.get(4).copied().unwrap_or(0);
            Some((id, CpuTimes { total, idle }))
        })
        .collect()
}

/// Busy percentage of each cpu between two readings (cpus matched by id).
pub fn utilisation(before: &[(u32, CpuTimes)], after: &[(u32, CpuTimes)]) -> Vec<(u32, f64)> {
    after
        .iter()
        .filter_map(|(id, a)| {
            let (_, b) = before.iter().find(|(bid, _)| bid == id)?;
            let total = a.total.saturating_sub(b.total);
            let idle = a.idle.saturating_sub(b.idle);
            (total > 0).then(|| (*id, 100.0 * (total - idle.min(total)) as f64 / total as f64))
        })
        .collect()
}

/// Per-cpu counts of the rows of `/proc/interrupts` or `/proc/softirqs` whose name
/// `keep` accepts, summed: `(cpu id, count)` in the header's order.
///
/// Both files open with a header of `CPU<N>` columns (online cpus only); each row is
/// `NAME:` and one count per column, then (for interrupts) a description. Rows with
/// fewer counts than columns (`ERR:`, `MIS:`: one total) are skipped.
pub fn parse_per_cpu_counts(text: &str, keep: impl Fn(&str) -> bool) -> Vec<(u32, u64)> {
    let mut lines = text.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let ids: Vec<u32> = header
        .split_whitespace()
        .filter_map(|c| c.strip_prefix("CPU")?.parse().ok())
        .collect();
    let mut sums = vec![0u64; ids.len()];
    for line in lines {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        if !keep(name.trim()) {
            continue;
        }
        let counts: Vec<u64> = rest
            .split_whitespace()
            .take(ids.len())
            .map_while(|f| f.parse().ok())
            .collect();
        if counts.len() != ids.len() {
            continue;
        }
        for (sum, n) in sums.iter_mut().zip(counts) {
            *sum = sum.saturating_add(n);
        }
    }
    ids.into_iter().zip(sums).collect()
}

/// Per-cpu increase from `before` to `after` (cpus matched by id).
fn increase(before: &[(u32, u64)], after: &[(u32, u64)]) -> Vec<(u32, u64)> {
    after
        .iter()
        .filter_map(|(id, a)| {
            let (_, b) = before.iter().find(|(bid, _)| bid == id)?;
            Some((*id, a.saturating_sub(*b)))
        })
        .collect()
}

/// Interrupts each cpu served: one reading of both files, or the increase over a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interrupts {
    /// Hardware interrupts, every row of `/proc/interrupts`.
    pub irqs: Vec<(u32, u64)>,
    /// Software interrupts, every row of `/proc/softirqs`.
    pub softirqs: Vec<(u32, u64)>,
    /// Network software interrupts, the `NET_RX` and `NET_TX` rows.
    pub softirqs_net: Vec<(u32, u64)>,
}

impl Interrupts {
    /// Reads `proc_root/interrupts` and `proc_root/softirqs`; a file that cannot be
    /// read gives no counts.
    pub fn read(proc_root: &Path) -> Interrupts {
        // In one or two reads (`read_to_string` probes a /proc file with 32 bytes and
        // grows: /proc/interrupts took eight reads, each run twice).
        let text =
            |name| isolab_cgroups::read_pseudo_file(&proc_root.join(name)).unwrap_or_default();
        let softirqs = text("softirqs");
        Interrupts {
            irqs: parse_per_cpu_counts(&text("interrupts"), |_| true),
            softirqs: parse_per_cpu_counts(&softirqs, |_| true),
            softirqs_net: parse_per_cpu_counts(&softirqs, |n| n == "NET_RX" || n == "NET_TX"),
        }
    }

    /// The increase from `before` to `self`.
    pub fn since(&self, before: &Interrupts) -> Interrupts {
        Interrupts {
            irqs: increase(&before.irqs, &self.irqs),
            softirqs: increase(&before.softirqs, &self.softirqs),
            softirqs_net: increase(&before.softirqs_net, &self.softirqs_net),
        }
    }
}

/// Per-core utilisation of the host over a run.
#[derive(Debug, Clone, Default)]
pub struct HostCpu {
    /// One series per cpu, `cpuN_util` in percent, time in seconds since the start.
    pub series: Vec<Series>,
    /// Mean utilisation per cpu over the whole run (from the first and last reading).
    pub mean: Vec<(u32, f64)>,
    /// Interrupts each cpu served during the run.
    pub interrupts: Interrupts,
}

/// Samples `/proc/stat` on a thread until stopped.
pub struct CpuSampler {
    stop: Arc<(Mutex<bool>, Condvar)>,
    /// The sampling job on a thread of [`crate::reused`]; `None` when no thread could
    /// be started (the run then has no host telemetry).
    handle: Option<crate::reused::Handle<HostCpu>>,
}

impl CpuSampler {
    /// Starts sampling `proc_root/stat` every `interval`, on a helper thread that
    /// outlives the run ([`crate::reused`]).
    pub fn start(proc_root: &Path, interval: Duration) -> CpuSampler {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let root: PathBuf = proc_root.to_path_buf();
        let stop2 = Arc::clone(&stop);
        let handle =
            crate::reused::spawn(c"isolab-sampler", move || sample(&root, interval, &stop2)).ok();
        CpuSampler { stop, handle }
    }

    /// Stops sampling (at once, without waiting for the next tick) and returns what was seen.
    pub fn finish(self) -> HostCpu {
        self.stop().join()
    }

    /// Tells the sampler to take its last reading now, without waiting for it: the
    /// caller reads its own counters meanwhile, and [`Stopping::join`] collects.
    pub fn stop(self) -> Stopping {
        let (lock, cvar) = &*self.stop;
        if let Ok(mut stopped) = lock.lock() {
            *stopped = true;
        }
        cvar.notify_all();
        Stopping {
            handle: self.handle,
        }
    }
}

/// A sampler told to stop ([`CpuSampler::stop`]), taking its last reading.
pub struct Stopping {
    handle: Option<crate::reused::Handle<HostCpu>>,
}

impl Stopping {
    /// Waits for the last reading and returns what was seen.
    pub fn join(self) -> HostCpu {
        self.handle.and_then(|h| h.join().ok()).unwrap_or_default()
    }
}

/// Each cpu's times now, from `proc_root/stat` (none when it cannot be read).
pub fn cpu_times(proc_root: &Path) -> Vec<(u32, CpuTimes)> {
    read(&proc_root.join("stat"))
}

fn read(path: &Path) -> Vec<(u32, CpuTimes)> {
    isolab_cgroups::read_pseudo_file(path)
        .map(|t| parse_proc_stat(&t))
        .unwrap_or_default()
}

fn sample(proc_root: &Path, interval: Duration, stop: &(Mutex<bool>, Condvar)) -> HostCpu {
    let path = &proc_root.join("stat");
    let start = Instant::now();
    let interrupts_before = Interrupts::read(proc_root);
    let first = read(path);
    let mut prev = first.clone();
    let mut series: Vec<Series> = first
        .iter()
        .map(|(id, _)| Series {
            name: format!("cpu{id}_util"),
            unit: "%".into(),
            points: Vec::new(),
        })
        .collect();
    let (lock, cvar) = stop;
    let Ok(mut stopped) = lock.lock() else {
        return HostCpu::default();
    };
    loop {
        let (guard, _) = match cvar.wait_timeout(stopped, interval) {
            Ok(r) => r,
            Err(_) => return HostCpu::default(),
        };
        stopped = guard;
        let now = read(path);
        let t = start.elapsed().as_secs_f64();
        if !*stopped {
            for (id, u) in utilisation(&prev, &now) {
                if let Some(s) = series
                    .iter_mut()
                    .find(|s| s.name == format!("cpu{id}_util"))
                {
                    s.points.push((t, u));
                }
            }
        }
        prev = now;
        if *stopped {
            break;
        }
    }
    HostCpu {
        series,
        mean: utilisation(&first, &prev),
        interrupts: Interrupts::read(proc_root).since(&interrupts_before),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT_A: &str = "cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 5 0 5 40 0 0 0 0 0 0\ncpu1 5 0 5 40 0 0 0 0 0 0\nintr 1\n";
    const STAT_B: &str = "cpu  60 0 10 130 0 0 0 0 0 0\ncpu0 55 0 5 40 0 0 0 0 0 0\ncpu1 5 0 5 90 0 0 0 0 0 0\nintr 1\n";

    #[test]
    fn parses_per_cpu_lines_only() {
        let v = parse_proc_stat(STAT_A);
        assert_eq!(v.len(), 2);
        assert_eq!(
            v[0],
            (
                0,
                CpuTimes {
                    total: 50,
                    idle: 40
                }
            )
        );
    }

    #[test]
    fn computes_busy_share_per_cpu() {
        let u = utilisation(&parse_proc_stat(STAT_A), &parse_proc_stat(STAT_B));
        assert_eq!(u, vec![(0, 100.0), (1, 0.0)]);
    }

    #[test]
    fn samples_a_fake_proc_tree_at_the_interval() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("stat"), STAT_A).unwrap();
        let sampler = CpuSampler::start(dir.path(), Duration::from_millis(10));
        std::thread::sleep(Duration::from_millis(30));
        std::fs::write(dir.path().join("stat"), STAT_B).unwrap();
        std::thread::sleep(Duration::from_millis(60));
        let cpu = sampler.finish();
        assert_eq!(cpu.series.len(), 2);
        // The fake file changes once; samples without a change carry no utilisation.
        assert!(
            !cpu.series[0].points.is_empty(),
            "{:?}",
            cpu.series[0].points
        );
        assert!(cpu.series[0].points.iter().all(|&(_, u)| u == 100.0));
        assert_eq!(cpu.mean, vec![(0, 100.0), (1, 0.0)]);
        // No interrupt files in this fake tree: no counts, not zeros.
        assert_eq!(cpu.interrupts, Interrupts::default());
    }

    const INTERRUPTS: &str = "           CPU0       CPU2       \n  \
 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n \
LOC:       1000       2000   Local timer interrupts\n \
ERR:          3\n";
    const SOFTIRQS: &str = "                    CPU0       CPU2       \n          \
HI:          0          0\n       \
TIMER:        10         20\n      \
NET_TX:        1          2\n      \
NET_RX:      100        200\n";

    #[test]
    fn interrupt_rows_are_summed_per_cpu_by_the_header_s_ids() {
        assert_eq!(
            parse_per_cpu_counts(INTERRUPTS, |_| true),
            vec![(0, 1001), (2, 2000)]
        );
        assert_eq!(
            parse_per_cpu_counts(SOFTIRQS, |n| n.starts_with("NET_")),
            vec![(0, 101), (2, 202)]
        );
        assert_eq!(parse_per_cpu_counts("", |_| true), vec![]);
    }

    #[test]
    fn interrupts_over_a_run_are_the_increase_of_each_cpu() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("interrupts"), INTERRUPTS).unwrap();
        std::fs::write(dir.path().join("softirqs"), SOFTIRQS).unwrap();
        let before = Interrupts::read(dir.path());
        std::fs::write(
            dir.path().join("softirqs"),
            SOFTIRQS.replace("NET_RX:      100", "NET_RX:      150"),
        )
        .unwrap();
        let during = Interrupts::read(dir.path()).since(&before);
        assert_eq!(during.irqs, vec![(0, 0), (2, 0)]);
        assert_eq!(during.softirqs, vec![(0, 50), (2, 0)]);
        assert_eq!(during.softirqs_net, vec![(0, 50), (2, 0)]);
    }
}
