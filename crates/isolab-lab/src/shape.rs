//! Shapes (instance sizes) and placements (how CPUs are granted).

use std::fmt;
use std::time::Duration;

use isolab_cgroups::{Bytes, CpuQuota, IdSet, Limits};

use crate::topology::Topology;

/// An instance size: cpus and optional memory, pids and disk limits.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(into = "ShapeFields")]
pub struct Shape {
    /// Name used in the matrix (`large`, `xlarge`, or a `[shape.NAME]` of the spec).
    pub name: String,
    /// The cpus asked for, in thousandths of a cpu (`cpus = 1.5` or `"1500m"` is
    /// 1500): a quota grants exactly this share of each period.
    pub millicpus: u32,
    /// The CFS period of a quota (`cpu_period`, the kernel's default
    /// [`QUOTA_PERIOD`] unless the shape sets one): throttling depends on it.
    pub cpu_period: Duration,
    /// memory limit.
    pub memory: Option<Bytes>,
    /// pids limit.
    pub pids: Option<u64>,
    /// Read throttle on the device backing the workload's working directory, bytes/s.
    pub io_read_bps: Option<u64>,
    /// Write throttle on that device, bytes/s.
    pub io_write_bps: Option<u64>,
}

/// A shape as its JSON shows it: its fields, with the whole [`Shape::cpus`] beside
/// the millicpus it is computed from.
#[derive(serde::Serialize)]
struct ShapeFields {
    name: String,
    cpus: u32,
    millicpus: u32,
    cpu_period: Duration,
    memory: Option<Bytes>,
    pids: Option<u64>,
    io_read_bps: Option<u64>,
    io_write_bps: Option<u64>,
}

impl From<Shape> for ShapeFields {
    fn from(s: Shape) -> ShapeFields {
        ShapeFields {
            cpus: s.cpus(),
            name: s.name,
            millicpus: s.millicpus,
            cpu_period: s.cpu_period,
            memory: s.memory,
            pids: s.pids,
            io_read_bps: s.io_read_bps,
            io_write_bps: s.io_write_bps,
        }
    }
}

const GIB: u64 = 1 << 30;

impl Shape {
    /// A shape of `cpus` whole cpus over the default period, with no other limit.
    pub fn whole(name: &str, cpus: u32) -> Shape {
        Shape {
            name: name.to_owned(),
            millicpus: cpus * 1000,
            cpu_period: QUOTA_PERIOD,
            memory: None,
            pids: None,
            io_read_bps: None,
            io_write_bps: None,
        }
    }

    /// Whole cpus: the cpus asked for ([`Shape::millicpus`]) rounded up. A pinned
    /// instance's cpuset has this many, and `{cpus}` (and `{threads}` without a
    /// `threads` level) is this number, so that a 1.5-cpu shape runs 2 threads that
    /// can use its whole quota.
    pub fn cpus(&self) -> u32 {
        self.millicpus.div_ceil(1000)
    }

    /// The cpus asked for, e.g. 1.5.
    pub fn cpu_count(&self) -> f64 {
        f64::from(self.millicpus) / 1000.0
    }

    /// Whether it asks for part of a cpu (0.5, 1.5), which no cpuset can grant.
    pub fn is_fractional(&self) -> bool {
        self.millicpus % 1000 != 0
    }

    /// Its quota: [`Shape::millicpus`] thousandths of [`Shape::cpu_period`], in
    /// whole microseconds (the kernel's unit).
    pub fn quota(&self) -> CpuQuota {
        let period = self.cpu_period.as_micros() as u64;
        CpuQuota {
            quota: Duration::from_micros(period * u64::from(self.millicpus) / 1000),
            period: self.cpu_period,
        }
    }
}

/// Parses a cpu count as specs write it: a number of cpus (`2`, `0.5`, `1.5`) or
/// Kubernetes' millicpus (`"500m"`), into thousandths of a cpu.
pub fn parse_millicpus(text: &str) -> Result<u32, String> {
    let text = text.trim();
    let bad = || {
        format!("`{text}` is not a cpu count: expected a number of cpus such as 2, 0.5 or 1.5, or millicpus such as \"1500m\"")
    };
    let milli = if let Some(m) = text.strip_suffix('m') {
        m.parse::<u64>().map_err(|_| bad())?
    } else {
        let cpus: f64 = text.parse().map_err(|_| bad())?;
        if !cpus.is_finite() || cpus < 0.0 {
            return Err(bad());
        }
        let milli = (cpus * 1000.0).round();
        if (milli - cpus * 1000.0).abs() > 1e-6 {
            return Err(format!(
                "`{text}` cpus is finer than a thousandth of a cpu, the finest share a quota grants"
            ));
        }
        milli as u64
    };
    match u32::try_from(milli) {
        Ok(m) if m >= 1 => Ok(m),
        Ok(_) => Err(format!(
            "`{text}` asks for no cpu: a shape needs at least 1m (a thousandth of a cpu)"
        )),
        Err(_) => Err(bad()),
    }
}

/// The built-in shapes: seed 002's instance types (large = 2 cpus and 8 GiB up to
/// 16xlarge = 64 cpus and 256 GiB) plus `medium` (1 cpu, 4 GiB), which isolab adds
/// so that small hosts have a pinned size to compare, and `full` (every cpu of this
/// host, no limits).
pub fn builtin_shapes(host_cpus: u32) -> Vec<Shape> {
    let mut shapes = vec![Shape::whole("full", host_cpus.max(1))];
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
        memory: Some(Bytes(gib * GIB)),
        ..Shape::whole(name, cpus)
    }));
    shapes
}

/// How CPUs are granted to an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// No cpu limit: the instance may use every cpu of the host.
    Shared,
    /// CFS bandwidth: `cpus × cpu_period` of cpu time per period, on any cpu ("vanilla").
    Quota,
    /// A cpuset of exactly `cpus` cpus, packed by the host's topology: whole cores
    /// first (SMT siblings together), on one NUMA node (and its memory) when they fit.
    Pinned,
    /// A cpuset of exactly `cpus` cpus spread over the host's sockets, NUMA nodes and
    /// cores: one thread per core while there are free cores.
    #[serde(rename = "pinned-spread")]
    PinnedSpread,
}

impl Placement {
    /// Every placement, in the order used in help texts.
    pub const ALL: [Placement; 4] = [
        Placement::Shared,
        Placement::Quota,
        Placement::Pinned,
        Placement::PinnedSpread,
    ];

    /// Its word in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::Shared => "shared",
            Placement::Quota => "quota",
            Placement::Pinned => "pinned",
            Placement::PinnedSpread => "pinned-spread",
        }
    }

    /// Whether it grants a cpuset (`pinned`, `pinned-spread`).
    pub fn pins(self) -> bool {
        matches!(self, Placement::Pinned | Placement::PinnedSpread)
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

/// The kinds of limit a shape in a placement asks of a platform.
pub fn limit_kinds(shape: &Shape, placement: Placement) -> isolab_engines::LimitKinds {
    isolab_engines::LimitKinds {
        cpu_quota: placement == Placement::Quota,
        cpuset: placement.pins(),
        memory: shape.memory.is_some(),
        pids: shape.pids.is_some(),
        io: shape.io_read_bps.is_some() || shape.io_write_bps.is_some(),
    }
}

/// The cgroup limits for a shape in a placement, given the cpus this host offers
/// and its `topology` (which cpus a pinned placement takes, and on a host of several
/// NUMA nodes their memory nodes). `io_device` is the block device behind the
/// working directory, when known.
pub fn limits_for(
    shape: &Shape,
    placement: Placement,
    available: &IdSet,
    topology: &Topology,
    io_device: Option<isolab_cgroups::DeviceNumber>,
) -> Option<Limits> {
    let mut limits = Limits {
        memory_max: shape.memory,
        pids_max: shape.pids,
        ..Limits::default()
    };
    match placement {
        Placement::Shared => {}
        Placement::Quota => limits.cpu = Some(shape.quota()),
        Placement::Pinned | Placement::PinnedSpread => {
            let spread = placement == Placement::PinnedSpread;
            let cpus = topology.pick(available, shape.cpus(), spread)?;
            if topology.node_count() > 1 {
                limits.mems = Some(topology.nodes_of(&cpus));
            }
            limits.cpuset = Some(cpus);
        }
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

/// `15ms`, or `0.5ms` for a duration that is not whole milliseconds.
fn millis(d: Duration) -> String {
    let us = d.as_micros();
    if us % 1000 == 0 {
        format!("{}ms", us / 1000)
    } else {
        format!("{}ms", us as f64 / 1000.0)
    }
}

/// One line saying what limits an instance has, e.g.
/// `quota 1.00 cpu (100ms/100ms), cpus 0-1, memory 4 GiB`.
pub fn describe_limits(l: &Limits) -> String {
    let mut parts = Vec::new();
    match &l.cpu {
        Some(q) => parts.push(format!(
            "quota {:.2} cpu ({}/{})",
            q.quota.as_secs_f64() / q.period.as_secs_f64(),
            millis(q.quota),
            millis(q.period)
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
        // A direction limited in bytes and in operations shows both.
        let rate = |bps: Option<u64>, iops: Option<u64>| {
            let parts: Vec<String> = [
                bps.map(|b| format!("{}/s", Bytes(b))),
                iops.map(|n| format!("{n} IOPS")),
            ]
            .into_iter()
            .flatten()
            .collect();
            if parts.is_empty() {
                "-".to_owned()
            } else {
                parts.join(" ")
            }
        };
        parts.push(format!(
            "io {} r {} w {}",
            t.device,
            rate(t.read_bps, t.read_iops),
            rate(t.write_bps, t.write_iops)
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

    /// The limits of `shape` in `placement` on a flat host of cpus 0-1.
    fn two_cpus(shape: &Shape, placement: Placement) -> Limits {
        limits_for(
            shape,
            placement,
            &set("0-1"),
            &Topology::flat(&set("0-1")),
            None,
        )
        .unwrap()
    }

    #[test]
    fn pins_the_highest_cpus_of_a_flat_host() {
        let pin = |available: &str, cpus| {
            let available = set(available);
            let flat = Topology::flat(&available);
            let shape = Shape::whole("s", cpus);
            limits_for(&shape, Placement::Pinned, &available, &flat, None)
                .map(|l| l.cpuset.unwrap())
        };
        assert_eq!(pin("0-3", 2), Some(set("2-3")));
        assert_eq!(pin("0,2,5", 1), Some(set("5")));
        assert_eq!(pin("0-1", 4), None);
    }

    #[test]
    fn fractional_cpus_and_short_periods_make_exact_quotas() {
        let cases = [
            ("0.5", 100, Duration::from_millis(50)),
            ("1.5", 100, Duration::from_millis(150)),
            ("500m", 10, Duration::from_millis(5)),
            ("1.5", 10, Duration::from_millis(15)),
            ("0.333", 100, Duration::from_micros(33_300)),
        ];
        for (cpus, period_ms, quota) in cases {
            let millicpus = parse_millicpus(cpus).unwrap();
            let shape = Shape {
                millicpus,
                cpu_period: Duration::from_millis(period_ms),
                ..Shape::whole("s", millicpus.div_ceil(1000))
            };
            let l = two_cpus(&shape, Placement::Quota);
            let q = l.cpu.unwrap();
            assert_eq!(
                (q.quota, q.period),
                (quota, Duration::from_millis(period_ms)),
                "{cpus}"
            );
        }
        assert_eq!(parse_millicpus("1500m"), Ok(1500));
        assert_eq!(
            Shape {
                millicpus: 1500,
                ..Shape::whole("s", 2)
            }
            .cpu_count(),
            1.5
        );
        assert!(parse_millicpus("0").unwrap_err().contains("no cpu"));
        assert!(parse_millicpus("0.0005")
            .unwrap_err()
            .contains("thousandth"));
        assert!(parse_millicpus("lots").unwrap_err().contains("1500m"));
    }

    #[test]
    fn quota_is_cpus_times_period() {
        let shape = &builtin_shapes(2)[2]; // large
        assert_eq!(shape.name, "large");
        let l = two_cpus(shape, Placement::Quota);
        let q = l.cpu.unwrap();
        assert_eq!(q.quota, Duration::from_millis(200));
        assert_eq!(q.period, QUOTA_PERIOD);
        assert_eq!(l.cpuset, None);
        assert_eq!(l.memory_max, Some(Bytes(8 << 30)));
    }

    #[test]
    fn describes_limits_in_one_line() {
        let shape = &builtin_shapes(2)[1];
        let mut l = two_cpus(shape, Placement::Quota);
        l.cpuset = Some(set("0-1"));
        assert_eq!(
            describe_limits(&l),
            "quota 1.00 cpu (100ms/100ms), cpus 0-1, memory 4 GiB"
        );
        // The `io` reservation throttles neighbours in operations, a shape in bytes.
        l.io = vec![isolab_cgroups::IoThrottle {
            device: isolab_cgroups::DeviceNumber {
                major: 254,
                minor: 0,
            },
            read_bps: Some(1 << 20),
            write_bps: None,
            read_iops: Some(500),
            write_iops: Some(500),
        }];
        assert!(
            describe_limits(&l).ends_with(", io 254:0 r 1 MiB/s 500 IOPS w 500 IOPS"),
            "{}",
            describe_limits(&l)
        );
    }

    #[test]
    fn shared_sets_no_cpu_limit() {
        let shape = &builtin_shapes(2)[1];
        let l = two_cpus(shape, Placement::Shared);
        assert_eq!(l.cpu, None);
        assert_eq!(l.cpuset, None);
    }
}
