//! Verification: the utilisation a run achieved, from its telemetry, against its
//! target.

use super::plan::Capacity;

/// Largest distance, in percentage points, between a run's achieved utilisation and
/// its target before the run is flagged.
pub const OFF_TARGET_POINTS: f64 = 5.0;

/// What telemetry saw of the contended resource during a run (subject and
/// neighbours together).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Observed<'a> {
    /// Busy percentage of each cpu of the host (the sampler's per-core means).
    HostCpu(&'a [f64]),
    /// Disk operations per second, reads and writes together.
    DiskIops(f64),
    /// Network throughput in Gbit/s.
    NetGbps(f64),
}

/// The utilisation achieved, in percent of the resource's capacity: the mean busy
/// share of the cpus, or the observed IOPS / throughput over the measured capacity.
/// `None` without samples or without a measured capacity.
pub fn achieved(observed: Observed<'_>, capacity: &Capacity) -> Option<f64> {
    let share = |value: f64, cap: Option<f64>| {
        cap.filter(|c| c.is_finite() && *c > 0.0)
            .map(|c| 100.0 * value / c)
    };
    let pct = match observed {
        Observed::HostCpu([]) => return None,
        Observed::HostCpu(cores) => cores.iter().sum::<f64>() / cores.len() as f64,
        Observed::DiskIops(iops) => share(iops, capacity.disk_iops)?,
        Observed::NetGbps(gbps) => share(gbps, capacity.net_gbps)?,
    };
    pct.is_finite().then_some(pct)
}

/// Whether `achieved` is more than [`OFF_TARGET_POINTS`] percentage points from
/// `target` (both in percent). A NaN is off target.
pub fn off_target(target: f64, achieved: f64) -> bool {
    let distance = (target - achieved).abs();
    distance.is_nan() || distance > OFF_TARGET_POINTS
}

/// The kernel's name of a whole disk (`vda` for 254:0), from /sys/dev/block: what
/// [`disk_ios`] reads it by.
pub fn disk_name(device: isolab_cgroups::DeviceNumber) -> Option<String> {
    let uevent = std::fs::read_to_string(format!("/sys/dev/block/{device}/uevent")).ok()?;
    uevent
        .lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .map(str::to_owned)
}

/// Operations (reads + writes) completed so far on disk `device` (`vda`), from
/// `<proc_root>/diskstats`.
pub fn disk_ios(proc_root: &std::path::Path, device: &str) -> Option<u64> {
    let table = std::fs::read_to_string(proc_root.join("diskstats")).ok()?;
    diskstats_ios(&table, device)
}

/// Completed operations (reads + writes) of block device `device` (e.g. `vda`) in a
/// `/proc/diskstats` table; two readings a second apart give its IOPS.
pub fn diskstats_ios(table: &str, device: &str) -> Option<u64> {
    table.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        // major minor name reads_completed reads_merged sectors_read ms_reading
        // writes_completed …
        if f.len() < 8 || f[2] != device {
            return None;
        }
        let reads: u64 = f[3].parse().ok()?;
        let writes: u64 = f[7].parse().ok()?;
        Some(reads + writes)
    })
}

/// Bytes received so far by each network interface of the reader's namespace,
/// from `<proc_root>/net/dev`.
pub fn net_rx(proc_root: &std::path::Path) -> Vec<(String, u64)> {
    std::fs::read_to_string(proc_root.join("net/dev"))
        .map(|t| net_dev_rx(&t))
        .unwrap_or_default()
}

/// `(interface, received bytes)` of each line of a `/proc/net/dev` table.
pub fn net_dev_rx(table: &str) -> Vec<(String, u64)> {
    table
        .lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let bytes = rest.split_whitespace().next()?.parse().ok()?;
            Some((name.trim().to_owned(), bytes))
        })
        .collect()
}

/// The most bytes any one interface received between two [`net_rx`] readings: the
/// traffic of the busiest path (a stream over a bridge shows on the bridge and on
/// the veth, so interfaces are not summed).
pub fn busiest_rx(before: &[(String, u64)], after: &[(String, u64)]) -> u64 {
    after
        .iter()
        .filter_map(|(name, a)| {
            let b = before.iter().find(|(n, _)| n == name)?.1;
            Some(a.saturating_sub(b))
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busiest_interface_counts_once() {
        let t0 = "Inter-|   Receive\n face |bytes    packets\n    lo: 1000 10 0 0 0 0 0 0 1000 10 0 0 0 0 0 0\nisolab0: 500 5 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
        let t1 = "Inter-|   Receive\n face |bytes    packets\n    lo: 1500 10 0 0 0 0 0 0 1000 10 0 0 0 0 0 0\nisolab0: 9500 5 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n  veth9: 100 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
        let (b, a) = (net_dev_rx(t0), net_dev_rx(t1));
        assert_eq!(b, vec![("lo".into(), 1000), ("isolab0".into(), 500)]);
        assert_eq!(busiest_rx(&b, &a), 9000, "a new interface has no baseline");
        assert_eq!(busiest_rx(&[], &a), 0);
    }

    #[test]
    fn cpu_achievement_is_the_mean_of_the_cores() {
        let cap = Capacity::default();
        assert_eq!(
            achieved(Observed::HostCpu(&[100.0, 80.0]), &cap),
            Some(90.0)
        );
        assert_eq!(achieved(Observed::HostCpu(&[]), &cap), None);
    }

    #[test]
    fn disk_and_network_need_their_capacity() {
        let cap = Capacity {
            disk_iops: Some(20_000.0),
            net_gbps: Some(10.0),
            ..Capacity::default()
        };
        assert_eq!(achieved(Observed::DiskIops(18_000.0), &cap), Some(90.0));
        assert_eq!(achieved(Observed::NetGbps(5.0), &cap), Some(50.0));
        assert_eq!(
            achieved(Observed::DiskIops(1.0), &Capacity::default()),
            None
        );
        let zero = Capacity {
            net_gbps: Some(0.0),
            ..Capacity::default()
        };
        assert_eq!(achieved(Observed::NetGbps(1.0), &zero), None);
    }

    #[test]
    fn flags_runs_more_than_five_points_off() {
        assert!(!off_target(90.0, 90.0));
        assert!(!off_target(90.0, 85.0));
        assert!(!off_target(90.0, 95.0));
        assert!(off_target(90.0, 84.9));
        assert!(off_target(90.0, 95.1));
        assert!(off_target(100.0, 80.0));
        assert!(off_target(90.0, f64::NAN));
    }

    #[test]
    fn reads_diskstats() {
        let t = " 254       0 vda 1000 0 8000 10 500 0 4000 5 0 20 15 0 0 0 0\n 254       1 vda1 900 0 7000 9 400 0 3000 4 0 18 13 0 0 0 0\n";
        assert_eq!(diskstats_ios(t, "vda"), Some(1500));
        assert_eq!(diskstats_ios(t, "vda1"), Some(1300));
        assert_eq!(diskstats_ios(t, "sda"), None);
    }
}
