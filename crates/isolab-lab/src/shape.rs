//! Shapes (instance sizes) and placements (how CPUs are granted).

use std::fmt;
use std::time::Duration;

use isolab_cgroups::{Bytes, CpuQuota, IdSet, Limits};

/// An instance size: cpus and optional memory, pids and disk limits.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Shape {
    /// Name used in the matrix (`large`, `xlarge`, or a `[shape.NAME]` of the spec).
    pub name: String,
    /// Number of cpus granted (by quota or cpuset, per placement) and `{cpus}` in templates.
    pub cpus: u32,
    /// memory limit.
    pub memory: Option<Bytes>,
    /// pids limit.
    pub pids: Option<u64>,
    /// Read throttle on the device backing the workload's working directory, bytes/s.
    pub io_read_bps: Option<u64>,
    /// Write throttle on that device, bytes/s.
    pub io_write_bps: Option<u64>,
}

const GIB: u64 = 1 << 30;

/// The built-in shapes: seed 002's instance types (large = 2 cpus and 8 GiB up to
/// 16xlarge = 64 cpus and 256 GiB) plus `medium` (1 cpu, 4 GiB), which isolab adds
/// so that small hosts have a pinned size to compare, and `full` (every cpu of this
/// host, no limits).
pub fn builtin_shapes(host_cpus: u32) -> Vec<Shape> {
    let mut shapes = vec![Shape {
        name: "full".into(),
        cpus: host_cpus.max(1),
        memory: None,
        pids: None,
        io_read_bps: None,
        io_write_bps: None,
    }];
    let sized = [
        ("medium", 1, 4),
        ("large", 2, 8),
        ("xlarge", 4, 16),
        ("2xlarge", 8, 32),
        ("4xlarge", 16, 64),
        ("8xlarge", 32, 128),
        ("16xlarge", 64, 256),
    ];
    shapes.extend(sized.iter().map(|&(name, cpus, gib)| Shape {
        name: name.into(),
        cpus,
        memory: Some(Bytes(gib * GIB)),
        pids: None,
        io_read_bps: None,
        io_write_bps: None,
    }));
    shapes
}

/// How CPUs are granted to an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// No cpu limit: the instance may use every cpu of the host.
    Shared,
    /// CFS bandwidth: `cpus × period` of cpu time per period, on any cpu ("vanilla").
    Quota,
    /// A cpuset of exactly `cpus` cpus.
    Pinned,
}

impl Placement {
    /// Every placement, in the order used in help texts.
    pub const ALL: [Placement; 3] = [Placement::Shared, Placement::Quota, Placement::Pinned];

    /// Its word in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::Shared => "shared",
            Placement::Quota => "quota",
            Placement::Pinned => "pinned",
        }
    }

    /// Parses a placement word.
    pub fn parse(s: &str) -> Option<Placement> {
        Placement::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The CFS period isolab uses for quotas (the kernel's default).
pub const QUOTA_PERIOD: Duration = Duration::from_millis(100);

/// The cpus a pinned instance of `count` cpus gets out of `available`: the
/// highest-numbered ones, so that cpu 0, which usually serves most interrupts and
/// housekeeping, is the last to be taken. `None` when there are not enough.
pub fn pinned_cpus(available: &IdSet, count: u32) -> Option<IdSet> {
    let count = count as usize;
    if available.len() < count {
        return None;
    }
    let ids: Vec<u32> = available.iter().copied().collect();
    Some(ids[ids.len() - count..].iter().copied().collect())
}

/// The kinds of limit a shape in a placement asks of a platform.
pub fn limit_kinds(shape: &Shape, placement: Placement) -> isolab_engines::LimitKinds {
    isolab_engines::LimitKinds {
        cpu_quota: placement == Placement::Quota,
        cpuset: placement == Placement::Pinned,
        memory: shape.memory.is_some(),
        pids: shape.pids.is_some(),
        io: shape.io_read_bps.is_some() || shape.io_write_bps.is_some(),
    }
}

/// The cgroup limits for a shape in a placement, given the cpus this host offers.
/// `io_device` is the block device behind the working directory, when known.
pub fn limits_for(
    shape: &Shape,
    placement: Placement,
    available: &IdSet,
    io_device: Option<isolab_cgroups::DeviceNumber>,
) -> Option<Limits> {
    let mut limits = Limits {
        memory_max: shape.memory,
        pids_max: shape.pids,
        ..Limits::default()
    };
    match placement {
        Placement::Shared => {}
        Placement::Quota => {
            limits.cpu = Some(CpuQuota {
                quota: QUOTA_PERIOD * shape.cpus,
                period: QUOTA_PERIOD,
            });
        }
        Placement::Pinned => limits.cpuset = Some(pinned_cpus(available, shape.cpus)?),
    }
    if let (Some(device), true) = (
        io_device,
        shape.io_read_bps.is_some() || shape.io_write_bps.is_some(),
    ) {
        limits.io.push(isolab_cgroups::IoThrottle {
            device,
            read_bps: shape.io_read_bps,
            write_bps: shape.io_write_bps,
            read_iops: None,
            write_iops: None,
        });
    }
    Some(limits)
}

/// One line saying what limits an instance has, e.g.
/// `quota 1.00 cpu (100ms/100ms), cpus 0-1, memory 4 GiB`.
pub fn describe_limits(l: &Limits) -> String {
    let mut parts = Vec::new();
    match &l.cpu {
        Some(q) => parts.push(format!(
            "quota {:.2} cpu ({}ms/{}ms)",
            q.quota.as_secs_f64() / q.period.as_secs_f64(),
            q.quota.as_millis(),
            q.period.as_millis()
        )),
        None => parts.push("no quota".to_owned()),
    }
    if let Some(c) = &l.cpuset {
        parts.push(format!("cpus {c}"));
    }
    if let Some(m) = l.memory_max {
        parts.push(format!("memory {m}"));
    }
    if let Some(p) = l.pids_max {
        parts.push(format!("pids {p}"));
    }
    for t in &l.io {
        let bps = |v: Option<u64>| v.map_or("-".to_owned(), |b| format!("{}/s", Bytes(b)));
        parts.push(format!(
            "io {} r {} w {}",
            t.device,
            bps(t.read_bps),
            bps(t.write_bps)
        ));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> IdSet {
        s.parse().unwrap()
    }

    #[test]
    fn pins_the_highest_cpus() {
        assert_eq!(pinned_cpus(&set("0-3"), 2), Some(set("2-3")));
        assert_eq!(pinned_cpus(&set("0,2,5"), 1), Some(set("5")));
        assert_eq!(pinned_cpus(&set("0-1"), 4), None);
    }

    #[test]
    fn quota_is_cpus_times_period() {
        let shape = &builtin_shapes(2)[2]; // large
        assert_eq!(shape.name, "large");
        let l = limits_for(shape, Placement::Quota, &set("0-1"), None).unwrap();
        let q = l.cpu.unwrap();
        assert_eq!(q.quota, Duration::from_millis(200));
        assert_eq!(q.period, QUOTA_PERIOD);
        assert_eq!(l.cpuset, None);
        assert_eq!(l.memory_max, Some(Bytes(8 << 30)));
    }

    #[test]
    fn describes_limits_in_one_line() {
        let shape = &builtin_shapes(2)[1];
        let mut l = limits_for(shape, Placement::Quota, &set("0-1"), None).unwrap();
        l.cpuset = Some(set("0-1"));
        assert_eq!(
            describe_limits(&l),
            "quota 1.00 cpu (100ms/100ms), cpus 0-1, memory 4 GiB"
        );
    }

    #[test]
    fn shared_sets_no_cpu_limit() {
        let shape = &builtin_shapes(2)[1];
        let l = limits_for(shape, Placement::Shared, &set("0-1"), None).unwrap();
        assert_eq!(l.cpu, None);
        assert_eq!(l.cpuset, None);
    }
}
